//! Building a block on a stored parent from candidate transactions, without storing it: the
//! dev miner, Engine API payloads, `testing_buildBlockV1` and the pending block all build this
//! way, through the executor that imports blocks.

use std::time::{SystemTime, UNIX_EPOCH};

use alloy::{
    consensus::{
        constants::EMPTY_WITHDRAWALS, proofs::calculate_transaction_root, transaction::Recovered,
        BlockBody, Header, Sealed, Transaction, TxEnvelope, EMPTY_OMMER_ROOT_HASH,
    },
    eips::{eip4844::DATA_GAS_PER_BLOB, eip4895::Withdrawal},
    primitives::{keccak256, Address, Sealable, B256},
};
use alloy_hardforks::EthereumHardforks;
use simnode_api::{
    impersonation::{self, IMPERSONATION_EXTRA_DATA},
    StateChanges,
};

use crate::{
    exec::{self, BlockError},
    store::{NewBlock, Store},
};

/// The wall clock, in seconds.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The header fields of the next block that are known before execution.
pub fn next_header(store: &Store, parent: &Sealed<Header>, timestamp: u64) -> Header {
    let spec = store.spec();
    let number = parent.number + 1;
    let cancun = spec.is_cancun_active_at_timestamp(timestamp);
    Header {
        parent_hash: parent.hash(),
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: Address::ZERO,
        number,
        gas_limit: parent.gas_limit,
        timestamp,
        // A deterministic stand-in for the beacon chain's randomness.
        mix_hash: keccak256(number.to_be_bytes()),
        base_fee_per_gas: spec.next_base_fee(parent),
        withdrawals_root: spec
            .is_shanghai_active_at_timestamp(timestamp)
            .then_some(EMPTY_WITHDRAWALS),
        excess_blob_gas: spec.next_excess_blob_gas(parent, timestamp),
        blob_gas_used: cancun.then_some(0),
        parent_beacon_block_root: cancun.then_some(B256::ZERO),
        ..Default::default()
    }
}

/// Marks `header` when any of `candidates` is impersonated. The marker turns EIP-3607 off for
/// the block, here and in every replay of it. It goes on when any candidate is impersonated,
/// included or not: what is included depends on the rules the block runs by.
pub fn mark_impersonation(header: &mut Header, candidates: &[Recovered<TxEnvelope>]) {
    if candidates.iter().any(impersonation::is_impersonated) {
        header.extra_data = alloy::primitives::Bytes::from_static(IMPERSONATION_EXTRA_DATA);
    }
}

/// Builds a block on the stored block `parent` from `header` (the fields known before
/// execution; the rest are filled in), `withdrawals` and `candidates` in order, without
/// storing it. With `skip_invalid`, transactions that cannot be included are left out (as a
/// miner does); without, the first one fails the build.
pub fn assemble_on(
    store: &Store,
    parent: &Sealed<Header>,
    header: Header,
    withdrawals: Option<Vec<Withdrawal>>,
    candidates: &[Recovered<TxEnvelope>],
    skip_invalid: bool,
) -> Result<(NewBlock, StateChanges), BlockError> {
    assemble(
        store,
        parent,
        header,
        withdrawals,
        candidates,
        skip_invalid,
        |_| Ok(()),
    )
}

/// [`assemble_on`], with `after_run` given the block's changes to add to before its state root
/// (a dev chain's state edit).
pub fn assemble(
    store: &Store,
    parent: &Sealed<Header>,
    mut header: Header,
    withdrawals: Option<Vec<Withdrawal>>,
    candidates: &[Recovered<TxEnvelope>],
    skip_invalid: bool,
    after_run: impl FnOnce(&mut StateChanges) -> Result<(), BlockError>,
) -> Result<(NewBlock, StateChanges), BlockError> {
    let spec = store.spec().clone();
    // Blob gas is limited per block; the executor does not enforce it, the builder must.
    let max_blob_gas = spec
        .blob_params_at(header.timestamp)
        .map_or(0, |p| p.max_blob_gas_per_block());
    let mut blob_gas = 0u64;
    let mut txs: Vec<(&TxEnvelope, Address)> = Vec::with_capacity(candidates.len());
    for (index, tx) in candidates.iter().enumerate() {
        let needed = tx
            .blob_versioned_hashes()
            .map_or(0, |h| h.len() as u64 * DATA_GAS_PER_BLOB);
        if needed > 0 && blob_gas + needed > max_blob_gas {
            if skip_invalid {
                continue;
            }
            return Err(BlockError::InvalidHeader {
                number: header.number,
                reason: format!(
                    "transaction {index}: blob gas {} over the block's limit {max_blob_gas}",
                    blob_gas + needed
                ),
            });
        }
        blob_gas += needed;
        txs.push((tx.inner(), tx.signer()));
    }
    let mut run = exec::run_block(
        store,
        parent,
        &header,
        &[],
        withdrawals.as_deref(),
        &txs,
        skip_invalid,
    )?;
    after_run(&mut run.changes)?;

    let transactions: Vec<TxEnvelope> = run.included.iter().map(|&i| txs[i].0.clone()).collect();
    let senders: Vec<Address> = run.included.iter().map(|&i| txs[i].1).collect();
    header.transactions_root = calculate_transaction_root(&transactions);
    header.receipts_root = exec::receipts_root(&run.receipts);
    header.logs_bloom = exec::logs_bloom(&run.receipts);
    header.gas_used = run.gas_used;
    if header.blob_gas_used.is_some() {
        header.blob_gas_used = Some(run.blob_gas_used);
    }
    header.withdrawals_root = withdrawals
        .as_ref()
        .map(|w| alloy::consensus::proofs::calculate_withdrawals_root(w));
    header.requests_hash = run.requests_hash;
    header.state_root = store.state_root_on(parent.number, &run.changes)?;
    let block = NewBlock {
        header: header.seal_slow(),
        body: BlockBody {
            transactions,
            ommers: vec![],
            withdrawals: withdrawals.map(Into::into),
        },
        senders,
        receipts: run.receipts,
        requests: run.requests,
    };
    Ok((block, run.changes))
}
