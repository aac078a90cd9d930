//! `eth_subscribe` / `eth_unsubscribe` over WebSocket: new heads, logs and pending transactions,
//! pushed as `eth_subscription` notifications the way geth sends them.
//!
//! - `newHeads`: the header of every block that becomes the head, in order (after a reorg, the
//!   new branch's blocks one by one).
//! - `logs` with an optional `{address, topics}` filter: the matching logs of every block that
//!   becomes canonical, and the same logs again with `removed: true` when a block leaves the
//!   canonical chain.
//! - `newPendingTransactions`: the hash of every transaction the pool accepts, or the whole
//!   transaction with the second param `true`.
//! - `syncing`: the node's sync status at once, then each time it starts or stops being behind
//!   its consensus client (see [`crate::syncing`]); reth's shape, `false` or
//!   `{syncing: true, startingBlock, currentBlock, highestBlock}`.
//!
//! A subscriber too slow to keep up with [`simnode_api::events::EVENTS_KEPT`] events is not left
//! believing it saw everything: its subscription ends with an error notification. Over HTTP
//! there is nothing to push to, and the method answers geth's -32601 "notifications not
//! supported".

use alloy::{primitives::U256, rpc::types::Header as RpcHeader};
use jsonrpsee::{
    core::SubscriptionResult, proc_macros::rpc, server::SubscriptionMessage,
    types::ErrorObjectOwned, Extensions, PendingSubscriptionSink, SubscriptionSink,
};
use serde::Serialize;
use serde_json::Value;
use simnode_api::{
    access::CallerAccess,
    rpc_block::PoolTransaction,
    shares::{Share, Shares},
    ChainEvent, ModuleContext, PoolEvent, RpcError, SyncTarget,
};

use crate::{
    logs::{block_logs, LogFilter},
    syncing::notification,
};
use tokio::sync::{
    broadcast::{self, error::RecvError},
    watch,
};

#[rpc(server)]
pub trait EthPubSubApi {
    #[subscription(name = "eth_subscribe" => "eth_subscription", unsubscribe = "eth_unsubscribe", item = Value, with_extensions)]
    async fn subscribe(&self, kind: String, params: Option<Value>) -> SubscriptionResult;
}

/// What a subscription follows.
#[derive(Debug)]
enum Kind {
    NewHeads,
    Logs(Box<LogFilter>),
    PendingTransactions { full: bool },
    Syncing,
}

fn parse_kind(kind: &str, params: Option<Value>) -> Result<Kind, RpcError> {
    let params = params.filter(|p| !p.is_null());
    match kind {
        "newHeads" => match params {
            None => Ok(Kind::NewHeads),
            Some(_) => Err(RpcError::invalid_params("newHeads takes no parameters")),
        },
        "logs" => {
            let params = params.unwrap_or_else(|| Value::Object(Default::default()));
            // One block is no stream to follow (geth ignores it; a mistake, most likely).
            if params.get("blockHash").is_some_and(|v| !v.is_null()) {
                return Err(RpcError::invalid_params(
                    "a logs subscription follows new blocks: blockHash does not apply",
                ));
            }
            // A block range bounds which new blocks' logs come, as in geth.
            let filter = LogFilter::parse(&params, 1)?;
            filter.check_live_range()?;
            Ok(Kind::Logs(Box::new(filter)))
        }
        "newPendingTransactions" => match params {
            None => Ok(Kind::PendingTransactions { full: false }),
            Some(Value::Bool(full)) => Ok(Kind::PendingTransactions { full }),
            Some(other) => Err(RpcError::invalid_params(format!(
                "invalid argument 1: expected a bool (full transactions), got {other}"
            ))),
        },
        "syncing" => match params {
            None => Ok(Kind::Syncing),
            Some(_) => Err(RpcError::invalid_params("syncing takes no parameters")),
        },
        // geth's code for a subscription it does not have: -32601.
        other => Err(RpcError::MethodNotAvailable(format!(
            "no \"{other}\" subscription in eth namespace (newHeads, logs, \
             newPendingTransactions and syncing are offered)"
        ))),
    }
}

/// Addresses and topics the `logs` subscriptions of one connection may name in all: each is
/// held for the subscription's life (one may name 1,000 addresses and 4,000 topics, and a
/// connection hold 1,024 subscriptions).
pub const MAX_CRITERIA_PER_CONNECTION: usize = 100_000;

pub struct EthPubSub {
    ctx: ModuleContext,
    /// How many addresses and topics each connection's `logs` subscriptions name.
    criteria: Shares<usize>,
}

impl EthPubSub {
    pub fn new(ctx: ModuleContext) -> Self {
        Self {
            ctx,
            criteria: Shares::default(),
        }
    }

    /// A share of `connection`'s [`MAX_CRITERIA_PER_CONNECTION`] for a filter naming `count`,
    /// given back when the subscription ends.
    fn take_criteria(&self, connection: usize, count: usize) -> Result<Share<usize>, RpcError> {
        self.criteria
            .take(&connection, count, MAX_CRITERIA_PER_CONNECTION)
            .map_err(|would| {
                RpcError::LimitExceeded(format!(
                    "the logs subscriptions of this connection would name {would} addresses \
                     and topics, at most {MAX_CRITERIA_PER_CONNECTION} in all; unsubscribe some"
                ))
            })
    }
}

/// Ends a subscription that fell behind.
fn lagged(missed: u64) -> jsonrpsee::core::SubscriptionError {
    format!("subscription fell {missed} events behind and was closed; subscribe again").into()
}

/// Sends one item; `Err` when the subscriber is gone or may no longer be sent anything.
async fn send<T: Serialize>(subscriber: &Subscriber, item: &T) -> Result<(), ()> {
    // A caller whose key was revoked since it subscribed gets nothing more: the subscription
    // ends here.
    if !subscriber.access.allowed() {
        return Err(());
    }
    let sink = &subscriber.sink;
    let Ok(message) = SubscriptionMessage::new(sink.method_name(), sink.subscription_id(), item)
    else {
        // Headers, logs, transactions and hashes always serialize; were one not to, that item
        // would be skipped and the subscription would go on.
        return Ok(());
    };
    sink.send(message).await.map_err(|_| ())
}

/// An accepted subscription's sink and the access of the connection it came on.
struct Subscriber {
    sink: SubscriptionSink,
    access: CallerAccess,
}

impl Subscriber {
    async fn closed(&self) {
        self.sink.closed().await
    }
}

/// The next event, or `None` once the subscriber left or the sender is gone for good.
async fn next<T: Clone>(
    sink: &Subscriber,
    events: &mut broadcast::Receiver<T>,
) -> Option<Result<T, u64>> {
    tokio::select! {
        () = sink.closed() => None,
        event = events.recv() => match event {
            Ok(event) => Some(Ok(event)),
            Err(RecvError::Lagged(missed)) => Some(Err(missed)),
            Err(RecvError::Closed) => None,
        },
    }
}

#[jsonrpsee::core::async_trait]
impl EthPubSubApiServer for EthPubSub {
    async fn subscribe(
        &self,
        pending: PendingSubscriptionSink,
        ext: &Extensions,
        kind: String,
        params: Option<Value>,
    ) -> SubscriptionResult {
        let access = CallerAccess::of(ext);
        let kind = match parse_kind(&kind, params) {
            Ok(kind) => kind,
            Err(err) => {
                pending.reject(ErrorObjectOwned::from(err)).await;
                return Ok(());
            }
        };
        // Subscribed before accepting, so nothing that happens once the client holds the id
        // is missed.
        let accept = |pending: PendingSubscriptionSink| async {
            Ok::<_, jsonrpsee::core::server::PendingSubscriptionAcceptError>(Subscriber {
                sink: pending.accept().await?,
                access,
            })
        };
        match kind {
            Kind::NewHeads => {
                let events = self.ctx.chain.chain_events();
                follow_chain(accept(pending).await?, events, None).await
            }
            Kind::Logs(filter) => {
                let connection = pending.connection_id().0;
                let _share = match self.take_criteria(connection, filter.criteria_count()) {
                    Ok(share) => share,
                    Err(err) => {
                        pending.reject(ErrorObjectOwned::from(err)).await;
                        return Ok(());
                    }
                };
                let events = self.ctx.chain.chain_events();
                follow_chain(accept(pending).await?, events, Some(&filter)).await
            }
            Kind::PendingTransactions { full } => {
                let events = self.ctx.pool.pool_events();
                follow_pool(accept(pending).await?, events, full).await
            }
            Kind::Syncing => {
                let target = self.ctx.chain.sync_target();
                follow_sync(accept(pending).await?, target, &self.ctx).await
            }
        }
    }
}

/// New heads (no filter) or logs (a filter) until the subscriber leaves.
async fn follow_chain(
    sink: Subscriber,
    mut events: broadcast::Receiver<ChainEvent>,
    logs: Option<&LogFilter>,
) -> SubscriptionResult {
    while let Some(event) = next(&sink, &mut events).await {
        let sent = match (event.map_err(lagged)?, logs) {
            (ChainEvent::Added(added), None) => {
                let header =
                    RpcHeader::from_consensus(added.block.header.clone(), None, None::<U256>);
                send(&sink, &header).await
            }
            // A head that left the chain is not announced; its replacement is.
            (ChainEvent::Removed(_), None) => Ok(()),
            (ChainEvent::Added(block), Some(filter))
                if !filter.covers_block(block.block.number()) =>
            {
                Ok(())
            }
            (ChainEvent::Added(block), Some(filter)) => {
                send_all(
                    &sink,
                    block_logs(filter, &block.block, &block.receipts, false),
                )
                .await
            }
            (ChainEvent::Removed(blocks), Some(filter)) => {
                let removed = blocks
                    .iter()
                    .filter(|block| filter.covers_block(block.block.number()))
                    .flat_map(|block| block_logs(filter, &block.block, &block.receipts, true));
                send_all(&sink, removed.collect()).await
            }
        };
        if sent.is_err() {
            break;
        }
    }
    Ok(())
}

/// Transactions entering the pool (hashes, or whole with `full`) until the subscriber leaves.
async fn follow_pool(
    sink: Subscriber,
    mut events: broadcast::Receiver<PoolEvent>,
    full: bool,
) -> SubscriptionResult {
    while let Some(event) = next(&sink, &mut events).await {
        let tx = event.map_err(lagged)?;
        let sent = if full {
            send(&sink, &PoolTransaction::of((*tx).clone())).await
        } else {
            send(&sink, tx.tx_hash()).await
        };
        if sent.is_err() {
            break;
        }
    }
    Ok(())
}

/// The sync status now, then at each start and end of being behind, until the subscriber
/// leaves.
async fn follow_sync(
    sink: Subscriber,
    mut target: watch::Receiver<Option<SyncTarget>>,
    ctx: &ModuleContext,
) -> SubscriptionResult {
    let status = |target: Option<&SyncTarget>| notification(target, ctx.chain.head().latest);
    let now = *target.borrow_and_update();
    let mut behind = now.is_some();
    if send(&sink, &status(now.as_ref())).await.is_err() {
        return Ok(());
    }
    loop {
        tokio::select! {
            () = sink.closed() => return Ok(()),
            changed = target.changed() => {
                if changed.is_err() {
                    // A chain that never syncs: nothing more to say.
                    sink.closed().await;
                    return Ok(());
                }
            }
        }
        let now = *target.borrow_and_update();
        if now.is_some() != behind {
            behind = now.is_some();
            if send(&sink, &status(now.as_ref())).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// Each log as its own notification, as geth sends them.
async fn send_all<T: Serialize>(sink: &Subscriber, items: Vec<T>) -> Result<(), ()> {
    for item in &items {
        send(sink, item).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_connection_cannot_name_every_address() {
        use simnode_api::testing::{MemoryChain, MemoryPool};
        let pubsub = EthPubSub::new(ModuleContext {
            spec: std::sync::Arc::new(crate::fake_chain_tests::spec()),
            chain: std::sync::Arc::new(MemoryChain::new()),
            pool: std::sync::Arc::new(MemoryPool::default()),
            limits: Default::default(),
        });
        let most = pubsub.take_criteria(1, 99_000).unwrap();
        let err = pubsub
            .take_criteria(1, 2_000)
            .err()
            .expect("over the share");
        assert_eq!(err.code(), -32005, "{err}");
        let _other = pubsub.take_criteria(2, 2_000).unwrap();
        // An ended subscription gives its share back.
        drop(most);
        let _again = pubsub.take_criteria(1, 2_000).unwrap();
    }

    #[test]
    fn kinds_and_their_params() {
        assert!(matches!(parse_kind("newHeads", None), Ok(Kind::NewHeads)));
        assert!(matches!(
            parse_kind("newHeads", Some(Value::Null)),
            Ok(Kind::NewHeads)
        ));
        assert!(parse_kind("newHeads", Some(json!({}))).is_err());
        assert!(matches!(parse_kind("logs", None), Ok(Kind::Logs(_))));
        let Ok(Kind::Logs(filter)) = parse_kind(
            "logs",
            Some(json!({"address": "0x00000000000000000000000000000000000000aa"})),
        ) else {
            panic!("a logs filter");
        };
        assert_eq!(filter.filter.address.len(), 1);
        // A range bounds the blocks followed; one that can hold none is refused, as geth.
        let Ok(Kind::Logs(ranged)) =
            parse_kind("logs", Some(json!({"fromBlock": "0x5", "toBlock": "0x6"})))
        else {
            panic!("a ranged logs filter");
        };
        assert!(!ranged.covers_block(4) && ranged.covers_block(5) && !ranged.covers_block(7));
        let err =
            parse_kind("logs", Some(json!({"fromBlock": "0x6", "toBlock": "0x5"}))).unwrap_err();
        assert_eq!(err.code(), -32602);
        let err = parse_kind(
            "logs",
            Some(json!({"blockHash": format!("0x{}", "11".repeat(32))})),
        )
        .unwrap_err();
        assert_eq!(err.code(), -32602);
        assert_eq!(parse_kind("blocks", None).unwrap_err().code(), -32601);
        assert!(parse_kind("logs", Some(json!({"address": "0x12"}))).is_err());
        assert!(matches!(
            parse_kind("newPendingTransactions", Some(json!(true))),
            Ok(Kind::PendingTransactions { full: true })
        ));
        assert!(parse_kind("newPendingTransactions", Some(json!("yes"))).is_err());
        assert!(matches!(parse_kind("syncing", None), Ok(Kind::Syncing)));
        assert_eq!(
            parse_kind("syncing", Some(json!({}))).unwrap_err().code(),
            -32602
        );
    }
}
