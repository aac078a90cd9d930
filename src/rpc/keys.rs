//! API keys: the `simnode keys` command, the key file and the running node's view of it.
//!
//! Keys live in `<datadir>/keys.redb`, a redb file of their own rather than a table of the chain
//! database: redb locks a file for the process that has it open, and `simnode keys add` must work
//! while a node is running. So every operation opens the file briefly and closes it again, and a
//! running node re-reads it about once a second ([`KeyRegistry::spawn_refresh`]), which is how
//! added and revoked keys take effect without a restart.
//!
//! A key is 128 random bits written as 32 hex characters. Only its keccak-256 hash is stored; a
//! lookup hashes what the client sent, finds the record by hash and confirms with a
//! constant-time comparison, so neither the file nor response timing gives keys away. The first
//! 8 hex characters of the hash are the key's public *id*: it names the key in `keys list`, in
//! logs and metrics, and in `ApiKeyId`, and can be given to `keys revoke` instead of the key.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, RwLock,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use alloy::primitives::{hex, keccak256};
use clap::{Args, Subcommand};
use redb::{Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use simnode_api::ApiKeyId;
use subtle::ConstantTimeEq;

use super::{
    backend::KeysBackendKind,
    error::FrontDoorError,
    limiter::{EffectiveLimits, KeyLimits, Limiter},
    redis_keys::RedisKeyStore,
};

/// File name of the key store inside the datadir.
pub const KEYS_FILE: &str = "keys.redb";

/// keccak256(key) -> JSON [`KeyRecord`].
const KEYS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("api_keys");

/// Every this many refresh ticks the key file is read even if it looks unchanged.
const FORCE_RELOAD_EVERY: u64 = 10;

/// How long an operation waits for another process (a node re-reading, another `keys` command)
/// to let go of the file before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("key store {path}: {error}")]
    Db {
        path: PathBuf,
        error: Box<redb::Error>,
    },
    #[error("key store {0} is busy (another process keeps it open)")]
    Busy(PathBuf),
    #[error("key store {path}: record is not valid: {error}")]
    Corrupt {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error("no key matches {0}")]
    NotFound(String),
    #[error("{0} matches more than one key id; give the whole key")]
    Ambiguous(String),
    #[error("cannot create {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("the system random source failed: {0}")]
    Random(String),
}

/// What is stored about a key (never the key itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub name: String,
    /// First 8 hex characters of the key's hash.
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
    #[serde(default)]
    pub limits: KeyLimits,
    #[serde(flatten)]
    pub access: KeyAccess,
}

/// What a key may be used for, beyond its limits. An empty list allows everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyAccess {
    /// Browser origins the key takes requests from (`https://app.example.com`); when set, a
    /// request without an Origin is refused too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<String>,
    /// Methods the key may call: names (`eth_call`) or prefixes ending in `*` (`trace_*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
}

/// One of the lists of [`KeyAccess`], as `simnode keys` changes them one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessList {
    Origins,
    Methods,
}

impl AccessList {
    /// Its field name, in the key file and in Redis.
    pub fn field(self) -> &'static str {
        match self {
            Self::Origins => "origins",
            Self::Methods => "methods",
        }
    }

    pub fn of(self, access: &mut KeyAccess) -> &mut Vec<String> {
        match self {
            Self::Origins => &mut access.origins,
            Self::Methods => &mut access.methods,
        }
    }
}

impl KeyAccess {
    /// Whether a request with this `Origin` header (or none) may use the key: any may when no
    /// origins are listed; otherwise only a listed one, so leaving the header out does not get
    /// around the list.
    pub fn admits_origin(&self, origin: Option<&http::HeaderValue>) -> bool {
        if self.origins.is_empty() {
            return true;
        }
        origin.and_then(|o| o.to_str().ok()).is_some_and(|o| {
            self.origins
                .iter()
                .any(|allowed| super::cors::origin_matches(allowed, o))
        })
    }

    pub fn admits_method(&self, method: &str) -> bool {
        let listed = |method: &str| {
            self.methods
                .iter()
                .any(|allowed| match allowed.strip_suffix('*') {
                    Some(prefix) => method.starts_with(prefix),
                    None => allowed == method,
                })
        };
        // A subscription the key may open, it may close (else only closing the socket would).
        self.methods.is_empty()
            || listed(method)
            || (method == "eth_unsubscribe" && listed("eth_subscribe"))
    }
}

impl KeyRecord {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}

/// A key just created: the only moment its text is known.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: String,
    pub record: KeyRecord,
}

pub(crate) type KeyHash = [u8; 32];

pub(crate) fn hash_key(key: &str) -> KeyHash {
    keccak256(key.as_bytes()).0
}

pub(crate) fn key_id(hash: &KeyHash) -> String {
    hex::encode(&hash[..4])
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A fresh random key: 128 bits from the OS, hex.
pub fn generate_key() -> Result<String, KeyStoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| KeyStoreError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// The key file of one datadir. Holds only the path: see the module doc for why.
#[derive(Debug, Clone)]
pub struct KeyStore {
    path: PathBuf,
}

impl KeyStore {
    pub fn in_datadir(datadir: &Path) -> Self {
        Self {
            path: datadir.join(KEYS_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db_err(&self, err: impl Into<redb::Error>) -> KeyStoreError {
        KeyStoreError::Db {
            path: self.path.clone(),
            error: Box::new(err.into()),
        }
    }

    /// Opens for writing, creating the file, waiting while another process has it open.
    fn open_write(&self) -> Result<Database, KeyStoreError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|error| KeyStoreError::Io {
                path: dir.to_path_buf(),
                error,
            })?;
        }
        self.retry_busy(|| Database::create(&self.path))
    }

    /// Opens for reading; `None` when no key was ever stored.
    fn open_read(&self) -> Result<Option<ReadOnlyDatabase>, KeyStoreError> {
        if !self.path.exists() {
            return Ok(None);
        }
        self.retry_busy(|| ReadOnlyDatabase::open(&self.path))
            .map(Some)
    }

    fn retry_busy<T>(
        &self,
        mut open: impl FnMut() -> Result<T, redb::DatabaseError>,
    ) -> Result<T, KeyStoreError> {
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match open() {
                Ok(db) => return Ok(db),
                Err(redb::DatabaseError::DatabaseAlreadyOpen)
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                    return Err(KeyStoreError::Busy(self.path.clone()))
                }
                Err(err) => return Err(self.db_err(err)),
            }
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<KeyRecord, KeyStoreError> {
        serde_json::from_slice(bytes).map_err(|error| KeyStoreError::Corrupt {
            path: self.path.clone(),
            error,
        })
    }

    fn encode(record: &KeyRecord) -> Vec<u8> {
        // Serializing a struct of strings and integers cannot fail.
        serde_json::to_vec(record).unwrap_or_default()
    }

    /// Every stored key (revoked ones too), by hash.
    fn load(&self) -> Result<Vec<(KeyHash, KeyRecord)>, KeyStoreError> {
        let Some(db) = self.open_read()? else {
            return Ok(Vec::new());
        };
        let tx = db.begin_read().map_err(|e| self.db_err(e))?;
        let table = match tx.open_table(KEYS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.db_err(e)),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| self.db_err(e))? {
            let (hash, record) = entry.map_err(|e| self.db_err(e))?;
            let Ok(hash) = KeyHash::try_from(hash.value()) else {
                continue;
            };
            out.push((hash, self.decode(record.value())?));
        }
        Ok(out)
    }

    /// Stored keys, oldest first.
    pub fn list(&self) -> Result<Vec<KeyRecord>, KeyStoreError> {
        let mut records: Vec<_> = self.load()?.into_iter().map(|(_, record)| record).collect();
        records.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(records)
    }

    /// Creates and stores a new key.
    pub fn add(
        &self,
        name: &str,
        limits: KeyLimits,
        access: KeyAccess,
    ) -> Result<NewKey, KeyStoreError> {
        let key = generate_key()?;
        let hash = hash_key(&key);
        let record = KeyRecord {
            name: name.to_string(),
            id: key_id(&hash),
            created_at: unix_now(),
            revoked_at: None,
            limits,
            access,
        };
        let db = self.open_write()?;
        let tx = db.begin_write().map_err(|e| self.db_err(e))?;
        {
            let mut table = tx.open_table(KEYS).map_err(|e| self.db_err(e))?;
            table
                .insert(hash.as_slice(), Self::encode(&record).as_slice())
                .map_err(|e| self.db_err(e))?;
        }
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok(NewKey { key, record })
    }

    /// Applies `change` to the key named by its full text or by its id.
    fn update(
        &self,
        key_or_id: &str,
        change: impl FnOnce(&mut KeyRecord),
    ) -> Result<KeyRecord, KeyStoreError> {
        let db = self.open_write()?;
        let tx = db.begin_write().map_err(|e| self.db_err(e))?;
        let record = {
            let mut table = tx.open_table(KEYS).map_err(|e| self.db_err(e))?;
            let full_hash = hash_key(key_or_id);
            let mut matches = Vec::new();
            for entry in table.iter().map_err(|e| self.db_err(e))? {
                let (hash, record) = entry.map_err(|e| self.db_err(e))?;
                let record = self.decode(record.value())?;
                if bool::from(hash.value().ct_eq(full_hash.as_slice()))
                    || record.id.eq_ignore_ascii_case(key_or_id)
                {
                    matches.push((hash.value().to_vec(), record));
                }
            }
            let (hash, mut record) = match matches.len() {
                0 => return Err(KeyStoreError::NotFound(key_or_id.to_string())),
                1 => matches.remove(0),
                _ => return Err(KeyStoreError::Ambiguous(key_or_id.to_string())),
            };
            change(&mut record);
            table
                .insert(hash.as_slice(), Self::encode(&record).as_slice())
                .map_err(|e| self.db_err(e))?;
            record
        };
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok(record)
    }

    /// Marks a key revoked (kept in the file so that it answers "revoked", not "invalid").
    pub fn revoke(&self, key_or_id: &str) -> Result<KeyRecord, KeyStoreError> {
        let now = unix_now();
        self.update(key_or_id, |record| {
            record.revoked_at.get_or_insert(now);
        })
    }

    /// Replaces the limits given in `limits`, keeping the others.
    pub fn set_limits(
        &self,
        key_or_id: &str,
        limits: KeyLimits,
    ) -> Result<KeyRecord, KeyStoreError> {
        self.update(key_or_id, |record| {
            if limits.rps.is_some() {
                record.limits.rps = limits.rps;
            }
            if limits.burst.is_some() {
                record.limits.burst = limits.burst;
            }
            if limits.daily_quota.is_some() {
                record.limits.daily_quota = limits.daily_quota;
            }
        })
    }

    /// Replaces one of the key's access lists (empty: everything).
    pub fn set_access(
        &self,
        key_or_id: &str,
        list: AccessList,
        values: Vec<String>,
    ) -> Result<KeyRecord, KeyStoreError> {
        self.update(key_or_id, |record| *list.of(&mut record.access) = values)
    }

    /// For `--dev` start-up: when no usable (unrevoked) key is stored, creates one named `name`
    /// and returns its text so the node can print ready-made URLs; otherwise `None`.
    pub fn ensure_key(&self, name: &str) -> Result<Option<NewKey>, KeyStoreError> {
        if self.load()?.iter().any(|(_, record)| !record.is_revoked()) {
            return Ok(None);
        }
        self.add(name, KeyLimits::default(), KeyAccess::default())
            .map(Some)
    }
}

/// Convenience for node start-up with `--dev`: see [`KeyStore::ensure_key`].
pub fn ensure_dev_key(datadir: &Path) -> anyhow::Result<Option<String>> {
    Ok(KeyStore::in_datadir(datadir)
        .ensure_key("dev")?
        .map(|new| new.key))
}

/// A key as the running server knows it.
#[derive(Debug)]
pub struct KeyEntry {
    pub id: ApiKeyId,
    pub name: String,
    hash: KeyHash,
    /// Shared with the entry that replaces this one on a reload, so usage survives reloads.
    pub limiter: Arc<Limiter>,
    /// Shared the same way, so that a revocation also reaches WebSocket connections opened
    /// before it (they hold the entry they were authenticated with).
    revoked: Arc<AtomicBool>,
    /// [`KeyRecord::access`]; replaced in place by the Redis backend's refreshes.
    access: RwLock<Arc<KeyAccess>>,
}

impl KeyEntry {
    /// An entry not backed by the key file (the Redis backend's cache).
    pub(crate) fn new(
        id: ApiKeyId,
        name: String,
        hash: KeyHash,
        limiter: Arc<Limiter>,
        revoked: bool,
        access: KeyAccess,
    ) -> Self {
        Self {
            id,
            name,
            hash,
            limiter,
            revoked: Arc::new(AtomicBool::new(revoked)),
            access: RwLock::new(Arc::new(access)),
        }
    }

    /// What the key may be used for now.
    pub fn access(&self) -> Arc<KeyAccess> {
        self.access
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_access(&self, access: KeyAccess) {
        *self.access.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(access);
    }

    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Relaxed)
    }

    pub(crate) fn set_revoked(&self, revoked: bool) {
        self.revoked.store(revoked, Ordering::Relaxed);
    }

    pub(crate) fn hash(&self) -> &KeyHash {
        &self.hash
    }
}

/// The running node's set of keys: the stored ones, re-read periodically, plus `--api-key` ones.
#[derive(Debug)]
pub struct KeyRegistry {
    store: Option<KeyStore>,
    cli_keys: Vec<(KeyHash, String)>,
    defaults: EffectiveLimits,
    entries: RwLock<HashMap<KeyHash, Arc<KeyEntry>>>,
    /// Modification time and size of the key file at the last load, to skip unchanged files.
    seen: std::sync::Mutex<Option<(SystemTime, u64)>>,
}

impl KeyRegistry {
    /// Loads the stored keys (if a datadir is given) and adds `cli_keys` for this run.
    pub fn new(
        datadir: Option<&Path>,
        cli_keys: &[String],
        defaults: EffectiveLimits,
    ) -> Result<Arc<Self>, KeyStoreError> {
        let registry = Arc::new(Self {
            store: datadir.map(KeyStore::in_datadir),
            cli_keys: cli_keys
                .iter()
                .map(|key| (hash_key(key), key.clone()))
                .collect(),
            defaults,
            entries: RwLock::new(HashMap::new()),
            seen: std::sync::Mutex::new(None),
        });
        registry.reload(true)?;
        Ok(registry)
    }

    /// Re-reads the key file if it changed (or always, with `force`).
    pub fn reload(&self, force: bool) -> Result<(), KeyStoreError> {
        let stamp = self
            .store
            .as_ref()
            .and_then(|store| std::fs::metadata(store.path()).ok())
            .and_then(|meta| Some((meta.modified().ok()?, meta.len())));
        {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if !force && *seen == stamp {
                return Ok(());
            }
        }
        let stored = match &self.store {
            Some(store) => store.load()?,
            None => Vec::new(),
        };

        let old = self
            .entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut next = HashMap::with_capacity(stored.len() + self.cli_keys.len());
        let mut make =
            |hash: KeyHash, name: String, revoked: bool, limits: KeyLimits, access: KeyAccess| {
                let limits = limits.or(self.defaults);
                let (limiter, revoked_flag) = match old.get(&hash) {
                    Some(previous) => {
                        previous.limiter.set_limits(limits);
                        previous.revoked.store(revoked, Ordering::Relaxed);
                        (previous.limiter.clone(), previous.revoked.clone())
                    }
                    None => (
                        Arc::new(Limiter::new(limits)),
                        Arc::new(AtomicBool::new(revoked)),
                    ),
                };
                let id = ApiKeyId(Arc::from(key_id(&hash)));
                next.insert(
                    hash,
                    Arc::new(KeyEntry {
                        id,
                        name,
                        hash,
                        limiter,
                        revoked: revoked_flag,
                        access: RwLock::new(Arc::new(access)),
                    }),
                );
            };
        for (hash, _) in &self.cli_keys {
            make(
                *hash,
                "cli".to_string(),
                false,
                KeyLimits::default(),
                KeyAccess::default(),
            );
        }
        // Stored records win over `--api-key`: revoking a key also revokes it when given on the CLI.
        for (hash, record) in stored {
            let revoked = record.is_revoked();
            make(hash, record.name, revoked, record.limits, record.access);
        }

        *self.entries.write().unwrap_or_else(|p| p.into_inner()) = next;
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = stamp;
        Ok(())
    }

    /// Finds the key a request came with.
    pub fn authenticate(&self, key: &str) -> Result<Arc<KeyEntry>, FrontDoorError> {
        let hash = hash_key(key);
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        // The map lookup compares hashes, which says nothing useful about the key; the final
        // comparison is constant-time anyway so that no code path compares secrets byte by byte.
        let entry = entries
            .get(&hash)
            .filter(|entry| bool::from(entry.hash.ct_eq(&hash)));
        match entry {
            None => Err(FrontDoorError::InvalidKey),
            Some(entry) if entry.is_revoked() => Err(FrontDoorError::RevokedKey),
            Some(entry) => Ok(entry.clone()),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Re-reads the key file every `every` until the returned task is aborted.
    pub fn spawn_refresh(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let registry = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut ticks: u64 = 0;
            loop {
                ticker.tick().await;
                ticks += 1;
                let registry = registry.clone();
                // The modification time can be too coarse to see two writes in one second apart;
                // read the file regardless now and then.
                let force = ticks.is_multiple_of(FORCE_RELOAD_EVERY);
                // File I/O and a possible wait on the lock: keep it off the async workers.
                let result = tokio::task::spawn_blocking(move || registry.reload(force)).await;
                match result {
                    Ok(Ok(())) => {}
                    // Keep serving with the keys we have; a busy file is retried next tick.
                    Ok(Err(err)) => {
                        tracing::warn!(target: "simnode::rpc", %err, "re-reading API keys failed")
                    }
                    // The runtime is shutting down (a node that stops, or failed to start).
                    Err(err) if err.is_cancelled() => return,
                    Err(err) => {
                        tracing::warn!(target: "simnode::rpc", %err, "key refresh task failed")
                    }
                }
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// `simnode keys`

#[derive(Debug, Clone, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: KeysAction,
}

/// Where the keys are: a datadir's `keys.redb` (default) or Redis.
#[derive(Debug, Clone, Args)]
pub struct DatadirArg {
    /// The node's data directory (the keys live in DATADIR/keys.redb); embedded backend only.
    #[arg(long)]
    pub datadir: Option<PathBuf>,
    /// embedded (DATADIR/keys.redb) or redis (--redis-url), as the node runs with.
    #[arg(long = "keys-backend", value_enum, default_value_t = KeysBackendKind::Embedded)]
    pub keys_backend: KeysBackendKind,
    /// Redis for `--keys-backend redis`, e.g. redis://127.0.0.1:6379/0.
    #[arg(long = "redis-url", env = "SIMNODE_REDIS_URL")]
    pub redis_url: Option<String>,
}

/// The store a `simnode keys` command works on.
enum CliStore {
    Embedded(KeyStore),
    Redis(RedisKeyStore),
}

impl DatadirArg {
    /// The key store of an existing datadir: a mistyped path is an error, not an empty list
    /// (nor a key minted where no node will read it).
    fn open(&self) -> anyhow::Result<CliStore> {
        if let (KeysBackendKind::Embedded, Some(datadir)) = (self.keys_backend, &self.datadir) {
            if !datadir.is_dir() {
                anyhow::bail!(
                    "no datadir at {} (create the folder, or start the node once with this --datadir)",
                    datadir.display()
                );
            }
        }
        match self.keys_backend {
            KeysBackendKind::Embedded => {
                let Some(datadir) = &self.datadir else {
                    anyhow::bail!("--datadir is required with the embedded key backend");
                };
                Ok(CliStore::Embedded(KeyStore::in_datadir(datadir)))
            }
            KeysBackendKind::Redis => {
                let Some(url) = &self.redis_url else {
                    anyhow::bail!("--keys-backend redis needs --redis-url");
                };
                Ok(CliStore::Redis(RedisKeyStore::connect(url)?))
            }
        }
    }
}

impl CliStore {
    fn add(
        &mut self,
        name: &str,
        limits: KeyLimits,
        access: KeyAccess,
    ) -> anyhow::Result<(String, KeyRecord)> {
        match self {
            Self::Embedded(store) => {
                let new = store.add(name, limits, access)?;
                Ok((new.key, new.record))
            }
            Self::Redis(store) => store.add(name, limits, access),
        }
    }

    fn set_access(
        &mut self,
        key: &str,
        list: AccessList,
        values: Vec<String>,
    ) -> anyhow::Result<KeyRecord> {
        match self {
            Self::Embedded(store) => Ok(store.set_access(key, list, values)?),
            Self::Redis(store) => store.set_access(key, list, values),
        }
    }

    fn list(&mut self) -> anyhow::Result<Vec<KeyRecord>> {
        match self {
            Self::Embedded(store) => Ok(store.list()?),
            Self::Redis(store) => store.list(),
        }
    }

    fn revoke(&mut self, key: &str) -> anyhow::Result<KeyRecord> {
        match self {
            Self::Embedded(store) => Ok(store.revoke(key)?),
            Self::Redis(store) => store.revoke(key),
        }
    }

    fn set_limits(&mut self, key: &str, limits: KeyLimits) -> anyhow::Result<KeyRecord> {
        match self {
            Self::Embedded(store) => Ok(store.set_limits(key, limits)?),
            Self::Redis(store) => store.set_limits(key, limits),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Requests per second for this key (0 = unlimited); default: the node's --rpc.rate-limit.
    #[arg(long)]
    pub rps: Option<u32>,
    /// Burst size for this key (at least 1); default: the node's --rpc.rate-burst.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub burst: Option<u32>,
    /// Requests per UTC day for this key (0 = unlimited); default: the node's --rpc.daily-quota.
    #[arg(long = "daily-quota")]
    pub daily_quota: Option<u64>,
}

impl From<&LimitArgs> for KeyLimits {
    fn from(args: &LimitArgs) -> Self {
        Self {
            rps: args.rps,
            burst: args.burst,
            daily_quota: args.daily_quota,
        }
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum KeysAction {
    /// Create a key and print it (it is shown only once).
    Add {
        /// A label for the key (printable, at most 64 characters).
        #[arg(value_parser = key_name)]
        name: String,
        #[command(flatten)]
        limits: LimitArgs,
        /// Take requests only from these browser origins (comma-separated or repeated, e.g.
        /// `https://app.example.com`); requests without a listed Origin get 403. Default: any.
        #[arg(long = "allow-origin", value_delimiter = ',', value_parser = super::cors::parse_origin_flag)]
        origins: Vec<String>,
        /// Answer only these methods (comma-separated or repeated; `trace_*` takes a whole
        /// namespace); others get -32002. Default: every method the node serves.
        #[arg(long = "allow-method", value_delimiter = ',', value_parser = parse_method_pattern)]
        methods: Vec<String>,
        #[command(flatten)]
        datadir: DatadirArg,
    },
    /// List stored keys.
    List {
        #[command(flatten)]
        datadir: DatadirArg,
    },
    /// Revoke a key, given as the key itself or its id from `keys list`.
    Revoke {
        key: String,
        #[command(flatten)]
        datadir: DatadirArg,
    },
    /// Change a key's rate limit or daily quota.
    Limit {
        key: String,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        datadir: DatadirArg,
    },
    /// Set the browser origins a key takes requests from (`https://app.example.com`, ...);
    /// giving none, or `*`, takes requests from anywhere again.
    Origins {
        key: String,
        #[arg(value_delimiter = ',', value_parser = super::cors::parse_origin_flag)]
        origins: Vec<String>,
        #[command(flatten)]
        datadir: DatadirArg,
    },
    /// Set the methods a key may call (`eth_call`, `trace_*`, ...); giving none, or `*`,
    /// allows every method again.
    Methods {
        key: String,
        #[arg(value_delimiter = ',', value_parser = parse_method_pattern)]
        methods: Vec<String>,
        #[command(flatten)]
        datadir: DatadirArg,
    },
    /// Requests and errors by method for a key, summed over every replica (redis backend).
    Usage {
        key: String,
        #[command(flatten)]
        datadir: DatadirArg,
    },
}

/// Runs `simnode keys ...`, printing to stdout.
pub fn run(args: KeysArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    run_to(args, &mut out)
}

/// A key's label: shown in `keys list` rows and logs, so one line of printable text.
fn key_name(name: &str) -> Result<String, String> {
    if name.trim().is_empty() || name.chars().any(char::is_control) || name.chars().count() > 64 {
        return Err("a key name is 1 to 64 printable characters, on one line".into());
    }
    Ok(name.to_string())
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Runs `simnode keys ...`, writing what it prints to `out` (tests read it).
pub fn run_to(args: KeysArgs, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    match args.action {
        KeysAction::Add {
            name,
            limits,
            origins,
            methods,
            datadir,
        } => {
            let patterns = methods.clone();
            let access = KeyAccess {
                origins: access_list(origins)?,
                methods: access_list(methods)?,
            };
            let (key, record) = datadir
                .open()?
                .add(&name, KeyLimits::from(&limits), access)?;
            writeln!(out, "{key}")?;
            out.flush()?;
            // Scripts read the key from the first line and may stop reading there (`head -1`):
            // the key is stored and printed, so a closed pipe after it is no failure.
            let rest = (|| {
                writeln!(out, "id {}  name {}", record.id, record.name)?;
                writeln!(out, "HTTP: POST /v3/{key}   WebSocket: /ws/v3/{key}")?;
                writeln!(out, "The key is shown only now; simnode stores its hash.")?;
                warn_unserved(out, &patterns)
            })();
            match rest {
                Err(err) if is_broken_pipe(&err) => {}
                other => other?,
            }
        }
        KeysAction::List { datadir } => {
            let records = datadir.open()?.list()?;
            writeln!(
                out,
                "{:<10} {:<20} {:<8} {:<20} {:>8} {:>8} {:>12}  {:<30} METHODS",
                "ID", "NAME", "STATUS", "CREATED", "RPS", "BURST", "DAILY", "ORIGINS"
            )?;
            let show = |v: Option<String>| v.unwrap_or_else(|| "default".to_string());
            for r in records {
                writeln!(
                    out,
                    "{:<10} {:<20} {:<8} {:<20} {:>8} {:>8} {:>12}  {:<30} {}",
                    r.id,
                    r.name,
                    if r.is_revoked() { "revoked" } else { "active" },
                    format_utc(r.created_at),
                    show(r.limits.rps.map(|v| v.to_string())),
                    show(r.limits.burst.map(|v| v.to_string())),
                    show(r.limits.daily_quota.map(|v| v.to_string())),
                    show_list(&r.access.origins),
                    show_list(&r.access.methods),
                )?;
            }
        }
        KeysAction::Revoke { key, datadir } => {
            let record = datadir.open()?.revoke(&key)?;
            writeln!(out, "revoked {} ({})", record.id, record.name)?;
        }
        KeysAction::Limit {
            key,
            limits,
            datadir,
        } => {
            let record = datadir.open()?.set_limits(&key, KeyLimits::from(&limits))?;
            let show = |v: Option<String>| v.unwrap_or_else(|| "the node's default".to_string());
            writeln!(
                out,
                "limits of {} ({}): rps {}, burst {}, daily quota {}",
                record.id,
                record.name,
                show(record.limits.rps.map(|v| v.to_string())),
                show(record.limits.burst.map(|v| v.to_string())),
                show(record.limits.daily_quota.map(|v| v.to_string())),
            )?;
        }
        KeysAction::Origins {
            key,
            origins,
            datadir,
        } => set_access(out, &datadir, &key, AccessList::Origins, origins)?,
        KeysAction::Methods {
            key,
            methods,
            datadir,
        } => set_access(out, &datadir, &key, AccessList::Methods, methods)?,
        KeysAction::Usage { key, datadir } => {
            let CliStore::Redis(mut store) = datadir.open()? else {
                anyhow::bail!(
                    "usage counters are kept by the redis backend only (the embedded one exports \
                     simnode_rpc_key_requests_total on --metrics); use --keys-backend redis"
                );
            };
            let (record, usage) = store.usage(&key)?;
            writeln!(out, "usage of {} ({})", record.id, record.name)?;
            writeln!(out, "{:<40} {:>12} {:>12}", "METHOD", "REQUESTS", "ERRORS")?;
            let (mut requests, mut errors) = (0u64, 0u64);
            for line in usage {
                requests += line.requests;
                errors += line.errors;
                writeln!(
                    out,
                    "{:<40} {:>12} {:>12}",
                    line.method, line.requests, line.errors
                )?;
            }
            writeln!(out, "{:<40} {:>12} {:>12}", "total", requests, errors)?;
        }
    }
    Ok(())
}

/// `simnode keys origins|methods KEY VALUES...`.
fn set_access(
    out: &mut impl std::io::Write,
    datadir: &DatadirArg,
    key: &str,
    list: AccessList,
    values: Vec<String>,
) -> anyhow::Result<()> {
    if list == AccessList::Methods {
        warn_unserved(out, &values)?;
    }
    let record = datadir
        .open()?
        .set_access(key, list, access_list(values)?)?;
    let mut access = record.access;
    writeln!(
        out,
        "{} of {} ({}): {}",
        list.field(),
        record.id,
        record.name,
        show_list(list.of(&mut access))
    )?;
    Ok(())
}

/// Says which of a key's method patterns match no method this build serves: most likely a
/// typo, which would otherwise only show as refused calls. Kept anyway (the key file may
/// serve another version too).
fn warn_unserved(out: &mut impl std::io::Write, patterns: &[String]) -> anyhow::Result<()> {
    let served: Vec<&str> = super::modules::MODULE_METHOD_PARAMS
        .iter()
        .chain([&crate::sync::testing::METHOD_PARAMS])
        .flat_map(|table| table.iter().map(|(name, _)| *name))
        .collect();
    for pattern in patterns.iter().filter(|p| p.as_str() != "*") {
        let probe = KeyAccess {
            origins: vec![],
            methods: vec![pattern.clone()],
        };
        if !served.iter().any(|m| probe.admits_method(m)) {
            writeln!(out, "warning: {pattern} matches no method simnode serves")?;
        }
    }
    Ok(())
}

/// A key's access list from the CLI's values: `*` among them (or none given) means everything.
fn access_list(values: Vec<String>) -> anyhow::Result<Vec<String>> {
    if values.iter().any(|v| v == "none") {
        anyhow::bail!("a key cannot refuse everything; revoke it instead (`simnode keys revoke`)");
    }
    if values.iter().any(|v| v == "*") {
        return Ok(Vec::new());
    }
    Ok(values)
}

fn show_list(list: &[String]) -> String {
    if list.is_empty() {
        "any".to_string()
    } else {
        list.join(",")
    }
}

/// clap's check of a method in a key's list: a method name (`eth_call`), a prefix ending in
/// `*` (`trace_*`), or `*` alone.
fn parse_method_pattern(value: &str) -> Result<String, String> {
    let value = value.trim();
    let name = value.strip_suffix('*').unwrap_or(value);
    if value == "*"
        || (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a method name (eth_call) or a prefix ending in * (trace_*)"
        ))
    }
}

/// `YYYY-MM-DD HH:MM:SS` in UTC, from unix seconds (civil-from-days, proleptic Gregorian).
fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20");
    }

    #[test]
    fn method_lists() {
        let access = KeyAccess {
            origins: vec![],
            methods: vec!["eth_call".into(), "trace_*".into()],
        };
        assert!(access.admits_method("eth_call"));
        assert!(access.admits_method("trace_callMany"));
        assert!(!access.admits_method("eth_callMany"));
        assert!(!access.admits_method("debug_traceCall"));
        assert!(!access.admits_method("eth_unsubscribe"));
        assert!(KeyAccess::default().admits_method("anything"));
        // A key that may subscribe may unsubscribe.
        let subscribing = KeyAccess {
            origins: vec![],
            methods: vec!["eth_subscribe".into()],
        };
        assert!(subscribing.admits_method("eth_unsubscribe"));
        assert_eq!(parse_method_pattern("trace_*"), Ok("trace_*".into()));
        assert_eq!(parse_method_pattern("*"), Ok("*".into()));
        assert!(parse_method_pattern("eth-call").is_err());
        assert!(parse_method_pattern("").is_err());
        assert!(parse_method_pattern("eth_*call").is_err());
    }

    #[test]
    fn older_key_files_still_read() {
        // A record written before access lists existed.
        let record: KeyRecord = serde_json::from_str(
            r#"{"name":"a","id":"0011aabb","created_at":1,"limits":{"rps":5}}"#,
        )
        .unwrap();
        assert_eq!(record.access, KeyAccess::default());
        assert_eq!(record.limits.rps, Some(5));
        let written = serde_json::to_string(&record).unwrap();
        assert!(
            !written.contains("origins") && !written.contains("methods"),
            "{written}"
        );
    }

    /// A reader that takes the key line and goes (`| head -1`) does not make `keys add` fail
    /// once the key is stored and printed.
    #[test]
    fn keys_add_succeeds_when_the_reader_leaves_after_the_key() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            keys: KeysArgs,
        }
        /// Takes one line, then the pipe is closed.
        struct HeadOne(Vec<u8>);
        impl std::io::Write for HeadOne {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0.contains(&b'\n') {
                    return Err(std::io::ErrorKind::BrokenPipe.into());
                }
                self.0.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let dir = std::env::temp_dir().join(format!("simnode-keys-head-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let datadir = dir.display().to_string();
        let cli = Cli::parse_from(["keys", "add", "scripted", "--datadir", &datadir]);
        let mut out = HeadOne(Vec::new());
        run_to(cli.keys, &mut out).expect("stored and printed");
        let key = String::from_utf8(out.0).unwrap();
        assert_eq!(key.trim().len(), 32, "{key}");
        // Failing to print the key itself is still an error.
        let cli = Cli::parse_from(["keys", "add", "unseen", "--datadir", &datadir]);
        let mut closed = HeadOne(b"\n".to_vec());
        assert!(run_to(cli.keys, &mut closed).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn key_names_are_one_printable_line() {
        for bad in ["", "  ", "a\nb", "tab\there", &"x".repeat(65)] {
            assert!(key_name(bad).is_err(), "{bad:?}");
        }
        for good in ["ci", "Alice's dapp", &"x".repeat(64)] {
            assert_eq!(key_name(good).as_deref(), Ok(good));
        }
    }

    #[test]
    fn keys_are_128_bit_hex() {
        let key = generate_key().expect("os randomness");
        assert_eq!(key.len(), 32);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(key, generate_key().expect("os randomness"));
    }
}
