//! `testing_buildBlockV1`: builds a block on a stored parent from given payload attributes and
//! transactions, the way a block builder would, and answers with its execution payload
//! without storing anything (hive uses it to check block building).
//!
//! The block follows the chain's rules like any mined block (see [`super::payload`]), every
//! transaction included in the order given. A transaction that cannot be included is an error
//! naming it (nothing is skipped). Transactions are taken in their canonical (block) encoding;
//! a blob transaction's sidecar cannot travel in that form, so `blobsBundle` is always empty.

use std::sync::Arc;

use alloy::{
    consensus::{
        transaction::{Recovered, SignerRecoverable},
        TxEnvelope,
    },
    eips::{eip2718::Decodable2718, eip4895::Withdrawal},
    primitives::{Bytes, B256},
    rpc::types::engine::PayloadAttributes,
};
use alloy_hardforks::EthereumHardforks;
use jsonrpsee::{types::ErrorObjectOwned, RpcModule};
use serde_json::Value;

use super::payload;
use crate::{exec::BlockError, store::Store};

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

    let attributes = PayloadAttributes {
        withdrawals,
        parent_beacon_block_root: beacon_root,
        ..attributes
    };
    let built = payload::build(store, &parent, &attributes, extra_data, &candidates, false)
        .map_err(|e| match e {
            BlockError::Store(e) => internal(&e),
            BlockError::Execution { error, .. } => server_error(error.to_string()),
            other => server_error(other.to_string()),
        })?;
    Ok(built.envelope_v3(true))
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
