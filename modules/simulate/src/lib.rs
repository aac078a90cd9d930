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
pub mod types;

use std::time::Instant;

use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc, Methods};
use serde_json::{value::RawValue, Value};
use simnode_api::{BlockParam, ModuleContext, RpcError};

pub use inspector::{TRANSFER_EVENT_TOPIC, TRANSFER_LOG_EMITTER};
pub use simulate::{revert_message, TIMESTAMP_INCREMENT};
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
        simulate::Simulation {
            ctx: &self.ctx,
            payload,
            block,
            started,
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
        let started = Instant::now();
        let this = self.clone();
        let block = block.unwrap_or_default();
        let result =
            tokio::task::spawn_blocking(move || this.simulate_raw(payload, block, started))
                .await
                .map_err(|e| RpcError::internal(format!("simulation task failed: {e}")))?;
        Ok(result?)
    }
}

/// The module's methods, to be merged into the node's RPC server.
pub fn rpc_module(ctx: ModuleContext) -> Methods {
    Simulate::new(ctx).into_rpc().into()
}
