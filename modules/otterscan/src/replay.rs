//! Mined transactions run again under a call tracer: the frames Otterscan's trace, internal
//! operations, transaction error, search and contract-creator methods read.

use alloy_evm::{EthEvmFactory, Evm, EvmFactory};
use revm::{
    context::result::{ExecutionResult, HaltReason},
    DatabaseCommit,
};
use revm_inspectors::tracing::{types::CallTrace, TracingInspector, TracingInspectorConfig};
use simnode_api::{
    call::Bounds,
    guard::{Abort, Guard},
    replay::{self, ReplayDb},
    ModuleContext, RpcResult, StoredBlock,
};

/// One transaction run again: its call frames in execution order (the transaction's own frame
/// first, at depth 0) and its result.
pub struct Replayed {
    pub frames: Vec<Frame>,
    pub result: ExecutionResult<HaltReason>,
}

/// A call frame, and whether its effects stand: it succeeded, and so did every frame around it.
pub struct Frame {
    pub call: CallTrace,
    pub kept: bool,
}

/// Transaction `index` of `block`, traced on the state its block gave it.
pub fn transaction(
    ctx: &ModuleContext,
    block: &StoredBlock,
    index: usize,
    bounds: &Bounds,
) -> RpcResult<Replayed> {
    let mut db =
        replay::state_before_tx(ctx, block, index, bounds.deadline, || bounds.timed_out())?;
    traced(ctx, block, index, &mut db, bounds)
}

/// Every transaction of `block`, traced in order.
pub fn block(
    ctx: &ModuleContext,
    block: &StoredBlock,
    bounds: &Bounds,
) -> RpcResult<Vec<Replayed>> {
    if block.body.transactions.is_empty() {
        return Ok(Vec::new());
    }
    let mut db = replay::block_start(ctx, block)?;
    (0..block.body.transactions.len())
        .map(|index| traced(ctx, block, index, &mut db, bounds))
        .collect()
}

/// Runs transaction `index` of `block` on `db` under the tracer and keeps its changes.
fn traced(
    ctx: &ModuleContext,
    block: &StoredBlock,
    index: usize,
    db: &mut ReplayDb,
    bounds: &Bounds,
) -> RpcResult<Replayed> {
    let Some(tx) = replay::tx_envs(block).nth(index) else {
        return Err(simnode_api::RpcError::Internal(format!(
            "block {} has no transaction {index}",
            block.number()
        )));
    };
    let mut tracer = TracingInspector::new(TracingInspectorConfig::default_parity());
    let mut guard = Guard::new(bounds.deadline, 0, usize::MAX);
    let outcome = EthEvmFactory::default()
        .create_evm_with_inspector(
            &mut *db,
            ctx.spec.evm_env(&block.header),
            (&mut tracer, &mut guard),
        )
        .transact(tx);
    let outcome = match (outcome, guard.abort) {
        (Ok(outcome), _) => outcome,
        (Err(_), Some(Abort::Deadline)) => return Err(bounds.timed_out()),
        (Err(err), _) => return Err(replay::failed_tx(err, index)),
    };
    db.commit(outcome.state);
    // Nodes come parents first, so one pass settles whether each frame's effects stand.
    let mut frames: Vec<Frame> = Vec::new();
    for node in tracer.into_traces().into_nodes() {
        let parent_kept = node.parent.is_none_or(|parent| frames[parent].kept);
        frames.push(Frame {
            kept: parent_kept && node.trace.success,
            call: node.trace,
        });
    }
    Ok(Replayed {
        frames,
        result: outcome.result,
    })
}
