//! The simulation: plans the chain of blocks, runs each block's overrides, system calls and
//! calls on one in-memory state, and builds the result blocks with real roots and hashes.

// foldhash maps (alloy's): std's SipHash was ~1.5% of a one-transfer simulation.
use alloy::primitives::map::HashSet;
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use alloy::{
    consensus::{
        constants::EMPTY_OMMER_ROOT_HASH,
        proofs::{
            calculate_receipt_root, calculate_withdrawals_root, ordered_trie_root_with_encoder,
        },
        Block, BlockBody, Eip658Value, Header, Receipt, ReceiptEnvelope, ReceiptWithBloom,
        SignableTransaction, TxEip1559, TxEip4844, TxEip7702, TxEnvelope, TxLegacy,
    },
    eips::{eip4844::DATA_GAS_PER_BLOB, eip4895::Withdrawals, eip7685::Requests},
    primitives::{Address, Bloom, Bytes, TxKind, B256, U256},
    rpc::types::{BlockTransactions, Log as RpcLog, TransactionRequest},
};
use alloy_evm::{
    block::{calc::base_block_reward_pre_merge, SystemCaller},
    eth::eip6110::parse_deposits_from_receipts,
    precompiles::PrecompilesMap,
    Evm,
};
use alloy_hardforks::EthereumHardforks;
use revm::{
    context::TxEnv,
    context_interface::{
        block::BlobExcessGasAndPrice,
        result::{EVMError, ExecutionResult, HaltReason, InvalidTransaction},
    },
    database::AccountState,
    precompile::{PrecompileSpecId, Precompiles},
    primitives::{hardfork::SpecId, KECCAK_EMPTY},
    Context, Database, DatabaseCommit, MainContext,
};
use serde::Serialize;
use serde_json::value::RawValue;
use simnode_api::{
    call::PrecompileEdits, error::SimulateCode, offload::EvmPool, unsigned_tx, vm_messages,
    BlockParam, ChainSpec, ChainView, ModuleContext, RootCarry, RpcError, RpcResult, StateChanges,
};

use crate::{
    db::{override_code, BaseDb, SimDb},
    inspector::SimInspector,
    precompiles::SimPrecompiles,
    system_calls::{BlockEvm, SimEvm},
    types::{AccountOverride, BlockOverrides, SimulatePayload, StateOverride},
};

/// Default distance between two simulated blocks, in seconds.
pub const TIMESTAMP_INCREMENT: u64 = 12;

/// A block of the planned chain: the user's block, or an empty one filling a number gap.
struct PlannedBlock {
    number: u64,
    timestamp: u64,
    overrides: BlockOverrides,
    state_overrides: Option<StateOverride>,
    calls: Vec<TransactionRequest>,
}

/// Result of one call, as `eth_simulateV1` reports it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CallResult {
    return_data: Bytes,
    logs: Vec<RpcLog>,
    #[serde(with = "alloy::serde::quantity")]
    gas_used: u64,
    #[serde(with = "alloy::serde::quantity")]
    max_used_gas: u64,
    #[serde(with = "alloy::serde::quantity")]
    status: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<CallError>,
}

#[derive(Debug, Serialize)]
struct CallError {
    message: String,
    code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Bytes>,
}

/// A simulated block as `eth_simulateV1` returns it: the block's fields and `calls`.
#[derive(Serialize)]
struct SimulatedBlockJson<'a, B: Serialize> {
    #[serde(flatten)]
    block: &'a B,
    calls: &'a [CallResult],
}

/// Most calls one simulated block may hold, and one request in all (geth's limits).
pub const MAX_CALLS_PER_BLOCK: usize = 5_000;
pub const MAX_CALLS: usize = 10_000;

/// Refuses a request with more calls than [`MAX_CALLS_PER_BLOCK`] in a block or [`MAX_CALLS`]
/// in all, before anything runs (-38026, as geth).
fn check_call_counts(payload: &SimulatePayload) -> RpcResult<()> {
    let mut total = 0usize;
    for block in &payload.block_state_calls {
        let calls = block.calls.len();
        if calls > MAX_CALLS_PER_BLOCK {
            return Err(RpcError::simulate(
                SimulateCode::ClientLimitExceeded,
                format!("too many calls in block: {calls} > {MAX_CALLS_PER_BLOCK}"),
            ));
        }
        total += calls;
        if total > MAX_CALLS {
            return Err(RpcError::simulate(
                SimulateCode::ClientLimitExceeded,
                format!("too many calls: {total} > {MAX_CALLS}"),
            ));
        }
    }
    Ok(())
}

/// Options of one request.
pub struct Simulation<'a> {
    pub ctx: &'a ModuleContext,
    pub payload: SimulatePayload,
    pub block: BlockParam,
    /// When the run stops with [`RpcError::Timeout`]: the request's deadline, or earlier
    /// for a first run on the RPC thread (see [`simnode_api::offload`]).
    pub stop_at: Instant,
    /// Where a block's transaction and receipt roots may be computed alongside its state root.
    pub helpers: Option<&'a EvmPool>,
}

impl Simulation<'_> {
    /// Runs the simulation; each block is its JSON text (serialized once, not built as a
    /// `Value` tree and serialized again).
    pub fn run(self) -> RpcResult<Vec<Box<RawValue>>> {
        let ctx = self.ctx;
        let limits = &ctx.limits;
        let deadline = self.stop_at;
        let timeout_err = || RpcError::Timeout(duration_ms(limits.evm_timeout));

        let payload = self.payload;
        if payload.block_state_calls.is_empty() {
            return Err(RpcError::invalid_params("empty input"));
        }
        let max_blocks = limits.max_simulate_blocks;
        if payload.block_state_calls.len() as u64 > max_blocks {
            return Err(RpcError::simulate(
                SimulateCode::ClientLimitExceeded,
                "too many blocks",
            ));
        }
        check_call_counts(&payload)?;
        let base_number = ctx
            .chain
            .resolve(&self.block)?
            .ok_or(RpcError::HeaderNotFound)?;
        let base = ctx
            .chain
            .header(base_number)?
            .ok_or(RpcError::HeaderNotFound)?;
        let plan = plan_chain(&base, payload.block_state_calls, max_blocks)?;

        let state = ctx.chain.state_at(base_number)?;
        let mut db = SimDb::new(BaseDb::new(
            state,
            ctx.chain.clone(),
            base_number,
            base.hash(),
        ));
        let mut inspector = SimInspector::new(payload.trace_transfers, deadline);
        let mut run = Runner {
            spec: &ctx.spec,
            chain: ctx.chain.as_ref(),
            base_number,
            validate: payload.validation,
            full_tx: payload.return_full_transactions,
            budget: limits.gas_cap,
            deadline,
            timeout_ms: duration_ms(limits.evm_timeout),
            touched: HashSet::default(),
            precompiles_changed: false,
            // A lone block's root has no earlier root to build on and none after it.
            root_carry: (plan.len() > 1).then(RootCarry::default),
            helpers: self.helpers,
        };

        let mut parent: Header = base.inner().clone();
        let mut parent_hash = base.hash();
        let mut out = Vec::with_capacity(plan.len());
        for block in plan {
            if Instant::now() >= deadline {
                return Err(timeout_err());
            }
            let (header, hash, json) =
                run.block(block, &parent, parent_hash, &mut db, &mut inspector)?;
            if inspector.timed_out() {
                return Err(timeout_err());
            }
            db.base_mut().push_block_hash(hash);
            out.push(json);
            parent = header;
            parent_hash = hash;
        }
        Ok(out)
    }
}

fn duration_ms(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

/// Checks block numbers and timestamps, fills number gaps with empty blocks and applies the
/// block limit (which counts the filler blocks).
fn plan_chain(
    base: &Header,
    blocks: Vec<crate::types::SimBlock>,
    max_blocks: u64,
) -> RpcResult<Vec<PlannedBlock>> {
    let mut plan = Vec::with_capacity(blocks.len());
    let mut prev_number = base.number;
    let mut prev_timestamp = base.timestamp;
    for block in blocks {
        let overrides = block.block_overrides.unwrap_or_default();
        let number = match overrides.number {
            Some(n) => n.to::<u64>(),
            None => prev_number.checked_add(1).ok_or_else(|| {
                RpcError::simulate(
                    SimulateCode::BlockNumberNotIncreasing,
                    "block number overflow",
                )
            })?,
        };
        if number <= prev_number {
            return Err(RpcError::simulate(
                SimulateCode::BlockNumberNotIncreasing,
                format!("block numbers must be in order: {number} <= {prev_number}"),
            ));
        }
        if number - base.number > max_blocks {
            return Err(RpcError::simulate(
                SimulateCode::ClientLimitExceeded,
                "too many blocks",
            ));
        }
        for filler in prev_number + 1..number {
            prev_timestamp = next_timestamp(prev_timestamp)?;
            plan.push(PlannedBlock {
                number: filler,
                timestamp: prev_timestamp,
                overrides: BlockOverrides::default(),
                state_overrides: None,
                calls: Vec::new(),
            });
        }
        prev_number = number;
        let timestamp = match overrides.time {
            None => next_timestamp(prev_timestamp)?,
            Some(t) => {
                let t = t.to::<u64>();
                if t <= prev_timestamp {
                    return Err(RpcError::simulate(
                        SimulateCode::TimestampNotIncreasing,
                        format!("block timestamps must be in order: {t} <= {prev_timestamp}"),
                    ));
                }
                t
            }
        };
        prev_timestamp = timestamp;
        plan.push(PlannedBlock {
            number,
            timestamp,
            overrides,
            state_overrides: block.state_overrides,
            calls: block.calls,
        });
    }
    Ok(plan)
}

/// The default timestamp of the block after one at `prev`. Near `u64::MAX` no timestamp keeps
/// the chain increasing, so the block is out of order (-38021) rather than given a wrapped or
/// repeated time.
fn next_timestamp(prev: u64) -> RpcResult<u64> {
    prev.checked_add(TIMESTAMP_INCREMENT).ok_or_else(|| {
        RpcError::simulate(
            SimulateCode::TimestampNotIncreasing,
            format!("block timestamps must be in order: no timestamp follows {prev}"),
        )
    })
}

struct Runner<'a> {
    spec: &'a Arc<ChainSpec>,
    chain: &'a dyn ChainView,
    base_number: u64,
    validate: bool,
    full_tx: bool,
    /// What remains of the request-wide gas budget (`--rpc.gascap`).
    budget: u64,
    deadline: Instant,
    timeout_ms: u64,
    /// Accounts a transaction touched since their last override: EIP-161 removes those that
    /// end up empty. An account emptied by an override alone stays, with its storage, as in
    /// geth (overrides are finalised without deleting empty objects).
    touched: HashSet<Address>,
    /// A state override of the request has moved or replaced a precompile: no system-call
    /// results from the memo after that, as the accounts a call loads do not show which code
    /// answers at an address (see [`BlockEvm`]). Overridden accounts do show: they are loaded.
    precompiles_changed: bool,
    /// What the view keeps between the state roots of this simulation's blocks.
    root_carry: Option<RootCarry>,
    /// Idle threads a large block's transaction and receipt roots may go to.
    helpers: Option<&'a EvmPool>,
}

/// Transactions in a block from which its transaction and receipt roots are worth handing to
/// an idle core while this one computes the state root. Below it the hand-over (waking the
/// other core, its cold caches) costs what the overlap saves: in-process on the 2-vCPU bench VM,
/// 4 blocks of 30 transfers took 13% longer with the hand-over, of 50 the same, of 100 8% less;
/// 16 blocks of 50 transfers to new accounts 13% less, one block of 800 18% less.
const BODY_ROOTS_ASIDE_FROM: usize = 48;

/// A block's transaction and receipt roots and logs bloom, with the transactions they were
/// computed from.
struct BodyRoots {
    transactions: Vec<TxEnvelope>,
    transactions_root: B256,
    receipts_root: B256,
    logs_bloom: Bloom,
}

impl BodyRoots {
    fn of(transactions: Vec<TxEnvelope>, receipts: Vec<ReceiptEnvelope>) -> Self {
        let mut logs_bloom = Bloom::ZERO;
        for r in &receipts {
            logs_bloom |= *r.logs_bloom();
        }
        Self {
            transactions_root: ordered_trie_root_with_encoder(&transactions, unsigned_tx::encode),
            receipts_root: calculate_receipt_root(&receipts),
            logs_bloom,
            transactions,
        }
    }
}

/// One executed call, before the block hash is known.
struct ExecutedCall {
    result: CallResult,
    logs: Vec<(alloy::primitives::Log, u64)>,
}

impl Runner<'_> {
    /// Runs one block; returns its header, hash and JSON.
    fn block(
        &mut self,
        block: PlannedBlock,
        parent: &Header,
        parent_hash: B256,
        db: &mut SimDb,
        inspector: &mut SimInspector,
    ) -> RpcResult<(Header, B256, Box<RawValue>)> {
        let spec = self.spec.as_ref();
        let PlannedBlock {
            number,
            timestamp,
            overrides,
            state_overrides,
            calls,
        } = block;

        let london = spec.is_london_active_at_block(number);
        // Before Spurious Dragon an emptied account stays in the state (no EIP-161), and before
        // Byzantium a receipt holds the state root after its transaction instead of a status.
        let eip161 = spec.is_spurious_dragon_active_at_block(number);
        let byzantium = spec.is_byzantium_active_at_block(number);
        let shanghai = spec.is_shanghai_active_at_timestamp(timestamp);
        let cancun = spec.is_cancun_active_at_timestamp(timestamp);
        let prague = spec.is_prague_active_at_timestamp(timestamp);

        let base_fee = if london {
            Some(match overrides.base_fee_per_gas {
                Some(fee) => u64::try_from(fee)
                    .map_err(|_| RpcError::invalid_params("baseFeePerGas overflows 64 bits"))?,
                None if self.validate => spec.next_base_fee(parent).unwrap_or_default(),
                None => 0,
            })
        } else {
            None
        };
        let excess_blob_gas = cancun.then(|| {
            if spec.is_cancun_active_at_timestamp(parent.timestamp) {
                spec.next_excess_blob_gas(parent, timestamp)
                    .unwrap_or_default()
            } else {
                0
            }
        });
        // As overridden; else past the merge a block has no difficulty, whatever its parent
        // had (a simulation from a proof-of-work block across the merge), and before it the
        // parent's.
        let difficulty = match overrides.difficulty {
            Some(difficulty) => difficulty,
            None if spec.is_post_merge(number) => U256::ZERO,
            None => parent.difficulty,
        };
        // geth assembles a block with a difficulty as ethash does (no withdrawals at all), and
        // one without as the beacon engine does, with the request's withdrawals: an empty list
        // when none are given, so its header has the empty withdrawals root even before
        // Shanghai (which refuses a list that is not empty).
        let proof_of_stake = difficulty.is_zero();
        let given = overrides
            .withdrawals
            .as_ref()
            .is_some_and(|w| !w.is_empty());
        if given && !proof_of_stake {
            return Err(RpcError::Server(
                "ethash does not support withdrawals".into(),
            ));
        }
        if given && !shanghai {
            return Err(RpcError::Server(
                "withdrawals set before Shanghai activation".into(),
            ));
        }
        let withdrawals: Option<Withdrawals> = proof_of_stake
            .then(|| Withdrawals::new(overrides.withdrawals.clone().unwrap_or_default()));

        let mut header = Header {
            parent_hash,
            ommers_hash: EMPTY_OMMER_ROOT_HASH,
            beneficiary: overrides.fee_recipient.unwrap_or(parent.beneficiary),
            difficulty,
            number,
            gas_limit: overrides
                .gas_limit
                .map(|g| g.to::<u64>())
                .unwrap_or(parent.gas_limit),
            timestamp,
            mix_hash: overrides.prev_randao.unwrap_or_default(),
            base_fee_per_gas: base_fee,
            withdrawals_root: withdrawals.as_ref().map(|w| calculate_withdrawals_root(w)),
            excess_blob_gas,
            parent_beacon_block_root: cancun.then(|| overrides.beacon_root.unwrap_or_default()),
            ..Default::default()
        };

        let mut env = spec.evm_env(&header);
        env.cfg_env.disable_nonce_check = !self.validate;
        env.cfg_env.disable_base_fee = !self.validate;
        env.cfg_env.disable_eip3607 = true;
        env.cfg_env.disable_block_gas_limit = true;
        // The gas of a call is bounded by the block and the request budget, not by EIP-7825.
        env.cfg_env.tx_gas_limit_cap = Some(u64::MAX);
        if let Some(blob_base_fee) = overrides.blob_base_fee {
            let excess = excess_blob_gas.unwrap_or_default();
            env.block_env.blob_excess_gas_and_price = Some(BlobExcessGasAndPrice {
                excess_blob_gas: excess,
                blob_gasprice: blob_base_fee.saturating_to(),
            });
        }

        // The simulated block's precompiles, as geth picks them since geth#33363 (before, those
        // of the base block): a block simulated into Prague has the BLS ones.
        let block_spec = env.cfg_env.spec;
        let fork_precompiles = Precompiles::new(PrecompileSpecId::from_spec_id(block_spec));
        let mut precompiles = PrecompilesMap::from_static(fork_precompiles);
        // Where this block's overrides move the precompiles that take their time.
        let moved_heavy = state_overrides
            .iter()
            .flatten()
            .filter_map(|(from, account)| {
                account
                    .move_precompile_to_address
                    .filter(|_| simnode_api::guard::HEAVY_PRECOMPILES.contains(from))
            });
        inspector.moved_heavy = moved_heavy.collect();
        if let Some(state_overrides) = &state_overrides {
            self.precompiles_changed |= state_overrides.iter().any(|(address, account)| {
                account.move_precompile_to_address.is_some() || precompiles.get(address).is_some()
            });
            apply_state_overrides(state_overrides, db, &mut precompiles, block_spec)?;
            for (address, account) in state_overrides {
                if writes_account(account) {
                    self.touched.remove(address);
                }
            }
        }
        let precompiles =
            SimPrecompiles::new(precompiles, fork_precompiles.addresses_set().clone());

        let memo = if self.precompiles_changed {
            None
        } else {
            db.base().system_call_memo()
        };
        inspector.start_block();
        let ctx = Context::mainnet()
            .with_block(env.block_env)
            .with_cfg(env.cfg_env)
            .with_db(&mut *db);
        let spec_id = ctx.cfg.spec;
        // What `build_mainnet_with_inspector` builds, but with call frames created as calls
        // need them: it preallocates eight interpreters (a 32 KiB stack each) for every block,
        // which showed up as ~10% of a one-transfer simulation (allocation and drop).
        let inner = revm::context::Evm {
            ctx,
            inspector: &mut *inspector,
            instruction: revm::handler::instructions::EthInstructions::new_mainnet_with_spec(
                spec_id,
            ),
            precompiles,
            frame_stack: revm::context_interface::local::FrameStack::new(),
        };
        let mut evm = BlockEvm::new(alloy_evm::EthEvm::new(inner, true), memo);

        let mut system = SystemCaller::new(spec);
        system
            .apply_blockhashes_contract_call(parent_hash, &mut evm)
            .map_err(system_call_failed)?;
        system
            .apply_beacon_root_contract_call(header.parent_beacon_block_root, &mut evm)
            .map_err(system_call_failed)?;

        let mut gas_used = 0u64;
        let mut blob_gas_used = 0u64;
        let mut txs: Vec<TxEnvelope> = Vec::with_capacity(calls.len());
        let mut senders: Vec<Address> = Vec::with_capacity(calls.len());
        let mut receipts: Vec<ReceiptEnvelope> = Vec::with_capacity(calls.len());
        let mut executed: Vec<ExecutedCall> = Vec::with_capacity(calls.len());

        for call in calls {
            if Instant::now() >= self.deadline {
                return Err(RpcError::Timeout(self.timeout_ms));
            }
            let prepared = self.prepare_call(call, &header, gas_used, &mut evm)?;
            evm.inspector_mut().reset();
            let outcome = evm.transact_raw(prepared.tx_env.clone());
            if evm.inspector().timed_out() {
                return Err(RpcError::Timeout(self.timeout_ms));
            }
            let last = evm.inspector().last_instruction();
            let result_and_state = match outcome {
                Ok(result) => result,
                Err(EVMError::Transaction(InvalidTransaction::OverflowPaymentInTransaction)) => {
                    let balance = evm
                        .db_mut()
                        .account(prepared.from)
                        .map_err(RpcError::from)?
                        .info
                        .balance;
                    return Err(payment_overflow_error(&prepared, balance));
                }
                Err(EVMError::Transaction(refused)) => {
                    let balance = evm
                        .db_mut()
                        .basic(prepared.from)
                        .map_err(RpcError::from)?
                        .map(|a| a.balance)
                        .unwrap_or_default();
                    let spec = evm.cfg_env().spec;
                    let refused = in_geths_order(refused, &prepared, balance, spec);
                    return Err(map_evm_error(EVMError::Transaction(refused), &prepared));
                }
                Err(e) => return Err(map_evm_error(e, &prepared)),
            };
            let wrapped_nonce = prepared.wraps_nonce;
            if eip161 {
                self.touched.extend(
                    result_and_state
                        .state
                        .iter()
                        .filter(|(_, account)| account.is_touched())
                        .map(|(address, _)| *address),
                );
            }
            evm.db_mut().commit(result_and_state.state);
            if wrapped_nonce {
                // geth's nonce counter wraps around where revm's saturates.
                let account = evm
                    .db_mut()
                    .account_mut(prepared.from)
                    .map_err(RpcError::from)?;
                account.info.nonce = 0;
            }
            let result = result_and_state.result;
            let tx_gas = result.tx_gas_used();
            let max_used = result.gas().total_gas_spent().max(result.gas().floor_gas());
            gas_used = gas_used.saturating_add(tx_gas);
            self.budget = self.budget.saturating_sub(tx_gas);
            blob_gas_used += prepared.blob_count * DATA_GAS_PER_BLOB;

            let logs = evm.inspector_mut().take_logs();
            let status = if byzantium {
                Eip658Value::Eip658(result.is_success())
            } else {
                let changes = evm.db_mut().changes(&self.touched);
                Eip658Value::PostState(self.chain.state_root_with(self.base_number, &changes)?)
            };
            let receipt = Receipt {
                status,
                cumulative_gas_used: gas_used,
                logs: result.logs().to_vec(),
            }
            .with_bloom();
            receipts.push(envelope_receipt(prepared.envelope.tx_type() as u8, receipt));
            // A precompile called directly that failed: its reason, which geth's message is.
            let precompile_failure = match &result {
                ExecutionResult::Halt { reason, .. } => {
                    vm_messages::precompile_failure(reason, spec_id, &prepared.tx_env)
                }
                _ => None,
            };
            let call_result = call_result(result, tx_gas, max_used, last, precompile_failure);
            executed.push(ExecutedCall {
                result: call_result,
                logs,
            });
            txs.push(prepared.envelope);
            senders.push(prepared.from);
        }

        let mut requests = Requests::default();
        if prague {
            let deposits =
                parse_deposits_from_receipts(spec, receipts.iter()).map_err(system_call_failed)?;
            if !deposits.is_empty() {
                requests.push_request_with_type(0, deposits);
            }
            system
                .append_post_execution_changes(&mut evm, &mut requests)
                .map_err(system_call_failed)?;
        }
        drop(evm);

        if let Some(withdrawals) = &withdrawals {
            for w in withdrawals.iter() {
                if w.amount == 0 {
                    continue;
                }
                let account = db.account_mut(w.address).map_err(RpcError::from)?;
                account.info.balance = account.info.balance.saturating_add(w.amount_wei());
                if !matches!(account.account_state, AccountState::StorageCleared) {
                    account.account_state = AccountState::Touched;
                }
            }
        }

        // A block with difficulty is a proof-of-work block: geth's engine pays the miner.
        if !header.difficulty.is_zero() {
            let reward = base_block_reward_pre_merge(spec, number);
            let account = db.account_mut(header.beneficiary).map_err(RpcError::from)?;
            account.info.balance = account.info.balance.saturating_add(U256::from(reward));
            if !matches!(account.account_state, AccountState::StorageCleared) {
                account.account_state = AccountState::Touched;
            }
        }

        let written = db.take_written();
        let calls_run = txs.len();
        // The transactions travel with their roots' computation (possibly to another thread)
        // and come back with them, so that none is cloned.
        let body_roots = move || BodyRoots::of(txs, receipts);
        let (state_root, body) = match self.helpers {
            Some(pool) if calls_run >= BODY_ROOTS_ASIDE_FROM => {
                pool.join(|| self.state_root(number, written, db), body_roots)
            }
            _ => (self.state_root(number, written, db), body_roots()),
        };
        header.state_root = state_root?;
        header.gas_used = gas_used;
        if cancun {
            header.blob_gas_used = Some(blob_gas_used);
        }
        if prague {
            header.requests_hash = Some(requests.requests_hash());
        }
        header.transactions_root = body.transactions_root;
        header.receipts_root = body.receipts_root;
        header.logs_bloom = body.logs_bloom;

        let hash = header.hash_slow();
        let block_body = BlockBody {
            transactions: body.transactions,
            ommers: Vec::new(),
            withdrawals,
        };
        let size = Block::rlp_length_for(&header, &block_body);

        let json = self.block_json(&header, hash, size, block_body, senders, executed)?;
        Ok((header, hash, json))
    }

    /// The state root after block `number`, whose execution wrote the accounts `written`.
    fn state_root(
        &mut self,
        number: u64,
        written: HashSet<Address>,
        db: &SimDb,
    ) -> RpcResult<B256> {
        match &mut self.root_carry {
            None => {
                let changes: StateChanges = written
                    .into_iter()
                    .filter_map(|address| Some((address, db.change_of(address, &self.touched)?)))
                    .collect();
                self.chain.state_root_with(self.base_number, &changes)
            }
            Some(carry) => {
                for address in written {
                    carry.set(address, db.change_of(address, &self.touched));
                }
                debug_assert_eq!(
                    carry.changes(),
                    &db.changes(&self.touched),
                    "block {number}: the accounts written since the last block miss a change"
                );
                self.chain.state_root_carried(self.base_number, carry)
            }
        }
    }

    /// Fills in a call's defaults and checks what geth checks before executing it.
    fn prepare_call(
        &self,
        call: TransactionRequest,
        header: &Header,
        gas_used: u64,
        evm: &mut SimEvm<'_, '_>,
    ) -> RpcResult<PreparedCall> {
        let chain_id = self.spec.chain_id;
        let from = call.from.unwrap_or_default();
        let state_nonce = evm
            .db_mut()
            .basic(from)
            .map_err(RpcError::from)?
            .map(|a| a.nonce)
            .unwrap_or_default();
        let nonce = call.nonce.unwrap_or(state_nonce);
        let gas_limit = header.gas_limit;
        let mut gas = call.gas.unwrap_or(gas_limit.saturating_sub(gas_used));
        if gas_used.saturating_add(gas) > gas_limit {
            return Err(RpcError::simulate(
                SimulateCode::BlockGasLimitExceeded,
                format!("block gas limit reached: {gas_used} >= {gas_limit}"),
            ));
        }
        // The request-wide budget bounds the call before anything reports its gas.
        gas = gas.min(self.budget);
        // geth reads the call's fields (its CallDefaults) before it executes anything, so these
        // come before the nonce and every check of the execution.
        if call.gas_price.is_some()
            && (call.max_fee_per_gas.is_some() || call.max_priority_fee_per_gas.is_some())
        {
            return Err(RpcError::Server(
                "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified".into(),
            ));
        }
        if let Some(have) = call.chain_id {
            if have != chain_id {
                return Err(RpcError::Server(vm_messages::chain_id_mismatch(
                    have, chain_id,
                )));
            }
        }
        if self.validate {
            // geth checks the nonce before anything about fees.
            if nonce < state_nonce {
                return Err(RpcError::simulate(
                    SimulateCode::NonceTooLow,
                    format!("err: nonce too low: address {from}, tx: {nonce} state: {state_nonce} (supplied gas {gas})"),
                ));
            }
            if nonce > state_nonce {
                return Err(RpcError::simulate(
                    SimulateCode::NonceTooHigh,
                    format!("err: nonce too high: address {from}, tx: {nonce} state: {state_nonce} (supplied gas {gas})"),
                ));
            }
            if state_nonce == u64::MAX {
                return Err(RpcError::simulate(
                    SimulateCode::NonceMaxValue,
                    format!("err: nonce has max value: address {from}, nonce: {state_nonce} (supplied gas {gas})"),
                ));
            }
        }
        // geth reads `input` when both are given, whatever `data` holds.
        let input = call
            .input
            .input
            .clone()
            .or_else(|| call.input.data.clone())
            .unwrap_or_default();
        let value = call.value.unwrap_or_default();
        let base_fee = header.base_fee_per_gas;
        // Fee fields of the transaction object...
        let tx_fee_cap = call.max_fee_per_gas.unwrap_or_default();
        let tx_tip = call.max_priority_fee_per_gas.unwrap_or_default();
        // ...and what the EVM charges (a legacy gasPrice pays as both cap and tip).
        let (fee_cap, tip) = match call.gas_price {
            Some(price) => (price, price),
            None if base_fee.is_none() => (0, 0),
            None => (tx_fee_cap, tx_tip),
        };
        if let Some(base_fee) = base_fee {
            // Without validation geth skips the base fee check only for calls that pay nothing.
            if !self.validate && (fee_cap > 0 || tip > 0) && fee_cap < u128::from(base_fee) {
                return Err(RpcError::simulate(
                    SimulateCode::BaseFeeTooLow,
                    format!(
                        "err: {} (supplied gas {gas})",
                        vm_messages::fee_cap_below_base_fee(from, fee_cap, base_fee)
                    ),
                ));
            }
        }
        let blob_hashes = call.blob_versioned_hashes.clone();
        // geth refuses an empty list before it looks at blob fees (which revm checks first).
        if blob_hashes.as_ref().is_some_and(Vec::is_empty) && call.to.is_some() {
            return Err(RpcError::simulate(
                SimulateCode::Unclassified,
                format!("err: blob transaction missing blob hashes (supplied gas {gas})"),
            ));
        }
        let authorizations = call.authorization_list.clone();
        // The transaction the block holds, as geth makes it: set-code or blob by the fields the
        // call carries; otherwise legacy when it names a gas price or the block has no base fee
        // (before London), and EIP-1559 when it does not.
        let tx_type: u8 = if authorizations.is_some() {
            4
        } else if blob_hashes.is_some() {
            3
        } else if call.gas_price.is_some() || base_fee.is_none() {
            0
        } else {
            2
        };
        // geth turns such a call into a legacy transaction that drops the blobs or
        // authorizations it still executes; refused here rather than answered inconsistently.
        if tx_type >= 3 && call.gas_price.is_some() {
            return Err(RpcError::invalid_params(
                "gasPrice cannot be used with blobVersionedHashes or authorizationList: blob and set-code transactions pay with maxFeePerGas",
            ));
        }
        let kind = call.to.unwrap_or(TxKind::Create);
        if tx_type >= 3 && kind.is_create() {
            return Err(RpcError::invalid_params(
                "blob and set-code transactions need a \"to\" address",
            ));
        }
        let blob_hashes = blob_hashes.unwrap_or_default();
        let access_list = call.access_list.clone().unwrap_or_default();
        // A legacy transaction runs with its access list (as geth's message does), which the
        // EVM takes from an EIP-2930 transaction.
        let exec_type = match tx_type {
            0 if !access_list.is_empty() => 1,
            other => other,
        };
        // Without validation geth skips the blob fee check of a call with no blob fee cap (the
        // blob fee is still charged): the EVM is given the block's blob price as the cap. The
        // transaction keeps the cap the call named.
        let max_fee_per_blob_gas = match call.max_fee_per_blob_gas.unwrap_or_default() {
            0 if !self.validate && !blob_hashes.is_empty() => alloy_evm::Evm::block(evm)
                .blob_excess_gas_and_price
                .map_or(0, |blob| blob.blob_gasprice),
            cap => cap,
        };
        let tx_env = TxEnv {
            tx_type: exec_type,
            caller: from,
            gas_limit: gas,
            gas_price: fee_cap,
            kind,
            value,
            data: input.clone(),
            // Without validation the nonce is not checked; revm refuses u64::MAX outright.
            nonce: if !self.validate && nonce == u64::MAX {
                0
            } else {
                nonce
            },
            chain_id: Some(chain_id),
            access_list: access_list.clone(),
            gas_priority_fee: (exec_type >= 2).then_some(tip),
            blob_hashes: blob_hashes.clone(),
            max_fee_per_blob_gas,
            authorization_list: authorizations
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(revm::context::either::Either::Left)
                .collect(),
        };
        let sig = unsigned_tx::zero_signature();
        let to = match kind {
            TxKind::Call(to) => to,
            TxKind::Create => Address::ZERO,
        };
        let envelope = match tx_type {
            3 => TxEnvelope::from(
                TxEip4844 {
                    chain_id,
                    nonce,
                    gas_limit: gas,
                    max_fee_per_gas: tx_fee_cap,
                    max_priority_fee_per_gas: tx_tip,
                    to,
                    value,
                    access_list,
                    blob_versioned_hashes: blob_hashes.clone(),
                    max_fee_per_blob_gas: call.max_fee_per_blob_gas.unwrap_or_default(),
                    input,
                }
                .into_signed(sig),
            ),
            4 => TxEnvelope::from(
                TxEip7702 {
                    chain_id,
                    nonce,
                    gas_limit: gas,
                    max_fee_per_gas: tx_fee_cap,
                    max_priority_fee_per_gas: tx_tip,
                    to,
                    value,
                    access_list,
                    authorization_list: authorizations.unwrap_or_default(),
                    input,
                }
                .into_signed(sig),
            ),
            0 => unsigned_tx::legacy(TxLegacy {
                chain_id: None,
                nonce,
                gas_price: call.gas_price.unwrap_or_default(),
                gas_limit: gas,
                to: kind,
                value,
                input,
            }),
            _ => TxEnvelope::from(
                TxEip1559 {
                    chain_id,
                    nonce,
                    gas_limit: gas,
                    max_fee_per_gas: tx_fee_cap,
                    max_priority_fee_per_gas: tx_tip,
                    to: kind,
                    value,
                    access_list,
                    input,
                }
                .into_signed(sig),
            ),
        };
        Ok(PreparedCall {
            from,
            tx_env,
            envelope,
            blob_count: blob_hashes.len() as u64,
            wraps_nonce: kind.is_call() && state_nonce == u64::MAX && !self.validate,
            base_fee: header.base_fee_per_gas.unwrap_or_default(),
            gas,
        })
    }

    fn block_json(
        &self,
        header: &Header,
        hash: B256,
        size: usize,
        body: BlockBody<TxEnvelope>,
        senders: Vec<Address>,
        executed: Vec<ExecutedCall>,
    ) -> RpcResult<Box<RawValue>> {
        let BlockBody {
            transactions: txs,
            withdrawals,
            ..
        } = body;
        let transactions = if self.full_tx {
            BlockTransactions::Full(
                txs.into_iter()
                    .zip(senders)
                    .enumerate()
                    .map(|(i, (tx, from))| {
                        let effective_gas_price = effective_gas_price(&tx, header.base_fee_per_gas);
                        alloy::rpc::types::Transaction {
                            inner: alloy::consensus::transaction::Recovered::new_unchecked(
                                tx, from,
                            ),
                            block_hash: Some(hash),
                            block_number: Some(header.number),
                            transaction_index: Some(i as u64),
                            effective_gas_price: Some(effective_gas_price),
                            block_timestamp: Some(header.timestamp),
                        }
                    })
                    .collect(),
            )
        } else {
            BlockTransactions::Hashes(txs.iter().map(|tx| *tx.tx_hash()).collect())
        };
        let tx_hashes: Vec<B256> = match &transactions {
            BlockTransactions::Full(full) => full.iter().map(|t| *t.inner.tx_hash()).collect(),
            BlockTransactions::Hashes(h) => h.clone(),
            BlockTransactions::Uncle => Vec::new(),
        };
        let block = alloy::rpc::types::Block {
            header: alloy::rpc::types::Header {
                hash,
                inner: header.clone(),
                total_difficulty: None,
                size: Some(U256::from(size)),
            },
            uncles: Vec::new(),
            transactions,
            withdrawals,
        };
        let calls: Vec<CallResult> = executed
            .into_iter()
            .enumerate()
            .map(|(i, call)| {
                let mut result = call.result;
                result.logs = call
                    .logs
                    .into_iter()
                    .map(|(log, log_index)| RpcLog {
                        inner: log,
                        block_hash: Some(hash),
                        block_number: Some(header.number),
                        block_timestamp: Some(header.timestamp),
                        transaction_hash: tx_hashes.get(i).copied(),
                        transaction_index: Some(i as u64),
                        log_index: Some(log_index),
                        removed: false,
                    })
                    .collect();
                result
            })
            .collect();
        let json = SimulatedBlockJson {
            block: &block,
            calls: &calls,
        };
        // Every legacy transaction of a simulated block is an unsigned one (`unsigned_tx`).
        let unsigned_legacy = |tx: &alloy::rpc::types::Transaction| tx.inner.inner().is_legacy();
        match &block.transactions {
            BlockTransactions::Full(full) if full.iter().any(unsigned_legacy) => {
                // alloy writes a legacy transaction's `v` from its signature and chain id (27
                // here); the transaction was hashed with `v` zero, which is what geth shows.
                let mut value = serde_json::to_value(&json).map_err(RpcError::internal)?;
                if let Some(txs) = value["transactions"].as_array_mut() {
                    for (tx, full) in txs.iter_mut().zip(full) {
                        if unsigned_legacy(full) {
                            unsigned_tx::legacy_json_v(tx);
                            // geth's block transaction object names a legacy transaction's
                            // chain id whenever the one its `v` implies is not zero: from `v`
                            // zero, (0 - 35) / 2 in 64 bits (geth's deriveChainId).
                            tx["chainId"] = serde_json::Value::from(format!(
                                "{:#x}",
                                0u64.wrapping_sub(35) / 2
                            ));
                        }
                    }
                }
                serde_json::value::to_raw_value(&value)
            }
            _ => serde_json::value::to_raw_value(&json),
        }
        .map_err(RpcError::internal)
    }
}

/// A system contract (EIP-2935, 4788, 7002, 7251) or the deposit contract failing in a
/// simulated block: only overrides of that contract's code or state can make it fail, so it is
/// the request's doing (geth's -32000), not the node's.
fn system_call_failed(err: impl std::fmt::Display) -> RpcError {
    RpcError::Server(err.to_string())
}

/// A call with its defaults filled in, ready for the EVM.
struct PreparedCall {
    from: Address,
    tx_env: TxEnv,
    envelope: TxEnvelope,
    blob_count: u64,
    /// The sender's nonce is at its maximum and the call will wrap it to zero.
    wraps_nonce: bool,
    /// The block's base fee (0 before London), for geth's fee error message.
    base_fee: u64,
    gas: u64,
}

fn effective_gas_price(tx: &TxEnvelope, base_fee: Option<u64>) -> u128 {
    use alloy::consensus::Transaction;
    tx.effective_gas_price(base_fee)
}

fn envelope_receipt(tx_type: u8, receipt: ReceiptWithBloom<Receipt>) -> ReceiptEnvelope {
    match tx_type {
        3 => ReceiptEnvelope::Eip4844(receipt),
        4 => ReceiptEnvelope::Eip7702(receipt),
        1 => ReceiptEnvelope::Eip2930(receipt),
        0 => ReceiptEnvelope::Legacy(receipt),
        _ => ReceiptEnvelope::Eip1559(receipt),
    }
}

/// The answer for one call; `last` is the instruction a halted call stopped on and
/// `precompile_failure` a directly called precompile's own reason, which geth's message for a
/// halt gives (see [`vm_messages::halt_words`]).
fn call_result(
    result: ExecutionResult<HaltReason>,
    gas_used: u64,
    max_used_gas: u64,
    last: vm_messages::LastInstruction,
    precompile_failure: Option<&str>,
) -> CallResult {
    match result {
        ExecutionResult::Success { output, .. } => CallResult {
            return_data: output.into_data(),
            logs: Vec::new(),
            gas_used,
            max_used_gas,
            status: 1,
            error: None,
        },
        ExecutionResult::Revert { output, .. } => CallResult {
            return_data: Bytes::new(),
            logs: Vec::new(),
            gas_used,
            max_used_gas,
            status: 0,
            error: Some(CallError {
                message: vm_messages::revert_message(&output),
                code: 3,
                data: Some(output),
            }),
        },
        ExecutionResult::Halt { reason, .. } => CallResult {
            return_data: Bytes::new(),
            logs: Vec::new(),
            gas_used,
            max_used_gas,
            status: 0,
            error: Some(CallError {
                message: vm_messages::halt_words(&reason, last, precompile_failure),
                code: -32015,
                data: None,
            }),
        },
    }
}

/// revm refuses a call whose upfront cost (gas times fee cap, plus value and blob fees) does
/// not fit its integer types; geth computes the cost in 256 bits and reports what the sender
/// lacks, an insufficient-funds error (-38014), like any other call the balance cannot pay.
fn payment_overflow_error(call: &PreparedCall, balance: U256) -> RpcError {
    let detail = match upfront_cost(call) {
        Some(want) if balance < want => format!("have {balance} want {want}"),
        // The balance would cover it, but revm prices gas in 128 bits; geth would run the call.
        Some(want) => format!("gas * price of {want} exceeds the 128 bits the EVM prices gas in"),
        None => "required balance exceeds 256 bits".to_string(),
    };
    RpcError::simulate(
        SimulateCode::InsufficientFunds,
        format!(
            "err: insufficient funds for gas * price + value: address {} {detail} (supplied gas {})",
            call.from, call.gas
        ),
    )
}

/// What geth's buyGas wants the sender to hold for `call`: its gas at the fee cap, its value and
/// its blob gas at the blob fee cap; `None` past 256 bits.
fn upfront_cost(call: &PreparedCall) -> Option<U256> {
    let tx = &call.tx_env;
    let blob_fee = U256::from(call.blob_count.saturating_mul(DATA_GAS_PER_BLOB))
        .checked_mul(U256::from(tx.max_fee_per_blob_gas))?;
    U256::from(tx.gas_limit)
        .checked_mul(U256::from(tx.gas_price))?
        .checked_add(tx.value)?
        .checked_add(blob_fee)
}

/// The refusal geth gives a call revm refused with `refused`, where the two check in another
/// order: revm checks the init code's size, then the intrinsic gas and the calldata floor,
/// before the sender's balance; geth buys the gas first (its `preCheck` ends in `buyGas`: gas at
/// the fee cap, value and blob gas at the blob fee cap), then checks the intrinsic gas and the
/// floor, and the init code's size last.
fn in_geths_order(
    refused: InvalidTransaction,
    call: &PreparedCall,
    balance: U256,
    spec: SpecId,
) -> InvalidTransaction {
    use InvalidTransaction as I;
    if !matches!(
        refused,
        I::CallGasCostMoreThanGasLimit { .. }
            | I::GasFloorMoreThanGasLimit { .. }
            | I::CreateInitCodeSizeLimit
    ) {
        return refused;
    }
    let tx = &call.tx_env;
    let need = upfront_cost(call);
    // A cost past 256 bits no balance covers.
    if need.is_none_or(|need| balance < need) {
        return I::LackOfFundForMaxFee {
            fee: Box::new(need.unwrap_or(U256::MAX)),
            balance: Box::new(balance),
        };
    }
    if matches!(refused, I::CreateInitCodeSizeLimit) {
        if let Err(short) = revm::handler::validation::validate_initial_tx_gas(
            tx,
            spec,
            false,
            false,
            u64::MAX,
            None,
        ) {
            return short;
        }
    }
    refused
}

/// Maps a transaction the EVM refused to the codes of the execution-apis spec.
fn map_evm_error(err: EVMError<simnode_api::StateError>, call: &PreparedCall) -> RpcError {
    let from = call.from;
    let gas = call.gas;
    let tx = match err {
        EVMError::Transaction(tx) => tx,
        EVMError::Database(e) => return RpcError::internal(e),
        other => return RpcError::internal(other),
    };
    let msg = |s: String| format!("err: {s} (supplied gas {gas})");
    use InvalidTransaction as I;
    match tx {
        I::NonceTooHigh { .. } => RpcError::simulate(
            SimulateCode::NonceTooHigh,
            msg(vm_messages::invalid_tx_message(&tx, from)),
        ),
        I::NonceTooLow { .. } => RpcError::simulate(
            SimulateCode::NonceTooLow,
            msg(vm_messages::invalid_tx_message(&tx, from)),
        ),
        I::NonceOverflowInTransaction => RpcError::simulate(
            SimulateCode::NonceMaxValue,
            msg(format!("nonce has max value: address {from}, nonce: {}", u64::MAX)),
        ),
        I::GasPriceLessThanBasefee => RpcError::simulate(
            SimulateCode::BaseFeeTooLow,
            msg(vm_messages::fee_cap_below_base_fee(
                from,
                call.tx_env.gas_price,
                call.base_fee,
            )),
        ),
        I::PriorityFeeGreaterThanMaxFee => RpcError::invalid_params(msg(format!(
            "max priority fee per gas higher than max fee per gas: address {from}, maxPriorityFeePerGas: {}, maxFeePerGas: {}",
            call.tx_env.gas_priority_fee.unwrap_or_default(),
            call.tx_env.gas_price
        ))),
        I::LackOfFundForMaxFee { .. } => RpcError::simulate(
            SimulateCode::InsufficientFunds,
            msg(vm_messages::invalid_tx_message(&tx, from)),
        ),
        I::CallGasCostMoreThanGasLimit { .. } | I::GasFloorMoreThanGasLimit { .. } => {
            RpcError::simulate(
                SimulateCode::IntrinsicGas,
                msg(vm_messages::invalid_tx_message(&tx, from)),
            )
        }
        I::CreateInitCodeSizeLimit => RpcError::simulate(
            SimulateCode::MaxInitCodeSize,
            msg(format!(
                "max initcode size exceeded: code size {} limit {}",
                call.tx_env.data.len(),
                revm::primitives::eip3860::MAX_INITCODE_SIZE
            )),
        ),
        I::RejectCallerWithCode => RpcError::simulate(
            SimulateCode::SenderNotEoa,
            msg(format!("sender not an eoa: address {from}")),
        ),
        I::CallerGasLimitMoreThanBlock => RpcError::simulate(
            SimulateCode::BlockGasLimitExceeded,
            msg("block gas limit reached".into()),
        ),
        // The rest have no code in the spec: geth answers each with -32603 (its
        // txValidationError's default), in its own words.
        I::BlobVersionNotSupported => {
            let kzg = alloy::eips::eip4844::VERSIONED_HASH_VERSION_KZG;
            let index = call
                .tx_env
                .blob_hashes
                .iter()
                .position(|hash| hash[0] != kzg)
                .unwrap_or_default();
            RpcError::simulate(
                SimulateCode::Unclassified,
                msg(format!("blob {index} has invalid hash version")),
            )
        }
        other => RpcError::simulate(
            SimulateCode::Unclassified,
            msg(vm_messages::invalid_tx_message(&other, from)),
        ),
    }
}

/// Applies one block's state overrides to the database and the precompile map, the way geth
/// does (see [`PrecompileEdits`]): an override of a precompile's address removes the
/// precompile; a move installs it at the destination, which nothing else in the same block may
/// override.
fn apply_state_overrides(
    overrides: &StateOverride,
    db: &mut SimDb,
    precompiles: &mut PrecompilesMap,
    spec: SpecId,
) -> RpcResult<()> {
    PrecompileEdits::of(
        overrides
            .iter()
            .map(|(address, account)| (*address, account.move_precompile_to_address)),
        spec,
    )?
    .apply(precompiles);
    for (address, account) in overrides {
        apply_account_override(*address, account, db)?;
    }
    Ok(())
}

/// Whether an override sets anything of its account (geth leaves the account alone otherwise).
fn writes_account(account: &AccountOverride) -> bool {
    account.balance.is_some()
        || account.nonce.is_some()
        || account.code.is_some()
        || account.state.is_some()
        || account.state_diff.is_some()
}

fn apply_account_override(
    address: Address,
    account: &AccountOverride,
    db: &mut SimDb,
) -> RpcResult<()> {
    if account.state.is_some() && account.state_diff.is_some() {
        return Err(RpcError::Server(format!(
            "account {address} has both 'state' and 'stateDiff'"
        )));
    }
    if !writes_account(account) {
        return Ok(());
    }
    let mut code_info = None;
    if let Some(code) = &account.code {
        code_info = Some(override_code(code));
    }
    if let Some((hash, bytecode)) = &code_info {
        if *hash != KECCAK_EMPTY {
            db.insert_code(*hash, bytecode);
        }
    }
    let entry = db.account_mut(address).map_err(RpcError::from)?;
    if let Some(nonce) = account.nonce {
        entry.info.nonce = nonce.to::<u64>();
    }
    if let Some(balance) = account.balance {
        entry.info.balance = balance;
    }
    if let Some((hash, bytecode)) = code_info {
        entry.info.code_hash = hash;
        entry.info.code = Some(bytecode);
    }
    if let Some(state) = &account.state {
        entry.storage.clear();
        entry.account_state = AccountState::StorageCleared;
        for (slot, value) in state {
            entry.storage.insert((*slot).into(), (*value).into());
        }
    } else {
        if !matches!(entry.account_state, AccountState::StorageCleared) {
            entry.account_state = AccountState::Touched;
        }
        if let Some(diff) = &account.state_diff {
            for (slot, value) in diff {
                entry.storage.insert((*slot).into(), (*value).into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SimBlock;
    use alloy::primitives::U64;

    fn base() -> Header {
        Header {
            number: 10,
            timestamp: 100,
            ..Default::default()
        }
    }

    fn with(number: Option<u64>, time: Option<u64>) -> SimBlock {
        SimBlock {
            block_overrides: Some(BlockOverrides {
                number: number.map(U64::from),
                time: time.map(U64::from),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn plan_fills_gaps_12_seconds_apart() {
        let plan = plan_chain(&base(), vec![with(None, None), with(Some(14), None)], 16).unwrap();
        let got: Vec<(u64, u64)> = plan.iter().map(|b| (b.number, b.timestamp)).collect();
        assert_eq!(got, vec![(11, 112), (12, 124), (13, 136), (14, 148)]);
    }

    #[test]
    fn plan_rejects_disorder_and_counts_fillers() {
        let code = |r: RpcResult<Vec<PlannedBlock>>| r.err().map(|e| e.code());
        assert_eq!(
            code(plan_chain(&base(), vec![with(Some(10), None)], 16)),
            Some(-38020)
        );
        assert_eq!(
            code(plan_chain(&base(), vec![with(None, Some(100))], 16)),
            Some(-38021)
        );
        assert_eq!(
            code(plan_chain(
                &base(),
                vec![with(Some(12), Some(200)), with(None, Some(150))],
                16
            )),
            Some(-38021)
        );
        assert_eq!(
            code(plan_chain(&base(), vec![with(Some(27), None)], 16)),
            Some(-38026)
        );
        assert!(plan_chain(&base(), vec![with(Some(26), None)], 16).is_ok());
    }
}
