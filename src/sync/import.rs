//! `simnode import`: blocks from geth-exported RLP files (concatenated RLP blocks), executed,
//! validated and stored one by one. Blocks already stored are skipped, so an interrupted
//! import is finished by running it again.
//!
//! Each block is still its own commit, but commits do not wait for the disk one by one: the
//! database is synced every [`SYNC_EVERY`] and at the end, so a crash costs at most the
//! blocks of the last quarter second, which the re-run imports again. (Syncing every block
//! held a fifth of the import's wall time; a sync every second instead of every quarter
//! second was no faster and held more unsynced pages in memory.)

use std::{
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
fn import_from(
    store: &Store,
    path: &Path,
    mut handle: std::fs::File,
) -> anyhow::Result<ImportStats> {
    use std::io::Read;
    let mut data = Vec::new();
    handle
        .read_to_end(&mut data)
        .with_context(|| format!("cannot read {}", path.display()))?;
    import_bytes(store, &data).with_context(|| format!("importing {}", path.display()))
}

/// How often an import syncs the database to disk.
pub const SYNC_EVERY: Duration = Duration::from_millis(250);

pub fn import_bytes(store: &Store, data: &[u8]) -> anyhow::Result<ImportStats> {
    let mut stats = ImportStats::default();
    let started = Instant::now();
    let mut last_report = Instant::now();
    let deferred = store.defer_sync();
    let mut last_sync = Instant::now();
    let mut rest = data;
    let mut index = 0u64;
    while !rest.is_empty() {
        let offset = data.len() - rest.len();
        let block = Block::<TxEnvelope>::decode(&mut rest).map_err(|e| {
            anyhow::anyhow!(
                "block #{index} of the file (byte offset {offset}) is corrupt or truncated: {e}"
            )
        })?;
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
        let (hash, rlp) = (header.hash(), &data[offset..data.len() - rest.len()]);
        match exec::import_block(store, header, body) {
            Ok(gas) => stats.gas += gas,
            Err(err) => {
                if err.is_bad_block() {
                    exec::keep_bad_block(store, hash, number, rlp);
                }
                return Err(err.into());
            }
        }
        stats.imported += 1;
        if last_sync.elapsed() >= SYNC_EVERY {
            deferred.sync()?;
            last_sync = Instant::now();
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            stats.elapsed = started.elapsed();
            eprintln!(
                "import: block #{number}, {} imported, {:.1} Mgas/s",
                stats.imported,
                stats.mgas_per_sec()
            );
        }
    }
    deferred.finish()?;
    stats.elapsed = started.elapsed();
    Ok(stats)
}
