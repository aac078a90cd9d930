//! `simnode import`: blocks from geth-exported RLP files (concatenated RLP blocks), read,
//! executed, validated and stored one by one (a file is never held whole in memory). Blocks already stored are skipped, so an interrupted
//! import is finished by running it again.
//!
//! Each block is still its own commit, but commits do not wait for the disk one by one: the
//! database is synced every [`SYNC_EVERY`], before a read that may wait on the file or pipe,
//! and at the end, so a crash costs at most the blocks of the last quarter second, which the
//! re-run imports again. (Syncing every block held a fifth of the import's wall time; a sync
//! every second instead of every quarter second was no faster and held more unsynced pages in
//! memory.)

use std::{
    io::Read,
    path::Path,
    time::{Duration, Instant},
};

use alloy::{
    consensus::{Block, TxEnvelope},
    primitives::Sealable,
    rlp::Decodable,
};
use anyhow::{bail, Context};

use crate::{cli::ImportArgs, exec, node::open_store, store::Store};

pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    args.cache.apply();
    // Opened before the datadir is, which would create it for nothing; and read through the
    // same handles, so that a pipe (`<(zcat chain.rlp.gz)`, a FIFO) is read once, by us.
    let opened = args
        .files
        .iter()
        .map(|file| {
            std::fs::File::open(file)
                .map(|handle| (file, handle))
                .with_context(|| format!("cannot read {}", file.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (store, _chain) = open_store(&args.chain)?;
    if store.origin()?.is_none() {
        store.set_origin(crate::store::ChainOrigin::Followed)?;
    }
    for (file, handle) in opened {
        let stats = import_from(&store, file, handle)?;
        println!(
            "{}: {} blocks imported, {} already stored, head #{} ({:.1} Mgas/s)",
            file.display(),
            stats.imported,
            stats.skipped,
            store.head().latest,
            stats.mgas_per_sec()
        );
    }
    Ok(())
}

#[derive(Debug, Default, Clone, Copy)]
pub struct ImportStats {
    pub imported: u64,
    pub skipped: u64,
    pub gas: u64,
    pub elapsed: Duration,
}

impl ImportStats {
    pub fn mgas_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            0.0
        } else {
            self.gas as f64 / 1e6 / secs
        }
    }
}

/// Imports the blocks `handle` (opened from `path`, which names it in errors) reads to its end.
fn import_from(store: &Store, path: &Path, handle: std::fs::File) -> anyhow::Result<ImportStats> {
    import_blocks(store, handle).with_context(|| format!("importing {}", path.display()))
}

/// How often an import syncs the database to disk.
pub const SYNC_EVERY: Duration = Duration::from_millis(250);

/// The most bytes one block of a chain file may declare: far above any block a chain takes,
/// low enough that a corrupt length is refused rather than allocated.
const MAX_BLOCK_BYTES: u64 = 256 << 20;

/// The blocks of a chain file, read one at a time: an export can be far larger than memory,
/// and a pipe has no end to wait for.
struct RawBlocks<R> {
    reader: std::io::BufReader<R>,
    /// Where the next block starts in the file.
    offset: u64,
}

/// The refusal of block `index` of a file, at byte `offset`, that does not read as a block.
fn corrupt_block(index: u64, offset: u64, why: String) -> anyhow::Error {
    anyhow::anyhow!(
        "block #{index} of the file (byte offset {offset}) is corrupt or truncated: {why}"
    )
}

impl<R: std::io::Read> RawBlocks<R> {
    fn new(reader: R) -> Self {
        Self {
            reader: std::io::BufReader::with_capacity(1 << 20, reader),
            offset: 0,
        }
    }

    /// Whether reading on goes to the file (or pipe) itself, which may keep the import waiting.
    fn may_wait(&self) -> bool {
        self.reader.buffer().is_empty()
    }

    /// The next block's RLP and where it starts; `None` at the end of the file.
    fn next_block(&mut self, index: u64) -> anyhow::Result<Option<(u64, Vec<u8>)>> {
        let at = self.offset;
        let corrupt = |why: String| corrupt_block(index, at, why);
        let mut first = [0u8; 1];
        if self.reader.read(&mut first)? == 0 {
            return Ok(None);
        }
        // A block is an RLP list: its header says how long it is.
        let mut raw = vec![first[0]];
        let payload = match first[0] {
            short @ 0xc0..=0xf7 => u64::from(short - 0xc0),
            long @ 0xf8.. => {
                let mut length = vec![0u8; usize::from(long - 0xf7)];
                self.reader
                    .read_exact(&mut length)
                    .map_err(|e| corrupt(e.to_string()))?;
                raw.extend_from_slice(&length);
                length.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b))
            }
            _ => return Err(corrupt("not an RLP list".into())),
        };
        if payload > MAX_BLOCK_BYTES {
            return Err(corrupt(format!(
                "it declares {payload} bytes, more than a block may have ({MAX_BLOCK_BYTES})"
            )));
        }
        let header = raw.len();
        raw.resize(header + payload as usize, 0);
        self.reader
            .read_exact(&mut raw[header..])
            .map_err(|e| corrupt(e.to_string()))?;
        self.offset += raw.len() as u64;
        Ok(Some((at, raw)))
    }
}

pub fn import_blocks(store: &Store, reader: impl std::io::Read) -> anyhow::Result<ImportStats> {
    // The file vouches for its blocks: payloads a consensus client sent and never named become
    // the head with them.
    store.name_stored_head()?;
    let mut stats = ImportStats::default();
    let started = Instant::now();
    let mut last_report = Instant::now();
    let deferred = store.defer_sync();
    let mut last_sync = Instant::now();
    let mut unsynced = false;
    let mut blocks = RawBlocks::new(reader);
    let mut index = 0u64;
    loop {
        // A pipe whose writer stalls (or a slow disk) may keep the next read waiting for good:
        // what is imported is made durable first, so that stopping the import then loses none.
        if unsynced && blocks.may_wait() {
            deferred.sync()?;
            last_sync = Instant::now();
            unsynced = false;
        }
        let Some((offset, rlp)) = blocks.next_block(index)? else {
            break;
        };
        let mut rest = rlp.as_slice();
        let block = Block::<TxEnvelope>::decode(&mut rest)
            .map_err(|e| e.to_string())
            .and_then(|block| {
                if rest.is_empty() {
                    Ok(block)
                } else {
                    Err("bytes left over inside the block's list".to_string())
                }
            })
            .map_err(|why| corrupt_block(index, offset, why))?;
        index += 1;
        let (header, body) = (block.header.seal_slow(), block.body);
        let number = header.number;
        let head = store.head().latest;
        if number <= head {
            let stored = store.canonical_hash_raw(number)?;
            if stored != Some(header.hash()) {
                let stored = stored.map_or_else(|| "none".to_string(), |h| h.to_string());
                bail!(
                    "block {number} ({}) conflicts with the stored block {stored}",
                    header.hash(),
                );
            }
            stats.skipped += 1;
            continue;
        }
        let hash = header.hash();
        match exec::import_block(store, header, body) {
            Ok(gas) => stats.gas += gas,
            // The file's first block does not build on this genesis: another chain's file, or
            // another chain's --chain.
            Err(exec::BlockError::UnknownParent { number: 1, parent }) => bail!(
                "the file's block 1 builds on {parent}, not on this datadir's genesis {}: was \
                 the file exported from the chain --chain names?",
                store.spec().genesis_header.hash()
            ),
            Err(err) => {
                if err.is_bad_block() {
                    exec::keep_bad_block(store, hash, number, &rlp);
                }
                return Err(err.into());
            }
        }
        stats.imported += 1;
        unsynced = true;
        if last_sync.elapsed() >= SYNC_EVERY {
            deferred.sync()?;
            last_sync = Instant::now();
            unsynced = false;
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            stats.elapsed = started.elapsed();
            tracing::info!(
                target: "simnode::import",
                block = number,
                imported = stats.imported,
                mgas_per_sec = format!("{:.1}", stats.mgas_per_sec()),
                "importing"
            );
        }
    }
    deferred.finish()?;
    stats.elapsed = started.elapsed();
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::{consensus::Header, rlp::Encodable};

    /// A reader that hands out one byte per read, as a slow pipe may.
    struct Trickle<'a>(&'a [u8]);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((byte, rest)), Some(slot)) => {
                    *slot = *byte;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn block(number: u64, extra: usize) -> Vec<u8> {
        let block = Block::<TxEnvelope> {
            header: Header {
                number,
                extra_data: vec![7u8; extra].into(),
                ..Default::default()
            },
            body: Default::default(),
        };
        let mut out = Vec::new();
        block.encode(&mut out);
        out
    }

    #[test]
    fn blocks_are_read_one_at_a_time_with_their_offsets() {
        // Blocks of two sizes, through a reader that gives one byte at a time.
        let (a, b) = (block(1, 0), block(2, 300));
        let file = [a.clone(), b.clone()].concat();
        let mut blocks = RawBlocks::new(Trickle(&file));
        assert_eq!(blocks.next_block(0).unwrap(), Some((0, a.clone())));
        assert_eq!(blocks.next_block(1).unwrap(), Some((a.len() as u64, b)));
        assert_eq!(blocks.next_block(2).unwrap(), None);
    }

    #[test]
    fn corrupt_headers_are_refused_before_anything_is_allocated() {
        let a = block(1, 0);
        let at = a.len();
        for (bad, words) in [
            // A string, not a list.
            (vec![0x83, 1, 2, 3], "not an RLP list"),
            // A list that declares 2^56 bytes.
            (
                vec![0xff, 1, 0, 0, 0, 0, 0, 0, 0],
                "more than a block may have",
            ),
            // A list cut short.
            (vec![0xc5, 1, 2], "failed to fill whole buffer"),
            // A length of length cut short.
            (vec![0xfa, 1], "failed to fill whole buffer"),
        ] {
            let file = [a.clone(), bad].concat();
            let mut blocks = RawBlocks::new(file.as_slice());
            assert!(blocks.next_block(0).unwrap().is_some());
            let err = blocks.next_block(1).unwrap_err().to_string();
            assert!(
                err.contains(&format!("block #1 of the file (byte offset {at})"))
                    && err.contains(words),
                "{err}"
            );
        }
    }
}
