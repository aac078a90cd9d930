//! `eth_simulateV1`: simulates a chain of blocks on top of a stored block, with block and state
//! overrides, optional validation and ETH transfer tracing, and returns every block with real
//! roots and hashes.
//!
//! Nothing here touches the stored chain: the simulation reads the base state through
//! [`simnode_api::ChainView::state_at`] and keeps its writes in memory; state roots come from
//! [`simnode_api::ChainView::state_root_with`].

mod db;
mod inspector;
mod precompiles;
mod simulate;
mod system_calls;
pub mod types;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc, Extensions, Methods};
use serde_json::{value::RawValue, Value};
use simnode_api::{
    offload::{self, EvmPool},
    raw_answer::{answer_value, Answer, RawAnswerSlot},
    BlockParam, ModuleContext, RpcError,
};

pub use inspector::{TRANSFER_EVENT_TOPIC, TRANSFER_LOG_EMITTER};
pub use simulate::TIMESTAMP_INCREMENT;
pub use types::SimulatePayload;

#[rpc(server, namespace = "eth")]
pub trait SimulateApi {
    /// Simulates `payload.blockStateCalls` on top of `block` (default `latest`).
    #[method(name = "simulateV1", with_extensions)]
    async fn simulate_v1(
        &self,
        payload: SimulatePayload,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<Answer<Vec<Box<RawValue>>>>;
}

/// The `eth_simulateV1` handler.
#[derive(Debug, Clone)]
pub struct Simulate {
    ctx: ModuleContext,
    /// Where simulations too long to run inline go: one thread per core. More at once would
    /// only share the cores (and their caches), each holding its state meanwhile (16 blocks of
    /// 50 transfers: ~14 MB); the others wait in the queue, within their deadline.
    pool: Arc<EvmPool>,
}

impl Simulate {
    pub fn new(ctx: ModuleContext) -> Self {
        Self {
            ctx,
            pool: Arc::new(EvmPool::per_core().expect("starting the EVM threads")),
        }
    }

    /// Runs a simulation where the node would: on this thread within the inline budget, else
    /// (or past it) on the EVM threads; each block as JSON text.
    pub async fn simulate(
        &self,
        payload: SimulatePayload,
        block: BlockParam,
    ) -> Result<Vec<Box<RawValue>>, RpcError> {
        let limits = &self.ctx.limits;
        let deadline = Instant::now() + limits.evm_timeout;
        let inline_budget = if least_cost(&payload) > limits.evm_inline_budget {
            // It cannot finish inline: trying would only waste the budget.
            Duration::ZERO
        } else {
            limits.evm_inline_budget
        };
        let this = self.clone();
        // A simulation has no side effects, so a run stopped at the inline budget can start
        // again from scratch off the RPC thread.
        let run = move |stop_at| this.simulate_until(payload.clone(), block, stop_at);
        offload::inline_then_blocking(inline_budget, deadline, Some(&self.pool), run).await
    }

    /// Runs a simulation on the calling thread.
    pub fn simulate_blocking(
        &self,
        payload: SimulatePayload,
        block: BlockParam,
        started: Instant,
    ) -> Result<Vec<Value>, RpcError> {
        self.simulate_until(payload, block, started + self.ctx.limits.evm_timeout)?
            .iter()
            .map(|b| serde_json::from_str(b.get()).map_err(RpcError::internal))
            .collect()
    }

    /// Runs a simulation on the calling thread, stopped with [`RpcError::Timeout`] at `stop_at`.
    fn simulate_until(
        &self,
        payload: SimulatePayload,
        block: BlockParam,
        stop_at: Instant,
    ) -> Result<Vec<Box<RawValue>>, RpcError> {
        simulate::Simulation {
            ctx: &self.ctx,
            payload,
            block,
            stop_at,
            helpers: Some(&self.pool),
        }
        .run()
    }
}

#[jsonrpsee::core::async_trait]
impl SimulateApiServer for Simulate {
    async fn simulate_v1(
        &self,
        ext: &Extensions,
        payload: SimulatePayload,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<Answer<Vec<Box<RawValue>>>> {
        let blocks = self.simulate(payload, block.unwrap_or_default()).await?;
        // The blocks are JSON text already: over HTTP they go to the front door as they are,
        // where jsonrpsee would copy the answer and parse all of it again (for the three-block
        // traceTransfers payload, 14 KB, ~3% of the node's CPU per request).
        Ok(answer_value(RawAnswerSlot::of(ext).as_ref(), blocks))
    }
}

/// What a simulation of `payload` costs at least, whatever its calls do: each block and each
/// call as cheap as a plain transfer on a fast machine (measured in-process: 16 blocks of 50
/// transfers take 4.3 ms, one block of 800 transfers 3.0 ms, one block of one transfer 14 µs;
/// these floors stay below all three).
fn least_cost(payload: &SimulatePayload) -> Duration {
    const PER_BLOCK: Duration = Duration::from_micros(10);
    const PER_CALL: Duration = Duration::from_micros(3);
    let blocks = payload.block_state_calls.len() as u32;
    let calls: usize = payload
        .block_state_calls
        .iter()
        .map(|b| b.calls.len())
        .sum();
    PER_BLOCK
        .saturating_mul(blocks)
        .saturating_add(PER_CALL.saturating_mul(u32::try_from(calls).unwrap_or(u32::MAX)))
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[("eth_simulateV1", 2)];

/// The module's methods, to be merged into the node's RPC server.
pub fn rpc_module(ctx: ModuleContext) -> Methods {
    Simulate::new(ctx).into_rpc().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use types::SimBlock;

    fn payload(blocks: usize, calls: usize) -> SimulatePayload {
        SimulatePayload {
            block_state_calls: (0..blocks)
                .map(|_| SimBlock {
                    calls: vec![Default::default(); calls],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn only_requests_past_the_default_inline_budget_skip_it() {
        let budget = simnode_api::RpcLimits::default().evm_inline_budget;
        // The load kit's cases and a 16-block request of single calls stay inline.
        for (blocks, calls) in [(1, 1), (3, 2), (16, 1), (1, 100)] {
            assert!(
                least_cost(&payload(blocks, calls)) <= budget,
                "{blocks} x {calls}"
            );
        }
        for (blocks, calls) in [(16, 50), (1, 800), (256, 1)] {
            assert!(
                least_cost(&payload(blocks, calls)) > budget,
                "{blocks} x {calls}"
            );
        }
    }
}
