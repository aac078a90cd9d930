//! eth_call and eth_estimateGas: run a transaction request on the state after a block, with
//! geth's relaxations (no base-fee, nonce or sender-code checks) and geth's error wording.
//!
//! A run whose gas could keep it going long past the request's deadline goes under a
//! [`Guard`] that halts the EVM there: answering the client at the deadline is not enough, the
//! blocking thread must stop too (with `--rpc.gascap 0` a looping call would otherwise never
//! end). See [`UNGUARDED_GAS`].

use alloy::eips::eip2930::{AccessList, AccessListItem};
use alloy::eips::eip4844::DATA_GAS_PER_BLOB;
use alloy::primitives::{Address, Bytes, TxKind, B256, U256};
use alloy_evm::{EthEvmFactory, Evm, EvmEnv, EvmFactory};
use revm::{
    context::{result::ExecutionResult, TxEnv},
    context_interface::result::{EVMError, HaltReason, InvalidTransaction},
    context_interface::transaction::TransactionType,
    primitives::hardfork::SpecId,
    DatabaseCommit, DatabaseRef,
};
use simnode_api::call::{type_not_supported, Bounds, CallDb, PrecompileEdits, Prepared};
use simnode_api::{
    call::transaction_error,
    guard::{Abort, Guard},
    vm_messages, RpcError, RpcResult,
};
use std::time::Instant;

/// A run's result and the state it leaves.
type Outcome = revm::context::result::ResultAndState<HaltReason>;

/// Gas of a plain value transfer.
const TX_GAS: u64 = 21_000;

/// Gas limits up to this run without the deadline guard. An inspector slows the interpreter
/// by about half on cheap opcodes (measured on a release build: a 30M-gas loop, 29-32 ms
/// plain, 44-55 ms guarded), while the default cap's 50M gas bounds how long an unguarded run
/// can outlive its request (about 50 ms of such a loop; the client gets -32016 at the
/// deadline regardless). Above it (a raised or zero `--rpc.gascap`) a run could go on for
/// minutes, so it goes under the guard.
const UNGUARDED_GAS: u64 = 50_000_000;

/// Runs the transaction without committing, stopped at the deadline when its gas could keep
/// it running long past it; maps validation failures to geth's messages.
pub fn run(
    db: &mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
) -> RpcResult<ExecutionResult<HaltReason>> {
    Ok(outcome(db, env, precompiles, tx, bounds)?.result)
}

/// [`run`], then the run's changes written into `db` (a reverted or halted call still pays
/// for its gas and bumps its nonce), for calls that see the ones before them.
pub fn run_and_commit(
    db: &mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
) -> RpcResult<ExecutionResult<HaltReason>> {
    let outcome = outcome(db, env, precompiles, tx, bounds)?;
    db.commit(outcome.state);
    Ok(outcome.result)
}

/// A run's result and state, or geth's refusal of a transaction the EVM will not run.
fn outcome(
    db: &mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
) -> RpcResult<Outcome> {
    let caller = tx.caller;
    attempt(db, env, precompiles, tx, bounds)?.map_err(|invalid| refused(&invalid, caller))
}

/// [`run`] with `inspector` beside the deadline guard.
fn run_with<'a, I>(
    db: &'a mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
    inspector: I,
) -> RpcResult<ExecutionResult<HaltReason>>
where
    I: revm::Inspector<alloy_evm::eth::EthEvmContext<&'a mut CallDb>>,
{
    let caller = tx.caller;
    Ok(attempt_with(db, env, precompiles, tx, bounds, inspector)?
        .map_err(|invalid| refused(&invalid, caller))?
        .result)
}

/// One run: its result, or why the EVM would not run the transaction at all (kept typed, so
/// that the gas search can tell a limit below the intrinsic cost from other refusals).
fn attempt(
    db: &mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
) -> RpcResult<Result<Outcome, InvalidTransaction>> {
    if tx.gas_limit > UNGUARDED_GAS {
        return attempt_with(
            db,
            env,
            precompiles,
            tx,
            bounds,
            revm::inspector::NoOpInspector,
        );
    }
    let caller = tx.caller;
    let mut evm = EthEvmFactory::default().create_evm(db, env.clone());
    precompiles.apply(evm.precompiles_mut());
    match evm.transact_raw(tx) {
        Ok(outcome) => Ok(Ok(outcome)),
        Err(EVMError::Transaction(invalid)) => Ok(Err(invalid)),
        Err(other) => Err(transaction_error(other, caller)),
    }
}

/// [`attempt`] with `inspector` beside the deadline guard.
fn attempt_with<'a, I>(
    db: &'a mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
    inspector: I,
) -> RpcResult<Result<Outcome, InvalidTransaction>>
where
    I: revm::Inspector<alloy_evm::eth::EthEvmContext<&'a mut CallDb>>,
{
    let mut guard = Guard::new(bounds.deadline, 0, usize::MAX);
    let caller = tx.caller;
    let mut evm = EthEvmFactory::default().create_evm_with_inspector(
        db,
        env.clone(),
        (inspector, &mut guard),
    );
    precompiles.apply(evm.precompiles_mut());
    let outcome = evm.transact_raw(tx);
    drop(evm);
    match outcome {
        Ok(outcome) => Ok(Ok(outcome)),
        Err(_) if guard.abort == Some(Abort::Deadline) => Err(bounds.timed_out()),
        Err(EVMError::Transaction(invalid)) => Ok(Err(invalid)),
        Err(other) => Err(transaction_error(other, caller)),
    }
}

/// geth's -32000 for a transaction the EVM refuses to run.
fn refused(invalid: &InvalidTransaction, caller: alloy::primitives::Address) -> RpcError {
    RpcError::Server(vm_messages::invalid_tx_message(invalid, caller))
}

/// geth's message for the halt `reason` of `tx` (not committed to `db`): where geth names the
/// instruction halted on, the run is repeated to see it (failures only: successful runs carry
/// no inspector for it).
pub fn halt_words(
    db: &mut CallDb,
    env: &EvmEnv,
    precompiles: &PrecompileEdits,
    tx: TxEnv,
    bounds: &Bounds,
    reason: &HaltReason,
) -> RpcResult<String> {
    let precompile = vm_messages::precompile_failure(reason, env.cfg_env.spec, &tx);
    let mut last = vm_messages::LastInstruction::default();
    if vm_messages::names_the_instruction(reason) {
        run_with(db, env, precompiles, tx, bounds, &mut last)?;
    }
    Ok(vm_messages::halt_words(reason, last, precompile))
}

/// The answer of eth_call for an execution result.
pub fn call_output(result: ExecutionResult<HaltReason>) -> RpcResult<Bytes> {
    match result {
        ExecutionResult::Success { output, .. } => Ok(output.into_data()),
        ExecutionResult::Revert { output, .. } => Err(revert_error(output)),
        ExecutionResult::Halt { reason, .. } => {
            Err(RpcError::Server(vm_messages::halt_message(&reason)))
        }
    }
}

/// Code 3 with the revert data, and the decoded reason in the message as geth writes it.
pub fn revert_error(output: Bytes) -> RpcError {
    RpcError::Reverted {
        message: vm_messages::revert_message(&output),
        data: output,
    }
}

/// eth_estimateGas: the smallest gas limit the transaction succeeds with, by binary search
/// between what a run used and the highest limit allowed, as geth does.
pub fn estimate(prepared: Prepared, block_gas_limit: u64) -> RpcResult<u64> {
    let Prepared {
        mut db,
        mut env,
        mut tx,
        gas_defaulted,
        bounds,
        precompiles,
    } = prepared;
    // Estimation checks the balance like a real transaction would pay (geth keeps the check).
    env.cfg_env.disable_balance_check = false;
    // As geth: a gas limit below a plain transfer's cost is no limit at all.
    let mut hi = if gas_defaulted || tx.gas_limit < TX_GAS {
        block_gas_limit
    } else {
        tx.gas_limit
    };
    hi = hi.min(bounds.gas_cap);
    // From Osaka no transaction may have more gas than EIP-7825's cap: an estimate above it
    // could not be sent (geth lowers its bound the same way).
    if env.cfg_env.spec.is_enabled_in(SpecId::OSAKA) {
        hi = hi.min(revm::primitives::eip7825::TX_GAS_LIMIT_CAP);
    }
    // A price makes the balance an upper bound on the gas (the fee cap's price, as geth).
    if tx.gas_price > 0 {
        let balance = db
            .basic_ref(tx.caller)
            .map_err(RpcError::from)?
            .map(|a| a.balance)
            .unwrap_or_default();
        // geth compares even a zero value: an empty account cannot pay for any gas.
        if tx.value >= balance {
            return Err(RpcError::Server(format!(
                "insufficient funds for transfer: address {} have {balance} want {}",
                tx.caller, tx.value
            )));
        }
        let mut available = balance.saturating_sub(tx.value);
        // Blob gas is paid from the same balance, at the blob fee cap (geth's estimator).
        if !tx.blob_hashes.is_empty() {
            let blob_cost = U256::from(tx.blob_hashes.len() as u64 * DATA_GAS_PER_BLOB)
                * U256::from(tx.max_fee_per_blob_gas);
            if blob_cost >= available {
                return Err(RpcError::Server(format!(
                    "insufficient funds for gas * price + value: address {} have {balance} want {}",
                    tx.caller,
                    blob_cost + tx.value
                )));
            }
            available -= blob_cost;
        }
        let allowance = available / U256::from(tx.gas_price);
        hi = hi.min(allowance.saturating_to::<u64>());
    }
    // A plain transfer to an account without code usually costs exactly 21000; when it does
    // not (an access list, say, makes the intrinsic gas higher), the search below finds it.
    if let TxKind::Call(to) = tx.kind {
        if tx.data.is_empty() && tx.authorization_list.is_empty() {
            let no_code = match db.basic_ref(to).map_err(RpcError::from)? {
                None => true,
                Some(acc) => acc
                    .code
                    .map_or(acc.code_hash == revm::primitives::KECCAK_EMPTY, |c| {
                        c.is_empty()
                    }),
            };
            if no_code && hi >= TX_GAS {
                tx.gas_limit = TX_GAS;
                if let Ok(ExecutionResult::Success { .. }) =
                    run(&mut db, &env, &precompiles, tx.clone(), &bounds)
                {
                    return Ok(TX_GAS);
                }
            }
        }
    }
    tx.gas_limit = hi;
    // As geth: a failure more gas could mend (out of gas, a limit under the intrinsic cost or
    // the EIP-7623 floor) is "gas required exceeds allowance"; any other halt is reported as
    // itself, since no gas limit would help (an oversized contract, an invalid opcode).
    let out_of_allowance = || RpcError::Server(format!("gas required exceeds allowance ({hi})"));
    let first = match attempt(&mut db, &env, &precompiles, tx.clone(), &bounds)? {
        Ok(outcome) => outcome.result,
        Err(invalid) if raises_the_limit(&invalid) => return Err(out_of_allowance()),
        Err(invalid) => return Err(refused(&invalid, tx.caller)),
    };
    let used = match &first {
        ExecutionResult::Success { .. } => first.tx_gas_used(),
        ExecutionResult::Revert { output, .. } => return Err(revert_error(output.clone())),
        ExecutionResult::Halt { reason, .. } if vm_messages::is_out_of_gas(reason) => {
            return Err(out_of_allowance())
        }
        ExecutionResult::Halt { reason, .. } => {
            let words = halt_words(&mut db, &env, &precompiles, tx, &bounds, reason)?;
            return Err(RpcError::Server(words));
        }
    };
    // The search is geth's step for step, so that both give the same estimate: an optimistic
    // first guess (what was used and refunded, plus the call stipend and the 63/64 reserve), then
    // bisection skewed to the low side, stopping within 1.5% of the answer.
    let mut lo = used.saturating_sub(1);
    let optimistic = (used + first_refund_hint(&first) + CALL_STIPEND) * 64 / 63;
    if optimistic < hi {
        tx.gas_limit = optimistic;
        if succeeds(
            attempt(&mut db, &env, &precompiles, tx.clone(), &bounds)?,
            tx.caller,
        )? {
            hi = optimistic;
        } else {
            lo = optimistic;
        }
    }
    while lo + 1 < hi {
        // Runs under the unguarded gas limit end on their own; the search stops between them.
        if Instant::now() >= bounds.deadline {
            return Err(bounds.timed_out());
        }
        if ((hi - lo) as f64 / hi as f64) < ESTIMATE_ERROR_RATIO {
            break;
        }
        let mid = ((hi + lo) / 2).min(lo.saturating_mul(2));
        tx.gas_limit = mid;
        if succeeds(
            attempt(&mut db, &env, &precompiles, tx.clone(), &bounds)?,
            tx.caller,
        )? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The gas a call frame gets for free with a value transfer; part of geth's first guess.
const CALL_STIPEND: u64 = 2_300;
/// How far above the least sufficient gas an estimate may be (geth's `estimateGasErrorRatio`).
const ESTIMATE_ERROR_RATIO: f64 = 0.015;

/// Whether a run of the search succeeded; a gas limit under the intrinsic cost or the EIP-7623
/// floor is a failure to raise the limit from, any other refusal ends the search.
fn succeeds(
    attempt: Result<Outcome, InvalidTransaction>,
    caller: alloy::primitives::Address,
) -> RpcResult<bool> {
    match attempt.map(|outcome| outcome.result) {
        Ok(ExecutionResult::Success { .. }) => Ok(true),
        Ok(_) => Ok(false),
        Err(invalid) if raises_the_limit(&invalid) => Ok(false),
        Err(invalid) => Err(refused(&invalid, caller)),
    }
}

/// A refusal a higher gas limit mends: under the intrinsic cost or the EIP-7623 floor.
fn raises_the_limit(invalid: &InvalidTransaction) -> bool {
    matches!(
        invalid,
        InvalidTransaction::CallGasCostMoreThanGasLimit { .. }
            | InvalidTransaction::GasFloorMoreThanGasLimit { .. }
    )
}

fn first_refund_hint(result: &ExecutionResult<HaltReason>) -> u64 {
    match result {
        ExecutionResult::Success { gas, .. } => gas.final_refunded(),
        _ => 0,
    }
}

/// `list` with the slots of `extra` added, sorted as the access-list tracer sorts.
fn merged(list: AccessList, extra: Vec<AccessListItem>) -> AccessList {
    use std::collections::{BTreeMap, BTreeSet};
    let mut slots: BTreeMap<Address, BTreeSet<B256>> = BTreeMap::new();
    for item in list.0.into_iter().chain(extra) {
        slots
            .entry(item.address)
            .or_default()
            .extend(item.storage_keys);
    }
    AccessList(
        slots
            .into_iter()
            .map(|(address, keys)| AccessListItem {
                address,
                storage_keys: keys.into_iter().collect(),
            })
            .collect(),
    )
}

/// Most rounds of eth_createAccessList before the list is taken as it stands.
const ACCESS_LIST_ROUNDS: usize = 8;

/// eth_createAccessList: run with an access-list tracer until the list stops changing, then
/// report it with the gas the transaction uses with it, and the failure if it fails (as geth).
pub fn create_access_list(prepared: Prepared) -> RpcResult<alloy::eips::eip2930::AccessListResult> {
    use alloy::eips::eip2930::AccessListResult;
    use revm_inspectors::access_list::AccessListInspector;
    let Prepared {
        mut db,
        env,
        mut tx,
        bounds,
        precompiles,
        ..
    } = prepared;
    // geth runs the call as an access-list transaction, which does not exist before Berlin.
    if !env.cfg_env.spec.is_enabled_in(SpecId::BERLIN) {
        return Err(type_not_supported("access list tx", tx.caller));
    }
    let mut list: AccessList = tx.access_list.clone();
    for _ in 0..ACCESS_LIST_ROUNDS {
        tx.access_list = list.clone();
        let mut inspector = AccessListInspector::new(list.clone());
        run_with(
            &mut db,
            &env,
            &precompiles,
            tx.clone(),
            &bounds,
            &mut inspector,
        )?;
        let excluded = inspector.excluded().clone();
        let mut next = inspector.into_access_list();
        // geth leaves the sender, the recipient and the precompiles out unless slots of theirs
        // are listed: slots given for them stay, where revm-inspectors drops them.
        let kept: Vec<_> = list
            .iter()
            .filter(|item| !item.storage_keys.is_empty() && excluded.contains(&item.address))
            .cloned()
            .collect();
        if !kept.is_empty() {
            next = merged(next, kept);
        }
        if next == list {
            break;
        }
        list = next;
    }
    tx.access_list = list.clone();
    // The gas is reported for the transaction carrying the list; revm charges and warms an
    // access list only for typed transactions, so a legacy request is run as an EIP-2930 one.
    if tx.tx_type == TransactionType::Legacy as u8 {
        tx.tx_type = TransactionType::Eip2930 as u8;
    }
    let result = run(&mut db, &env, &precompiles, tx.clone(), &bounds)?;
    let gas_used = U256::from(result.tx_gas_used());
    let error = match &result {
        ExecutionResult::Success { .. } => None,
        ExecutionResult::Revert { .. } => Some("execution reverted".to_owned()),
        ExecutionResult::Halt { reason, .. } => Some(halt_words(
            &mut db,
            &env,
            &precompiles,
            tx,
            &bounds,
            reason,
        )?),
    };
    Ok(AccessListResult {
        access_list: list,
        gas_used,
        error,
    })
}
