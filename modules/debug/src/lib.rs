//! The `debug` namespace as geth serves it for stored blocks:
//!
//! - `debug_getRawHeader`, `debug_getRawBlock`, `debug_getRawReceipts`,
//!   `debug_getRawTransaction`: consensus encodings of stored data ([`raw`]);
//! - `debug_traceTransaction`, `debug_traceBlockByNumber`, `debug_traceBlockByHash`: the block
//!   re-executed on its parent's state with geth's tracers ([`exec`]): the default struct
//!   logger (`disableStorage`, `disableStack`, `enableMemory`, `enableReturnData`, `limit`),
//!   `callTracer` (`onlyTopCall`, `withLog`), `prestateTracer` (`diffMode`), `4byteTracer`,
//!   `noopTracer`, `flatCallTracer`, `muxTracer`, all from revm-inspectors' `DebugInspector`.
//!   callTracer logs carry their `index` among the block's logs (the receipt's `logIndex`), as
//!   geth gives them.
//!
//! - `debug_traceCall`, `debug_traceCallMany`: transaction requests traced as eth_call /
//!   eth_callMany run them.
//! - `debug_getBadBlocks`: the last blocks that failed validation ([`bad_blocks`]);
//!   `debug_traceBadBlock` traces one, and `debug_traceBlock` a block given as RLP, each on the
//!   state of its canonical parent ([`outside`]).
//! - `debug_storageRangeAt`: a page of a contract's storage before a transaction of a block
//!   ([`storage_range`]).
//! - `debug_intermediateRoots`: the state root after each transaction of a stored or refused
//!   block, from the node's executor (`ChainView::intermediate_roots`).
//!
//! Parameters are typed as strictly as geth types them ([`params`]): block numbers are
//! 0x-prefixed hex or tags, hashes 0x-prefixed 32 bytes. The genesis block is not traceable
//! (-32000, as geth); an unknown transaction is -32000 "transaction not found", an unknown block
//! -32000 "block ... not found".
//!
//! Limits: tracing runs on tokio's blocking pool, at most `RpcLimits::max_concurrent_traces`
//! requests at once (the rest wait within their deadline); a request's deadline is
//! `RpcLimits::evm_timeout`, and the tracer option `timeout` bounds each transaction or call it
//! traces, as geth applies it (-32016 past either); the trace one request records is bounded
//! by `RpcLimits::max_vm_trace_bytes` (-32005).

mod bad_blocks;
mod exec;
mod outside;
mod params;
mod raw;
mod storage_range;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Bytes, B256},
    rpc::types::{
        trace::geth::{
            GethDebugTracingCallOptions, GethDebugTracingOptions, GethTrace, TraceResult,
        },
        TransactionRequest,
    },
};
use jsonrpsee::{core::async_trait, proc_macros::rpc, types::Extensions};
use serde_json::Value;
use simnode_api::{
    block_id::BlockTag,
    raw_answer::{answer_value, Answer, RawAnswerSlot},
    BlockParam, ExecutionWitness, ModuleContext, RpcError, RpcResult, StoredBlock,
};
use tokio::sync::Semaphore;

#[rpc(server, namespace = "debug")]
pub trait DebugApi {
    /// The RLP of a block header.
    #[method(name = "getRawHeader")]
    fn get_raw_header(&self, block: Option<Value>) -> Result<Option<Bytes>, RpcError>;

    /// The RLP of a block.
    #[method(name = "getRawBlock")]
    fn get_raw_block(&self, block: Option<Value>) -> Result<Option<Bytes>, RpcError>;

    /// The EIP-2718 encodings of a block's receipts.
    #[method(name = "getRawReceipts")]
    fn get_raw_receipts(&self, block: Option<Value>) -> Result<Option<Vec<Bytes>>, RpcError>;

    /// The EIP-2718 encoding of a transaction (mined or pooled).
    #[method(name = "getRawTransaction")]
    fn get_raw_transaction(&self, hash: Option<Value>) -> Result<Option<Bytes>, RpcError>;

    /// Traces one mined transaction.
    #[method(name = "traceTransaction", with_extensions)]
    async fn trace_transaction(
        &self,
        hash: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<GethTrace>, RpcError>;

    /// Traces every transaction of a block named by number or tag.
    #[method(name = "traceBlockByNumber", with_extensions)]
    async fn trace_block_by_number(
        &self,
        number: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError>;

    /// Traces every transaction of a block named by hash.
    #[method(name = "traceBlockByHash", with_extensions)]
    async fn trace_block_by_hash(
        &self,
        hash: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError>;

    /// Traces every transaction of a block given as RLP, on the state of its parent (the
    /// canonical block before it).
    #[method(name = "traceBlock", with_extensions)]
    async fn trace_block(
        &self,
        rlp: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError>;

    /// Traces every transaction of a block the node refused (one `debug_getBadBlocks` lists).
    #[method(name = "traceBadBlock", with_extensions)]
    async fn trace_bad_block(
        &self,
        hash: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError>;

    /// A page of a contract's storage before a transaction of a block ([`storage_range`]).
    #[method(name = "storageRangeAt")]
    async fn storage_range_at(
        &self,
        block: Option<Value>,
        tx_index: Option<Value>,
        address: Option<Value>,
        key_start: Option<Value>,
        max_result: Option<Value>,
    ) -> Result<storage_range::StorageRange, RpcError>;

    /// Traces a transaction request on the state after a block (default latest), run as
    /// eth_call runs it; the options take `stateOverrides`, `blockOverrides` and `txIndex`.
    #[method(name = "traceCall")]
    async fn trace_call(
        &self,
        call: Option<Value>,
        block: Option<Value>,
        opts: Option<Value>,
    ) -> Result<GethTrace, RpcError>;

    /// Bundles of transaction requests traced in order on one block's state (reth's
    /// `debug_traceCallMany`): `[bundles, {blockNumber, transactionIndex}, options]`, the
    /// options being `debug_traceCall`'s tracer and `stateOverrides`.
    #[method(name = "traceCallMany")]
    async fn trace_call_many(
        &self,
        bundles: Vec<alloy::rpc::types::Bundle>,
        state_context: Option<simnode_api::call::StateContext>,
        opts: Option<GethDebugTracingCallOptions>,
    ) -> Result<Vec<Vec<GethTrace>>, RpcError>;

    /// The last blocks that failed validation, highest number first.
    #[method(name = "getBadBlocks")]
    fn get_bad_blocks(&self) -> Result<Vec<bad_blocks::BadBlock>, RpcError>;

    /// The state root after each transaction of a block named by hash (canonical, or one the
    /// node refused), run again on its parent's state.
    #[method(name = "intermediateRoots")]
    async fn intermediate_roots(
        &self,
        hash: Option<Value>,
        config: Option<Value>,
    ) -> Result<Vec<B256>, RpcError>;

    /// The pre-state a stateless client needs to re-execute a block named by number, tag or
    /// hash: trie nodes, codes and ancestor headers.
    #[method(name = "executionWitness")]
    async fn execution_witness(&self, block: Option<Value>) -> Result<ExecutionWitness, RpcError>;
}

/// The `debug` namespace: the module context and the tracing slots.
#[derive(Debug, Clone)]
pub struct Debug {
    ctx: ModuleContext,
    slots: Arc<Semaphore>,
}

impl Debug {
    pub fn new(ctx: ModuleContext) -> Self {
        let slots = Arc::new(Semaphore::new(ctx.limits.max_concurrent_traces.max(1)));
        Self { ctx, slots }
    }

    /// Runs `f` on the blocking pool once a tracing slot is free, within the request's budget.
    async fn traced<T: Send + 'static>(
        &self,
        opts: &GethDebugTracingOptions,
        f: impl FnOnce(&ModuleContext, exec::Budget) -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let timeout = self.ctx.limits.evm_timeout;
        let per_tx = match &opts.timeout {
            Some(asked) => parse_go_duration(asked)
                .ok_or_else(|| RpcError::Server(format!("time: invalid duration \"{asked}\"")))?
                .min(timeout),
            None => timeout,
        };
        let budget = exec::Budget {
            deadline: Instant::now() + timeout,
            timeout_ms: timeout.as_millis().try_into().unwrap_or(u64::MAX),
            tracer_timeout: false,
            per_tx,
            max_bytes: self.ctx.limits.max_vm_trace_bytes,
        };
        let slot =
            tokio::time::timeout_at(budget.deadline.into(), self.slots.clone().acquire_owned())
                .await
                .map_err(|_| RpcError::Timeout(budget.timeout_ms))?
                .map_err(RpcError::internal)?;
        let ctx = self.ctx.clone();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            f(&ctx, budget)
        })
        .await
        .map_err(|err| RpcError::internal(format!("tracing task failed: {err}")))?
    }

    /// Traces every transaction of the block `block` finds (on the blocking pool, within the
    /// request's budget), answered as text when the front door takes it so.
    async fn trace_whole_block(
        &self,
        ext: &Extensions,
        opts: Option<Value>,
        block: impl FnOnce(&ModuleContext) -> RpcResult<Arc<StoredBlock>> + Send + 'static,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError> {
        let opts = tracing_options(opts)?;
        let traced = opts.clone();
        let slot = RawAnswerSlot::of(ext);
        self.traced(&opts, move |ctx, budget| {
            let block = block(ctx)?;
            let traces = exec::trace_block(ctx, &block, &traced, budget, None)?;
            Ok(answer_value(slot.as_ref(), traces))
        })
        .await
    }
}

/// The tracer options (second parameter); absent or `null` is the default struct logger.
fn tracing_options(opts: Option<Value>) -> RpcResult<GethDebugTracingOptions> {
    match opts {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(v) => serde_json::from_value(v)
            .map_err(|err| RpcError::invalid_params(format!("invalid argument 1: {err}"))),
    }
}

/// A Go `time.ParseDuration` string: decimal numbers with units ns, us/µs, ms, s, m, h,
/// optionally signed ("1m30s", "2.5s", "0").
fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Some(Duration::ZERO);
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += value * nanos;
    }
    Some(Duration::from_nanos(total.min(u64::MAX as f64) as u64))
}

/// The canonical block `param` names, or geth's "block ... not found".
fn resolved(ctx: &ModuleContext, param: &BlockParam) -> RpcResult<u64> {
    ctx.chain
        .resolve(param)?
        .ok_or_else(|| not_found_number(param))
}

fn not_found_number(param: &BlockParam) -> RpcError {
    RpcError::Server(match param {
        BlockParam::Number(n) => format!("block #{n} not found"),
        BlockParam::Tag(BlockTag::Safe) => "safe block not found".into(),
        BlockParam::Tag(BlockTag::Finalized) => "finalized block not found".into(),
        BlockParam::Tag(tag) => format!("block {tag:?} not found").to_lowercase(),
        BlockParam::Hash { hash, .. } => format!("block {hash} not found"),
    })
}

#[async_trait]
impl DebugApiServer for Debug {
    fn get_raw_header(&self, block: Option<Value>) -> Result<Option<Bytes>, RpcError> {
        let param = params::block_number_or_hash(&params::required(block, "block")?)?;
        raw::raw_header(&self.ctx, &param)
    }

    fn get_raw_block(&self, block: Option<Value>) -> Result<Option<Bytes>, RpcError> {
        let param = params::block_number_or_hash(&params::required(block, "block")?)?;
        raw::raw_block(&self.ctx, &param)
    }

    fn get_raw_receipts(&self, block: Option<Value>) -> Result<Option<Vec<Bytes>>, RpcError> {
        let param = params::block_number_or_hash(&params::required(block, "block")?)?;
        raw::raw_receipts(&self.ctx, &param)
    }

    fn get_raw_transaction(&self, hash: Option<Value>) -> Result<Option<Bytes>, RpcError> {
        let hash = params::hash(&params::required(hash, "transaction hash")?)?;
        self.ctx.raw_transaction(&hash)
    }

    fn get_bad_blocks(&self) -> Result<Vec<bad_blocks::BadBlock>, RpcError> {
        bad_blocks::bad_blocks(&self.ctx)
    }

    async fn trace_transaction(
        &self,
        ext: &Extensions,
        hash: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<GethTrace>, RpcError> {
        let hash = params::hash(&params::required(hash, "transaction hash")?)?;
        let opts = tracing_options(opts)?;
        let traced = opts.clone();
        let slot = RawAnswerSlot::of(ext);
        self.traced(&opts, move |ctx, budget| {
            let not_found = || RpcError::Server("transaction not found".into());
            let loc = ctx
                .chain
                .transaction_location(&hash)?
                .ok_or_else(not_found)?;
            let block = ctx.chain.block(loc.block_number)?.ok_or_else(not_found)?;
            let index = loc.index as usize;
            if block.body.transactions.get(index).map(|tx| *tx.tx_hash()) != Some(hash) {
                return Err(not_found());
            }
            let mut results = exec::trace_block(ctx, &block, &traced, budget, Some(index))?;
            match results.pop() {
                Some(TraceResult::Success { result, .. }) => {
                    Ok(answer_value(slot.as_ref(), result))
                }
                Some(TraceResult::Error { error, .. }) => Err(RpcError::Server(error)),
                None => Err(RpcError::internal("transaction was not traced")),
            }
        })
        .await
    }

    async fn trace_block_by_number(
        &self,
        ext: &Extensions,
        number: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError> {
        let param = params::block_number(&params::required(number, "block number")?)?;
        self.trace_whole_block(ext, opts, move |ctx| {
            let number = resolved(ctx, &param)?;
            ctx.chain
                .block(number)?
                .ok_or_else(|| not_found_number(&param))
        })
        .await
    }

    async fn trace_block_by_hash(
        &self,
        ext: &Extensions,
        hash: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError> {
        let hash = params::hash(&params::required(hash, "block hash")?)?;
        self.trace_whole_block(ext, opts, move |ctx| {
            let not_found = || RpcError::Server(format!("block {hash} not found"));
            let number = ctx.chain.block_number(&hash)?.ok_or_else(not_found)?;
            let block = ctx.chain.block(number)?.ok_or_else(not_found)?;
            if block.hash() != hash {
                return Err(not_found());
            }
            Ok(block)
        })
        .await
    }

    async fn trace_block(
        &self,
        ext: &Extensions,
        rlp: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError> {
        let rlp = params::bytes(&params::required(rlp, "block RLP")?)?;
        self.trace_whole_block(ext, opts, move |ctx| {
            outside::from_rlp(ctx, &rlp).map(Arc::new)
        })
        .await
    }

    async fn trace_bad_block(
        &self,
        ext: &Extensions,
        hash: Option<Value>,
        opts: Option<Value>,
    ) -> Result<Answer<Vec<TraceResult>>, RpcError> {
        let hash = params::hash(&params::required(hash, "block hash")?)?;
        self.trace_whole_block(ext, opts, move |ctx| {
            outside::bad_block(ctx, hash).map(Arc::new)
        })
        .await
    }

    async fn storage_range_at(
        &self,
        block: Option<Value>,
        tx_index: Option<Value>,
        address: Option<Value>,
        key_start: Option<Value>,
        max_result: Option<Value>,
    ) -> Result<storage_range::StorageRange, RpcError> {
        let param = params::block_number_or_hash(&params::required(block, "block")?)?;
        let tx_index = params::int(&params::required(tx_index, "txIndex")?, 1)?;
        let address: alloy::primitives::Address =
            serde_json::from_value(params::required(address, "contractAddress")?)
                .map_err(|err| RpcError::invalid_params(format!("invalid argument 2: {err}")))?;
        let key_start = params::bytes(&params::required(key_start, "keyStart")?)
            .map_err(|_| RpcError::invalid_params("invalid argument 3: keyStart is not hex"))?;
        let start = storage_range::start_key(&key_start)?;
        let max = params::int(&params::required(max_result, "maxResult")?, 4)?;
        // A negative index names no transaction and a negative count no slots, as in geth.
        let tx_index = usize::try_from(tx_index).unwrap_or(usize::MAX);
        let max = usize::try_from(max).unwrap_or(0);
        let opts = GethDebugTracingOptions::default();
        self.traced(&opts, move |ctx, budget| {
            let number = resolved(ctx, &param)?;
            let block = ctx
                .chain
                .block(number)?
                .ok_or_else(|| not_found_number(&param))?;
            storage_range::storage_range_at(ctx, &block, tx_index, address, start, max, &budget)
        })
        .await
    }

    async fn trace_call(
        &self,
        call: Option<Value>,
        block: Option<Value>,
        opts: Option<Value>,
    ) -> Result<GethTrace, RpcError> {
        let request: TransactionRequest =
            serde_json::from_value(params::required(call, "transaction arguments")?)
                .map_err(|err| RpcError::invalid_params(format!("invalid argument 0: {err}")))?;
        let param = match block {
            None | Some(Value::Null) => BlockParam::LATEST,
            Some(b) => params::block_number_or_hash(&b)?,
        };
        let opts: GethDebugTracingCallOptions = match opts {
            None | Some(Value::Null) => Default::default(),
            Some(v) => serde_json::from_value(v)
                .map_err(|err| RpcError::invalid_params(format!("invalid argument 2: {err}")))?,
        };
        let tracing = opts.tracing_options.clone();
        self.traced(&tracing, move |ctx, budget| {
            exec::trace_call(ctx, resolved(ctx, &param)?, request, opts, budget)
        })
        .await
    }

    async fn trace_call_many(
        &self,
        bundles: Vec<alloy::rpc::types::Bundle>,
        state_context: Option<simnode_api::call::StateContext>,
        opts: Option<GethDebugTracingCallOptions>,
    ) -> Result<Vec<Vec<GethTrace>>, RpcError> {
        let context = state_context.unwrap_or_default();
        let param = context.block_number.unwrap_or(BlockParam::LATEST);
        let first = context.transactions_first();
        let opts = opts.unwrap_or_default();
        let tracing = opts.tracing_options.clone();
        self.traced(&tracing, move |ctx, budget| {
            let number = resolved(ctx, &param)?;
            exec::trace_call_many(ctx, number, first, bundles, opts, budget)
        })
        .await
    }

    async fn intermediate_roots(
        &self,
        hash: Option<Value>,
        config: Option<Value>,
    ) -> Result<Vec<B256>, RpcError> {
        let hash = params::hash(&params::required(hash, "block hash")?)?;
        // geth's trace config: only its timeout has a bearing on re-running a block here.
        let opts = tracing_options(config)?;
        self.traced(&opts, move |ctx, _| {
            let block = match ctx.chain.block_number(&hash)? {
                Some(number) => ctx.chain.block(number)?.map(Arc::unwrap_or_clone),
                None => outside::refused(ctx, hash)?,
            };
            let block = block.ok_or_else(|| RpcError::Server(format!("block {hash} not found")))?;
            if block.number() == 0 {
                return Err(RpcError::Server("genesis is not traceable".into()));
            }
            ctx.chain.intermediate_roots(&block)
        })
        .await
    }

    async fn execution_witness(&self, block: Option<Value>) -> Result<ExecutionWitness, RpcError> {
        let param = params::block_number_or_hash(&params::required(block, "block")?)?;
        // geth's answers: the pending block is not executed, genesis has no parent to start from.
        if param == BlockParam::Tag(BlockTag::Pending) {
            return Err(RpcError::Server("pending block has no witness".into()));
        }
        let not_found = || {
            RpcError::Server(match param {
                BlockParam::Number(n) => format!("block {n:#x} not found"),
                BlockParam::Hash { hash, .. } => format!("block {hash} not found"),
                BlockParam::Tag(tag) => format!("{tag:?} block not found").to_lowercase(),
            })
        };
        let number = self.ctx.chain.resolve(&param)?.ok_or_else(not_found)?;
        if number == 0 {
            return Err(RpcError::Server(
                "block 0x0 found, but parent missing".into(),
            ));
        }
        // Re-running a block is not interruptible like a traced one: the answer is the deadline's
        // error when the run outlasts it (the run itself ends with its block).
        let timeout = self.ctx.limits.evm_timeout;
        let defaults = GethDebugTracingOptions::default();
        let witness = self.traced(&defaults, move |ctx, _| ctx.chain.execution_witness(number));
        tokio::time::timeout(timeout, witness)
            .await
            .map_err(|_| RpcError::Timeout(timeout.as_millis().try_into().unwrap_or(u64::MAX)))?
    }
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("debug_getRawHeader", 1),
    ("debug_getRawBlock", 1),
    ("debug_getRawReceipts", 1),
    ("debug_getRawTransaction", 1),
    ("debug_traceTransaction", 2),
    ("debug_traceBlockByNumber", 2),
    ("debug_traceBlockByHash", 2),
    ("debug_traceBlock", 2),
    ("debug_traceBadBlock", 2),
    ("debug_storageRangeAt", 5),
    ("debug_traceCall", 3),
    ("debug_traceCallMany", 3),
    ("debug_executionWitness", 1),
    ("debug_getBadBlocks", 0),
    ("debug_intermediateRoots", 2),
];

/// The methods of this module.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    Debug::new(ctx).into_rpc().into()
}

#[cfg(test)]
mod tests;
