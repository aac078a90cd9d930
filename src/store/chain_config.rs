//! The chain configuration a datadir's blocks were executed under, kept beside them: opening
//! the datadir under a genesis.json (or a built-in spec) whose chain id or fork schedule
//! contradicts the blocks already stored is refused, as geth refuses a mismatching config.
//! Forks scheduled after the stored head may change (a release that schedules the next fork
//! opens an older datadir); the stored configuration then follows the new one.

use std::collections::BTreeMap;

use alloy_hardforks::{EthereumHardfork, EthereumHardforks, ForkCondition};
use redb::{ReadableDatabase, TableDefinition};
use serde::{Deserialize, Serialize};
use simnode_api::ChainSpec;

use super::{Store, StoreError};

const CHAIN_CONFIG: TableDefinition<&str, &[u8]> = TableDefinition::new("chain_config");
const SCHEDULE: &str = "schedule";

/// What of a chain spec decides how its blocks execute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Schedule {
    chain_id: u64,
    /// Every fork the spec knows, by name.
    forks: BTreeMap<String, ForkCondition>,
    /// Blob parameters by activation timestamp: (timestamp, target, max, update fraction).
    blobs: Vec<(u64, u64, u64, u128)>,
}

impl Schedule {
    fn of(spec: &ChainSpec) -> Self {
        Self {
            chain_id: spec.chain_id,
            forks: EthereumHardfork::VARIANTS
                .iter()
                .map(|fork| (fork.name().to_owned(), spec.ethereum_fork_activation(*fork)))
                .collect(),
            blobs: spec
                .blob_schedule
                .iter()
                .map(|(at, p)| {
                    (
                        *at,
                        p.target_blob_count,
                        p.max_blob_count,
                        p.update_fraction,
                    )
                })
                .collect(),
        }
    }

    /// The first way `new` contradicts this schedule for a chain whose head is block `number`
    /// at `timestamp`: another chain id, or a fork or blob setting that applied to a stored
    /// block and is now different (or no longer applies).
    fn conflict(&self, new: &Self, number: u64, timestamp: u64) -> Option<String> {
        if self.chain_id != new.chain_id {
            return Some(format!(
                "chain id {} where the stored chain has {}",
                new.chain_id, self.chain_id
            ));
        }
        let applied = |c: &ForkCondition| c.active_at_timestamp_or_number(timestamp, number);
        for (name, stored) in &self.forks {
            let given = new.forks.get(name).copied().unwrap_or(ForkCondition::Never);
            if stored != &given && (applied(stored) || applied(&given)) {
                return Some(format!(
                    "{name} at {} where the stored chain has it at {}",
                    describe(&given),
                    describe(stored)
                ));
            }
        }
        let passed = |blobs: &[(u64, u64, u64, u128)]| -> Vec<(u64, u64, u64, u128)> {
            blobs.iter().filter(|b| b.0 <= timestamp).copied().collect()
        };
        if passed(&self.blobs) != passed(&new.blobs) {
            return Some(
                "a blob schedule that differs at timestamps the stored chain has passed".into(),
            );
        }
        None
    }
}

fn describe(condition: &ForkCondition) -> String {
    match condition {
        ForkCondition::Block(n) => format!("block {n}"),
        ForkCondition::Timestamp(t) => format!("timestamp {t}"),
        ForkCondition::TTD {
            total_difficulty,
            activation_block_number,
            ..
        } => format!("total difficulty {total_difficulty} (block {activation_block_number})"),
        ForkCondition::Never => "never".into(),
    }
}

impl Store {
    /// Checks this store's spec against the configuration its blocks were stored under, and
    /// keeps the spec's as the stored one (a datadir made before this record gets it now).
    pub(super) fn check_chain_config(&self) -> Result<(), StoreError> {
        let given = Schedule::of(&self.spec);
        let stored: Option<Schedule> = {
            let tx = self.db.begin_read()?;
            match tx.open_table(CHAIN_CONFIG) {
                Ok(table) => table
                    .get(SCHEDULE)?
                    .and_then(|bytes| serde_json::from_slice(bytes.value()).ok()),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(e.into()),
            }
        };
        if let Some(stored) = &stored {
            let head = self.head().latest;
            let timestamp = self
                .header_raw(head)?
                .map(|h| h.timestamp)
                .unwrap_or_default();
            if let Some(conflict) = stored.conflict(&given, head, timestamp) {
                return Err(StoreError::ChainConfig(conflict));
            }
            if *stored == given {
                return Ok(());
            }
        }
        let bytes = serde_json::to_vec(&given).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let tx = self.begin_write()?;
        tx.open_table(CHAIN_CONFIG)?
            .insert(SCHEDULE, bytes.as_slice())?;
        self.commit(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(london: u64, chain_id: u64) -> Schedule {
        Schedule {
            chain_id,
            forks: [
                ("Berlin".to_owned(), ForkCondition::Block(10)),
                ("London".to_owned(), ForkCondition::Block(london)),
                ("Cancun".to_owned(), ForkCondition::Timestamp(1_000)),
            ]
            .into_iter()
            .collect(),
            blobs: vec![(1_000, 3, 6, 3_338_477)],
        }
    }

    #[test]
    fn forks_past_the_head_must_agree_and_later_ones_may_move() {
        let stored = schedule(20, 7);
        assert_eq!(stored.conflict(&schedule(20, 7), 30, 500), None);
        // London moved from 20 to 40 under a head at 30: block 20..30 ran as London.
        let moved = stored
            .conflict(&schedule(40, 7), 30, 500)
            .expect("a conflict");
        assert!(moved.contains("London at block 40"), "{moved}");
        // Moved to 25, still past: a conflict too.
        assert!(stored.conflict(&schedule(25, 7), 30, 500).is_some());
        // The head before both: no block ran as London yet.
        assert_eq!(stored.conflict(&schedule(40, 7), 15, 100), None);
        let other_chain = stored
            .conflict(&schedule(20, 8), 30, 500)
            .expect("a conflict");
        assert!(other_chain.contains("chain id 8"), "{other_chain}");
        // A blob schedule change after the head's timestamp is fine, before it is not.
        let mut blobs = schedule(20, 7);
        blobs.blobs = vec![(1_000, 3, 6, 3_338_477), (2_000, 6, 9, 5_007_716)];
        assert_eq!(stored.conflict(&blobs, 30, 1_500), None);
        assert!(stored.conflict(&blobs, 30, 2_500).is_some());
    }
}
