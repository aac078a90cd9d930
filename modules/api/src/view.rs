//! The read-only view of the stored chain that modules get.

use std::sync::Arc;

use alloy::{
    consensus::{BlockBody, Header, ReceiptEnvelope, Sealed, TxEnvelope},
    primitives::{Address, B256},
};

use crate::{
    block_id::{BlockParam, BlockTag},
    state::{RootCarry, StateChanges, StateRef},
    RpcResult,
};

/// Block numbers of the chain's moving points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChainHead {
    pub latest: u64,
    /// `None` until a consensus client (or the dev miner) has named one.
    pub safe: Option<u64>,
    pub finalized: Option<u64>,
}

/// The node is behind the chain its consensus client follows: the client named or sent a block
/// the node cannot connect to its own chain (the Engine API answered SYNCING).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncTarget {
    /// The head when the node fell behind.
    pub starting_block: u64,
    /// The highest block number the client has sent; `None` when it only named a head by hash.
    pub highest_block: Option<u64>,
}

/// A canonical block as stored: sealed header, body, and the recovered senders
/// (one per transaction, same order).
#[derive(Debug, Clone)]
pub struct StoredBlock {
    pub header: Sealed<Header>,
    pub body: BlockBody<TxEnvelope>,
    pub senders: Vec<Address>,
}

impl StoredBlock {
    pub fn hash(&self) -> B256 {
        self.header.hash()
    }
    pub fn number(&self) -> u64 {
        self.header.number
    }
}

/// The pre-state of a block as geth's `debug_executionWitness` gives it: the trie nodes the
/// block's reads and writes walk through in its parent's state, the code it runs, and the
/// headers from its parent back to the oldest one `BLOCKHASH` asks for (parent first). Nodes
/// and codes are sorted by their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecutionWitness {
    pub state: Vec<alloy::primitives::Bytes>,
    pub codes: Vec<alloy::primitives::Bytes>,
    pub headers: Vec<alloy::primitives::Bytes>,
}

/// Where a transaction sits in the canonical chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxLocation {
    pub block_number: u64,
    pub block_hash: B256,
    pub index: u64,
}

pub trait ChainView: Send + Sync {
    fn head(&self) -> ChainHead;

    /// Why the chain can store no more blocks, when its disk refused a write (`/health`
    /// reports it); `None` while writes go through.
    fn write_failure(&self) -> Option<String> {
        None
    }

    /// Hash of the canonical block at `number`.
    fn canonical_hash(&self, number: u64) -> RpcResult<Option<B256>>;

    /// Number of the canonical block with this hash.
    fn block_number(&self, hash: &B256) -> RpcResult<Option<u64>>;

    fn header(&self, number: u64) -> RpcResult<Option<Arc<Sealed<Header>>>>;

    fn block(&self, number: u64) -> RpcResult<Option<Arc<StoredBlock>>>;

    /// A block this node holds off its canonical chain (a side branch's payload, or a block a
    /// reorg unwound), by hash: geth serves those by hash too. They were not executed here (or
    /// no longer count), so they come without receipts.
    fn side_block(&self, hash: &B256) -> RpcResult<Option<Arc<StoredBlock>>> {
        let _ = hash;
        Ok(None)
    }

    /// The consensus receipts of a block, in transaction order, read in one pass.
    fn receipts(&self, number: u64) -> RpcResult<Option<Arc<Vec<ReceiptEnvelope>>>>;

    fn transaction_location(&self, hash: &B256) -> RpcResult<Option<TxLocation>>;

    /// The state after canonical block `number` (the state block `number + 1` starts from).
    fn state_at(&self, number: u64) -> RpcResult<StateRef>;

    /// The state root of the state after block `base` with `changes` applied on top (a lone
    /// root: the view keeps nothing for later ones).
    fn state_root_with(&self, base: u64, changes: &StateChanges) -> RpcResult<B256>;

    /// The state root of the state after block `base` with `carry`'s changes on top, for one of
    /// a run of roots on the same base: the view keeps in `carry` what the next root can reuse.
    fn state_root_carried(&self, base: u64, carry: &mut RootCarry) -> RpcResult<B256> {
        carry.forget();
        self.state_root_with(base, carry.changes())
    }

    /// The EIP-1186 proof of `address` and `keys` in the state after canonical block `number`
    /// (`eth_getProof`). Views without tries do not offer it.
    fn proof(
        &self,
        number: u64,
        address: Address,
        keys: &[alloy::serde::JsonStorageKey],
    ) -> RpcResult<alloy::rpc::types::EIP1186AccountProofResponse> {
        let _ = (number, address, keys);
        Err(crate::RpcError::MethodNotAvailable(
            "eth_getProof is not available on this chain view".into(),
        ))
    }

    /// Account `address` as the state trie holds it after canonical block `number` (nonce,
    /// balance, storage root, code hash); `None` where it does not exist (`eth_getAccount`).
    /// Views without tries do not offer it.
    fn trie_account(
        &self,
        number: u64,
        address: Address,
    ) -> RpcResult<Option<alloy::consensus::TrieAccount>> {
        let _ = (number, address);
        Err(crate::RpcError::MethodNotAvailable(
            "eth_getAccount is not available on this chain view".into(),
        ))
    }

    /// Up to `limit` storage slots of `address` after canonical block `number`, from hashed
    /// slot `start` on, as (hashed slot, value), ascending by hashed slot: a page of its
    /// storage trie's leaves (`debug_storageRangeAt`). Views without hashed state do not offer
    /// it.
    fn storage_slots(
        &self,
        number: u64,
        address: Address,
        start: B256,
        limit: usize,
    ) -> RpcResult<Vec<(B256, alloy::primitives::U256)>> {
        let _ = (number, address, start, limit);
        Err(crate::RpcError::MethodNotAvailable(
            "debug_storageRangeAt is not available on this chain view".into(),
        ))
    }

    /// What a stateless client needs to re-execute canonical block `number` (not genesis):
    /// `debug_executionWitness`. Views without tries do not offer it.
    fn execution_witness(&self, number: u64) -> RpcResult<ExecutionWitness> {
        let _ = number;
        Err(crate::RpcError::MethodNotAvailable(
            "debug_executionWitness is not available on this chain view".into(),
        ))
    }

    /// The state root after each transaction of `block`, run on the state of its parent (a
    /// canonical block the caller has checked) after the pre-block system calls; a transaction
    /// that fails ends the list (`debug_intermediateRoots`). Views without tries do not offer it.
    fn intermediate_roots(&self, block: &StoredBlock) -> RpcResult<Vec<B256>> {
        let _ = block;
        Err(crate::RpcError::MethodNotAvailable(
            "debug_intermediateRoots is not available on this chain view".into(),
        ))
    }

    /// Blocks that failed validation (import or Engine API), highest number first: each
    /// block's hash and RLP (`debug_getBadBlocks`). Views that never validate blocks have none.
    fn bad_blocks(&self) -> RpcResult<Vec<(B256, alloy::primitives::Bytes)>> {
        Ok(Vec::new())
    }

    /// Changes of the canonical chain from now on (see [`crate::events`]). Views that never
    /// change have none: the receiver reports the channel closed.
    fn chain_events(&self) -> tokio::sync::broadcast::Receiver<crate::ChainEvent> {
        tokio::sync::broadcast::channel(1).1
    }

    /// Whether the node is behind its consensus client, now and from now on (the receiver sees
    /// each change). Views that never sync are never behind.
    fn sync_target(&self) -> tokio::sync::watch::Receiver<Option<SyncTarget>> {
        tokio::sync::watch::channel(None).1
    }

    /// Resolves a block parameter to a canonical block number; `Ok(None)` when there is no
    /// such block (a future number, an unknown hash). Here `pending` is served as `latest`;
    /// the node's view names its pending block instead, one past the head, which only this tag
    /// reaches. A
    /// `safe` or `finalized` tag not set yet is [`crate::RpcError::TagNotSet`]: geth answers
    /// it with an error for every method, where an unknown number is often `null`.
    fn resolve(&self, param: &BlockParam) -> RpcResult<Option<u64>> {
        let head = self.head();
        let set = |tag, number: Option<u64>| number.ok_or(crate::RpcError::TagNotSet(tag));
        Ok(match *param {
            BlockParam::Number(n) => (n <= head.latest).then_some(n),
            BlockParam::Tag(BlockTag::Latest | BlockTag::Pending) => Some(head.latest),
            BlockParam::Tag(BlockTag::Earliest) => Some(0),
            BlockParam::Tag(tag @ BlockTag::Safe) => Some(set(tag, head.safe)?),
            BlockParam::Tag(tag @ BlockTag::Finalized) => Some(set(tag, head.finalized)?),
            BlockParam::Hash { hash, .. } => self.block_number(&hash)?,
        })
    }
}
