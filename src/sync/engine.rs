//! The Engine API a consensus client drives the node with: `engine_newPayloadV1..V4` executes
//! and stores a block, `engine_forkchoiceUpdatedV1..V3` moves head/safe/finalized.
//!
//! A payload on top of the head is executed and stored; a payload whose parent is unknown
//! answers SYNCING; a payload whose parent is known but is not the head (a side branch) is kept
//! unexecuted in the store's side table and answers ACCEPTED.
//!
//! Reorgs: forkchoiceUpdated to a side block (or to a canonical block below the head) finds the
//! common ancestor with the canonical chain, unwinds the canonical chain to it
//! ([`Store::unwind_to`], which moves the unwound blocks to the side table), then executes and
//! stores the new branch block by block through the normal import path. If a block of the new
//! branch is invalid, the answer is INVALID with `latestValidHash` the last valid ancestor, and
//! the previous canonical chain is re-executed from the side table. A reorg never unwinds more
//! than [`MAX_REORG_DEPTH`] blocks nor below the finalized block (-38002 Invalid forkchoice
//! state). Transactions of unwound blocks are not put back into the pool. Payload building is
//! not offered: forkchoiceUpdated with attributes answers with no payload id.

use std::{net::SocketAddr, sync::Arc};

use alloy::rpc::types::engine::{
    CancunPayloadFields, ExecutionPayload, ExecutionPayloadSidecar, ExecutionPayloadV1,
    ExecutionPayloadV2, ExecutionPayloadV3, ForkchoiceState, ForkchoiceUpdated, PayloadStatus,
    PayloadStatusEnum, PraguePayloadFields,
};
use alloy::{
    consensus::{Block, Transaction, TxEnvelope},
    eips::eip7685::Requests,
    primitives::{Bytes, Sealable, B256},
};
use anyhow::Context as _;
use jsonrpsee::{
    server::{ServerBuilder, ServerConfig, ServerHandle},
    types::ErrorObjectOwned,
    RpcModule,
};

use super::jwt::{JwtLayer, JwtSecret};
use crate::{exec, pool::Pool, store::Store};

/// Capabilities this node answers `engine_exchangeCapabilities` with.
const CAPABILITIES: &[&str] = &[
    "engine_exchangeCapabilities",
    "engine_newPayloadV1",
    "engine_newPayloadV2",
    "engine_newPayloadV3",
    "engine_newPayloadV4",
    "engine_forkchoiceUpdatedV1",
    "engine_forkchoiceUpdatedV2",
    "engine_forkchoiceUpdatedV3",
];

/// Deepest reorg (blocks unwound from the canonical chain) forkchoiceUpdated performs.
pub const MAX_REORG_DEPTH: u64 = 64;

#[derive(Debug, Clone)]
pub struct EngineApi {
    store: Arc<Store>,
    pool: Arc<Pool>,
}

fn invalid_params(msg: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32602, msg.into(), None::<()>)
}

fn invalid_forkchoice() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-38002, "Invalid forkchoice state", None::<()>)
}

fn internal(err: impl std::fmt::Display) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32603, err.to_string(), None::<()>)
}

impl EngineApi {
    pub fn new(store: Arc<Store>, pool: Arc<Pool>) -> Self {
        Self { store, pool }
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
        if self.store.side_block(&hash).map_err(internal)?.is_some() {
            return Ok(PayloadStatus::from_status(PayloadStatusEnum::Accepted));
        }
        let head = self.store.head_header().map_err(internal)?;
        if header.parent_hash != head.hash() {
            let parent_known = self
                .store
                .number_of(&header.parent_hash)
                .map_err(internal)?
                .is_some()
                || self
                    .store
                    .side_block(&header.parent_hash)
                    .map_err(internal)?
                    .is_some();
            if !parent_known {
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
        match exec::import_block(&self.store, header, block.body) {
            Ok(gas) => {
                crate::rpc::metrics::record_block_gas(gas, started.elapsed());
                let state = self
                    .store
                    .state_after(self.store.head().latest)
                    .map_err(internal)?;
                self.pool.on_block(&tx_hashes, |a| {
                    state.account(a).ok().flatten().map(|acc| acc.nonce)
                });
                crate::rpc::metrics::set_head_block(self.store.head().latest);
                Ok(PayloadStatus::new(PayloadStatusEnum::Valid, Some(hash)))
            }
            Err(exec::BlockError::Store(e @ crate::store::StoreError::Db(_))) => Err(internal(e)),
            Err(e) => Ok(PayloadStatus::new(
                PayloadStatusEnum::Invalid {
                    validation_error: e.to_string(),
                },
                Some(parent_hash),
            )),
        }
    }

    pub fn forkchoice_updated(
        &self,
        state: ForkchoiceState,
    ) -> Result<ForkchoiceUpdated, ErrorObjectOwned> {
        let number_of = |hash: B256| self.store.number_of(&hash).map_err(internal);
        match number_of(state.head_block_hash)? {
            Some(n) if n == self.store.head().latest => {}
            Some(n) => {
                // A canonical block below the head: a pure rewind.
                self.check_reorg_target(n)?;
                self.store.unwind_to(n).map_err(internal)?;
                crate::rpc::metrics::set_head_block(n);
            }
            None => {
                if let Some(invalid) = self.reorg_to_side(state.head_block_hash)? {
                    return Ok(ForkchoiceUpdated::new(invalid));
                }
            }
        }
        let resolve = |hash: B256| -> Result<Option<u64>, ErrorObjectOwned> {
            if hash.is_zero() {
                return Ok(None);
            }
            number_of(hash)?.map(Some).ok_or_else(|| {
                ErrorObjectOwned::owned(-38002, "Invalid forkchoice state", None::<()>)
            })
        };
        let safe = resolve(state.safe_block_hash)?;
        let finalized = resolve(state.finalized_block_hash)?;
        self.store.set_finality(safe, finalized).map_err(internal)?;
        Ok(ForkchoiceUpdated::new(PayloadStatus::new(
            PayloadStatusEnum::Valid,
            Some(state.head_block_hash),
        )))
    }

    /// Refuses a reorg whose common ancestor is `ancestor` if it would unwind below the
    /// finalized block or more than [`MAX_REORG_DEPTH`] blocks.
    fn check_reorg_target(&self, ancestor: u64) -> Result<(), ErrorObjectOwned> {
        let head = self.store.head();
        if head.finalized.is_some_and(|f| ancestor < f)
            || head.latest.saturating_sub(ancestor) > MAX_REORG_DEPTH
        {
            return Err(invalid_forkchoice());
        }
        Ok(())
    }

    /// Makes the side block `head_hash` canonical. `Ok(None)` when done; `Ok(Some(status))`
    /// to answer with instead: SYNCING when the head (or a link of its branch) is unknown,
    /// INVALID when a block of the branch failed and the old chain was restored.
    fn reorg_to_side(&self, head_hash: B256) -> Result<Option<PayloadStatus>, ErrorObjectOwned> {
        // Walk back through the side table to a canonical block.
        let mut branch = Vec::new();
        let mut cursor = head_hash;
        let ancestor = loop {
            if let Some(n) = self.store.number_of(&cursor).map_err(internal)? {
                break n;
            }
            let Some((header, body)) = self.store.side_block(&cursor).map_err(internal)? else {
                // Unknown head (or a branch with a missing link): still syncing.
                return Ok(Some(PayloadStatus::from_status(PayloadStatusEnum::Syncing)));
            };
            if branch.len() as u64 > MAX_REORG_DEPTH + 1 {
                return Err(invalid_forkchoice());
            }
            cursor = header.parent_hash;
            branch.push((header, body));
        };
        branch.reverse();
        self.check_reorg_target(ancestor)?;
        let ancestor_hash = cursor;
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
                    // The invalid block is dropped; the valid part of the branch stays in the
                    // side table, and the old chain comes back.
                    self.store.remove_side_block(&hash).map_err(internal)?;
                    self.store.unwind_to(ancestor).map_err(internal)?;
                    for (header, body) in old {
                        let h = header.hash();
                        exec::import_block(&self.store, header, body).map_err(|e| {
                            internal(format!("reorg: cannot restore old block {h}: {e}"))
                        })?;
                        self.store.remove_side_block(&h).map_err(internal)?;
                    }
                    crate::rpc::metrics::set_head_block(self.store.head().latest);
                    return Ok(Some(PayloadStatus::new(
                        PayloadStatusEnum::Invalid {
                            validation_error: e.to_string(),
                        },
                        Some(last_valid),
                    )));
                }
            }
        }
        crate::rpc::metrics::set_head_block(self.store.head().latest);
        Ok(None)
    }

    /// Drops from the pool what the new head block made obsolete.
    fn after_import(&self, tx_hashes: &[B256]) -> Result<(), ErrorObjectOwned> {
        let state = self
            .store
            .state_after(self.store.head().latest)
            .map_err(internal)?;
        self.pool.on_block(tx_hashes, |a| {
            state.account(a).ok().flatten().map(|acc| acc.nonce)
        });
        Ok(())
    }

    pub fn into_rpc(self) -> anyhow::Result<RpcModule<EngineApi>> {
        let mut m = RpcModule::new(self);
        m.register_method("engine_exchangeCapabilities", |_, _, _| {
            CAPABILITIES.to_vec()
        })?;
        m.register_blocking_method("engine_newPayloadV1", |params, api, _| {
            let (payload,): (ExecutionPayloadV1,) = params.parse()?;
            let hash = payload.block_hash;
            let block = payload
                .try_into_block::<TxEnvelope>()
                .map_err(|e| invalid_params(e.to_string()))?;
            api.new_payload(block, hash)
        })?;
        m.register_blocking_method("engine_newPayloadV2", |params, api, _| {
            let (payload,): (serde_json::Value,) = params.parse()?;
            // V2 takes a V1 payload before Shanghai and a V2 (with withdrawals) after it.
            let payload = if payload.get("withdrawals").is_some() {
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
            let block = payload
                .try_into_block_with_sidecar::<TxEnvelope>(&ExecutionPayloadSidecar::none())
                .map_err(|e| invalid_params(e.to_string()))?;
            api.new_payload(block, hash)
        })?;
        m.register_blocking_method("engine_newPayloadV3", |params, api, _| {
            let (payload, hashes, beacon_root): (ExecutionPayloadV3, Vec<B256>, B256) =
                params.parse()?;
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
            let sidecar = ExecutionPayloadSidecar::v4(
                CancunPayloadFields::new(beacon_root, hashes),
                PraguePayloadFields::new(Requests::new(requests)),
            );
            api.new_payload_checked(ExecutionPayload::V3(payload), sidecar)
        })?;
        for name in [
            "engine_forkchoiceUpdatedV1",
            "engine_forkchoiceUpdatedV2",
            "engine_forkchoiceUpdatedV3",
        ] {
            m.register_blocking_method(name, |params, api, _| {
                let mut seq = params.sequence();
                let state: ForkchoiceState = seq.next()?;
                let _attributes: Option<serde_json::Value> = seq.optional_next()?;
                api.forkchoice_updated(state)
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
        let block = payload
            .try_into_block_with_sidecar::<TxEnvelope>(&sidecar)
            .map_err(|e| invalid_params(e.to_string()))?;
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

/// Serves the Engine API on `addr`, every request authenticated with `secret`.
pub async fn start(
    addr: SocketAddr,
    secret: JwtSecret,
    api: EngineApi,
) -> anyhow::Result<(ServerHandle, SocketAddr)> {
    let http = tower::ServiceBuilder::new().layer(JwtLayer(Arc::new(secret)));
    // Payloads of full blocks are large; the consensus client is trusted (it holds the secret).
    let config = ServerConfig::builder()
        .max_request_body_size(128 * 1024 * 1024)
        .max_response_body_size(128 * 1024 * 1024)
        .build();
    let server = ServerBuilder::default()
        .set_config(config)
        .set_http_middleware(http)
        .build(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for the Engine API"))?;
    let local = server.local_addr()?;
    Ok((server.start(api.into_rpc()?), local))
}
