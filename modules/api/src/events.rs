//! Changes of the canonical chain and the pool, as `eth_subscribe` follows them.
//!
//! The store and the pool announce what they did on broadcast channels after it is done (a
//! block's event goes out after its write transaction committed, so a subscriber reading the
//! chain finds it there). A subscriber that falls more than [`EVENTS_KEPT`] events behind has
//! lost some and is told so by its receiver (`RecvError::Lagged`).

use std::sync::Arc;

use alloy::consensus::{transaction::Recovered, ReceiptEnvelope, TxEnvelope};
use tokio::sync::broadcast;

use crate::StoredBlock;

/// Events a channel holds for its slowest subscriber.
pub const EVENTS_KEPT: usize = 1024;

/// A block with its receipts, as it joined or left the canonical chain.
#[derive(Debug)]
pub struct BlockEvent {
    pub block: StoredBlock,
    pub receipts: Vec<ReceiptEnvelope>,
}

/// One change of the canonical chain, in the order the store made them.
#[derive(Debug, Clone)]
pub enum ChainEvent {
    /// The block became the head, on top of the previous one.
    Added(Arc<BlockEvent>),
    /// Blocks left the canonical chain (a reorg or rewind), lowest first, the order geth
    /// announces their removed logs in. One event for the whole rewind: a rewind of thousands
    /// of blocks sent block by block outran every subscriber's share of the channel.
    Removed(Arc<Vec<BlockEvent>>),
}

/// A transaction that entered the pool.
pub type PoolEvent = Arc<Recovered<TxEnvelope>>;

/// The sending side of an event channel; sending with no subscriber is a no-op.
#[derive(Debug)]
pub struct EventSender<T>(broadcast::Sender<T>);

impl<T: Clone> Default for EventSender<T> {
    fn default() -> Self {
        Self(broadcast::channel(EVENTS_KEPT).0)
    }
}

impl<T: Clone> EventSender<T> {
    /// Whether anyone listens: events are only built for subscribers.
    pub fn has_subscribers(&self) -> bool {
        self.0.receiver_count() > 0
    }

    pub fn send(&self, event: T) {
        // No receiver is not an error: nobody subscribed.
        let _ = self.0.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<T> {
        self.0.subscribe()
    }
}
