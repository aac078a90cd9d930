//! State roots: the stored state (a sorted scan of the hashed tables) merged with an overlay of
//! changes, fed leaf by leaf into a hash builder.
//!
//! The account trie is rebuilt from every account on each call; only storage tries of changed
//! accounts are rebuilt. That is linear in the number of accounts, fine for test, dev and
//! devnet-sized states; an incremental trie is the step after this one.

use std::collections::BTreeMap;

use alloy::{
    genesis::GenesisAccount,
    primitives::{keccak256, Address, B256, U256},
};
use alloy_trie::{HashBuilder, Nibbles, EMPTY_ROOT_HASH};
use revm::primitives::KECCAK_EMPTY;

use super::codec::{hash_address, StoredAccount};

/// An account in an overlay. `storage_root` is known when the overlay carries a whole stored
/// account (history); `None` when it must be taken from storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlayAccount {
    pub nonce: u64,
    pub balance: U256,
    pub code_hash: B256,
    pub storage_root: Option<B256>,
}

#[derive(Debug, Clone, Default)]
pub struct StorageOverlay {
    /// Ignore the stored slots of this account.
    pub wiped: bool,
    /// Hashed slot -> value; zero deletes.
    pub slots: BTreeMap<B256, U256>,
}

/// Changes on top of a state source, keyed by hashed address.
#[derive(Debug, Clone, Default)]
pub struct HashedOverlay {
    /// `None`: the account does not exist.
    pub accounts: BTreeMap<B256, Option<OverlayAccount>>,
    pub storage: BTreeMap<B256, StorageOverlay>,
}

/// Sorted read access to a stored state.
pub trait StateSource {
    type Error;
    fn account(&self, hashed: &B256) -> Result<Option<StoredAccount>, Self::Error>;
    /// Every account, ascending by hashed address.
    fn for_each_account(&self, f: &mut dyn FnMut(B256, StoredAccount)) -> Result<(), Self::Error>;
    /// Every non-zero slot of one account, ascending by hashed slot.
    fn for_each_slot(
        &self,
        hashed: &B256,
        f: &mut dyn FnMut(B256, U256),
    ) -> Result<(), Self::Error>;
}

/// The root and, for every account of the overlay that exists afterwards, its storage root.
#[derive(Debug, Clone)]
pub struct RootOutput {
    pub state_root: B256,
    pub storage_roots: BTreeMap<B256, B256>,
}

pub fn storage_root<S: StateSource>(
    source: &S,
    hashed: &B256,
    overlay: &StorageOverlay,
) -> Result<B256, S::Error> {
    let mut stored = Vec::new();
    if !overlay.wiped {
        source.for_each_slot(hashed, &mut |k, v| stored.push((k, v)))?;
    }
    let mut hb = HashBuilder::default();
    let mut any = false;
    merge_sorted(
        stored.into_iter(),
        overlay.slots.iter().map(|(k, v)| (*k, *v)),
        |key, value| {
            if !value.is_zero() {
                any = true;
                hb.add_leaf(Nibbles::unpack(key), &alloy::rlp::encode(value));
            }
        },
    );
    Ok(if any { hb.root() } else { EMPTY_ROOT_HASH })
}

pub fn state_root<S: StateSource>(
    source: &S,
    overlay: &HashedOverlay,
) -> Result<RootOutput, S::Error> {
    let mut storage_roots = BTreeMap::new();
    for (hashed, slots) in &overlay.storage {
        storage_roots.insert(*hashed, storage_root(source, hashed, slots)?);
    }
    // Resolve the overlay's accounts to full trie accounts first (this may read the source),
    // then walk the stored accounts once.
    let mut resolved: BTreeMap<B256, Option<StoredAccount>> = BTreeMap::new();
    for (hashed, account) in &overlay.accounts {
        let value = match account {
            None => None,
            Some(a) => {
                let root = match (storage_roots.get(hashed), a.storage_root) {
                    (Some(root), _) => *root,
                    (None, Some(root)) => root,
                    (None, None) => source
                        .account(hashed)?
                        .map_or(EMPTY_ROOT_HASH, |s| s.storage_root),
                };
                Some(StoredAccount {
                    nonce: a.nonce,
                    balance: a.balance,
                    code_hash: a.code_hash,
                    storage_root: root,
                })
            }
        };
        resolved.insert(*hashed, value);
    }
    let mut stored = Vec::new();
    source.for_each_account(&mut |k, v| stored.push((k, v)))?;
    // Storage changed without an account entry in the overlay: patch the stored account's root.
    for (hashed, root) in &storage_roots {
        if !resolved.contains_key(hashed) {
            if let Some(mut acc) = source.account(hashed)? {
                acc.storage_root = *root;
                resolved.insert(*hashed, Some(acc));
            }
        }
    }
    let mut hb = HashBuilder::default();
    let mut out_roots = BTreeMap::new();
    let overlay_iter = resolved.iter().map(|(k, v)| (*k, *v));
    merge_sorted(
        stored.into_iter().map(|(k, v)| (k, Some(v))),
        overlay_iter,
        |key, value| {
            if let Some(acc) = value {
                hb.add_leaf(
                    Nibbles::unpack(key),
                    &alloy::rlp::encode(acc.trie_account()),
                );
            }
        },
    );
    for (hashed, value) in &resolved {
        if let Some(acc) = value {
            out_roots.insert(*hashed, acc.storage_root);
        }
    }
    Ok(RootOutput {
        state_root: hb.root(),
        storage_roots: out_roots,
    })
}

/// Walks two ascending streams; where both hold a key, the overlay wins.
fn merge_sorted<V>(
    stored: impl Iterator<Item = (B256, V)>,
    overlay: impl Iterator<Item = (B256, V)>,
    mut f: impl FnMut(B256, V),
) {
    let mut a = stored.peekable();
    let mut b = overlay.peekable();
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => {
                let (k, v) = a.next().expect("peeked");
                f(k, v)
            }
            (None, Some(_)) => {
                let (k, v) = b.next().expect("peeked");
                f(k, v)
            }
            (Some((ka, _)), Some((kb, _))) => {
                if ka < kb {
                    let (k, v) = a.next().expect("peeked");
                    f(k, v)
                } else if kb < ka {
                    let (k, v) = b.next().expect("peeked");
                    f(k, v)
                } else {
                    a.next();
                    let (k, v) = b.next().expect("peeked");
                    f(k, v)
                }
            }
        }
    }
}

/// The empty state, for genesis.
pub struct EmptySource;

impl StateSource for EmptySource {
    type Error = std::convert::Infallible;
    fn account(&self, _: &B256) -> Result<Option<StoredAccount>, Self::Error> {
        Ok(None)
    }
    fn for_each_account(&self, _: &mut dyn FnMut(B256, StoredAccount)) -> Result<(), Self::Error> {
        Ok(())
    }
    fn for_each_slot(&self, _: &B256, _: &mut dyn FnMut(B256, U256)) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The genesis allocation as an overlay on the empty state.
pub fn genesis_overlay(alloc: &BTreeMap<Address, GenesisAccount>) -> HashedOverlay {
    let mut overlay = HashedOverlay::default();
    for (address, account) in alloc {
        let hashed = hash_address(address);
        let code_hash = account
            .code
            .as_ref()
            .filter(|c| !c.is_empty())
            .map_or(KECCAK_EMPTY, keccak256);
        overlay.accounts.insert(
            hashed,
            Some(OverlayAccount {
                nonce: account.nonce.unwrap_or_default(),
                balance: account.balance,
                code_hash,
                storage_root: None,
            }),
        );
        let mut storage = StorageOverlay {
            wiped: true,
            slots: BTreeMap::new(),
        };
        for (slot, value) in account.storage.iter().flatten() {
            storage
                .slots
                .insert(keccak256(slot), U256::from_be_bytes(value.0));
        }
        overlay.storage.insert(hashed, storage);
    }
    overlay
}

pub fn genesis_state_root(alloc: &BTreeMap<Address, GenesisAccount>) -> B256 {
    match state_root(&EmptySource, &genesis_overlay(alloc)) {
        Ok(out) => out.state_root,
        Err(never) => match never {},
    }
}
