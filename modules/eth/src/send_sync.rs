//! eth_sendRawTransactionSync (EIP-7966, as geth serves it): eth_sendRawTransaction, then the
//! transaction's receipt as soon as a block takes it, or error 4 with its hash once the wait
//! is over (the transaction stays in the pool).
//!
//! The wait is the request's second param in milliseconds (none or zero: `--rpc.tx-sync-timeout`;
//! at most `--rpc.tx-sync-max-timeout`). The chain's events are followed from before the
//! transaction reaches the pool, so a block mined at once (a `--dev` node mines one per
//! transaction) is not missed; a block's event goes out after it is stored, so its receipt is
//! read from the store like any other.

use std::time::Duration;

use alloy::{primitives::B256, rpc::types::TransactionReceipt};
use simnode_api::{ChainEvent, ModuleContext, RpcError, RpcResult};
use tokio::{
    sync::broadcast::error::RecvError,
    time::{timeout_at, Instant},
};

use crate::send;

/// Whether the event adds a block that carries the transaction `hash`.
fn carries(event: &ChainEvent, hash: &B256) -> bool {
    match event {
        ChainEvent::Added(added) => added
            .block
            .body
            .transactions
            .iter()
            .any(|tx| tx.tx_hash() == hash),
        ChainEvent::Removed(_) => false,
    }
}

/// Sends `raw` to the pool and waits up to `wait` for a block to take it.
pub async fn send_and_wait(
    ctx: &ModuleContext,
    raw: Vec<u8>,
    wait: Duration,
) -> Result<TransactionReceipt, jsonrpsee::types::ErrorObjectOwned> {
    // Before the pool sees it: the block that takes it may be built before `send` returns.
    let mut events = ctx.chain.chain_events();
    let hash = send::send_raw_transaction_async(ctx, raw).await?;
    let deadline = Instant::now() + wait;
    Ok(wait_for_receipt(ctx, hash, &mut events, deadline, wait).await?)
}

/// How long a send waits for the block a dev node mines on arrival (see
/// [`simnode_api::TxPool::mines_on_arrival`]) before answering anyway.
const MINED_ON_ARRIVAL_WAIT: Duration = Duration::from_secs(2);

/// Runs `send` (which puts one transaction in the pool and gives its hash) and, when the pool
/// has a block mined for each arrival, answers once a stored block carries the transaction (or
/// after [`MINED_ON_ARRIVAL_WAIT`]: the hash is the answer either way).
pub async fn sent<F, E>(ctx: &ModuleContext, send: F) -> Result<B256, E>
where
    F: std::future::Future<Output = Result<B256, E>>,
{
    // Followed from before the pool sees it: the block may be built before `send` returns.
    let mut events = ctx
        .pool
        .mines_on_arrival()
        .then(|| ctx.chain.chain_events());
    let hash = send.await?;
    // One behind a nonce gap stays in the pool: no block comes for it.
    let gapped = ctx.pool.get(&hash).is_some() && !ctx.pool.can_run_now(&hash);
    if let (Some(events), false) = (events.as_mut(), gapped) {
        let deadline = Instant::now() + MINED_ON_ARRIVAL_WAIT;
        // A timeout or a store error leaves the answer as it is: the transaction was taken.
        let _ = wait_for_receipt(ctx, hash, events, deadline, MINED_ON_ARRIVAL_WAIT).await;
    }
    Ok(hash)
}

async fn wait_for_receipt(
    ctx: &ModuleContext,
    hash: B256,
    events: &mut tokio::sync::broadcast::Receiver<ChainEvent>,
    deadline: Instant,
    wait: Duration,
) -> RpcResult<TransactionReceipt> {
    loop {
        if let Some(receipt) = crate::stored_receipt(ctx, hash)? {
            return Ok(receipt);
        }
        // Until a block takes it (or events were missed, which the store then answers for).
        loop {
            match timeout_at(deadline, events.recv()).await {
                Err(_) => return Err(RpcError::TxSyncTimeout { hash, waited: wait }),
                Ok(Ok(event)) if carries(&event, &hash) => break,
                Ok(Ok(_)) => {}
                Ok(Err(RecvError::Lagged(_))) => break,
                Ok(Err(RecvError::Closed)) => {
                    return Err(RpcError::internal("the node stopped following its chain"))
                }
            }
        }
    }
}
