//! The Engine API a consensus client drives the node with: `engine_newPayloadV1..V4` executes
//! and stores a block, `engine_forkchoiceUpdatedV1..V3` moves head/safe/finalized. What it only
//! reads (payload bodies, the client version) is in [`super::engine_reads`]; the public RPC's
//! `eth_` methods are served beside it ([`eth_namespace`]).
//!
//! A payload on top of the head is executed and stored, but readers are served it only once a
//! forkchoice update names it ([`Store::hold_new_blocks`]); a payload whose parent is unknown
//! answers SYNCING; a payload whose parent is known but is not the stored head (a side branch,
//! the sibling of a payload still waiting for its forkchoice included) is kept unexecuted in
//! the store's side table and answers ACCEPTED.
//!
//! Reorgs: forkchoiceUpdated to a side block (or to a canonical block below the head) finds the
//! common ancestor with the canonical chain, unwinds the canonical chain to it
//! ([`Store::unwind_to`], which moves the unwound blocks to the side table), then executes and
//! stores the new branch block by block through the normal import path. If a block of the new
//! branch is invalid, the answer is INVALID with `latestValidHash` the last valid ancestor, and
//! the previous canonical chain is re-executed from the side table. A reorg never unwinds more
//! than [`MAX_REORG_DEPTH`] blocks (-38006 Too deep reorg) nor below the finalized block
//! (-38002 Invalid forkchoice state). Transactions of unwound blocks that the new chain lacks go back to the pool.
//! forkchoiceUpdated with payload attributes builds a block for the proposer
//! ([`super::payload_jobs`]), which `engine_getPayloadV1..V5` hand out.

use std::{net::SocketAddr, sync::Arc};

use alloy::rpc::types::engine::{
    CancunPayloadFields, ExecutionPayload, ExecutionPayloadSidecar, ExecutionPayloadV1,
    ExecutionPayloadV2, ExecutionPayloadV3, ForkchoiceState, ForkchoiceUpdated, PayloadAttributes,
    PayloadError, PayloadId, PayloadStatus, PayloadStatusEnum, PraguePayloadFields,
};
use alloy::{
    consensus::{Block, Transaction, TxEnvelope},
    eips::eip7685::Requests,
    primitives::{Bytes, Sealable, B256, U64},
};
use anyhow::Context as _;
use jsonrpsee::{
    server::{ServerBuilder, ServerConfig, ServerHandle},
    types::ErrorObjectOwned,
    Methods, RpcModule,
};

use super::{
    engine_blobs, engine_reads,
    jwt::{JwtLayer, JwtSecret},
    payload_jobs::{self, PayloadJobs},
};
use crate::{exec, pool::Pool, store::Store};

/// Capabilities this node answers `engine_exchangeCapabilities` with.
/// The spec forbids listing `engine_exchangeCapabilities` itself.
const CAPABILITIES: &[&str] = &[
    "engine_newPayloadV1",
    "engine_newPayloadV2",
    "engine_newPayloadV3",
    "engine_newPayloadV4",
    "engine_forkchoiceUpdatedV1",
    "engine_forkchoiceUpdatedV2",
    "engine_forkchoiceUpdatedV3",
    "engine_getPayloadV1",
    "engine_getPayloadV2",
    "engine_getPayloadV3",
    "engine_getPayloadV4",
    "engine_getPayloadV5",
    "engine_getPayloadBodiesByHashV1",
    "engine_getPayloadBodiesByRangeV1",
    "engine_getClientVersionV1",
    "engine_getBlobsV1",
    "engine_getBlobsV2",
    "engine_getBlobsV3",
];

/// Deepest reorg (blocks unwound from the canonical chain) forkchoiceUpdated performs.
pub const MAX_REORG_DEPTH: u64 = 64;

#[derive(Debug, Clone)]
pub struct EngineApi {
    store: Arc<Store>,
    pool: Arc<Pool>,
    /// Serializes payloads and forkchoice updates: a reorg (unwind, then one import per block)
    /// must not interleave with another payload's import.
    serial: Arc<std::sync::Mutex<()>>,
    /// Payloads built for the consensus client's proposals.
    jobs: Arc<PayloadJobs>,
    /// Blocks found invalid, and those sent since that build on them (see [`InvalidTips`]).
    invalid: Arc<std::sync::Mutex<InvalidTips>>,
}

/// The blocks this node found invalid and the ones sent since that descend from them, each with
/// the latest valid block of its branch, as geth's invalid tipsets: a payload or forkchoice
/// naming one (or a payload building on one) is INVALID at once, with that hash, instead of
/// SYNCING on a parent that will never come. The oldest are forgotten past [`Self::KEPT`].
#[derive(Debug, Default)]
struct InvalidTips {
    latest_valid: std::collections::HashMap<B256, B256>,
    order: std::collections::VecDeque<B256>,
}

impl InvalidTips {
    const KEPT: usize = 512;

    fn note(&mut self, hash: B256, latest_valid: B256) {
        if self.latest_valid.insert(hash, latest_valid).is_none() {
            self.order.push_back(hash);
        }
        while self.order.len() > Self::KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.latest_valid.remove(&oldest);
            }
        }
    }

    fn get(&self, hash: &B256) -> Option<B256> {
        self.latest_valid.get(hash).copied()
    }
}

/// INVALID for a block that is, or builds on, one found invalid before.
fn rejected_before(latest_valid: B256) -> PayloadStatus {
    PayloadStatus::new(
        PayloadStatusEnum::Invalid {
            validation_error: "links to previously rejected block".into(),
        },
        Some(latest_valid),
    )
}

/// A V1 or V2 payload's timestamp, if it has a readable one (a payload that does not parse is
/// refused as such afterwards).
fn payload_timestamp(payload: &serde_json::Value) -> Option<u64> {
    serde_json::from_value::<U64>(payload.get("timestamp")?.clone())
        .ok()
        .map(|t| t.to())
}

/// -38005 for a payload outside the forks `engine_newPayloadV{version}` serves: V2 until
/// Cancun, V3 Cancun only, V4 from Prague (Osaka included). V1 has no such rule in the spec.
fn check_payload_fork(
    spec: &simnode_api::ChainSpec,
    version: u8,
    timestamp: u64,
) -> Result<(), ErrorObjectOwned> {
    use alloy_hardforks::EthereumHardforks;
    let cancun = spec.is_cancun_active_at_timestamp(timestamp);
    let prague = spec.is_prague_active_at_timestamp(timestamp);
    let served = match version {
        2 => !cancun,
        3 => cancun && !prague,
        4 => prague,
        _ => true,
    };
    if served {
        Ok(())
    } else {
        Err(payload_jobs::unsupported_fork(format!(
            "engine_newPayloadV{version} does not take a payload of timestamp {timestamp}"
        )))
    }
}

/// EIP-7685 requests as newPayloadV4 must carry them: each a type byte and data, in strictly
/// ascending type order (so no type twice); anything else is -32602, as the spec says.
fn check_execution_requests(requests: &[Bytes]) -> Result<(), ErrorObjectOwned> {
    let mut last_type: Option<u8> = None;
    for (i, request) in requests.iter().enumerate() {
        if request.len() <= 1 {
            return Err(invalid_params(format!(
                "execution request {i} is {} bytes: a type byte and data are needed",
                request.len()
            )));
        }
        if last_type.is_some_and(|last| request[0] <= last) {
            return Err(invalid_params(format!(
                "execution request {i} (type {}) is out of order or repeats a type",
                request[0]
            )));
        }
        last_type = Some(request[0]);
    }
    Ok(())
}

/// Whether a payload carries `field` (JSON `null` counts as absent, as in geth).
fn given(payload: &serde_json::Value, field: &str) -> bool {
    payload.get(field).is_some_and(|v| !v.is_null())
}

/// newPayloadV2's structure by fork, as the spec and geth want it (-32602 otherwise): a V1
/// payload before Shanghai, a V2 one (withdrawals) from it on, no Cancun blob fields.
fn check_v2_structure(
    spec: &simnode_api::ChainSpec,
    payload: &serde_json::Value,
    timestamp: u64,
) -> Result<(), ErrorObjectOwned> {
    use alloy_hardforks::EthereumHardforks;
    let shanghai = spec.is_shanghai_active_at_timestamp(timestamp);
    match (shanghai, given(payload, "withdrawals")) {
        (true, false) => return Err(invalid_params("nil withdrawals post-shanghai")),
        (false, true) => return Err(invalid_params("non-nil withdrawals pre-shanghai")),
        _ => {}
    }
    for field in ["excessBlobGas", "blobGasUsed"] {
        if given(payload, field) {
            return Err(invalid_params(format!("non-nil {field} pre-cancun")));
        }
    }
    Ok(())
}

fn invalid_params(msg: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32602, msg.into(), None::<()>)
}

/// A payload whose contents cannot make a block (extra data over 32 bytes, a base fee past 256
/// bits, a transaction that does not decode): INVALID, as geth and reth answer, with no latest
/// valid hash since the block cannot even be hashed (as for a block hash mismatch).
fn malformed(err: PayloadError) -> PayloadStatus {
    PayloadStatus::from_status(PayloadStatusEnum::Invalid {
        validation_error: err.to_string(),
    })
}

fn invalid_forkchoice() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-38002, "Invalid forkchoice state", None::<()>)
}

fn too_deep_reorg() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-38006, "Too deep reorg", None::<()>)
}

fn internal(err: impl std::fmt::Display) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32603, err.to_string(), None::<()>)
}

impl EngineApi {
    pub fn new(store: Arc<Store>, pool: Arc<Pool>) -> Self {
        Self {
            store,
            pool,
            serial: Arc::default(),
            jobs: Arc::default(),
            invalid: Arc::default(),
        }
    }

    fn invalid(&self) -> std::sync::MutexGuard<'_, InvalidTips> {
        self.invalid.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Executes and stores a payload already converted to a block.
    pub fn new_payload(
        &self,
        block: Block<TxEnvelope>,
        claimed_hash: B256,
    ) -> Result<PayloadStatus, ErrorObjectOwned> {
        let header = block.header.seal_slow();
        let hash = header.hash();
        if hash != claimed_hash {
            return Ok(PayloadStatus::from_status(PayloadStatusEnum::Invalid {
                validation_error: format!(
                    "block hash mismatch: payload says {claimed_hash}, header hashes to {hash}"
                ),
            }));
        }
        if self.store.number_of(&hash).map_err(internal)?.is_some() {
            return Ok(PayloadStatus::new(PayloadStatusEnum::Valid, Some(hash)));
        }
        {
            let mut invalid = self.invalid();
            if let Some(valid) = invalid
                .get(&hash)
                .or_else(|| invalid.get(&header.parent_hash))
            {
                invalid.note(hash, valid);
                return Ok(rejected_before(valid));
            }
        }
        let _serial = self.serial.lock().unwrap_or_else(|e| e.into_inner());
        // The same payload may have been stored while this call waited for the lock.
        if self.store.number_of(&hash).map_err(internal)?.is_some() {
            return Ok(PayloadStatus::new(PayloadStatusEnum::Valid, Some(hash)));
        }
        let head = self.store.head_header().map_err(internal)?;
        if header.parent_hash != head.hash() {
            if self.store.side_block(&hash).map_err(internal)?.is_some() {
                return Ok(PayloadStatus::from_status(PayloadStatusEnum::Accepted));
            }
            let canonical_parent = self
                .store
                .number_of(&header.parent_hash)
                .map_err(internal)?;
            // A proof-of-stake block on a proof-of-work block before the terminal one: the
            // spec's INVALID with zeros, as for such a head.
            if let Some(parent) = canonical_parent {
                if self.is_pre_terminal_pow(parent)? {
                    return Ok(PayloadStatus::new(
                        PayloadStatusEnum::Invalid {
                            validation_error: format!(
                                "parent block {parent} is a proof-of-work block before the terminal one"
                            ),
                        },
                        Some(B256::ZERO),
                    ));
                }
            }
            let parent_known = canonical_parent.is_some()
                || self
                    .store
                    .side_block(&header.parent_hash)
                    .map_err(internal)?
                    .is_some();
            if !parent_known {
                self.store.fell_behind(Some(header.number));
                return Ok(PayloadStatus::from_status(PayloadStatusEnum::Syncing));
            }
            // A side branch: kept unexecuted until a forkchoice makes it canonical.
            self.store
                .put_side_block(&header, &block.body)
                .map_err(internal)?;
            return Ok(PayloadStatus::from_status(PayloadStatusEnum::Accepted));
        }
        let parent_hash = header.parent_hash;
        let tx_hashes: Vec<B256> = block
            .body
            .transactions
            .iter()
            .map(|t| *t.tx_hash())
            .collect();
        let started = std::time::Instant::now();
        // Kept aside for debug_getBadBlocks, should the block fail (execution consumes it).
        let kept = (header.clone(), block.body.clone());
        // Stored, but the head only once a forkchoice update names it.
        self.store.hold_new_blocks();
        match exec::import_block(&self.store, header, block.body) {
            Ok(gas) => {
                crate::rpc::metrics::record_block_gas(gas, started.elapsed());
                crate::rpc::metrics::record_storage_tries(self.store.storage_tries_kept(&hash));
                // It may have been kept as a side block before (e.g. unwound by a rewind).
                self.store.remove_side_block(&hash).map_err(internal)?;
                self.after_import(&tx_hashes)?;
                crate::rpc::metrics::set_head_block(self.store.head().latest);
                Ok(PayloadStatus::new(PayloadStatusEnum::Valid, Some(hash)))
            }
            Err(exec::BlockError::Store(e @ crate::store::StoreError::Db(_))) => Err(internal(e)),
            Err(e) => {
                if e.is_bad_block() {
                    exec::keep_bad_parts(&self.store, kept.0, kept.1);
                }
                let valid = self.latest_valid(parent_hash)?;
                self.invalid().note(hash, valid);
                Ok(PayloadStatus::new(
                    PayloadStatusEnum::Invalid {
                        validation_error: e.to_string(),
                    },
                    Some(valid),
                ))
            }
        }
    }

    pub fn forkchoice_updated(
        &self,
        state: ForkchoiceState,
    ) -> Result<ForkchoiceUpdated, ErrorObjectOwned> {
        self.forkchoice_updated_with(state, None)
    }

    /// A forkchoice update with the payload attributes of a validator's proposal, and the
    /// version of `engine_forkchoiceUpdated` they came with: once the new head is VALID, a
    /// block is built on it and the answer carries its payload id (see [`payload_jobs`]).
    /// Attributes that do not fit leave the forkchoice applied and answer with an error.
    pub fn forkchoice_updated_with(
        &self,
        state: ForkchoiceState,
        attributes: Option<(u8, PayloadAttributes)>,
    ) -> Result<ForkchoiceUpdated, ErrorObjectOwned> {
        let _serial = self.serial.lock().unwrap_or_else(|e| e.into_inner());
        let (mut updated, may_build) = self.apply_forkchoice(state)?;
        let Some((version, attributes)) = attributes else {
            return Ok(updated);
        };
        let head = self.store.head_header().map_err(internal)?;
        if !may_build || !updated.is_valid() || head.hash() != state.head_block_hash {
            return Ok(updated);
        }
        payload_jobs::check_attributes(&self.store, version, &head, &attributes)?;
        let id = payload_jobs::payload_id(&head, version, &attributes);
        if !self.jobs.contains(id) {
            let built = payload_jobs::build_from_pool(&self.store, &self.pool, &head, &attributes)?;
            self.jobs.keep(id, head, attributes, built);
        }
        updated.payload_id = Some(id);
        Ok(updated)
    }

    /// `engine_getPayloadV{version}`: build `id` again first if its parent is still the head,
    /// keeping the new block if it pays more (transactions came in since).
    pub fn get_payload(
        &self,
        version: u8,
        id: PayloadId,
    ) -> Result<serde_json::Value, ErrorObjectOwned> {
        let (parent, attributes, value) = self.jobs.request(version, id)?;
        {
            let _serial = self.serial.lock().unwrap_or_else(|e| e.into_inner());
            let head = self.store.head_header().map_err(internal)?;
            if head.hash() == parent.hash() {
                // A failed rebuild leaves the payload already built.
                if let Ok(again) =
                    payload_jobs::build_from_pool(&self.store, &self.pool, &parent, &attributes)
                {
                    if again.value > value {
                        self.jobs.improve(id, again);
                    }
                }
            }
        }
        self.jobs.answer(version, id)
    }

    /// Moves head, safe and finalized as `state` names them (the serial lock held). The flag
    /// says whether a payload may be built on the head the answer names: not when the state
    /// named an ancestor of the finalized block (the spec forbids it), nor on a refusal.
    fn apply_forkchoice(
        &self,
        state: ForkchoiceState,
    ) -> Result<(ForkchoiceUpdated, bool), ErrorObjectOwned> {
        let number_of = |hash: B256| self.store.number_of(&hash).map_err(internal);
        let resolve = |hash: B256| -> Result<Option<u64>, ErrorObjectOwned> {
            if hash.is_zero() {
                return Ok(None);
            }
            number_of(hash)?.map(Some).ok_or_else(invalid_forkchoice)
        };
        let valid = || {
            ForkchoiceUpdated::new(PayloadStatus::new(
                PayloadStatusEnum::Valid,
                Some(state.head_block_hash),
            ))
        };
        if state.head_block_hash.is_zero() {
            // geth's answer: no block has the zero hash, and no sync can bring one.
            return Ok((
                ForkchoiceUpdated::new(PayloadStatus::from_status(PayloadStatusEnum::Invalid {
                    validation_error: "forkchoice names the zero hash as its head".into(),
                })),
                false,
            ));
        }
        let head = number_of(state.head_block_hash)?;
        if let Some(n) = head {
            if self.is_pre_terminal_pow(n)? {
                // A proof-of-work block the merge did not end with: never a head again.
                return Ok((
                    ForkchoiceUpdated::new(PayloadStatus::new(
                        PayloadStatusEnum::Invalid {
                            validation_error: format!(
                                "block {n} is a proof-of-work block before the terminal one"
                            ),
                        },
                        Some(B256::ZERO),
                    )),
                    false,
                ));
            }
        }
        let may_build = match head {
            Some(n) if n == self.store.head().latest => true,
            Some(n) => {
                // A canonical block below the head: a payload this node stored on arrival
                // that the consensus client passes over (a late block it re-orgs
                // out), or an older one. simnode rewinds to it and builds on it as the spec
                // asks, unless it is an ancestor of the finalized block (skipped: VALID, no
                // build, the spec's choice) or deeper than MAX_REORG_DEPTH (-38006). Safe and
                // finalized are checked first, so that a refused update leaves the chain as
                // it was: they must lie on the chain it rewinds to.
                let (safe, finalized) = (
                    resolve(state.safe_block_hash)?,
                    resolve(state.finalized_block_hash)?,
                );
                if safe.is_some_and(|s| s > n) || finalized.is_some_and(|f| f > n) {
                    return Err(invalid_forkchoice());
                }
                if self.store.head().finalized.is_some_and(|f| n < f) {
                    return Ok((valid(), false));
                }
                self.check_reorg_target(n)?;
                let unwound = self.store.unwind_to(n).map_err(internal)?;
                self.return_to_pool(&unwound);
                crate::rpc::metrics::set_head_block(n);
                true
            }
            None => {
                if let Some(refused) = self.reorg_to_side(state.head_block_hash)? {
                    return Ok((ForkchoiceUpdated::new(refused), false));
                }
                true
            }
        };
        let safe = resolve(state.safe_block_hash)?;
        let finalized = resolve(state.finalized_block_hash)?;
        // Canonical by now: it was the stored head, or the chain was rewound or reorged to it.
        let head = number_of(state.head_block_hash)?.ok_or_else(invalid_forkchoice)?;
        self.store
            .name_head(head, safe, finalized)
            .map_err(internal)?;
        // The client's head is now this node's head.
        self.store.caught_up();
        Ok((valid(), may_build))
    }

    /// Whether canonical block `n` is a proof-of-work block other than the terminal one (the
    /// last before the merge), which the spec forbids as a head.
    fn is_pre_terminal_pow(&self, n: u64) -> Result<bool, ErrorObjectOwned> {
        // Genesis too: a proof-of-work genesis before the terminal block is no head (hive's
        // pre-TTD forkchoice test), a chain merged from genesis has its next block post-merge.
        if self.store.spec().is_post_merge(n + 1) {
            return Ok(false);
        }
        self.is_pow(n)
    }

    /// Whether canonical block `n` was mined by proof of work (has a difficulty).
    fn is_pow(&self, n: u64) -> Result<bool, ErrorObjectOwned> {
        let header = self.store.header_raw(n).map_err(internal)?;
        Ok(header.is_some_and(|h| !h.difficulty.is_zero()))
    }

    /// What an INVALID answer names as the latest valid block: `hash`, or zeros when that is
    /// a proof-of-work block (the spec's rule: a PoW chain is no valid ancestor to point at).
    fn latest_valid(&self, hash: B256) -> Result<B256, ErrorObjectOwned> {
        match self.store.number_of(&hash).map_err(internal)? {
            Some(n) if self.is_pow(n)? => Ok(B256::ZERO),
            _ => Ok(hash),
        }
    }

    /// Refuses a reorg whose common ancestor is `ancestor` if it would unwind below the
    /// finalized block (-38002: the finalized block would leave the chain) or more than
    /// [`MAX_REORG_DEPTH`] blocks (-38006).
    fn check_reorg_target(&self, ancestor: u64) -> Result<(), ErrorObjectOwned> {
        let head = self.store.head();
        if head.finalized.is_some_and(|f| ancestor < f) {
            return Err(invalid_forkchoice());
        }
        if head.latest.saturating_sub(ancestor) > MAX_REORG_DEPTH {
            return Err(too_deep_reorg());
        }
        Ok(())
    }

    /// Makes the side block `head_hash` canonical. `Ok(None)` when done; `Ok(Some(status))`
    /// to answer with instead: SYNCING when the head (or a link of its branch) is unknown,
    /// INVALID when a block of the branch failed and the old chain was restored.
    fn reorg_to_side(&self, head_hash: B256) -> Result<Option<PayloadStatus>, ErrorObjectOwned> {
        // Walk back through the side table to a canonical block.
        let mut branch: Vec<crate::store::SealedBlock> = Vec::new();
        let mut cursor = head_hash;
        let ancestor = loop {
            if let Some(n) = self.store.number_of(&cursor).map_err(internal)? {
                break n;
            }
            if let Some(valid) = self.invalid().get(&cursor) {
                return Ok(Some(rejected_before(valid)));
            }
            let Some((header, body)) = self.store.side_block(&cursor).map_err(internal)? else {
                // Unknown head (or a branch with a missing link): still syncing.
                let head_number = branch.first().map(|(h, _)| h.number);
                self.store.fell_behind(head_number);
                return Ok(Some(PayloadStatus::from_status(PayloadStatusEnum::Syncing)));
            };
            if branch.len() as u64 > MAX_REORG_DEPTH + 1 {
                return Err(too_deep_reorg());
            }
            cursor = header.parent_hash;
            branch.push((header, body));
        };
        branch.reverse();
        self.check_reorg_target(ancestor)?;
        let ancestor_hash = cursor;
        let left = self.store.head_header().map_err(internal)?.hash();
        self.store.begin_reorg(head_hash, left).map_err(internal)?;
        let old = self.store.unwind_to(ancestor).map_err(internal)?;
        let mut last_valid = ancestor_hash;
        for (header, body) in branch {
            let hash = header.hash();
            let tx_hashes: Vec<B256> = body.transactions.iter().map(|t| *t.tx_hash()).collect();
            match exec::import_block(&self.store, header, body) {
                Ok(_) => {
                    self.store.remove_side_block(&hash).map_err(internal)?;
                    self.after_import(&tx_hashes)?;
                    last_valid = hash;
                }
                Err(exec::BlockError::Store(e @ crate::store::StoreError::Db(_))) => {
                    return Err(internal(e))
                }
                Err(e) => {
                    tracing::warn!(target: "simnode::engine", %hash, error = %e, "reorg: invalid block, restoring the previous chain");
                    // The invalid block is dropped (kept only as a bad block); the valid part
                    // of the branch stays in the side table, and the old chain comes back.
                    if e.is_bad_block() {
                        if let Some((header, body)) =
                            self.store.side_block(&hash).map_err(internal)?
                        {
                            exec::keep_bad_parts(&self.store, header, body);
                        }
                    }
                    self.store.remove_side_block(&hash).map_err(internal)?;
                    self.store.unwind_to(ancestor).map_err(internal)?;
                    for (header, body) in old {
                        let h = header.hash();
                        exec::import_block(&self.store, header, body).map_err(|e| {
                            internal(format!("reorg: cannot restore old block {h}: {e}"))
                        })?;
                        self.store.remove_side_block(&h).map_err(internal)?;
                    }
                    self.store.end_reorg().map_err(internal)?;
                    crate::rpc::metrics::set_head_block(self.store.head().latest);
                    let valid = self.latest_valid(last_valid)?;
                    self.invalid().note(hash, valid);
                    return Ok(Some(PayloadStatus::new(
                        PayloadStatusEnum::Invalid {
                            validation_error: e.to_string(),
                        },
                        Some(valid),
                    )));
                }
            }
        }
        self.store.end_reorg().map_err(internal)?;
        self.return_to_pool(&old);
        crate::rpc::metrics::set_head_block(self.store.head().latest);
        Ok(None)
    }

    /// Finishes a reorg a crash interrupted (see [`Store::begin_reorg`]): on to the head the
    /// consensus client chose, or, should that branch fail, back to the head it left. The
    /// blocks of both are kept (canonical or side), so either can be reached. Returns the head
    /// settled on, if there was a reorg to finish.
    pub fn finish_interrupted_reorg(&self) -> Result<Option<B256>, ErrorObjectOwned> {
        let Some((target, left)) = self.store.unfinished_reorg().map_err(internal)? else {
            return Ok(None);
        };
        let _serial = self.serial.lock().unwrap_or_else(|e| e.into_inner());
        let head = self.store.head_header().map_err(internal)?.hash();
        if head != target && head != left && self.reorg_to_side(target)?.is_some() {
            let gone_back = self.store.number_of(&left).map_err(internal)?.is_some();
            if !gone_back {
                self.reorg_to_side(left)?;
            }
        }
        self.store.end_reorg().map_err(internal)?;
        Ok(Some(self.store.head_header().map_err(internal)?.hash()))
    }

    /// Puts the transactions of unwound blocks that the new canonical chain does not carry back
    /// into the pool (those whose nonce is still ahead of the sender's; failures are ignored).
    fn return_to_pool(&self, unwound: &[crate::store::SealedBlock]) {
        use alloy::consensus::transaction::{Recovered, SignerRecoverable};
        use simnode_api::{ChainView, TxPool};
        let Ok(state) = self.store.state_after(self.store.head().latest) else {
            return;
        };
        for (_, body) in unwound {
            for tx in &body.transactions {
                if !matches!(self.store.transaction_location(tx.tx_hash()), Ok(None)) {
                    continue;
                }
                // A dev node's impersonated transaction names its sender instead of being
                // signed by it: it is not taken back.
                if simnode_api::impersonation::named_sender(tx).is_some() {
                    continue;
                }
                let Ok(sender) = tx.recover_signer() else {
                    continue;
                };
                let nonce = state.account(&sender).ok().flatten().map_or(0, |a| a.nonce);
                if tx.nonce() >= nonce {
                    let _ = self
                        .pool
                        .insert(Recovered::new_unchecked(tx.clone(), sender));
                    self.pool.promote(&sender, nonce);
                }
            }
        }
    }

    /// Drops from the pool what the new head block made obsolete.
    fn after_import(&self, tx_hashes: &[B256]) -> Result<(), ErrorObjectOwned> {
        let state = self
            .store
            .state_after(self.store.head().latest)
            .map_err(internal)?;
        self.pool.on_block(tx_hashes, |a| {
            state
                .account(a)
                .ok()
                .flatten()
                .map(|acc| (acc.nonce, acc.balance))
        });
        Ok(())
    }

    pub fn into_rpc(self) -> anyhow::Result<RpcModule<EngineApi>> {
        let mut m = RpcModule::new(self);
        m.register_method("engine_exchangeCapabilities", |params, _, _| {
            // The consensus client's list is read only to check the request's shape.
            let (_theirs,): (Vec<String>,) = params.parse()?;
            Ok::<_, ErrorObjectOwned>(CAPABILITIES.to_vec())
        })?;
        m.register_blocking_method("engine_newPayloadV1", |params, api, _| {
            let (payload,): (serde_json::Value,) = params.parse()?;
            if given(&payload, "withdrawals") {
                return Err(invalid_params("withdrawals not supported in V1"));
            }
            let payload: ExecutionPayloadV1 =
                serde_json::from_value(payload).map_err(|e| invalid_params(e.to_string()))?;
            let hash = payload.block_hash;
            match payload.try_into_block::<TxEnvelope>() {
                Ok(block) => api.new_payload(block, hash),
                Err(err) => Ok(malformed(err)),
            }
        })?;
        m.register_blocking_method("engine_newPayloadV2", |params, api, _| {
            let (payload,): (serde_json::Value,) = params.parse()?;
            if let Some(timestamp) = payload_timestamp(&payload) {
                check_payload_fork(api.store.spec(), 2, timestamp)?;
                check_v2_structure(api.store.spec(), &payload, timestamp)?;
            }
            // V2 takes a V1 payload before Shanghai and a V2 (with withdrawals) after it.
            let payload = if given(&payload, "withdrawals") {
                ExecutionPayload::V2(
                    serde_json::from_value::<ExecutionPayloadV2>(payload)
                        .map_err(|e| invalid_params(e.to_string()))?,
                )
            } else {
                ExecutionPayload::V1(
                    serde_json::from_value::<ExecutionPayloadV1>(payload)
                        .map_err(|e| invalid_params(e.to_string()))?,
                )
            };
            let hash = payload.block_hash();
            match payload
                .try_into_block_with_sidecar::<TxEnvelope>(&ExecutionPayloadSidecar::none())
            {
                Ok(block) => api.new_payload(block, hash),
                Err(err) => Ok(malformed(err)),
            }
        })?;
        m.register_blocking_method("engine_newPayloadV3", |params, api, _| {
            let (payload, hashes, beacon_root): (ExecutionPayloadV3, Vec<B256>, B256) =
                params.parse()?;
            check_payload_fork(
                api.store.spec(),
                3,
                payload.payload_inner.payload_inner.timestamp,
            )?;
            let sidecar =
                ExecutionPayloadSidecar::v3(CancunPayloadFields::new(beacon_root, hashes));
            api.new_payload_checked(ExecutionPayload::V3(payload), sidecar)
        })?;
        m.register_blocking_method("engine_newPayloadV4", |params, api, _| {
            let (payload, hashes, beacon_root, requests): (
                ExecutionPayloadV3,
                Vec<B256>,
                B256,
                Vec<Bytes>,
            ) = params.parse()?;
            check_payload_fork(
                api.store.spec(),
                4,
                payload.payload_inner.payload_inner.timestamp,
            )?;
            check_execution_requests(&requests)?;
            let sidecar = ExecutionPayloadSidecar::v4(
                CancunPayloadFields::new(beacon_root, hashes),
                PraguePayloadFields::new(Requests::new(requests)),
            );
            api.new_payload_checked(ExecutionPayload::V3(payload), sidecar)
        })?;
        m.register_blocking_method("engine_getPayloadBodiesByHashV1", |params, api, _| {
            let (hashes,): (Vec<B256>,) = params.parse()?;
            engine_reads::bodies_by_hash(&api.store, &hashes)
        })?;
        m.register_blocking_method("engine_getPayloadBodiesByRangeV1", |params, api, _| {
            let (start, count): (U64, U64) = params.parse()?;
            engine_reads::bodies_by_range(&api.store, start.to(), count.to())
        })?;
        m.register_method("engine_getClientVersionV1", |params, _, _| {
            // The consensus client's own version is read only to check the request's shape.
            let (_theirs,): (engine_reads::ClientVersion,) = params.parse()?;
            Ok::<_, ErrorObjectOwned>(vec![engine_reads::ClientVersion::this_node()])
        })?;
        for (version, name) in [
            (1, "engine_forkchoiceUpdatedV1"),
            (2, "engine_forkchoiceUpdatedV2"),
            (3, "engine_forkchoiceUpdatedV3"),
        ] {
            m.register_blocking_method(name, move |params, api, _| {
                let all: Vec<serde_json::Value> = params.parse()?;
                if all.len() > 2 {
                    return Err(invalid_params("too many arguments, want at most 2"));
                }
                let mut seq = params.sequence();
                let state: ForkchoiceState = seq.next()?;
                let attributes: Option<PayloadAttributes> = seq.optional_next()?;
                api.forkchoice_updated_with(state, attributes.map(|a| (version, a)))
            })?;
        }
        for (version, name) in [
            (1, "engine_getBlobsV1"),
            (2, "engine_getBlobsV2"),
            (3, "engine_getBlobsV3"),
        ] {
            m.register_blocking_method(name, move |params, api, _| {
                let (hashes,): (Vec<B256>,) = params.parse()?;
                let node = engine_blobs::NodeState::of(&api.store)?;
                engine_blobs::blobs(&api.pool, version, node, &hashes)
            })?;
        }
        for (version, name) in [
            (1, "engine_getPayloadV1"),
            (2, "engine_getPayloadV2"),
            (3, "engine_getPayloadV3"),
            (4, "engine_getPayloadV4"),
            (5, "engine_getPayloadV5"),
        ] {
            m.register_blocking_method(name, move |params, api, _| {
                let (id,): (PayloadId,) = params.parse()?;
                api.get_payload(version, id)
            })?;
        }
        Ok(m)
    }

    /// V3/V4: also checks the blob versioned hashes against the block's blob transactions.
    fn new_payload_checked(
        &self,
        payload: ExecutionPayload,
        sidecar: ExecutionPayloadSidecar,
    ) -> Result<PayloadStatus, ErrorObjectOwned> {
        let hash = payload.block_hash();
        let expected_hashes = sidecar.versioned_hashes().cloned().unwrap_or_default();
        let block = match payload.try_into_block_with_sidecar::<TxEnvelope>(&sidecar) {
            Ok(block) => block,
            Err(err) => return Ok(malformed(err)),
        };
        let got: Vec<B256> = block
            .body
            .transactions
            .iter()
            .flat_map(|t| {
                t.blob_versioned_hashes()
                    .map(|h| h.to_vec())
                    .unwrap_or_default()
            })
            .collect();
        if got != expected_hashes {
            return Ok(PayloadStatus::from_status(PayloadStatusEnum::Invalid {
                validation_error:
                    "blob versioned hashes do not match the block's blob transactions".into(),
            }));
        }
        self.new_payload(block, hash)
    }
}

/// The `eth_` methods of the public RPC, for the Engine API port. geth serves the `eth`
/// namespace there as well, and consensus clients rely on it: Lighthouse checks that the engine
/// is up with `eth_syncing` and reads blocks with `eth_getBlockByNumber` and `eth_getBlockByHash`
/// on the Engine API's URL, as it has no other.
pub fn eth_namespace(public: &Methods) -> anyhow::Result<Methods> {
    let mut eth = RpcModule::new(());
    eth.merge(public.clone())?;
    let others: Vec<&'static str> = eth
        .method_names()
        .filter(|name| !name.starts_with("eth_"))
        .collect();
    for name in others {
        eth.remove_method(name);
    }
    Ok(eth.into())
}

/// Serves the Engine API on `listener`, every request authenticated with `secret`, with `eth`
/// (see [`eth_namespace`]) beside it.
pub fn start(
    listener: std::net::TcpListener,
    secret: JwtSecret,
    api: EngineApi,
    eth: Methods,
) -> anyhow::Result<(ServerHandle, SocketAddr)> {
    // tokio takes over the socket only if it does not block.
    listener
        .set_nonblocking(true)
        .context("serving the Engine API")?;
    let http = tower::ServiceBuilder::new().layer(JwtLayer(Arc::new(secret)));
    // Payloads of full blocks are large; the consensus client is trusted (it holds the secret).
    let config = ServerConfig::builder()
        .max_request_body_size(128 * 1024 * 1024)
        .max_response_body_size(128 * 1024 * 1024)
        .build();
    let server = ServerBuilder::default()
        .set_config(config)
        .set_http_middleware(http)
        .build_from_tcp(listener)
        .context("serving the Engine API")?;
    let local = server.local_addr()?;
    let mut methods = api.into_rpc()?;
    methods
        .merge(eth)
        .context("serving the eth namespace on the Engine API")?;
    Ok((server.start(methods), local))
}

#[cfg(test)]
mod reorg_tests {
    //! Two competing branches from genesis of the dev chain: A1 built on the node's store, B1..B3
    //! built on a second store and fed as payloads.

    use super::*;
    use crate::store::{scratch::ScratchStore, NewBlock, StoreError};
    use alloy::{
        consensus::{transaction::Recovered, SignableTransaction, TxEip1559},
        primitives::{address, Address, Signature, TxKind, U256},
    };
    use k256::ecdsa::SigningKey;
    use redb::{ReadableDatabase, ReadableTable, TableDefinition};
    use simnode_api::SyncTarget;

    const KEY0: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
    const KEY1: &str = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    const X: Address = address!("00000000000000000000000000000000000000aa");
    const Y: Address = address!("00000000000000000000000000000000000000bb");

    fn open(tag: &str) -> ScratchStore {
        ScratchStore::open(tag, &crate::chain::dev_genesis())
    }

    fn transfer(key: &str, nonce: u64, to: Address, value: u64) -> Recovered<TxEnvelope> {
        let key = SigningKey::from_slice(&alloy::hex::decode(key).unwrap()).unwrap();
        let tx = TxEip1559 {
            chain_id: crate::chain::DEV_CHAIN_ID,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: 100_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to: TxKind::Call(to),
            value: U256::from(value),
            ..Default::default()
        };
        signed(&key, tx)
    }

    /// A blob transaction from `key` to Y carrying the blob `versioned` names (no sidecar).
    fn blob_transfer(key: &str, nonce: u64, versioned: B256) -> Recovered<TxEnvelope> {
        let key = SigningKey::from_slice(&alloy::hex::decode(key).unwrap()).unwrap();
        let tx = alloy::consensus::TxEip4844 {
            chain_id: crate::chain::DEV_CHAIN_ID,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: 100_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to: Y,
            blob_versioned_hashes: vec![versioned],
            max_fee_per_blob_gas: 1_000_000_000,
            ..Default::default()
        };
        signed(&key, tx)
    }

    /// `tx` signed with `key`, with its sender.
    fn signed<T>(key: &SigningKey, tx: T) -> Recovered<TxEnvelope>
    where
        T: SignableTransaction<Signature>,
        TxEnvelope: From<alloy::consensus::Signed<T>>,
    {
        let (sig, recid) = key
            .sign_prehash_recoverable(tx.signature_hash().as_slice())
            .unwrap();
        let envelope = TxEnvelope::from(tx.into_signed(Signature::from((sig, recid))));
        let signer =
            alloy::consensus::transaction::SignerRecoverable::recover_signer(&envelope).unwrap();
        Recovered::new_unchecked(envelope, signer)
    }

    /// A forkchoice on `head` and the attributes of a proposal on it (12 s later, paid to
    /// `fee_recipient`, no withdrawals).
    fn proposal_on(
        head: &alloy::consensus::Sealed<alloy::consensus::Header>,
        fee_recipient: Address,
    ) -> (ForkchoiceState, PayloadAttributes) {
        let state = ForkchoiceState {
            head_block_hash: head.hash(),
            safe_block_hash: B256::ZERO,
            finalized_block_hash: B256::ZERO,
        };
        let attributes = PayloadAttributes {
            timestamp: head.timestamp + 12,
            prev_randao: B256::repeat_byte(9),
            suggested_fee_recipient: fee_recipient,
            withdrawals: Some(vec![]),
            parent_beacon_block_root: Some(B256::repeat_byte(3)),
            slot_number: None,
            target_gas_limit: None,
        };
        (state, attributes)
    }

    /// The id of the build a forkchoiceUpdatedV3 with [`proposal_on`]'s attributes (fee
    /// recipient X) starts on `head`.
    fn build_started(
        api: &EngineApi,
        head: &alloy::consensus::Sealed<alloy::consensus::Header>,
    ) -> PayloadId {
        let (state, attributes) = proposal_on(head, X);
        api.forkchoice_updated_with(state, Some((3, attributes)))
            .unwrap()
            .payload_id
            .expect("a build started")
    }

    fn block_of(b: &NewBlock) -> Block<TxEnvelope> {
        Block {
            header: b.header.inner().clone(),
            body: b.body.clone(),
        }
    }

    fn genesis_ts(store: &Store) -> u64 {
        store.head_header().unwrap().timestamp
    }

    /// Rows (key, value) of each table, by table name.
    type TableDump = Vec<(&'static str, Vec<(Vec<u8>, Vec<u8>)>)>;

    /// Every table the unwind touches, dumped for comparison between two stores.
    fn dump(store: &Store) -> TableDump {
        let tx = store.db().begin_read().unwrap();
        let mut out = Vec::new();
        macro_rules! bytes_table {
            ($($name:literal),*) => {$({
                let def: TableDefinition<&[u8], &[u8]> = TableDefinition::new($name);
                let t = tx.open_table(def).unwrap();
                let rows = t.iter().unwrap().map(|e| {
                    let (k, v) = e.unwrap();
                    (k.value().to_vec(), v.value().to_vec())
                }).collect();
                out.push(($name, rows));
            })*};
        }
        bytes_table!(
            "accounts",
            "storage",
            "account_history",
            "storage_history",
            "tx_index"
        );
        macro_rules! set_table {
            ($($name:literal),*) => {$({
                let def: TableDefinition<&[u8], ()> = TableDefinition::new($name);
                let t = tx.open_table(def).unwrap();
                let rows = t.iter().unwrap().map(|e| (e.unwrap().0.value().to_vec(), vec![])).collect();
                out.push(($name, rows));
            })*};
        }
        set_table!("account_changesets", "storage_changesets");
        macro_rules! num_table {
            ($($name:literal),*) => {$({
                let def: TableDefinition<u64, &[u8]> = TableDefinition::new($name);
                let t = tx.open_table(def).unwrap();
                let rows = t.iter().unwrap().map(|e| {
                    let (k, v) = e.unwrap();
                    (k.value().to_be_bytes().to_vec(), v.value().to_vec())
                }).collect();
                out.push(($name, rows));
            })*};
        }
        num_table!(
            "headers",
            "canonical_hashes",
            "bodies",
            "senders",
            "receipts"
        );
        out
    }

    fn assert_same_chain(a: &Store, b: &Store) {
        assert_eq!(a.head().latest, b.head().latest);
        for ((name, x), (_, y)) in dump(a).into_iter().zip(dump(b)) {
            assert!(x == y, "table {name} differs");
        }
    }

    fn tx_known(store: &Store, hash: B256) -> bool {
        use simnode_api::ChainView;
        store.transaction_location(&hash).unwrap().is_some()
    }

    #[test]
    fn behind_from_syncing_until_a_forkchoice_names_a_known_head() {
        let node = open("sync-state");
        let api = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let t0 = genesis_ts(&node);
        // Three blocks built elsewhere; the node gets the third first.
        let other = open("sync-state-src");
        let blocks: Vec<NewBlock> = (0..3)
            .map(|i| {
                let tx = transfer(KEY0, i, X, 1);
                crate::sync::dev::build_block(&other, &[tx], t0 + 12 * (i + 1)).unwrap()
            })
            .collect();
        let target = node.sync_target();
        assert_eq!(*target.borrow(), None, "a new node is not behind");
        let status = api
            .new_payload(block_of(&blocks[2]), blocks[2].header.hash())
            .unwrap();
        assert_eq!(status.status, PayloadStatusEnum::Syncing);
        let behind = SyncTarget {
            starting_block: 0,
            highest_block: Some(3),
        };
        assert_eq!(*target.borrow(), Some(behind));
        // Naming an unknown head keeps the highest number seen.
        let fcu = |head: B256| {
            api.forkchoice_updated(ForkchoiceState {
                head_block_hash: head,
                safe_block_hash: B256::ZERO,
                finalized_block_hash: B256::ZERO,
            })
            .unwrap()
        };
        let out = fcu(blocks[2].header.hash());
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Syncing);
        assert_eq!(*target.borrow(), Some(behind));
        // The missing blocks arrive: imported, but the client has not named a head yet.
        for blk in &blocks {
            let status = api.new_payload(block_of(blk), blk.header.hash()).unwrap();
            assert_eq!(status.status, PayloadStatusEnum::Valid);
        }
        assert_eq!(node.head().latest, 3);
        assert_eq!(*target.borrow(), Some(behind));
        let out = fcu(blocks[2].header.hash());
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Valid);
        assert_eq!(*target.borrow(), None);
        // Behind again from the new head, with no number known for a head named by hash.
        fcu(B256::repeat_byte(0x42));
        assert_eq!(
            *target.borrow(),
            Some(SyncTarget {
                starting_block: 3,
                highest_block: None
            })
        );
    }

    /// A validator's proposal: forkchoiceUpdated with attributes builds a block from the pool
    /// (not stored), getPayload hands it out in its fork's form, and the block sent back as a
    /// payload becomes the head like any other.
    #[test]
    fn payload_building_for_a_proposer() {
        use simnode_api::TxPool as _;
        let node = open("build");
        let pool = Arc::new(Pool::default());
        let api = EngineApi::new(node.clone(), pool.clone());
        let head = node.head_header().unwrap();
        let tx = transfer(KEY0, 0, X, 1_000);
        pool.insert(tx.clone()).unwrap();
        let fee_recipient = address!("00000000000000000000000000000000000000fe");
        let (state, attributes) = proposal_on(&head, fee_recipient);
        let updated = api
            .forkchoice_updated_with(state, Some((3, attributes.clone())))
            .unwrap();
        assert_eq!(updated.payload_status.status, PayloadStatusEnum::Valid);
        let id = updated.payload_id.expect("a build started");
        assert_eq!(node.head().latest, 0, "the built block is not stored");
        // The same request again names the same build.
        let again = api
            .forkchoice_updated_with(state, Some((3, attributes.clone())))
            .unwrap();
        assert_eq!(again.payload_id, Some(id));

        // The dev chain is Osaka from genesis: V5 gives it, V3 and V4 refuse it.
        assert_eq!(api.get_payload(3, id).unwrap_err().code(), -38005);
        assert_eq!(api.get_payload(4, id).unwrap_err().code(), -38005);
        let unknown = PayloadId(alloy::primitives::B64::repeat_byte(1));
        assert_eq!(api.get_payload(5, unknown).unwrap_err().code(), -38001);
        let first = api.jobs.answer(5, id).unwrap();
        assert_eq!(
            first["executionPayload"]["transactions"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        // A transaction arriving before the client asks for the payload makes it in; a blob
        // transaction would not (no sidecar to publish), a plain one does.
        let late = transfer(KEY1, 0, Y, 5);
        pool.insert(late.clone()).unwrap();
        let mut versioned = B256::repeat_byte(5);
        versioned.0[0] = 1;
        let blob = blob_transfer(KEY1, 1, versioned);
        pool.insert(blob.clone()).unwrap();
        // Nor would a dev node's impersonated transaction (no other node could check it).
        let impersonated = {
            let sender = address!("90F79bf6EB2c4f870365E785982E1f101E93b906");
            let tx = TxEip1559 {
                chain_id: crate::chain::DEV_CHAIN_ID,
                gas_limit: 21_000,
                max_fee_per_gas: 100_000_000_000,
                max_priority_fee_per_gas: 1_000_000_000,
                to: TxKind::Call(Y),
                value: U256::from(1),
                ..Default::default()
            };
            let tx = tx.into_signed(simnode_api::impersonation::signature(sender));
            Recovered::new_unchecked(TxEnvelope::from(tx), sender)
        };
        pool.insert(impersonated.clone()).unwrap();
        let envelope = api.get_payload(5, id).unwrap();
        let payload: ExecutionPayloadV3 =
            serde_json::from_value(envelope["executionPayload"].clone()).unwrap();
        let inner = &payload.payload_inner.payload_inner;
        assert_eq!(inner.transactions.len(), 2);
        assert_eq!(inner.fee_recipient, fee_recipient);
        assert_eq!(inner.prev_randao, B256::repeat_byte(9));
        assert_eq!(inner.timestamp, head.timestamp + 12);
        assert_eq!(inner.extra_data.as_ref(), b"simnode");
        let base_fee = inner.base_fee_per_gas.to::<u128>();
        let tip = tx.effective_tip_per_gas(base_fee as u64).unwrap()
            + late.effective_tip_per_gas(base_fee as u64).unwrap();
        let value: U256 = serde_json::from_value(envelope["blockValue"].clone()).unwrap();
        assert_eq!(value, U256::from(tip * 21_000));
        // Asked again with nothing new, the payload stays the same block.
        let again = api.get_payload(5, id).unwrap();
        assert_eq!(
            again["executionPayload"]["blockHash"],
            envelope["executionPayload"]["blockHash"]
        );
        assert_eq!(envelope["blobsBundle"]["blobs"], serde_json::json!([]));
        assert!(envelope["executionRequests"].is_array());

        // Sent back, it is a valid payload and becomes the head.
        let sidecar = ExecutionPayloadSidecar::v4(
            CancunPayloadFields::new(B256::repeat_byte(3), vec![]),
            PraguePayloadFields::new(Requests::new(
                serde_json::from_value(envelope["executionRequests"].clone()).unwrap(),
            )),
        );
        let hash = inner.block_hash;
        let status = api
            .new_payload_checked(ExecutionPayload::V3(payload), sidecar)
            .unwrap();
        assert_eq!(status.status, PayloadStatusEnum::Valid, "{status:?}");
        let to_it = ForkchoiceState {
            head_block_hash: hash,
            ..state
        };
        api.forkchoice_updated(to_it).unwrap();
        assert_eq!(node.head().latest, 1);
        assert!(tx_known(&node, *tx.inner().tx_hash()));
        assert!(tx_known(&node, *late.inner().tx_hash()));
        assert!(!tx_known(&node, *blob.inner().tx_hash()));
        assert!(!tx_known(&node, *impersonated.inner().tx_hash()));
        assert_eq!(
            pool.len(),
            2,
            "the blob and the impersonated transactions wait"
        );
        // Its parent is no longer the head: the payload is given as built, not built again.
        let after = api.get_payload(5, id).unwrap();
        assert_eq!(
            after["executionPayload"]["blockHash"],
            serde_json::json!(hash)
        );
    }

    /// Attributes that do not fit: the forkchoice still moves, the answer is the spec's error.
    #[test]
    fn payload_attributes_that_do_not_fit_are_refused() {
        let node = open("build-refused");
        let api = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let head = node.head_header().unwrap();
        let state = ForkchoiceState {
            head_block_hash: head.hash(),
            safe_block_hash: head.hash(),
            finalized_block_hash: B256::ZERO,
        };
        let good = PayloadAttributes {
            timestamp: head.timestamp + 12,
            prev_randao: B256::ZERO,
            suggested_fee_recipient: Address::ZERO,
            withdrawals: Some(vec![]),
            parent_beacon_block_root: Some(B256::ZERO),
            slot_number: None,
            target_gas_limit: None,
        };
        let code = |version: u8, attributes: PayloadAttributes| {
            api.forkchoice_updated_with(state, Some((version, attributes)))
                .unwrap_err()
                .code()
        };
        let stale = PayloadAttributes {
            timestamp: head.timestamp,
            ..good.clone()
        };
        assert_eq!(code(3, stale), -38003);
        let no_root = PayloadAttributes {
            parent_beacon_block_root: None,
            ..good.clone()
        };
        assert_eq!(code(3, no_root), -38003);
        let v2_shape = PayloadAttributes {
            parent_beacon_block_root: None,
            ..good.clone()
        };
        // An Osaka timestamp through V1 or V2: not their fork.
        assert_eq!(code(2, v2_shape.clone()), -38005);
        assert_eq!(code(1, v2_shape), -38005);
        // A beacon root is not a field of V1 or V2 attributes: the wrong structure.
        assert_eq!(code(2, good.clone()), -38003);
        assert_eq!(code(1, good.clone()), -32602);
        // Fields of later forks' attributes.
        let amsterdam_shape = PayloadAttributes {
            slot_number: Some(7),
            ..good.clone()
        };
        assert_eq!(code(3, amsterdam_shape), -38003);
        // The forkchoice itself was applied each time.
        assert_eq!(node.head().safe, Some(0));
        assert!(api
            .forkchoice_updated_with(state, Some((3, good)))
            .unwrap()
            .payload_id
            .is_some());
    }

    /// A reorg stopped between its unwind and its last block (a crash) is finished by the next
    /// start: on to the branch asked for, or back to the head it left if the branch fails.
    #[test]
    fn an_interrupted_reorg_is_finished_at_the_next_start() {
        let node = open("interrupted");
        let api = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let t0 = genesis_ts(&node);
        let a1 = crate::sync::dev::build_block(&node, &[transfer(KEY0, 0, X, 1)], t0 + 12).unwrap();
        let b = open("interrupted-b");
        let b1 = crate::sync::dev::build_block(&b, &[transfer(KEY1, 0, Y, 7)], t0 + 13).unwrap();
        let b2 = crate::sync::dev::build_block(&b, &[transfer(KEY0, 0, Y, 5)], t0 + 25).unwrap();
        for blk in [&b1, &b2] {
            api.new_payload(block_of(blk), blk.header.hash()).unwrap();
        }
        // What reorg_to_side does up to a crash after the branch's first block.
        node.begin_reorg(b2.header.hash(), a1.header.hash())
            .unwrap();
        node.unwind_to(0).unwrap();
        exec::import_block(&node, b1.header.clone(), b1.body.clone()).unwrap();
        node.remove_side_block(&b1.header.hash()).unwrap();
        assert_eq!(node.head_header().unwrap().hash(), b1.header.hash());

        let restarted = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let settled = restarted.finish_interrupted_reorg().unwrap();
        assert_eq!(settled, Some(b2.header.hash()));
        assert_eq!(node.head_header().unwrap().hash(), b2.header.hash());
        assert_eq!(node.unfinished_reorg().unwrap(), None);
        assert_eq!(restarted.finish_interrupted_reorg().unwrap(), None);

        // Back to A1, and stopped again, this time on the way to a branch whose block is bad:
        // the next start returns to A1.
        let back = api
            .forkchoice_updated(ForkchoiceState {
                head_block_hash: a1.header.hash(),
                safe_block_hash: B256::ZERO,
                finalized_block_hash: B256::ZERO,
            })
            .unwrap();
        assert!(back.is_valid(), "{back:?}");
        let mut bad = b2.header.inner().clone();
        bad.state_root = B256::repeat_byte(0x11);
        let bad = bad.seal_slow();
        node.put_side_block(&bad, &b2.body).unwrap();
        node.begin_reorg(bad.hash(), a1.header.hash()).unwrap();
        node.unwind_to(0).unwrap();
        let settled = EngineApi::new(node.clone(), Arc::new(Pool::default()))
            .finish_interrupted_reorg()
            .unwrap();
        assert_eq!(settled, Some(a1.header.hash()));
        assert_eq!(node.head_header().unwrap().hash(), a1.header.hash());
        assert_eq!(node.unfinished_reorg().unwrap(), None);
    }

    #[test]
    fn a_payload_is_served_once_a_forkchoice_names_it() {
        use simnode_api::ChainView;
        let node = open("named");
        let api = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let t0 = genesis_ts(&node);
        let src = open("named-src");
        let tx1 = transfer(KEY0, 0, X, 1_000);
        let b1 = crate::sync::dev::build_block(&src, std::slice::from_ref(&tx1), t0 + 12).unwrap();
        let b2 = crate::sync::dev::build_block(&src, &[transfer(KEY0, 1, X, 1)], t0 + 24).unwrap();
        let view: &dyn ChainView = &**node;
        let mut events = view.chain_events();
        let fcu = |head: B256| {
            let state = ForkchoiceState {
                head_block_hash: head,
                safe_block_hash: B256::ZERO,
                finalized_block_hash: B256::ZERO,
            };
            let out = api.forkchoice_updated(state).unwrap();
            assert_eq!(out.payload_status.status, PayloadStatusEnum::Valid);
        };

        // Executed, stored and VALID, yet not the head: readers keep genesis and find B1 by
        // hash only, as a block off the chain; subscribers hear nothing yet.
        for blk in [&b1, &b2] {
            let status = api.new_payload(block_of(blk), blk.header.hash()).unwrap();
            assert_eq!(status.status, PayloadStatusEnum::Valid);
        }
        assert_eq!(node.head().latest, 2);
        let served = |view: &dyn ChainView| view.head().latest;
        assert_eq!(served(view), 0);
        assert_eq!(view.canonical_hash(1).unwrap(), None);
        assert!(view.header(1).unwrap().is_none());
        assert!(view.block(1).unwrap().is_none());
        assert!(view.receipts(1).unwrap().is_none());
        assert_eq!(view.block_number(&b1.header.hash()).unwrap(), None);
        assert_eq!(
            view.transaction_location(tx1.inner().tx_hash()).unwrap(),
            None
        );
        let by_hash = view
            .side_block(&b1.header.hash())
            .unwrap()
            .expect("by hash");
        assert_eq!(by_hash.number(), 1);
        assert!(events.try_recv().is_err());
        let by_range = engine_reads::bodies_by_range(&node, 1, 2).unwrap();
        assert!(by_range.is_empty(), "{by_range:?}");
        // A restart keeps them waiting.
        node.reload_head().unwrap();
        assert_eq!(served(view), 0);

        // Naming B1 rewinds the stored chain to it (B2 was never announced, so no removal is
        // either) and announces B1.
        fcu(b1.header.hash());
        assert_eq!(served(view), 1);
        assert_eq!(view.canonical_hash(1).unwrap(), Some(b1.header.hash()));
        assert!(view.receipts(1).unwrap().is_some());
        assert_eq!(
            view.transaction_location(tx1.inner().tx_hash())
                .unwrap()
                .map(|at| at.block_number),
            Some(1)
        );
        let added = |event: simnode_api::ChainEvent| match event {
            simnode_api::ChainEvent::Added(block) => block.block.number(),
            other => panic!("expected a new block, got {other:?}"),
        };
        assert_eq!(added(events.try_recv().unwrap()), 1);
        assert!(events.try_recv().is_err());

        // B2 again, then named.
        let status = api.new_payload(block_of(&b2), b2.header.hash()).unwrap();
        assert_eq!(status.status, PayloadStatusEnum::Valid);
        assert_eq!(served(view), 1);
        fcu(b2.header.hash());
        assert_eq!(served(view), 2);
        assert_eq!(added(events.try_recv().unwrap()), 2);
        node.reload_head().unwrap();
        assert_eq!(served(view), 2);

        // An import on top vouches for a payload still waiting.
        let b3 = crate::sync::dev::build_block(&src, &[transfer(KEY0, 2, X, 1)], t0 + 36).unwrap();
        let status = api.new_payload(block_of(&b3), b3.header.hash()).unwrap();
        assert_eq!(status.status, PayloadStatusEnum::Valid);
        assert_eq!(served(view), 2);
        crate::sync::import::import_blocks(&node, std::io::empty()).unwrap();
        assert_eq!(served(view), 3);
        assert_eq!(added(events.try_recv().unwrap()), 3);
    }

    #[test]
    fn the_same_payload_sent_at_once_is_valid_every_time() {
        let node = open("same-at-once");
        let api = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let src = open("same-at-once-src");
        let b1 =
            crate::sync::dev::build_block(&src, &[transfer(KEY0, 0, X, 1)], genesis_ts(&node) + 12)
                .unwrap();
        let start = std::sync::Barrier::new(4);
        let statuses: Vec<_> = std::thread::scope(|scope| {
            let calls: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        api.new_payload(block_of(&b1), b1.header.hash()).unwrap()
                    })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap()).collect()
        });
        for status in statuses {
            assert_eq!(status.status, PayloadStatusEnum::Valid, "{status:?}");
        }
    }

    #[test]
    fn reorg_between_branches() {
        // Branch A on the node's store: A1 (account 0 -> X).
        let node = open("node");
        let api = EngineApi::new(node.clone(), Arc::new(Pool::default()));
        let t0 = genesis_ts(&node);
        let tx_a = transfer(KEY0, 0, X, 1_000);
        let a1 =
            crate::sync::dev::build_block(&node, std::slice::from_ref(&tx_a), t0 + 12).unwrap();
        let a_copy = open("a");
        crate::sync::dev::build_block(&a_copy, std::slice::from_ref(&tx_a), t0 + 12).unwrap();

        // Branch B on another store: B1 (account 1 -> Y), B2 (account 0 -> Y), B3.
        let b = open("b");
        let b1 = crate::sync::dev::build_block(&b, &[transfer(KEY1, 0, Y, 7)], t0 + 13).unwrap();
        let b2 = crate::sync::dev::build_block(&b, &[transfer(KEY0, 0, Y, 5)], t0 + 25).unwrap();
        let b3 = crate::sync::dev::build_block(&b, &[transfer(KEY0, 1, Y, 3)], t0 + 37).unwrap();
        assert_ne!(a1.header.hash(), b1.header.hash());

        for blk in [&b1, &b2] {
            let status = api.new_payload(block_of(blk), blk.header.hash()).unwrap();
            assert_eq!(status.status, PayloadStatusEnum::Accepted);
            assert!(node.side_block(&blk.header.hash()).unwrap().is_some());
        }
        assert_eq!(node.head().latest, 1);

        // Reorg to B2.
        let fcu = |head: B256, finalized: B256| {
            api.forkchoice_updated(ForkchoiceState {
                head_block_hash: head,
                safe_block_hash: B256::ZERO,
                finalized_block_hash: finalized,
            })
        };
        let out = fcu(b2.header.hash(), B256::ZERO).unwrap();
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Valid);
        assert_eq!(node.head().latest, 2);
        assert_eq!(node.head_header().unwrap().hash(), b2.header.hash());
        let b_at_2 = open("b2");
        for blk in [&b1, &b2] {
            exec::import_block(&b_at_2, blk.header.clone(), blk.body.clone()).unwrap();
        }
        assert_same_chain(&node, &b_at_2);
        assert!(!tx_known(&node, *tx_a.inner().tx_hash()));
        assert!(node.side_block(&a1.header.hash()).unwrap().is_some());
        assert!(node.side_block(&b2.header.hash()).unwrap().is_none());
        // The unwound block is still served by hash, with its senders.
        let unwound = simnode_api::ChainView::side_block(&**node, &a1.header.hash())
            .unwrap()
            .expect("served");
        assert_eq!(unwound.senders, vec![tx_a.signer()]);
        let state = node.state_after(2).unwrap();
        assert_eq!(state.account(&X).unwrap(), None);
        assert_eq!(state.account(&Y).unwrap().unwrap().balance, U256::from(12));
        // History below the head still reads right after the unwind.
        let state1 = node.state_after(1).unwrap();
        assert_eq!(state1.account(&Y).unwrap().unwrap().balance, U256::from(7));

        // And back to A1 (a shorter branch).
        let out = fcu(a1.header.hash(), B256::ZERO).unwrap();
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Valid);
        assert_eq!(node.head_header().unwrap().hash(), a1.header.hash());
        assert_same_chain(&node, &a_copy);
        assert!(tx_known(&node, *tx_a.inner().tx_hash()));
        assert!(node.side_block(&b1.header.hash()).unwrap().is_some());
        assert!(node.side_block(&b2.header.hash()).unwrap().is_some());

        // A branch whose third block has a bad state root: INVALID, latestValidHash = B2, and
        // the node stays on A1.
        let mut bad = b3.header.inner().clone();
        bad.state_root = B256::repeat_byte(0x11);
        let bad = bad.seal_slow();
        let bad_block = Block {
            header: bad.inner().clone(),
            body: b3.body.clone(),
        };
        let status = api.new_payload(bad_block, bad.hash()).unwrap();
        assert_eq!(status.status, PayloadStatusEnum::Accepted);
        let out = fcu(bad.hash(), B256::ZERO).unwrap();
        assert!(out.payload_status.status.is_invalid(), "{out:?}");
        assert_eq!(out.payload_status.latest_valid_hash, Some(b2.header.hash()));
        assert_eq!(node.head_header().unwrap().hash(), a1.header.hash());
        assert_same_chain(&node, &a_copy);
        assert!(node.side_block(&b2.header.hash()).unwrap().is_some());
        // The refused side block is kept as a bad block, as it was sent.
        let kept = node.bad_blocks().unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].0, bad.hash());
        let rlp = alloy::rlp::encode(Block {
            header: bad.inner().clone(),
            body: b3.body.clone(),
        });
        assert_eq!(kept[0].1, rlp);
        // Named again, the bad block is INVALID at once (not SYNCING on a block no longer
        // kept), and so is a payload building on it, with the branch's latest valid block.
        let out = fcu(bad.hash(), B256::ZERO).unwrap();
        assert!(out.payload_status.status.is_invalid(), "{out:?}");
        assert_eq!(out.payload_status.latest_valid_hash, Some(b2.header.hash()));
        let child = alloy::consensus::Header {
            parent_hash: bad.hash(),
            number: bad.number + 1,
            timestamp: bad.timestamp + 12,
            ..bad.inner().clone()
        };
        let child_hash = child.hash_slow();
        let child = Block {
            header: child,
            body: b3.body.clone(),
        };
        let status = api.new_payload(child, child_hash).unwrap();
        assert_eq!(
            status.status,
            PayloadStatusEnum::Invalid {
                validation_error: "links to previously rejected block".into()
            }
        );
        assert_eq!(status.latest_valid_hash, Some(b2.header.hash()));
        let out = fcu(child_hash, B256::ZERO).unwrap();
        assert!(out.payload_status.status.is_invalid(), "{out:?}");
        assert_eq!(node.head_header().unwrap().hash(), a1.header.hash());

        // An unknown head is SYNCING.
        let out = fcu(B256::repeat_byte(0x42), B256::ZERO).unwrap();
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Syncing);

        // Finalize A1: the B branch forks below it, so it can never become canonical and
        // leaves the side table; a forkchoice naming it is then an unknown head. A rewind
        // below the finalized block is skipped: VALID, nothing changes (the spec's choice for
        // a head that is a canonical ancestor).
        fcu(a1.header.hash(), a1.header.hash()).unwrap();
        for blk in [b1.header.hash(), b2.header.hash(), bad.hash()] {
            assert!(node.side_block(&blk).unwrap().is_none(), "{blk} kept");
        }
        let out = fcu(b2.header.hash(), B256::ZERO).unwrap();
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Syncing);
        let genesis = node.canonical_hash_raw(0).unwrap().unwrap();
        let out = fcu(genesis, B256::ZERO).unwrap();
        assert!(out.is_valid(), "{out:?}");
        assert_eq!(out.payload_status.latest_valid_hash, Some(genesis));
        assert_eq!(out.payload_id, None);
        assert_eq!(node.head_header().unwrap().hash(), a1.header.hash());
        assert!(matches!(
            node.unwind_to(0),
            Err(StoreError::BadUnwind { .. })
        ));
    }

    #[test]
    fn rewind_to_canonical_ancestor() {
        let node = open("rewind");
        let pool = Arc::new(Pool::default());
        let api = EngineApi::new(node.clone(), pool.clone());
        let t0 = genesis_ts(&node);
        let b1 = crate::sync::dev::build_block(&node, &[transfer(KEY1, 0, Y, 7)], t0 + 12).unwrap();
        let b2 = crate::sync::dev::build_block(&node, &[transfer(KEY0, 0, Y, 5)], t0 + 24).unwrap();
        let copy = open("rewind-copy");
        exec::import_block(&copy, b1.header.clone(), b1.body.clone()).unwrap();
        let state = |head: B256| ForkchoiceState {
            head_block_hash: head,
            safe_block_hash: head,
            finalized_block_hash: B256::ZERO,
        };
        let out = api.forkchoice_updated(state(b1.header.hash())).unwrap();
        assert_eq!(out.payload_status.status, PayloadStatusEnum::Valid);
        assert_eq!(node.head().latest, 1);
        assert_eq!(node.head().safe, Some(1));
        assert_same_chain(&node, &copy);
        // B2's transaction is back in the pool.
        assert_eq!(pool.len(), 1);
        // Forward again: B2 comes back from the side table, its transaction leaves the pool.
        api.forkchoice_updated(state(b2.header.hash())).unwrap();
        assert_eq!(pool.len(), 0);
        // A rewind whose safe block would not be on the chain it leaves is refused before
        // anything moves.
        let err = api
            .forkchoice_updated(ForkchoiceState {
                safe_block_hash: b2.header.hash(),
                ..state(b1.header.hash())
            })
            .unwrap_err();
        assert_eq!(err.code(), -38002);
        assert_eq!(node.head().latest, 2);
        // A proposal on a canonical ancestor above the finalized block rewinds to it and is
        // built there (the spec's rule; a consensus client re-orging out a late block asks
        // this of the block's parent).
        let b1_sealed = node.header_raw(1).unwrap().unwrap();
        let (to_b1, attributes) = proposal_on(&b1_sealed, X);
        let out = api
            .forkchoice_updated_with(to_b1, Some((3, attributes)))
            .unwrap();
        assert!(out.is_valid(), "{out:?}");
        assert!(out.payload_id.is_some(), "{out:?}");
        assert_eq!(node.head().latest, 1);
        api.forkchoice_updated(state(b2.header.hash())).unwrap();
        assert_eq!(node.head().latest, 2);
        // Rewound again, B2 re-sent as a payload on the head is executed, not parked. B1
        // final keeps B2: its branch joins the chain at the finalized block.
        api.forkchoice_updated(ForkchoiceState {
            finalized_block_hash: b1.header.hash(),
            ..state(b1.header.hash())
        })
        .unwrap();
        assert_eq!(node.head().finalized, Some(1));
        assert!(node.side_block(&b2.header.hash()).unwrap().is_some());
        let status = api.new_payload(block_of(&b2), b2.header.hash()).unwrap();
        assert_eq!(status.status, PayloadStatusEnum::Valid);
        assert_eq!(node.head().latest, 2);
        assert!(node.side_block(&b2.header.hash()).unwrap().is_none());
        assert_eq!(node.head_header().unwrap().hash(), b2.header.hash());
        assert_eq!(
            node.state_after(2)
                .unwrap()
                .account(&Y)
                .unwrap()
                .unwrap()
                .balance,
            U256::from(12)
        );
    }

    /// Before Osaka a payload takes blob transactions whose sidecars carry a proof per blob,
    /// and engine_getPayloadV4 gives them as `BlobsBundleV1`; a sidecar with cell proofs
    /// (Osaka's) waits.
    #[test]
    fn a_prague_payload_bundles_a_proof_per_blob() {
        use alloy::eips::{
            eip4844::{kzg_to_versioned_hash, Blob, BlobTransactionSidecar, Bytes48},
            eip7594::{
                BlobTransactionSidecarEip7594, BlobTransactionSidecarVariant, CELLS_PER_EXT_BLOB,
            },
        };
        use simnode_api::TxPool as _;
        let mut genesis = crate::chain::dev_genesis();
        genesis.config.osaka_time = None;
        let node = ScratchStore::open("prague-blobs", &genesis);
        let pool = Arc::new(Pool::default());
        let api = EngineApi::new(node.clone(), pool.clone());
        let head = node.head_header().unwrap();

        let commitment = Bytes48::repeat_byte(0xc0);
        let versioned = kzg_to_versioned_hash(commitment.as_slice());
        let blob_tx = |key: &str| blob_transfer(key, 0, versioned);
        let proof = Bytes48::repeat_byte(0x77);
        let per_blob = BlobTransactionSidecarVariant::Eip4844(BlobTransactionSidecar {
            blobs: vec![Blob::ZERO],
            commitments: vec![commitment],
            proofs: vec![proof],
        });
        let per_cell = BlobTransactionSidecarVariant::Eip7594(BlobTransactionSidecarEip7594 {
            blobs: vec![Blob::ZERO],
            commitments: vec![commitment],
            cell_proofs: vec![proof; CELLS_PER_EXT_BLOB],
        });
        let taken = blob_tx(KEY0);
        pool.insert_with_sidecar(taken.clone(), per_blob).unwrap();
        pool.insert_with_sidecar(blob_tx(KEY1), per_cell).unwrap();

        let id = build_started(&api, &head);
        assert_eq!(api.get_payload(5, id).unwrap_err().code(), -38005);
        let envelope = api.get_payload(4, id).unwrap();
        let payload: ExecutionPayloadV3 =
            serde_json::from_value(envelope["executionPayload"].clone()).unwrap();
        let txs = &payload.payload_inner.payload_inner.transactions;
        assert_eq!(txs.len(), 1, "only the per-blob sidecar's transaction");
        assert_eq!(
            alloy::primitives::keccak256(&txs[0]),
            *taken.tx_hash(),
            "the transaction alone, without its sidecar"
        );
        assert_eq!(payload.blob_gas_used, 131_072);
        let bundle = &envelope["blobsBundle"];
        assert_eq!(bundle["commitments"], serde_json::json!([commitment]));
        assert_eq!(
            bundle["proofs"],
            serde_json::json!([proof]),
            "a proof per blob"
        );
        assert_eq!(bundle["blobs"].as_array().unwrap().len(), 1);
    }
    /// A blob transaction that came before Osaka with a proof per blob and still waits when
    /// the payloads are Osaka's is not stuck: the first build leaves it out and has the pool
    /// compute its cells' proofs, and a later build takes it with them.
    #[test]
    fn a_sidecar_that_waited_across_osaka_gets_cell_proofs() {
        use alloy::eips::{
            eip4844::{Blob, BlobTransactionSidecar},
            eip7594::{BlobTransactionSidecarEip7594, BlobTransactionSidecarVariant},
        };
        use simnode_api::TxPool as _;
        let mut genesis = crate::chain::dev_genesis();
        genesis.config.osaka_time = Some(genesis.timestamp + 6);
        let node = ScratchStore::open("osaka-conversion", &genesis);
        let pool = Arc::new(Pool::default());
        let api = EngineApi::new(node.clone(), pool.clone());
        let head = node.head_header().unwrap();

        let kzg = simnode_api::pool::kzg_settings();
        let mut blobs = vec![Blob::ZERO];
        blobs[0][31] = 0x42;
        let per_blob = BlobTransactionSidecar::try_from_blobs_with_settings(blobs.clone(), kzg)
            .expect("a blob of field elements");
        let per_cell = BlobTransactionSidecarEip7594::try_from_blobs_with_settings(blobs, kzg)
            .expect("a blob of field elements");
        let versioned = per_blob.versioned_hashes().next().unwrap();
        let tx = blob_transfer(KEY0, 0, versioned);
        let hash = *tx.tx_hash();
        pool.insert_with_sidecar(tx, per_blob.into()).unwrap();

        let id = build_started(&api, &head);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !matches!(
            pool.sidecar(&hash).as_deref(),
            Some(BlobTransactionSidecarVariant::Eip7594(_))
        ) {
            assert!(std::time::Instant::now() < deadline, "never converted");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let envelope = api.get_payload(5, id).unwrap();
        let payload: ExecutionPayloadV3 =
            serde_json::from_value(envelope["executionPayload"].clone()).unwrap();
        let txs = &payload.payload_inner.payload_inner.transactions;
        assert_eq!(txs.len(), 1, "taken once it has cell proofs");
        assert_eq!(alloy::primitives::keccak256(&txs[0]), hash);
        let bundle = &envelope["blobsBundle"];
        assert_eq!(
            bundle["commitments"],
            serde_json::json!(per_cell.commitments)
        );
        assert_eq!(bundle["proofs"], serde_json::json!(per_cell.cell_proofs));
    }
}
