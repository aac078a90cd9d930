//! The standard `eth_*`, `net_*` and `web3_*` methods that wallets and clients rely on,
//! served from the node's stored chain through [`simnode_api::ChainView`].
//!
//! Answers follow geth field for field (the execution-apis fixtures are recorded from it).
//! Beside geth's methods the module serves the `eth_` extensions other nodes offer, each as its
//! origin defines it: erigon's eth_callMany, Flashbots' eth_callBundle, EIP-7966's
//! eth_sendRawTransactionSync, reth's eth_getAccount, eth_getAccountInfo and
//! eth_getTransactionBySenderAndNonce. EVM work (eth_call, eth_estimateGas, the bundles) runs
//! on the blocking pool.

pub mod call_bundle;
pub mod call_many;
mod config;
mod evm;
mod fees;
mod filters;
mod logs;
mod node_facts;
mod pubsub;
pub mod send;
pub mod send_sync;
mod syncing;
mod uncles;

use std::sync::Arc;

use alloy::serde::JsonStorageKey;
use alloy::{
    consensus::{Header, Sealed},
    primitives::{Address, Bytes, B256, U256, U64},
    rpc::types::{
        state::StateOverride, Block, BlockOverrides, EIP1186AccountProofResponse, FeeHistory,
        Header as RpcHeader, Log, Transaction, TransactionReceipt, TransactionRequest,
    },
};
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc, types::Extensions};
use revm::DatabaseRef;
use serde_json::Value;
use simnode_api::{
    call,
    raw_answer::{answer_value, Answer, RawAnswerSlot},
    rpc_block::{self, FoundTransaction, PoolTransaction},
    BlockParam, KnownTransaction, ModuleContext, RpcError, RpcResult, StoredBlock,
};

/// A block or header answer: as the chain holds it, or the pending block's, which geth gives
/// without the fields only sealing fixes (`hash`, `nonce`, `miner` are null).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum MaybePending<T> {
    Sealed(T),
    Pending(Value),
}

impl<T: serde::Serialize> MaybePending<T> {
    fn new(answer: T, asked: &BlockParam) -> RpcResult<Self> {
        if *asked != BlockParam::Tag(simnode_api::block_id::BlockTag::Pending) {
            return Ok(Self::Sealed(answer));
        }
        let mut value = serde_json::to_value(answer)
            .map_err(|e| RpcError::Internal(format!("encoding the pending block: {e}")))?;
        if let Some(fields) = value.as_object_mut() {
            for field in ["hash", "nonce", "miner"] {
                fields.insert(field.into(), Value::Null);
            }
        }
        Ok(Self::Pending(value))
    }
}

/// What `web3_clientVersion` answers.
pub const CLIENT_VERSION: &str = concat!("simnode/v", env!("CARGO_PKG_VERSION"));

/// What a dev node answers instead (see `RpcLimits::anvil_compatible`): hardhat-network-helpers
/// refuse a node whose version does not start with `hardhat`, `zksync` or `anvil`.
pub const DEV_CLIENT_VERSION: &str =
    concat!("anvil-compatible/simnode/v", env!("CARGO_PKG_VERSION"));

/// The `web3_clientVersion` of a node with `limits`.
pub fn client_version(limits: &simnode_api::RpcLimits) -> &'static str {
    if limits.anvil_compatible {
        DEV_CLIENT_VERSION
    } else {
        CLIENT_VERSION
    }
}

#[rpc(server)]
pub trait EthApi {
    #[method(name = "eth_chainId")]
    fn chain_id(&self) -> JsonRpcResult<U64>;
    #[method(name = "net_version")]
    fn net_version(&self) -> JsonRpcResult<String>;
    #[method(name = "web3_clientVersion")]
    fn client_version(&self) -> JsonRpcResult<String>;
    #[method(name = "eth_blockNumber")]
    fn block_number(&self) -> JsonRpcResult<U64>;
    #[method(name = "eth_syncing")]
    fn syncing(&self) -> JsonRpcResult<syncing::SyncingStatus>;

    #[method(name = "eth_getBlockByNumber")]
    fn block_by_number(
        &self,
        block: BlockParam,
        full: bool,
    ) -> JsonRpcResult<Option<MaybePending<Block>>>;
    #[method(name = "eth_getBlockByHash")]
    fn block_by_hash(&self, hash: B256, full: bool) -> JsonRpcResult<Option<Block>>;
    #[method(name = "eth_getHeaderByNumber")]
    fn header_by_number(&self, block: BlockParam)
        -> JsonRpcResult<Option<MaybePending<RpcHeader>>>;
    #[method(name = "eth_getHeaderByHash")]
    fn header_by_hash(&self, hash: B256) -> JsonRpcResult<Option<RpcHeader>>;
    /// EIP-7928 block access lists exist from Amsterdam on; the answer is null for an unknown block.
    #[method(name = "eth_getBlockAccessList")]
    fn block_access_list(&self, block: BlockParam) -> JsonRpcResult<Option<Value>>;
    #[method(name = "eth_getBlockTransactionCountByNumber")]
    fn tx_count_by_number(&self, block: BlockParam) -> JsonRpcResult<Option<U64>>;
    #[method(name = "eth_getBlockTransactionCountByHash")]
    fn tx_count_by_hash(&self, hash: B256) -> JsonRpcResult<Option<U64>>;
    #[method(name = "eth_getTransactionByHash")]
    fn transaction_by_hash(&self, hash: B256) -> JsonRpcResult<Option<FoundTransaction>>;
    #[method(name = "eth_getRawTransactionByHash")]
    fn raw_transaction_by_hash(&self, hash: B256) -> JsonRpcResult<Option<Bytes>>;
    #[method(name = "eth_getTransactionByBlockHashAndIndex")]
    fn transaction_by_block_hash_and_index(
        &self,
        hash: B256,
        index: U64,
    ) -> JsonRpcResult<Option<Transaction>>;
    #[method(name = "eth_getTransactionByBlockNumberAndIndex")]
    fn transaction_by_block_number_and_index(
        &self,
        block: BlockParam,
        index: U64,
    ) -> JsonRpcResult<Option<Transaction>>;
    /// reth's: the sender's transaction with that nonce, mined or waiting in the pool.
    #[method(name = "eth_getTransactionBySenderAndNonce")]
    fn transaction_by_sender_and_nonce(
        &self,
        sender: Address,
        nonce: simnode_api::count::Count,
    ) -> JsonRpcResult<Option<FoundTransaction>>;
    /// The transaction's EIP-2718 bytes; null where the block or index has none, as the
    /// execution-apis fixtures have it and reth, Nethermind and Besu answer (geth's value-typed
    /// bytes come out as `0x` there).
    #[method(name = "eth_getRawTransactionByBlockHashAndIndex")]
    fn raw_transaction_by_block_hash_and_index(
        &self,
        hash: B256,
        index: U64,
    ) -> JsonRpcResult<Option<Bytes>>;
    #[method(name = "eth_getRawTransactionByBlockNumberAndIndex")]
    fn raw_transaction_by_block_number_and_index(
        &self,
        block: BlockParam,
        index: U64,
    ) -> JsonRpcResult<Option<Bytes>>;
    #[method(name = "eth_getTransactionReceipt")]
    fn transaction_receipt(&self, hash: B256) -> JsonRpcResult<Option<TransactionReceipt>>;

    #[method(name = "eth_getBalance")]
    fn balance(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<U256>;
    /// The account's trie leaf (reth's and hosted providers' method): null where it does not
    /// exist.
    #[method(name = "eth_getAccount")]
    fn account(
        &self,
        address: Address,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<Option<alloy::rpc::types::Account>>;
    /// Balance, nonce and code in one call (reth's method): zeros and `0x` where the account
    /// does not exist.
    #[method(name = "eth_getAccountInfo")]
    fn account_info(
        &self,
        address: Address,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<alloy::rpc::types::AccountInfo>;
    #[method(name = "eth_getCode")]
    fn code(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<Bytes>;
    #[method(name = "eth_getStorageAt")]
    fn storage_at(
        &self,
        address: Address,
        key: Value,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<B256>;
    #[method(name = "eth_getStorageValues")]
    fn storage_values(
        &self,
        requests: std::collections::BTreeMap<Address, Vec<Value>>,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<std::collections::BTreeMap<Address, Vec<B256>>>;
    #[method(name = "eth_getTransactionCount")]
    fn transaction_count(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<U64>;

    #[method(name = "eth_call")]
    async fn call(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<Box<call::CallBlockOverrides>>,
    ) -> JsonRpcResult<Bytes>;
    /// Flashbots' bundle simulation, as reth serves it (see [`call_bundle`]).
    #[method(name = "eth_callBundle")]
    async fn call_bundle(
        &self,
        bundle: alloy::rpc::types::mev::EthCallBundle,
    ) -> JsonRpcResult<alloy::rpc::types::mev::EthCallBundleResponse>;
    #[method(name = "eth_callMany")]
    async fn call_many(
        &self,
        bundles: Vec<alloy::rpc::types::Bundle>,
        state_context: Option<call::StateContext>,
        state_overrides: Option<StateOverride>,
        timeout_ms: Option<i64>,
    ) -> JsonRpcResult<Vec<Vec<alloy::rpc::types::EthCallResponse>>>;
    #[method(name = "eth_estimateGas")]
    async fn estimate_gas(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<Box<call::CallBlockOverrides>>,
    ) -> JsonRpcResult<U64>;

    #[method(name = "eth_createAccessList")]
    async fn create_access_list(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
    ) -> JsonRpcResult<alloy::eips::eip2930::AccessListResult>;

    #[method(name = "eth_gasPrice")]
    fn gas_price(&self) -> JsonRpcResult<U256>;
    #[method(name = "eth_maxPriorityFeePerGas")]
    fn max_priority_fee(&self) -> JsonRpcResult<U256>;
    #[method(name = "eth_baseFee")]
    fn base_fee(&self) -> JsonRpcResult<Option<U256>>;
    #[method(name = "eth_blobBaseFee")]
    fn blob_base_fee(&self) -> JsonRpcResult<Option<U256>>;
    #[method(name = "eth_feeHistory")]
    fn fee_history(
        &self,
        count: Value,
        newest: BlockParam,
        percentiles: Option<Vec<f64>>,
    ) -> JsonRpcResult<Value>;

    #[method(name = "eth_getLogs", with_extensions)]
    fn logs(&self, filter: Value) -> JsonRpcResult<Answer<Vec<Log>>>;

    #[method(name = "eth_sendRawTransaction")]
    async fn send_raw_transaction(&self, raw: Bytes) -> JsonRpcResult<B256>;
    /// EIP-7966: eth_sendRawTransaction, then the receipt once a block takes the transaction.
    #[method(name = "eth_sendRawTransactionSync")]
    async fn send_raw_transaction_sync(
        &self,
        raw: Bytes,
        wait_ms: Option<simnode_api::count::Count>,
    ) -> JsonRpcResult<TransactionReceipt>;

    /// EIP-7910: the fork configuration in force, the next and the last scheduled.
    #[method(name = "eth_config")]
    fn config(&self) -> JsonRpcResult<config::EthConfig>;

    /// Which history this node serves (all of it: it is an archive node).
    #[method(name = "eth_capabilities")]
    fn capabilities(&self) -> JsonRpcResult<config::Capabilities>;

    /// EIP-1186 account and storage proofs.
    #[method(name = "eth_getProof")]
    async fn proof(
        &self,
        address: Address,
        keys: Option<Vec<ProofKey>>,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<EIP1186AccountProofResponse>;
}

/// A storage key of `eth_getProof`, kept in the form it was given (the proof echoes it), and
/// at most 32 bytes long as geth wants it: alloy would take longer hex whose extra leading
/// bytes are zero.
#[derive(Debug, Clone)]
pub struct ProofKey(JsonStorageKey);

impl<'de> serde::Deserialize<'de> for ProofKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let hex = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(&text);
        if hex.len() > 64 {
            return Err(serde::de::Error::custom(format!(
                "storage key too long (want at most 32 bytes): \"{text}\""
            )));
        }
        // geth's keys are hex with or without the prefix; alloy would read "10" as decimal.
        serde_json::from_value(Value::String(format!("0x{hex}")))
            .map(ProofKey)
            .map_err(serde::de::Error::custom)
    }
}

/// Most storage keys one `eth_getProof` proves (each rebuilds the account's storage trie).
pub const MAX_PROOF_KEYS: usize = 1024;

/// The eth module: one struct holding the node's interface.
pub struct Eth {
    ctx: ModuleContext,
    /// The threads eth_call and its kin run on: one per core, in arrival order, so that many
    /// heavy calls at once queue (and time out in the queue) instead of each taking a thread of
    /// tokio's blocking pool and all of them sharing the cores.
    pool: Arc<simnode_api::offload::EvmPool>,
}

impl Eth {
    pub fn new(ctx: ModuleContext) -> Self {
        Self {
            ctx,
            pool: Arc::new(
                simnode_api::offload::EvmPool::per_core().expect("starting the EVM threads"),
            ),
        }
    }

    fn resolve(&self, block: &BlockParam) -> RpcResult<Option<u64>> {
        self.ctx.chain.resolve(block)
    }

    /// Block number for a state query; unknown blocks are "header not found" as in geth.
    fn state_block(&self, block: Option<BlockParam>) -> RpcResult<u64> {
        self.resolve(&block.unwrap_or_default())?
            .ok_or(RpcError::HeaderNotFound)
    }

    fn header(&self, number: u64) -> RpcResult<Arc<Sealed<Header>>> {
        self.ctx
            .chain
            .header(number)?
            .ok_or(RpcError::HeaderNotFound)
    }

    fn block_at(&self, number: Option<u64>) -> RpcResult<Option<Arc<StoredBlock>>> {
        match number {
            Some(n) => self.ctx.chain.block(n),
            None => Ok(None),
        }
    }

    /// The block `hash` names, canonical or not: geth answers by-hash lookups for every block
    /// it holds, a side branch's or a reorged-out one's too.
    fn block_by_any_hash(&self, hash: &B256) -> RpcResult<Option<Arc<StoredBlock>>> {
        match self.ctx.chain.block_number(hash)? {
            Some(n) => self.ctx.chain.block(n),
            None => self.ctx.chain.side_block(hash),
        }
    }

    fn state_value<T>(
        &self,
        block: Option<BlockParam>,
        f: impl FnOnce(&simnode_api::StateRef) -> RpcResult<T>,
    ) -> RpcResult<T> {
        let number = self.state_block(block)?;
        let state = self.ctx.chain.state_at(number)?;
        f(&state)
    }

    /// Prepares `request` on the state after `block` with the overrides, as eth_call does, and
    /// hands it to `f` on the blocking pool, within the request's deadline.
    async fn run_call<T: Send + 'static>(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<BlockOverrides>,
        f: impl FnOnce(call::Prepared) -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let number = self.state_block(block)?;
        let bounds = call::Bounds::starting_now(&self.ctx.limits);
        self.run_blocking(move |ctx| {
            let header = ctx.chain.header(number)?.ok_or(RpcError::HeaderNotFound)?;
            let state = ctx.chain.state_at(number)?;
            f(call::prepare(
                &ctx.spec,
                &header,
                state,
                request,
                state_overrides,
                block_overrides,
                bounds,
            )?)
        })
        .await
    }

    /// Runs `f` on the module's EVM threads; a call still queued at the deadline is answered
    /// -32016 without running.
    async fn run_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(ModuleContext) -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let ctx = self.ctx.clone();
        let timeout = ctx.limits.evm_timeout;
        let deadline = std::time::Instant::now() + timeout;
        let once = std::sync::Mutex::new(Some(f));
        let run = move |stop_at: std::time::Instant| {
            let f = once.lock().unwrap_or_else(|e| e.into_inner()).take();
            match f {
                Some(f) if std::time::Instant::now() < stop_at => f(ctx.clone()),
                _ => Err(RpcError::Timeout(timeout.as_millis() as u64)),
            }
        };
        let out = self.pool.run(deadline, run).await;
        // A run that ends past the deadline (its last stretch between two looks at the clock)
        // is answered as timed out all the same, as a request past its deadline is.
        if std::time::Instant::now() > deadline {
            return Err(RpcError::Timeout(timeout.as_millis() as u64));
        }
        out
    }
}

/// geth's parsing of a storage key: hex, at most 32 bytes, left-padded.
pub fn parse_storage_key(key: &Value) -> RpcResult<B256> {
    let s = key
        .as_str()
        .ok_or_else(|| RpcError::invalid_params(format!("invalid storage key: {key}")))?;
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if hex.len() > 64 {
        return Err(RpcError::invalid_params(format!(
            "storage key too long (want at most 32 bytes): \"{s}\""
        )));
    }
    let padded = format!("{hex:0>64}");
    let mut out = [0u8; 32];
    // Hex digits only: `from_str_radix` would also take a sign ("0x+0").
    alloy::hex::decode_to_slice(&padded, &mut out)
        .map_err(|_| RpcError::invalid_params(format!("invalid hex in storage key: \"{s}\"")))?;
    Ok(B256::from(out))
}

/// A slot as eth_getStorageValues takes it, geth's `common.Hash`: `0x` and exactly 64 hex
/// digits (eth_getStorageAt and eth_getProof are laxer: [`parse_storage_key`]).
fn parse_slot_hash(key: &Value) -> RpcResult<B256> {
    let invalid = |why: String| RpcError::invalid_params(format!("invalid argument 0: {why}"));
    let s = key
        .as_str()
        .ok_or_else(|| invalid(format!("a slot is a 32-byte hex string, not {key}")))?;
    let hex = s
        .strip_prefix("0x")
        .ok_or_else(|| invalid(format!("hex string without 0x prefix: \"{s}\"")))?;
    if hex.len() != 64 {
        return Err(invalid(format!(
            "hex string has length {}, want 64 for a 32-byte slot",
            hex.len()
        )));
    }
    hex.parse::<B256>()
        .map_err(|_| invalid(format!("invalid hex string: \"{s}\"")))
}

#[jsonrpsee::core::async_trait]
impl EthApiServer for Eth {
    fn chain_id(&self) -> JsonRpcResult<U64> {
        Ok(U64::from(self.ctx.spec.chain_id))
    }

    fn net_version(&self) -> JsonRpcResult<String> {
        Ok(self.ctx.spec.chain_id.to_string())
    }

    fn client_version(&self) -> JsonRpcResult<String> {
        Ok(client_version(&self.ctx.limits).to_owned())
    }

    fn block_number(&self) -> JsonRpcResult<U64> {
        Ok(U64::from(self.ctx.chain.head().latest))
    }

    fn syncing(&self) -> JsonRpcResult<syncing::SyncingStatus> {
        let target = *self.ctx.chain.sync_target().borrow();
        Ok(syncing::SyncingStatus::new(
            target.as_ref(),
            self.ctx.chain.head().latest,
        ))
    }

    fn block_by_number(
        &self,
        block: BlockParam,
        full: bool,
    ) -> JsonRpcResult<Option<MaybePending<Block>>> {
        let number = self.resolve(&block)?;
        let Some(b) = self.block_at(number)? else {
            return Ok(None);
        };
        Ok(Some(MaybePending::new(rpc_block::block(&b, full), &block)?))
    }

    fn block_by_hash(&self, hash: B256, full: bool) -> JsonRpcResult<Option<Block>> {
        Ok(self
            .block_by_any_hash(&hash)?
            .map(|b| rpc_block::block(&b, full)))
    }

    // geth's header answer is the block's without the body: no size, transactions or uncles.
    fn header_by_number(
        &self,
        block: BlockParam,
    ) -> JsonRpcResult<Option<MaybePending<RpcHeader>>> {
        let Some(number) = self.resolve(&block)? else {
            return Ok(None);
        };
        let Some(header) = self.ctx.chain.header(number)? else {
            return Ok(None);
        };
        let header = RpcHeader::from_consensus((*header).clone(), None, None);
        Ok(Some(MaybePending::new(header, &block)?))
    }

    fn header_by_hash(&self, hash: B256) -> JsonRpcResult<Option<RpcHeader>> {
        let header = match self.ctx.chain.block_number(&hash)? {
            Some(number) => self.ctx.chain.header(number)?.map(|h| (*h).clone()),
            None => self.ctx.chain.side_block(&hash)?.map(|b| b.header.clone()),
        };
        Ok(header.map(|h| RpcHeader::from_consensus(h, None, None)))
    }

    fn block_access_list(&self, block: BlockParam) -> JsonRpcResult<Option<Value>> {
        let Some(number) = self.resolve(&block)? else {
            return Ok(None);
        };
        let Some(header) = self.ctx.chain.header(number)? else {
            return Ok(None);
        };
        if alloy_hardforks::EthereumHardforks::is_amsterdam_active_at_timestamp(
            &*self.ctx.spec,
            header.timestamp,
        ) {
            // Amsterdam blocks are not executed by this node, so none is stored to answer from.
            return Err(RpcError::Server(format!(
                "block {number} is an Amsterdam block; simnode does not record block access lists"
            ))
            .into());
        }
        Err(RpcError::PreForkBlock(
            "block access list not available for pre-Amsterdam blocks".into(),
        )
        .into())
    }

    fn tx_count_by_number(&self, block: BlockParam) -> JsonRpcResult<Option<U64>> {
        let number = self.resolve(&block)?;
        Ok(self
            .block_at(number)?
            .map(|b| U64::from(b.body.transactions.len())))
    }

    fn tx_count_by_hash(&self, hash: B256) -> JsonRpcResult<Option<U64>> {
        Ok(self
            .block_by_any_hash(&hash)?
            .map(|b| U64::from(b.body.transactions.len())))
    }

    // As geth answers: null if unknown.
    fn raw_transaction_by_hash(&self, hash: B256) -> JsonRpcResult<Option<Bytes>> {
        Ok(self.ctx.raw_transaction(&hash)?)
    }

    fn transaction_by_hash(&self, hash: B256) -> JsonRpcResult<Option<FoundTransaction>> {
        Ok(self.ctx.find_transaction(&hash)?.map(|known| match known {
            KnownTransaction::Mined { block, index } => {
                FoundTransaction::Mined(rpc_block::transaction(&block, index))
            }
            KnownTransaction::Pooled(tx) => FoundTransaction::Pooled(PoolTransaction::of(tx)),
        }))
    }

    fn transaction_by_block_hash_and_index(
        &self,
        hash: B256,
        index: U64,
    ) -> JsonRpcResult<Option<Transaction>> {
        let index = index.to::<u64>() as usize;
        Ok(self
            .block_by_any_hash(&hash)?
            .filter(|b| index < b.body.transactions.len())
            .map(|b| rpc_block::transaction(&b, index)))
    }

    fn transaction_by_block_number_and_index(
        &self,
        block: BlockParam,
        index: U64,
    ) -> JsonRpcResult<Option<Transaction>> {
        let number = self.resolve(&block)?;
        let index = index.to::<u64>() as usize;
        Ok(self
            .block_at(number)?
            .filter(|b| index < b.body.transactions.len())
            .map(|b| rpc_block::transaction(&b, index)))
    }

    fn transaction_by_sender_and_nonce(
        &self,
        sender: Address,
        nonce: simnode_api::count::Count,
    ) -> JsonRpcResult<Option<FoundTransaction>> {
        if let Some((_, hash)) =
            simnode_api::lookup::mined_by_sender_and_nonce(&self.ctx, sender, nonce.0)?
        {
            return self.transaction_by_hash(hash);
        }
        Ok(self
            .ctx
            .pool
            .pending()
            .into_iter()
            .find(|tx| {
                tx.signer() == sender && alloy::consensus::Transaction::nonce(tx.inner()) == nonce.0
            })
            .map(|tx| FoundTransaction::Pooled(PoolTransaction::of(tx))))
    }

    fn raw_transaction_by_block_hash_and_index(
        &self,
        hash: B256,
        index: U64,
    ) -> JsonRpcResult<Option<Bytes>> {
        let number = self.ctx.chain.block_number(&hash)?;
        Ok(raw_transaction_at(self.block_at(number)?, index))
    }

    fn raw_transaction_by_block_number_and_index(
        &self,
        block: BlockParam,
        index: U64,
    ) -> JsonRpcResult<Option<Bytes>> {
        let number = self.resolve(&block)?;
        Ok(raw_transaction_at(self.block_at(number)?, index))
    }

    fn transaction_receipt(&self, hash: B256) -> JsonRpcResult<Option<TransactionReceipt>> {
        Ok(stored_receipt(&self.ctx, hash)?)
    }

    fn balance(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<U256> {
        Ok(self.state_value(block, |s| {
            Ok(s.basic_ref(address)?.map(|a| a.balance).unwrap_or_default())
        })?)
    }

    fn account(
        &self,
        address: Address,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<Option<alloy::rpc::types::Account>> {
        let number = self.state_block(block)?;
        Ok(self.ctx.chain.trie_account(number, address)?)
    }

    fn account_info(
        &self,
        address: Address,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<alloy::rpc::types::AccountInfo> {
        Ok(self.state_value(block, |s| {
            let Some(info) = s.basic_ref(address)? else {
                return Ok(alloy::rpc::types::AccountInfo::default());
            };
            Ok(alloy::rpc::types::AccountInfo {
                balance: info.balance,
                nonce: info.nonce,
                code: code_of(s, info)?,
            })
        })?)
    }

    fn code(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<Bytes> {
        Ok(self.state_value(block, |s| match s.basic_ref(address)? {
            Some(info) => code_of(s, info),
            None => Ok(Bytes::new()),
        })?)
    }

    fn storage_at(
        &self,
        address: Address,
        key: Value,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<B256> {
        // geth finds the block's state before it reads the key.
        Ok(self.state_value(block, |s| {
            let key = parse_storage_key(&key)?;
            Ok(B256::from(s.storage_ref(address, key.into())?))
        })?)
    }

    fn storage_values(
        &self,
        requests: std::collections::BTreeMap<Address, Vec<Value>>,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<std::collections::BTreeMap<Address, Vec<B256>>> {
        let mut keys = std::collections::BTreeMap::new();
        let mut total = 0usize;
        for (address, slots) in &requests {
            let parsed = slots
                .iter()
                .map(parse_slot_hash)
                .collect::<RpcResult<Vec<_>>>()?;
            total += parsed.len();
            keys.insert(*address, parsed);
        }
        // geth counts slots, not addresses: addresses with no slots ask for nothing.
        if total == 0 {
            return Err(RpcError::invalid_params("empty request").into());
        }
        if total > 1024 {
            return Err(RpcError::ClientLimitExceeded(format!(
                "too many slots (max 1024, got {total})"
            ))
            .into());
        }
        Ok(self.state_value(block, |s| {
            keys.into_iter()
                .map(|(address, slots)| {
                    let values = slots
                        .into_iter()
                        .map(|k| Ok(B256::from(s.storage_ref(address, k.into())?)))
                        .collect::<RpcResult<Vec<_>>>()?;
                    Ok((address, values))
                })
                .collect()
        })?)
    }

    fn transaction_count(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<U64> {
        let pending = matches!(
            block,
            Some(BlockParam::Tag(simnode_api::block_id::BlockTag::Pending))
        );
        // The pending nonce is the pool's count on the latest state, as geth's: the same number
        // the pending block gives, without building it for every transaction a wallet sends.
        let nonce_at = |block| {
            self.state_value(block, |s| {
                Ok(s.basic_ref(address)?.map(|a| a.nonce).unwrap_or_default())
            })
        };
        if !pending {
            return Ok(U64::from(nonce_at(block)?));
        }
        // A miner stores its block before it drops the block's transactions from the pool, so a
        // state read before the one and a pool read after the other would see neither: the
        // state is read again until it held still across the pool read (a few blocks in a row
        // at most; past that the last count is the answer).
        let mut state_nonce = nonce_at(None)?;
        let mut next = self.ctx.pool.next_nonce(&address, state_nonce);
        for _ in 0..8 {
            let now = nonce_at(None)?;
            if now == state_nonce {
                break;
            }
            state_nonce = now;
            next = self.ctx.pool.next_nonce(&address, state_nonce);
        }
        Ok(U64::from(next))
    }

    async fn call(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<Box<call::CallBlockOverrides>>,
    ) -> JsonRpcResult<Bytes> {
        let overrides = block_overrides.map(|b| b.into_checked()).transpose()?;
        Ok(self
            .run_call(request, block, state_overrides, overrides, |prepared| {
                let call::Prepared {
                    mut db,
                    env,
                    tx,
                    bounds,
                    precompiles,
                    ..
                } = prepared;
                let result = evm::run(&mut db, &env, &precompiles, tx.clone(), &bounds)?;
                if let revm::context::result::ExecutionResult::Halt { reason, .. } = &result {
                    let words = evm::halt_words(&mut db, &env, &precompiles, tx, &bounds, reason)?;
                    return Err(RpcError::Server(words));
                }
                evm::call_output(result)
            })
            .await?)
    }

    async fn call_bundle(
        &self,
        bundle: alloy::rpc::types::mev::EthCallBundle,
    ) -> JsonRpcResult<alloy::rpc::types::mev::EthCallBundleResponse> {
        let state = serde_json::to_value(bundle.state_block_number).map_err(RpcError::internal)?;
        let state = BlockParam::from_value(&state).map_err(RpcError::invalid_params)?;
        let number = self.state_block(Some(state))?;
        let asked = bundle.timeout.map(std::time::Duration::from_millis);
        let bounds = call::Bounds::starting_now_within(&self.ctx.limits, asked);
        Ok(self
            .run_blocking(move |ctx| call_bundle::call_bundle(&ctx, bundle, number, bounds))
            .await?)
    }

    async fn call_many(
        &self,
        bundles: Vec<alloy::rpc::types::Bundle>,
        state_context: Option<call::StateContext>,
        state_overrides: Option<StateOverride>,
        timeout_ms: Option<i64>,
    ) -> JsonRpcResult<Vec<Vec<alloy::rpc::types::EthCallResponse>>> {
        let context = state_context.unwrap_or_default();
        let number = self.state_block(context.block_number)?;
        let first = context.transactions_first();
        // erigon's fourth parameter: a shorter deadline than the node's, in milliseconds;
        // 0 or less sets none (the node's holds), as in erigon.
        let asked = timeout_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .filter(|ms| *ms > 0)
            .map(std::time::Duration::from_millis);
        let bounds = call::Bounds::starting_now_within(&self.ctx.limits, asked);
        Ok(self
            .run_blocking(move |ctx| {
                call_many::call_many(&ctx, number, first, bundles, state_overrides, bounds)
            })
            .await?)
    }

    async fn estimate_gas(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
        block_overrides: Option<Box<call::CallBlockOverrides>>,
    ) -> JsonRpcResult<U64> {
        let overrides = block_overrides.map(|b| b.into_checked()).transpose()?;
        Ok(self
            .run_call(request, block, state_overrides, overrides, |prepared| {
                // The block's gas limit, or the one the overrides give it, bounds the search.
                let block_gas_limit = prepared.env.block_env.gas_limit;
                evm::estimate(prepared, block_gas_limit).map(U64::from)
            })
            .await?)
    }

    async fn create_access_list(
        &self,
        request: TransactionRequest,
        block: Option<BlockParam>,
        state_overrides: Option<StateOverride>,
    ) -> JsonRpcResult<alloy::eips::eip2930::AccessListResult> {
        // geth applies this method's overrides without its precompile table: a move names no
        // precompile, and an account override leaves the precompile at its address running.
        if let Some((address, _)) = state_overrides
            .iter()
            .flatten()
            .find(|(_, account)| account.move_precompile_to.is_some())
        {
            return Err(RpcError::Server(format!("account {address} is not a precompile")).into());
        }
        Ok(self
            .run_call(request, block, state_overrides, None, |mut prepared| {
                prepared.precompiles = call::PrecompileEdits::default();
                evm::create_access_list(prepared)
            })
            .await?)
    }

    fn gas_price(&self) -> JsonRpcResult<U256> {
        let latest = self.header(self.ctx.chain.head().latest)?;
        let tip = fees::suggested_tip(&self.ctx)?;
        Ok(U256::from(tip) + U256::from(latest.base_fee_per_gas.unwrap_or_default()))
    }

    fn max_priority_fee(&self) -> JsonRpcResult<U256> {
        Ok(U256::from(fees::suggested_tip(&self.ctx)?))
    }

    fn base_fee(&self) -> JsonRpcResult<Option<U256>> {
        let latest = self.header(self.ctx.chain.head().latest)?;
        Ok(self.ctx.spec.next_base_fee(&latest).map(U256::from))
    }

    fn blob_base_fee(&self) -> JsonRpcResult<Option<U256>> {
        let latest = self.header(self.ctx.chain.head().latest)?;
        // Before Cancun there is no blob fee: null, as geth answers.
        Ok(latest
            .excess_blob_gas
            .map(|_| U256::from(fees::blob_base_fee(&self.ctx.spec, &latest))))
    }

    fn fee_history(
        &self,
        count: Value,
        newest: BlockParam,
        percentiles: Option<Vec<f64>>,
    ) -> JsonRpcResult<Value> {
        let history: FeeHistory =
            fees::fee_history(&self.ctx, &count, &newest, percentiles.as_deref())?;
        if history.gas_used_ratio.is_empty() {
            // No blocks asked for: geth's answer has a null ratio list, and nothing else.
            return Ok(serde_json::json!({"oldestBlock": "0x0", "gasUsedRatio": null}));
        }
        let mut value = serde_json::to_value(&history).map_err(RpcError::internal)?;
        // geth writes whole ratios as integers (`0`, `1`), not `0.0`.
        for key in ["gasUsedRatio", "blobGasUsedRatio"] {
            if let Some(ratios) = value.get_mut(key).and_then(Value::as_array_mut) {
                for r in ratios.iter_mut() {
                    if let Some(f) = r
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && (0.0..=1.0).contains(f))
                    {
                        *r = Value::from(f as u64);
                    }
                }
            }
        }
        Ok(value)
    }

    fn logs(&self, ext: &Extensions, filter: Value) -> JsonRpcResult<Answer<Vec<Log>>> {
        let logs = logs::get_logs(&self.ctx, &filter)?;
        Ok(answer_value(RawAnswerSlot::of(ext).as_ref(), logs))
    }

    async fn send_raw_transaction(&self, raw: Bytes) -> JsonRpcResult<B256> {
        send_sync::sent(
            &self.ctx,
            send::send_raw_transaction_async(&self.ctx, raw.into()),
        )
        .await
    }

    async fn send_raw_transaction_sync(
        &self,
        raw: Bytes,
        wait_ms: Option<simnode_api::count::Count>,
    ) -> JsonRpcResult<TransactionReceipt> {
        let wait = self.ctx.limits.tx_sync_wait(wait_ms.map(|w| w.0));
        send_sync::send_and_wait(&self.ctx, raw.into(), wait).await
    }

    fn config(&self) -> JsonRpcResult<config::EthConfig> {
        Ok(config::eth_config(&self.ctx.spec, &*self.ctx.chain)?)
    }

    fn capabilities(&self) -> JsonRpcResult<config::Capabilities> {
        Ok(config::capabilities(&*self.ctx.chain, true)?)
    }

    async fn proof(
        &self,
        address: Address,
        keys: Option<Vec<ProofKey>>,
        block: Option<BlockParam>,
    ) -> JsonRpcResult<EIP1186AccountProofResponse> {
        // `null` asks for no storage, as geth reads it.
        let keys: Vec<JsonStorageKey> = keys
            .unwrap_or_default()
            .into_iter()
            .map(|ProofKey(key)| key)
            .collect();
        if keys.len() > MAX_PROOF_KEYS {
            return Err(RpcError::invalid_params(format!(
                "too many storage keys: {} (at most {MAX_PROOF_KEYS})",
                keys.len()
            ))
            .into());
        }
        let number = self.state_block(block)?;
        Ok(self
            .run_blocking(move |ctx| ctx.chain.proof(number, address, &keys))
            .await?)
    }
}

/// Transaction `index` of `block` as EIP-2718 bytes; empty where there is none (geth's answer).
fn raw_transaction_at(block: Option<Arc<StoredBlock>>, index: U64) -> Option<Bytes> {
    use alloy::eips::Encodable2718;
    let index = usize::try_from(index.to::<u64>()).ok()?;
    let block = block?;
    let tx = block.body.transactions.get(index)?;
    Some(tx.encoded_2718().into())
}

/// The code of an account the state holds.
fn code_of(state: &simnode_api::StateRef, info: revm::state::AccountInfo) -> RpcResult<Bytes> {
    if info.code_hash == revm::primitives::KECCAK_EMPTY {
        return Ok(Bytes::new());
    }
    let code = match info.code {
        Some(code) => code,
        None => state.code_by_hash_ref(info.code_hash)?,
    };
    Ok(code.original_bytes())
}

/// The receipt of a mined transaction, from the store (None: not in a canonical block).
fn stored_receipt(ctx: &ModuleContext, hash: B256) -> RpcResult<Option<TransactionReceipt>> {
    let Some(loc) = ctx.chain.transaction_location(&hash)? else {
        return Ok(None);
    };
    let Some(block) = ctx.chain.block(loc.block_number)? else {
        return Ok(None);
    };
    let Some(receipts) = ctx.chain.receipts(loc.block_number)? else {
        return Ok(None);
    };
    simnode_receipts::build_receipt(&ctx.spec, &block, &receipts, loc.index as usize)
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("eth_chainId", 0),
    ("net_version", 0),
    ("web3_clientVersion", 0),
    ("eth_blockNumber", 0),
    ("eth_syncing", 0),
    ("eth_getBlockByNumber", 2),
    ("eth_getBlockByHash", 2),
    ("eth_getHeaderByNumber", 1),
    ("eth_getHeaderByHash", 1),
    ("eth_getBlockAccessList", 1),
    ("eth_getBlockTransactionCountByNumber", 1),
    ("eth_getBlockTransactionCountByHash", 1),
    ("eth_getTransactionByHash", 1),
    ("eth_getRawTransactionByHash", 1),
    ("eth_getTransactionByBlockHashAndIndex", 2),
    ("eth_getTransactionByBlockNumberAndIndex", 2),
    ("eth_getTransactionBySenderAndNonce", 2),
    ("eth_getRawTransactionByBlockHashAndIndex", 2),
    ("eth_getRawTransactionByBlockNumberAndIndex", 2),
    ("eth_getTransactionReceipt", 1),
    ("eth_getBalance", 2),
    ("eth_getAccount", 2),
    ("eth_getAccountInfo", 2),
    ("eth_getCode", 2),
    ("eth_getStorageAt", 3),
    ("eth_getStorageValues", 2),
    ("eth_getTransactionCount", 2),
    ("eth_call", 4),
    ("eth_callBundle", 1),
    ("eth_callMany", 4),
    ("eth_estimateGas", 4),
    ("eth_createAccessList", 3),
    ("eth_gasPrice", 0),
    ("eth_maxPriorityFeePerGas", 0),
    ("eth_baseFee", 0),
    ("eth_blobBaseFee", 0),
    ("eth_feeHistory", 3),
    ("eth_getLogs", 1),
    ("eth_sendRawTransaction", 1),
    ("eth_sendRawTransactionSync", 2),
    ("eth_config", 0),
    ("eth_capabilities", 0),
    ("eth_getProof", 3),
    ("eth_subscribe", 2),
    ("eth_unsubscribe", 1),
    ("eth_newFilter", 1),
    ("eth_newBlockFilter", 0),
    ("eth_newPendingTransactionFilter", 1),
    ("eth_getFilterChanges", 1),
    ("eth_getFilterLogs", 1),
    ("eth_uninstallFilter", 1),
    ("eth_getUncleCountByBlockNumber", 1),
    ("eth_getUncleCountByBlockHash", 1),
    ("eth_getUncleByBlockNumberAndIndex", 2),
    ("eth_getUncleByBlockHashAndIndex", 2),
    ("net_listening", 0),
    ("net_peerCount", 0),
    ("web3_sha3", 1),
];

/// The module the node registers.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    use filters::EthFilterApiServer;
    use node_facts::NodeFactsApiServer;
    use pubsub::EthPubSubApiServer;
    use uncles::EthUncleApiServer;
    let mut module = Eth::new(ctx.clone()).into_rpc().remove_context();
    module
        .merge(
            pubsub::EthPubSub::new(ctx.clone())
                .into_rpc()
                .remove_context(),
        )
        .expect("the subscription methods are not among the eth methods");
    module
        .merge(
            filters::EthFilters::new(ctx.clone())
                .into_rpc()
                .remove_context(),
        )
        .expect("the filter methods are not among the eth methods");
    module
        .merge(uncles::EthUncles::new(ctx).into_rpc().remove_context())
        .expect("the uncle methods are not among the eth methods");
    module
        .merge(node_facts::NodeFacts.into_rpc().remove_context())
        .expect("the node's facts are not among the eth methods");
    module.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn storage_keys_parse_like_geth() {
        assert_eq!(parse_storage_key(&json!("0x00")).unwrap(), B256::ZERO);
        assert_eq!(
            parse_storage_key(&json!("0x1")).unwrap(),
            B256::with_last_byte(1)
        );
        let long = format!("0x{}", "0".repeat(65));
        let e = parse_storage_key(&json!(long)).unwrap_err();
        assert_eq!(e.code(), -32602);
        assert!(e.to_string().starts_with("storage key too long"));
        let e = parse_storage_key(&json!("0xasdf")).unwrap_err();
        assert!(e.to_string().starts_with("invalid hex in storage key"));
    }
}

#[cfg(test)]
mod fake_chain_tests;
