//! `eth_callMany` (erigon's, as reth serves it): bundles of calls run in order on one block's
//! state, each call on the changes of those before it, for previewing a sequence of
//! transactions (approve, then swap) without signing anything.
//!
//! `[bundles, stateContext?, stateOverrides?]`:
//! - `bundles`: `[{transactions: [call, ...], blockOverride?}, ...]`; an empty bundle is
//!   skipped (no entry in the answer), an empty list of bundles is -32602;
//! - `stateContext`: `{blockNumber?, transactionIndex?}`: the block (default `latest`) and how
//!   many of its transactions run before the bundles (default `-1`, all of them: the state after
//!   the block); the calls run in that block's environment;
//! - `stateOverrides`: applied once, before the first call;
//! - `timeoutMilliSeconds` (erigon's fourth parameter): a deadline shorter than the node's
//!   `--rpc.evm-timeout` (a longer one is cut to it), -32016 past it.
//!
//! Each call is prepared as reth's eth_call prepares one (no base-fee or nonce checks; when it
//! names no gas, the RPC gas cap, or what the sender can pay for at the price it names) and its
//! changes are kept, reverted or not. The answer holds, per
//! bundle, `{value}` or `{error}` (geth's wording) per call; a call the state refuses to run at
//! all (fees above the balance, say) fails the whole request, as in reth.

use std::time::Instant;

use alloy::rpc::types::{state::StateOverride, Bundle, EthCallResponse};
use alloy_evm::overrides::apply_block_overrides;
use revm::context::result::ExecutionResult;
use simnode_api::{
    call::{self, Bounds, CallRules},
    vm_messages, ModuleContext, RpcError, RpcResult,
};

use crate::evm;

/// Most calls one request may hold, over all its bundles.
pub const MAX_CALLS: usize = 1_000;

/// Runs `bundles` on the state of canonical block `number` after its first `transactions`
/// transactions (all of them when `None`).
pub fn call_many(
    ctx: &ModuleContext,
    number: u64,
    transactions: Option<usize>,
    bundles: Vec<Bundle>,
    state_overrides: Option<StateOverride>,
    bounds: Bounds,
) -> RpcResult<Vec<Vec<EthCallResponse>>> {
    call::check_bundles(&bundles, MAX_CALLS, "eth_callMany")?;
    let block = ctx.chain.block(number)?.ok_or(RpcError::HeaderNotFound)?;
    let mut db = call::bundles_start(
        ctx,
        &block,
        transactions,
        state_overrides,
        bounds.deadline,
        || bounds.timed_out(),
    )?;
    let block_env = ctx.spec.evm_env(&block.header);

    let mut answers = Vec::with_capacity(bundles.len());
    for (b, bundle) in bundles.into_iter().enumerate() {
        let Bundle {
            transactions,
            block_override,
        } = bundle;
        if transactions.is_empty() {
            continue;
        }
        let mut bundle_env = block_env.clone();
        if let Some(overrides) = block_override {
            apply_block_overrides(overrides, &mut db, &mut bundle_env.block_env);
        }
        let mut results = Vec::with_capacity(transactions.len());
        for (i, request) in transactions.into_iter().enumerate() {
            if Instant::now() >= bounds.deadline {
                return Err(bounds.timed_out());
            }
            let mut env = bundle_env.clone();
            let (tx, _) = call::call_tx(&mut env, &db, request, bounds.gas_cap, CallRules::Reth)
                .map_err(|err| located(err, b, i))?;
            let result = evm::run_and_commit(
                &mut db,
                &env,
                &simnode_api::call::PrecompileEdits::default(),
                tx,
                &bounds,
            )
            .map_err(|err| located(err, b, i))?;
            results.push(match result {
                ExecutionResult::Success { output, .. } => EthCallResponse {
                    value: Some(output.into_data()),
                    error: None,
                },
                ExecutionResult::Revert { output, .. } => EthCallResponse {
                    value: None,
                    error: Some(vm_messages::revert_message(&output)),
                },
                ExecutionResult::Halt { reason, .. } => EthCallResponse {
                    value: None,
                    error: Some(vm_messages::halt_message(&reason)),
                },
            });
        }
        answers.push(results);
    }
    Ok(answers)
}

/// `err` of call `call` of bundle `bundle`, saying which it was (same code).
fn located(err: RpcError, bundle: usize, call: usize) -> RpcError {
    let at = |msg: String| format!("bundle {bundle}, call {call}: {msg}");
    match err {
        RpcError::InvalidParams(msg) => RpcError::InvalidParams(at(msg)),
        RpcError::Server(msg) => RpcError::Server(at(msg)),
        RpcError::TransactionRejected(msg) => RpcError::TransactionRejected(at(msg)),
        other => other,
    }
}
