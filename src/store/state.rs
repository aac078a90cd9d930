//! Reading the state after any stored block: the current tables, corrected by the history of
//! blocks after it. A value's history entry at block B holds what it was before B, so the value
//! after block N is the first history entry with B > N, or the current value if none.

use std::{collections::BTreeMap, sync::Arc};

use alloy::primitives::{Address, B256, U256};
use redb::{ReadOnlyTable, ReadTransaction};
use revm::{bytecode::Bytecode, state::AccountInfo, DatabaseRef};
use simnode_api::StateError;

use super::{
    codec::{hash_address, hash_slot, history_key, storage_key, StoredAccount},
    trie::{HashedOverlay, OverlayAccount},
    StoreError, ACCOUNTS, ACCOUNT_CHANGESETS, ACCOUNT_HISTORY, CANONICAL, CODE, STORAGE,
    STORAGE_CHANGESETS, STORAGE_HISTORY,
};

type Table = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The tables the state is read from, opened on one database snapshot.
pub(crate) struct StateTables {
    accounts: Table,
    storage: Table,
    code: Table,
    account_history: Table,
    storage_history: Table,
    canonical: ReadOnlyTable<u64, &'static [u8]>,
}

impl StateTables {
    pub(crate) fn open(tx: &ReadTransaction) -> Result<Self, StoreError> {
        Ok(Self {
            accounts: tx.open_table(ACCOUNTS)?,
            storage: tx.open_table(STORAGE)?,
            code: tx.open_table(CODE)?,
            account_history: tx.open_table(ACCOUNT_HISTORY)?,
            storage_history: tx.open_table(STORAGE_HISTORY)?,
            canonical: tx.open_table(CANONICAL)?,
        })
    }
}

/// The state after block `number`, read from one database snapshot.
pub struct HistoricalState {
    number: u64,
    /// Whether blocks after `number` exist in the snapshot (else history can be skipped).
    historical: bool,
    tables: Arc<StateTables>,
}

impl std::fmt::Debug for HistoricalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoricalState")
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

impl HistoricalState {
    /// `latest` is the head block of the snapshot the tables were opened on.
    pub(crate) fn new(tables: Arc<StateTables>, number: u64, latest: u64) -> Self {
        Self {
            number,
            historical: number < latest,
            tables,
        }
    }

    pub fn account(&self, address: &Address) -> Result<Option<StoredAccount>, StoreError> {
        let hashed = hash_address(address);
        let tables = &self.tables;
        Ok(self
            .value_after::<40, _>(
                &tables.account_history,
                &tables.accounts,
                hashed.as_slice(),
                StoredAccount::decode,
            )?
            .flatten())
    }

    pub fn storage_value(&self, address: &Address, slot: &U256) -> Result<U256, StoreError> {
        let key = storage_key(&hash_address(address), &hash_slot(slot));
        let tables = &self.tables;
        Ok(self
            .value_after::<72, _>(
                &tables.storage_history,
                &tables.storage,
                &key,
                U256::from_be_slice,
            )?
            .unwrap_or(U256::ZERO))
    }

    /// Up to `limit` non-zero storage slots of `address` after block `number`, from hashed slot
    /// `start` on, ascending by hashed slot (its storage trie's order): the slots stored now,
    /// each taking instead its value before the first later block that changed it, merged with
    /// the slots only such history holds (since deleted). Reads only this account's slots from
    /// `start` on, and stops when the page is full.
    pub fn storage_page(
        &self,
        address: &Address,
        start: &B256,
        limit: usize,
    ) -> Result<Vec<(B256, U256)>, StoreError> {
        self.storage_page_of(hash_address(address), start, limit)
    }

    /// [`Self::storage_page`] of the account with hashed address `hashed`.
    pub(crate) fn storage_page_of(
        &self,
        hashed: B256,
        start: &B256,
        limit: usize,
    ) -> Result<Vec<(B256, U256)>, StoreError> {
        let last = B256::repeat_byte(0xff);
        let (first, end) = (storage_key(&hashed, start), storage_key(&hashed, &last));
        let mut now = SlotCursor(
            self.tables
                .storage
                .range(first.as_slice()..=end.as_slice())?,
        );
        // History only matters when blocks after `number` exist.
        let mut past = ChangedSlots::new(
            &self.tables.storage_history,
            hashed,
            self.number,
            self.historical.then_some(start),
        );
        let mut current = now.next()?;
        // Invariant: `changed` is the first slot changed after `number` from where the walk
        // is, up to `current` (none if there is none): the history is read only as far as the
        // stored slots go, so a page costs its own slots, not the account's.
        let mut changed = past.next_until(current.map(|(slot, _)| slot))?;
        let mut page = Vec::new();
        while page.len() < limit {
            let slot = match (current, changed) {
                (None, None) => break,
                (Some((a, _)), Some((b, _))) => a.min(b),
                (Some((a, _)), None) => a,
                (None, Some((b, _))) => b,
            };
            // Its current value, unless a block after `number` changed it: then its value
            // before that change (zero: it did not exist yet).
            let mut value = U256::ZERO;
            if let Some((_, now_value)) = current.filter(|(s, _)| *s == slot) {
                value = now_value;
                current = now.next()?;
            }
            if let Some((_, then_value)) = changed.filter(|(s, _)| *s == slot) {
                value = then_value;
                changed = None;
            }
            if changed.is_none() {
                changed = past.next_until(current.map(|(slot, _)| slot))?;
            }
            if !value.is_zero() {
                page.push((slot, value));
            }
        }
        Ok(page)
    }

    /// The value of `key` after block `number`: its first history entry from a later block
    /// (what it was before that block), else the current value. `N` is the length of a history
    /// key, `key` and a block number.
    fn value_after<const N: usize, T>(
        &self,
        history: &Table,
        current: &Table,
        key: &[u8],
        decode: impl Fn(&[u8]) -> T,
    ) -> Result<Option<T>, StoreError> {
        if self.historical {
            let from: [u8; N] = history_key(key, self.number + 1);
            let to: [u8; N] = history_key(key, u64::MAX);
            if let Some(entry) = history.range(from.as_slice()..=to.as_slice())?.next() {
                let (_, v) = entry?;
                return Ok(Some(decode(v.value())));
            }
        }
        Ok(current.get(key)?.map(|v| decode(v.value())))
    }
}

/// The slots of one account in the storage table, from a range over it.
struct SlotCursor<'a>(redb::Range<'a, &'static [u8], &'static [u8]>);

impl SlotCursor<'_> {
    fn next(&mut self) -> Result<Option<(B256, U256)>, StoreError> {
        let Some(entry) = self.0.next() else {
            return Ok(None);
        };
        let (k, v) = entry?;
        Ok(Some((
            B256::from_slice(&k.value()[32..64]),
            U256::from_be_slice(v.value()),
        )))
    }
}

/// Old entries of one slot read one after the other before the walk seeks past them.
const OLD_ENTRIES_BEFORE_SEEKING: usize = 8;

/// The slots of one account that blocks after `after` changed, each with its value after
/// `after` (before the first such change), walked in slot order through the storage history
/// (keys `account ++ slot ++ block`, ascending by slot, then block). The walk reads entries one
/// after the other, as most slots have few; it seeks past a slot once its first entry after
/// `after` is found, and past the older entries of a slot that has many.
struct ChangedSlots<'a> {
    history: &'a Table,
    account: B256,
    after: u64,
    /// Where the walk goes on from: the entries from there on (opened when first needed).
    walk: Option<HistoryWalk<'a>>,
    /// The first key the walk has not passed; none: the walk is over (or was never needed).
    from: Option<[u8; 72]>,
}

/// An open range over the history, and an entry read from it but not used yet.
struct HistoryWalk<'a> {
    entries: redb::Range<'a, &'static [u8], &'static [u8]>,
    held: Option<(B256, u64, U256)>,
}

impl<'a> ChangedSlots<'a> {
    fn new(history: &'a Table, account: B256, after: u64, start: Option<&B256>) -> Self {
        Self {
            history,
            account,
            after,
            walk: None,
            from: start.map(|start| history_key(&storage_key(&account, start), 0)),
        }
    }

    /// The next slot changed after `after`, if there is one up to `bound` (inclusive; none: no
    /// bound). The walk does not go past `bound`.
    fn next_until(&mut self, bound: Option<B256>) -> Result<Option<(B256, U256)>, StoreError> {
        let mut old = (B256::ZERO, 0usize);
        while let Some((slot, block, value)) = self.peek()? {
            if bound.is_some_and(|bound| slot > bound) {
                return Ok(None);
            }
            if block > self.after {
                // Entries of a slot ascend by block: this is its first one after `after`.
                self.seek(slot_after(&slot).map(|next| (next, 0)));
                return Ok(Some((slot, value)));
            }
            self.take();
            old = if old.0 == slot {
                (slot, old.1 + 1)
            } else {
                (slot, 1)
            };
            if old.1 >= OLD_ENTRIES_BEFORE_SEEKING {
                self.seek(Some((slot, self.after.saturating_add(1))));
            }
        }
        Ok(None)
    }

    /// The next entry of the walk, left in place.
    fn peek(&mut self) -> Result<Option<(B256, u64, U256)>, StoreError> {
        let Some(from) = self.from else {
            return Ok(None);
        };
        if self.walk.is_none() {
            let last: [u8; 72] = history_key(
                &storage_key(&self.account, &B256::repeat_byte(0xff)),
                u64::MAX,
            );
            self.walk = Some(HistoryWalk {
                entries: self.history.range(from.as_slice()..=last.as_slice())?,
                held: None,
            });
        }
        let Some(walk) = self.walk.as_mut() else {
            return Ok(None);
        };
        if walk.held.is_none() {
            let Some(entry) = walk.entries.next() else {
                self.from = None;
                return Ok(None);
            };
            let (k, v) = entry?;
            let k = k.value();
            walk.held = Some((
                B256::from_slice(&k[32..64]),
                changeset_block(&k[64..])?,
                U256::from_be_slice(v.value()),
            ));
        }
        Ok(walk.held)
    }

    /// Passes over the entry [`Self::peek`] gave.
    fn take(&mut self) {
        if let Some(walk) = self.walk.as_mut() {
            walk.held = None;
        }
    }

    /// Goes on from slot and block `to` (none: past the last slot) with a new range.
    fn seek(&mut self, to: Option<(B256, u64)>) {
        self.walk = None;
        self.from = to.map(|(slot, block)| history_key(&storage_key(&self.account, &slot), block));
    }
}

/// The slot after `slot` in key order; none after the last.
fn slot_after(slot: &B256) -> Option<B256> {
    U256::from_be_bytes(slot.0)
        .checked_add(U256::from(1))
        .map(B256::from)
}

fn state_err(e: impl std::fmt::Display) -> StateError {
    StateError(e.to_string())
}

impl DatabaseRef for HistoricalState {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        Ok(self.account(&address).map_err(state_err)?.map(|a| a.info()))
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, StateError> {
        match self
            .tables
            .code
            .get(code_hash.as_slice())
            .map_err(state_err)?
        {
            Some(v) => {
                let raw = alloy::primitives::Bytes::copy_from_slice(v.value());
                // Stored code came out of execution, so it decodes; a damaged entry is served as
                // plain legacy code rather than taking the node down.
                Ok(Bytecode::new_raw_checked(raw.clone())
                    .unwrap_or_else(|_| Bytecode::new_legacy(raw)))
            }
            None => Ok(Bytecode::default()),
        }
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, StateError> {
        self.storage_value(&address, &index).map_err(state_err)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, StateError> {
        // BLOCKHASH only reaches 256 blocks back from the executing block, which revm enforces;
        // here we only refuse to look past the state's own block.
        if number > self.number {
            return Ok(B256::ZERO);
        }
        Ok(self
            .tables
            .canonical
            .get(number)
            .map_err(state_err)?
            .map_or(B256::ZERO, |v| B256::from_slice(v.value())))
    }
}

/// What it takes to turn the current state back into the state after block `base`: for every
/// account and slot changed after `base`, its value at `base`.
pub(crate) fn revert_overlay(tx: &ReadTransaction, base: u64) -> Result<HashedOverlay, StoreError> {
    let mut overlay = revert_accounts(tx, base)?;
    revert_storage(tx, base, &mut overlay)?;
    Ok(overlay)
}

/// [`revert_overlay`]'s accounts alone: for every account changed after `base`, its value at
/// `base` (its storage root among them). Enough for the account trie; a storage trie is then
/// read a page at a time (see [`HistoricalState::storage_page`]).
pub(crate) fn revert_accounts(
    tx: &ReadTransaction,
    base: u64,
) -> Result<HashedOverlay, StoreError> {
    let mut overlay = HashedOverlay::default();
    let account_changes = tx.open_table(ACCOUNT_CHANGESETS)?;
    let account_history = tx.open_table(ACCOUNT_HISTORY)?;
    let from = (base + 1).to_be_bytes();
    for entry in account_changes.range(from.as_slice()..)? {
        let (k, _) = entry?;
        let k = k.value();
        let block = changeset_block(k)?;
        let hashed = B256::from_slice(&k[8..40]);
        if overlay.accounts.contains_key(&hashed) {
            continue;
        }
        let hk: [u8; 40] = history_key(hashed.as_slice(), block);
        let prev = account_history
            .get(hk.as_slice())?
            .and_then(|v| StoredAccount::decode(v.value()));
        overlay.accounts.insert(
            hashed,
            prev.map(|a| OverlayAccount {
                nonce: a.nonce,
                balance: a.balance,
                code_hash: a.code_hash,
                storage_root: Some(a.storage_root),
            }),
        );
    }
    Ok(overlay)
}

/// Adds to `overlay` every slot changed after `base`, with its value at `base`.
fn revert_storage(
    tx: &ReadTransaction,
    base: u64,
    overlay: &mut HashedOverlay,
) -> Result<(), StoreError> {
    let from = (base + 1).to_be_bytes();
    let storage_changes = tx.open_table(STORAGE_CHANGESETS)?;
    let storage_history = tx.open_table(STORAGE_HISTORY)?;
    let mut seen: BTreeMap<(B256, B256), ()> = BTreeMap::new();
    for entry in storage_changes.range(from.as_slice()..)? {
        let (k, _) = entry?;
        let k = k.value();
        let block = changeset_block(k)?;
        let hashed = B256::from_slice(&k[8..40]);
        let slot = B256::from_slice(&k[40..72]);
        if seen.insert((hashed, slot), ()).is_some() {
            continue;
        }
        let hk: [u8; 72] = history_key(&k[8..72], block);
        let prev = storage_history
            .get(hk.as_slice())?
            .map_or(U256::ZERO, |v| U256::from_be_slice(v.value()));
        overlay
            .storage
            .entry(hashed)
            .or_default()
            .slots
            .insert(slot, prev);
    }
    Ok(())
}

/// The block a changeset key (`block ++ rest`) belongs to.
fn changeset_block(key: &[u8]) -> Result<u64, StoreError> {
    key.get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::Corrupt("changeset key".into()))
}

/// `upper` applied on top of `lower`.
pub(crate) fn stack_overlays(mut lower: HashedOverlay, upper: HashedOverlay) -> HashedOverlay {
    for (hashed, account) in upper.accounts {
        let account = match (account, lower.accounts.get(&hashed)) {
            (Some(mut a), Some(Some(below))) if a.storage_root.is_none() => {
                a.storage_root = below.storage_root;
                Some(a)
            }
            (a, _) => a,
        };
        lower.accounts.insert(hashed, account);
    }
    for (hashed, storage) in upper.storage {
        if storage.wiped {
            lower.storage.insert(hashed, storage);
        } else {
            lower
                .storage
                .entry(hashed)
                .or_default()
                .slots
                .extend(storage.slots);
        }
    }
    lower
}
