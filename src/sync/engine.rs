//! The Engine API a consensus client drives the node with: `engine_newPayloadV1..V4` executes
//! and stores a block, `engine_forkchoiceUpdatedV1..V3` moves head/safe/finalized.
//!
//! The node extends one canonical chain: a payload on top of the head is executed and stored;
//! a payload whose parent is unknown answers SYNCING; a valid-looking payload on a side branch
//! answers ACCEPTED and is not stored (reorgs are not supported yet). Payload building is not
//! offered: forkchoiceUpdated with attributes answers with no payload id.

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

#[derive(Debug, Clone)]
pub struct EngineApi {
    store: Arc<Store>,
    pool: Arc<Pool>,
}

fn invalid_params(msg: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32602, msg.into(), None::<()>)
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
        let head = self.store.head_header().map_err(internal)?;
        if header.parent_hash != head.hash() {
            let parent_known = self
                .store
                .number_of(&header.parent_hash)
                .map_err(internal)?
                .is_some();
            let status = if parent_known {
                PayloadStatusEnum::Accepted
            } else {
                PayloadStatusEnum::Syncing
            };
            return Ok(PayloadStatus::from_status(status));
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
        let Some(head_number) = number_of(state.head_block_hash)? else {
            return Ok(ForkchoiceUpdated::from_status(PayloadStatusEnum::Syncing));
        };
        if head_number != self.store.head().latest {
            // An older canonical block as head would need a rewind, which is not supported:
            // keep the longer chain and report the requested head as valid.
            tracing::warn!(target: "simnode::engine", head_number, "forkchoice head is not the stored head; keeping the stored head");
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
