//! The pending block: the block the node would build on its head now from the transactions in
//! its pool, executed but never stored. Modules see it through [`NodeView`], the store as a
//! [`ChainView`] in which the `pending` tag names that block (one past the head), as geth,
//! reth and anvil serve it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use alloy::{
    consensus::{Header, ReceiptEnvelope, Sealed},
    primitives::{Address, B256, U256},
};
use revm::{bytecode::Bytecode, state::AccountInfo, DatabaseRef};
use simnode_api::{
    block_id::{BlockParam, BlockTag},
    ChainEvent, ChainHead, ChainView, ExecutionWitness, RootCarry, RpcError, RpcResult,
    StateChanges, StateError, StateRef, StoredBlock, SyncTarget, TxLocation,
};

use crate::{
    pool::Pool,
    store::{HistoricalState, Store},
    sync::{build, dev::DevChain, payload},
};

/// How the node lays out its next block before executing it.
pub enum NextBlockRules {
    /// A dev chain's: its clock, coinbase, base fee and gas limit controls, as its miner.
    Dev(Arc<DevChain>),
    /// A synced node's: the head's successor at the wall clock's time (at least a second after
    /// the head), with the zero address as beneficiary.
    Synced,
}

impl NextBlockRules {
    fn header(&self, store: &Store, parent: &Sealed<Header>) -> Header {
        match self {
            Self::Dev(chain) => chain.next_block_header(parent),
            Self::Synced => {
                let timestamp = build::now().max(parent.timestamp.saturating_add(1));
                let mut header = build::next_header(store, parent, timestamp);
                // As geth's pending block (its miner's): the gas limit steps toward the ceiling.
                header.gas_limit =
                    payload::next_gas_limit(parent.gas_limit, payload::GAS_LIMIT_TARGET);
                header
            }
        }
    }
}

/// What a pending block is built from: the head it goes on, the pool's revision and the
/// laid-out header. Equal inputs build equal blocks.
type Inputs = (B256, u64, Header);

/// A build's outcome: the block, or why it could not be built.
type Built = Result<Arc<Pending>, String>;

/// A built pending block with what reads of it need.
struct Pending {
    block: Arc<StoredBlock>,
    receipts: Arc<Vec<ReceiptEnvelope>>,
    /// Against the state after its parent.
    changes: StateChanges,
    /// Code the block deployed, by hash.
    codes: HashMap<B256, Bytecode>,
}

impl Pending {
    fn number(&self) -> u64 {
        self.block.number()
    }
}

/// Builds the pending block when it is asked for, and keeps the last build (or its failure)
/// until the head, the pool or the next block's layout moves.
pub struct PendingBlocks {
    store: Arc<Store>,
    pool: Arc<Pool>,
    rules: NextBlockRules,
    /// Held while building, so that requests arriving together build once.
    last: Mutex<Option<(Inputs, Built)>>,
}

impl PendingBlocks {
    pub fn new(store: Arc<Store>, pool: Arc<Pool>, rules: NextBlockRules) -> Self {
        Self {
            store,
            pool,
            rules,
            last: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Inputs, Built)>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pending block as of now, or why it could not be built.
    fn current(&self) -> RpcResult<Built> {
        let parent = self.store.served_head_header()?;
        let layout = self.rules.header(&self.store, &parent);
        let inputs = (parent.hash(), self.pool.revision(), layout);
        let mut last = self.lock();
        if let Some((_, built)) = last.as_ref().filter(|(held, _)| *held == inputs) {
            return Ok(built.clone());
        }
        let built = self.build(&parent, inputs.2.clone()).map(Arc::new);
        if let Err(reason) = &built {
            tracing::warn!(target: "simnode::pending", number = parent.number + 1, %reason, "the pending block could not be built: `pending` reads the latest block");
        }
        *last = Some((inputs, built.clone()));
        Ok(built)
    }

    fn build(&self, parent: &Sealed<Header>, mut header: Header) -> Result<Pending, String> {
        let candidates = self
            .pool
            .by_price_and_nonce(header.base_fee_per_gas.unwrap_or(0));
        build::mark_impersonation(&mut header, &candidates);
        let withdrawals = header.withdrawals_root.map(|_| Vec::new());
        let (block, changes) =
            build::assemble_on(&self.store, parent, header, withdrawals, &candidates, true)
                .map_err(|e| e.to_string())?;
        let codes = changes
            .values()
            .filter_map(|change| change.info.as_ref())
            .filter_map(|info| Some((info.code_hash, info.code.clone()?)))
            .collect();
        Ok(Pending {
            block: Arc::new(StoredBlock {
                header: block.header,
                body: block.body,
                senders: block.senders,
            }),
            receipts: Arc::new(block.receipts),
            changes,
            codes,
        })
    }

    /// The last pending block built, if it is block `number` on the current chain.
    fn built_as(&self, number: u64) -> RpcResult<Option<Arc<Pending>>> {
        let last = match self.lock().as_ref() {
            Some((_, Ok(pending))) if pending.number() == number => pending.clone(),
            _ => return Ok(None),
        };
        let parent = ChainView::canonical_hash(&*self.store, number - 1)?;
        Ok((parent == Some(last.block.header.parent_hash)).then_some(last))
    }
}

/// The state after the pending block: its changes over the state after its parent.
struct PendingState {
    base: HistoricalState,
    pending: Arc<Pending>,
}

impl std::fmt::Debug for PendingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingState")
            .field("number", &self.pending.number())
            .finish()
    }
}

impl DatabaseRef for PendingState {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        match self.pending.changes.get(&address) {
            Some(change) => Ok(change.info.clone()),
            None => self.base.basic_ref(address),
        }
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, StateError> {
        match self.pending.codes.get(&code_hash) {
            Some(code) => Ok(code.clone()),
            None => self.base.code_by_hash_ref(code_hash),
        }
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, StateError> {
        let Some(change) = self.pending.changes.get(&address) else {
            return self.base.storage_ref(address, index);
        };
        match change.storage.get(&index) {
            Some(value) => Ok(*value),
            None if change.wipe_storage || change.info.is_none() => Ok(U256::ZERO),
            None => self.base.storage_ref(address, index),
        }
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, StateError> {
        if number == self.pending.number() {
            return Ok(self.pending.block.hash());
        }
        self.base.block_hash_ref(number)
    }
}

/// `later` changes, made on top of `earlier` ones, as changes against the state before both.
fn on_top(earlier: &StateChanges, later: &StateChanges) -> StateChanges {
    let mut merged = earlier.clone();
    for (address, change) in later {
        let Some(before) = merged.get_mut(address) else {
            merged.insert(*address, change.clone());
            continue;
        };
        before.info = change.info.clone();
        if change.wipe_storage {
            before.wipe_storage = true;
            before.storage = change.storage.clone();
        } else {
            before
                .storage
                .extend(change.storage.iter().map(|(k, v)| (*k, *v)));
        }
    }
    merged
}

/// The chain as modules see it: the store, and one past its head the pending block, which only
/// the `pending` tag names (a number past the head still names no block).
pub struct NodeView {
    store: Arc<Store>,
    pending: PendingBlocks,
}

impl NodeView {
    pub fn new(store: Arc<Store>, pending: PendingBlocks) -> Self {
        Self { store, pending }
    }

    /// The pending block when `number` is past the stored head and names it.
    fn pending_as(&self, number: u64) -> RpcResult<Option<Arc<Pending>>> {
        if number <= self.store.served_head() {
            return Ok(None);
        }
        self.pending.built_as(number)
    }

    fn not_for_pending(what: &str) -> RpcError {
        RpcError::Server(format!(
            "{what} is not served for the pending block: ask for latest or a block number"
        ))
    }
}

impl ChainView for NodeView {
    fn head(&self) -> ChainHead {
        ChainView::head(&*self.store)
    }

    fn write_failure(&self) -> Option<String> {
        ChainView::write_failure(&*self.store)
    }

    fn canonical_hash(&self, number: u64) -> RpcResult<Option<B256>> {
        if let Some(pending) = self.pending_as(number)? {
            return Ok(Some(pending.block.hash()));
        }
        ChainView::canonical_hash(&*self.store, number)
    }

    fn block_number(&self, hash: &B256) -> RpcResult<Option<u64>> {
        ChainView::block_number(&*self.store, hash)
    }

    fn side_block(&self, hash: &B256) -> RpcResult<Option<Arc<StoredBlock>>> {
        ChainView::side_block(&*self.store, hash)
    }

    fn header(&self, number: u64) -> RpcResult<Option<Arc<Sealed<Header>>>> {
        if let Some(pending) = self.pending_as(number)? {
            return Ok(Some(Arc::new(pending.block.header.clone())));
        }
        ChainView::header(&*self.store, number)
    }

    fn block(&self, number: u64) -> RpcResult<Option<Arc<StoredBlock>>> {
        if let Some(pending) = self.pending_as(number)? {
            return Ok(Some(pending.block.clone()));
        }
        ChainView::block(&*self.store, number)
    }

    fn receipts(&self, number: u64) -> RpcResult<Option<Arc<Vec<ReceiptEnvelope>>>> {
        if let Some(pending) = self.pending_as(number)? {
            return Ok(Some(pending.receipts.clone()));
        }
        ChainView::receipts(&*self.store, number)
    }

    fn transaction_location(&self, hash: &B256) -> RpcResult<Option<TxLocation>> {
        ChainView::transaction_location(&*self.store, hash)
    }

    fn state_at(&self, number: u64) -> RpcResult<StateRef> {
        if let Some(pending) = self.pending_as(number)? {
            return Ok(Box::new(PendingState {
                base: self.store.state_after(number - 1)?,
                pending,
            }));
        }
        ChainView::state_at(&*self.store, number)
    }

    fn state_root_with(&self, base: u64, changes: &StateChanges) -> RpcResult<B256> {
        if let Some(pending) = self.pending_as(base)? {
            let merged = on_top(&pending.changes, changes);
            return ChainView::state_root_with(&*self.store, base - 1, &merged);
        }
        ChainView::state_root_with(&*self.store, base, changes)
    }

    fn state_root_carried(&self, base: u64, carry: &mut RootCarry) -> RpcResult<B256> {
        if self.pending_as(base)?.is_some() {
            // The store's carry is kept against a stored block; on the pending block every
            // root is taken whole.
            carry.forget();
            return self.state_root_with(base, carry.changes());
        }
        ChainView::state_root_carried(&*self.store, base, carry)
    }

    fn proof(
        &self,
        number: u64,
        address: Address,
        keys: &[alloy::serde::JsonStorageKey],
    ) -> RpcResult<alloy::rpc::types::EIP1186AccountProofResponse> {
        if self.pending_as(number)?.is_some() {
            return Err(Self::not_for_pending("eth_getProof"));
        }
        ChainView::proof(&*self.store, number, address, keys)
    }

    fn trie_account(
        &self,
        number: u64,
        address: Address,
    ) -> RpcResult<Option<alloy::consensus::TrieAccount>> {
        if self.pending_as(number)?.is_some() {
            return Err(Self::not_for_pending("eth_getAccount"));
        }
        ChainView::trie_account(&*self.store, number, address)
    }

    fn storage_slots(
        &self,
        number: u64,
        address: Address,
        start: B256,
        limit: usize,
    ) -> RpcResult<Vec<(B256, U256)>> {
        if self.pending_as(number)?.is_some() {
            return Err(Self::not_for_pending("debug_storageRangeAt"));
        }
        ChainView::storage_slots(&*self.store, number, address, start, limit)
    }

    fn execution_witness(&self, number: u64) -> RpcResult<ExecutionWitness> {
        if self.pending_as(number)?.is_some() {
            return Err(RpcError::Server("pending block has no witness".into()));
        }
        ChainView::execution_witness(&*self.store, number)
    }

    fn intermediate_roots(&self, block: &StoredBlock) -> RpcResult<Vec<B256>> {
        ChainView::intermediate_roots(&*self.store, block)
    }

    fn bad_blocks(&self) -> RpcResult<Vec<(B256, alloy::primitives::Bytes)>> {
        ChainView::bad_blocks(&*self.store)
    }

    fn chain_events(&self) -> tokio::sync::broadcast::Receiver<ChainEvent> {
        ChainView::chain_events(&*self.store)
    }

    fn sync_target(&self) -> tokio::sync::watch::Receiver<Option<SyncTarget>> {
        ChainView::sync_target(&*self.store)
    }

    fn resolve(&self, param: &BlockParam) -> RpcResult<Option<u64>> {
        if *param == BlockParam::Tag(BlockTag::Pending) {
            if let Ok(pending) = self.pending.current()? {
                return Ok(Some(pending.number()));
            }
            // Logged when it failed; reading the head is what `pending` did before there was a
            // pending block, and what a node without a pool would answer.
            return ChainView::resolve(&*self.store, &BlockParam::LATEST);
        }
        ChainView::resolve(&*self.store, param)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use simnode_api::AccountChange;

    fn account(balance: u64) -> Option<AccountInfo> {
        Some(AccountInfo {
            balance: U256::from(balance),
            ..Default::default()
        })
    }

    /// Roots on the pending block take its changes with the later ones on top: later values
    /// win, a later wipe drops the pending block's slots, other slots add up.
    #[test]
    fn later_changes_go_on_top_of_the_pending_blocks() {
        let (a, b, c) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
        );
        let slot = |k: u64, v: u64| (U256::from(k), U256::from(v));
        let earlier: StateChanges = [
            (
                a,
                AccountChange {
                    info: account(1),
                    wipe_storage: false,
                    storage: [slot(1, 1), slot(2, 2)].into(),
                },
            ),
            (
                b,
                AccountChange {
                    info: account(5),
                    wipe_storage: false,
                    storage: [slot(1, 1)].into(),
                },
            ),
        ]
        .into();
        let later: StateChanges = [
            (
                a,
                AccountChange {
                    info: account(7),
                    wipe_storage: false,
                    storage: [slot(2, 0), slot(3, 3)].into(),
                },
            ),
            (
                b,
                AccountChange {
                    info: account(6),
                    wipe_storage: true,
                    storage: [slot(4, 4)].into(),
                },
            ),
            (
                c,
                AccountChange {
                    info: None,
                    ..Default::default()
                },
            ),
        ]
        .into();
        let merged = on_top(&earlier, &later);
        assert_eq!(merged[&a].info, account(7));
        assert!(!merged[&a].wipe_storage);
        assert_eq!(
            merged[&a].storage,
            [slot(1, 1), slot(2, 0), slot(3, 3)].into()
        );
        assert_eq!(merged[&b].info, account(6));
        assert!(merged[&b].wipe_storage);
        assert_eq!(merged[&b].storage, [slot(4, 4)].into());
        assert_eq!(merged[&c], later[&c]);
        assert_eq!(merged.len(), 3);
    }
}
