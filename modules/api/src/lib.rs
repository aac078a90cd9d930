//! The interface between the simnode node and its RPC modules.
//!
//! A module (eth, receipts, simulate, trace) depends on this crate only. It gets a
//! [`ModuleContext`] holding the chain spec, a read-only [`ChainView`] of the stored chain,
//! the transaction pool and the limits it must honour, and answers with [`RpcError`]s whose
//! JSON-RPC codes are fixed in one place ([`error`]).

pub mod access;
pub mod block_id;
pub mod call;
pub mod chain_spec;
pub mod count;
pub mod error;
pub mod events;
pub mod guard;
pub mod impersonation;
pub mod limits;
pub mod lookup;
pub mod offload;
pub mod pool;
pub mod raw_answer;
pub mod raw_tx;
pub mod replay;
pub mod rpc_block;
pub mod shares;
pub mod state;
#[cfg(feature = "testing")]
pub mod testing;
pub mod unsigned_tx;
pub mod view;
pub mod vm_messages;

pub use block_id::BlockParam;
pub use chain_spec::ChainSpec;
pub use error::{RpcError, RpcResult};
pub use events::{BlockEvent, ChainEvent, PoolEvent};
pub use limits::RpcLimits;
pub use pool::TxPool;
pub use state::{
    AccountChange, RootCarry, StateChanges, StateDb, StateError, StateReader, StateRef,
};
pub use view::{ChainHead, ChainView, ExecutionWitness, StoredBlock, SyncTarget, TxLocation};

use std::sync::Arc;

/// (method, the most positional params it reads), one table per module next to its `rpc_module`.
///
/// jsonrpsee reads positional params one after the other and ignores any left over, so a client
/// passing an argument a method does not take (block overrides to a method without them, say)
/// would get an answer that silently left it out. The node refuses such calls with geth's -32602
/// "too many arguments, want at most N"; it will not start if a served method has no entry.
pub type MethodParams = &'static [(&'static str, usize)];

/// Everything a module may use of the node. Cheap to clone.
#[derive(Clone)]
pub struct ModuleContext {
    pub spec: Arc<ChainSpec>,
    pub chain: Arc<dyn ChainView>,
    pub pool: Arc<dyn TxPool>,
    pub limits: Arc<RpcLimits>,
}

/// A transaction the node knows by hash: in a canonical block, or waiting in the pool.
// Only ever returned from one lookup and consumed at once, never stored: no need to box.
#[allow(clippy::large_enum_variant)]
pub enum KnownTransaction {
    Mined {
        block: Arc<StoredBlock>,
        /// Its position in `block`'s body (checked to be there).
        index: usize,
    },
    Pooled(alloy::consensus::transaction::Recovered<alloy::consensus::TxEnvelope>),
}

impl ModuleContext {
    /// Looks a transaction up by hash: the canonical chain first, then the pool.
    pub fn find_transaction(
        &self,
        hash: &alloy::primitives::B256,
    ) -> RpcResult<Option<KnownTransaction>> {
        if let Some(loc) = self.chain.transaction_location(hash)? {
            if let Some(block) = self.chain.block(loc.block_number)? {
                let index = loc.index as usize;
                if index < block.body.transactions.len() {
                    return Ok(Some(KnownTransaction::Mined { block, index }));
                }
            }
        }
        Ok(self.pool.get(hash).map(KnownTransaction::Pooled))
    }

    /// The EIP-2718 bytes of a transaction by hash (see [`Self::find_transaction`]).
    pub fn raw_transaction(
        &self,
        hash: &alloy::primitives::B256,
    ) -> RpcResult<Option<alloy::primitives::Bytes>> {
        use alloy::eips::eip2718::Encodable2718;
        Ok(self.find_transaction(hash)?.map(|known| match known {
            KnownTransaction::Mined { block, index } => {
                block.body.transactions[index].encoded_2718().into()
            }
            KnownTransaction::Pooled(tx) => tx.inner().encoded_2718().into(),
        }))
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
