//! `trace_replayBlockTransactions` and `trace_replayTransaction`: the Parity traces of mined
//! transactions, run again as they ran in their block (see [`simnode_api::replay`]: the parent's
//! state, the pre-block system calls, the block's own EVM environment with every check on, and
//! the transactions before the traced one).

use std::time::Instant;

use alloy::{
    primitives::map::HashSet,
    rpc::types::trace::parity::{TraceResultsWithTransactionHash, TraceType},
};
use revm::DatabaseCommit;
use simnode_api::{replay, ModuleContext, RpcError, RpcResult, StoredBlock};

use crate::{
    exec::{run_traced, timeout, too_large, Budget, Stopped},
    TraceLimits,
};

/// The traces of `block`'s transactions: all of them, or (`only`) the one at that index, the
/// ones before it run untraced and the ones after it not at all.
pub(crate) fn replay_block(
    ctx: &ModuleContext,
    limits: &TraceLimits,
    block: &StoredBlock,
    trace_types: &HashSet<TraceType>,
    only: Option<usize>,
    deadline: Instant,
) -> RpcResult<Vec<TraceResultsWithTransactionHash>> {
    let count = block.body.transactions.len();
    let (first, end) = match only {
        Some(index) => (index, index + 1),
        None => (0, count),
    };
    if first >= end || end > count {
        // The genesis block (and any block without transactions) has nothing to trace.
        return Ok(Vec::new());
    }
    let mut db = replay::state_before_tx(ctx, block, first, deadline, || timeout(limits))?;
    let env = ctx.spec.evm_env(&block.header);
    let mut budget = Budget {
        deadline,
        bytes: 0,
        max_bytes: limits.max_trace_bytes,
    };
    let mut results = Vec::with_capacity(end - first);
    for (index, tx) in replay::tx_envs(block).enumerate().take(end).skip(first) {
        if Instant::now() >= deadline {
            return Err(timeout(limits));
        }
        let (full_trace, res) = run_traced(&mut db, env.clone(), tx, trace_types, &mut budget)
            .map_err(|stopped| match stopped {
                Stopped::Deadline => timeout(limits),
                Stopped::TooLarge => too_large(limits),
                Stopped::Evm(err) => replay::failed_tx(err, index),
            })?;
        results.push(TraceResultsWithTransactionHash {
            full_trace,
            transaction_hash: *block.body.transactions[index].tx_hash(),
        });
        if index + 1 < end {
            db.commit(res.state);
        }
    }
    Ok(results)
}

/// The block holding transaction `hash` and its index there; `None` when it is not mined.
pub(crate) fn locate(
    ctx: &ModuleContext,
    hash: &alloy::primitives::B256,
) -> RpcResult<Option<(std::sync::Arc<StoredBlock>, usize)>> {
    let Some(location) = ctx.chain.transaction_location(hash)? else {
        return Ok(None);
    };
    let block = ctx
        .chain
        .block(location.block_number)?
        .ok_or_else(|| RpcError::Internal(format!("block {} missing", location.block_number)))?;
    let index = usize::try_from(location.index).unwrap_or(usize::MAX);
    if index >= block.body.transactions.len() {
        return Err(RpcError::Internal(format!(
            "transaction {hash} indexed at {index} of block {}, which has {}",
            location.block_number,
            block.body.transactions.len()
        )));
    }
    Ok(Some((block, index)))
}
