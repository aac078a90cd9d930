//! The block's system calls (EIP-2935 and EIP-4788 before the calls, EIP-7002 and EIP-7251
//! after them), remembered per base block.
//!
//! Every simulated block makes these four calls: on a busy head every request repeats the
//! same executions (about a tenth of a one-transfer simulation, and of each later block of a
//! multi-block one). A call's result depends only on its inputs, the block environment, the
//! accounts it loads (their balance, nonce and code) and the storage slots it reads, provided
//! it asks for no block hash (the simulated blocks' hashes differ from request to request)
//! and no precompile was moved (which the accounts it loads do not show). So each result is
//! recorded with what the call read, and a later call with the same inputs in the same block
//! environment takes the recorded result when the simulation's state holds those same
//! values. Anything else runs the call.
//!
//! alloy-evm's `SystemCaller` still decides which calls a block makes and what their results
//! mean; [`BlockEvm`] only answers its `transact_system_call`.

use std::{
    ops::{Deref, DerefMut},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, RwLock,
    },
};

use alloy::primitives::{map::HashMap, Address, Bytes, B256, U256};
use alloy_evm::{eth::EthEvm, Evm, EvmEnv};
use revm::{
    context::{BlockEnv, CfgEnv, TxEnv},
    context_interface::result::{EVMError, HaltReason, ResultAndState},
    database::AccountState,
    primitives::hardfork::SpecId,
    state::{AccountInfo, EvmState},
    DatabaseRef,
};
use simnode_api::StateError;

use crate::{db::SimDb, inspector::SimInspector, precompiles::SimPrecompiles};

/// Block environments kept per base block (a request with unusual block overrides adds one per
/// simulated block), calls kept per block environment (a block makes four system calls), and
/// results kept per call, each for other values read (the requests on one head that differ in
/// what their earlier blocks left in the system contracts); past these nothing more is kept.
const MAX_BLOCKS: usize = 256;
const MAX_CALLS_PER_BLOCK: usize = 8;
const MAX_VARIANTS: usize = 4;
/// Slots (read or changed) and accounts one recorded result may hold, and all of one base
/// block's results together: an overridden system contract can touch any number of them. The
/// canonical contracts touch a few each, and about fifty for a full EIP-7002 dequeue.
const MAX_SLOTS_PER_RESULT: usize = 256;
const MAX_SLOTS_PER_BASE: usize = 1 << 16;

/// What a system call's result can depend on besides its own inputs and the state it loads:
/// the same for every system call of one simulated block.
#[derive(PartialEq, Eq, Hash)]
struct BlockKey {
    block: BlockEnv,
    spec: SpecId,
    disable_nonce_check: bool,
    disable_base_fee: bool,
}

/// A system call's own inputs.
#[derive(PartialEq, Eq, Hash)]
struct CallKey {
    caller: Address,
    contract: Address,
    data: Bytes,
}

/// A system call's result and what the call read to get it.
#[derive(Debug)]
struct Recorded {
    /// The result, with only the slots the call changed (see [`BlockCalls::insert`]).
    result: ResultAndState<HaltReason>,
    /// Every account the call loaded, as it was before the call, with the slots it read.
    reads: Vec<AccountRead>,
    /// Recorded while none of those accounts had been loaded by the simulation, so on the
    /// base state: a call that finds them still unloaded reads the same without looking.
    on_base: bool,
}

#[derive(Debug)]
struct AccountRead {
    address: Address,
    balance: U256,
    nonce: u64,
    code_hash: B256,
    /// Slot and the value the call found in it.
    slots: Vec<(U256, U256)>,
}

/// System-call results on one base block (held with the base block's shared reads, so a new
/// head starts afresh).
#[derive(Debug)]
pub struct SystemCallMemo {
    blocks: RwLock<HashMap<BlockKey, Arc<BlockCalls>>>,
    /// What is left of [`MAX_SLOTS_PER_BASE`], shared by its blocks' results.
    slots_left: Arc<AtomicUsize>,
}

impl Default for SystemCallMemo {
    fn default() -> Self {
        Self {
            blocks: RwLock::default(),
            slots_left: Arc::new(AtomicUsize::new(MAX_SLOTS_PER_BASE)),
        }
    }
}

/// The results recorded for one block environment.
#[derive(Debug)]
pub struct BlockCalls {
    results: RwLock<HashMap<CallKey, Vec<Arc<Recorded>>>>,
    slots_left: Arc<AtomicUsize>,
}

impl std::fmt::Debug for BlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockKey")
            .field("number", &self.block.number)
            .field("timestamp", &self.block.timestamp)
            .finish()
    }
}

impl std::fmt::Debug for CallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallKey")
            .field("contract", &self.contract)
            .finish()
    }
}

impl SystemCallMemo {
    /// The results of the block environment `evm` runs in (looked up once per block rather
    /// than hashing the block environment on every call).
    fn for_block(&self, evm: &SimEvm<'_, '_>) -> Option<Arc<BlockCalls>> {
        let cfg = evm.cfg_env();
        let key = BlockKey {
            block: evm.block().clone(),
            spec: cfg.spec,
            disable_nonce_check: cfg.disable_nonce_check,
            disable_base_fee: cfg.disable_base_fee,
        };
        if let Some(calls) = self.blocks.read().ok()?.get(&key) {
            return Some(calls.clone());
        }
        let mut blocks = self.blocks.write().ok()?;
        if blocks.len() >= MAX_BLOCKS && !blocks.contains_key(&key) {
            return None;
        }
        let calls = blocks.entry(key).or_insert_with(|| {
            Arc::new(BlockCalls {
                results: RwLock::default(),
                slots_left: self.slots_left.clone(),
            })
        });
        Some(calls.clone())
    }
}

impl BlockCalls {
    /// The first recorded result for `key` that `reads_match` accepts.
    fn find(
        &self,
        key: &CallKey,
        reads_match: impl Fn(&Recorded) -> bool,
    ) -> Option<ResultAndState<HaltReason>> {
        let results = self.results.read().ok()?;
        results
            .get(key)?
            .iter()
            .find(|recorded| reads_match(recorded))
            .map(|recorded| recorded.result.clone())
    }

    /// Records `result` without the slots the call only read: those hold, wherever a recorded
    /// result is taken, the values the call read, and committing leaves them as they are.
    fn insert(
        &self,
        key: CallKey,
        mut result: ResultAndState<HaltReason>,
        reads: Vec<AccountRead>,
        on_base: bool,
    ) {
        for account in result.state.values_mut() {
            account.storage.retain(|_, slot| slot.is_changed());
        }
        let slots = result
            .state
            .values()
            .map(|a| a.storage.len())
            .sum::<usize>()
            + reads.iter().map(|r| 1 + r.slots.len()).sum::<usize>();
        if slots > MAX_SLOTS_PER_RESULT {
            return;
        }
        let Ok(mut results) = self.results.write() else {
            return;
        };
        if results.len() >= MAX_CALLS_PER_BLOCK && !results.contains_key(&key) {
            return;
        }
        let variants = results.entry(key).or_default();
        if variants.len() >= MAX_VARIANTS {
            return;
        }
        let within_budget = self
            .slots_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(slots)
            })
            .is_ok();
        if within_budget {
            variants.push(Arc::new(Recorded {
                result,
                reads,
                on_base,
            }));
        }
    }
}

pub type SimEvm<'db, 'i> = EthEvm<&'db mut SimDb, &'i mut SimInspector, SimPrecompiles>;

/// The EVM of one simulated block: the simulation's EVM, whose system calls are answered from
/// the base block's [`SystemCallMemo`] when they can be.
pub struct BlockEvm<'db, 'i> {
    evm: SimEvm<'db, 'i>,
    /// The recorded results for this block's environment; `None` once the request has moved
    /// or replaced a precompile (which the accounts a call loads do not show).
    memo: Option<Arc<BlockCalls>>,
}

impl<'db, 'i> BlockEvm<'db, 'i> {
    pub fn new(evm: SimEvm<'db, 'i>, memo: Option<Arc<SystemCallMemo>>) -> Self {
        let memo = memo.and_then(|m| m.for_block(&evm));
        Self { evm, memo }
    }
}

/// Whether the simulation's state holds what the call of `recorded` read, looked up without
/// loading anything. An account the simulation has not loaded still reads as the base block
/// has it (the cache loads an account on its first read and keeps every write).
fn reads_still_hold(db: &SimDb, recorded: &Recorded) -> bool {
    let cache = db.accounts();
    if recorded.on_base
        && recorded
            .reads
            .iter()
            .all(|r| !cache.contains_key(&r.address))
    {
        return true;
    }
    recorded.reads.iter().all(|read| read_still_holds(db, read))
}

/// One account's part of [`reads_still_hold`], read through the cache's `DatabaseRef`, which
/// answers as `CacheDB` would without loading anything.
fn read_still_holds(db: &SimDb, read: &AccountRead) -> bool {
    let same_account =
        matches!(db.basic_ref(read.address), Ok(Some(info)) if same_fields(&info, read));
    same_account
        && read.slots.iter().all(|(slot, value)| {
            db.storage_ref(read.address, *slot)
                .is_ok_and(|now| now == *value)
        })
}

fn same_fields(info: &AccountInfo, read: &AccountRead) -> bool {
    info.balance == read.balance && info.nonce == read.nonce && info.code_hash == read.code_hash
}

/// What the call that produced `state` read, for recording: every account it loaded as the
/// cache had it before the call (the call loads into the cache, and its changes are not
/// committed yet) with the slots it read. `None` when the call created, destroyed or changed
/// an account's balance, nonce or code, or loaded one that did not exist: then the state
/// before the call is not all in these reads, and the result is not recorded.
fn reads_of(db: &SimDb, state: &EvmState) -> Option<Vec<AccountRead>> {
    state
        .iter()
        .map(|(address, account)| {
            let before = db.accounts().get(address)?;
            let unchanged = before.account_state != AccountState::NotExisting
                && !account.is_created()
                && !account.is_selfdestructed()
                && before.info.balance == account.info.balance
                && before.info.nonce == account.info.nonce
                && before.info.code_hash == account.info.code_hash;
            unchanged.then(|| AccountRead {
                address: *address,
                balance: before.info.balance,
                nonce: before.info.nonce,
                code_hash: before.info.code_hash,
                slots: account
                    .storage
                    .iter()
                    .map(|(slot, value)| (*slot, value.original_value))
                    .collect(),
            })
        })
        .collect()
}

impl<'db, 'i> Deref for BlockEvm<'db, 'i> {
    type Target = SimEvm<'db, 'i>;

    fn deref(&self) -> &Self::Target {
        &self.evm
    }
}

impl DerefMut for BlockEvm<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.evm
    }
}

impl<'db, 'i> Evm for BlockEvm<'db, 'i> {
    type DB = &'db mut SimDb;
    type Tx = TxEnv;
    type Error = EVMError<StateError>;
    type HaltReason = HaltReason;
    type Spec = SpecId;
    type BlockEnv = BlockEnv;
    type Precompiles = SimPrecompiles;
    type Inspector = &'i mut SimInspector;

    fn block(&self) -> &BlockEnv {
        self.evm.block()
    }

    fn cfg_env(&self) -> &CfgEnv<SpecId> {
        self.evm.cfg_env()
    }

    fn chain_id(&self) -> u64 {
        self.evm.chain_id()
    }

    fn transact_raw(&mut self, tx: TxEnv) -> Result<ResultAndState<HaltReason>, Self::Error> {
        self.evm.transact_raw(tx)
    }

    fn transact_system_call(
        &mut self,
        caller: Address,
        contract: Address,
        data: Bytes,
    ) -> Result<ResultAndState<HaltReason>, Self::Error> {
        let Some(memo) = self.memo.clone() else {
            return self.evm.transact_system_call(caller, contract, data);
        };
        let key = CallKey {
            caller,
            contract,
            data: data.clone(),
        };
        let db: &SimDb = self.evm.db();
        if let Some(known) = memo.find(&key, |recorded| reads_still_hold(db, recorded)) {
            return Ok(known);
        }
        // The accounts the call can load that the simulation has not loaded yet (the call
        // loads them into the cache, so this is asked before).
        let cache = db.accounts();
        let unloaded: Vec<Address> = [caller, contract, self.evm.block().beneficiary]
            .into_iter()
            .filter(|address| !cache.contains_key(address))
            .collect();
        // Block hashes the call asks for land in the cache's (empty here, the earlier ones
        // set aside): such a call is not recorded.
        let earlier_hashes = std::mem::take(self.evm.db_mut().block_hashes_mut());
        let result = self.evm.transact_system_call(caller, contract, data);
        let db: &mut SimDb = self.evm.db_mut();
        let asked_block_hash = !db.block_hashes_mut().is_empty();
        db.block_hashes_mut().extend(earlier_hashes);
        let result = result?;
        if !asked_block_hash {
            if let Some(reads) = reads_of(db, &result.state) {
                let on_base = result
                    .state
                    .keys()
                    .all(|address| unloaded.contains(address));
                memo.insert(key, result.clone(), reads, on_base);
            }
        }
        Ok(result)
    }

    fn finish(self) -> (Self::DB, EvmEnv<SpecId>) {
        self.evm.finish()
    }

    fn set_inspector_enabled(&mut self, enabled: bool) {
        self.evm.set_inspector_enabled(enabled);
    }

    fn components(&self) -> (&Self::DB, &Self::Inspector, &Self::Precompiles) {
        self.evm.components()
    }

    fn components_mut(&mut self) -> (&mut Self::DB, &mut Self::Inspector, &mut Self::Precompiles) {
        self.evm.components_mut()
    }
}
