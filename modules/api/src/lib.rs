//! The interface between the simnode node and its RPC modules.
//!
//! A module (eth, receipts, simulate, trace) depends on this crate only. It gets a
//! [`ModuleContext`] holding the chain spec, a read-only [`ChainView`] of the stored chain,
//! the transaction pool and the limits it must honour, and answers with [`RpcError`]s whose
//! JSON-RPC codes are fixed in one place ([`error`]).

pub mod block_id;
pub mod chain_spec;
pub mod error;
pub mod guard;
pub mod limits;
pub mod offload;
pub mod pool;
pub mod state;
#[cfg(feature = "testing")]
pub mod testing;
pub mod view;
pub mod vm_messages;

pub use block_id::BlockParam;
pub use chain_spec::ChainSpec;
pub use error::{RpcError, RpcResult};
pub use limits::RpcLimits;
pub use pool::TxPool;
pub use state::{AccountChange, StateChanges, StateDb, StateError, StateReader, StateRef};
pub use view::{ChainHead, ChainView, StoredBlock, TxLocation};

use std::sync::Arc;

/// Everything a module may use of the node. Cheap to clone.
#[derive(Clone)]
pub struct ModuleContext {
    pub spec: Arc<ChainSpec>,
    pub chain: Arc<dyn ChainView>,
    pub pool: Arc<dyn TxPool>,
    pub limits: Arc<RpcLimits>,
}

impl ModuleContext {
    /// The EIP-2718 bytes of a transaction by hash: mined (canonical chain) first, then the
    /// pool; `None` when neither knows it.
    pub fn raw_transaction(
        &self,
        hash: &alloy::primitives::B256,
    ) -> RpcResult<Option<alloy::primitives::Bytes>> {
        use alloy::eips::eip2718::Encodable2718;
        if let Some(loc) = self.chain.transaction_location(hash)? {
            if let Some(block) = self.chain.block(loc.block_number)? {
                if let Some(tx) = block.body.transactions.get(loc.index as usize) {
                    return Ok(Some(tx.encoded_2718().into()));
                }
            }
        }
        Ok(self
            .pool
            .get(hash)
            .map(|tx| tx.inner().encoded_2718().into()))
    }
}

impl std::fmt::Debug for ModuleContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleContext")
            .field("chain_id", &self.spec.chain_id)
            .finish()
    }
}

/// The API key a request came in with, put into the request extensions by the server's
/// path layer so that methods can account per key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiKeyId(pub Arc<str>);
