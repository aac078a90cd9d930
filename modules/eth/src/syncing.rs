//! What `eth_syncing` and the `syncing` subscription say about the node keeping up with its
//! consensus client.
//!
//! The node has no peers to download from: it is "syncing" while the consensus client is ahead
//! of it, i.e. from the Engine API answering SYNCING (a payload or head it cannot connect to its
//! chain) until a forkchoice update names a block it has. A dev chain or an imported one never
//! is.

use alloy::{
    primitives::U64,
    rpc::types::pubsub::{PubSubSyncStatus, SyncStatusMetadata},
};
use serde::Serialize;
use simnode_api::SyncTarget;

/// `eth_syncing`'s answer: `false`, or the three numbers of the execution-apis
/// `SyncingStatus` schema. (alloy's `SyncInfo` would add Parity's warp-sync fields as nulls,
/// which the schema does not allow.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SyncingStatus {
    NotSyncing(bool),
    #[serde(rename_all = "camelCase")]
    Syncing {
        starting_block: U64,
        current_block: U64,
        highest_block: U64,
    },
}

/// The highest block a syncing node knows of: what the client sent, or its own head if that is
/// past it (or the client only named a head by hash).
fn highest(target: &SyncTarget, head: u64) -> u64 {
    target.highest_block.unwrap_or(head).max(head)
}

impl SyncingStatus {
    pub fn new(target: Option<&SyncTarget>, head: u64) -> Self {
        match target {
            None => Self::NotSyncing(false),
            Some(target) => Self::Syncing {
                starting_block: U64::from(target.starting_block),
                current_block: U64::from(head),
                highest_block: U64::from(highest(target, head)),
            },
        }
    }
}

/// A `syncing` subscription's notification, in reth's shape (alloy's type): `false`, or
/// `{syncing: true, startingBlock, currentBlock, highestBlock}`.
pub fn notification(target: Option<&SyncTarget>, head: u64) -> PubSubSyncStatus {
    match target {
        None => PubSubSyncStatus::Simple(false),
        Some(target) => PubSubSyncStatus::Detailed(SyncStatusMetadata {
            syncing: true,
            starting_block: target.starting_block,
            current_block: head,
            highest_block: Some(highest(target, head)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        assert_eq!(
            serde_json::to_value(SyncingStatus::new(None, 7)).unwrap(),
            json!(false)
        );
        let target = SyncTarget {
            starting_block: 5,
            highest_block: Some(20),
        };
        assert_eq!(
            serde_json::to_value(SyncingStatus::new(Some(&target), 7)).unwrap(),
            json!({"startingBlock": "0x5", "currentBlock": "0x7", "highestBlock": "0x14"})
        );
        assert_eq!(
            serde_json::to_value(notification(Some(&target), 7)).unwrap(),
            json!({"syncing": true, "startingBlock": "0x5", "currentBlock": "0x7", "highestBlock": "0x14"})
        );
        assert_eq!(
            serde_json::to_value(notification(None, 7)).unwrap(),
            json!(false)
        );
        // Only a head hash known, or the head already past what the client sent.
        let named = SyncTarget {
            starting_block: 5,
            highest_block: None,
        };
        assert_eq!(
            serde_json::to_value(SyncingStatus::new(Some(&named), 7)).unwrap()["highestBlock"],
            "0x7"
        );
        assert_eq!(
            serde_json::to_value(SyncingStatus::new(Some(&target), 30)).unwrap()["highestBlock"],
            "0x1e"
        );
    }
}
