//! From revm's bundle state to the change set the store (and the state-root code) take.

use revm::{database::BundleState, primitives::KECCAK_EMPTY};
use simnode_api::{AccountChange, StateChanges};

pub fn bundle_to_changes(bundle: &BundleState) -> StateChanges {
    let mut changes = StateChanges::with_capacity(bundle.state.len());
    for (address, account) in &bundle.state {
        let mut info = account.info.clone();
        if let Some(info) = info.as_mut() {
            // Newly deployed code travels in the bundle's contract map, not always in the
            // account; the store needs the bytes to keep them.
            if info.code.is_none() && info.code_hash != KECCAK_EMPTY {
                info.code = bundle.contracts.get(&info.code_hash).cloned();
            }
        }
        let storage = account
            .storage
            .iter()
            .map(|(k, slot)| (*k, slot.present_value))
            .collect();
        changes.insert(
            *address,
            AccountChange {
                info,
                wipe_storage: account.was_destroyed(),
                storage,
            },
        );
    }
    changes
}
