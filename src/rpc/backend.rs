//! Where keys, limits and usage live: the embedded key file of one node (the default) or Redis,
//! shared by replicas. The HTTP layer and the RPC middleware talk to [`KeyBackend`] only.

use std::sync::Arc;

use super::{
    error::FrontDoorError,
    keys::{KeyEntry, KeyRegistry},
    redis_keys::RedisKeys,
};

/// `--keys-backend`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeysBackendKind {
    /// `<datadir>/keys.redb`, limits and quotas in this process's memory.
    #[default]
    Embedded,
    /// Redis at `--redis-url`: keys, limits, quotas and usage shared by every replica.
    Redis,
}

#[derive(Debug, Clone)]
pub enum KeyBackend {
    Embedded(Arc<KeyRegistry>),
    Redis(Arc<RedisKeys>),
}

impl KeyBackend {
    /// Finds the key a request came with, or says why it is refused.
    pub async fn authenticate(&self, key: &str) -> Result<Arc<KeyEntry>, FrontDoorError> {
        match self {
            Self::Embedded(registry) => registry.authenticate(key),
            Self::Redis(redis) => redis.authenticate(key).await,
        }
    }

    /// Why every keyed request is refused now, if it is (see `RedisKeys::refusing_requests`);
    /// the embedded registry always answers.
    pub async fn refusing_requests(&self) -> Option<String> {
        match self {
            Self::Embedded(_) => None,
            Self::Redis(redis) => redis.refusing_requests().await,
        }
    }

    /// Checks the key is still valid and charges `cost` requests to it.
    pub async fn charge(&self, entry: &KeyEntry, cost: u32) -> Result<(), FrontDoorError> {
        match self {
            Self::Embedded(_) => {
                // A WebSocket connection outlives the check at its upgrade: refuse its messages
                // once the key is revoked.
                if entry.is_revoked() {
                    return Err(FrontDoorError::RevokedKey);
                }
                entry.limiter.try_acquire(cost)
            }
            Self::Redis(redis) => redis.charge(entry, cost).await,
        }
    }

    /// Counts one served call in the key's usage (Redis only; the embedded backend has the
    /// Prometheus counters).
    pub fn record_usage(&self, entry: &KeyEntry, method: &str, error: bool) {
        if let Self::Redis(redis) = self {
            redis.record_usage(entry, method, error);
        }
    }

    /// The embedded key registry, when that is the backend.
    pub fn embedded(&self) -> Option<&Arc<KeyRegistry>> {
        match self {
            Self::Embedded(registry) => Some(registry),
            Self::Redis(_) => None,
        }
    }
}
