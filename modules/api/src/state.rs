//! State access for modules: a read-only revm database for "the state after block N", and
//! the change set a module hands back to have a state root computed.

use alloy::primitives::{Address, B256, U256};
use revm::{
    bytecode::Bytecode, database_interface::DBErrorMarker, state::AccountInfo, DatabaseRef,
};
use std::collections::{BTreeMap, HashMap};

/// A failure reading stored state (the database, not the request, is at fault).
#[derive(Debug, Clone, thiserror::Error)]
#[error("state read failed: {0}")]
pub struct StateError(pub String);

impl DBErrorMarker for StateError {}

/// A revm database over stored state. `Debug` because alloy-evm's EVM requires it of its database.
pub trait StateReader: DatabaseRef<Error = StateError> + std::fmt::Debug + Send + Sync {}

impl<T: DatabaseRef<Error = StateError> + std::fmt::Debug + Send + Sync> StateReader for T {}

/// State after one stored block. Reads are consistent: they come from one database snapshot.
pub type StateRef = Box<dyn StateReader>;

/// A [`StateRef`] as a sized revm database, to put under a `CacheDB` (revm's database traits
/// are not implemented for boxed trait objects).
pub struct StateDb(pub StateRef);

impl std::fmt::Debug for StateDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateDb")
    }
}

impl DatabaseRef for StateDb {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        self.0.basic_ref(address)
    }
    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, StateError> {
        self.0.code_by_hash_ref(code_hash)
    }
    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, StateError> {
        self.0.storage_ref(address, index)
    }
    fn block_hash_ref(&self, number: u64) -> Result<B256, StateError> {
        self.0.block_hash_ref(number)
    }
}

/// How one account differs from the base state.
#[derive(Debug, Clone, Default)]
pub struct AccountChange {
    /// The account afterwards; `None` when it no longer exists (self-destructed or touched empty).
    pub info: Option<AccountInfo>,
    /// All storage of the base state is gone (self-destruct, or `state` override replacing it).
    pub wipe_storage: bool,
    /// Slots written afterwards (a zero value deletes the slot).
    pub storage: BTreeMap<U256, U256>,
}

/// Changes against a base state, keyed by address.
pub type StateChanges = HashMap<Address, AccountChange>;

/// What a view keeps between the state roots of one simulation's blocks. Each simulated block's
/// changes include those of the blocks before it, so without a carry the root of block `k`
/// hashes again every path the first `k - 1` blocks changed; with one, only the paths whose
/// changes differ from what an earlier root of the same simulation saw.
///
/// Opaque to modules: start one per simulation and pass it to every
/// [`crate::ChainView::state_root_with`] call on the same base. The view decides what it holds.
#[derive(Default)]
pub struct RootCarry(Option<Box<dyn std::any::Any + Send>>);

impl RootCarry {
    /// The view's state of type `T`, created empty on first use (or when a view of another kind
    /// left something else).
    pub fn get_or_default<T: std::any::Any + Send + Default>(&mut self) -> &mut T {
        if !self.0.as_ref().is_some_and(|held| held.is::<T>()) {
            self.0 = Some(Box::new(T::default()));
        }
        self.0
            .as_mut()
            .and_then(|held| held.downcast_mut::<T>())
            .expect("a value of type T was just stored")
    }
}

impl std::fmt::Debug for RootCarry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "RootCarry(held)"
        } else {
            "RootCarry(empty)"
        })
    }
}
