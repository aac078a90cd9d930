//! `trace_callMany`: Parity/OpenEthereum-style traces of a sequence of calls, as reth and
//! erigon serve it.
//!
//! Params: `[[ [call, traceTypes], ... ], block]`. The calls run in order on top of the state
//! after `block` (default `latest`; `pending` is served as `latest`), each seeing the state
//! changes of those before it; nothing is stored. Each result holds the call's `output` and, as
//! asked by its trace types, the call tree (`trace`), the account changes against the state
//! before the call (`stateDiff`) and the executed opcodes (`vmTrace`). The EVM settings are
//! those of reth's trace calls, described in [`exec`].
//!
//! Limits ([`TraceLimits`]): calls per request, the request's total gas, a deadline (-32016),
//! a bound on the bytes of trace a request may record (an endless loop under the default gas
//! must not build gigabytes of vmTrace), and a bound on the tracing requests that run at once,
//! so that tracing cannot take every core from the rest of the node. Tracing runs on tokio's
//! blocking pool.

mod exec;
mod params;

use std::{sync::Arc, time::Duration};

use alloy::rpc::types::trace::parity::TraceResults;
use jsonrpsee::{core::async_trait, proc_macros::rpc};
use simnode_api::{offload, BlockParam, ModuleContext, RpcError, RpcLimits};
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
}

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
}

#[async_trait]
impl TraceApiServer for Trace {
    async fn call_many(
        &self,
        calls: Vec<TraceCall>,
        block: Option<BlockParam>,
    ) -> Result<Vec<TraceResults>, RpcError> {
        let deadline = std::time::Instant::now() + self.limits.timeout;
        if calls.len() > self.limits.max_calls {
            return Err(RpcError::LimitExceeded(format!(
                "too many calls: {} (at most {})",
                calls.len(),
                self.limits.max_calls
            )));
        }
        let timed_out = || {
            RpcError::Timeout(
                self.limits
                    .timeout
                    .as_millis()
                    .try_into()
                    .unwrap_or(u64::MAX),
            )
        };
        let slot = tokio::time::timeout_at(deadline.into(), self.slots.clone().acquire_owned())
            .await
            .map_err(|_| timed_out())?
            .map_err(RpcError::internal)?;

        let ctx = self.ctx.clone();
        let limits = self.limits.clone();
        let block = block.unwrap_or(BlockParam::LATEST);
        let _slot = slot;
        let inline_budget = ctx.limits.evm_inline_budget;
        // Tracing has no side effects: a run stopped at the inline budget starts again on
        // the blocking pool.
        let run =
            move |stop_at| exec::trace_call_many(&ctx, &limits, calls.clone(), block, stop_at);
        offload::inline_then_blocking(inline_budget, deadline, run).await
    }
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[("trace_callMany", 2)];

/// The methods of this module, limits taken from the context.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    let limits = TraceLimits::from_rpc(&ctx.limits);
    rpc_module_with_limits(ctx, limits)
}

/// The methods of this module with explicit limits.
pub fn rpc_module_with_limits(ctx: ModuleContext, limits: TraceLimits) -> jsonrpsee::Methods {
    Trace::new(ctx, limits).into_rpc().into()
}
