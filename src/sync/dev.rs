//! The dev miner: builds blocks from the transaction pool and stores them through the same
//! execution and store path as imported blocks. It mines as soon as a transaction arrives, or
//! on a fixed interval with `--dev.block-time`; [`DevChain`] also serves the test controls
//! (`evm_mine`, the clock, snapshots and reverts, and state edits mined as blocks of their own,
//! see `crate::rpc::dev_controls`).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy::{
    consensus::{transaction::Recovered, Header, Sealed, TxEnvelope},
    primitives::{Address, B256, U256},
};
use alloy_trie::EMPTY_ROOT_HASH;
use revm::{bytecode::Bytecode, primitives::KECCAK_EMPTY, state::AccountInfo};
use simnode_api::AccountChange;

use super::build::{self, mark_impersonation, next_header, now};
use crate::{
    exec::BlockError,
    pool::Pool,
    store::{HistoricalState, NewBlock, Store, StoreError},
};

/// Builds a block on the head from `candidates` (in order; those that cannot be included are
/// left out) and stores it. Returns the stored block.
pub fn build_block(
    store: &Store,
    candidates: &[Recovered<TxEnvelope>],
    timestamp: u64,
) -> Result<NewBlock, BlockError> {
    let settings = BlockSettings {
        clock: DevClock {
            next: Some(timestamp),
            ..DevClock::default()
        },
        coinbase: Address::ZERO,
        base_fee: None,
        gas_limit: None,
        prev_randao: None,
    };
    let (block, changes) = assemble_block(store, candidates, settings, None)?;
    store.commit_block(&block, &changes)?;
    Ok(block)
}

/// What the dev chain's controls set for the next block.
#[derive(Debug, Clone, Copy)]
struct BlockSettings {
    /// Where the timestamp comes from (the parent's + 1 at least is used).
    clock: DevClock,
    coinbase: Address,
    /// In place of the one EIP-1559 derives from the parent (`anvil_setNextBlockBaseFeePerGas`).
    base_fee: Option<u64>,
    /// In place of the parent's.
    gas_limit: Option<u64>,
    /// In place of the derived one (`hardhat_setPrevRandao`).
    prev_randao: Option<B256>,
}

/// Builds the next block on the head as `settings` say, without storing it: the block and its
/// state changes. With `edit`, the block also carries that state edit (see [`DevChain::edit`]).
fn assemble_block(
    store: &Store,
    candidates: &[Recovered<TxEnvelope>],
    settings: BlockSettings,
    edit: Option<(Address, StateEdit)>,
) -> Result<(NewBlock, simnode_api::StateChanges), BlockError> {
    let parent = store.head_header()?;
    let mut header = laid_out_header(store, &parent, &settings);
    if edit.is_some() {
        header.extra_data = alloy::primitives::Bytes::from_static(STATE_EDIT_EXTRA_DATA);
    } else {
        mark_impersonation(&mut header, candidates);
    }
    let withdrawals = header.withdrawals_root.map(|_| Vec::new());
    let parent_number = parent.number;
    build::assemble(
        store,
        &parent,
        header,
        withdrawals,
        candidates,
        true,
        |changes| match edit {
            Some((address, edit)) => {
                Ok(edit.apply(&store.state_after(parent_number)?, changes, address)?)
            }
            None => Ok(()),
        },
    )
}

/// The header of the next block on `parent` as `settings` lay it out: the fields known before
/// execution, without the markers that depend on what the block carries.
fn laid_out_header(store: &Store, parent: &Sealed<Header>, settings: &BlockSettings) -> Header {
    let timestamp = settings
        .clock
        .next_timestamp(parent.timestamp)
        .max(parent.timestamp.saturating_add(1));
    let mut header = next_header(store, parent, timestamp);
    header.beneficiary = settings.coinbase;
    if let Some(gas_limit) = settings.gas_limit {
        header.gas_limit = gas_limit;
    }
    if let (Some(_), Some(fee)) = (header.base_fee_per_gas, settings.base_fee) {
        header.base_fee_per_gas = Some(fee);
    }
    if let Some(randao) = settings.prev_randao {
        header.mix_hash = randao;
    }
    header
}

/// The dev chain as its miner and its test controls (`evm_*`) share it: the clock later
/// blocks take their timestamps from, and one lock, so that blocks are mined and the chain is
/// reverted one at a time.
pub struct DevChain {
    store: Arc<Store>,
    pool: Arc<Pool>,
    clock: Mutex<DevClock>,
    mining: Mutex<()>,
    /// When the miner mines; it watches for changes.
    mode: tokio::sync::watch::Sender<MiningMode>,
    /// The beneficiary of the blocks mined from now on (`anvil_setCoinbase`).
    coinbase: Mutex<Address>,
    /// The next block's base fee (`anvil_setNextBlockBaseFeePerGas`), used by one block.
    next_base_fee: Mutex<Option<u64>>,
    next_prev_randao: Mutex<Option<B256>>,
    /// The gas limit of the blocks mined from now on (`evm_setBlockGasLimit`), in place of the
    /// parent's.
    gas_limit: Mutex<Option<u64>>,
}

/// When the dev miner mines a block, as anvil's mining modes have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MiningMode {
    /// As soon as a transaction arrives (automine).
    Auto,
    /// Every so often, with or without transactions (`--dev.block-time`).
    Interval(Duration),
    /// Only when asked (`evm_mine` and its kin).
    Manual,
}

/// The latest timestamp the test controls give a dev block: far enough for any test, and far
/// from where a timestamp, or the next block's, stops fitting the integers tools read it into.
pub const MAX_DEV_TIMESTAMP: u64 = 1 << 40;

/// Where dev blocks take their timestamps from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevClock {
    /// Seconds added to the wall clock (`evm_increaseTime`); negative once a block took a
    /// timestamp set earlier than the wall clock, so that the blocks after it go on from there.
    pub offset: i64,
    /// The next block's timestamp (`evm_setNextBlockTimestamp`), used by one block.
    pub next: Option<u64>,
    /// Seconds from each block to the next in place of the wall clock
    /// (`anvil_setBlockTimestampInterval`).
    pub interval: Option<u64>,
}

impl DevClock {
    /// The timestamp the block after `parent_timestamp` takes (the parent's + 1 at least, see
    /// [`assemble_block`]).
    fn next_timestamp(&self, parent_timestamp: u64) -> u64 {
        self.next.unwrap_or_else(|| match self.interval {
            Some(interval) => parent_timestamp.saturating_add(interval),
            None => now().saturating_add_signed(self.offset),
        })
    }
}

/// The gas limits a block may have (geth's `MinGasLimit` and `MaxGasLimit`).
pub const MIN_GAS_LIMIT: u64 = 5000;
pub const MAX_GAS_LIMIT: u64 = 0x7fff_ffff_ffff_ffff;

/// The `extraData` of a block that carries a state edit.
pub const STATE_EDIT_EXTRA_DATA: &[u8] = b"simnode state edit";

/// A change to one account made outside any transaction, as anvil's and hardhat's
/// `*_setBalance`, `*_setNonce`, `*_setCode` and `*_setStorageAt` make them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateEdit {
    Balance(U256),
    Nonce(u64),
    /// Bytecode as revm reads it (checked: an EIP-7702 designator must be well formed).
    Code(Bytecode),
    /// A storage slot's new value (zero clears it).
    Storage {
        slot: U256,
        value: U256,
    },
}

impl StateEdit {
    /// Puts the edit of `address` on top of `changes`, the changes of a block on `base`.
    fn apply(
        self,
        base: &HistoricalState,
        changes: &mut simnode_api::StateChanges,
        address: Address,
    ) -> Result<(), StoreError> {
        let stored = base.account(&address)?;
        let change = changes.entry(address).or_insert_with(|| AccountChange {
            info: stored.as_ref().map(|a| AccountInfo {
                balance: a.balance,
                nonce: a.nonce,
                code_hash: a.code_hash,
                // Unchanged code stays where the store keeps it, by its hash.
                code: None,
                ..Default::default()
            }),
            wipe_storage: false,
            storage: Default::default(),
        });
        let info = change.info.get_or_insert_with(|| AccountInfo {
            code: None,
            ..Default::default()
        });
        match self {
            Self::Balance(balance) => info.balance = balance,
            Self::Nonce(nonce) => info.nonce = nonce,
            Self::Code(code) => {
                info.code_hash = code.hash_slow();
                info.code = Some(code);
            }
            Self::Storage { slot, value } => {
                change.storage.insert(slot, value);
            }
        }
        // An account left with nothing (EIP-161's empty, and no storage) does not exist.
        let info_empty = change
            .info
            .as_ref()
            .is_some_and(|i| i.balance.is_zero() && i.nonce == 0 && i.code_hash == KECCAK_EMPTY);
        let stored_storage = !change.wipe_storage
            && stored
                .as_ref()
                .is_some_and(|a| a.storage_root != EMPTY_ROOT_HASH);
        let new_storage = change.storage.values().any(|v| !v.is_zero());
        if info_empty && !stored_storage && !new_storage {
            change.info = None;
        }
        Ok(())
    }
}

impl DevChain {
    pub fn new(store: Arc<Store>, pool: Arc<Pool>, mode: MiningMode) -> Self {
        pool.set_mines_on_arrival(mode == MiningMode::Auto);
        Self {
            store,
            pool,
            clock: Mutex::new(DevClock::default()),
            mining: Mutex::new(()),
            mode: tokio::sync::watch::Sender::new(mode),
            coinbase: Mutex::new(Address::ZERO),
            next_base_fee: Mutex::new(None),
            next_prev_randao: Mutex::new(None),
            gas_limit: Mutex::new(None),
        }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    pub fn mining_mode(&self) -> MiningMode {
        *self.mode.borrow()
    }

    /// Switches the miner to `mode` (it mines what waits at once when that is automine).
    pub fn set_mining_mode(&self, mode: MiningMode) {
        self.pool.set_mines_on_arrival(mode == MiningMode::Auto);
        self.mode.send_replace(mode);
    }

    pub fn set_coinbase(&self, coinbase: Address) {
        *lock(&self.coinbase) = coinbase;
    }

    /// Sets the next block's base fee; only once EIP-1559 is active.
    pub fn set_next_base_fee(&self, fee: u64) -> Result<(), String> {
        let head = self.store.head_header().map_err(|e| e.to_string())?;
        if self.store.spec().next_base_fee(&head).is_none() {
            return Err("the next block has no base fee: EIP-1559 (London) is not active".into());
        }
        *lock(&self.next_base_fee) = Some(fee);
        Ok(())
    }

    /// Runs `f` between two blocks: no block is being mined while it runs (a pool change made
    /// in `f` cannot race a block already taking the transaction).
    pub fn between_blocks<T>(&self, f: impl FnOnce() -> T) -> T {
        let _one_at_a_time = lock(&self.mining);
        f()
    }

    /// Sets the next block's PREVRANDAO (its `mixHash`), as `hardhat_setPrevRandao` does.
    pub fn set_next_prev_randao(&self, randao: B256) {
        *lock(&self.next_prev_randao) = Some(randao);
    }

    /// Sets the gas limit of the blocks mined from now on.
    pub fn set_gas_limit(&self, gas_limit: u64) -> Result<(), String> {
        if !(MIN_GAS_LIMIT..=MAX_GAS_LIMIT).contains(&gas_limit) {
            return Err(format!(
                "gas limit {gas_limit} is out of range: from {MIN_GAS_LIMIT} to {MAX_GAS_LIMIT}"
            ));
        }
        *lock(&self.gas_limit) = Some(gas_limit);
        Ok(())
    }

    /// Sets (or with `None` removes) the seconds between blocks; whether an interval was set.
    pub fn set_timestamp_interval(&self, interval: Option<u64>) -> bool {
        std::mem::replace(&mut lock(&self.clock).interval, interval).is_some()
    }

    /// The settings of the next block mined now.
    fn settings(&self) -> BlockSettings {
        BlockSettings {
            clock: self.clock(),
            coinbase: *lock(&self.coinbase),
            base_fee: *lock(&self.next_base_fee),
            prev_randao: *lock(&self.next_prev_randao),
            gas_limit: *lock(&self.gas_limit),
        }
    }

    pub fn clock(&self) -> DevClock {
        *lock(&self.clock)
    }

    /// The header of the block mined now on `parent`, as far as it is known before execution
    /// (the `pending` block is built on it).
    pub fn next_block_header(&self, parent: &Sealed<Header>) -> Header {
        laid_out_header(&self.store, parent, &self.settings())
    }

    /// Moves the clock of later blocks `seconds` ahead of where it is, or of the head's
    /// timestamp when that is later (blocks mined fast run ahead of the wall clock); the
    /// offset from the wall clock now.
    pub fn increase_time(&self, seconds: u64) -> Result<i64, String> {
        let head = self.store.head_header().map_err(|e| e.to_string())?;
        let mut clock = lock(&self.clock);
        let wall = i128::from(now());
        let from = i128::from(head.timestamp).max(wall + i128::from(clock.offset));
        let target = from + i128::from(seconds);
        if target > i128::from(MAX_DEV_TIMESTAMP) {
            return Err(format!(
                "{seconds} seconds would take the clock past {MAX_DEV_TIMESTAMP}"
            ));
        }
        // Both ends are below 2^40, so their difference fits.
        clock.offset = (target - wall) as i64;
        Ok(clock.offset)
    }

    /// Sets the next block's timestamp, which must come after the head's; the blocks after it
    /// take their time from there on.
    pub fn set_next_timestamp(&self, timestamp: u64) -> Result<(), String> {
        let head = self.store.head_header().map_err(|e| e.to_string())?;
        if timestamp > MAX_DEV_TIMESTAMP {
            return Err(format!(
                "timestamp {timestamp} is past the latest a dev block takes ({MAX_DEV_TIMESTAMP})"
            ));
        }
        if timestamp <= head.timestamp {
            return Err(format!(
                "timestamp {timestamp} is not after the latest block's ({})",
                head.timestamp
            ));
        }
        lock(&self.clock).next = Some(timestamp);
        Ok(())
    }

    /// Mines one block from the pool and cleans the pool up after it. With `allow_empty`
    /// false (mining per transaction) nothing is stored when no pending transaction can be
    /// included yet (e.g. all wait behind a nonce gap), and `None` is returned.
    pub fn mine(&self, allow_empty: bool) -> Result<Option<NewBlock>, BlockError> {
        let _one_at_a_time = lock(&self.mining);
        let started = std::time::Instant::now();
        let settings = self.settings();
        let parent = self.store.head_header()?;
        let base_fee = laid_out_header(&self.store, &parent, &settings).base_fee_per_gas;
        let pending = self.pool.by_price_and_nonce(base_fee.unwrap_or(0));
        let (block, changes) = assemble_block(&self.store, &pending, settings, None)?;
        if block.body.transactions.is_empty() && !allow_empty {
            return Ok(None);
        }
        self.store_mined(block, &changes, settings, started)
            .map(Some)
    }

    /// Mines a block without transactions whose state also carries `edit` of `address`
    /// (`anvil_setBalance` and its kin). A dev chain's state changes only through the blocks it
    /// stores, so an edit is one: later blocks, every read of the state after it and
    /// `evm_revert` see it like any other change, and the block's `stateRoot` is the root of
    /// the state it stores. The edit applies after the block's system calls; its `extraData`
    /// is [`STATE_EDIT_EXTRA_DATA`], since executing the block again does not make the edit.
    pub fn edit(&self, address: Address, edit: StateEdit) -> Result<NewBlock, BlockError> {
        let _one_at_a_time = lock(&self.mining);
        let started = std::time::Instant::now();
        let settings = self.settings();
        let (block, changes) = assemble_block(&self.store, &[], settings, Some((address, edit)))?;
        let block = self.store_mined(block, &changes, settings, started)?;
        // A nonce edit can let waiting transactions in (or make them stale): let the miner look.
        if !self.pool.is_empty() {
            self.pool.added.notify_one();
        }
        Ok(block)
    }

    /// Stores a block mined with `settings` and does what follows a new dev block:
    /// the clock moves on, a base fee set for it is used up, the pool drops what the block made
    /// stale, the block is final.
    fn store_mined(
        &self,
        block: NewBlock,
        changes: &simnode_api::StateChanges,
        settings: BlockSettings,
        started: std::time::Instant,
    ) -> Result<NewBlock, BlockError> {
        let (store, pool) = (&*self.store, &*self.pool);
        // Final as it is stored: a dev chain's finality is its head's.
        store.commit_final_block(&block, changes)?;
        if settings.base_fee.is_some() {
            // Unless a newer one was set meanwhile.
            let mut next = lock(&self.next_base_fee);
            if *next == settings.base_fee {
                *next = None;
            }
        }
        if settings.prev_randao.is_some() {
            let mut next = lock(&self.next_prev_randao);
            if *next == settings.prev_randao {
                *next = None;
            }
        }
        if let Some(used) = settings.clock.next {
            // Used by this block (unless a newer one was set meanwhile); later blocks' clock
            // goes on from it, as on hardhat and anvil.
            let mut later = lock(&self.clock);
            if later.next == Some(used) {
                later.next = None;
                // Timestamps are below 2^40 (MAX_DEV_TIMESTAMP), so the difference fits.
                later.offset = (i128::from(used) - i128::from(now())) as i64;
            }
        }
        crate::rpc::metrics::record_block_gas(block.header.gas_used, started.elapsed());
        crate::rpc::metrics::record_storage_tries(store.storage_tries_kept(&block.header.hash()));
        let included: Vec<B256> = block
            .body
            .transactions
            .iter()
            .map(|t| *t.tx_hash())
            .collect();
        let state = store.state_after(block.header.number)?;
        pool.on_block(&included, |a| {
            state
                .account(a)
                .ok()
                .flatten()
                .map(|acc| (acc.nonce, acc.balance))
        });
        crate::rpc::metrics::set_head_block(block.header.number);
        tracing::info!(target: "simnode::dev", number = block.header.number, txs = block.body.transactions.len(), gas = block.header.gas_used, "mined block");
        Ok(block)
    }

    /// Takes the chain back to block `number` (which must still be the canonical block
    /// `hash`) and the clock back to `clock`, as `evm_revert` does: the blocks after it are
    /// dropped with their transactions. `false` when the block is no longer on the chain.
    pub fn revert_to(&self, number: u64, hash: B256, clock: DevClock) -> Result<bool, BlockError> {
        let _one_at_a_time = lock(&self.mining);
        if self.store.canonical_hash_raw(number)? != Some(hash) {
            return Ok(false);
        }
        if number < self.store.head().latest {
            // A dev chain's finality is only its head's: it goes back with it.
            self.store.set_finality(Some(number), Some(number))?;
            for (header, _) in self.store.unwind_to(number)? {
                self.store.remove_side_block(&header.hash())?;
            }
            crate::rpc::metrics::set_head_block(number);
            tracing::info!(target: "simnode::dev", number, "reverted to block");
        }
        *lock(&self.clock) = clock;
        Ok(true)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A dev chain has instant finality: its head is also its safe and finalized block, from
/// genesis on (so that `safe` and `finalized` name a block before the first one is mined).
pub fn mark_head_final(store: &Store) -> Result<(), BlockError> {
    let head = store.head();
    if head.safe != Some(head.latest) || head.finalized != Some(head.latest) {
        store.set_finality(Some(head.latest), Some(head.latest))?;
    }
    Ok(())
}

/// Runs the miner until the task is dropped, in the chain's mining mode (and whatever mode
/// it is switched to).
pub async fn run_miner(dev: Arc<DevChain>) {
    let mut modes = dev.mode.subscribe();
    loop {
        let mode = *modes.borrow_and_update();
        let due = match mode {
            // A stored wake-up can outlive the transactions it announced (they were mined with
            // an earlier one), so re-check the pool rather than mining an empty block.
            MiningMode::Auto => tokio::select! {
                () = async {
                    while dev.pool.is_empty() {
                        dev.pool.added.notified().await;
                    }
                } => true,
                changed = modes.changed() => match changed {
                    Ok(()) => false,
                    Err(_) => return,
                },
            },
            MiningMode::Interval(every) => tokio::select! {
                () = tokio::time::sleep(every) => true,
                changed = modes.changed() => match changed {
                    Ok(()) => false,
                    Err(_) => return,
                },
            },
            // The chain holds the sender, and the miner holds the chain: it is never closed.
            MiningMode::Manual => match modes.changed().await {
                Ok(()) => false,
                Err(_) => return,
            },
        };
        if !due {
            continue;
        }
        let miner = dev.clone();
        let allow_empty = matches!(mode, MiningMode::Interval(_));
        let result = tokio::task::spawn_blocking(move || miner.mine(allow_empty)).await;
        match result {
            // Nothing in the pool could be included (e.g. nonce gaps): wait for more.
            Ok(Ok(None)) => tokio::select! {
                () = dev.pool.added.notified() => {}
                _ = modes.changed() => {}
            },
            Ok(Ok(Some(_))) => {}
            Ok(Err(err)) => {
                tracing::error!(target: "simnode::dev", %err, "mining failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(err) => tracing::error!(target: "simnode::dev", %err, "miner task panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    };

    use super::*;
    use crate::store::scratch::ScratchStore;

    /// A dev block is final as it is stored: a reader never sees the new head with the old
    /// safe or finalized block.
    #[test]
    fn mined_blocks_are_final_as_soon_as_they_are_the_head() {
        let store = ScratchStore::open("dev-final", &crate::chain::dev_genesis());
        mark_head_final(&store).expect("genesis is final");
        let dev = DevChain::new(
            Arc::clone(&store),
            Arc::new(Pool::default()),
            MiningMode::Manual,
        );
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (store, done) = (Arc::clone(&store), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let head = store.head();
                    assert_eq!(head.safe, Some(head.latest), "{head:?}");
                    assert_eq!(head.finalized, Some(head.latest), "{head:?}");
                    reads += 1;
                }
                reads
            })
        };
        for _ in 0..100 {
            dev.mine(true).expect("mined");
        }
        done.store(true, Ordering::Relaxed);
        assert!(reader.join().expect("no torn head seen") > 0);
        assert_eq!(store.head().latest, 100);
    }
}
