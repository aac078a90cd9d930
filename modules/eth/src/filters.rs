//! Polled filters, the HTTP way to follow the chain: `eth_newFilter`, `eth_newBlockFilter`,
//! `eth_newPendingTransactionFilter`, `eth_getFilterChanges`, `eth_getFilterLogs`,
//! `eth_uninstallFilter`.
//!
//! A filter holds its own receiver of the chain or pool events the subscriptions follow
//! ([`simnode_api::events`]), so a poll returns exactly what happened since the last one: block
//! hashes, transaction hashes, or logs (with `removed: true` for blocks that left the chain). As
//! in geth, a filter nobody polled for [`FILTER_TIMEOUT`] is dropped, and an unknown id is
//! -32000 "filter not found". A filter that fell more than
//! [`simnode_api::events::EVENTS_KEPT`] events behind is dropped too, with an error saying so,
//! rather than answering with a silent gap.
//!
//! Filters belong to the API key that installed them: another key polling or uninstalling one
//! is told it does not exist, and one key cannot take more than [`MAX_FILTERS_PER_KEY`] of the
//! node's [`MAX_FILTERS`].

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use alloy::{
    eips::BlockNumberOrTag,
    primitives::B256,
    rpc::types::{Filter, FilterBlockOption, FilterChanges, Log},
};
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc, Extensions};
use serde_json::Value;
use simnode_api::{
    rpc_block::PoolTransaction,
    shares::{Share, Shares},
    ApiKeyId, BlockEvent, ChainEvent, ModuleContext, PoolEvent, RpcError, RpcResult,
};
use tokio::sync::broadcast::{self, error::TryRecvError};

use crate::logs::{self, LogFilter};

/// How long a filter lives without being polled (geth's deadline).
pub const FILTER_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Filters installed at once, over all clients: the memory they hold stays bounded.
pub const MAX_FILTERS: usize = 10_000;
/// Filters one API key may hold at once, so that no key can use up the others' share.
pub const MAX_FILTERS_PER_KEY: usize = 1_000;
/// Addresses and topics the log filters of one key may name in all: each is held for the
/// filter's life (a filter may name 1,000 addresses and 4,000 topics, and a key 1,000 filters).
pub const MAX_CRITERIA_PER_KEY: usize = 100_000;

#[rpc(server)]
pub trait EthFilterApi {
    #[method(name = "eth_newFilter", with_extensions)]
    fn new_filter(&self, criteria: Value) -> JsonRpcResult<String>;
    #[method(name = "eth_newBlockFilter", with_extensions)]
    fn new_block_filter(&self) -> JsonRpcResult<String>;
    /// With `fullTx` true, polls answer whole transactions rather than hashes (as geth).
    #[method(name = "eth_newPendingTransactionFilter", with_extensions)]
    fn new_pending_transaction_filter(&self, full_tx: Option<bool>) -> JsonRpcResult<String>;
    #[method(name = "eth_getFilterChanges", with_extensions)]
    fn filter_changes(&self, id: String) -> JsonRpcResult<Changes>;
    #[method(name = "eth_getFilterLogs", with_extensions)]
    fn filter_logs(&self, id: String) -> JsonRpcResult<Vec<Log>>;
    #[method(name = "eth_uninstallFilter", with_extensions)]
    fn uninstall_filter(&self, id: String) -> JsonRpcResult<bool>;
}

/// What a filter collects between polls.
enum Watch {
    Blocks(broadcast::Receiver<ChainEvent>),
    Logs {
        /// The criteria as the client sent them, for `eth_getFilterLogs`.
        criteria: Value,
        filter: Box<LogFilter>,
        events: broadcast::Receiver<ChainEvent>,
    },
    PendingTransactions {
        events: broadcast::Receiver<PoolEvent>,
        full: bool,
    },
}

/// What a poll answers: block or transaction hashes, logs, or pooled transactions.
pub type Changes = FilterChanges<PoolTransaction>;

struct Installed {
    /// The API key that installed it (none when the node serves without keys, as in tests).
    owner: Option<ApiKeyId>,
    /// Its share of its key's [`MAX_CRITERIA_PER_KEY`], given back when it goes.
    _criteria: Share<Option<ApiKeyId>>,
    watch: Watch,
    last_poll: Instant,
}

/// Filter `id` if `owner` installed it; to anyone else it does not exist.
fn owned_by<'a>(
    installed: &'a mut HashMap<String, Installed>,
    id: &str,
    owner: &Option<ApiKeyId>,
) -> RpcResult<&'a mut Installed> {
    installed
        .get_mut(id)
        .filter(|f| f.owner == *owner)
        .ok_or_else(not_found)
}

/// The API key of a request.
fn key_of(ext: &Extensions) -> Option<ApiKeyId> {
    ext.get::<ApiKeyId>().cloned()
}

pub struct EthFilters {
    ctx: ModuleContext,
    installed: Mutex<HashMap<String, Installed>>,
    /// How many addresses and topics each key's log filters name.
    criteria: Shares<Option<ApiKeyId>>,
    /// [`FILTER_TIMEOUT`], shorter in tests.
    timeout: Duration,
}

fn not_found() -> RpcError {
    RpcError::Server("filter not found".into())
}

fn fell_behind(missed: u64) -> RpcError {
    RpcError::Server(format!(
        "filter fell {missed} events behind and was removed; install a new one and poll it more often"
    ))
}

/// A new filter id as geth makes them: `0x` and 32 random hex digits.
fn new_id() -> RpcResult<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| RpcError::internal(format!("no randomness: {e}")))?;
    Ok(alloy::primitives::hex::encode_prefixed(bytes))
}

/// Whether a log of block `number` (hash `hash`) is in the filter's block range. Live logs have
/// no upper end unless the client gave a number; tags are "from now on".
fn in_range(filter: &Filter, number: u64, hash: B256) -> bool {
    match &filter.block_option {
        FilterBlockOption::AtBlockHash(at) => *at == hash,
        FilterBlockOption::Range {
            from_block,
            to_block,
        } => {
            let from_ok = !matches!(from_block, Some(BlockNumberOrTag::Number(n)) if number < *n);
            let to_ok = !matches!(to_block, Some(BlockNumberOrTag::Number(n)) if number > *n);
            from_ok && to_ok
        }
    }
}

/// Everything waiting in `events`; `Err` with the count missed if it fell behind.
fn drain<T: Clone>(events: &mut broadcast::Receiver<T>) -> Result<Vec<T>, u64> {
    let mut out = Vec::new();
    loop {
        match events.try_recv() {
            Ok(event) => out.push(event),
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Ok(out),
            Err(TryRecvError::Lagged(missed)) => return Err(missed),
        }
    }
}

fn block_logs(filter: &LogFilter, block: &BlockEvent, removed: bool) -> Vec<Log> {
    let header = &block.block.header;
    if !in_range(&filter.filter, header.number, header.hash()) {
        return Vec::new();
    }
    logs::block_logs(filter, &block.block, &block.receipts, removed)
}

impl EthFilters {
    pub fn new(ctx: ModuleContext) -> Self {
        Self {
            ctx,
            installed: Mutex::default(),
            criteria: Shares::default(),
            timeout: FILTER_TIMEOUT,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Installed>> {
        self.installed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The installed filters, those not polled within the timeout dropped.
    fn lock_live(&self, now: Instant) -> std::sync::MutexGuard<'_, HashMap<String, Installed>> {
        let mut installed = self.lock();
        installed.retain(|_, f| now.duration_since(f.last_poll) < self.timeout);
        installed
    }

    fn install(&self, owner: Option<ApiKeyId>, watch: Watch) -> RpcResult<String> {
        let now = Instant::now();
        let mut installed = self.lock_live(now);
        let owned = installed.values().filter(|f| f.owner == owner).count();
        if installed.len() >= MAX_FILTERS || owned >= MAX_FILTERS_PER_KEY {
            return Err(RpcError::LimitExceeded(format!(
                "too many filters installed (at most {MAX_FILTERS_PER_KEY} per key, \
                 {MAX_FILTERS} in all); uninstall some or let them time out"
            )));
        }
        let criteria = match &watch {
            Watch::Logs { filter, .. } => filter.criteria_count(),
            _ => 0,
        };
        let criteria = self
            .criteria
            .take(&owner, criteria, MAX_CRITERIA_PER_KEY)
            .map_err(|would| {
                RpcError::LimitExceeded(format!(
                    "the log filters of this key would name {would} addresses and topics, at \
                     most {MAX_CRITERIA_PER_KEY} in all; uninstall some or let them time out"
                ))
            })?;
        let id = new_id()?;
        installed.insert(
            id.clone(),
            Installed {
                owner,
                _criteria: criteria,
                watch,
                last_poll: now,
            },
        );
        Ok(id)
    }

    fn changes(&self, owner: Option<ApiKeyId>, id: &str) -> RpcResult<Changes> {
        let now = Instant::now();
        let mut installed = self.lock_live(now);
        let filter = owned_by(&mut installed, id, &owner)?;
        filter.last_poll = now;
        let changes = match &mut filter.watch {
            Watch::Blocks(events) => drain(events).map(|events| {
                FilterChanges::Hashes(
                    events
                        .iter()
                        .filter_map(|event| match event {
                            ChainEvent::Added(block) => Some(block.block.hash()),
                            ChainEvent::Removed(_) => None,
                        })
                        .collect(),
                )
            }),
            Watch::PendingTransactions { events, full } => drain(events).map(|txs| {
                if *full {
                    let whole = txs.iter().map(|tx| PoolTransaction::of((**tx).clone()));
                    FilterChanges::Transactions(whole.collect())
                } else {
                    FilterChanges::Hashes(txs.iter().map(|tx| *tx.tx_hash()).collect())
                }
            }),
            Watch::Logs { filter, events, .. } => drain(events).map(|events| {
                FilterChanges::Logs(
                    events
                        .iter()
                        .flat_map(|event| match event {
                            ChainEvent::Added(block) => block_logs(filter, block, false),
                            ChainEvent::Removed(blocks) => blocks
                                .iter()
                                .flat_map(|block| block_logs(filter, block, true))
                                .collect(),
                        })
                        .collect(),
                )
            }),
        };
        changes.map_err(|missed| {
            installed.remove(id);
            fell_behind(missed)
        })
    }
}

impl EthFilterApiServer for EthFilters {
    fn new_filter(&self, ext: &Extensions, criteria: Value) -> JsonRpcResult<String> {
        let filter = LogFilter::parse(&criteria, 0)?;
        filter.check_live_range()?;
        let watch = Watch::Logs {
            criteria,
            filter: Box::new(filter),
            events: self.ctx.chain.chain_events(),
        };
        Ok(self.install(key_of(ext), watch)?)
    }

    fn new_block_filter(&self, ext: &Extensions) -> JsonRpcResult<String> {
        let watch = Watch::Blocks(self.ctx.chain.chain_events());
        Ok(self.install(key_of(ext), watch)?)
    }

    fn new_pending_transaction_filter(
        &self,
        ext: &Extensions,
        full_tx: Option<bool>,
    ) -> JsonRpcResult<String> {
        let watch = Watch::PendingTransactions {
            events: self.ctx.pool.pool_events(),
            full: full_tx.unwrap_or(false),
        };
        Ok(self.install(key_of(ext), watch)?)
    }

    fn filter_changes(&self, ext: &Extensions, id: String) -> JsonRpcResult<Changes> {
        Ok(self.changes(key_of(ext), &id)?)
    }

    fn filter_logs(&self, ext: &Extensions, id: String) -> JsonRpcResult<Vec<Log>> {
        let owner = key_of(ext);
        let criteria = {
            let mut installed = self.lock();
            let filter = owned_by(&mut installed, &id, &owner)?;
            filter.last_poll = Instant::now();
            match &filter.watch {
                Watch::Logs { criteria, .. } => criteria.clone(),
                _ => return Err(not_found().into()),
            }
        };
        Ok(crate::logs::get_logs(&self.ctx, &criteria)?)
    }

    fn uninstall_filter(&self, ext: &Extensions, id: String) -> JsonRpcResult<bool> {
        let mut installed = self.lock();
        let owner = key_of(ext);
        if installed.get(&id).is_some_and(|f| f.owner == owner) {
            installed.remove(&id);
            return Ok(true);
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use simnode_api::{
        testing::{MemoryChain, MemoryPool},
        RpcLimits,
    };
    use std::sync::Arc;

    fn filters(timeout: Duration) -> EthFilters {
        let ctx = ModuleContext {
            spec: Arc::new(crate::fake_chain_tests::spec()),
            chain: Arc::new(MemoryChain::new()),
            pool: Arc::new(MemoryPool::default()),
            limits: Arc::new(RpcLimits::default()),
        };
        EthFilters {
            timeout,
            ..EthFilters::new(ctx)
        }
    }

    fn blocks(f: &EthFilters) -> Watch {
        Watch::Blocks(f.ctx.chain.chain_events())
    }

    #[test]
    fn unpolled_filters_expire() {
        let f = filters(Duration::from_secs(1));
        let key = Some(ApiKeyId("a".into()));
        let polled = f.install(key.clone(), blocks(&f)).unwrap();
        let left = f.install(key.clone(), blocks(&f)).unwrap();
        // `left` was last polled two seconds ago.
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(2))
            .expect("the monotonic clock started more than two seconds ago");
        f.lock().get_mut(&left).unwrap().last_poll = long_ago;
        assert!(f.changes(key.clone(), &polled).is_ok());
        let err = f.changes(key.clone(), &left).unwrap_err();
        assert_eq!(err.to_string(), "filter not found");
        assert_eq!(err.code(), -32000);
    }

    #[test]
    fn one_key_cannot_take_every_filter() {
        let f = filters(FILTER_TIMEOUT);
        let a = Some(ApiKeyId("a".into()));
        for _ in 0..MAX_FILTERS_PER_KEY {
            f.install(a.clone(), blocks(&f)).unwrap();
        }
        let err = f.install(a.clone(), blocks(&f)).unwrap_err();
        assert_eq!(err.code(), -32005, "{err}");
        let b = Some(ApiKeyId("b".into()));
        let id = f.install(b.clone(), blocks(&f)).unwrap();
        assert!(f.changes(b, &id).is_ok());
        assert!(f.changes(a, &id).is_err(), "another key's filter");
    }

    #[test]
    fn one_key_cannot_name_every_address() {
        let f = filters(FILTER_TIMEOUT);
        let a = Some(ApiKeyId("a".into()));
        let addresses: Vec<String> = (0..1_000u32).map(|n| format!("0x{:040x}", n + 1)).collect();
        let topics: Vec<String> = (0..1_000u32).map(|n| format!("0x{:064x}", n)).collect();
        let criteria = serde_json::json!({"address": addresses, "topics": [topics, null, topics]});
        let logs = || {
            let filter = LogFilter::parse(&criteria, 0).unwrap();
            Watch::Logs {
                criteria: criteria.clone(),
                filter: Box::new(filter),
                events: f.ctx.chain.chain_events(),
            }
        };
        // 3,000 each: 33 fit in 100,000.
        for _ in 0..33 {
            f.install(a.clone(), logs()).unwrap();
        }
        let err = f.install(a.clone(), logs()).unwrap_err();
        assert_eq!(err.code(), -32005, "{err}");
        assert!(err.to_string().contains("102000"), "{err}");
        // Filters naming nothing still fit, and another key has its own share.
        f.install(a, blocks(&f)).unwrap();
        f.install(Some(ApiKeyId("b".into())), logs()).unwrap();
    }

    #[test]
    fn live_logs_keep_to_the_numbers_given() {
        let hash = B256::repeat_byte(1);
        let filter = |v: Value| -> Filter { serde_json::from_value(v).unwrap() };
        let open = filter(serde_json::json!({}));
        assert!(in_range(&open, 0, hash) && in_range(&open, 1_000, hash));
        let from_latest = filter(serde_json::json!({"fromBlock": "latest"}));
        assert!(in_range(&from_latest, 5, hash));
        let bounded = filter(serde_json::json!({"fromBlock": "0x5", "toBlock": "0x7"}));
        assert!(!in_range(&bounded, 4, hash));
        assert!(in_range(&bounded, 5, hash) && in_range(&bounded, 7, hash));
        assert!(!in_range(&bounded, 8, hash));
        let at = filter(serde_json::json!({ "blockHash": hash }));
        assert!(in_range(&at, 9, hash));
        assert!(!in_range(&at, 9, B256::repeat_byte(2)));
    }

    #[test]
    fn a_receiver_that_fell_behind_says_by_how_much() {
        let (tx, mut rx) = broadcast::channel(2);
        for n in 0..5u8 {
            tx.send(n).unwrap();
        }
        assert_eq!(drain(&mut rx), Err(3));
        // Then it goes on from the oldest kept.
        assert_eq!(drain(&mut rx), Ok(vec![3, 4]));
    }
}
