//! `eth_callBundle` (Flashbots' method, as reth serves it): signed transactions run in order on
//! a block's state as the first transactions of a block to come, each with what it paid that
//! block's coinbase; how a searcher checks a bundle before sending it to a builder.
//!
//! The one param, `{txs, blockNumber, stateBlockNumber, transactionIndex?, coinbase?,
//! timestamp?, timeout?, gasLimit?, difficulty?, baseFee?}`:
//! - `txs`: signed transactions as eth_sendRawTransaction takes them (a blob transaction may
//!   bring its sidecar, checked as there); at most [`MAX_TXS`];
//! - the state: after block `stateBlockNumber` (a number or tag), or after its first
//!   `transactionIndex` transactions (-1, the default: all of them);
//! - the block the bundle runs in: number `blockNumber`, time `timestamp` (default: the state
//!   block's + 12 s) and that number's and time's fork rules; coinbase, difficulty and base fee
//!   the state block's unless given; gas limit the RPC gas cap, or a smaller `gasLimit`;
//! - `timeout`, in milliseconds, shortens `--rpc.evm-timeout`.
//!
//! Transactions are checked as a block checks them (nonce, fee cap against the base fee,
//! balance); one that could not be included fails the request, naming it. Per transaction the
//! answer has `gasUsed`, `gasPrice` (its tip per gas above the base fee: what the coinbase
//! earns per gas), `gasFees` (the two multiplied), `coinbaseDiff` (the coinbase's balance
//! change), `ethSentToCoinbase` (the change beyond the fees: direct payments), and `value` (the
//! output) or `revert` (the revert data, empty for a halt); for the bundle the sums,
//! `bundleGasPrice` (coinbaseDiff / totalGasUsed) and `bundleHash` (keccak of the transaction
//! hashes, in order).

use std::time::Instant;

use alloy::{
    consensus::{transaction::SignerRecoverable, Transaction as _, TxEnvelope},
    primitives::{Address, Bytes, Keccak256, B256, U256},
    rpc::types::mev::{EthCallBundle, EthCallBundleResponse, EthCallBundleTransactionResult},
};
use alloy_evm::FromRecoveredTx;
use revm::{
    context::{result::ExecutionResult, TxEnv},
    DatabaseRef,
};
use simnode_api::{
    call::{self, Bounds, CallDb},
    ModuleContext, RpcError, RpcResult,
};

use crate::{evm, send};

/// Most transactions one bundle may hold.
pub const MAX_TXS: usize = 1_000;

/// Runs `bundle` on the state of canonical block `state_block`.
pub fn call_bundle(
    ctx: &ModuleContext,
    bundle: EthCallBundle,
    state_block: u64,
    bounds: Bounds,
) -> RpcResult<EthCallBundleResponse> {
    let EthCallBundle {
        txs,
        block_number,
        transaction_index,
        coinbase,
        timestamp,
        gas_limit,
        difficulty,
        base_fee,
        ..
    } = bundle;
    if txs.is_empty() {
        return Err(RpcError::invalid_params("bundle missing txs"));
    }
    if block_number == 0 {
        return Err(RpcError::invalid_params("bundle missing blockNumber"));
    }
    if txs.len() > MAX_TXS {
        return Err(RpcError::LimitExceeded(format!(
            "{} transactions in one bundle; at most {MAX_TXS}",
            txs.len()
        )));
    }
    let transactions = txs
        .iter()
        .enumerate()
        .map(|(i, raw)| recovered(i, raw))
        .collect::<RpcResult<Vec<_>>>()?;

    let block = ctx
        .chain
        .block(state_block)?
        .ok_or(RpcError::HeaderNotFound)?;
    let mut header = block.header.inner().clone();
    header.number = block_number;
    header.timestamp = match timestamp {
        Some(time) => time,
        None => header.timestamp.saturating_add(12),
    };
    // A bundle block moved into Cancun from a state block before it needs the blob gas
    // excess that fork's blocks carry: its parent's (the state block's) child's.
    if header.excess_blob_gas.is_none() {
        header.excess_blob_gas = ctx
            .spec
            .next_excess_blob_gas(block.header.inner(), header.timestamp);
    }
    header.beneficiary = coinbase.unwrap_or(header.beneficiary);
    header.difficulty = difficulty.unwrap_or(header.difficulty);
    if let Some(fee) = base_fee {
        let fee = u64::try_from(fee)
            .map_err(|_| RpcError::invalid_params("baseFee overflows 64 bits"))?;
        header.base_fee_per_gas = Some(fee);
    }
    header.gas_limit = match gas_limit {
        Some(limit) if limit > bounds.gas_cap => {
            return Err(RpcError::invalid_params(format!(
                "gasLimit {limit} is above the RPC gas cap {}",
                bounds.gas_cap
            )))
        }
        Some(limit) => limit,
        None => bounds.gas_cap,
    };
    let blob_gas: u64 = transactions
        .iter()
        .filter_map(|(tx, _)| tx.blob_gas_used())
        .sum();
    if blob_gas > 0 {
        let most = ctx
            .spec
            .blob_params_at(header.timestamp)
            .map_or(0, |params| params.max_blob_gas_per_block());
        if blob_gas > most {
            return Err(RpcError::invalid_params(format!(
                "blob gas usage exceeds the limit of {most} gas per block"
            )));
        }
    }
    let env = ctx.spec.evm_env(&header);

    let mut db = call::bundles_start(
        ctx,
        &block,
        transaction_index.and_then(|i| i.index()),
        None,
        bounds.deadline,
        || bounds.timed_out(),
    )?;
    let coinbase = env.block_env.beneficiary;
    let base_fee = env.block_env.basefee;
    let initial = balance(&db, coinbase)?;
    let mut before = initial;
    let mut total_gas_used = 0u64;
    let mut total_fees = U256::ZERO;
    let mut hasher = Keccak256::new();
    let mut results = Vec::with_capacity(transactions.len());
    for (i, (tx, sender)) in transactions.into_iter().enumerate() {
        if Instant::now() >= bounds.deadline {
            return Err(bounds.timed_out());
        }
        let hash = *tx.tx_hash();
        hasher.update(hash);
        let result = evm::run_and_commit(
            &mut db,
            &env,
            &simnode_api::call::PrecompileEdits::default(),
            TxEnv::from_recovered_tx(&tx, sender),
            &bounds,
        )
        .map_err(|err| located(err, i, hash))?;
        let gas_used = result.tx_gas_used();
        // The run passed the fee checks, so the fee cap covers the base fee.
        let tip = tx.effective_tip_per_gas(base_fee).unwrap_or_default();
        let gas_fees = U256::from(gas_used) * U256::from(tip);
        let after = balance(&db, coinbase)?;
        let coinbase_diff = after.saturating_sub(before);
        before = after;
        total_gas_used += gas_used;
        total_fees += gas_fees;
        let (value, revert) = match result {
            ExecutionResult::Success { output, .. } => (Some(output.into_data()), None),
            ExecutionResult::Revert { output, .. } => (None, Some(output)),
            ExecutionResult::Halt { .. } => (None, Some(Bytes::new())),
        };
        results.push(EthCallBundleTransactionResult {
            coinbase_diff,
            eth_sent_to_coinbase: coinbase_diff.saturating_sub(gas_fees),
            from_address: sender,
            gas_fees,
            gas_price: U256::from(tip),
            gas_used,
            to_address: tx.to(),
            tx_hash: hash,
            value,
            revert,
        });
    }
    let coinbase_diff = before.saturating_sub(initial);
    Ok(EthCallBundleResponse {
        bundle_hash: hasher.finalize(),
        bundle_gas_price: coinbase_diff
            .checked_div(U256::from(total_gas_used))
            .unwrap_or_default(),
        coinbase_diff,
        eth_sent_to_coinbase: coinbase_diff.saturating_sub(total_fees),
        gas_fees: total_fees,
        results,
        state_block_number: state_block,
        total_gas_used,
    })
}

/// Transaction `i` of the bundle, decoded and its sender recovered.
fn recovered(i: usize, raw: &Bytes) -> RpcResult<(TxEnvelope, Address)> {
    let tx = simnode_api::raw_tx::decode(raw)
        .and_then(send::without_sidecar)
        .map_err(|err| located(err, i, B256::ZERO))?;
    let sender = tx
        .recover_signer()
        .map_err(|_| RpcError::Server(format!("tx {i} ({}): invalid sender", tx.tx_hash())))?;
    Ok((tx, sender))
}

fn balance(db: &CallDb, address: Address) -> RpcResult<U256> {
    Ok(db
        .basic_ref(address)?
        .map(|account| account.balance)
        .unwrap_or_default())
}

/// `err` of transaction `i` (hash `hash`, zero while not decoded), saying which it was (same
/// code).
fn located(err: RpcError, i: usize, hash: B256) -> RpcError {
    let at = |msg: String| {
        if hash.is_zero() {
            format!("tx {i}: {msg}")
        } else {
            format!("tx {i} ({hash}): {msg}")
        }
    };
    match err {
        RpcError::InvalidParams(msg) => RpcError::InvalidParams(at(msg)),
        RpcError::Server(msg) => RpcError::Server(at(msg)),
        RpcError::TransactionRejected(msg) => RpcError::TransactionRejected(at(msg)),
        other => other,
    }
}
