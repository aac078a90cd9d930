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
#[derive(Debug, Clone, Default, PartialEq)]
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

/// The changes of a run of roots on one base (the blocks of one simulation, the transactions of
/// a pre-Byzantium block), with what the view keeps between them. Each root holds the changes
/// of the ones before it; the carry knows which accounts changed since the last root, so that
/// the view hashes again only the paths of those instead of every path changed so far.
///
/// Start one per run, [`RootCarry::set`] every account that changed since the last root, and
/// pass it to [`crate::ChainView::state_root_carried`]. What the view keeps is opaque to modules.
#[derive(Default)]
pub struct RootCarry {
    changes: StateChanges,
    /// Accounts whose entry in `changes` moved since the view last took them.
    moved: Vec<Address>,
    view: Option<Box<dyn std::any::Any + Send>>,
}

impl RootCarry {
    /// Records how `address` differs from the base now (`None`: not at all). Setting what is
    /// already there is not a move.
    pub fn set(&mut self, address: Address, change: Option<AccountChange>) {
        let same = self.changes.get(&address) == change.as_ref();
        if same {
            return;
        }
        match change {
            Some(change) => self.changes.insert(address, change),
            None => self.changes.remove(&address),
        };
        self.moved.push(address);
    }

    /// Records `changes` as every account that differs from the base now: the ones not in it
    /// no longer do.
    pub fn set_all(&mut self, changes: StateChanges) {
        let back: Vec<Address> = self
            .changes
            .keys()
            .filter(|address| !changes.contains_key(*address))
            .copied()
            .collect();
        for address in back {
            self.set(address, None);
        }
        for (address, change) in changes {
            self.set(address, Some(change));
        }
    }

    /// Every account that differs from the base.
    pub fn changes(&self) -> &StateChanges {
        &self.changes
    }

    /// For views: the changes, the accounts set since the last call (or every changed one when
    /// the view's state of type `T` is new: created on first use, after [`RootCarry::forget`],
    /// or when a view of another kind left something else), and that state.
    pub fn take_moves<T: std::any::Any + Send + Default>(
        &mut self,
    ) -> (&StateChanges, Vec<Address>, &mut T) {
        let fresh = !self.view.as_ref().is_some_and(|held| held.is::<T>());
        if fresh {
            self.view = Some(Box::new(T::default()));
        }
        let moved = if fresh {
            self.moved.clear();
            self.changes.keys().copied().collect()
        } else {
            let mut moved = std::mem::take(&mut self.moved);
            moved.sort_unstable();
            moved.dedup();
            moved
        };
        let state = self
            .view
            .as_mut()
            .and_then(|held| held.downcast_mut::<T>())
            .expect("a value of type T was just stored");
        (&self.changes, moved, state)
    }

    /// Drops what the view kept (a view computing a root without it: the next
    /// [`RootCarry::take_moves`] starts over from every change).
    pub fn forget(&mut self) {
        self.view = None;
        self.moved.clear();
    }
}

impl std::fmt::Debug for RootCarry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootCarry")
            .field("changes", &self.changes.len())
            .field("moved", &self.moved.len())
            .field("view", &self.view.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(balance: u64) -> AccountChange {
        AccountChange {
            info: Some(AccountInfo {
                balance: U256::from(balance),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// What a view takes from a carry: every change the first time (and after `forget` or
    /// when another kind of view held it), then only the accounts whose change moved, once each.
    #[test]
    fn a_view_takes_every_change_first_then_only_what_moved() {
        let (a, b, c) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
        );
        let mut carry = RootCarry::default();
        carry.set(a, Some(change(1)));
        carry.set(b, Some(change(2)));
        let (_, mut moved, _) = carry.take_moves::<u8>();
        moved.sort();
        assert_eq!(moved, vec![a, b]);

        carry.set(a, Some(change(1))); // the same as before: no move
        carry.set(b, Some(change(3)));
        carry.set(b, Some(change(4)));
        carry.set(c, None); // not changed before, not changed now: no move
        let (changes, moved, _) = carry.take_moves::<u8>();
        assert_eq!(moved, vec![b]);
        assert_eq!(changes.get(&b), Some(&change(4)));

        // Back to the base, and a whole new set with one account fewer.
        carry.set(a, None);
        let (changes, moved, _) = carry.take_moves::<u8>();
        assert_eq!((moved, changes.len()), (vec![a], 1));
        carry.set_all(StateChanges::from_iter([(c, change(5))]));
        let (changes, mut moved, _) = carry.take_moves::<u8>();
        moved.sort();
        assert_eq!(moved, vec![b, c]);
        assert_eq!(changes.keys().collect::<Vec<_>>(), vec![&c]);

        // A view of another kind, or after forget, starts from every change.
        carry.set(a, Some(change(6)));
        let all = |mut moved: Vec<Address>| {
            moved.sort();
            moved
        };
        assert_eq!(all(carry.take_moves::<u16>().1), vec![a, c]);
        assert!(carry.take_moves::<u16>().1.is_empty());
        carry.forget();
        assert_eq!(all(carry.take_moves::<u16>().1), vec![a, c]);
    }
}
