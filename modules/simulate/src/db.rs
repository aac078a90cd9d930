//! The database a simulation runs on: the stored state after the base block, read through,
//! with every simulated write kept in memory (a revm `CacheDB`) and the hashes of the blocks
//! simulated so far answering `BLOCKHASH`.

use std::sync::{Arc, Mutex, RwLock};

use alloy::primitives::{
    keccak256,
    map::{HashMap, HashSet},
    Address, Bytes, B256, U256,
};
use revm::{
    bytecode::Bytecode,
    database::{AccountState, CacheDB, DbAccount},
    primitives::{AddressMap, U256Map},
    state::{Account, AccountInfo},
    Database, DatabaseCommit, DatabaseRef,
};
use simnode_api::{AccountChange, ChainView, StateError, StateRef};

use crate::system_calls::SystemCallMemo;

/// Bases whose reads are kept (the head and a few before it).
const BASES_KEPT: usize = 3;
/// Entries kept per base, accounts and slots together; past this, reads go to the store.
const MAX_ENTRIES_PER_BASE: usize = 500_000;
/// Bytecodes kept (analysed, by code hash).
const MAX_CODES: usize = 4096;
/// Override codes kept (hashed and analysed, by their bytes), and the largest kept: a wallet
/// or a bundle tool sends the same helper contracts with every request.
const MAX_OVERRIDE_CODES: usize = 256;
const MAX_OVERRIDE_CODE_LEN: usize = 0x6000;

/// Reads of one base state, shared by every simulation on it: the system contracts, the
/// senders and the contracts that requests keep touching are then read from the store once per
/// base block instead of once per request. Keyed by the base block's hash, so that a new head or
/// a reorg starts afresh; the state after a block never changes, so entries never go stale.
#[derive(Debug)]
struct SharedReads {
    hash: B256,
    accounts: RwLock<HashMap<Address, Option<AccountInfo>>>,
    storage: RwLock<HashMap<(Address, U256), U256>>,
    system_calls: Arc<SystemCallMemo>,
}

impl SharedReads {
    fn full(&self) -> bool {
        let accounts = self.accounts.read().map_or(0, |m| m.len());
        let slots = self.storage.read().map_or(0, |m| m.len());
        accounts + slots >= MAX_ENTRIES_PER_BASE
    }
}

static SHARED: Mutex<Vec<Arc<SharedReads>>> = Mutex::new(Vec::new());
/// Bytecode by code hash: the same for every base, and analysed once.
static CODES: RwLock<Option<HashMap<B256, Bytecode>>> = RwLock::new(None);
/// Override code by its bytes: its hash and analysed bytecode.
static OVERRIDE_CODES: RwLock<Option<HashMap<Bytes, (B256, Bytecode)>>> = RwLock::new(None);

/// The code hash and analysed bytecode of `code` given in a state override, remembered so
/// that a request repeating an earlier one's override neither hashes nor analyses it again.
/// Code that begins as an EIP-7702 designator but is not one is plain code, as geth takes any
/// bytes an override gives (running it halts on 0xef).
pub fn override_code(code: &Bytes) -> (B256, Bytecode) {
    if let Some(hit) = OVERRIDE_CODES
        .read()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(code).cloned()))
    {
        return hit;
    }
    let bytecode = Bytecode::new_raw_checked(code.clone())
        .unwrap_or_else(|_| Bytecode::new_legacy(code.clone()));
    // keccak256 of empty code is KECCAK_EMPTY: no case of its own.
    let hash = keccak256(code);
    if code.len() <= MAX_OVERRIDE_CODE_LEN {
        if let Ok(mut m) = OVERRIDE_CODES.write() {
            let m = m.get_or_insert_with(HashMap::default);
            // Full: start over, so that the codes of current traffic get in.
            if m.len() >= MAX_OVERRIDE_CODES {
                m.clear();
            }
            m.insert(code.clone(), (hash, bytecode.clone()));
        }
    }
    (hash, bytecode)
}

fn shared_reads(hash: B256) -> Arc<SharedReads> {
    let mut bases = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = bases.iter().find(|b| b.hash == hash) {
        return b.clone();
    }
    if bases.len() >= BASES_KEPT {
        bases.remove(0);
    }
    let b = Arc::new(SharedReads {
        hash,
        accounts: RwLock::new(HashMap::default()),
        storage: RwLock::new(HashMap::default()),
        system_calls: Arc::default(),
    });
    bases.push(b.clone());
    b
}

/// Read-only base of a simulation.
pub struct BaseDb {
    state: StateRef,
    chain: Arc<dyn ChainView>,
    base: u64,
    /// Hashes of the simulated blocks `base + 1 ..`, in order.
    simulated: Vec<B256>,
    /// Reads shared with the other simulations on the same base block (`None` when the state
    /// could not be tied to the base block's hash).
    shared: Option<Arc<SharedReads>>,
}

impl std::fmt::Debug for BaseDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseDb").field("base", &self.base).finish()
    }
}

impl BaseDb {
    /// `base_hash` is the hash of block `base` as the request resolved it; reads are shared
    /// with other requests only when the state snapshot has that same block at `base`.
    pub fn new(state: StateRef, chain: Arc<dyn ChainView>, base: u64, base_hash: B256) -> Self {
        let same_block = matches!(state.block_hash_ref(base), Ok(h) if h == base_hash);
        let shared = same_block.then(|| shared_reads(base_hash));
        Self {
            state,
            chain,
            base,
            simulated: Vec::new(),
            shared,
        }
    }

    /// System-call results shared with the other simulations on the same base block.
    pub fn system_call_memo(&self) -> Option<Arc<SystemCallMemo>> {
        self.shared.as_ref().map(|s| s.system_calls.clone())
    }

    /// Records the hash of the next simulated block.
    pub fn push_block_hash(&mut self, hash: B256) {
        self.simulated.push(hash);
    }
}

impl DatabaseRef for BaseDb {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        let Some(shared) = &self.shared else {
            return self.state.basic_ref(address);
        };
        if let Some(hit) = shared
            .accounts
            .read()
            .ok()
            .and_then(|m| m.get(&address).cloned())
        {
            return Ok(hit);
        }
        let info = self.state.basic_ref(address)?;
        if !shared.full() {
            if let Ok(mut m) = shared.accounts.write() {
                m.insert(address, info.clone());
            }
        }
        Ok(info)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        if let Some(hit) = CODES
            .read()
            .ok()
            .and_then(|m| m.as_ref().and_then(|m| m.get(&code_hash).cloned()))
        {
            return Ok(hit);
        }
        let code = self.state.code_by_hash_ref(code_hash)?;
        // Only code that is there: a missing entry may still be written by a later block.
        if !code.is_empty() {
            if let Ok(mut m) = CODES.write() {
                let m = m.get_or_insert_with(HashMap::default);
                if m.len() < MAX_CODES {
                    m.insert(code_hash, code.clone());
                }
            }
        }
        Ok(code)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        let Some(shared) = &self.shared else {
            return self.state.storage_ref(address, index);
        };
        if let Some(hit) = shared
            .storage
            .read()
            .ok()
            .and_then(|m| m.get(&(address, index)).copied())
        {
            return Ok(hit);
        }
        let value = self.state.storage_ref(address, index)?;
        if !shared.full() {
            if let Ok(mut m) = shared.storage.write() {
                m.insert((address, index), value);
            }
        }
        Ok(value)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        if number > self.base {
            let i = (number - self.base - 1) as usize;
            return Ok(self.simulated.get(i).copied().unwrap_or_default());
        }
        match self.chain.canonical_hash(number) {
            Ok(Some(hash)) => Ok(hash),
            Ok(None) => Ok(B256::ZERO),
            Err(e) => Err(StateError(e.to_string())),
        }
    }
}

/// The state of a simulation: the base read through, every write kept in memory (a revm
/// `CacheDB`), and the accounts written since the last [`SimDb::take_written`], so that a block's
/// state root looks only at what moved since the block before. Every write goes through
/// [`DatabaseCommit`] or [`SimDb::account_mut`], which record it.
#[derive(Debug)]
pub struct SimDb {
    cache: CacheDB<BaseDb>,
    written: HashSet<Address>,
}

impl SimDb {
    pub fn new(base: BaseDb) -> Self {
        Self {
            cache: CacheDB::new(base),
            written: HashSet::default(),
        }
    }

    pub fn base(&self) -> &BaseDb {
        &self.cache.db
    }

    pub fn base_mut(&mut self) -> &mut BaseDb {
        &mut self.cache.db
    }

    /// Every account loaded or written so far.
    pub fn accounts(&self) -> &AddressMap<DbAccount> {
        &self.cache.cache.accounts
    }

    /// The block hashes `BLOCKHASH` has asked for, by number.
    pub fn block_hashes_mut(&mut self) -> &mut U256Map<B256> {
        &mut self.cache.cache.block_hashes
    }

    /// Makes `bytecode` the code of `hash` (for an override's code).
    pub fn insert_code(&mut self, hash: B256, bytecode: &Bytecode) {
        self.cache
            .cache
            .contracts
            .entry(hash)
            .or_insert_with(|| bytecode.clone());
    }

    /// The account, loaded first if it is not yet, to read.
    pub fn account(&mut self, address: Address) -> Result<&DbAccount, StateError> {
        self.cache.load_account(address).map(|a| &*a)
    }

    /// The account, loaded first if it is not yet, to change: recorded as written.
    pub fn account_mut(&mut self, address: Address) -> Result<&mut DbAccount, StateError> {
        self.written.insert(address);
        self.cache.load_account(address)
    }

    /// The accounts written since the last call.
    pub fn take_written(&mut self) -> HashSet<Address> {
        std::mem::take(&mut self.written)
    }

    /// How every account differs from the base state now: what the changes of the written
    /// accounts, block by block, must add up to (checked in debug builds).
    pub fn changes(&self, touched: &HashSet<Address>) -> simnode_api::StateChanges {
        self.cache
            .cache
            .accounts
            .keys()
            .filter_map(|address| Some((*address, self.change_of(*address, touched)?)))
            .collect()
    }

    /// How `address` differs from the base state now (`None`: not at all).
    ///
    /// The cache also holds what was only read (slots, and accounts touched by system calls with
    /// nothing changed); those are left out, so that the state root rehashes only real changes.
    ///
    /// `touched` are the accounts transactions touched (see `Runner::touched`): of those, the
    /// empty ones are removed (EIP-161, which ignores storage, as geth's `empty()` does).
    pub fn change_of(&self, address: Address, touched: &HashSet<Address>) -> Option<AccountChange> {
        let account = self.cache.cache.accounts.get(&address)?;
        let base = &self.cache.db;
        let (wipe_storage, exists) = match account.account_state {
            // Only read, never written.
            AccountState::None => return None,
            AccountState::NotExisting => (true, false),
            AccountState::Touched => (false, true),
            AccountState::StorageCleared => (true, true),
        };
        let removed = touched.contains(&address) && account.info.is_empty();
        let info = (exists && !removed).then(|| account.info.clone());
        let base_info = base.basic_ref(address);
        if info.is_none() {
            // Removing an account the base does not have changes nothing.
            if matches!(base_info, Ok(None)) {
                return None;
            }
            return Some(AccountChange {
                wipe_storage: true,
                storage: Default::default(),
                info,
            });
        }
        let storage: std::collections::BTreeMap<U256, U256> = if wipe_storage {
            account.storage.iter().map(|(k, v)| (*k, *v)).collect()
        } else {
            account
                .storage
                .iter()
                .filter(|(k, v)| !matches!(base.storage_ref(address, **k), Ok(b) if b == **v))
                .map(|(k, v)| (*k, *v))
                .collect()
        };
        if !wipe_storage && storage.is_empty() {
            let unchanged = matches!(&base_info, Ok(Some(b)) if b.nonce == account.info.nonce
                && b.balance == account.info.balance
                && b.code_hash == account.info.code_hash);
            if unchanged {
                return None;
            }
        }
        Some(AccountChange {
            wipe_storage,
            storage,
            info,
        })
    }
}

impl Database for SimDb {
    type Error = StateError;

    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        self.cache.basic(address)
    }

    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, StateError> {
        self.cache.code_by_hash(code_hash)
    }

    fn storage(&mut self, address: Address, index: U256) -> Result<U256, StateError> {
        self.cache.storage(address, index)
    }

    fn block_hash(&mut self, number: u64) -> Result<B256, StateError> {
        self.cache.block_hash(number)
    }
}

impl DatabaseRef for SimDb {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        self.cache.basic_ref(address)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, StateError> {
        self.cache.code_by_hash_ref(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, StateError> {
        self.cache.storage_ref(address, index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, StateError> {
        self.cache.block_hash_ref(number)
    }
}

impl DatabaseCommit for SimDb {
    fn commit(&mut self, changes: AddressMap<Account>) {
        // The cache keeps only touched accounts' changes.
        self.written.extend(
            changes
                .iter()
                .filter(|(_, account)| account.is_touched())
                .map(|(address, _)| *address),
        );
        self.cache.commit(changes);
    }
}

#[cfg(test)]
mod tests {
    use revm::primitives::KECCAK_EMPTY;

    use super::*;

    #[test]
    fn override_codes_are_remembered_each_under_its_own_bytes() {
        // PUSH1 4, JUMP, INVALID, JUMPDEST, STOP; and the same with the JUMPDEST one byte on.
        let a = Bytes::from_static(&[0x60, 0x04, 0x56, 0xfe, 0x5b, 0x00]);
        let b = Bytes::from_static(&[0x60, 0x05, 0x56, 0xfe, 0xfe, 0x5b, 0x00]);
        for _ in 0..2 {
            for (code, jumpdest, not_jumpdest) in [(&a, 4, 5), (&b, 5, 4)] {
                let (hash, bytecode) = override_code(code);
                assert_eq!(hash, keccak256(code));
                assert_eq!(bytecode.original_bytes(), *code);
                let jumps = bytecode.legacy_jump_table().expect("legacy code");
                assert!(jumps.is_valid(jumpdest) && !jumps.is_valid(not_jumpdest));
            }
        }
        assert_eq!(override_code(&Bytes::new()).0, KECCAK_EMPTY);
        // A malformed EIP-7702 designator is plain code, the second time too.
        let bad = Bytes::from_static(&[0xef, 0x01, 0x00, 0x01]);
        for _ in 0..2 {
            let (_, bytecode) = override_code(&bad);
            assert!(bytecode.legacy_jump_table().is_some());
            assert_eq!(bytecode.original_bytes(), bad);
        }
    }
}
