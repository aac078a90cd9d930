//! The database a simulation runs on: the stored state after the base block, read through,
//! with every simulated write kept in memory (a revm `CacheDB`) and the hashes of the blocks
//! simulated so far answering `BLOCKHASH`.

use std::sync::Arc;

use alloy::primitives::{Address, B256, U256};
use revm::{
    bytecode::Bytecode,
    database::{AccountState, CacheDB},
    state::AccountInfo,
    DatabaseRef,
};
use simnode_api::{AccountChange, ChainView, StateChanges, StateError, StateRef};

/// Read-only base of a simulation.
pub struct BaseDb {
    state: StateRef,
    chain: Arc<dyn ChainView>,
    base: u64,
    /// Hashes of the simulated blocks `base + 1 ..`, in order.
    simulated: Vec<B256>,
}

impl std::fmt::Debug for BaseDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseDb").field("base", &self.base).finish()
    }
}

impl BaseDb {
    pub fn new(state: StateRef, chain: Arc<dyn ChainView>, base: u64) -> Self {
        Self {
            state,
            chain,
            base,
            simulated: Vec::new(),
        }
    }

    /// Records the hash of the next simulated block.
    pub fn push_block_hash(&mut self, hash: B256) {
        self.simulated.push(hash);
    }
}

impl DatabaseRef for BaseDb {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        self.state.basic_ref(address)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        self.state.code_by_hash_ref(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        self.state.storage_ref(address, index)
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

pub type SimDb = CacheDB<BaseDb>;

/// Everything the simulation changed against the base state, for the state root.
pub fn collect_changes(db: &SimDb) -> StateChanges {
    let mut changes = StateChanges::with_capacity(db.cache.accounts.len());
    for (address, account) in &db.cache.accounts {
        let (wipe_storage, exists) = match account.account_state {
            // Only read, never written.
            AccountState::None => continue,
            AccountState::NotExisting => (true, false),
            AccountState::Touched => (false, true),
            AccountState::StorageCleared => (true, true),
        };
        let storage: std::collections::BTreeMap<U256, U256> =
            account.storage.iter().map(|(k, v)| (*k, *v)).collect();
        // EIP-161: an empty account is removed, unless storage was given to it explicitly.
        let empty = account.info.is_empty() && storage.values().all(|v| v.is_zero());
        let info = (exists && !empty).then(|| account.info.clone());
        changes.insert(
            *address,
            AccountChange {
                wipe_storage: wipe_storage || info.is_none(),
                storage: if info.is_some() {
                    storage
                } else {
                    Default::default()
                },
                info,
            },
        );
    }
    changes
}
