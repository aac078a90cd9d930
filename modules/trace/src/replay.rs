//! The traces of mined transactions, run again as they ran in their block (see
//! [`simnode_api::replay`]: the parent's state, the pre-block system calls, the block's own EVM
//! environment with every check on, and the transactions before the traced one):
//! `trace_replayBlockTransactions` and `trace_replayTransaction` (trace types, as
//! `trace_callMany` gives them), `trace_block` and `trace_transaction` (the call tree of each
//! transaction with where it sits in the chain, and the block and uncle rewards of a block
//! before the merge, as reth gives them).

use std::{ops::Range, sync::Arc, time::Instant};

use alloy::{
    primitives::{map::HashSet, B256, U256},
    rpc::types::{
        trace::parity::{
            Action, LocalizedTransactionTrace, RewardAction, RewardType,
            TraceResultsWithTransactionHash, TraceType, TransactionTrace,
        },
        TransactionInfo,
    },
};
use alloy_evm::{block::calc, EvmEnv};
use revm::{context::TxEnv, context_interface::result::ResultAndState, DatabaseCommit};
use revm_inspectors::tracing::TracingInspectorConfig;
use simnode_api::{
    replay::{self, ReplayDb},
    ModuleContext, RpcError, RpcResult, StoredBlock,
};

use crate::{
    exec::{run_trace_types, run_traced, timeout, too_large, Budget, Stopped},
    TraceLimits,
};

/// Runs the transactions of `block` in `range` (those before it untraced, those after it not
/// at all), each through `trace`, within the request's deadline and trace-byte budget.
fn replay<T>(
    ctx: &ModuleContext,
    limits: &TraceLimits,
    block: &StoredBlock,
    range: Range<usize>,
    budget: &mut Budget,
    mut trace: impl FnMut(
        &mut ReplayDb,
        EvmEnv,
        TxEnv,
        usize,
        &mut Budget,
    ) -> Result<(T, ResultAndState), Stopped>,
) -> RpcResult<Vec<T>> {
    if range.is_empty() || range.end > block.body.transactions.len() {
        // The genesis block (and any block without transactions) has nothing to trace.
        return Ok(Vec::new());
    }
    let deadline = budget.deadline;
    let mut db = replay::state_before_tx(ctx, block, range.start, deadline, || timeout(limits))?;
    let env = ctx.spec.evm_env(&block.header);
    let mut results = Vec::with_capacity(range.len());
    let end = range.end;
    for (index, tx) in replay::tx_envs(block)
        .enumerate()
        .take(end)
        .skip(range.start)
    {
        if Instant::now() >= deadline {
            return Err(timeout(limits));
        }
        let (traced, res) =
            trace(&mut db, env.clone(), tx, index, budget).map_err(|stopped| match stopped {
                Stopped::Deadline => timeout(limits),
                Stopped::TooLarge => too_large(limits),
                Stopped::Evm(err) => replay::failed_tx(err, index),
            })?;
        results.push(traced);
        if index + 1 < end {
            db.commit(res.state);
        }
    }
    Ok(results)
}

/// The transactions to replay: all of the block's, or only the one at `only`.
fn range(block: &StoredBlock, only: Option<usize>) -> Range<usize> {
    match only {
        Some(index) => index..index + 1,
        None => 0..block.body.transactions.len(),
    }
}

/// `trace_replay*`: the trace types of `block`'s transactions, all or (`only`) one.
pub(crate) fn trace_types(
    ctx: &ModuleContext,
    limits: &TraceLimits,
    block: &StoredBlock,
    trace_types: &HashSet<TraceType>,
    only: Option<usize>,
    budget: &mut Budget,
) -> RpcResult<Vec<TraceResultsWithTransactionHash>> {
    replay(
        ctx,
        limits,
        block,
        range(block, only),
        budget,
        |db, env, tx, index, budget| {
            let (full_trace, res) = run_trace_types(db, env, tx, trace_types, budget)?;
            let transaction_hash = *block.body.transactions[index].tx_hash();
            Ok((
                TraceResultsWithTransactionHash {
                    full_trace,
                    transaction_hash,
                },
                res,
            ))
        },
    )
}

/// `trace_block` / `trace_transaction`: the call trees of `block`'s transactions, all or
/// (`only`) one, each placed in the chain; for the whole block before the merge, the block and
/// uncle rewards after them.
pub(crate) fn localized(
    ctx: &ModuleContext,
    limits: &TraceLimits,
    block: &StoredBlock,
    only: Option<usize>,
    budget: &mut Budget,
) -> RpcResult<Vec<LocalizedTransactionTrace>> {
    let block_hash = block.hash();
    let base_fee = block.header.base_fee_per_gas;
    let per_tx = replay(
        ctx,
        limits,
        block,
        range(block, only),
        budget,
        |db, env, tx, index, budget| {
            let (tracer, res) = run_traced(
                db,
                env,
                tx,
                TracingInspectorConfig::default_parity(),
                budget,
            )?;
            let info = TransactionInfo {
                hash: Some(*block.body.transactions[index].tx_hash()),
                index: Some(index as u64),
                block_hash: Some(block_hash),
                block_number: Some(block.number()),
                block_timestamp: Some(block.header.timestamp),
                base_fee,
            };
            // The root keeps the call's own gas and gas used (the transaction's less its
            // intrinsic gas), as trace_replayTransaction shows it: reth dropped the receipt's
            // figures there (reth#9761), as OpenEthereum never had them.
            let traces = tracer
                .into_parity_builder()
                .into_localized_transaction_traces(info);
            Ok((traces, res))
        },
    )?;
    let mut traces: Vec<LocalizedTransactionTrace> = per_tx.into_iter().flatten().collect();
    if only.is_none() {
        traces.extend(reward_traces(ctx, block));
    }
    Ok(traces)
}

/// The reward traces of a block before the merge, as reth gives them: the miner's (the base
/// reward and 1/32 of it per uncle), then each uncle's miner's ((8 + uncle number - block
/// number) / 8 of it). The amounts are those the block's execution paid (alloy-evm's).
fn reward_traces(ctx: &ModuleContext, block: &StoredBlock) -> Vec<LocalizedTransactionTrace> {
    let number = block.number();
    // The genesis block pays no reward: nothing executed it.
    let Some(base) = calc::base_block_reward(&*ctx.spec, number).filter(|_| number > 0) else {
        return Vec::new();
    };
    let reward = |author, reward_type, value: u128| LocalizedTransactionTrace {
        trace: TransactionTrace {
            action: Action::Reward(RewardAction {
                author,
                reward_type,
                value: U256::from(value),
            }),
            error: None,
            result: None,
            subtraces: 0,
            trace_address: Vec::new(),
        },
        block_hash: Some(block.hash()),
        block_number: Some(number),
        transaction_hash: None,
        transaction_position: None,
    };
    let ommers = &block.body.ommers;
    let mut traces = Vec::with_capacity(ommers.len() + 1);
    traces.push(reward(
        block.header.beneficiary,
        RewardType::Block,
        calc::block_reward(base, ommers.len()),
    ));
    for uncle in ommers {
        // An uncle more than 8 blocks back earns nothing (and no valid block has one).
        let value = if uncle.number + 8 >= number {
            calc::ommer_reward(base, number, uncle.number)
        } else {
            0
        };
        traces.push(reward(uncle.beneficiary, RewardType::Uncle, value));
    }
    traces
}

/// The block holding transaction `hash` and its index there; `None` when it is not mined.
pub(crate) fn locate(
    ctx: &ModuleContext,
    hash: &B256,
) -> RpcResult<Option<(Arc<StoredBlock>, usize)>> {
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
