//! The `trace` namespace: Parity/OpenEthereum-style traces, as reth and erigon serve them.
//!
//! - `trace_callMany [[ [call, traceTypes], ... ], block]`: the calls run in order on top of the
//!   state after `block` (default `latest`; `pending` is served as `latest`), each seeing the
//!   state changes of those before it; nothing is stored.
//! - `trace_call [call, traceTypes, block, stateOverrides, blockOverrides]`: one such call, with
//!   state and block overrides applied first (reth's parameters).
//! - `trace_rawTransaction [data, traceTypes, block]`: a signed transaction on the state after
//!   `block`, in that block's EVM environment with every check on (reth's semantics).
//! - `trace_replayBlockTransactions [block, traceTypes]` and `trace_replayTransaction [hash,
//!   traceTypes]`: mined transactions run again as they ran in their block ([`replay`]); an
//!   unknown block is `null`, an unknown transaction -32001.
//! - `trace_block [block]` and `trace_transaction [hash]`: the call trees of mined transactions,
//!   each trace placed in the chain (block, transaction hash and position), and a block's
//!   rewards before the merge; `null` for what is not there. `trace_get [hash, [index]]`: one
//!   entry of `trace_transaction`'s list. `trace_filter [filter]`: the traces of up to
//!   [`MAX_FILTER_DISTANCE`] + 1 blocks whose from/to addresses match, paged by `after` and `count`.
//!
//! Each result holds the transaction's `output` and, as asked by its trace types, the call tree
//! (`trace`), the account changes against the state before it (`stateDiff`) and the executed
//! opcodes (`vmTrace`). The EVM settings of calls are those of reth's trace calls, described in
//! [`exec`].
//!
//! Limits ([`TraceLimits`]): calls per request, the request's total gas, a deadline (-32016),
//! a bound on the bytes of trace a request may record (an endless loop under the default gas
//! must not build gigabytes of vmTrace), and a bound on the tracing requests that run at once,
//! so that tracing cannot take every core from the rest of the node. Tracing runs on tokio's
//! blocking pool.

mod exec;
mod params;
mod replay;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{map::HashSet, Bytes, B256, U64},
    rpc::types::{
        state::StateOverride,
        trace::{
            filter::TraceFilter,
            parity::{
                LocalizedTransactionTrace, TraceResults, TraceResultsWithTransactionHash, TraceType,
            },
        },
        BlockOverrides, TransactionRequest,
    },
};
use exec::{Budget, Overrides};
use jsonrpsee::{core::async_trait, proc_macros::rpc, types::Extensions};
use simnode_api::{
    offload,
    raw_answer::{answer_value, Answer, RawAnswerSlot},
    BlockParam, ModuleContext, RpcError, RpcLimits, RpcResult, StoredBlock,
};
use tokio::sync::Semaphore;

pub use params::TraceCall;

/// What one `trace_callMany` request may use.
#[derive(Debug, Clone)]
pub struct TraceLimits {
    /// Most gas one call may have; also the default gas of a call (`--rpc.gascap`).
    pub gas_cap: u64,
    /// Most gas all calls of one request may use together.
    pub max_total_gas: u64,
    /// Most calls in one request.
    pub max_calls: usize,
    /// Most bytes of trace (call nodes, inputs and outputs, vmTrace steps and memory) one
    /// request may record.
    pub max_trace_bytes: usize,
    /// Deadline of one request, waiting for a tracing slot included.
    pub timeout: Duration,
    /// Tracing requests running at once; the rest wait (within their deadline).
    pub max_concurrent: usize,
}

impl TraceLimits {
    /// How many full-cap calls' worth of gas a request may use when nothing else is said.
    pub const DEFAULT_GAS_CALLS: u64 = 10;

    /// The limits from the node's RPC limits. The total gas of a request is not one of them
    /// yet: it is `DEFAULT_GAS_CALLS` times the gas cap.
    pub fn from_rpc(limits: &RpcLimits) -> Self {
        Self {
            gas_cap: limits.gas_cap,
            max_total_gas: limits.gas_cap.saturating_mul(Self::DEFAULT_GAS_CALLS),
            max_calls: limits.max_trace_calls,
            max_trace_bytes: limits.max_vm_trace_bytes,
            timeout: limits.evm_timeout,
            max_concurrent: limits.max_concurrent_traces.max(1),
        }
    }
}

#[rpc(server, namespace = "trace")]
pub trait TraceApi {
    /// Traces a sequence of calls on top of one block's state.
    #[method(name = "callMany")]
    async fn call_many(
        &self,
        calls: Vec<TraceCall>,
        block: Option<BlockParam>,
    ) -> Result<Vec<TraceResults>, RpcError>;

    /// Traces one call on top of one block's state, with state and block overrides.
    #[method(name = "call")]
    async fn call(
        &self,
        call: TransactionRequest,
        trace_types: HashSet<TraceType>,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<Box<BlockOverrides>>,
    ) -> Result<TraceResults, RpcError>;

    /// Traces a signed transaction on top of one block's state, as that block would run it.
    #[method(name = "rawTransaction")]
    async fn raw_transaction(
        &self,
        data: Bytes,
        trace_types: HashSet<TraceType>,
        block: Option<BlockParam>,
    ) -> Result<TraceResults, RpcError>;

    /// Traces every transaction of a mined block as it ran; `null` for an unknown block.
    #[method(name = "replayBlockTransactions", with_extensions)]
    async fn replay_block_transactions(
        &self,
        block: BlockParam,
        trace_types: HashSet<TraceType>,
    ) -> Result<Option<Answer<Vec<TraceResultsWithTransactionHash>>>, RpcError>;

    /// Traces one mined transaction as it ran in its block.
    #[method(name = "replayTransaction")]
    async fn replay_transaction(
        &self,
        hash: B256,
        trace_types: HashSet<TraceType>,
    ) -> Result<TraceResults, RpcError>;

    /// The call trees of a mined block's transactions (and its rewards before the merge);
    /// `null` for an unknown block.
    #[method(name = "block", with_extensions)]
    async fn block(
        &self,
        block: BlockParam,
    ) -> Result<Option<Answer<Vec<LocalizedTransactionTrace>>>, RpcError>;

    /// The call tree of one mined transaction; `null` when it is not mined.
    #[method(name = "transaction")]
    async fn transaction(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<LocalizedTransactionTrace>>, RpcError>;

    /// The traces of a block range (at most [`MAX_FILTER_DISTANCE`] + 1 blocks) whose addresses match
    /// the filter, after `after` of them, at most `count`.
    #[method(name = "filter", with_extensions)]
    async fn filter(
        &self,
        filter: TraceFilter,
    ) -> Result<Answer<Vec<LocalizedTransactionTrace>>, RpcError>;

    /// One trace of a mined transaction, by its place in `trace_transaction`'s list (one
    /// index, as OpenEthereum and reth take it); `null` when there is none.
    #[method(name = "get")]
    async fn get(
        &self,
        hash: B256,
        indices: Vec<U64>,
    ) -> Result<Option<LocalizedTransactionTrace>, RpcError>;
}

/// Most blocks one `trace_filter` request replays past its first (reth's default
/// `max_trace_filter_blocks`, which bounds `toBlock - fromBlock`: 101 blocks in all).
pub const MAX_FILTER_DISTANCE: u64 = 100;

/// The `trace` namespace: the module context, its limits and the tracing slots.
#[derive(Debug, Clone)]
pub struct Trace {
    ctx: ModuleContext,
    limits: Arc<TraceLimits>,
    slots: Arc<Semaphore>,
}

impl Trace {
    pub fn new(ctx: ModuleContext, limits: TraceLimits) -> Self {
        let slots = Arc::new(Semaphore::new(limits.max_concurrent.max(1)));
        Self {
            ctx,
            limits: Arc::new(limits),
            slots,
        }
    }

    fn timed_out(&self) -> RpcError {
        exec::timeout(&self.limits)
    }

    /// The canonical block `block` names, if there is one.
    fn stored_block(&self, block: &BlockParam) -> RpcResult<Option<Arc<StoredBlock>>> {
        match exec::resolve_block(&self.ctx, block)? {
            Some(number) => self.ctx.chain.block(number),
            None => Ok(None),
        }
    }

    /// Runs `work` (blocking, without side effects) within the request's deadline once a
    /// tracing slot is free: on the RPC thread up to the inline budget, then again from the
    /// start on the blocking pool.
    async fn traced<T, F>(&self, work: F) -> RpcResult<T>
    where
        T: Send + 'static,
        F: Fn(&ModuleContext, &TraceLimits, Instant) -> RpcResult<T> + Send + 'static,
    {
        let deadline = Instant::now() + self.limits.timeout;
        let slot = tokio::time::timeout_at(deadline.into(), self.slots.clone().acquire_owned())
            .await
            .map_err(|_| self.timed_out())?
            .map_err(RpcError::internal)?;
        let ctx = self.ctx.clone();
        let limits = self.limits.clone();
        let inline_budget = ctx.limits.evm_inline_budget;
        let _slot = slot;
        let run = move |stop_at| work(&ctx, &limits, stop_at);
        offload::inline_then_blocking(inline_budget, deadline, None, run).await
    }
}

#[async_trait]
impl TraceApiServer for Trace {
    async fn call_many(
        &self,
        calls: Vec<TraceCall>,
        block: Option<BlockParam>,
    ) -> Result<Vec<TraceResults>, RpcError> {
        if calls.len() > self.limits.max_calls {
            return Err(RpcError::LimitExceeded(format!(
                "too many calls: {} (at most {})",
                calls.len(),
                self.limits.max_calls
            )));
        }
        // reth's default: the calls follow what the pool would mine next.
        let block = block.unwrap_or(BlockParam::PENDING);
        self.traced(move |ctx, limits, stop_at| {
            let calls = calls.clone();
            exec::trace_call_many(ctx, limits, calls, block, Overrides::default(), stop_at)
        })
        .await
    }

    async fn call(
        &self,
        call: TransactionRequest,
        trace_types: HashSet<TraceType>,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<Box<BlockOverrides>>,
    ) -> Result<TraceResults, RpcError> {
        let block = block.unwrap_or(BlockParam::LATEST);
        let call = TraceCall {
            request: call,
            trace_types,
        };
        let overrides = Overrides {
            state: state_overrides,
            block: block_overrides,
        };
        let mut results = self
            .traced(move |ctx, limits, stop_at| {
                let calls = vec![call.clone()];
                exec::trace_call_many(ctx, limits, calls, block, overrides.clone(), stop_at)
            })
            .await?;
        results
            .pop()
            .ok_or_else(|| RpcError::internal("one call gave no result"))
    }

    async fn raw_transaction(
        &self,
        data: Bytes,
        trace_types: HashSet<TraceType>,
        block: Option<BlockParam>,
    ) -> Result<TraceResults, RpcError> {
        let block = block.unwrap_or(BlockParam::LATEST);
        self.traced(move |ctx, limits, stop_at| {
            exec::trace_raw(ctx, limits, &data, &trace_types, block, stop_at)
        })
        .await
    }

    async fn replay_block_transactions(
        &self,
        ext: &Extensions,
        block: BlockParam,
        trace_types: HashSet<TraceType>,
    ) -> Result<Option<Answer<Vec<TraceResultsWithTransactionHash>>>, RpcError> {
        let Some(block) = self.stored_block(&block)? else {
            return Ok(None);
        };
        let slot = RawAnswerSlot::of(ext);
        self.traced(move |ctx, limits, stop_at| {
            let mut budget = Budget::new(limits, stop_at);
            let traces = replay::trace_types(ctx, limits, &block, &trace_types, None, &mut budget)?;
            Ok(answer_value(slot.as_ref(), traces))
        })
        .await
        .map(Some)
    }

    async fn replay_transaction(
        &self,
        hash: B256,
        trace_types: HashSet<TraceType>,
    ) -> Result<TraceResults, RpcError> {
        let (block, index) = replay::locate(&self.ctx, &hash)?
            .ok_or_else(|| RpcError::ResourceNotFound("transaction not found".into()))?;
        let mut traced = self
            .traced(move |ctx, limits, stop_at| {
                let mut budget = Budget::new(limits, stop_at);
                replay::trace_types(ctx, limits, &block, &trace_types, Some(index), &mut budget)
            })
            .await?;
        traced
            .pop()
            .map(|traced| traced.full_trace)
            .ok_or_else(|| RpcError::internal("the transaction gave no trace"))
    }

    async fn block(
        &self,
        ext: &Extensions,
        block: BlockParam,
    ) -> Result<Option<Answer<Vec<LocalizedTransactionTrace>>>, RpcError> {
        let Some(block) = self.stored_block(&block)? else {
            return Ok(None);
        };
        let slot = RawAnswerSlot::of(ext);
        self.traced(move |ctx, limits, stop_at| {
            let mut budget = Budget::new(limits, stop_at);
            let traces = replay::localized(ctx, limits, &block, None, &mut budget)?;
            Ok(answer_value(slot.as_ref(), traces))
        })
        .await
        .map(Some)
    }

    async fn transaction(
        &self,
        hash: B256,
    ) -> Result<Option<Vec<LocalizedTransactionTrace>>, RpcError> {
        let Some((block, index)) = replay::locate(&self.ctx, &hash)? else {
            return Ok(None);
        };
        self.traced(move |ctx, limits, stop_at| {
            replay::localized(
                ctx,
                limits,
                &block,
                Some(index),
                &mut Budget::new(limits, stop_at),
            )
        })
        .await
        .map(Some)
    }

    async fn filter(
        &self,
        ext: &Extensions,
        filter: TraceFilter,
    ) -> Result<Answer<Vec<LocalizedTransactionTrace>>, RpcError> {
        let head = self.ctx.chain.head().latest;
        let from = filter.from_block.unwrap_or(0);
        let to = filter.to_block.unwrap_or(head);
        // reth's order: a block past the head is not found, before the range is judged.
        for end in [from, to] {
            if end > head {
                return Err(exec::block_not_found(end));
            }
        }
        if from > to {
            return Err(RpcError::invalid_params(format!(
                "fromBlock {from} is after toBlock {to}"
            )));
        }
        if to - from > MAX_FILTER_DISTANCE {
            return Err(RpcError::invalid_params(format!(
                "block range too large: {} blocks, at most {}",
                to - from + 1,
                MAX_FILTER_DISTANCE + 1
            )));
        }
        let after = usize::try_from(filter.after.unwrap_or(0)).unwrap_or(usize::MAX);
        let count = filter
            .count
            .map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
        let slot = RawAnswerSlot::of(ext);
        self.traced(move |ctx, limits, stop_at| {
            let matcher = filter.matcher();
            let mut budget = Budget::new(limits, stop_at);
            let mut matching = Vec::new();
            for number in from..=to {
                let block = ctx
                    .chain
                    .block(number)?
                    .ok_or_else(|| RpcError::internal(format!("block {number} missing")))?;
                let traces = replay::localized(ctx, limits, &block, None, &mut budget)?;
                matching.extend(traces.into_iter().filter(|t| matcher.matches(&t.trace)));
            }
            let page: Vec<_> = matching.into_iter().skip(after).take(count).collect();
            Ok(answer_value(slot.as_ref(), page))
        })
        .await
    }

    async fn get(
        &self,
        hash: B256,
        indices: Vec<U64>,
    ) -> Result<Option<LocalizedTransactionTrace>, RpcError> {
        // OpenEthereum took exactly one index; more (or none) find nothing, as in reth.
        let [index] = indices[..] else {
            return Ok(None);
        };
        let Ok(index) = usize::try_from(index) else {
            return Ok(None);
        };
        Ok(self
            .transaction(hash)
            .await?
            .and_then(|traces| traces.into_iter().nth(index)))
    }
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("trace_callMany", 2),
    ("trace_call", 5),
    ("trace_rawTransaction", 3),
    ("trace_replayBlockTransactions", 2),
    ("trace_replayTransaction", 2),
    ("trace_block", 1),
    ("trace_transaction", 1),
    ("trace_get", 2),
    ("trace_filter", 1),
];

/// The methods of this module, limits taken from the context.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    let limits = TraceLimits::from_rpc(&ctx.limits);
    rpc_module_with_limits(ctx, limits)
}

/// The methods of this module with explicit limits.
pub fn rpc_module_with_limits(ctx: ModuleContext, limits: TraceLimits) -> jsonrpsee::Methods {
    Trace::new(ctx, limits).into_rpc().into()
}
