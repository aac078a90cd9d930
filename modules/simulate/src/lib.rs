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

use std::time::Instant;

use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc, Methods};
use serde_json::{value::RawValue, Value};
use simnode_api::{offload, BlockParam, ModuleContext, RpcError};

pub use inspector::{TRANSFER_EVENT_TOPIC, TRANSFER_LOG_EMITTER};
pub use simulate::TIMESTAMP_INCREMENT;
pub use types::SimulatePayload;

#[rpc(server, namespace = "eth")]
pub trait SimulateApi {
    /// Simulates `payload.blockStateCalls` on top of `block` (default `latest`).
    #[method(name = "simulateV1")]
    async fn simulate_v1(
        &self,
        payload: SimulatePayload,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<Vec<Box<RawValue>>>;
}

/// The `eth_simulateV1` handler.
#[derive(Debug, Clone)]
pub struct Simulate {
    ctx: ModuleContext,
}

impl Simulate {
    pub fn new(ctx: ModuleContext) -> Self {
        Self { ctx }
    }

    /// Runs a simulation on the calling thread.
    pub fn simulate_blocking(
        &self,
        payload: SimulatePayload,
        block: BlockParam,
        started: Instant,
    ) -> Result<Vec<Value>, RpcError> {
        self.simulate_raw(payload, block, started)?
            .iter()
            .map(|b| serde_json::from_str(b.get()).map_err(RpcError::internal))
            .collect()
    }

    /// Runs a simulation on the calling thread; each block as JSON text.
    pub fn simulate_raw(
        &self,
        payload: SimulatePayload,
        block: BlockParam,
        started: Instant,
    ) -> Result<Vec<Box<RawValue>>, RpcError> {
        self.simulate_until(payload, block, started + self.ctx.limits.evm_timeout)
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
        }
        .run()
    }
}

#[jsonrpsee::core::async_trait]
impl SimulateApiServer for Simulate {
    async fn simulate_v1(
        &self,
        payload: SimulatePayload,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<Vec<Box<RawValue>>> {
        let limits = &self.ctx.limits;
        let deadline = Instant::now() + limits.evm_timeout;
        let this = self.clone();
        let block = block.unwrap_or_default();
        // A simulation has no side effects, so a run stopped at the inline budget can start
        // again from scratch on the blocking pool.
        let run = move |stop_at| this.simulate_until(payload.clone(), block, stop_at);
        Ok(offload::inline_then_blocking(limits.evm_inline_budget, deadline, run).await?)
    }
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[("eth_simulateV1", 2)];

/// The module's methods, to be merged into the node's RPC server.
pub fn rpc_module(ctx: ModuleContext) -> Methods {
    Simulate::new(ctx).into_rpc().into()
}
