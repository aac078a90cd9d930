//! Running a stored block's transactions again: the state each one started from, as geth's
//! `stateAtTransaction` gives it. Shared by the modules that trace mined transactions
//! (`debug_trace*`, `trace_replay*`).
//!
//! A block runs on the state after its parent in its own EVM environment (the chain spec's
//! `evm_env` of its header, every check on, as when it was imported), after the pre-block system
//! calls (EIP-2935 parent hash, EIP-4788 beacon root).

use std::time::Instant;

use alloy_evm::{block::SystemCaller, EthEvmFactory, Evm, EvmFactory, FromRecoveredTx};
use revm::{
    context::TxEnv, context_interface::result::EVMError, database::CacheDB, DatabaseCommit,
};

use crate::{
    guard::{Abort, Guard},
    ModuleContext, RpcError, RpcResult, StateDb, StateError, StoredBlock,
};

/// The state a replay runs on: the block's parent state with the block's changes so far.
pub type ReplayDb = CacheDB<StateDb>;

/// The state `block`'s first transaction starts from: its parent's, after the pre-block system
/// calls. The genesis block has no parent and is refused.
pub fn block_start(ctx: &ModuleContext, block: &StoredBlock) -> RpcResult<ReplayDb> {
    let Some(parent) = block.number().checked_sub(1) else {
        return Err(RpcError::Server("genesis is not traceable".into()));
    };
    if block.senders.len() != block.body.transactions.len() {
        return Err(RpcError::Internal(format!(
            "block {} has {} transactions and {} senders",
            block.number(),
            block.body.transactions.len(),
            block.senders.len()
        )));
    }
    let mut db: ReplayDb = CacheDB::new(StateDb(ctx.chain.state_at(parent)?));
    let mut evm = EthEvmFactory::default().create_evm(&mut db, ctx.spec.evm_env(&block.header));
    SystemCaller::new(&*ctx.spec)
        .apply_pre_execution_changes(block.header.inner(), &mut evm)
        .map_err(|err| RpcError::Internal(format!("pre-block system calls: {err}")))?;
    drop(evm);
    Ok(db)
}

/// The transaction environments of `block`'s transactions, in order.
pub fn tx_envs(block: &StoredBlock) -> impl Iterator<Item = TxEnv> + '_ {
    block
        .body
        .transactions
        .iter()
        .zip(&block.senders)
        .map(|(tx, sender)| TxEnv::from_recovered_tx(tx, *sender))
}

/// The state before transaction `index` of `block`: the block's start with its first `index`
/// transactions applied, untraced, stopping with `timed_out()` at `deadline`.
pub fn state_before_tx(
    ctx: &ModuleContext,
    block: &StoredBlock,
    index: usize,
    deadline: Instant,
    timed_out: impl Fn() -> RpcError,
) -> RpcResult<ReplayDb> {
    let mut db = block_start(ctx, block)?;
    let env = ctx.spec.evm_env(&block.header);
    for (i, tx) in tx_envs(block).take(index).enumerate() {
        let mut guard = Guard::new(deadline, 0, usize::MAX);
        let res = EthEvmFactory::default()
            .create_evm_with_inspector(&mut db, env.clone(), &mut guard)
            .transact(tx);
        let res = match (res, guard.abort) {
            (Ok(res), _) => res,
            (Err(_), Some(Abort::Deadline)) => return Err(timed_out()),
            (Err(err), _) => return Err(failed_tx(err, i)),
        };
        db.commit(res.state);
    }
    Ok(db)
}

/// A stored transaction that no longer executes: the store is at fault, not the request.
pub fn failed_tx(err: EVMError<StateError>, index: usize) -> RpcError {
    match err {
        EVMError::Database(err) => RpcError::from(err),
        other => RpcError::Internal(format!("transaction {index} of the block: {other}")),
    }
}
