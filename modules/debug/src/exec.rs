//! Re-executing a stored block to trace its transactions, as geth's `traceBlock` /
//! `traceTx` do.
//!
//! The block runs on the state after its parent, in its own EVM environment (the chain spec's
//! `evm_env` of its header, every check on, as when it was imported). The pre-block system calls
//! (EIP-2935 parent hash, EIP-4788 beacon root) are applied first, untraced; then every
//! transaction in order, each in a fresh EVM with its own inspector, its state changes
//! committed before the next one runs. The trace of a transaction is built from the state
//! before it (the prestate tracer needs it): transact, build, then commit. Transactions before
//! the one asked for by `debug_traceTransaction` run without an inspector.
//!
//! A [`Guard`] beside the tracer stops the transaction at the request's deadline and counts
//! what the tracer's own byte budget does not see (one struct log per opcode, one frame per
//! call) against `RpcLimits::max_vm_trace_bytes`, shared by all transactions of a request.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use alloy::{
    primitives::U256,
    rpc::types::{
        trace::geth::{
            CallFrame, CallLogFrame, GethDebugTracerType, GethDebugTracingCallOptions,
            GethDebugTracingOptions, GethTrace, StructLog, TraceResult,
        },
        Bundle, TransactionRequest,
    },
};
use alloy_evm::overrides::apply_block_overrides;
use alloy_evm::{EthEvmFactory, Evm, EvmFactory, FromRecoveredTx};
use revm::{
    context::TxEnv,
    context_interface::result::{EVMError, ResultAndState},
    DatabaseCommit,
};
use revm_inspectors::tracing::{
    DebugInspector, TraceLimitBehavior, TraceLimits, TracingInspector, TracingInspectorConfig,
    TransactionContext,
};
use simnode_api::{
    call,
    guard::{Abort, Guard},
    replay, ModuleContext, RpcError, RpcResult, StateError, StateRef, StoredBlock,
};

/// What one tracing request may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub deadline: Instant,
    /// The deadline's length, for the -32016 message.
    pub timeout_ms: u64,
    /// Whether `deadline` is a traced transaction's own (the tracer option `timeout`) rather
    /// than the request's: geth answers its end with -32000 "execution timeout".
    pub tracer_timeout: bool,
    /// How long each traced transaction or call may take (the tracer option `timeout`, which
    /// geth applies per transaction), within the request's deadline.
    pub per_tx: Duration,
    /// Most bytes of trace the request may record.
    pub max_bytes: usize,
}

impl Budget {
    /// The budget of one transaction or call traced from now: its own `per_tx`, or what is
    /// left of the request's deadline when that comes first.
    fn for_tx(&self) -> Budget {
        let own = Instant::now() + self.per_tx;
        if own < self.deadline {
            Budget {
                deadline: own,
                tracer_timeout: true,
                ..*self
            }
        } else {
            *self
        }
    }

    pub(crate) fn timed_out(&self) -> RpcError {
        if self.tracer_timeout {
            RpcError::Server("execution timeout".into())
        } else {
            RpcError::Timeout(self.timeout_ms)
        }
    }

    fn too_large(&self) -> RpcError {
        RpcError::LimitExceeded(format!(
            "trace too large: the request's traces exceed {} bytes",
            self.max_bytes
        ))
    }
}

/// Traces the transactions of `block` (which is not the genesis block): all of them, or only
/// the one at `only` (the ones before it run untraced, the ones after it not at all).
pub(crate) fn trace_block(
    ctx: &ModuleContext,
    block: &StoredBlock,
    opts: &GethDebugTracingOptions,
    budget: Budget,
    only: Option<usize>,
) -> RpcResult<Vec<TraceResult>> {
    // A tracer that cannot be built fails the request before any work is done.
    let numbers_logs = matches!(
        tracer(opts, budget.max_bytes)?,
        DebugInspector::CallTracer(..) | DebugInspector::Mux(..)
    );

    let env = ctx.spec.evm_env(&block.header);
    let factory = EthEvmFactory::default();
    // With `only`, the transactions before it run untraced.
    let first = only.unwrap_or(0);
    let mut db =
        replay::state_before_tx(ctx, block, first, budget.deadline, || budget.timed_out())?;

    let last = only.unwrap_or(block.body.transactions.len().saturating_sub(1));
    // The block's logs before the first traced transaction, from the receipts of the ones that
    // ran untraced: callTracer numbers logs within the block. Other tracers need no receipts.
    let mut logs_before: u64 = if numbers_logs && first > 0 {
        let receipts = ctx.chain.receipts(block.number())?;
        receipts.map_or(0, |receipts| {
            receipts
                .iter()
                .take(first)
                .map(|r| r.logs().len() as u64)
                .sum()
        })
    } else {
        0
    };
    let mut bytes = 0usize;
    let mut results = Vec::new();
    for (index, (tx, sender)) in block
        .body
        .transactions
        .iter()
        .zip(&block.senders)
        .enumerate()
        .take(last + 1)
        .skip(first)
    {
        if Instant::now() >= budget.deadline {
            return Err(budget.timed_out());
        }
        let tx_env = TxEnv::from_recovered_tx(tx, *sender);
        let tx_hash = *tx.tx_hash();

        let tx_budget = budget.for_tx();
        let mut inspector = tracer(opts, budget.max_bytes.saturating_sub(bytes))?;
        let mut guard = guard_for(
            &inspector,
            opts,
            tx_budget.deadline,
            bytes,
            budget.max_bytes,
        );
        let res = factory
            .create_evm_with_inspector(&mut db, env.clone(), (&mut inspector, &mut guard))
            .transact(tx_env.clone());
        let (recorded, full) = recorded_bytes(&inspector);
        let res = settle(res, &guard, full, &tx_budget, index)?;
        bytes = guard.bytes.saturating_add(recorded);
        if bytes > budget.max_bytes {
            return Err(budget.too_large());
        }
        let context = TransactionContext::default()
            .with_block_hash(block.hash())
            .with_tx_index(index)
            .with_tx_hash(tx_hash);
        let numbers = kept_log_numbers(&inspector);
        let mut trace: GethTrace = inspector
            .get_result(Some(context), &tx_env, &env.block_env, &res, &mut &db)
            .map_err(|err| RpcError::Internal(format!("building the trace: {err}")))?;
        as_geth_shows_it(&mut trace, opts);
        number_logs_from(&mut trace, logs_before, numbers.as_ref());
        logs_before += res.result.logs().len() as u64;
        db.commit(res.state);
        results.push(TraceResult::Success {
            result: trace,
            tx_hash: Some(tx_hash),
        });
    }
    Ok(results)
}

/// Traces a transaction request (`debug_traceCall`) on the state after block `number`, or with
/// `opts.tx_index` before that transaction of the block, prepared as eth_call prepares it
/// (gas cap, no fee checks, state and block overrides).
pub(crate) fn trace_call(
    ctx: &ModuleContext,
    number: u64,
    request: TransactionRequest,
    opts: GethDebugTracingCallOptions,
    budget: Budget,
) -> RpcResult<GethTrace> {
    tracer(&opts.tracing_options, budget.max_bytes)?;
    let header = ctx.chain.header(number)?.ok_or(RpcError::HeaderNotFound)?;
    let state: StateRef = match opts.tx_index {
        None => ctx.chain.state_at(number)?,
        Some(index) => {
            let block = ctx.chain.block(number)?.ok_or(RpcError::HeaderNotFound)?;
            let index = usize::try_from(index).unwrap_or(usize::MAX);
            // geth's words (`stateAtTransaction`).
            if number == 0 {
                return Err(RpcError::Server("no transaction in genesis".into()));
            }
            if index >= block.body.transactions.len() {
                return Err(RpcError::Server(format!(
                    "transaction index {index} out of range for block {}",
                    block.hash()
                )));
            }
            Box::new(replay::state_before_tx(
                ctx,
                &block,
                index,
                budget.deadline,
                || budget.timed_out(),
            )?)
        }
    };
    let bounds = call::Bounds::starting_now(&ctx.limits);
    let call::Prepared {
        mut db,
        env,
        tx,
        precompiles,
        ..
    } = call::prepare(
        &ctx.spec,
        &header,
        state,
        request,
        opts.state_overrides,
        opts.block_overrides,
        bounds,
    )?;
    let traced = trace_one(
        &mut db,
        &env,
        &precompiles,
        tx,
        &opts.tracing_options,
        budget,
        0,
        call::CallRules::Geth,
    )?;
    Ok(traced.trace)
}

/// One call traced on `db`: its trace, the state it leaves (not yet committed) and the trace
/// bytes the request has used with it.
struct Traced {
    trace: GethTrace,
    state: revm::state::EvmState,
    bytes: usize,
}

/// Traces `tx` on `db` in `env` with the tracer `opts` names, `bytes` of the request's trace
/// budget already used by calls before it.
fn trace_one(
    db: &mut call::CallDb,
    env: &alloy_evm::EvmEnv,
    precompiles: &call::PrecompileEdits,
    tx: TxEnv,
    opts: &GethDebugTracingOptions,
    budget: Budget,
    bytes: usize,
    rules: call::CallRules,
) -> RpcResult<Traced> {
    let budget = budget.for_tx();
    let mut inspector = tracer(opts, budget.max_bytes.saturating_sub(bytes))?;
    let mut guard = guard_for(&inspector, opts, budget.deadline, bytes, budget.max_bytes);
    let caller = tx.caller;
    let mut evm = EthEvmFactory::default().create_evm_with_inspector(
        &mut *db,
        env.clone(),
        (&mut inspector, &mut guard),
    );
    precompiles.apply(evm.precompiles_mut());
    let res = evm.transact(tx.clone());
    drop(evm);
    let (recorded, full) = recorded_bytes(&inspector);
    let res = res.map_err(|err| match (guard.abort, full) {
        (Some(Abort::Deadline), _) => budget.timed_out(),
        (Some(Abort::TraceTooLarge), _) | (None, true) => budget.too_large(),
        // The request itself cannot run (funds, fees, ...): geth's wording, as eth_call.
        (None, false) => match (call::transaction_error(err, caller), rules) {
            // geth's traceTx wraps what stops the message from running.
            (RpcError::Server(words), call::CallRules::Geth) => {
                RpcError::Server(format!("tracing failed: {words}"))
            }
            (other, _) => other,
        },
    })?;
    let bytes = guard.bytes.saturating_add(recorded);
    if bytes > budget.max_bytes {
        return Err(budget.too_large());
    }
    let numbers = kept_log_numbers(&inspector);
    let mut trace = inspector
        .get_result(None, &tx, &env.block_env, &res, &mut &*db)
        .map_err(|err| RpcError::Internal(format!("building the trace: {err}")))?;
    as_geth_shows_it(&mut trace, opts);
    // A call's logs are numbered from 0, as on geth's fresh state for it.
    number_logs_from(&mut trace, 0, numbers.as_ref());
    Ok(Traced {
        trace,
        state: res.state,
        bytes,
    })
}

/// `debug_traceCallMany`, as reth serves it: bundles of calls on the state of canonical block
/// `number` after its first `transactions` transactions (all when `None`), each call traced
/// and then kept for the ones after it; state overrides once before the first call, a bundle's
/// block override for its calls, and each bundle one block (number + 1, time + 12 s) after the
/// one before it.
pub(crate) fn trace_call_many(
    ctx: &ModuleContext,
    number: u64,
    transactions: Option<usize>,
    bundles: Vec<Bundle>,
    opts: GethDebugTracingCallOptions,
    budget: Budget,
) -> RpcResult<Vec<Vec<GethTrace>>> {
    call::check_bundles(&bundles, ctx.limits.max_trace_calls, "debug_traceCallMany")?;
    tracer(&opts.tracing_options, budget.max_bytes)?;
    let block = ctx.chain.block(number)?.ok_or(RpcError::HeaderNotFound)?;
    let mut db = call::bundles_start(
        ctx,
        &block,
        transactions,
        opts.state_overrides,
        budget.deadline,
        || budget.timed_out(),
    )?;
    let gas_cap = ctx.limits.gas_cap;
    let mut block_env = ctx.spec.evm_env(&block.header);
    let mut bytes = 0;
    let mut answers = Vec::with_capacity(bundles.len());
    for Bundle {
        transactions,
        block_override,
    } in bundles
    {
        let mut bundle_env = block_env.clone();
        if let Some(overrides) = block_override {
            apply_block_overrides(overrides, &mut db, &mut bundle_env.block_env);
        }
        let mut traces = Vec::with_capacity(transactions.len());
        for request in transactions {
            let mut env = bundle_env.clone();
            let (tx, _) = call::call_tx(&mut env, &db, request, gas_cap, call::CallRules::Reth)?;
            let traced = trace_one(
                &mut db,
                &env,
                &call::PrecompileEdits::default(),
                tx,
                &opts.tracing_options,
                budget,
                bytes,
                call::CallRules::Reth,
            )?;
            bytes = traced.bytes;
            db.commit(traced.state);
            traces.push(traced.trace);
        }
        answers.push(traces);
        block_env.block_env.number += U256::from(1);
        block_env.block_env.timestamp += U256::from(12);
    }
    Ok(answers)
}

/// A finished trace as geth's tracers leave it: the struct logger's entries without their
/// empty fields and within `limit` bytes; the callTracer's frames without the logs of any
/// that failed or sits inside one that did.
fn as_geth_shows_it(trace: &mut GethTrace, opts: &GethDebugTracingOptions) {
    match trace {
        GethTrace::Default(frame) => {
            omit_empty(&mut frame.struct_logs);
            if let Some(limit) = opts.config.limit.filter(|l| *l != 0) {
                keep_within(&mut frame.struct_logs, limit);
            }
        }
        GethTrace::CallTracer(frame) => drop_failed_logs(frame, false),
        GethTrace::MuxTracer(mux) => {
            for inner in mux.0.values_mut() {
                if let GethTrace::CallTracer(frame) = inner {
                    drop_failed_logs(frame, false);
                }
            }
        }
        _ => {}
    }
}

/// geth's struct logger stops taking entries once those taken exceed `limit` bytes of JSON.
fn keep_within(logs: &mut Vec<StructLog>, limit: u64) {
    let mut size = 0u64;
    let kept = logs
        .iter()
        .take_while(|log| {
            let room = size <= limit;
            size += serde_json::to_vec(log).map_or(0, |json| json.len() as u64);
            room
        })
        .count();
    logs.truncate(kept);
}

/// A failed frame's logs never reached a receipt, nor did those of the frames it called.
fn drop_failed_logs(frame: &mut CallFrame, parent_failed: bool) {
    let failed = parent_failed || frame.error.is_some();
    if failed {
        frame.logs.clear();
    }
    for call in &mut frame.calls {
        drop_failed_logs(call, failed);
    }
}

/// geth's struct logger leaves out what is empty (`omitempty`): a zero refund counter, empty
/// memory, storage and return data. The stack stays, empty or not, unless it is disabled.
/// For a callTracer, each recorded log's number among the logs the transaction keeps (its
/// receipt's logs), by revm-inspectors' count of emitted logs, which also counts logs of
/// frames that reverted. Read from the whole call tree, so that a log keeps its number when
/// `onlyTopCall` hides the nested logs before it.
fn kept_log_numbers(inspector: &DebugInspector) -> Option<HashMap<u64, u64>> {
    let DebugInspector::CallTracer(tracer, _) = inspector else {
        return None;
    };
    let nodes = tracer.traces().nodes();
    // A frame's logs are kept when it and every frame above it succeeded; a parent comes
    // before its children in the arena.
    let mut kept = vec![false; nodes.len()];
    let mut emitted: Vec<(u64, bool)> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        kept[i] = !node.trace.is_error() && node.parent.is_none_or(|p| kept.get(p) == Some(&true));
        emitted.extend(node.logs.iter().map(|log| (log.index, kept[i])));
    }
    emitted.sort_unstable();
    Some(
        emitted
            .into_iter()
            .filter(|(_, kept)| *kept)
            .enumerate()
            .map(|(n, (index, _))| (index, n as u64))
            .collect(),
    )
}

/// geth numbers a callTracer log (`index`) by its place among the block's logs, the receipt's
/// `logIndex`: log `first + n` for the transaction's `n`th kept log. `numbers` maps
/// revm-inspectors' emission count to `n` ([`kept_log_numbers`]); without it (a callTracer
/// inside muxTracer) the logs shown are taken to be all the kept ones, in emission order.
fn number_logs_from(trace: &mut GethTrace, first: u64, numbers: Option<&HashMap<u64, u64>>) {
    fn collect<'a>(frame: &'a mut CallFrame, out: &mut Vec<&'a mut CallLogFrame>) {
        out.extend(frame.logs.iter_mut());
        for call in &mut frame.calls {
            collect(call, out);
        }
    }
    match trace {
        GethTrace::CallTracer(frame) => {
            let mut logs = Vec::new();
            collect(frame, &mut logs);
            logs.sort_by_key(|log| log.index.unwrap_or(u64::MAX));
            for (rank, log) in logs.into_iter().enumerate() {
                let n = match (numbers, log.index) {
                    (Some(numbers), Some(emitted)) => {
                        numbers.get(&emitted).copied().unwrap_or(rank as u64)
                    }
                    _ => rank as u64,
                };
                log.index = Some(first + n);
            }
        }
        GethTrace::MuxTracer(mux) => {
            for inner in mux.0.values_mut() {
                number_logs_from(inner, first, None);
            }
        }
        _ => {}
    }
}

/// geth's error of a struct log, by the text revm-inspectors gives it (the Debug form of the
/// step's `Option<InstructionResult>`, e.g. `Some(OutOfGas)`): `Some(words)`, the callTracer's;
/// `Some(None)` when geth's logger shows no error on that step. geth logs a step before running
/// it, with the error of what it checks first (the stack, the gas); what fails while the
/// instruction runs (an undefined opcode, a write in a static call, a bad jump, return data out
/// of bounds) reaches its tracers as a fault, which the struct logger does not show. `None`
/// for a text it does not know.
fn struct_log_error(revm_text: &str) -> Option<Option<&'static str>> {
    use revm::interpreter::{InstructionResult as R, SuccessOrHalt};
    const WHILE_RUNNING: [R; 7] = [
        R::OpcodeNotFound,
        R::InvalidFEOpcode,
        R::NotActivated,
        R::CallNotAllowedInsideStatic,
        R::StateChangeDuringStaticCall,
        R::InvalidJump,
        R::OutOfOffset,
    ];
    static WORDS: std::sync::LazyLock<HashMap<String, Option<String>>> =
        std::sync::LazyLock::new(|| {
            [
                R::OutOfGas,
                R::MemoryOOG,
                R::MemoryLimitOOG,
                R::PrecompileOOG,
                R::InvalidOperandOOG,
                R::ReentrancySentryOOG,
                R::OpcodeNotFound,
                R::CallNotAllowedInsideStatic,
                R::StateChangeDuringStaticCall,
                R::InvalidFEOpcode,
                R::InvalidJump,
                R::NotActivated,
                R::StackUnderflow,
                R::StackOverflow,
                R::OutOfOffset,
                R::CreateCollision,
                R::OverflowPayment,
                R::PrecompileError,
                R::NonceOverflow,
                R::CreateContractSizeLimit,
                R::CreateContractStartingWithEF,
                R::CreateInitCodeSizeLimit,
                R::CallTooDeep,
                R::OutOfFunds,
            ]
            .into_iter()
            .filter_map(|result| {
                let words = match SuccessOrHalt::<revm::context::result::HaltReason>::from(result) {
                    _ if WHILE_RUNNING.contains(&result) => None,
                    // geth's SSTORE gas check says why it ran out.
                    _ if result == R::ReentrancySentryOOG => {
                        Some("out of gas: not enough gas for reentrancy sentry".to_owned())
                    }
                    SuccessOrHalt::Halt(reason) => {
                        Some(simnode_api::vm_messages::halt_message(&reason))
                    }
                    _ => return None,
                };
                Some((format!("{:?}", Some(result)), words))
            })
            .collect()
        });
    WORDS.get(revm_text).map(Option::as_deref)
}

/// The opcode a struct log names (`op`, its mnemonic).
fn opcode_named(name: &str) -> Option<u8> {
    use revm::bytecode::opcode::OpCode;
    static BY_NAME: std::sync::LazyLock<HashMap<&'static str, u8>> =
        std::sync::LazyLock::new(|| {
            (0..=u8::MAX)
                .filter_map(|byte| OpCode::new(byte).map(|op| (op.as_str(), byte)))
                .collect()
        });
    BY_NAME.get(name).copied()
}

fn omit_empty(logs: &mut [StructLog]) {
    for log in logs {
        if let Some(words) = log.error.as_deref().and_then(struct_log_error) {
            log.error = words.map(str::to_owned);
            // geth's underflow names the stack it found and the one the opcode needs.
            if let (Some("stack underflow"), Some(stack), Some(opcode)) =
                (log.error.as_deref(), &log.stack, opcode_named(&log.op))
            {
                let last = simnode_api::vm_messages::LastInstruction {
                    opcode,
                    stack_len: stack.len(),
                };
                let reason = revm::context::result::HaltReason::StackUnderflow;
                log.error = Some(simnode_api::vm_messages::halt_words(&reason, last, None));
            }
        }
        if log.refund_counter == Some(0) {
            log.refund_counter = None;
        }
        if log.memory.as_ref().is_some_and(Vec::is_empty) {
            log.memory = None;
        }
        if log.storage.as_ref().is_some_and(|s| s.is_empty()) {
            log.storage = None;
        }
        if log.return_data.as_ref().is_some_and(|d| d.is_empty()) {
            log.return_data = None;
        }
    }
}

/// The inspector of the tracer `opts` names, its recording bounded by `max_bytes`.
fn tracer(opts: &GethDebugTracingOptions, max_bytes: usize) -> RpcResult<DebugInspector> {
    let mut inspector =
        DebugInspector::new(mux_configs_as_geth_reads_them(opts)).map_err(|err| {
            let name = match &opts.tracer {
                Some(GethDebugTracerType::BuiltInTracer(t)) => {
                    serde_json::to_value(t).map_or_else(|_| format!("{t:?}"), |v| v.to_string())
                }
                Some(GethDebugTracerType::JsTracer(code)) => format!("{code:?}"),
                None => String::new(),
            };
            RpcError::Server(format!("tracer {name}: {err}"))
        })?;
    let tracing = match &mut inspector {
        DebugInspector::CallTracer(t, _)
        | DebugInspector::PreStateTracer(t, _)
        | DebugInspector::FlatCallTracer(t)
        | DebugInspector::Erc7562Tracer(t, _)
        | DebugInspector::Default(t, _) => t,
        _ => return Ok(inspector),
    };
    let unbounded = std::mem::replace(
        tracing,
        TracingInspector::new(TracingInspectorConfig::none()),
    );
    *tracing = unbounded.with_limits(
        TraceLimits::default()
            .set_max_recorded_bytes(Some(max_bytes))
            .set_behavior(TraceLimitBehavior::Halt),
    );
    Ok(inspector)
}

/// `opts` with a muxTracer's sub-configs as revm-inspectors takes them: geth hands each
/// sub-tracer its config and the ones without options ignore it, and a `null` config is no
/// config; revm-inspectors wants none for those and one for the others.
/// The struct logger's `limit` is left out: geth counts it in bytes ([`keep_within`]), where
/// revm-inspectors counts entries.
fn mux_configs_as_geth_reads_them(opts: &GethDebugTracingOptions) -> GethDebugTracingOptions {
    use alloy::rpc::types::trace::geth::GethDebugBuiltInTracerType as T;
    let mut opts = opts.clone();
    opts.config.limit = None;
    if opts.tracer != Some(GethDebugTracerType::BuiltInTracer(T::MuxTracer)) {
        return opts;
    }
    if let Some(configs) = opts.tracer_config.0.as_object_mut() {
        for (name, config) in configs.iter_mut() {
            let takes_options = matches!(
                name.as_str(),
                "callTracer" | "prestateTracer" | "flatCallTracer" | "erc7562Tracer"
            );
            if takes_options && config.is_null() {
                *config = serde_json::Value::Object(Default::default());
            } else if !takes_options && config.as_object().is_some_and(|o| o.is_empty()) {
                *config = serde_json::Value::Null;
            }
        }
    }
    opts
}

/// The guard of a run traced by `inspector`, `bytes` of `max_bytes` already used: it counts
/// what the tracer's own budget does not see (see [`counted`]), and with the struct logger's
/// `enableMemory` each step's memory as its answer shows it (a snapshot the tracer shares
/// between steps is written out again for each).
fn guard_for(
    inspector: &DebugInspector,
    opts: &GethDebugTracingOptions,
    deadline: Instant,
    bytes: usize,
    max_bytes: usize,
) -> Guard {
    let (steps, nodes) = counted(inspector);
    let memory =
        matches!(inspector, DebugInspector::Default(..)) && opts.config.enable_memory == Some(true);
    Guard::new(deadline, bytes, max_bytes)
        .counting(
            if steps { STEP_BYTES } else { 0 },
            if nodes { NODE_BYTES } else { 0 },
        )
        .counting_memory(memory)
}

/// Whether the guard counts steps (struct logs are kept per opcode) and call frames.
fn counted(inspector: &DebugInspector) -> (bool, bool) {
    match inspector {
        DebugInspector::Default(..) | DebugInspector::Erc7562Tracer(..) => (true, true),
        DebugInspector::CallTracer(..)
        | DebugInspector::PreStateTracer(..)
        | DebugInspector::FlatCallTracer(..)
        | DebugInspector::Mux(..) => (false, true),
        _ => (false, false),
    }
}

/// Bytes the tracer's own budget counted, and whether it ran out.
fn recorded_bytes(inspector: &DebugInspector) -> (usize, bool) {
    match inspector {
        DebugInspector::CallTracer(t, _)
        | DebugInspector::PreStateTracer(t, _)
        | DebugInspector::FlatCallTracer(t)
        | DebugInspector::Erc7562Tracer(t, _)
        | DebugInspector::Default(t, _) => (t.recorded_bytes(), t.limit_exceeded()),
        _ => (0, false),
    }
}

fn settle(
    res: Result<ResultAndState, EVMError<StateError>>,
    guard: &Guard,
    tracer_full: bool,
    budget: &Budget,
    index: usize,
) -> RpcResult<ResultAndState> {
    res.map_err(|err| match (guard.abort, tracer_full) {
        (Some(Abort::Deadline), _) => budget.timed_out(),
        (Some(Abort::TraceTooLarge), _) | (None, true) => budget.too_large(),
        (None, false) => replay::failed_tx(err, index),
    })
}

/// Bytes one struct log costs beyond its byte buffers (the log and its stack).
const STEP_BYTES: usize = 256;
/// Bytes one call frame costs beyond its input and output.
const NODE_BYTES: usize = 512;

#[cfg(test)]
mod budget_tests {
    use super::*;

    fn budget(left: Duration, per_tx: Duration) -> Budget {
        Budget {
            deadline: Instant::now() + left,
            timeout_ms: left.as_millis() as u64,
            tracer_timeout: false,
            per_tx,
            max_bytes: 0,
        }
    }

    #[test]
    fn each_transaction_gets_its_own_timeout_within_the_request() {
        let request = budget(Duration::from_secs(60), Duration::from_millis(250));
        let tx = request.for_tx();
        assert!(tx.deadline < request.deadline);
        assert!(tx.deadline <= Instant::now() + Duration::from_millis(250));
        assert!(tx.tracer_timeout);
        assert_eq!(tx.timed_out().code(), -32000);
        // A later transaction starts its own count.
        std::thread::sleep(Duration::from_millis(5));
        assert!(request.for_tx().deadline > tx.deadline);
        // Near the request's end, the request's deadline (and its message) comes first.
        let ending = budget(Duration::from_millis(100), Duration::from_secs(60));
        let tx = ending.for_tx();
        assert_eq!((tx.deadline, tx.tracer_timeout), (ending.deadline, false));
        assert_eq!(tx.timed_out().code(), -32016);
    }
}
