//! In-memory stand-ins of what the node gives a module, for the modules' own tests (cargo
//! feature `testing`): a chain of blocks with receipts and per-block states, a pool, and the
//! reader of the execution-apis fixtures some of those chains are rebuilt from.
//!
//! A module test builds the chain it needs with [`MemoryChain`] and serves its methods from a
//! [`crate::ModuleContext`] over it, without a database or a node.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use alloy::{
    consensus::{transaction::Recovered, BlockBody, Header, ReceiptEnvelope, Sealed, Transaction},
    primitives::{Address, B256, U256},
    rpc::types::{Block, Transaction as RpcTransaction, TransactionReceipt},
};
use revm::{
    bytecode::Bytecode,
    database::{CacheDB, EmptyDB},
    state::AccountInfo,
    DatabaseRef,
};
use serde_json::Value;

use crate::{
    ChainHead, ChainView, RpcError, RpcResult, StateChanges, StateError, StateRef, StoredBlock,
    TxLocation, TxPool,
};

/// A state held in memory; [`MemoryChain::state`] gives one to a block.
pub type MemoryDb = CacheDB<EmptyDB>;

/// A canonical chain held in memory. The head is the highest block added; safe and finalized
/// are unset until [`MemoryChain::finalized`].
#[derive(Default)]
pub struct MemoryChain {
    blocks: BTreeMap<u64, (Arc<StoredBlock>, Arc<Vec<ReceiptEnvelope>>)>,
    /// Blocks off the canonical chain, by hash.
    side: BTreeMap<B256, Arc<StoredBlock>>,
    states: BTreeMap<u64, Arc<MemoryDb>>,
    safe: Option<u64>,
    finalized: Option<u64>,
}

impl MemoryChain {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a block (at its header's number) with its receipts.
    pub fn block(
        mut self,
        block: impl Into<Arc<StoredBlock>>,
        receipts: Vec<ReceiptEnvelope>,
    ) -> Self {
        let block = block.into();
        self.blocks
            .insert(block.number(), (block, Arc::new(receipts)));
        self
    }

    /// Adds a block off the canonical chain (found by hash only).
    pub fn side_block(mut self, block: impl Into<Arc<StoredBlock>>) -> Self {
        let block = block.into();
        self.side.insert(block.hash(), block);
        self
    }

    /// Adds a block with an empty body and no receipts.
    pub fn header(self, header: Sealed<Header>) -> Self {
        self.block(
            StoredBlock {
                header,
                body: BlockBody::default(),
                senders: vec![],
            },
            vec![],
        )
    }

    /// The state after block `number`. Blocks without one answer `state_at` with an internal
    /// error: the test did not expect them to be read.
    pub fn state(mut self, number: u64, state: Arc<MemoryDb>) -> Self {
        self.states.insert(number, state);
        self
    }

    /// Marks `number` safe and finalized.
    pub fn finalized(mut self, number: u64) -> Self {
        self.safe = Some(number);
        self.finalized = Some(number);
        self
    }

    fn get(&self, number: u64) -> Option<&(Arc<StoredBlock>, Arc<Vec<ReceiptEnvelope>>)> {
        self.blocks.get(&number)
    }
}

impl ChainView for MemoryChain {
    fn head(&self) -> ChainHead {
        ChainHead {
            latest: self.blocks.keys().next_back().copied().unwrap_or_default(),
            safe: self.safe,
            finalized: self.finalized,
        }
    }

    fn canonical_hash(&self, number: u64) -> RpcResult<Option<B256>> {
        Ok(self.get(number).map(|(b, _)| b.hash()))
    }

    fn block_number(&self, hash: &B256) -> RpcResult<Option<u64>> {
        Ok(self
            .blocks
            .values()
            .find(|(b, _)| b.hash() == *hash)
            .map(|(b, _)| b.number()))
    }

    fn header(&self, number: u64) -> RpcResult<Option<Arc<Sealed<Header>>>> {
        Ok(self.get(number).map(|(b, _)| Arc::new(b.header.clone())))
    }

    fn block(&self, number: u64) -> RpcResult<Option<Arc<StoredBlock>>> {
        Ok(self.get(number).map(|(b, _)| b.clone()))
    }

    fn side_block(&self, hash: &B256) -> RpcResult<Option<Arc<StoredBlock>>> {
        Ok(self.side.get(hash).cloned())
    }

    fn receipts(&self, number: u64) -> RpcResult<Option<Arc<Vec<ReceiptEnvelope>>>> {
        Ok(self.get(number).map(|(_, r)| r.clone()))
    }

    fn transaction_location(&self, hash: &B256) -> RpcResult<Option<TxLocation>> {
        Ok(self.blocks.values().find_map(|(block, _)| {
            let index = block
                .body
                .transactions
                .iter()
                .position(|tx| tx.tx_hash() == hash)?;
            Some(TxLocation {
                block_number: block.number(),
                block_hash: block.hash(),
                index: index as u64,
            })
        }))
    }

    fn state_at(&self, number: u64) -> RpcResult<StateRef> {
        match self.states.get(&number) {
            Some(state) => Ok(Box::new(MemoryState(state.clone()))),
            None if self.blocks.contains_key(&number) => Err(RpcError::internal(format!(
                "the test chain keeps no state after block {number}"
            ))),
            None => Err(RpcError::HeaderNotFound),
        }
    }

    fn state_root_with(&self, _base: u64, _changes: &StateChanges) -> RpcResult<B256> {
        Err(RpcError::internal("the test chain computes no state roots"))
    }
}

/// A [`MemoryDb`] as the state reader modules get.
#[derive(Debug)]
pub struct MemoryState(pub Arc<MemoryDb>);

impl DatabaseRef for MemoryState {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        self.0
            .basic_ref(address)
            .map_err(|e| StateError(e.to_string()))
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, StateError> {
        self.0
            .code_by_hash_ref(code_hash)
            .map_err(|e| StateError(e.to_string()))
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, StateError> {
        self.0
            .storage_ref(address, index)
            .map_err(|e| StateError(e.to_string()))
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, StateError> {
        self.0
            .block_hash_ref(number)
            .map_err(|e| StateError(e.to_string()))
    }
}

/// A pool that keeps what it is given, in order.
#[derive(Default)]
pub struct MemoryPool(Mutex<Vec<Recovered<alloy::consensus::TxEnvelope>>>);

impl MemoryPool {
    pub fn with(txs: Vec<Recovered<alloy::consensus::TxEnvelope>>) -> Self {
        Self(Mutex::new(txs))
    }

    fn txs(&self) -> std::sync::MutexGuard<'_, Vec<Recovered<alloy::consensus::TxEnvelope>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TxPool for MemoryPool {
    fn insert(&self, tx: Recovered<alloy::consensus::TxEnvelope>) -> RpcResult<B256> {
        let hash = *tx.inner().tx_hash();
        let mut txs = self.txs();
        if txs.iter().any(|t| *t.inner().tx_hash() == hash) {
            return Err(RpcError::Server("already known".into()));
        }
        txs.push(tx);
        Ok(hash)
    }

    fn pending(&self) -> Vec<Recovered<alloy::consensus::TxEnvelope>> {
        self.txs().clone()
    }

    fn get(&self, hash: &B256) -> Option<Recovered<alloy::consensus::TxEnvelope>> {
        self.txs()
            .iter()
            .find(|t| t.inner().tx_hash() == hash)
            .cloned()
    }

    fn pending_nonce(&self, sender: &Address) -> Option<u64> {
        self.txs()
            .iter()
            .filter(|t| t.signer() == *sender)
            .map(|t| t.nonce() + 1)
            .max()
    }
}

/// The execution-apis fixture folder: `$SIMNODE_CONFORMANCE_DIR`, or
/// `../shared/conformance/execution-apis` beside the repository.
pub fn conformance_dir() -> PathBuf {
    match std::env::var_os("SIMNODE_CONFORMANCE_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        // This crate is modules/api of the repository.
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/conformance/execution-apis"),
    }
}

/// The request line and the parsed response of fixture `rel` (e.g.
/// `eth_getBlockByHash/get-block-by-hash.io`).
pub fn fixture(rel: &str) -> (String, Value) {
    let path = conformance_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "fixture {} not readable ({e}); set SIMNODE_CONFORMANCE_DIR",
            path.display()
        )
    });
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("{}: no `{prefix}` line", path.display()))
    };
    let response = serde_json::from_str(line("<< ")).expect("fixture response is JSON");
    (line(">> ").to_owned(), response)
}

/// A block as the store keeps it, from the JSON of an `eth_getBlockBy*` answer with full
/// transactions.
pub fn stored_block(rpc_block: &Value) -> StoredBlock {
    let block: Block<RpcTransaction<alloy::consensus::TxEnvelope>> =
        serde_json::from_value(rpc_block.clone()).expect("a block with full transactions");
    let txs: Vec<_> = block.transactions.into_transactions().collect();
    StoredBlock {
        header: Sealed::new_unchecked(block.header.inner, block.header.hash),
        senders: txs.iter().map(|t| t.inner.signer()).collect(),
        body: BlockBody {
            transactions: txs.into_iter().map(|t| t.inner.into_inner()).collect(),
            ommers: vec![],
            withdrawals: block.withdrawals,
        },
    }
}

/// The consensus receipts behind the JSON of an `eth_getBlockReceipts` answer.
pub fn consensus_receipts(rpc_receipts: &Value) -> Vec<ReceiptEnvelope> {
    let receipts: Vec<TransactionReceipt> =
        serde_json::from_value(rpc_receipts.clone()).expect("a list of receipts");
    receipts
        .into_iter()
        .map(|r| r.inner.into_primitives_receipt())
        .collect()
}
