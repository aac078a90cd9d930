//! Keys, rate limits, daily quotas and usage counters held in Redis, shared by every replica
//! started with `--keys-backend redis --redis-url URL`.
//!
//! Layout (all under the `simnode:` prefix; `<hash>` is the hex keccak-256 of the key, the key
//! itself is never stored):
//!
//! | key                          | type   | holds                                                          |
//! |------------------------------|--------|----------------------------------------------------------------|
//! | `simnode:keys`               | set    | every key hash                                                 |
//! | `simnode:key:<hash>`         | hash   | `name`, `id`, `status` (`active`/`revoked`), `created_at`, `revoked_at`, `rps`, `burst`, `daily_quota` (absent = node default) |
//! | `simnode:rate:<hash>`        | string | GCRA theoretical arrival time, microseconds (expires when idle) |
//! | `simnode:quota:<hash>:<day>` | string | requests charged on that UTC day (expires after ~25 h)         |
//! | `simnode:usage:<hash>`       | hash   | `<method>:requests` and `<method>:errors` counters             |
//!
//! Every charge (one call, one WebSocket message, or a whole batch with cost = its length) is
//! one run of [`CHARGE_SCRIPT`]: it reads the key's status and limits, checks the daily quota
//! and the GCRA rate limit against Redis' own clock, and commits both, atomically. Because the
//! status is read there too, a revocation made through any replica (or `simnode keys revoke`)
//! refuses the very next request on every replica. A small local cache (entries live
//! [`CACHE_TTL`]) answers the key check made before the request body is read, and is what
//! `--redis.fail-open` serves from while Redis is away.
//!
//! When Redis cannot be reached the front door answers 503 / -32603 (see `error.rs`); the
//! connection manager reconnects by itself on a later request.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use alloy::primitives::hex;
use redis::{aio::ConnectionManager, AsyncCommands};
use simnode_api::ApiKeyId;

use super::{
    error::FrontDoorError,
    keys::{
        generate_key, hash_key, key_id, unix_now, AccessList, KeyAccess, KeyEntry, KeyHash,
        KeyRecord,
    },
    limiter::{EffectiveLimits, KeyLimits, Limiter},
};

/// Prefix of every Redis key simnode writes.
pub const PREFIX: &str = "simnode:";

/// How long a cached key record is trusted for the pre-body key check.
pub const CACHE_TTL: Duration = Duration::from_millis(500);

/// Longest wait for one Redis round trip (or a connection attempt) before answering 503.
const REDIS_TIMEOUT: Duration = Duration::from_millis(1000);

/// Status, quota and GCRA rate limit in one atomic step.
///
/// KEYS: record, rate, quota prefix. ARGV: cost, default rps, default burst, default quota.
/// Returns `{kind, wait_us, limit}`: 0 unknown key, 1 revoked, 2 accepted, 3 over the daily
/// quota, 4 over the rate. A cost larger than the burst is admitted once the bucket is full and
/// leaves the key in debt, as the embedded limiter does.
pub const CHARGE_SCRIPT: &str = r#"
local rec = redis.call('HMGET', KEYS[1], 'status', 'rps', 'burst', 'daily_quota')
if not rec[1] then return {0, 0, 0} end
if rec[1] ~= 'active' then return {1, 0, 0} end
local cost = tonumber(ARGV[1])
local rps = tonumber(rec[2] or ARGV[2])
local burst = math.max(tonumber(rec[3] or ARGV[3]), 1)
local quota = tonumber(rec[4] or ARGV[4])
local t = redis.call('TIME')
local secs = tonumber(t[1])
local now = secs * 1000000 + tonumber(t[2])
local day = math.floor(secs / 86400)
local qkey = KEYS[3] .. ':' .. day
local used = tonumber(redis.call('GET', qkey) or '0')
if quota > 0 and used + cost > quota then
  return {3, (day + 1) * 86400 * 1000000 - now, quota}
end
if rps > 0 then
  local interval = 1000000 / rps
  local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tat < now then tat = now end
  local needed = math.min(cost, burst)
  local wait = (tat - now) - (burst - needed) * interval
  if wait > 0 then
    return {4, math.ceil(wait), rps}
  end
  local new_tat = tat + cost * interval
  redis.call('SET', KEYS[2], string.format('%d', math.ceil(new_tat)), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
end
redis.call('INCRBY', qkey, cost)
redis.call('EXPIRE', qkey, 90000)
return {2, 0, 0}
"#;

fn record_key(hash: &str) -> String {
    format!("{PREFIX}key:{hash}")
}
fn rate_key(hash: &str) -> String {
    format!("{PREFIX}rate:{hash}")
}
fn quota_prefix(hash: &str) -> String {
    format!("{PREFIX}quota:{hash}")
}
fn usage_key(hash: &str) -> String {
    format!("{PREFIX}usage:{hash}")
}
fn keys_set() -> String {
    format!("{PREFIX}keys")
}

fn unavailable(err: impl std::fmt::Display) -> FrontDoorError {
    tracing::warn!(target: "simnode::rpc", %err, "redis unavailable");
    FrontDoorError::KeyBackendUnavailable
}

/// A key record read back from its Redis hash.
fn parse_record(fields: &HashMap<String, String>) -> Option<KeyRecord> {
    let num = |name: &str| fields.get(name).and_then(|v| v.parse::<u64>().ok());
    // A list is stored comma-joined; absent is empty.
    let list = |which: AccessList| -> Vec<String> {
        fields
            .get(which.field())
            .map(|joined| {
                joined
                    .split(',')
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(KeyRecord {
        name: fields.get("name")?.clone(),
        id: fields.get("id")?.clone(),
        created_at: num("created_at").unwrap_or_default(),
        revoked_at: match fields.get("status").map(String::as_str) {
            Some("active") => None,
            _ => Some(num("revoked_at").unwrap_or_default()),
        },
        limits: KeyLimits {
            rps: num("rps").and_then(|v| u32::try_from(v).ok()),
            burst: num("burst").and_then(|v| u32::try_from(v).ok()),
            daily_quota: num("daily_quota"),
        },
        access: KeyAccess {
            origins: list(AccessList::Origins),
            methods: list(AccessList::Methods),
        },
    })
}

// ---------------------------------------------------------------------------------------------
// `simnode keys ... --keys-backend redis`: short synchronous connections.

/// The key space as `simnode keys` sees it.
pub struct RedisKeyStore {
    con: redis::Connection,
}

impl RedisKeyStore {
    pub fn connect(url: &str) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
        Ok(Self { con })
    }

    pub fn add(
        &mut self,
        name: &str,
        limits: KeyLimits,
        access: KeyAccess,
    ) -> anyhow::Result<(String, KeyRecord)> {
        let key = generate_key()?;
        let hash = hash_key(&key);
        let hash_hex = hex::encode(hash);
        let record = KeyRecord {
            name: name.to_string(),
            id: key_id(&hash),
            created_at: unix_now(),
            revoked_at: None,
            limits,
            access,
        };
        let mut fields = vec![
            ("name", record.name.clone()),
            ("id", record.id.clone()),
            ("status", "active".to_string()),
            ("created_at", record.created_at.to_string()),
        ];
        fields.extend(limit_fields(limits));
        for (list, values) in [
            (AccessList::Origins, &record.access.origins),
            (AccessList::Methods, &record.access.methods),
        ] {
            if !values.is_empty() {
                fields.push((list.field(), values.join(",")));
            }
        }
        redis::pipe()
            .atomic()
            .hset_multiple(record_key(&hash_hex), &fields)
            .ignore()
            .sadd(keys_set(), &hash_hex)
            .ignore()
            .query::<()>(&mut self.con)?;
        Ok((key, record))
    }

    fn load(&mut self) -> anyhow::Result<Vec<(String, KeyRecord)>> {
        let hashes: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys_set())
            .query(&mut self.con)?;
        let mut out = Vec::with_capacity(hashes.len());
        for hash in hashes {
            let fields: HashMap<String, String> = redis::cmd("HGETALL")
                .arg(record_key(&hash))
                .query(&mut self.con)?;
            if let Some(record) = parse_record(&fields) {
                out.push((hash, record));
            }
        }
        Ok(out)
    }

    pub fn list(&mut self) -> anyhow::Result<Vec<KeyRecord>> {
        let mut records: Vec<_> = self.load()?.into_iter().map(|(_, r)| r).collect();
        records.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(records)
    }

    /// The hash of the key given as its full text or its id.
    fn find(&mut self, key_or_id: &str) -> anyhow::Result<(String, KeyRecord)> {
        let full = hex::encode(hash_key(key_or_id));
        let mut matches: Vec<_> = self
            .load()?
            .into_iter()
            .filter(|(hash, record)| *hash == full || record.id.eq_ignore_ascii_case(key_or_id))
            .collect();
        match matches.len() {
            0 => anyhow::bail!("no key matches {key_or_id}"),
            1 => Ok(matches.remove(0)),
            _ => anyhow::bail!("{key_or_id} matches more than one key id; give the whole key"),
        }
    }

    pub fn revoke(&mut self, key_or_id: &str) -> anyhow::Result<KeyRecord> {
        let (hash, mut record) = self.find(key_or_id)?;
        let now = unix_now();
        let revoked_at = *record.revoked_at.get_or_insert(now);
        redis::cmd("HSET")
            .arg(record_key(&hash))
            .arg("status")
            .arg("revoked")
            .arg("revoked_at")
            .arg(revoked_at)
            .query::<()>(&mut self.con)?;
        Ok(record)
    }

    pub fn set_limits(&mut self, key_or_id: &str, limits: KeyLimits) -> anyhow::Result<KeyRecord> {
        let (hash, mut record) = self.find(key_or_id)?;
        let fields = limit_fields(limits);
        if !fields.is_empty() {
            redis::cmd("HSET")
                .arg(record_key(&hash))
                .arg(&fields)
                .query::<()>(&mut self.con)?;
        }
        if limits.rps.is_some() {
            record.limits.rps = limits.rps;
        }
        if limits.burst.is_some() {
            record.limits.burst = limits.burst;
        }
        if limits.daily_quota.is_some() {
            record.limits.daily_quota = limits.daily_quota;
        }
        Ok(record)
    }

    /// Replaces one of the key's access lists (empty: everything).
    pub fn set_access(
        &mut self,
        key_or_id: &str,
        list: AccessList,
        values: Vec<String>,
    ) -> anyhow::Result<KeyRecord> {
        let (hash, mut record) = self.find(key_or_id)?;
        if values.is_empty() {
            redis::cmd("HDEL")
                .arg(record_key(&hash))
                .arg(list.field())
                .query::<()>(&mut self.con)?;
        } else {
            redis::cmd("HSET")
                .arg(record_key(&hash))
                .arg(list.field())
                .arg(values.join(","))
                .query::<()>(&mut self.con)?;
        }
        *list.of(&mut record.access) = values;
        Ok(record)
    }

    /// Usage counters of a key: method -> (requests, errors), by method name.
    pub fn usage(&mut self, key_or_id: &str) -> anyhow::Result<(KeyRecord, Vec<MethodUsage>)> {
        let (hash, record) = self.find(key_or_id)?;
        let fields: HashMap<String, u64> = redis::cmd("HGETALL")
            .arg(usage_key(&hash))
            .query(&mut self.con)?;
        let mut by_method: std::collections::BTreeMap<String, MethodUsage> = Default::default();
        for (field, count) in fields {
            let Some((method, kind)) = field.rsplit_once(':') else {
                continue;
            };
            let entry = by_method
                .entry(method.to_string())
                .or_insert_with(|| MethodUsage {
                    method: method.to_string(),
                    requests: 0,
                    errors: 0,
                });
            match kind {
                "requests" => entry.requests = count,
                "errors" => entry.errors = count,
                _ => {}
            }
        }
        Ok((record, by_method.into_values().collect()))
    }
}

/// One line of `simnode keys usage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodUsage {
    pub method: String,
    pub requests: u64,
    pub errors: u64,
}

fn limit_fields(limits: KeyLimits) -> Vec<(&'static str, String)> {
    let mut fields = Vec::new();
    if let Some(v) = limits.rps {
        fields.push(("rps", v.to_string()));
    }
    if let Some(v) = limits.burst {
        fields.push(("burst", v.to_string()));
    }
    if let Some(v) = limits.daily_quota {
        fields.push(("daily_quota", v.to_string()));
    }
    fields
}

// ---------------------------------------------------------------------------------------------
// The running node's view.

/// Keys in Redis, as the server uses them: authenticate, charge, count usage.
pub struct RedisKeys {
    con: ConnectionManager,
    script: redis::Script,
    defaults: EffectiveLimits,
    fail_open: bool,
    cache: RwLock<HashMap<KeyHash, (Arc<KeyEntry>, Instant)>>,
}

impl std::fmt::Debug for RedisKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisKeys")
            .field("defaults", &self.defaults)
            .field("fail_open", &self.fail_open)
            .finish_non_exhaustive()
    }
}

impl RedisKeys {
    /// Prepares the connection; it is made lazily, so the node starts even while Redis is down
    /// (and answers 503 until it is up).
    pub fn new(url: &str, defaults: EffectiveLimits, fail_open: bool) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let con = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self {
            con,
            script: redis::Script::new(CHARGE_SCRIPT),
            defaults,
            fail_open,
            cache: RwLock::new(HashMap::new()),
        })
    }

    /// Why requests are refused for want of Redis, if they are: it does not answer a PING in
    /// time and `--redis.fail-open` is off (with it, known keys are still served).
    pub async fn refusing_requests(&self) -> Option<String> {
        if self.fail_open {
            return None;
        }
        let mut con = self.con.clone();
        let ping = redis::cmd("PING");
        match tokio::time::timeout(REDIS_TIMEOUT, ping.query_async::<String>(&mut con)).await {
            Ok(Ok(_)) => None,
            Ok(Err(err)) => Some(err.to_string()),
            Err(_) => Some(format!("no answer in {} ms", REDIS_TIMEOUT.as_millis())),
        }
    }

    fn cached(&self, hash: &KeyHash) -> Option<(Arc<KeyEntry>, Instant)> {
        self.cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(hash)
            .cloned()
    }

    /// Finds the key a request came with: from the cache while fresh, else from Redis.
    pub async fn authenticate(&self, key: &str) -> Result<Arc<KeyEntry>, FrontDoorError> {
        let hash = hash_key(key);
        let cached = self.cached(&hash);
        if let Some((entry, at)) = &cached {
            if at.elapsed() < CACHE_TTL {
                return check_revoked(entry.clone());
            }
        }
        let mut con = self.con.clone();
        let fetched = tokio::time::timeout(
            REDIS_TIMEOUT,
            con.hgetall::<_, HashMap<String, String>>(record_key(&hex::encode(hash))),
        )
        .await;
        let fields = match fetched {
            Ok(Ok(fields)) => fields,
            Ok(Err(err)) => return self.stale(cached, err),
            Err(_) => return self.stale(cached, "timed out"),
        };
        let Some(record) = parse_record(&fields) else {
            self.cache
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&hash);
            return Err(FrontDoorError::InvalidKey);
        };
        let limits = record.limits.or(self.defaults);
        let entry = match cached {
            // Keep the entry (and its local fallback limiter) across refreshes.
            Some((entry, _)) => {
                entry.limiter.set_limits(limits);
                entry.set_revoked(record.is_revoked());
                entry.set_access(record.access.clone());
                entry
            }
            None => Arc::new(KeyEntry::new(
                ApiKeyId(Arc::from(record.id.as_str())),
                record.name.clone(),
                hash,
                Arc::new(Limiter::new(limits)),
                record.is_revoked(),
                record.access.clone(),
            )),
        };
        self.cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(hash, (entry.clone(), Instant::now()));
        check_revoked(entry)
    }

    /// Redis did not answer: a known, unrevoked key passes with `--redis.fail-open`.
    fn stale(
        &self,
        cached: Option<(Arc<KeyEntry>, Instant)>,
        err: impl std::fmt::Display,
    ) -> Result<Arc<KeyEntry>, FrontDoorError> {
        match cached {
            Some((entry, _)) if self.fail_open => check_revoked(entry),
            _ => Err(unavailable(err)),
        }
    }

    /// Charges `cost` requests to the key in Redis (status, quota and rate in one script run).
    pub async fn charge(&self, entry: &KeyEntry, cost: u32) -> Result<(), FrontDoorError> {
        let hash = hex::encode(entry.hash());
        let mut con = self.con.clone();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(record_key(&hash))
            .key(rate_key(&hash))
            .key(quota_prefix(&hash))
            .arg(cost)
            .arg(self.defaults.rps)
            .arg(self.defaults.burst)
            .arg(self.defaults.daily_quota);
        let answer =
            tokio::time::timeout(REDIS_TIMEOUT, invocation.invoke_async::<Vec<i64>>(&mut con))
                .await;
        let reply = match answer {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) => return self.charge_offline(entry, cost, err),
            Err(_) => return self.charge_offline(entry, cost, "timed out"),
        };
        let wait = |us: i64| Duration::from_micros(u64::try_from(us).unwrap_or(0).max(1000));
        match reply.as_slice() {
            [2, ..] => Ok(()),
            [1, ..] => {
                entry.set_revoked(true);
                Err(FrontDoorError::RevokedKey)
            }
            [0, ..] => Err(FrontDoorError::InvalidKey),
            [3, us, quota] => Err(FrontDoorError::QuotaExceeded {
                allowed_per_day: u64::try_from(*quota).unwrap_or(0),
                backoff: wait(*us),
            }),
            [4, us, rps] => Err(FrontDoorError::RateLimited {
                allowed_rps: *rps as f64,
                backoff: wait(*us),
            }),
            other => Err(unavailable(format!(
                "unexpected answer from the charge script: {other:?}"
            ))),
        }
    }

    /// Redis is away: with fail-open, charge this replica's own limiter instead.
    fn charge_offline(
        &self,
        entry: &KeyEntry,
        cost: u32,
        err: impl std::fmt::Display,
    ) -> Result<(), FrontDoorError> {
        if self.fail_open && !entry.is_revoked() {
            tracing::warn!(target: "simnode::rpc", %err, "redis unavailable: failing open with the local limiter");
            entry.limiter.try_acquire(cost)
        } else {
            Err(unavailable(err))
        }
    }

    /// Counts one served call (and an error if it failed) in the key's usage hash, in the
    /// background: usage must not slow down or fail the answer.
    pub fn record_usage(&self, entry: &KeyEntry, method: &str, error: bool) {
        let key = usage_key(&hex::encode(entry.hash()));
        let mut pipe = redis::pipe();
        pipe.hincr(&key, format!("{method}:requests"), 1).ignore();
        if error {
            pipe.hincr(&key, format!("{method}:errors"), 1).ignore();
        }
        let mut con = self.con.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(REDIS_TIMEOUT, pipe.query_async::<()>(&mut con)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    tracing::warn!(target: "simnode::rpc", %err, "cannot count usage in redis")
                }
                Err(_) => {
                    tracing::warn!(target: "simnode::rpc", "counting usage in redis timed out")
                }
            }
        });
    }
}

fn check_revoked(entry: Arc<KeyEntry>) -> Result<Arc<KeyEntry>, FrontDoorError> {
    if entry.is_revoked() {
        Err(FrontDoorError::RevokedKey)
    } else {
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records() {
        let mut fields: HashMap<String, String> = [
            ("name", "a"),
            ("id", "0123abcd"),
            ("status", "active"),
            ("created_at", "5"),
            ("rps", "7"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let record = parse_record(&fields).expect("complete record");
        assert!(!record.is_revoked());
        assert_eq!(record.limits.rps, Some(7));
        assert_eq!(record.limits.burst, None);
        fields.insert("status".into(), "revoked".into());
        assert!(parse_record(&fields).expect("record").is_revoked());
        fields.remove("name");
        assert!(parse_record(&fields).is_none());
    }
}
