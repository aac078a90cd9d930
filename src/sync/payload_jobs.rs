//! Payloads built for a validator through the Engine API: `engine_forkchoiceUpdatedV1..V3`
//! with payload attributes builds a block on the new head from the pool's transactions and
//! answers with its id; `engine_getPayloadV1..V5` hands the block out in the form of the fork
//! it belongs to. The block is not stored: it joins the chain when the consensus client sends it
//! back with `engine_newPayload`, like any other.
//!
//! The block is built when the attributes arrive, from what the pool holds then, and built again
//! when the consensus client asks for it (if its parent is still the head): the richer of the
//! two is kept, so transactions that came in meanwhile make it in. A blob transaction goes in
//! only if it came with a sidecar of the payload's fork (a proof per blob before Osaka, per
//! cell from it on), which the payload's blobs bundle carries for the proposer to publish.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use alloy::{
    consensus::{Header, Sealed},
    primitives::{keccak256, Bytes, B64, U256},
    rpc::types::engine::{PayloadAttributes, PayloadId},
};
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{json, Value};

use super::payload::{self, BuiltPayload, PayloadFork};
use crate::{pool::Pool, store::Store};

/// Built payloads kept for `engine_getPayload`, newest last; older ones are forgotten (a
/// consensus client asks for a payload within its slot).
const KEPT_PAYLOADS: usize = 16;

/// The extra data of the blocks the node builds.
const EXTRA_DATA: &[u8] = b"simnode";

/// -38005, the Engine API's answer for a payload, attributes or request of a fork the method
/// version does not serve.
pub(super) fn unsupported_fork(what: impl std::fmt::Display) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-38005, format!("Unsupported fork: {what}"), None::<()>)
}

fn invalid_attributes(what: impl std::fmt::Display) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        -38003,
        format!("Invalid payload attributes: {what}"),
        None::<()>,
    )
}

/// The forks whose payloads version `version` of `engine_forkchoiceUpdated` builds.
fn forkchoice_version_builds(version: u8, fork: PayloadFork) -> bool {
    match version {
        1 => fork == PayloadFork::Paris,
        2 => matches!(fork, PayloadFork::Paris | PayloadFork::Shanghai),
        3 => matches!(
            fork,
            PayloadFork::Cancun | PayloadFork::Prague | PayloadFork::Osaka
        ),
        _ => false,
    }
}

/// Checks `attributes` for a build on `parent` through `engine_forkchoiceUpdatedV{version}`
/// and gives the fork of the payload, in the spec's order. First the structure: V3's has
/// withdrawals and the beacon root, V1's and V2's no beacon root, none a later version's fields.
/// Then the fork the method version builds (V1 Paris, V2 Paris and Shanghai, V3 Cancun to Osaka;
/// -38005), then withdrawals against the fork (from Shanghai on), then the timestamp, which must
/// be after the parent's. A wrong structure is -38003 for V2 and V3, as the spec words it, and
/// -32602 for V1, which the spec leaves open (geth's code).
pub fn check_attributes(
    store: &Store,
    version: u8,
    parent: &Header,
    attributes: &PayloadAttributes,
) -> Result<PayloadFork, ErrorObjectOwned> {
    let wrong_structure = |what: String| {
        if version == 1 {
            ErrorObjectOwned::owned(-32602, format!("Invalid params: {what}"), None::<()>)
        } else {
            invalid_attributes(what)
        }
    };
    // `slotNumber` and `targetGasLimit` belong to later versions of the structure.
    let later_fields = attributes.slot_number.is_some() || attributes.target_gas_limit.is_some();
    if version >= 3 {
        if attributes.withdrawals.is_none()
            || attributes.parent_beacon_block_root.is_none()
            || later_fields
        {
            return Err(invalid_attributes(
                "PayloadAttributesV3 has withdrawals and parentBeaconBlockRoot, and no later fields",
            ));
        }
    } else if attributes.parent_beacon_block_root.is_some() || later_fields {
        return Err(wrong_structure(format!(
            "PayloadAttributesV{version} has no parentBeaconBlockRoot or later fields"
        )));
    }
    let fork = PayloadFork::at(store.spec(), attributes.timestamp);
    if !forkchoice_version_builds(version, fork) {
        return Err(unsupported_fork(format!(
            "engine_forkchoiceUpdatedV{version} does not build {fork:?} payloads (timestamp {})",
            attributes.timestamp
        )));
    }
    if attributes.withdrawals.is_some() != (fork >= PayloadFork::Shanghai) {
        return Err(wrong_structure(format!(
            "{fork:?} payload attributes {} withdrawals",
            if fork >= PayloadFork::Shanghai {
                "need"
            } else {
                "cannot have"
            }
        )));
    }
    if attributes.timestamp <= parent.timestamp {
        return Err(invalid_attributes(format!(
            "timestamp {} is not after the head's {}",
            attributes.timestamp, parent.timestamp
        )));
    }
    Ok(fork)
}

/// The id of a build: the same parent, attributes and method version give the same id, so a
/// consensus client repeating its request gets the payload it already has.
pub fn payload_id(
    parent: &Sealed<Header>,
    version: u8,
    attributes: &PayloadAttributes,
) -> PayloadId {
    let mut preimage = parent.hash().to_vec();
    preimage.push(version);
    // Serializing the attributes covers every field, withdrawals included, in one fixed order.
    preimage.extend(serde_json::to_vec(attributes).unwrap_or_default());
    let hash = keccak256(preimage);
    PayloadId(B64::from_slice(&hash[..8]))
}

/// Builds a block on `parent` from the pool, leaving out what cannot be included, and what no
/// other node could take from a proposer: blob transactions without a sidecar of the
/// payload's fork to publish, and a dev node's impersonated transactions. Sidecars with a
/// proof per blob that an Osaka payload leaves out are converted to cell proofs in the
/// background, for the builds after it.
pub fn build_from_pool(
    store: &Store,
    pool: &Arc<Pool>,
    parent: &Sealed<Header>,
    attributes: &PayloadAttributes,
) -> Result<BuiltPayload, ErrorObjectOwned> {
    let fork = PayloadFork::at(store.spec(), attributes.timestamp);
    let mut sidecars = HashMap::new();
    let mut per_blob = Vec::new();
    let base_fee = store.spec().next_base_fee(parent).unwrap_or(0);
    let candidates: Vec<_> = pool
        .by_price_and_nonce(base_fee)
        .into_iter()
        .filter(|tx| {
            if simnode_api::impersonation::is_impersonated(tx) {
                return false;
            }
            if !tx.inner().is_eip4844() {
                return true;
            }
            // Taken now: the transaction may leave the pool while the block is built.
            let hash = *tx.inner().tx_hash();
            match pool.sidecar(&hash) {
                Some(sidecar) if fork.takes_sidecar(&sidecar) => {
                    sidecars.insert(hash, sidecar);
                    true
                }
                // A proof per blob, which no block publishes from Osaka on.
                Some(_) if fork >= PayloadFork::Osaka => {
                    per_blob.push(hash);
                    false
                }
                _ => false,
            }
        })
        .collect();
    pool.convert_to_cell_proofs(per_blob);
    let mut built = payload::build(
        store,
        parent,
        attributes,
        Bytes::from_static(EXTRA_DATA),
        &candidates,
        true,
    )
    .map_err(|e| {
        ErrorObjectOwned::owned(-32603, format!("building the payload: {e}"), None::<()>)
    })?;
    built.sidecars = built
        .block
        .body
        .transactions
        .iter()
        .filter_map(|tx| sidecars.remove(tx.tx_hash()))
        .collect();
    Ok(built)
}

/// One build: what it was asked for and the best block built for it so far.
#[derive(Debug)]
struct Job {
    id: PayloadId,
    parent: Sealed<Header>,
    attributes: PayloadAttributes,
    built: Arc<BuiltPayload>,
}

/// The payloads built so far (the newest [`KEPT_PAYLOADS`]).
#[derive(Debug, Default)]
pub struct PayloadJobs {
    kept: Mutex<VecDeque<Job>>,
}

/// The forks whose payloads `engine_getPayloadV{version}` gives.
fn get_payload_version_gives(version: u8, fork: PayloadFork) -> bool {
    match version {
        1 => fork == PayloadFork::Paris,
        2 => matches!(fork, PayloadFork::Paris | PayloadFork::Shanghai),
        3 => fork == PayloadFork::Cancun,
        4 => fork == PayloadFork::Prague,
        5 => fork == PayloadFork::Osaka,
        _ => false,
    }
}

impl PayloadJobs {
    pub fn contains(&self, id: PayloadId) -> bool {
        self.lock().iter().any(|job| job.id == id)
    }

    pub fn keep(
        &self,
        id: PayloadId,
        parent: Sealed<Header>,
        attributes: PayloadAttributes,
        built: BuiltPayload,
    ) {
        let mut kept = self.lock();
        kept.retain(|job| job.id != id);
        if kept.len() == KEPT_PAYLOADS {
            kept.pop_front();
        }
        kept.push_back(Job {
            id,
            parent,
            attributes,
            built: Arc::new(built),
        });
    }

    /// `f` of build `id`, once checked that `engine_getPayloadV{version}` may give its payload:
    /// -38001 for an id the node did not give (or has forgotten), -38005 for a payload of a fork
    /// the version does not cover.
    fn with_job<R>(
        &self,
        version: u8,
        id: PayloadId,
        f: impl FnOnce(&Job) -> R,
    ) -> Result<R, ErrorObjectOwned> {
        let kept = self.lock();
        let job = kept
            .iter()
            .find(|job| job.id == id)
            .ok_or_else(|| ErrorObjectOwned::owned(-38001, "Unknown payload", None::<()>))?;
        let fork = job.built.fork;
        if !get_payload_version_gives(version, fork) {
            return Err(unsupported_fork(format!(
                "payload {id} is a {fork:?} payload, not one engine_getPayloadV{version} gives"
            )));
        }
        Ok(f(job))
    }

    /// What build `id` was asked for and what its block pays so far (checked as
    /// [`Self::answer`] checks it).
    pub fn request(
        &self,
        version: u8,
        id: PayloadId,
    ) -> Result<(Sealed<Header>, PayloadAttributes, U256), ErrorObjectOwned> {
        self.with_job(version, id, |job| {
            (job.parent.clone(), job.attributes.clone(), job.built.value)
        })
    }

    /// Keeps `built` for build `id` in place of the block it had.
    pub fn improve(&self, id: PayloadId, built: BuiltPayload) {
        if let Some(job) = self.lock().iter_mut().find(|job| job.id == id) {
            job.built = Arc::new(built);
        }
    }

    /// The answer of `engine_getPayloadV{version}` for `id`.
    pub fn answer(&self, version: u8, id: PayloadId) -> Result<Value, ErrorObjectOwned> {
        let built = self.with_job(version, id, |job| job.built.clone())?;
        Ok(match version {
            1 => built.payload_v1_or_v2(),
            2 => json!({"executionPayload": built.payload_v1_or_v2(), "blockValue": built.value}),
            3 => built.envelope_v3(false),
            _ => built.envelope_v3(true),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Job>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}
