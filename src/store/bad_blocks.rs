//! Blocks that failed validation, kept for `debug_getBadBlocks` as geth keeps them: the ten
//! with the highest numbers, across restarts (so an operator can look at what `simnode import`
//! or the consensus client's payload was refused for, after the fact).

use alloy::primitives::B256;
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::{Store, StoreError};

/// block hash -> block number (8 bytes, big-endian) ++ the block's RLP.
const BAD_BLOCKS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bad_blocks");

/// How many bad blocks are kept (geth's number): those with the highest block numbers.
pub const BAD_BLOCKS_KEPT: usize = 10;

impl Store {
    /// Keeps the block `hash` (number `number`, encoded as `rlp`) as a bad block, dropping the
    /// lowest-numbered ones past [`BAD_BLOCKS_KEPT`].
    pub fn record_bad_block(&self, hash: B256, number: u64, rlp: &[u8]) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        {
            let mut table = tx.open_table(BAD_BLOCKS)?;
            let mut value = Vec::with_capacity(8 + rlp.len());
            value.extend_from_slice(&number.to_be_bytes());
            value.extend_from_slice(rlp);
            table.insert(hash.as_slice(), value.as_slice())?;
            let excess = (table.len()? as usize).saturating_sub(BAD_BLOCKS_KEPT);
            if excess > 0 {
                let mut by_number = Vec::new();
                for entry in table.iter()? {
                    let (key, value) = entry?;
                    by_number.push((block_number(value.value())?, key.value().to_vec()));
                }
                by_number.sort();
                for (_, key) in by_number.into_iter().take(excess) {
                    table.remove(key.as_slice())?;
                }
            }
        }
        self.commit(tx)
    }

    /// The bad blocks kept, highest number first: each block's hash and RLP.
    pub fn bad_blocks(&self) -> Result<Vec<(B256, Vec<u8>)>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(BAD_BLOCKS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![]),
            Err(e) => return Err(e.into()),
        };
        let mut blocks = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            let (key, value) = (key.value(), value.value());
            let hash = B256::try_from(key)
                .map_err(|_| StoreError::Corrupt(format!("bad block key {key:02x?}")))?;
            blocks.push((block_number(value)?, hash, value[8..].to_vec()));
        }
        blocks.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(blocks
            .into_iter()
            .map(|(_, hash, rlp)| (hash, rlp))
            .collect())
    }
}

fn block_number(value: &[u8]) -> Result<u64, StoreError> {
    value
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::Corrupt("bad block entry shorter than its number".into()))
}
