//! `testing_buildBlockV1`: builds a block on a stored parent from given payload attributes and
//! transactions, the way a block builder would, and answers with its execution payload
//! without storing anything (hive uses it to check block building).
//!
//! The block follows the chain's rules like any mined block: base fee and excess blob gas from
//! the parent, the gas limit moved toward [`GAS_LIMIT_TARGET`] by at most parent/1024 - 1 (as
//! geth's builder does with its default gas ceiling), every transaction included in the order
//! given. A transaction that cannot be included is an error naming it (nothing is skipped).
//! Transactions are taken in their canonical (block) encoding; a blob transaction's sidecar
//! cannot travel in that form, so `blobsBundle` is always empty.

use std::sync::Arc;

use alloy::{
    consensus::{
        transaction::{Recovered, SignerRecoverable},
        Header, Transaction, TxEnvelope, EMPTY_OMMER_ROOT_HASH,
    },
    eips::{eip2718::Decodable2718, eip4895::Withdrawal},
    primitives::{Bytes, B256, U256},
    rpc::types::engine::{ExecutionPayloadV3, PayloadAttributes},
};
use alloy_hardforks::EthereumHardforks;
use jsonrpsee::{types::ErrorObjectOwned, RpcModule};
use serde_json::{json, Value};

use super::dev::assemble_on;
use crate::{exec::BlockError, store::Store};

/// The gas limit the builder moves toward (geth's default gas ceiling).
pub const GAS_LIMIT_TARGET: u64 = 60_000_000;
/// No block gas limit goes below this (the protocol's minimum).
const MIN_GAS_LIMIT: u64 = 5000;

/// The gas limit of a child of a block with `parent` limit, moved toward `target` by at most
/// `parent / 1024 - 1` (the largest step the protocol's bound allows).
pub fn next_gas_limit(parent: u64, target: u64) -> u64 {
    let target = target.max(MIN_GAS_LIMIT);
    let step = (parent / 1024).saturating_sub(1);
    if parent < target {
        (parent + step).min(target)
    } else if parent > target {
        parent.saturating_sub(step).max(target)
    } else {
        parent
    }
}

fn invalid_params(msg: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32602, msg.into(), None::<()>)
}

fn server_error(msg: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32000, msg.into(), None::<()>)
}

/// Builds the block; see the module docs.
pub fn build_block(
    store: &Store,
    parent_hash: B256,
    attributes: PayloadAttributes,
    transactions: Vec<Bytes>,
    extra_data: Bytes,
) -> Result<Value, ErrorObjectOwned> {
    let internal =
        |e: &dyn std::fmt::Display| ErrorObjectOwned::owned(-32603, e.to_string(), None::<()>);
    let spec = store.spec().clone();
    let number = store
        .number_of(&parent_hash)
        .map_err(|e| internal(&e))?
        .ok_or_else(|| server_error(format!("parent block {parent_hash} not found")))?;
    let parent = store
        .header_raw(number)
        .map_err(|e| internal(&e))?
        .ok_or_else(|| server_error(format!("parent block {parent_hash} not found")))?;
    let timestamp = attributes.timestamp;
    if timestamp <= parent.timestamp {
        return Err(invalid_params(format!(
            "timestamp {timestamp} is not after the parent's {}",
            parent.timestamp
        )));
    }
    if extra_data.len() > 32 {
        return Err(invalid_params(format!(
            "extra data is {} bytes, at most 32 allowed",
            extra_data.len()
        )));
    }
    let shanghai = spec.is_shanghai_active_at_timestamp(timestamp);
    let withdrawals: Option<Vec<Withdrawal>> = match (shanghai, attributes.withdrawals) {
        (true, Some(w)) => Some(w),
        (true, None) => return Err(invalid_params("withdrawals are required from Shanghai on")),
        (false, Some(_)) => {
            return Err(invalid_params(
                "withdrawals are not allowed before Shanghai",
            ))
        }
        (false, None) => None,
    };
    let cancun = spec.is_cancun_active_at_timestamp(timestamp);
    let beacon_root = match (cancun, attributes.parent_beacon_block_root) {
        (true, Some(root)) => Some(root),
        (true, None) => {
            return Err(invalid_params(
                "parentBeaconBlockRoot is required from Cancun on",
            ))
        }
        (false, Some(_)) => {
            return Err(invalid_params(
                "parentBeaconBlockRoot is not allowed before Cancun",
            ))
        }
        (false, None) => None,
    };

    let mut candidates = Vec::with_capacity(transactions.len());
    for (index, raw) in transactions.iter().enumerate() {
        let tx = TxEnvelope::decode_2718(&mut raw.as_ref())
            .map_err(|e| invalid_params(format!("transaction {index}: cannot decode: {e}")))?;
        let signer = tx
            .recover_signer()
            .map_err(|e| invalid_params(format!("transaction {index}: invalid signature: {e}")))?;
        candidates.push(Recovered::new_unchecked(tx, signer));
    }

    let header = Header {
        parent_hash,
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: attributes.suggested_fee_recipient,
        number: number + 1,
        gas_limit: next_gas_limit(parent.gas_limit, GAS_LIMIT_TARGET),
        timestamp,
        extra_data,
        mix_hash: attributes.prev_randao,
        base_fee_per_gas: spec.next_base_fee(&parent),
        withdrawals_root: withdrawals.as_ref().map(|_| B256::ZERO),
        excess_blob_gas: spec.next_excess_blob_gas(&parent, timestamp),
        blob_gas_used: cancun.then_some(0),
        parent_beacon_block_root: beacon_root,
        ..Default::default()
    };
    let (block, _changes) = assemble_on(store, &parent, header, withdrawals, &candidates, false)
        .map_err(|e| match e {
            BlockError::Store(e) => internal(&e),
            BlockError::Execution { source, .. } => server_error(source.to_string()),
            other => server_error(other.to_string()),
        })?;

    // The fee recipient's reward: each transaction's priority fee on the gas it used.
    let base_fee = block.header.base_fee_per_gas.unwrap_or_default();
    let mut block_value = U256::ZERO;
    let mut cumulative = 0u64;
    for (tx, receipt) in block.body.transactions.iter().zip(&block.receipts) {
        let used = receipt.cumulative_gas_used() - cumulative;
        cumulative = receipt.cumulative_gas_used();
        let tip = tx.effective_tip_per_gas(base_fee).unwrap_or_default();
        block_value += U256::from(tip) * U256::from(used);
    }
    let hash = block.header.hash();
    let consensus_block = alloy::consensus::Block {
        header: block.header.inner().clone(),
        body: block.body.clone(),
    };
    let payload = ExecutionPayloadV3::from_block_unchecked(hash, &consensus_block);
    // Engine API form: only request types with data.
    let requests: Vec<&Bytes> = block.requests.iter().filter(|r| r.len() > 1).collect();
    Ok(json!({
        "executionPayload": payload,
        "blockValue": block_value,
        "blobsBundle": {"commitments": [], "proofs": [], "blobs": []},
        "executionRequests": requests,
        "shouldOverrideBuilder": false,
    }))
}

/// The most positional params `testing_buildBlockV1` reads.
pub const METHOD_PARAMS: simnode_api::MethodParams = &[("testing_buildBlockV1", 4)];

/// `testing_buildBlockV1 [parentHash, payloadAttributes, transactions, extraData]`.
pub fn rpc_module(store: Arc<Store>) -> anyhow::Result<RpcModule<Arc<Store>>> {
    let mut module = RpcModule::new(store);
    module.register_blocking_method("testing_buildBlockV1", |params, store, _| {
        let mut seq = params.sequence();
        let parent: B256 = seq.next()?;
        let attributes: PayloadAttributes = seq.next()?;
        let transactions: Option<Vec<Bytes>> = seq.optional_next()?;
        let extra_data: Option<Bytes> = seq.optional_next()?;
        build_block(
            &store,
            parent,
            attributes,
            transactions.unwrap_or_default(),
            extra_data.unwrap_or_default(),
        )
    })?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gas_limit_moves_toward_the_target_by_the_allowed_step() {
        // 200M parent, 60M target: down by 200M/1024 - 1.
        assert_eq!(next_gas_limit(200_000_000, 60_000_000), 199_804_689);
        assert_eq!(next_gas_limit(30_000_000, 60_000_000), 30_029_295);
        assert_eq!(next_gas_limit(60_000_000, 60_000_000), 60_000_000);
        assert_eq!(next_gas_limit(59_999_000, 60_000_000), 60_000_000);
        assert_eq!(next_gas_limit(60_001_000, 60_000_000), 60_000_000);
        // A target under the protocol minimum counts as the minimum; the step still applies.
        assert_eq!(next_gas_limit(6000, 0), 5996);
        assert_eq!(next_gas_limit(5001, 0), 5000);
    }
}
