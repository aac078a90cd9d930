//! The embedded database (redb): chain data, current state, and per-block history so that the
//! state after any stored block can be read.
//!
//! Every block is committed in one write transaction (header, body, senders, receipts, tx
//! index, state and history together), so a crash leaves the database at the last whole block.

mod bad_blocks;
mod chain_config;
pub mod codec;
mod proof;
mod root_cache;
#[cfg(test)]
pub(crate) mod scratch;
mod snapshot;
mod state;
pub mod trie;
mod view;
mod witness;

pub use bad_blocks::BAD_BLOCKS_KEPT;

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use alloy::{
    consensus::{BlockBody, Header, ReceiptEnvelope, Sealed, TxEnvelope},
    eips::Encodable2718,
    genesis::GenesisAccount,
    primitives::{keccak256, Address, Sealable, B256, U256},
    rlp::{Decodable, Encodable},
};
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction,
};
use simnode_api::{
    events::EventSender, BlockEvent, ChainEvent, ChainHead, ChainSpec, StateChanges, StoredBlock,
    SyncTarget,
};

use codec::{changeset_key, hash_address, hash_slot, history_key, storage_key, StoredAccount};
pub use root_cache::{set_storage_slots_kept, StorageTriesKept, DEFAULT_STORAGE_SLOTS_KEPT};
pub use state::HistoricalState;
use trie::{HashedOverlay, OverlayAccount, StateSource, StorageOverlay};

type Bytes<'a> = &'a [u8];

pub(crate) const HEADERS: TableDefinition<u64, Bytes> = TableDefinition::new("headers");
pub(crate) const CANONICAL: TableDefinition<u64, Bytes> = TableDefinition::new("canonical_hashes");
pub(crate) const HASH_TO_NUMBER: TableDefinition<Bytes, u64> =
    TableDefinition::new("hash_to_number");
pub(crate) const BODIES: TableDefinition<u64, Bytes> = TableDefinition::new("bodies");
pub(crate) const SENDERS: TableDefinition<u64, Bytes> = TableDefinition::new("senders");
pub(crate) const RECEIPTS: TableDefinition<u64, Bytes> = TableDefinition::new("receipts");
/// EIP-7685 requests, an RLP list of byte strings; only for blocks that have any.
pub(crate) const REQUESTS: TableDefinition<u64, Bytes> = TableDefinition::new("requests");
/// tx hash -> block number (8 bytes BE) ++ index (4 bytes BE)
pub(crate) const TX_INDEX: TableDefinition<Bytes, Bytes> = TableDefinition::new("tx_index");
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// hashed address -> StoredAccount
pub(crate) const ACCOUNTS: TableDefinition<Bytes, Bytes> = TableDefinition::new("accounts");
/// hashed address ++ hashed slot -> value (32 bytes BE, never zero)
pub(crate) const STORAGE: TableDefinition<Bytes, Bytes> = TableDefinition::new("storage");
pub(crate) const CODE: TableDefinition<Bytes, Bytes> = TableDefinition::new("code");
/// hashed address ++ block -> the account before that block changed it (empty: did not exist)
pub(crate) const ACCOUNT_HISTORY: TableDefinition<Bytes, Bytes> =
    TableDefinition::new("account_history");
/// hashed address ++ hashed slot ++ block -> the value before that block changed it
pub(crate) const STORAGE_HISTORY: TableDefinition<Bytes, Bytes> =
    TableDefinition::new("storage_history");
/// block ++ hashed address: which accounts a block changed (values live in ACCOUNT_HISTORY)
pub(crate) const ACCOUNT_CHANGESETS: TableDefinition<Bytes, ()> =
    TableDefinition::new("account_changesets");
/// block ++ hashed address ++ hashed slot
pub(crate) const STORAGE_CHANGESETS: TableDefinition<Bytes, ()> =
    TableDefinition::new("storage_changesets");

/// block hash -> header RLP ++ body RLP: blocks not on the canonical chain, kept so a later
/// forkchoice can make them canonical (side-branch payloads and blocks a reorg unwound).
pub(crate) const SIDE_BLOCKS: TableDefinition<Bytes, Bytes> = TableDefinition::new("side_blocks");
/// A reorg begun and not yet finished (see [`Store::begin_reorg`]).
const REORG: TableDefinition<&str, Bytes> = TableDefinition::new("reorg_in_progress");
const REORG_KEY: &str = "reorg";

const META_HEAD: &str = "head";
const META_SAFE: &str = "safe";
const META_FINALIZED: &str = "finalized";
/// A dev chain's instance number (`anvil_metadata`'s instance id), renewed by a reset.
const META_DEV_INSTANCE: &str = "dev_instance";
/// Where the datadir's blocks come from (see [`ChainOrigin`]), once known.
const META_ORIGIN: &str = "origin";
/// How many times a dev node has started on this datadir (see [`Store::count_dev_start`]).
const META_DEV_STARTS: &str = "dev_starts";
/// The head the consensus client last named, while blocks stored above it wait for a
/// forkchoice update (see [`Unnamed`]); absent when it is the stored head.
const META_NAMED_HEAD: &str = "named_head";

/// Where a datadir's blocks come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainOrigin {
    /// Mined here by a `--dev` node.
    Dev = 1,
    /// Imported from chain files or received from a consensus client.
    Followed = 2,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    // Not a `#[from]`/source: the message holds it already, and a source would print twice
    // in an error chain.
    #[error("database: {0}")]
    Db(redb::Error),
    #[error("{} is in use by another process (a simnode node or import on this --datadir?); stop it, or use another --datadir", .0.display())]
    InUse(PathBuf),
    #[error("cannot create datadir {path}: {error}")]
    Datadir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "the datadir holds another chain (genesis {stored}), not this one (genesis {expected})"
    )]
    WrongChain { stored: B256, expected: B256 },
    #[error("the datadir is empty and chain `{0}` has no genesis allocation to start from")]
    NoGenesisAlloc(String),
    #[error("block {number} does not extend the head (head is {head})")]
    NotNextBlock { number: u64, head: u64 },
    #[error("block {number}: state root mismatch: header has {expected}, execution gives {got}")]
    StateRoot {
        number: u64,
        expected: B256,
        got: B256,
    },
    #[error(
        "cannot unwind to block {target}: it is above the head {head} or below the finalized block"
    )]
    BadUnwind { target: u64, head: u64 },
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error(
        "the datadir's chain was stored under another chain configuration: this one has {0}. Use the genesis.json it was made with, or another --datadir"
    )]
    ChainConfig(String),
}

macro_rules! db_err {
    ($($t:ty),*) => {$(impl From<$t> for StoreError { fn from(e: $t) -> Self { Self::Db(e.into()) } })*};
}
db_err!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// A stored block as the store hands it back: the sealed header and the body.
pub type SealedBlock = (Sealed<Header>, BlockBody<TxEnvelope>);

/// A block ready to be stored: executed and validated except for the state root, which
/// [`Store::commit_block`] computes and checks inside the write transaction.
#[derive(Debug, Clone)]
pub struct NewBlock {
    pub header: Sealed<Header>,
    pub body: BlockBody<TxEnvelope>,
    pub senders: Vec<Address>,
    pub receipts: Vec<ReceiptEnvelope>,
    /// EIP-7685 requests the block produced (each `type ++ data`), kept for Engine API replays
    /// and payload bodies.
    pub requests: Vec<alloy::primitives::Bytes>,
}

pub struct Store {
    db: Arc<Database>,
    head: RwLock<ChainHead>,
    spec: Arc<ChainSpec>,
    snapshots: snapshot::Snapshots,
    /// Blocks joining and leaving the canonical chain, for `eth_subscribe`.
    events: EventSender<ChainEvent>,
    /// Whether commits wait for the disk (see [`Store::defer_sync`]).
    deferred_sync: std::sync::atomic::AtomicBool,
    /// Whether the node is behind its consensus client (`eth_syncing`); kept by the Engine API.
    sync_target: tokio::sync::watch::Sender<Option<SyncTarget>>,
    /// The first write the disk refused (see [`Store::write_failure`]).
    write_failure: std::sync::OnceLock<String>,
    /// Blocks stored above the head the consensus client named (see [`Unnamed`]).
    unnamed: std::sync::Mutex<Unnamed>,
}

/// Blocks stored above the head the consensus client last named. `engine_newPayload`
/// executes and stores a block that extends the chain, but only a forkchoice update makes a
/// block the head (geth inserts such a block without setting its head): until one names
/// them, readers are served the chain up to `named`, and the blocks' events wait in `events`.
#[derive(Debug, Default)]
struct Unnamed {
    named: Option<u64>,
    events: Vec<(u64, ChainEvent)>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("head", &self.head()).finish()
    }
}

impl Store {
    /// Opens (or creates, writing the genesis block) the chain database in `datadir`.
    pub fn open(
        datadir: &Path,
        spec: Arc<ChainSpec>,
        alloc: Option<&BTreeMap<Address, GenesisAccount>>,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(datadir).map_err(|error| StoreError::Datadir {
            path: datadir.to_path_buf(),
            error,
        })?;
        let path = datadir.join("chain.redb");
        if !path.exists() {
            // A new database is built under a name of its own and linked into
            // place once it holds the genesis block: a crash while redb lays out a fresh file
            // would otherwise leave a `chain.redb` that is not a database at all, and two
            // processes creating the datadir at once would build over each other's file.
            static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let build = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let fresh = datadir.join(format!("chain.redb.new.{}.{build}", std::process::id()));
            let _ = std::fs::remove_file(&fresh);
            let built = (|| {
                let store = Self {
                    db: Arc::new(Database::create(&fresh)?),
                    head: RwLock::new(ChainHead::default()),
                    spec: spec.clone(),
                    snapshots: Default::default(),
                    events: Default::default(),
                    deferred_sync: Default::default(),
                    sync_target: Default::default(),
                    write_failure: Default::default(),
                    unnamed: Default::default(),
                };
                let alloc =
                    alloc.ok_or_else(|| StoreError::NoGenesisAlloc(store.spec.name.clone()))?;
                store.write_genesis(alloc)
            })();
            if let Err(e) = built {
                let _ = std::fs::remove_file(&fresh);
                return Err(e);
            }
            // The first process to link its file wins; the others open that one below. Where
            // the filesystem has no hard links, the file is renamed into place instead.
            let placed = match std::fs::hard_link(&fresh, &path) {
                Ok(()) => std::fs::remove_file(&fresh),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::fs::remove_file(&fresh)
                }
                Err(_) => std::fs::rename(&fresh, &path),
            };
            placed.map_err(|error| StoreError::Datadir {
                path: path.clone(),
                error,
            })?;
        }
        // redb panics on some damage it meets while opening (an unreachable branch of its
        // B-tree code) where other damage is an error: both end as an error here, and the
        // panic's own report (the default hook's "thread 'main' panicked", which reads as a
        // crash) is held back while the database opens, before anything else runs.
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let opened = std::panic::catch_unwind(|| Database::create(&path));
        std::panic::set_hook(quiet);
        let db = opened.map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            StoreError::Corrupt(format!(
                "{} cannot be opened, it is damaged ({what}); restore it or import the chain into another --datadir",
                path.display()
            ))
        })?
        .map_err(|err| match err {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::InUse(path.clone()),
            other => StoreError::from(other),
        })?;
        let store = Self {
            db: Arc::new(db),
            head: RwLock::new(ChainHead::default()),
            spec,
            snapshots: Default::default(),
            events: Default::default(),
            deferred_sync: Default::default(),
            sync_target: Default::default(),
            write_failure: Default::default(),
            unnamed: Default::default(),
        };
        let genesis_hash = store.spec.genesis_header.hash();
        match store.canonical_hash_raw(0)? {
            Some(stored) if stored != genesis_hash => {
                return Err(StoreError::WrongChain {
                    stored,
                    expected: genesis_hash,
                })
            }
            Some(_) => {}
            None => {
                let alloc =
                    alloc.ok_or_else(|| StoreError::NoGenesisAlloc(store.spec.name.clone()))?;
                store.write_genesis(alloc)?;
            }
        }
        store.reload_head()?;
        store.check_chain_config()?;
        Ok(store)
    }

    pub fn spec(&self) -> &Arc<ChainSpec> {
        &self.spec
    }

    pub fn head(&self) -> ChainHead {
        *self.head.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The dev chain's instance number, if one was set: it names the chain in this datadir from
    /// one `anvil_reset` to the next, across restarts.
    pub fn dev_instance(&self) -> Result<Option<u64>, StoreError> {
        let tx = self.db.begin_read()?;
        let meta = tx.open_table(META)?;
        Ok(meta.get(META_DEV_INSTANCE)?.map(|v| v.value()))
    }

    /// Where this datadir's blocks come from, as recorded by [`Store::set_origin`]. Datadirs
    /// made before it was recorded are judged by their head: a dev node keeps every block
    /// final, a followed chain's head is newer than its finalized block (or none is).
    pub fn origin(&self) -> Result<Option<ChainOrigin>, StoreError> {
        let tx = self.db.begin_read()?;
        let meta = tx.open_table(META)?;
        let recorded = meta.get(META_ORIGIN)?.map(|v| v.value());
        Ok(match recorded {
            Some(1) => Some(ChainOrigin::Dev),
            Some(_) => Some(ChainOrigin::Followed),
            None => {
                let head = self.head();
                match (head.latest, head.finalized) {
                    (0, _) => None,
                    (latest, Some(finalized)) if finalized == latest => None,
                    _ => Some(ChainOrigin::Followed),
                }
            }
        })
    }

    pub fn set_origin(&self, origin: ChainOrigin) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        tx.open_table(META)?.insert(META_ORIGIN, origin as u64)?;
        self.commit(tx)
    }

    /// Counts a dev node's start on this datadir, returning how many came before it: what a
    /// run hands out (snapshot ids) can differ from every earlier run's.
    pub fn count_dev_start(&self) -> Result<u64, StoreError> {
        let tx = self.begin_write()?;
        let before = {
            let mut meta = tx.open_table(META)?;
            let before = meta.get(META_DEV_STARTS)?.map_or(0, |v| v.value());
            meta.insert(META_DEV_STARTS, before + 1)?;
            before
        };
        self.commit(tx)?;
        Ok(before)
    }

    /// Names a new dev chain in this datadir (`anvil_reset`, or the first `anvil_metadata`).
    pub fn set_dev_instance(&self, instance: u64) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        tx.open_table(META)?.insert(META_DEV_INSTANCE, instance)?;
        self.commit(tx)
    }

    pub(crate) fn reload_head(&self) -> Result<(), StoreError> {
        let tx = self.db.begin_read()?;
        let meta = tx.open_table(META)?;
        let get =
            |k: &str| -> Result<Option<u64>, StoreError> { Ok(meta.get(k)?.map(|v| v.value())) };
        let head = ChainHead {
            latest: get(META_HEAD)?.unwrap_or(0),
            safe: get(META_SAFE)?,
            finalized: get(META_FINALIZED)?,
        };
        self.unnamed().named = get(META_NAMED_HEAD)?.filter(|named| *named < head.latest);
        *self.head.write().unwrap_or_else(|e| e.into_inner()) = head;
        Ok(())
    }

    fn unnamed(&self) -> std::sync::MutexGuard<'_, Unnamed> {
        self.unnamed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest block readers are served: the stored head, unless blocks stored since the
    /// consensus client last named its head wait for a forkchoice update (see [`Unnamed`]).
    pub fn served_head(&self) -> u64 {
        let stored = self.head().latest;
        self.unnamed()
            .named
            .map_or(stored, |named| named.min(stored))
    }

    /// The header of [`Store::served_head`].
    pub fn served_head_header(&self) -> Result<Sealed<Header>, StoreError> {
        let number = self.served_head();
        self.header_raw(number)?
            .ok_or_else(|| StoreError::Corrupt(format!("header {number} missing")))
    }

    /// Blocks stored from now on wait for a forkchoice update naming them before readers
    /// see them (`engine_newPayload`); the head stored now is the one readers keep.
    pub fn hold_new_blocks(&self) {
        let stored = self.head().latest;
        self.unnamed().named.get_or_insert(stored);
    }

    fn write_genesis(&self, alloc: &BTreeMap<Address, GenesisAccount>) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        {
            let header = &self.spec.genesis_header;
            write_block_data(
                &tx,
                &NewBlock {
                    header: header.clone(),
                    // A genesis from Shanghai on has an (empty) withdrawals list, as geth's:
                    // its body, raw form and size count it.
                    body: BlockBody {
                        withdrawals: header
                            .withdrawals_root
                            .map(|_| alloy::eips::eip4895::Withdrawals::default()),
                        ..BlockBody::default()
                    },
                    senders: vec![],
                    receipts: vec![],
                    requests: vec![],
                },
            )?;
            let mut code = tx.open_table(CODE)?;
            for account in alloc.values() {
                if let Some(c) = account.code.as_ref().filter(|c| !c.is_empty()) {
                    code.insert(keccak256(c).as_slice(), c.as_ref())?;
                }
            }
            drop(code);
            let overlay = trie::genesis_overlay(alloc);
            let roots = trie::state_root(
                &TableSource::from_tables(tx.open_table(ACCOUNTS)?, tx.open_table(STORAGE)?),
                &overlay,
            )?;
            if roots.state_root != header.state_root {
                return Err(StoreError::StateRoot {
                    number: 0,
                    expected: header.state_root,
                    got: roots.state_root,
                });
            }
            apply_overlay(&tx, 0, &overlay, &roots.storage_roots, false)?;
            let mut meta = tx.open_table(META)?;
            meta.insert(META_HEAD, 0)?;
        }
        self.commit(tx)?;
        Ok(())
    }

    /// Stores `block` on top of the head: computes the state root of the head state with
    /// `changes`, checks it against the header, and writes everything in one transaction.
    pub fn commit_block(&self, block: &NewBlock, changes: &StateChanges) -> Result<(), StoreError> {
        self.commit_block_with(block, changes, false)
    }

    /// [`Store::commit_block`] for a chain with instant finality (the dev chain): the block is
    /// also the safe and finalized one, in the same transaction, so no reader sees the new head
    /// with the old finalized block.
    pub fn commit_final_block(
        &self,
        block: &NewBlock,
        changes: &StateChanges,
    ) -> Result<(), StoreError> {
        self.commit_block_with(block, changes, true)
    }

    fn commit_block_with(
        &self,
        block: &NewBlock,
        changes: &StateChanges,
        finalize: bool,
    ) -> Result<(), StoreError> {
        let number = block.header.number;
        // Held for a forkchoice: readers keep the named head, the event waits (see `Unnamed`).
        let held_below = self.unnamed().named.filter(|named| number > *named);
        let tx = self.begin_write()?;
        let advanced;
        {
            // The head is checked inside the write transaction: writers (import, Engine API,
            // dev miner) are serialized by redb, so this is the one check that cannot race.
            let head = tx
                .open_table(META)?
                .get(META_HEAD)?
                .map(|v| v.value())
                .unwrap_or(0);
            if number != head + 1 {
                return Err(StoreError::NotNextBlock { number, head });
            }
            let overlay = self.overlay_from_changes(&tx, changes)?;
            let (roots, tries) = block_roots(&tx, head, &overlay, block.header.state_root)?;
            advanced = tries;
            if roots.state_root != block.header.state_root {
                return Err(StoreError::StateRoot {
                    number,
                    expected: block.header.state_root,
                    got: roots.state_root,
                });
            }
            write_block_data(&tx, block)?;
            apply_overlay(&tx, number, &overlay, &roots.storage_roots, true)?;
            let mut meta = tx.open_table(META)?;
            meta.insert(META_HEAD, number)?;
            if let Some(named) = held_below {
                meta.insert(META_NAMED_HEAD, named)?;
            }
            if finalize {
                meta.insert(META_SAFE, number)?;
                meta.insert(META_FINALIZED, number)?;
            }
        }
        if finalize {
            prune_side_blocks(&tx, number)?;
        }
        self.commit(tx)?;
        {
            let mut head = self.head.write().unwrap_or_else(|e| e.into_inner());
            head.latest = number;
            if finalize {
                head.safe = Some(number);
                head.finalized = Some(number);
            }
        }
        if let Some(tries) = advanced {
            tries.keep(block.header.hash());
        }
        if self.events.has_subscribers() {
            let event = ChainEvent::Added(Arc::new(BlockEvent {
                block: StoredBlock {
                    header: block.header.clone(),
                    body: block.body.clone(),
                    senders: block.senders.clone(),
                },
                receipts: block.receipts.clone(),
            }));
            match held_below {
                Some(_) => self.unnamed().events.push((number, event)),
                None => self.events.send(event),
            }
        }
        Ok(())
    }

    /// Changes of the canonical chain from now on.
    pub fn chain_events(&self) -> tokio::sync::broadcast::Receiver<ChainEvent> {
        self.events.subscribe()
    }

    /// Records that the consensus client is ahead of this node: it sent block `number`, or
    /// (`None`) named a head, that the node cannot connect to its chain. The first such call
    /// after being in sync starts from the current head.
    pub fn fell_behind(&self, number: Option<u64>) {
        let head = self.head().latest;
        self.sync_target.send_modify(|target| {
            let target = target.get_or_insert(SyncTarget {
                starting_block: head,
                highest_block: None,
            });
            target.highest_block = target.highest_block.max(number);
        });
    }

    /// Records that the consensus client's head is this node's head.
    pub fn caught_up(&self) {
        self.sync_target
            .send_if_modified(|target| target.take().is_some());
    }

    /// Whether the node is behind its consensus client, now and from now on.
    pub fn sync_target(&self) -> tokio::sync::watch::Receiver<Option<SyncTarget>> {
        self.sync_target.subscribe()
    }

    /// Turns address-keyed changes into a hashed overlay and stores new bytecode on the way
    /// (code is content-addressed, so writing it early is harmless).
    fn overlay_from_changes(
        &self,
        tx: &WriteTransaction,
        changes: &StateChanges,
    ) -> Result<HashedOverlay, StoreError> {
        let mut code = tx.open_table(CODE)?;
        for change in changes.values() {
            if let Some(bytecode) = change.info.as_ref().and_then(|i| i.code.as_ref()) {
                let hash = change
                    .info
                    .as_ref()
                    .map(|i| i.code_hash)
                    .unwrap_or_default();
                if !bytecode.is_empty() && code.get(hash.as_slice())?.is_none() {
                    code.insert(hash.as_slice(), bytecode.original_bytes().as_ref())?;
                }
            }
        }
        Ok(hashed_overlay(changes))
    }

    /// The state root of the state after block `base` with `changes` on top.
    pub fn state_root_with(&self, base: u64, changes: &StateChanges) -> Result<B256, StoreError> {
        let tx = self.db.begin_read()?;
        let latest = self.head().latest;
        let mut overlay = hashed_overlay(changes);
        if base < latest {
            let revert = state::revert_overlay(&tx, base)?;
            overlay = state::stack_overlays(revert, overlay);
        }
        Ok(trie::state_root(
            &TableSource::from_tables(tx.open_table(ACCOUNTS)?, tx.open_table(STORAGE)?),
            &overlay,
        )?
        .state_root)
    }

    /// Sets the safe and finalized blocks (numbers must be canonical; the caller checks).
    pub fn set_finality(
        &self,
        safe: Option<u64>,
        finalized: Option<u64>,
    ) -> Result<(), StoreError> {
        self.set_forkchoice(None, safe, finalized)
    }

    /// A forkchoice update: canonical block `head` (the stored head, or one below it) is the
    /// block readers are served from now on, with `safe` and `finalized` (see
    /// [`Store::set_finality`]); the held events of the blocks up to it go out.
    pub fn name_head(
        &self,
        head: u64,
        safe: Option<u64>,
        finalized: Option<u64>,
    ) -> Result<(), StoreError> {
        self.set_forkchoice(Some(head), safe, finalized)
    }

    /// Serves every stored block: those a consensus client sent and has not named become the
    /// head (an import on top vouches for them).
    pub fn name_stored_head(&self) -> Result<(), StoreError> {
        if self.unnamed().named.is_none() {
            return Ok(());
        }
        self.set_forkchoice(Some(self.head().latest), None, None)
    }

    fn set_forkchoice(
        &self,
        head: Option<u64>,
        safe: Option<u64>,
        finalized: Option<u64>,
    ) -> Result<(), StoreError> {
        let stored = self.head().latest;
        let named = head.map(|head| (head < stored).then_some(head));
        let tx = self.begin_write()?;
        {
            let mut meta = tx.open_table(META)?;
            match named {
                Some(Some(head)) => {
                    meta.insert(META_NAMED_HEAD, head)?;
                }
                Some(None) => {
                    meta.remove(META_NAMED_HEAD)?;
                }
                None => {}
            }
            if let Some(s) = safe {
                meta.insert(META_SAFE, s)?;
            }
            if let Some(f) = finalized {
                meta.insert(META_FINALIZED, f)?;
            }
        }
        if let Some(f) = finalized {
            prune_side_blocks(&tx, f)?;
        }
        self.commit(tx)?;
        {
            let mut head = self.head.write().unwrap_or_else(|e| e.into_inner());
            if safe.is_some() {
                head.safe = safe;
            }
            if finalized.is_some() {
                head.finalized = finalized;
            }
        }
        if let Some(named) = named {
            let released = {
                let mut unnamed = self.unnamed();
                unnamed.named = named;
                let up_to = named.unwrap_or(stored);
                let (released, held): (Vec<_>, Vec<_>) = std::mem::take(&mut unnamed.events)
                    .into_iter()
                    .partition(|(number, _)| *number <= up_to);
                unnamed.events = held;
                released
            };
            for (_, event) in released {
                self.events.send(event);
            }
        }
        Ok(())
    }

    pub(crate) fn canonical_hash_raw(&self, number: u64) -> Result<Option<B256>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(CANONICAL) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(table.get(number)?.map(|v| B256::from_slice(v.value())))
    }

    pub fn number_of(&self, hash: &B256) -> Result<Option<u64>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(HASH_TO_NUMBER)?;
        Ok(table.get(hash.as_slice())?.map(|v| v.value()))
    }

    pub fn header_raw(&self, number: u64) -> Result<Option<Sealed<Header>>, StoreError> {
        let snapshot = self.snapshot()?;
        let Some(bytes) = snapshot.headers.get(number)? else {
            return Ok(None);
        };
        let header = Header::decode(&mut bytes.value())
            .map_err(|e| StoreError::Corrupt(format!("header {number}: {e}")))?;
        // The canonical table holds the hash already; re-hashing every read showed up in
        // profiles of the RPC methods.
        let hash = match snapshot.canonical.get(number)? {
            Some(h) => B256::from_slice(h.value()),
            None => return Ok(Some(header.seal_slow())),
        };
        Ok(Some(Sealed::new_unchecked(header, hash)))
    }

    /// The header of the current head.
    pub fn head_header(&self) -> Result<Sealed<Header>, StoreError> {
        let latest = self.head().latest;
        self.header_raw(latest)?
            .ok_or_else(|| StoreError::Corrupt(format!("head header {latest} missing")))
    }

    /// The EIP-7685 requests block `number` produced (empty when none).
    pub fn requests(&self, number: u64) -> Result<Vec<alloy::primitives::Bytes>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(REQUESTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![]),
            Err(e) => return Err(e.into()),
        };
        let Some(raw) = table.get(number)? else {
            return Ok(vec![]);
        };
        Vec::<alloy::primitives::Bytes>::decode(&mut raw.value())
            .map_err(|e| StoreError::Corrupt(format!("requests {number}: {e}")))
    }

    /// Keeps a block that is not (or no longer) canonical in the side table.
    pub fn put_side_block(
        &self,
        header: &Sealed<Header>,
        body: &BlockBody<TxEnvelope>,
    ) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        {
            let mut side = tx.open_table(SIDE_BLOCKS)?;
            side.insert(
                header.hash().as_slice(),
                encode_side(header, body).as_slice(),
            )?;
        }
        self.commit(tx)?;
        Ok(())
    }

    /// A block of the side table by hash.
    pub fn side_block(&self, hash: &B256) -> Result<Option<SealedBlock>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(SIDE_BLOCKS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some(raw) = table.get(hash.as_slice())? else {
            return Ok(None);
        };
        let mut bytes = raw.value();
        let header = Header::decode(&mut bytes)
            .map_err(|e| StoreError::Corrupt(format!("side header {hash}: {e}")))?;
        let body = BlockBody::<TxEnvelope>::decode(&mut bytes)
            .map_err(|e| StoreError::Corrupt(format!("side body {hash}: {e}")))?;
        Ok(Some((Sealed::new_unchecked(header, *hash), body)))
    }

    /// Drops a block from the side table (it became canonical, or it is invalid).
    pub fn remove_side_block(&self, hash: &B256) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        tx.open_table(SIDE_BLOCKS)?.remove(hash.as_slice())?;
        self.commit(tx)?;
        Ok(())
    }

    /// Notes that a reorg to `target` begins, leaving the head `previous`: a reorg is an
    /// unwind and then a commit per block, so a crash between them leaves a head nobody chose,
    /// and the note lets the next start finish it ([`Store::unfinished_reorg`]). A note already
    /// there (a reorg resumed) keeps the head the first one left.
    pub fn begin_reorg(&self, target: B256, previous: B256) -> Result<(), StoreError> {
        let previous = match self.unfinished_reorg()? {
            Some((_, first)) => first,
            None => previous,
        };
        let tx = self.begin_write()?;
        tx.open_table(REORG)?.insert(
            REORG_KEY,
            [target.as_slice(), previous.as_slice()].concat().as_slice(),
        )?;
        self.commit(tx)
    }

    /// The reorg is over (done, or the old chain restored).
    pub fn end_reorg(&self) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        tx.open_table(REORG)?.remove(REORG_KEY)?;
        self.commit(tx)
    }

    /// The target and the head left behind of a reorg a crash interrupted, if one did.
    pub fn unfinished_reorg(&self) -> Result<Option<(B256, B256)>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(REORG) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some(raw) = table.get(REORG_KEY)? else {
            return Ok(None);
        };
        let both = raw.value();
        if both.len() != 64 {
            return Err(StoreError::Corrupt(format!(
                "the note of an unfinished reorg has {} bytes, not 64",
                both.len()
            )));
        }
        Ok(Some((
            B256::from_slice(&both[..32]),
            B256::from_slice(&both[32..]),
        )))
    }

    /// Unwinds the canonical chain to block `target`: in one write transaction, restores the
    /// state tables to the state after `target`, deletes the history and changesets of the
    /// blocks above it, moves those blocks (header and body) to the side table, and lowers the
    /// head (safe is clamped to it; finalized must not be above it). A crash leaves either the
    /// old chain or the unwound one, every block present in one of the two places. Returns the
    /// unwound blocks, lowest first.
    pub fn unwind_to(&self, target: u64) -> Result<Vec<SealedBlock>, StoreError> {
        let tx = self.begin_write()?;
        let mut unwound = Vec::new();
        // Senders and receipts of the unwound blocks, kept only when someone subscribed.
        let mut left = Vec::new();
        let announce = self.events.has_subscribers();
        // Blocks above the named head were never announced, so their removal is not either.
        let named = self.unnamed().named;
        {
            let mut meta = tx.open_table(META)?;
            let head = meta.get(META_HEAD)?.map(|v| v.value()).unwrap_or(0);
            let finalized = meta.get(META_FINALIZED)?.map(|v| v.value());
            if target > head || finalized.is_some_and(|f| target < f) {
                return Err(StoreError::BadUnwind { target, head });
            }
            if target == head {
                return Ok(vec![]);
            }
            unwind_state(&tx, target)?;
            let mut headers = tx.open_table(HEADERS)?;
            let mut canonical = tx.open_table(CANONICAL)?;
            let mut hash_to_number = tx.open_table(HASH_TO_NUMBER)?;
            let mut bodies = tx.open_table(BODIES)?;
            let mut senders = tx.open_table(SENDERS)?;
            let mut receipts = tx.open_table(RECEIPTS)?;
            let mut requests = tx.open_table(REQUESTS)?;
            let mut tx_index = tx.open_table(TX_INDEX)?;
            let mut side = tx.open_table(SIDE_BLOCKS)?;
            for number in target + 1..=head {
                let header = headers
                    .remove(number)?
                    .map(|v| Header::decode(&mut v.value()))
                    .transpose()
                    .map_err(|e| StoreError::Corrupt(format!("header {number}: {e}")))?
                    .ok_or_else(|| StoreError::Corrupt(format!("header {number} missing")))?;
                let hash = canonical
                    .remove(number)?
                    .map(|v| B256::from_slice(v.value()))
                    .unwrap_or_else(|| header.hash_slow());
                let body = bodies
                    .remove(number)?
                    .map(|v| BlockBody::<TxEnvelope>::decode(&mut v.value()))
                    .transpose()
                    .map_err(|e| StoreError::Corrupt(format!("body {number}: {e}")))?
                    .unwrap_or_default();
                hash_to_number.remove(hash.as_slice())?;
                let block_senders = senders.remove(number)?;
                let block_receipts = receipts.remove(number)?;
                if announce && named.is_none_or(|named| number <= named) {
                    // A subscriber's view of the block; a receipt list that does not decode
                    // (never written so) is announced empty rather than stopping the unwind.
                    let senders = block_senders
                        .map(|v| codec::decode_senders(v.value()))
                        .unwrap_or_default();
                    let receipts = block_receipts
                        .and_then(|v| Vec::<ReceiptEnvelope>::decode(&mut v.value()).ok())
                        .unwrap_or_default();
                    left.push((senders, receipts));
                }
                requests.remove(number)?;
                for t in &body.transactions {
                    let h = t.trie_hash();
                    let points_here = tx_index
                        .get(h.as_slice())?
                        .is_some_and(|v| v.value()[..8] == number.to_be_bytes());
                    if points_here {
                        tx_index.remove(h.as_slice())?;
                    }
                }
                let header = Sealed::new_unchecked(header, hash);
                side.insert(hash.as_slice(), encode_side(&header, &body).as_slice())?;
                unwound.push((header, body));
            }
            meta.insert(META_HEAD, target)?;
            if meta.get(META_SAFE)?.is_some_and(|v| v.value() > target) {
                meta.insert(META_SAFE, target)?;
            }
            if named.is_some_and(|named| named >= target) {
                meta.remove(META_NAMED_HEAD)?;
            }
        }
        self.commit(tx)?;
        self.reload_head()?;
        self.unnamed()
            .events
            .retain(|(number, _)| *number <= target);
        if announce && !left.is_empty() {
            let removed = unwound
                .iter()
                .zip(left)
                .map(|((header, body), (senders, receipts))| BlockEvent {
                    block: StoredBlock {
                        header: header.clone(),
                        body: body.clone(),
                        senders,
                    },
                    receipts,
                })
                .collect();
            self.events.send(ChainEvent::Removed(Arc::new(removed)));
        }
        Ok(unwound)
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// The current read snapshot (see [`snapshot::Snapshots`]).
    pub(crate) fn snapshot(&self) -> Result<Arc<snapshot::Snapshot>, StoreError> {
        self.snapshots.get(&self.db)
    }

    /// Every write of the store commits here, so that no reader is handed a snapshot from
    /// before it.
    fn commit(&self, mut tx: WriteTransaction) -> Result<(), StoreError> {
        if self
            .deferred_sync
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            tx.set_durability(Durability::None)
                .map_err(|e| StoreError::Db(e.into()))?;
        }
        self.noting_failure(tx.commit().map_err(StoreError::from))?;
        self.snapshots.committed();
        Ok(())
    }

    /// A write transaction, unless the disk refused an earlier write.
    pub(crate) fn begin_write(&self) -> Result<WriteTransaction, StoreError> {
        self.noting_failure(self.db.begin_write().map_err(StoreError::from))
    }

    /// `result`, with a failure of the disk noted: once redb meets one it refuses every later
    /// write until the database is opened again, so the node can store no more blocks and says
    /// so (in its log once, and on `/health` from then on).
    pub(crate) fn noting_failure<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::Db(err @ (redb::Error::Io(_) | redb::Error::PreviousIo))) = &result {
            let mut first = false;
            self.write_failure.get_or_init(|| {
                first = true;
                err.to_string()
            });
            if first {
                tracing::error!(target: "simnode::store", error = %err, "the disk refused a write: the node stores no more blocks until it is restarted (free some space first; every block committed before is kept)");
            }
        }
        result
    }

    /// Why the database takes no more writes, if the disk refused one (see
    /// [`Store::noting_failure`]).
    pub fn write_failure(&self) -> Option<&str> {
        self.write_failure.get().map(String::as_str)
    }

    /// Until the guard is dropped, commits do not wait for the disk: each is still whole and
    /// visible at once, but a crash goes back to the last synced commit. For a bulk import,
    /// whose blocks are in the file being read: [`DeferredSync::sync`] every so often bounds
    /// what a crash costs, and dropping the guard syncs.
    pub fn defer_sync(&self) -> DeferredSync<'_> {
        self.deferred_sync
            .store(true, std::sync::atomic::Ordering::Relaxed);
        DeferredSync {
            store: self,
            finished: false,
        }
    }

    /// Makes every commit so far durable (an empty commit that waits for the disk).
    fn sync(&self) -> Result<(), StoreError> {
        let tx = self.begin_write()?;
        self.noting_failure(tx.commit().map_err(StoreError::from))
    }
}

/// Commits of the store do not wait for the disk while this lives; see [`Store::defer_sync`].
pub struct DeferredSync<'a> {
    store: &'a Store,
    /// Set by [`DeferredSync::finish`], which has synced already.
    finished: bool,
}

impl DeferredSync<'_> {
    /// Makes every commit so far durable.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.store.sync()
    }

    /// Ends the deferral: commits wait for the disk again, and every one so far is made
    /// durable (dropping the guard does the same, with an error only logged).
    pub fn finish(mut self) -> Result<(), StoreError> {
        self.finished = true;
        self.end()
    }

    fn end(&self) -> Result<(), StoreError> {
        self.store
            .deferred_sync
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.store.sync()
    }
}

impl Drop for DeferredSync<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Err(e) = self.end() {
            tracing::error!(error = %e, "could not sync the database");
        }
    }
}

/// Drops the side blocks that can no longer become canonical once block `finalized` is final:
/// a reorg never unwinds below it, so a side branch lives on only if it joins the canonical
/// chain at `finalized` or above. Without this the side table would grow for as long as the
/// node follows a chain with reorgs.
fn prune_side_blocks(tx: &WriteTransaction, finalized: u64) -> Result<(), StoreError> {
    let mut side = tx.open_table(SIDE_BLOCKS)?;
    // hash -> (number, parent hash) of every side block.
    let mut links = HashMap::new();
    for entry in side.iter()? {
        let (hash, raw) = entry?;
        let hash = B256::try_from(hash.value())
            .map_err(|_| StoreError::Corrupt("side block key".into()))?;
        let header = Header::decode(&mut raw.value())
            .map_err(|e| StoreError::Corrupt(format!("side header {hash}: {e}")))?;
        links.insert(hash, (header.number, header.parent_hash));
    }
    if links.is_empty() {
        return Ok(());
    }
    let canonical = tx.open_table(CANONICAL)?;
    // Whether a branch through `hash` joins the canonical chain at `finalized` or above,
    // memoized per block so each branch is walked once.
    let mut alive: HashMap<B256, bool> = HashMap::new();
    for start in links.keys().copied().collect::<Vec<_>>() {
        let mut path = Vec::new();
        let mut cursor = start;
        let verdict = loop {
            if let Some(&known) = alive.get(&cursor) {
                break known;
            }
            // The walk starts at a side block and only steps to parents in `links`.
            let Some(&(number, parent)) = links.get(&cursor) else {
                break false;
            };
            path.push(cursor);
            if number <= finalized {
                break false;
            }
            if let Some(&(parent_number, _)) = links.get(&parent) {
                // Numbers fall by one per step, so the walk ends even on a damaged table.
                if parent_number + 1 != number {
                    break false;
                }
                cursor = parent;
                continue;
            }
            let joins = canonical
                .get(number - 1)?
                .is_some_and(|h| h.value() == parent.as_slice());
            break joins;
        };
        for hash in path {
            alive.insert(hash, verdict);
        }
    }
    for (hash, keep) in alive {
        if !keep {
            side.remove(hash.as_slice())?;
        }
    }
    Ok(())
}

fn encode_side(header: &Sealed<Header>, body: &BlockBody<TxEnvelope>) -> Vec<u8> {
    let mut buf = Vec::new();
    header.inner().encode(&mut buf);
    body.encode(&mut buf);
    buf
}

/// Undoes what [`apply_overlay`] wrote (with history) for every block above `target`: each
/// account and slot changed above `target` gets back the value its earliest history entry
/// there saved (the value after `target`), and those history and changeset entries go.
/// Account entries carry their storage root, so restoring them restores the roots too.
fn unwind_state(tx: &WriteTransaction, target: u64) -> Result<(), StoreError> {
    let from = (target + 1).to_be_bytes();
    let block_of = |k: &[u8]| -> Result<u64, StoreError> {
        Ok(u64::from_be_bytes(k[..8].try_into().map_err(|_| {
            StoreError::Corrupt("changeset key".into())
        })?))
    };
    {
        let mut changes = tx.open_table(ACCOUNT_CHANGESETS)?;
        let mut history = tx.open_table(ACCOUNT_HISTORY)?;
        let mut accounts = tx.open_table(ACCOUNTS)?;
        let mut keys = Vec::new();
        for entry in changes.range(from.as_slice()..)? {
            let (k, _) = entry?;
            keys.push(k.value().to_vec());
        }
        // Changesets run in block order, so the first entry of an account is its earliest.
        let mut restored: BTreeMap<B256, ()> = BTreeMap::new();
        for k in &keys {
            let block = block_of(k)?;
            let hashed = B256::from_slice(&k[8..40]);
            let hk: [u8; 40] = history_key(hashed.as_slice(), block);
            let prev = history.remove(hk.as_slice())?.map(|v| v.value().to_vec());
            changes.remove(k.as_slice())?;
            if restored.insert(hashed, ()).is_some() {
                continue;
            }
            match prev.as_deref().and_then(StoredAccount::decode) {
                Some(acc) => accounts.insert(hashed.as_slice(), acc.encode().as_slice())?,
                None => accounts.remove(hashed.as_slice())?,
            };
        }
    }
    {
        let mut changes = tx.open_table(STORAGE_CHANGESETS)?;
        let mut history = tx.open_table(STORAGE_HISTORY)?;
        let mut storage = tx.open_table(STORAGE)?;
        let mut keys = Vec::new();
        for entry in changes.range(from.as_slice()..)? {
            let (k, _) = entry?;
            keys.push(k.value().to_vec());
        }
        let mut restored: BTreeMap<Vec<u8>, ()> = BTreeMap::new();
        for k in &keys {
            let block = block_of(k)?;
            let slot_key = &k[8..72];
            let hk: [u8; 72] = history_key(slot_key, block);
            let prev = history
                .remove(hk.as_slice())?
                .map_or(U256::ZERO, |v| U256::from_be_slice(v.value()));
            changes.remove(k.as_slice())?;
            if restored.insert(slot_key.to_vec(), ()).is_some() {
                continue;
            }
            if prev.is_zero() {
                storage.remove(slot_key)?;
            } else {
                storage.insert(slot_key, codec::u256_bytes(&prev).as_slice())?;
            }
        }
    }
    Ok(())
}

fn write_block_data(tx: &WriteTransaction, block: &NewBlock) -> Result<(), StoreError> {
    let number = block.header.number;
    let hash = block.header.hash();
    let mut buf = Vec::new();
    block.header.inner().encode(&mut buf);
    tx.open_table(HEADERS)?.insert(number, buf.as_slice())?;
    tx.open_table(CANONICAL)?.insert(number, hash.as_slice())?;
    tx.open_table(HASH_TO_NUMBER)?
        .insert(hash.as_slice(), number)?;
    buf.clear();
    block.body.encode(&mut buf);
    tx.open_table(BODIES)?.insert(number, buf.as_slice())?;
    let senders = codec::encode_senders(&block.senders);
    tx.open_table(SENDERS)?.insert(number, senders.as_slice())?;
    buf.clear();
    block.receipts.encode(&mut buf);
    tx.open_table(RECEIPTS)?.insert(number, buf.as_slice())?;
    if !block.requests.is_empty() {
        buf.clear();
        block.requests.encode(&mut buf);
        tx.open_table(REQUESTS)?.insert(number, buf.as_slice())?;
    }
    let mut index = tx.open_table(TX_INDEX)?;
    for (i, t) in block.body.transactions.iter().enumerate() {
        let mut loc = [0u8; 12];
        loc[..8].copy_from_slice(&number.to_be_bytes());
        loc[8..].copy_from_slice(&(i as u32).to_be_bytes());
        index.insert(t.trie_hash().as_slice(), loc.as_slice())?;
    }
    Ok(())
}

/// Writes the overlay into the current-state tables; with `record_history`, first saves the
/// values it replaces under `block` so the state before the block stays readable.
fn apply_overlay(
    tx: &WriteTransaction,
    block: u64,
    overlay: &HashedOverlay,
    storage_roots: &BTreeMap<B256, B256>,
    record_history: bool,
) -> Result<(), StoreError> {
    let mut accounts = tx.open_table(ACCOUNTS)?;
    let mut storage = tx.open_table(STORAGE)?;
    let mut account_history = tx.open_table(ACCOUNT_HISTORY)?;
    let mut storage_history = tx.open_table(STORAGE_HISTORY)?;
    let mut account_changes = tx.open_table(ACCOUNT_CHANGESETS)?;
    let mut storage_changes = tx.open_table(STORAGE_CHANGESETS)?;

    for (hashed, slots) in &overlay.storage {
        let mut prior: BTreeMap<B256, Option<U256>> = BTreeMap::new();
        if slots.wiped {
            let start = storage_key(hashed, &B256::ZERO);
            let end = storage_key(hashed, &B256::repeat_byte(0xff));
            let mut existing = Vec::new();
            for entry in storage.range(start.as_slice()..=end.as_slice())? {
                let (k, v) = entry?;
                existing.push((
                    B256::from_slice(&k.value()[32..]),
                    U256::from_be_slice(v.value()),
                ));
            }
            for (slot, value) in existing {
                storage.remove(storage_key(hashed, &slot).as_slice())?;
                prior.insert(slot, Some(value));
            }
        }
        for (slot, value) in &slots.slots {
            let key = storage_key(hashed, slot);
            let old = storage
                .get(key.as_slice())?
                .map(|v| U256::from_be_slice(v.value()));
            prior.entry(*slot).or_insert(old);
            if value.is_zero() {
                storage.remove(key.as_slice())?;
            } else {
                storage.insert(key.as_slice(), codec::u256_bytes(value).as_slice())?;
            }
        }
        if record_history {
            for (slot, old) in prior {
                let key = storage_key(hashed, &slot);
                let new = storage
                    .get(key.as_slice())?
                    .map(|v| U256::from_be_slice(v.value()));
                if new == old {
                    continue;
                }
                let hk: [u8; 72] = history_key(&key, block);
                storage_history.insert(
                    hk.as_slice(),
                    codec::u256_bytes(&old.unwrap_or_default()).as_slice(),
                )?;
                let ck: [u8; 72] = changeset_key(block, &key);
                storage_changes.insert(ck.as_slice(), ())?;
            }
        }
    }

    let mut touched: Vec<B256> = overlay.accounts.keys().copied().collect();
    touched.extend(
        overlay
            .storage
            .keys()
            .filter(|k| !overlay.accounts.contains_key(*k)),
    );
    for hashed in touched {
        let old = accounts
            .get(hashed.as_slice())?
            .and_then(|v| StoredAccount::decode(v.value()));
        let new = match overlay.accounts.get(&hashed) {
            Some(None) => None,
            Some(Some(a)) => Some(StoredAccount {
                nonce: a.nonce,
                balance: a.balance,
                code_hash: a.code_hash,
                storage_root: storage_roots
                    .get(&hashed)
                    .copied()
                    .or(a.storage_root)
                    .unwrap_or(trie_empty()),
            }),
            None => old.map(|mut acc| {
                if let Some(root) = storage_roots.get(&hashed) {
                    acc.storage_root = *root;
                }
                acc
            }),
        };
        if new == old {
            continue;
        }
        match new {
            Some(acc) => accounts.insert(hashed.as_slice(), acc.encode().as_slice())?,
            None => accounts.remove(hashed.as_slice())?,
        };
        if record_history {
            let hk: [u8; 40] = history_key(hashed.as_slice(), block);
            let prev = old.map(|a| a.encode().to_vec()).unwrap_or_default();
            account_history.insert(hk.as_slice(), prev.as_slice())?;
            let ck: [u8; 40] = changeset_key(block, hashed.as_slice());
            account_changes.insert(ck.as_slice(), ())?;
        }
    }
    Ok(())
}

/// The roots of the state after the head block `head` with `overlay` on top, and (when they
/// give `expected`) the head's cached tries advanced by it. Should the cached tries ever
/// disagree with the header, the roots are computed again from the tables before the block is
/// refused: a valid block is never turned away on the cache's word.
fn block_roots(
    tx: &WriteTransaction,
    head: u64,
    overlay: &HashedOverlay,
    expected: B256,
) -> Result<(trie::RootOutput, Option<root_cache::AdvancedTries>), StoreError> {
    let source = TableSource::from_tables(tx.open_table(ACCOUNTS)?, tx.open_table(STORAGE)?);
    let head_hash = tx
        .open_table(CANONICAL)?
        .get(head)?
        .map(|v| B256::from_slice(v.value()));
    let mut cached = None;
    if let Some(head_hash) = head_hash {
        match root_cache::advance_head(&source, head_hash, overlay) {
            Ok((roots, tries)) if roots.state_root == expected => return Ok((roots, Some(tries))),
            Ok((roots, _)) => cached = Some(roots.state_root),
            Err(e) => tracing::warn!(block = head + 1, error = %e, "cached tries failed"),
        }
    }
    let roots = trie::state_root(&source, overlay)?;
    if let Some(got) = cached.filter(|_| roots.state_root == expected) {
        tracing::warn!(block = head + 1, %expected, %got, "cached tries gave a wrong state root");
    }
    Ok((roots, None))
}

fn trie_empty() -> B256 {
    alloy_trie::EMPTY_ROOT_HASH
}

/// Address-keyed changes (what execution and modules produce) as a hashed overlay.
pub fn hashed_overlay(changes: &StateChanges) -> HashedOverlay {
    hashed_overlay_with(changes, hash_address, hash_slot)
}

/// [`hashed_overlay`] with the address and slot hashes from the given functions (the root
/// cache passes memoized ones).
pub(crate) fn hashed_overlay_with<'c>(
    changes: impl IntoIterator<Item = (&'c Address, &'c simnode_api::AccountChange)>,
    mut address_hash: impl FnMut(&Address) -> B256,
    mut slot_hash: impl FnMut(&U256) -> B256,
) -> HashedOverlay {
    let mut overlay = HashedOverlay::default();
    for (address, change) in changes {
        let hashed = address_hash(address);
        overlay.accounts.insert(
            hashed,
            change.info.as_ref().map(|i| OverlayAccount {
                nonce: i.nonce,
                balance: i.balance,
                code_hash: i.code_hash,
                storage_root: None,
            }),
        );
        if change.wipe_storage || !change.storage.is_empty() {
            let slots = change
                .storage
                .iter()
                .map(|(k, v)| (slot_hash(k), *v))
                .collect();
            overlay.storage.insert(
                hashed,
                StorageOverlay {
                    wiped: change.wipe_storage,
                    slots,
                },
            );
        }
    }
    overlay
}

/// A [`StateSource`] over the current-state tables of any transaction.
pub(crate) struct TableSource<A, S> {
    accounts: A,
    storage: S,
}

impl<A, S> TableSource<A, S> {
    pub(crate) fn from_tables(accounts: A, storage: S) -> Self {
        Self { accounts, storage }
    }
}

impl<A, S> StateSource for TableSource<A, S>
where
    A: ReadableTable<Bytes<'static>, Bytes<'static>>,
    S: ReadableTable<Bytes<'static>, Bytes<'static>>,
{
    type Error = StoreError;

    fn account(&self, hashed: &B256) -> Result<Option<StoredAccount>, StoreError> {
        Ok(self
            .accounts
            .get(hashed.as_slice())?
            .and_then(|v| StoredAccount::decode(v.value())))
    }

    fn for_each_account(&self, f: &mut dyn FnMut(B256, StoredAccount)) -> Result<(), StoreError> {
        for entry in self.accounts.iter()? {
            let (k, v) = entry?;
            let acc = StoredAccount::decode(v.value())
                .ok_or_else(|| StoreError::Corrupt("account entry".into()))?;
            f(B256::from_slice(k.value()), acc);
        }
        Ok(())
    }

    fn for_each_slot(
        &self,
        hashed: &B256,
        f: &mut dyn FnMut(B256, U256),
    ) -> Result<(), StoreError> {
        let start = storage_key(hashed, &B256::ZERO);
        let end = storage_key(hashed, &B256::repeat_byte(0xff));
        for entry in self.storage.range(start.as_slice()..=end.as_slice())? {
            let (k, v) = entry?;
            f(
                B256::from_slice(&k.value()[32..]),
                U256::from_be_slice(v.value()),
            );
        }
        Ok(())
    }
}
