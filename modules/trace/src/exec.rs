//! Running the calls of one `trace_callMany` request, in order, on top of one block's state.
//!
//! The EVM is set up as reth sets it up for trace calls (`prepare_call_env`):
//! - the block environment is that of the named block itself (its number, timestamp, base fee,
//!   coinbase, gas limit), and the state is the state after that block;
//! - base-fee check, nonce check and EIP-3607 (sender has code) are off; the sender's nonce
//!   still goes up by one per call, and a creation takes the address of the sender's current
//!   nonce, as a transaction would;
//! - the block gas limit and EIP-7825's per-transaction cap do not apply: the RPC gas cap does;
//! - the balance check stays on: the sender must afford `value` (and `gas * price` when a
//!   price is given);
//! - when the call gives no gas price, the block's base fee is taken as zero (so `BASEFEE` reads
//!   0, as in geth and reth); with a price, the block's base fee is charged and the rest of the
//!   price goes to the coinbase;
//! - gas left out defaults to the RPC gas cap; with a gas price, to what the sender can pay for
//!   (balance minus value, divided by the price), capped by the block gas limit and the RPC gas
//!   cap (reth caps by the block gas limit only; it lowers an explicit gas above the RPC cap
//!   to the cap, so letting a defaulted one pass it would be inconsistent).
//!
//! Each call's state changes are committed before the next call runs, whatever its trace
//! types; its stateDiff is built against the state before it (transact, build, then commit).

use std::time::Instant;

use alloy::consensus::transaction::SignerRecoverable;
use alloy::{
    primitives::{map::HashSet, Address},
    rpc::types::{
        state::StateOverride,
        trace::parity::{TraceResults, TraceType},
        BlockOverrides, TransactionRequest,
    },
};
use alloy_evm::{
    eth::EthEvmContext,
    overrides::{apply_block_overrides, apply_state_overrides},
    rpc::TryIntoTxEnv,
    EthEvmFactory, Evm, EvmEnv, EvmFactory, FromRecoveredTx,
};
use revm::{
    context::TxEnv,
    context_interface::result::{EVMError, InvalidTransaction, ResultAndState},
    database::CacheDB,
    Database, DatabaseCommit, Inspector,
};
use revm_inspectors::tracing::{
    types::{CallTraceNode, CallTraceStep},
    TraceLimitBehavior, TraceLimits as RecordLimits, TracingInspector, TracingInspectorConfig,
};
use simnode_api::{
    guard::{Abort, Guard},
    vm_messages, BlockParam, ModuleContext, RpcError, RpcResult, StateDb, StateError,
};

use crate::{params::TraceCall, TraceLimits};

/// Bytes one recorded vmTrace step costs beyond its byte buffers: the step itself plus its
/// pushed stack items and the rendered instruction.
const STEP_BYTES: usize = std::mem::size_of::<CallTraceStep>() + 64;
/// Bytes one call node costs beyond its input and output.
const NODE_BYTES: usize = std::mem::size_of::<CallTraceNode>();

type Db = CacheDB<StateDb>;

/// How a block parameter is named in "block not found" errors (reth's words).
pub(crate) fn describe_block(block: &BlockParam) -> String {
    match block {
        BlockParam::Number(n) => format!("{n:#x}"),
        BlockParam::Tag(tag) => tag.to_string(),
        BlockParam::Hash {
            hash,
            require_canonical: false,
        } => format!("hash {hash}"),
        BlockParam::Hash {
            hash,
            require_canonical: true,
        } => format!("canonical hash {hash}"),
    }
}

/// reth's "block not found: 0x.." for a block number past the head.
pub(crate) fn block_not_found(number: u64) -> RpcError {
    RpcError::ResourceNotFound(format!(
        "block not found: {}",
        describe_block(&BlockParam::Number(number))
    ))
}

/// The canonical block number `block` names, resolved as reth does: a `safe` or `finalized`
/// tag not set yet is -39001 "unknown block" (geth's modules answer -32000).
pub(crate) fn resolve_block(ctx: &ModuleContext, block: &BlockParam) -> RpcResult<Option<u64>> {
    ctx.chain.resolve(block).map_err(|err| match err {
        RpcError::TagNotSet(_) => RpcError::UnknownBlock,
        other => other,
    })
}

/// State and block overrides of a `trace_call`, applied before its call runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub state: Option<StateOverride>,
    pub block: Option<Box<BlockOverrides>>,
}

/// Runs `calls` on top of the state after `block` (with `overrides` applied first); blocking
/// (call it off the async runtime).
pub(crate) fn trace_call_many(
    ctx: &ModuleContext,
    limits: &TraceLimits,
    calls: Vec<TraceCall>,
    block: BlockParam,
    overrides: Overrides,
    deadline: Instant,
) -> RpcResult<Vec<TraceResults>> {
    let not_found =
        || RpcError::ResourceNotFound(format!("block not found: {}", describe_block(&block)));
    let number = resolve_block(ctx, &block)?.ok_or_else(not_found)?;
    let header = ctx.chain.header(number)?.ok_or_else(not_found)?;

    let mut env = ctx.spec.evm_env(&header);
    env.cfg_env.disable_base_fee = true;
    env.cfg_env.disable_nonce_check = true;
    env.cfg_env.disable_eip3607 = true;
    env.cfg_env.disable_block_gas_limit = true;
    env.cfg_env.tx_gas_limit_cap = Some(u64::MAX);

    let mut run = Run {
        limits,
        deadline,
        db: CacheDB::new(StateDb(ctx.chain.state_at(number)?)),
        gas_used: 0,
        trace_bytes: 0,
    };
    if let Some(block_overrides) = overrides.block {
        apply_block_overrides(*block_overrides, &mut run.db, &mut env.block_env);
    }
    if let Some(state_overrides) = overrides.state {
        simnode_api::call::refuse_precompile_moves(&state_overrides, "trace_call")?;
        apply_state_overrides(state_overrides, &mut run.db)
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
    }

    let total = calls.len();
    let mut results = Vec::with_capacity(total);
    for (index, call) in calls.into_iter().enumerate() {
        if Instant::now() >= deadline {
            return Err(timeout(limits));
        }
        let traced = run
            .call(&env, call, index + 1 < total)
            .map_err(|err| with_call_index(err, index, total))?;
        results.push(traced);
    }
    Ok(results)
}

/// Names the failing call in the error message when the request has more than one.
fn with_call_index(err: RpcError, index: usize, total: usize) -> RpcError {
    if total < 2 {
        return err;
    }
    match err {
        RpcError::Server(msg) => RpcError::Server(format!("call {index}: {msg}")),
        RpcError::TransactionRejected(msg) => {
            RpcError::TransactionRejected(format!("call {index}: {msg}"))
        }
        RpcError::InvalidParams(msg) => RpcError::InvalidParams(format!("call {index}: {msg}")),
        RpcError::LimitExceeded(msg) => RpcError::LimitExceeded(format!("call {index}: {msg}")),
        other => other,
    }
}

pub(crate) fn timeout(limits: &TraceLimits) -> RpcError {
    RpcError::Timeout(limits.timeout.as_millis().try_into().unwrap_or(u64::MAX))
}

/// State of one request across its calls.
struct Run<'a> {
    limits: &'a TraceLimits,
    deadline: Instant,
    db: Db,
    /// Gas used by the calls so far, against `limits.max_total_gas`.
    gas_used: u64,
    /// Trace bytes recorded by the calls so far, against `limits.max_trace_bytes`.
    trace_bytes: usize,
}

impl Run<'_> {
    fn call(&mut self, env: &EvmEnv, call: TraceCall, more: bool) -> RpcResult<TraceResults> {
        let TraceCall {
            request,
            trace_types,
        } = call;
        let tx = self.tx_env(env, request)?;
        let caller = tx.caller;

        let mut env = env.clone();
        if tx.gas_price == 0 {
            env.block_env.basefee = 0;
        }

        let results = if trace_types.is_empty() {
            let mut guard =
                Guard::new(self.deadline, self.trace_bytes, self.limits.max_trace_bytes);
            let res = transact(&mut self.db, env, tx, &mut guard);
            let res = self.settle(res, caller, &guard)?;
            let output = res.result.output().cloned().unwrap_or_default();
            self.finish(res, more);
            TraceResults {
                output,
                trace: Vec::new(),
                vm_trace: None,
                state_diff: None,
            }
        } else {
            let mut budget = Budget {
                deadline: self.deadline,
                bytes: self.trace_bytes,
                max_bytes: self.limits.max_trace_bytes,
            };
            let run = run_trace_types(&mut self.db, env, tx, &trace_types, &mut budget);
            self.trace_bytes = budget.bytes;
            let (traced, res) = run.map_err(|stopped| match stopped {
                Stopped::Deadline => timeout(self.limits),
                Stopped::TooLarge => too_large(self.limits),
                Stopped::Evm(err) => evm_error(err, caller),
            })?;
            self.gas_used = self.gas_used.saturating_add(res.result.tx_gas_used());
            self.finish(res, more);
            traced
        };
        Ok(results)
    }

    /// Turns the outcome of an untraced call into a result or the request's error.
    fn settle(
        &mut self,
        res: Result<ResultAndState, EVMError<StateError>>,
        caller: Address,
        guard: &Guard,
    ) -> RpcResult<ResultAndState> {
        match res {
            Ok(res) => {
                self.gas_used = self.gas_used.saturating_add(res.result.tx_gas_used());
                Ok(res)
            }
            Err(err) => Err(match guard.abort {
                Some(Abort::Deadline) => timeout(self.limits),
                Some(Abort::TraceTooLarge) => too_large(self.limits),
                None => evm_error(err, caller),
            }),
        }
    }

    fn finish(&mut self, res: ResultAndState, more: bool) {
        if more {
            self.db.commit(res.state);
        }
    }

    /// The transaction environment of a call, with the defaults described in the module docs.
    fn tx_env(&mut self, env: &EvmEnv, request: TransactionRequest) -> RpcResult<TxEnv> {
        let gas_cap = self.limits.gas_cap;
        let budget = self.limits.max_total_gas.saturating_sub(self.gas_used);
        // An explicit gas above the RPC cap runs at the cap, as reth runs it.
        let explicit_gas = request.gas.map(|gas| gas.min(gas_cap));
        if let Some(gas) = explicit_gas {
            if gas > budget {
                return Err(RpcError::LimitExceeded(format!(
                    "gas {gas} exceeds what is left of the request's gas budget ({budget} of {})",
                    self.limits.max_total_gas
                )));
            }
        }
        if budget == 0 {
            return Err(RpcError::LimitExceeded(format!(
                "the request's gas budget of {} is used up",
                self.limits.max_total_gas
            )));
        }
        let mut tx: TxEnv = request.try_into_tx_env(env).map_err(|err| match err {
            alloy_evm::rpc::EthTxEnvError::Input(e) => RpcError::InvalidParams(e.to_string()),
            alloy_evm::rpc::EthTxEnvError::CallFees(e) => fee_fields_error(e),
        })?;
        tx.gas_limit = match explicit_gas {
            Some(gas) => gas,
            None if tx.gas_price > 0 => {
                let balance = self
                    .db
                    .basic(tx.caller)
                    .map_err(RpcError::from)?
                    .map(|acc| acc.balance)
                    .unwrap_or_default();
                simnode_api::call::gas_allowance(balance, &tx)?
                    .min(env.block_env.gas_limit)
                    .min(gas_cap)
                    .min(budget)
            }
            None => gas_cap.min(budget),
        };
        Ok(tx)
    }
}

/// The deadline and the trace bytes of one request, shared by its transactions.
pub(crate) struct Budget {
    pub deadline: Instant,
    /// Bytes of trace recorded so far.
    pub bytes: usize,
    pub max_bytes: usize,
}

impl Budget {
    /// A request's budget: nothing recorded yet.
    pub fn new(limits: &TraceLimits, deadline: Instant) -> Self {
        Self {
            deadline,
            bytes: 0,
            max_bytes: limits.max_trace_bytes,
        }
    }
}

/// Why a traced run did not finish.
pub(crate) enum Stopped {
    Deadline,
    TooLarge,
    /// The EVM refused the transaction (or the state could not be read).
    Evm(EVMError<StateError>),
}

/// Runs `tx` on `db` under a tracer set up by `config` (`vm_steps`: it records every opcode).
/// The state changes are returned, not committed, beside the tracer to build traces from; the
/// bytes the trace recorded are added to `budget`.
pub(crate) fn run_traced(
    db: &mut Db,
    env: EvmEnv,
    tx: TxEnv,
    config: TracingInspectorConfig,
    budget: &mut Budget,
) -> Result<(TracingInspector, ResultAndState), Stopped> {
    let mut guard = Guard::new(budget.deadline, budget.bytes, budget.max_bytes)
        .counting(if config.record_steps { STEP_BYTES } else { 0 }, NODE_BYTES);
    // The tracer's own budget counts the byte buffers it copies; the guard the rest.
    let left = budget.max_bytes.saturating_sub(budget.bytes);
    let mut tracer = TracingInspector::new(config).with_limits(
        RecordLimits::default()
            .set_max_recorded_bytes(Some(left))
            .set_behavior(TraceLimitBehavior::Halt),
    );
    let res = transact(db, env, tx, (&mut tracer, &mut guard));
    let res = match (res, guard.abort, tracer.limit_exceeded()) {
        (Ok(res), ..) => res,
        (Err(_), Some(Abort::Deadline), _) => return Err(Stopped::Deadline),
        (Err(_), Some(Abort::TraceTooLarge), _) | (Err(_), None, true) => {
            return Err(Stopped::TooLarge)
        }
        (Err(err), None, false) => return Err(Stopped::Evm(err)),
    };
    budget.bytes = guard.bytes.saturating_add(tracer.recorded_bytes());
    if budget.bytes > budget.max_bytes {
        return Err(Stopped::TooLarge);
    }
    Ok((tracer, res))
}

/// [`run_traced`] for `trace_types`, with the traces built against `db`, the state before the
/// transaction (with no trace types, only the output is reported).
pub(crate) fn run_trace_types(
    db: &mut Db,
    env: EvmEnv,
    tx: TxEnv,
    trace_types: &HashSet<TraceType>,
    budget: &mut Budget,
) -> Result<(TraceResults, ResultAndState), Stopped> {
    let config = TracingInspectorConfig::from_parity_config(trace_types);
    let (tracer, res) = run_traced(db, env, tx, config, budget)?;
    let traced = tracer
        .into_parity_builder()
        .into_trace_results_with_state(&res, trace_types, &*db)
        .map_err(|err| Stopped::Evm(EVMError::Database(err)))?;
    Ok((traced, res))
}

/// `trace_rawTransaction`: a signed transaction run on the state after `block`, in that block's
/// own EVM environment with every check on (nonce, fees, balance), as reth runs it. Nothing is
/// stored.
pub(crate) fn trace_raw(
    ctx: &ModuleContext,
    limits: &TraceLimits,
    raw: &[u8],
    trace_types: &HashSet<TraceType>,
    block: BlockParam,
    deadline: Instant,
) -> RpcResult<TraceResults> {
    let tx = simnode_api::raw_tx::decode(raw)?;
    let sender = tx
        .recover_signer()
        .map_err(|_| RpcError::invalid_params("invalid transaction: bad signature"))?;
    let not_found =
        || RpcError::ResourceNotFound(format!("block not found: {}", describe_block(&block)));
    let number = resolve_block(ctx, &block)?.ok_or_else(not_found)?;
    let header = ctx.chain.header(number)?.ok_or_else(not_found)?;
    let mut db = CacheDB::new(StateDb(ctx.chain.state_at(number)?));
    let mut budget = Budget::new(limits, deadline);
    let tx_env = TxEnv::from_recovered_tx(&tx, sender);
    let (traced, _) = run_trace_types(
        &mut db,
        ctx.spec.evm_env(&header),
        tx_env,
        trace_types,
        &mut budget,
    )
    .map_err(|stopped| match stopped {
        Stopped::Deadline => timeout(limits),
        Stopped::TooLarge => too_large(limits),
        Stopped::Evm(err) => evm_error(err, sender),
    })?;
    Ok(traced)
}

/// Fee fields that cannot make a transaction, with reth's codes: two fee styles at once is a
/// malformed request (-32602), a fee cap below the base fee -32000, the rest -32003.
fn fee_fields_error(err: alloy_evm::rpc::CallFeesError) -> RpcError {
    use alloy_evm::rpc::CallFeesError;
    let message = err.to_string();
    match err {
        CallFeesError::ConflictingFeeFieldsInRequest => RpcError::InvalidParams(message),
        CallFeesError::FeeCapTooLow => RpcError::Server(message),
        _ => RpcError::TransactionRejected(message),
    }
}

pub(crate) fn too_large(limits: &TraceLimits) -> RpcError {
    RpcError::LimitExceeded(format!(
        "trace too large: the request's traces exceed {} bytes",
        limits.max_trace_bytes
    ))
}

/// The codes follow reth (the reference for trace_*): -32000 for what is wrong with the call's
/// own gas, nonce, chain id or fee cap, -32003 for a transaction the state or block rejects.
fn evm_error(err: EVMError<StateError>, caller: Address) -> RpcError {
    match err {
        EVMError::Transaction(err) => {
            let message = vm_messages::invalid_tx_message(&err, caller);
            match err {
                InvalidTransaction::InvalidChainId
                | InvalidTransaction::MissingChainId
                | InvalidTransaction::GasPriceLessThanBasefee
                | InvalidTransaction::CallerGasLimitMoreThanBlock
                | InvalidTransaction::TxGasLimitGreaterThanCap { .. }
                | InvalidTransaction::CallGasCostMoreThanGasLimit { .. }
                | InvalidTransaction::GasFloorMoreThanGasLimit { .. }
                | InvalidTransaction::NonceTooHigh { .. }
                | InvalidTransaction::NonceTooLow { .. } => RpcError::Server(message),
                InvalidTransaction::Str(_) | InvalidTransaction::Eip7873MissingTarget => {
                    RpcError::internal(message)
                }
                _ => RpcError::TransactionRejected(message),
            }
        }
        EVMError::Header(err) => RpcError::internal(err),
        EVMError::Database(err) => RpcError::from(err),
        other => RpcError::internal(other),
    }
}

fn transact<'a, I>(
    db: &'a mut Db,
    env: EvmEnv,
    tx: TxEnv,
    inspector: I,
) -> Result<ResultAndState, EVMError<StateError>>
where
    I: Inspector<EthEvmContext<&'a mut Db>>,
{
    let mut evm = EthEvmFactory::default().create_evm_with_inspector(db, env, inspector);
    evm.transact(tx)
}
