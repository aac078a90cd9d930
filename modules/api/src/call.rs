//! Preparing a transaction request to run on the state after a block, the way eth_call does:
//! geth's relaxations (no base-fee, nonce or sender-code checks, free when no fee is named),
//! the RPC gas cap, state and block overrides. Shared by the modules that run calls (eth_call
//! and eth_estimateGas, debug_traceCall).

use std::time::{Duration, Instant};

use alloy::{
    consensus::Header,
    primitives::{Address, U256},
    rpc::types::{state::StateOverride, BlockOverrides, TransactionRequest},
};
use alloy_evm::{
    overrides::{apply_block_overrides, apply_state_overrides},
    precompiles::PrecompilesMap,
    rpc::TryIntoTxEnv,
    EvmEnv,
};
use revm::{
    context::TxEnv,
    context_interface::result::EVMError,
    database::CacheDB,
    precompile::{PrecompileSpecId, Precompiles},
    primitives::hardfork::SpecId,
    DatabaseRef,
};

use crate::{vm_messages, ChainSpec, RpcError, RpcLimits, RpcResult, StateError, StateRef};

pub type CallDb = CacheDB<StateRef>;

/// Where the bundles of `eth_callMany` / `debug_traceCallMany` run (erigon's
/// `simulationContext`): a block (default `latest`) and how many of its transactions run first
/// (`-1`, the default, all of them: the state after the block). Other members are refused
/// (reth's type ignores them): a misspelled `blockNumber` must not quietly mean `latest`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateContext {
    #[serde(default)]
    pub block_number: Option<crate::BlockParam>,
    #[serde(default)]
    pub transaction_index: Option<alloy::rpc::types::TransactionIndex>,
}

impl StateContext {
    /// How many of the block's transactions run before the calls (`None`: all).
    pub fn transactions_first(&self) -> Option<usize> {
        self.transaction_index.and_then(|i| i.index())
    }
}

/// The block overrides of eth_call, eth_estimateGas and eth_createAccessList: alloy's, and
/// whether the request named `withdrawals`, which alloy's type has no field for (it would be
/// dropped unseen) and geth refuses for these methods.
#[derive(Debug, Clone, Default)]
pub struct CallBlockOverrides {
    overrides: BlockOverrides,
    withdrawals: bool,
}

impl<'de> serde::Deserialize<'de> for CallBlockOverrides {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let withdrawals = value.get("withdrawals").is_some();
        let overrides = serde_json::from_value(value).map_err(serde::de::Error::custom)?;
        Ok(Self {
            overrides,
            withdrawals,
        })
    }
}

impl CallBlockOverrides {
    /// The overrides, or geth's refusal (-32000) of the ones a call cannot apply.
    pub fn into_checked(self) -> RpcResult<BlockOverrides> {
        if self.withdrawals {
            return Err(RpcError::Server(
                "block override \"withdrawals\" is not supported for this RPC method".into(),
            ));
        }
        Ok(self.overrides)
    }
}

/// Refuses an empty list of bundles (-32602) and more than `max_calls` calls over all of them
/// (-32005, naming `method`), as reth does for `eth_callMany` and `debug_traceCallMany`.
pub fn check_bundles(
    bundles: &[alloy::rpc::types::Bundle],
    max_calls: usize,
    method: &str,
) -> RpcResult<()> {
    if bundles.is_empty() {
        return Err(RpcError::invalid_params("bundles are empty"));
    }
    let calls: usize = bundles.iter().map(|b| b.transactions.len()).sum();
    if calls > max_calls {
        return Err(RpcError::LimitExceeded(format!(
            "{calls} calls in one {method}; at most {max_calls}"
        )));
    }
    Ok(())
}

/// The state bundles of calls start from: after canonical `block`'s first `transactions`
/// transactions (replayed as mined, after its pre-block system calls), or after the whole
/// block when `None` or at least its transaction count; `state_overrides` on top.
pub fn bundles_start(
    ctx: &crate::ModuleContext,
    block: &crate::StoredBlock,
    transactions: Option<usize>,
    state_overrides: Option<StateOverride>,
    deadline: Instant,
    timed_out: impl Fn() -> RpcError,
) -> RpcResult<CallDb> {
    let mut db = match transactions {
        Some(n) if n < block.body.transactions.len() => {
            let replayed = crate::replay::state_before_tx(ctx, block, n, deadline, timed_out)?;
            CacheDB {
                cache: replayed.cache,
                db: replayed.db.0,
            }
        }
        _ => CacheDB::new(ctx.chain.state_at(block.number())?),
    };
    if let Some(overrides) = state_overrides {
        refuse_precompile_moves(&overrides, "bundles of calls")?;
        apply_state_overrides(overrides, &mut db)
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
    }
    Ok(db)
}

/// -32602 for state overrides that move a precompile, for `methods` that cannot apply a move:
/// running with the precompile where it was would answer another question.
pub fn refuse_precompile_moves(overrides: &StateOverride, methods: &str) -> RpcResult<()> {
    match overrides
        .iter()
        .find(|(_, account)| account.move_precompile_to.is_some())
    {
        Some((address, _)) => Err(RpcError::invalid_params(format!(
            "movePrecompileToAddress (of {address}) is not taken by {methods}; eth_call, eth_estimateGas, debug_traceCall and eth_simulateV1 take it"
        ))),
        None => Ok(()),
    }
}

/// What bounds the runs of one request: the RPC gas cap and the request's deadline.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub gas_cap: u64,
    pub deadline: Instant,
    timeout: Duration,
}

impl Bounds {
    /// The bounds of a request that starts now.
    pub fn starting_now(limits: &RpcLimits) -> Self {
        Self {
            gas_cap: limits.gas_cap,
            deadline: Instant::now() + limits.evm_timeout,
            timeout: limits.evm_timeout,
        }
    }

    /// [`Self::starting_now`], with the request's own timeout when it asks for a shorter one.
    pub fn starting_now_within(limits: &RpcLimits, asked: Option<Duration>) -> Self {
        let timeout = asked.map_or(limits.evm_timeout, |asked| asked.min(limits.evm_timeout));
        Self {
            gas_cap: limits.gas_cap,
            deadline: Instant::now() + timeout,
            timeout,
        }
    }

    pub fn timed_out(&self) -> RpcError {
        RpcError::Timeout(self.timeout.as_millis() as u64)
    }
}

/// The prepared environment of one call: database with overrides, EVM env, transaction.
pub struct Prepared {
    pub db: CallDb,
    pub env: EvmEnv,
    pub tx: TxEnv,
    /// The request named no gas limit.
    pub gas_defaulted: bool,
    pub bounds: Bounds,
    /// What the state overrides do to the precompiles, for each EVM built for the call.
    pub precompiles: PrecompileEdits,
}

/// What state overrides do to the precompiles, as geth applies them to eth_call and its kin:
/// `movePrecompileToAddress` moves a precompile's code to another address, and any override of
/// a precompile's address takes the precompile away (its overridden code then runs there).
#[derive(Debug, Clone, Default)]
pub struct PrecompileEdits {
    moves: Vec<(Address, Address)>,
    removed: Vec<Address>,
}

impl PrecompileEdits {
    /// The edits of state overrides given as (address, `movePrecompileToAddress`) pairs,
    /// checked against the fork's precompiles (`spec`): only a precompile moves, and never onto
    /// an address the overrides also name. Two moves onto one address leave the later one
    /// there, as geth does.
    pub fn of(
        overrides: impl IntoIterator<Item = (Address, Option<Address>)>,
        spec: SpecId,
    ) -> RpcResult<Self> {
        let overrides: Vec<(Address, Option<Address>)> = overrides.into_iter().collect();
        let fork = Precompiles::new(PrecompileSpecId::from_spec_id(spec));
        let mut edits = Self::default();
        for (address, move_to) in &overrides {
            let is_precompile = fork.contains(address);
            if let Some(to) = move_to {
                if !is_precompile {
                    return Err(RpcError::Server(format!(
                        "account {address} is not a precompile"
                    )));
                }
                if overrides.iter().any(|(other, _)| other == to) {
                    return Err(RpcError::Server(format!(
                        "account {to} is already overridden"
                    )));
                }
                edits.moves.push((*address, *to));
            } else if is_precompile {
                edits.removed.push(*address);
            }
        }
        Ok(edits)
    }

    /// Applies the edits to an EVM's precompiles (built for the fork, unedited).
    pub fn apply(&self, precompiles: &mut PrecompilesMap) {
        for (from, to) in &self.moves {
            let mut moved = None;
            precompiles.apply_precompile(from, |p| {
                moved = p;
                None
            });
            precompiles.apply_precompile(to, |_| moved);
        }
        for address in &self.removed {
            precompiles.apply_precompile(address, |_| None);
        }
    }
}

/// Builds the environment for `request` on top of the state after `header`'s block.
pub fn prepare(
    spec: &ChainSpec,
    header: &Header,
    state: StateRef,
    request: TransactionRequest,
    state_overrides: Option<StateOverride>,
    block_overrides: Option<BlockOverrides>,
    bounds: Bounds,
) -> RpcResult<Prepared> {
    let mut env = spec.evm_env(header);
    let mut db = CacheDB::new(state);
    if let Some(overrides) = block_overrides {
        // A call runs no system calls, so a beacon root would go nowhere: geth refuses it.
        if overrides.beacon_root.is_some() {
            return Err(RpcError::Server(
                "block override \"beaconRoot\" is not supported for this RPC method".into(),
            ));
        }
        let moves_the_block = overrides.number.is_some() || overrides.time.is_some();
        apply_block_overrides(overrides, &mut db, &mut env.block_env);
        if moves_the_block {
            // geth derives the fork's rules (opcodes, precompiles) from the block as
            // overridden, not from the block the state is taken from.
            env.cfg_env.spec = spec.spec_id(
                env.block_env.number.saturating_to(),
                env.block_env.timestamp.saturating_to(),
            );
        }
    }
    let mut precompiles = PrecompileEdits::default();
    if let Some(overrides) = state_overrides {
        precompiles = PrecompileEdits::of(
            overrides
                .iter()
                .map(|(address, account)| (*address, account.move_precompile_to)),
            env.cfg_env.spec,
        )?;
        // geth's override errors ("has both 'state' and 'stateDiff'") are plain ones: -32000.
        apply_state_overrides(overrides, &mut db).map_err(|e| RpcError::Server(e.to_string()))?;
    }
    let (tx, gas_defaulted) = call_tx(&mut env, &db, request, bounds.gas_cap, CallRules::Geth)?;
    Ok(Prepared {
        db,
        env,
        tx,
        gas_defaulted,
        bounds,
        precompiles,
    })
}

/// Whose preparation of a call [`call_tx`] follows, where geth and reth differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRules {
    /// geth's eth_call: a call that names a fee must meet the base fee, and one that names no
    /// gas gets the RPC gas cap.
    Geth,
    /// reth's `prepare_call_env` (its eth_callMany and debug_traceCallMany, which geth does not
    /// serve): the base fee is never checked, and a call that names a fee but no gas gets what
    /// the sender can pay for ([`gas_allowance`]), within the block's gas limit and the cap.
    Reth,
}

/// The most gas `caller` with `balance` can buy at `tx`'s gas price after sending its value
/// (reth's `caller_gas_allowance`); `u64::MAX` when the call is free.
pub fn gas_allowance(balance: U256, tx: &TxEnv) -> RpcResult<u64> {
    let spendable = balance.checked_sub(tx.value).ok_or_else(|| {
        RpcError::TransactionRejected(format!(
            "insufficient funds for value: address {} have {balance} want {}",
            tx.caller, tx.value
        ))
    })?;
    if tx.gas_price == 0 {
        return Ok(u64::MAX);
    }
    Ok((spendable / U256::from(tx.gas_price))
        .try_into()
        .unwrap_or(u64::MAX))
}

/// `request` as a transaction on `db`, with eth_call's relaxations set on `env` (which is
/// therefore per call): no nonce or sender-is-EOA checks, free (BASEFEE reads 0) when it names
/// no fee, BLOBBASEFEE 0 when it names a zero blob fee cap, the gas of the RPC cap when it names
/// more; the base fee and a missing gas as `rules` have them. Also says whether the request
/// named no gas.
pub fn call_tx(
    env: &mut EvmEnv,
    db: &CallDb,
    request: TransactionRequest,
    gas_cap: u64,
    rules: CallRules,
) -> RpcResult<(TxEnv, bool)> {
    // geth: eth_call skips nonce and sender-is-EOA checks, and the base-fee check of a call
    // that pays nothing; the per-transaction gas cap of EIP-7825 does not bind calls (the RPC
    // gas cap does).
    env.cfg_env.disable_nonce_check = true;
    env.cfg_env.disable_eip3607 = true;
    env.cfg_env.disable_block_gas_limit = true;
    env.cfg_env.tx_gas_limit_cap = Some(u64::MAX);

    // With no fee fields at all the call is free, and (as in geth) BASEFEE reads 0.
    let zero = |v: Option<u128>| v.is_none_or(|v| v == 0);
    let free = zero(request.gas_price)
        && zero(request.max_fee_per_gas)
        && zero(request.max_priority_fee_per_gas);
    env.cfg_env.disable_base_fee = free || rules == CallRules::Reth;
    if free {
        env.block_env.basefee = 0;
    }
    let from = request.from.unwrap_or_default();
    let base_fee = match rules {
        CallRules::Geth => env.block_env.basefee,
        CallRules::Reth => 0,
    };
    check_fees(&request, base_fee, free, from)?;
    // geth refuses these before running anything (its pre-checks name eth_call).
    if request.to.is_none_or(|to| to.is_create()) {
        if request.blob_versioned_hashes.is_some() {
            return Err(RpcError::Server("blob transaction of type create".into()));
        }
        if request.authorization_list.is_some() {
            return Err(RpcError::Server(format!(
                "set code transaction must not be a create transaction (sender {from})"
            )));
        }
    }
    // geth reads BLOBBASEFEE as 0 only for a call that names a blob fee cap of 0, or names blob
    // hashes without a cap (which it then sets to 0); any other call sees the block's.
    let blob_fee_cap_zero = match request.max_fee_per_blob_gas {
        Some(cap) => cap == 0,
        None => request.blob_versioned_hashes.is_some(),
    };
    if blob_fee_cap_zero {
        if let Some(blob) = env.block_env.blob_excess_gas_and_price.as_mut() {
            blob.blob_gasprice = 0;
        }
    }
    let gas_defaulted = request.gas.is_none();
    let explicit_nonce = request.nonce.is_some();
    // geth: maxFeePerBlobGas without blob hashes is valid from Cancun and does not make the
    // call a blob transaction (it only sets what BLOBBASEFEE reads, handled above). An explicit
    // empty hash list stays a blob transaction and is refused, as in geth. Before Cancun the fee
    // alone makes it a blob transaction, which that fork does not have.
    let mut request = request;
    if request.max_fee_per_blob_gas.is_some() && !env.cfg_env.spec.is_enabled_in(SpecId::CANCUN) {
        return Err(type_not_supported(
            "blob tx",
            request.from.unwrap_or_default(),
        ));
    }
    if request.blob_versioned_hashes.is_none() && request.sidecar.is_none() {
        request.max_fee_per_blob_gas = None;
    }
    let dynamic = request.max_fee_per_gas.is_some() || request.max_priority_fee_per_gas.is_some();
    if rules == CallRules::Geth && request.gas_price.is_some() && dynamic {
        // A plain error in geth's CallDefaults: -32000 (reth's is a malformed request).
        return Err(RpcError::Server(
            "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified".into(),
        ));
    }
    let other_chain = request
        .chain_id
        .filter(|have| *have != env.cfg_env.chain_id);
    if let (CallRules::Geth, Some(have)) = (rules, other_chain) {
        return Err(RpcError::Server(vm_messages::chain_id_mismatch(
            have,
            env.cfg_env.chain_id,
        )));
    }
    if rules == CallRules::Geth {
        // geth's calls read `input` when both are given, whatever `data` holds (only its send
        // path refuses a pair that differs).
        if let Some(input) = request.input.input.clone() {
            request.input = alloy::rpc::types::TransactionInput::new(input);
        }
    }
    if rules == CallRules::Geth
        && request
            .blob_versioned_hashes
            .as_ref()
            .is_some_and(Vec::is_empty)
    {
        // geth's state transition refuses it before anything runs (-32000, in its words).
        return Err(RpcError::Server(format!(
            "err: blob transaction missing blob hashes (supplied gas {})",
            request.gas.unwrap_or(gas_cap).min(gas_cap)
        )));
    }
    let fee_cap = request.max_fee_per_gas;
    let mut tx: TxEnv = request
        .try_into_tx_env(env)
        .map_err(|e| RpcError::invalid_params(e.to_string()))?;
    // alloy prices an EIP-1559 call at its effective price (reth's way). geth checks the
    // balance against gas times the fee cap, and the EVM derives the effective price from the
    // cap and the tip itself.
    if tx.tx_type >= 2 {
        tx.gas_price = fee_cap.unwrap_or_default();
        // geth's CallDefaults: a fee cap without a tip tips nothing (the EVM would price the
        // call at its whole cap: GASPRICE, and the sender's charge, would differ).
        tx.gas_priority_fee.get_or_insert(0);
    }
    if gas_defaulted || tx.gas_limit > gas_cap {
        tx.gas_limit = gas_cap;
    }
    if gas_defaulted && rules == CallRules::Reth && tx.gas_price > 0 {
        let balance = db
            .basic_ref(tx.caller)
            .map_err(RpcError::from)?
            .map(|a| a.balance)
            .unwrap_or_default();
        tx.gas_limit = gas_allowance(balance, &tx)?
            .min(env.block_env.gas_limit)
            .min(gas_cap);
    }
    if !explicit_nonce {
        tx.nonce = db
            .basic_ref(tx.caller)
            .map_err(RpcError::from)?
            .map(|a| a.nonce)
            .unwrap_or_default();
    }
    Ok((tx, gas_defaulted))
}

/// geth's fee pre-checks of a call, in its order and words (-32000): a tip above the fee cap,
/// then a fee cap (or gas price) under the base fee, unless the call pays nothing.
fn check_fees(
    request: &TransactionRequest,
    base_fee: u64,
    free: bool,
    from: Address,
) -> RpcResult<()> {
    let dynamic = request.max_fee_per_gas.is_some() || request.max_priority_fee_per_gas.is_some();
    if free || request.gas_price.is_some() && dynamic {
        // A conflict of fee styles is reported where the request is read.
        return Ok(());
    }
    let cap = request
        .gas_price
        .or(request.max_fee_per_gas)
        .unwrap_or_default();
    let tip = request
        .gas_price
        .or(request.max_priority_fee_per_gas)
        .unwrap_or_default();
    if tip > cap {
        return Err(RpcError::Server(format!(
            "max priority fee per gas higher than max fee per gas: address {from}, maxPriorityFeePerGas: {tip}, maxFeePerGas: {cap}"
        )));
    }
    if cap < u128::from(base_fee) {
        return Err(RpcError::Server(vm_messages::fee_cap_below_base_fee(
            from, cap, base_fee,
        )));
    }
    Ok(())
}

/// geth's refusal (-32000) of a transaction type the block's fork does not have.
pub fn type_not_supported(kind: &str, sender: alloy::primitives::Address) -> RpcError {
    RpcError::Server(format!(
        "transaction type not supported: {kind} (sender {sender})"
    ))
}

/// geth's wording for a transaction the EVM refuses to run (funds, nonce, fees, ...).
pub fn transaction_error(
    err: EVMError<StateError>,
    caller: alloy::primitives::Address,
) -> RpcError {
    match err {
        EVMError::Transaction(invalid) => {
            RpcError::Server(vm_messages::invalid_tx_message(&invalid, caller))
        }
        EVMError::Database(e) => RpcError::Internal(e.to_string()),
        other => RpcError::Internal(other.to_string()),
    }
}
