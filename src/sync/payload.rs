//! Execution payloads the node builds: the block a set of payload attributes asks for on a
//! stored parent (for `testing_buildBlockV1` and for a validator's `engine_forkchoiceUpdated`
//! with attributes), its value to the fee recipient, and its Engine API forms.
//!
//! The block follows the chain's rules like any mined block: base fee and excess blob gas from
//! the parent, the gas limit moved toward [`GAS_LIMIT_TARGET`] by at most parent/1024 - 1 (as
//! geth's builder does with its default gas ceiling).

use alloy::{
    consensus::{
        transaction::Recovered, Header, Sealed, Transaction, TxEnvelope, EMPTY_OMMER_ROOT_HASH,
    },
    eips::{eip4895::Withdrawal, eip7594::BlobTransactionSidecarVariant},
    primitives::{Bytes, B256, U256},
    rpc::types::engine::{
        BlobsBundleV1, BlobsBundleV2, ExecutionPayloadV1, ExecutionPayloadV2, ExecutionPayloadV3,
        PayloadAttributes,
    },
};
use alloy_hardforks::EthereumHardforks;
use serde_json::{json, Value};
use std::sync::Arc;

use super::build::assemble_on;
use simnode_api::ChainSpec;

use crate::{
    exec::BlockError,
    store::{NewBlock, Store},
};

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

/// The fork whose rules a payload's timestamp falls under, as far as the Engine API's versions
/// tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PayloadFork {
    Paris,
    Shanghai,
    Cancun,
    Prague,
    Osaka,
    /// Amsterdam and later: payloads this node cannot give in any Engine API version it serves.
    Amsterdam,
}

impl PayloadFork {
    pub fn at(spec: &ChainSpec, timestamp: u64) -> Self {
        if spec.is_amsterdam_active_at_timestamp(timestamp) {
            Self::Amsterdam
        } else if spec.is_osaka_active_at_timestamp(timestamp) {
            Self::Osaka
        } else if spec.is_prague_active_at_timestamp(timestamp) {
            Self::Prague
        } else if spec.is_cancun_active_at_timestamp(timestamp) {
            Self::Cancun
        } else if spec.is_shanghai_active_at_timestamp(timestamp) {
            Self::Shanghai
        } else {
            Self::Paris
        }
    }
}

/// A built block and what it pays its fee recipient.
#[derive(Debug, Clone)]
pub struct BuiltPayload {
    pub block: NewBlock,
    /// The priority fees of its transactions (the Engine API's `blockValue`).
    pub value: U256,
    pub fork: PayloadFork,
    /// The sidecars of its blob transactions, in block order (the blobs bundle a proposer
    /// publishes); each of the fork's version: EIP-7594 cell proofs from Osaka on.
    pub sidecars: Vec<Arc<BlobTransactionSidecarVariant>>,
}

impl PayloadFork {
    /// Whether a blob transaction with `sidecar` can go into a payload of this fork: its
    /// blobs bundle carries one proof per blob before Osaka and one per cell from it on.
    pub fn takes_sidecar(self, sidecar: &BlobTransactionSidecarVariant) -> bool {
        match sidecar {
            BlobTransactionSidecarVariant::Eip4844(_) => {
                matches!(self, Self::Cancun | Self::Prague)
            }
            BlobTransactionSidecarVariant::Eip7594(_) => self >= Self::Osaka,
        }
    }
}

/// Builds the block `attributes` ask for on `parent` from `candidates`, in order, without
/// storing it. The attributes must already be checked against the parent and the fork
/// (timestamp after the parent's, withdrawals from Shanghai on, the beacon root from Cancun on).
/// With `skip_invalid`, candidates that cannot be included are left out, as a block producer
/// does; without, the first such one fails the build.
pub fn build(
    store: &Store,
    parent: &Sealed<Header>,
    attributes: &PayloadAttributes,
    extra_data: Bytes,
    candidates: &[Recovered<TxEnvelope>],
    skip_invalid: bool,
) -> Result<BuiltPayload, BlockError> {
    let spec = store.spec().clone();
    let timestamp = attributes.timestamp;
    let withdrawals: Option<Vec<Withdrawal>> = attributes.withdrawals.clone();
    let header = Header {
        parent_hash: parent.hash(),
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: attributes.suggested_fee_recipient,
        number: parent.number + 1,
        gas_limit: next_gas_limit(parent.gas_limit, GAS_LIMIT_TARGET),
        timestamp,
        extra_data,
        mix_hash: attributes.prev_randao,
        base_fee_per_gas: spec.next_base_fee(parent),
        withdrawals_root: withdrawals.as_ref().map(|_| B256::ZERO),
        excess_blob_gas: spec.next_excess_blob_gas(parent, timestamp),
        blob_gas_used: spec.is_cancun_active_at_timestamp(timestamp).then_some(0),
        parent_beacon_block_root: attributes.parent_beacon_block_root,
        ..Default::default()
    };
    let (block, _changes) =
        assemble_on(store, parent, header, withdrawals, candidates, skip_invalid)?;

    let base_fee = block.header.base_fee_per_gas.unwrap_or_default();
    let mut value = U256::ZERO;
    let mut cumulative = 0u64;
    for (tx, receipt) in block.body.transactions.iter().zip(&block.receipts) {
        let used = receipt.cumulative_gas_used() - cumulative;
        cumulative = receipt.cumulative_gas_used();
        let tip = tx.effective_tip_per_gas(base_fee).unwrap_or_default();
        value += U256::from(tip) * U256::from(used);
    }
    Ok(BuiltPayload {
        block,
        value,
        fork: PayloadFork::at(&spec, timestamp),
        sidecars: Vec::new(),
    })
}

impl BuiltPayload {
    fn consensus_block(&self) -> alloy::consensus::Block<TxEnvelope> {
        alloy::consensus::Block {
            header: self.block.header.inner().clone(),
            body: self.block.body.clone(),
        }
    }

    /// `ExecutionPayloadV1` (before Shanghai) or `V2` (from it), as `engine_getPayloadV1/V2`
    /// give it.
    pub fn payload_v1_or_v2(&self) -> Value {
        let hash = self.block.header.hash();
        let block = self.consensus_block();
        if block.body.withdrawals.is_some() {
            json!(ExecutionPayloadV2::from_block_unchecked(hash, &block))
        } else {
            json!(ExecutionPayloadV1::from_block_unchecked(hash, &block))
        }
    }

    /// The envelope of `engine_getPayloadV3` and later (and `testing_buildBlockV1`): the
    /// `ExecutionPayloadV3`, its value, the blobs bundle of its blob transactions and, from
    /// Prague on, the requests.
    pub fn envelope_v3(&self, with_requests: bool) -> Value {
        let payload = ExecutionPayloadV3::from_block_unchecked(
            self.block.header.hash(),
            &self.consensus_block(),
        );
        let mut envelope = json!({
            "executionPayload": payload,
            "blockValue": self.value,
            "blobsBundle": self.blobs_bundle(),
            "shouldOverrideBuilder": false,
        });
        if with_requests {
            // Engine API form: only request types with data.
            let requests: Vec<&Bytes> =
                self.block.requests.iter().filter(|r| r.len() > 1).collect();
            envelope["executionRequests"] = json!(requests);
        }
        envelope
    }

    /// The blobs bundle: `BlobsBundleV2` (a proof per cell) from Osaka on, `BlobsBundleV1`
    /// (a proof per blob) before. Empty when the block has no blob transactions.
    fn blobs_bundle(&self) -> Value {
        if self.fork >= PayloadFork::Osaka {
            json!(BlobsBundleV2::new(
                self.sidecars.iter().filter_map(|s| s.as_eip7594().cloned())
            ))
        } else {
            json!(BlobsBundleV1::new(
                self.sidecars.iter().filter_map(|s| s.as_eip4844().cloned())
            ))
        }
    }
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
