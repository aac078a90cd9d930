//! `debug_storageRangeAt` (geth's): a page of a contract's storage as it stood before
//! transaction `txIndex` of a block ran, in the order of its storage trie (by hashed slot),
//! with the hashed slot to ask for next. The page starts at the first hashed slot at or after
//! `keyStart` (fewer than 32 bytes: the smallest slot they begin).
//!
//! Slots are stored by hash and the node keeps no preimages (nor does geth by default), so each
//! entry's `key` is null. An account without storage answers `storage: null`, as geth's does;
//! an account that does not exist is -32000.

use std::collections::BTreeMap;

use alloy::primitives::{keccak256, Address, B256, U256};
use revm::database::AccountState;
use serde::Serialize;
use simnode_api::{replay, ModuleContext, RpcError, RpcResult, StoredBlock};

use crate::exec::Budget;

#[derive(Debug, Clone, Serialize)]
pub struct StorageRange {
    storage: Option<BTreeMap<B256, StorageEntry>>,
    #[serde(rename = "nextKey")]
    next_key: Option<B256>,
}

#[derive(Debug, Clone, Serialize)]
struct StorageEntry {
    key: Option<B256>,
    value: B256,
}

/// Where a page starts: `key_start` as the smallest hashed slot it begins.
pub(crate) fn start_key(key_start: &[u8]) -> RpcResult<B256> {
    if key_start.len() > 32 {
        return Err(RpcError::invalid_params(format!(
            "invalid argument 3: keyStart of {} bytes, at most 32",
            key_start.len()
        )));
    }
    let mut start = B256::ZERO;
    start[..key_start.len()].copy_from_slice(key_start);
    Ok(start)
}

/// Up to `max` slots of `address` from `start` on, before transaction `tx_index` of `block`.
pub(crate) fn storage_range_at(
    ctx: &ModuleContext,
    block: &StoredBlock,
    tx_index: usize,
    address: Address,
    start: B256,
    max: usize,
    budget: &Budget,
) -> RpcResult<StorageRange> {
    let Some(parent) = block.number().checked_sub(1) else {
        return Err(RpcError::Server("no transaction in genesis".into()));
    };
    // As in geth, index 0 of a block without transactions is its start.
    let count = block.body.transactions.len();
    if tx_index >= count && !(tx_index == 0 && count == 0) {
        return Err(RpcError::Server(format!(
            "transaction index {tx_index} out of range for block {}",
            block.hash()
        )));
    }
    let db = replay::state_before_tx(ctx, block, tx_index, budget.deadline, || budget.timed_out())?;
    // An account that does not exist has no storage: geth answers the empty page for it.
    // The parent's stored slots, under what the block's earlier transactions changed.
    let changed = db.cache.accounts.get(&address);
    let cleared = changed.is_some_and(|account| {
        matches!(
            account.account_state,
            AccountState::StorageCleared | AccountState::NotExisting
        )
    });
    let changes: Vec<(B256, U256)> = changed
        .iter()
        .flat_map(|account| &account.storage)
        .map(|(slot, value)| (keccak256(slot.to_be_bytes::<32>()), *value))
        .collect();
    let page = |from: B256, want: usize| -> RpcResult<BTreeMap<B256, U256>> {
        // Slots the earlier transactions zeroed may hide stored ones: read that many more.
        let zeroed = changes
            .iter()
            .filter(|(hashed, value)| *hashed >= from && value.is_zero())
            .count();
        let mut slots: BTreeMap<B256, U256> = if cleared {
            BTreeMap::new()
        } else {
            ctx.chain
                .storage_slots(parent, address, from, want.saturating_add(zeroed))?
                .into_iter()
                .collect()
        };
        for (hashed, value) in changes.iter().filter(|(hashed, _)| *hashed >= from) {
            if value.is_zero() {
                slots.remove(hashed);
            } else {
                slots.insert(*hashed, *value);
            }
        }
        Ok(slots.into_iter().take(want).collect())
    };
    // One more than the page, to name the next key.
    let slots = page(start, max.saturating_add(1))?;
    // No storage at all is `null`, as in geth; storage only before `start` is an empty page.
    if slots.is_empty() && (start == B256::ZERO || page(B256::ZERO, 1)?.is_empty()) {
        return Ok(StorageRange {
            storage: None,
            next_key: None,
        });
    }
    let mut from_start = slots.iter();
    let storage = from_start
        .by_ref()
        .take(max)
        .map(|(hashed, value)| {
            let entry = StorageEntry {
                key: None,
                value: B256::from(*value),
            };
            (*hashed, entry)
        })
        .collect();
    Ok(StorageRange {
        storage: Some(storage),
        next_key: from_start.next().map(|(hashed, _)| *hashed),
    })
}
