//! `eth_getBlockReceipts`: every receipt of a block, built in one pass from the stored
//! consensus receipts, body and senders, and served from a memory-bounded cache of
//! serialized responses keyed by block hash.
//!
//! The receipt builder ([`build_block_receipts`], [`build_receipt`]) is public so that
//! `eth_getTransactionReceipt` and `eth_getLogs` in the eth module produce the same fields.

mod cache;

use alloy::{
    consensus::{ReceiptEnvelope, Transaction},
    eips::eip4844::DATA_GAS_PER_BLOB,
    rpc::types::{Log, TransactionReceipt},
};
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc, types::Extensions};
use serde_json::value::RawValue;
use simnode_api::{
    raw_answer::{self, Answer, SharedJson},
    BlockParam, ChainSpec, ModuleContext, RpcError, RpcResult, StoredBlock,
};

pub use cache::ResponseCache;

/// Upper bound of the serialized-response cache.
pub const DEFAULT_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Builds the RPC receipts of a whole block, ordered by transaction index.
///
/// `receipts` are the block's consensus receipts (one per transaction). Log indexes run across
/// the block; `gasUsed` is the difference of cumulative gas to the previous receipt.
pub fn build_block_receipts(
    spec: &ChainSpec,
    block: &StoredBlock,
    receipts: &[ReceiptEnvelope],
) -> RpcResult<Vec<TransactionReceipt>> {
    check_shape(block, receipts)?;
    let mut out = Vec::with_capacity(receipts.len());
    let mut log_index = 0u64;
    let mut prev_cumulative = 0u64;
    let blob_gas_price = blob_gas_price(spec, block);
    for index in 0..receipts.len() {
        let receipt = build_one(
            block,
            receipts,
            index,
            log_index,
            prev_cumulative,
            blob_gas_price,
        );
        log_index += receipts[index].logs().len() as u64;
        prev_cumulative = receipts[index].cumulative_gas_used();
        out.push(receipt);
    }
    Ok(out)
}

/// The gas each transaction of a block used: the differences of its receipts' cumulative gas.
pub fn gas_used_each(receipts: &[ReceiptEnvelope]) -> impl Iterator<Item = u64> + '_ {
    let mut previous = 0u64;
    receipts.iter().map(move |receipt| {
        let cumulative = receipt.cumulative_gas_used();
        let used = cumulative.saturating_sub(previous);
        previous = cumulative;
        used
    })
}

/// Builds the RPC receipt of the transaction at `index` of `block`.
pub fn build_receipt(
    spec: &ChainSpec,
    block: &StoredBlock,
    receipts: &[ReceiptEnvelope],
    index: usize,
) -> RpcResult<Option<TransactionReceipt>> {
    check_shape(block, receipts)?;
    if index >= receipts.len() {
        return Ok(None);
    }
    let log_index: u64 = receipts[..index]
        .iter()
        .map(|r| r.logs().len() as u64)
        .sum();
    let prev_cumulative = if index == 0 {
        0
    } else {
        receipts[index - 1].cumulative_gas_used()
    };
    Ok(Some(build_one(
        block,
        receipts,
        index,
        log_index,
        prev_cumulative,
        blob_gas_price(spec, block),
    )))
}

/// The RPC logs of one receipt, with block metadata; `first_log_index` is the block-wide
/// index of its first log.
pub fn rpc_logs(
    block: &StoredBlock,
    receipt: &ReceiptEnvelope,
    tx_index: usize,
    first_log_index: u64,
) -> Vec<Log> {
    let tx_hash = block
        .body
        .transactions
        .get(tx_index)
        .map(|tx| *tx.tx_hash());
    receipt
        .logs()
        .iter()
        .enumerate()
        .map(|(i, log)| Log {
            inner: log.clone(),
            block_hash: Some(block.hash()),
            block_number: Some(block.number()),
            block_timestamp: Some(block.header.timestamp),
            transaction_hash: tx_hash,
            transaction_index: Some(tx_index as u64),
            log_index: Some(first_log_index + i as u64),
            removed: false,
        })
        .collect()
}

fn check_shape(block: &StoredBlock, receipts: &[ReceiptEnvelope]) -> RpcResult<()> {
    let txs = block.body.transactions.len();
    if receipts.len() != txs || block.senders.len() != txs {
        return Err(RpcError::Internal(format!(
            "block {} has {} transactions, {} receipts and {} senders",
            block.number(),
            txs,
            receipts.len(),
            block.senders.len()
        )));
    }
    Ok(())
}

fn blob_gas_price(spec: &ChainSpec, block: &StoredBlock) -> Option<u128> {
    let excess = block.header.excess_blob_gas?;
    let params = spec.blob_params_at(block.header.timestamp)?;
    Some(params.calc_blob_fee(excess))
}

fn build_one(
    block: &StoredBlock,
    receipts: &[ReceiptEnvelope],
    index: usize,
    first_log_index: u64,
    prev_cumulative: u64,
    blob_gas_price: Option<u128>,
) -> TransactionReceipt {
    let tx = &block.body.transactions[index];
    let from = block.senders[index];
    let consensus = &receipts[index];
    let cumulative = consensus.cumulative_gas_used();
    let logs = rpc_logs(block, consensus, index, first_log_index);
    let inner = consensus.clone().map_logs({
        let mut logs = logs.into_iter();
        move |_| logs.next().unwrap_or_default()
    });
    let blob_gas_used = tx
        .blob_versioned_hashes()
        .map(|hashes| hashes.len() as u64 * DATA_GAS_PER_BLOB);
    let contract_address = tx.is_create().then(|| from.create(tx.nonce()));
    TransactionReceipt {
        inner,
        transaction_hash: *tx.tx_hash(),
        transaction_index: Some(index as u64),
        block_hash: Some(block.hash()),
        block_number: Some(block.number()),
        gas_used: cumulative.saturating_sub(prev_cumulative),
        effective_gas_price: tx.effective_gas_price(block.header.base_fee_per_gas),
        blob_gas_used,
        blob_gas_price: blob_gas_used.and(blob_gas_price),
        from,
        to: tx.to(),
        contract_address,
    }
}

/// Parses the block parameter the way every receipts-style method does: required, and any
/// malformation named in a -32602.
pub fn parse_block_param(param: Option<serde_json::Value>) -> RpcResult<BlockParam> {
    match param {
        None | Some(serde_json::Value::Null) => Err(RpcError::invalid_params(
            "missing value for required argument 0 (block number, tag or hash)",
        )),
        Some(v) => BlockParam::from_value(&v).map_err(RpcError::InvalidParams),
    }
}

#[rpc(server, namespace = "eth")]
pub trait ReceiptsApi {
    /// All receipts of a block, or `null` when there is no such block.
    #[method(name = "getBlockReceipts", with_extensions)]
    fn get_block_receipts(
        &self,
        block: Option<serde_json::Value>,
    ) -> JsonRpcResult<Answer<SharedJson>>;
}

/// The receipts module: the node's view plus the response cache.
pub struct Receipts {
    ctx: ModuleContext,
    cache: ResponseCache,
}

impl Receipts {
    pub fn new(ctx: ModuleContext) -> Self {
        Self::with_cache_bytes(ctx, DEFAULT_CACHE_BYTES)
    }

    pub fn with_cache_bytes(ctx: ModuleContext, bytes: usize) -> Self {
        Self {
            ctx,
            cache: ResponseCache::new(bytes),
        }
    }

    /// The answer for a block parameter, as JSON text: the receipts, or `null` when there is
    /// no such block.
    pub fn block_receipts_json(&self, param: &BlockParam) -> RpcResult<SharedJson> {
        let chain = &self.ctx.chain;
        // The hosted provider documents `pending` as `latest` here (where geth and the other
        // methods name the pending block): receipts are of mined transactions.
        let param = match param {
            BlockParam::Tag(simnode_api::block_id::BlockTag::Pending) => &BlockParam::LATEST,
            other => other,
        };
        let Some(number) = chain.resolve(param)? else {
            return json("null");
        };
        let Some(hash) = chain.canonical_hash(number)? else {
            return json("null");
        };
        if let Some(cached) = self.cache.get(&hash) {
            return Ok(cached);
        }
        let Some(block) = chain.block(number)? else {
            return json("null");
        };
        if block.hash() != hash {
            // The head moved between the two reads; answer for what the block read says.
            return self.serialize_block(&block);
        }
        let json = self.serialize_block(&block)?;
        self.cache.insert(hash, json.clone());
        Ok(json)
    }

    fn serialize_block(&self, block: &StoredBlock) -> RpcResult<SharedJson> {
        if block.body.transactions.is_empty() {
            return json("[]");
        }
        let receipts = self.ctx.chain.receipts(block.number())?.ok_or_else(|| {
            RpcError::Internal(format!("receipts of block {} missing", block.number()))
        })?;
        let built = build_block_receipts(&self.ctx.spec, block, &receipts)?;
        let text = serde_json::value::to_raw_value(&built).map_err(RpcError::internal)?;
        Ok(SharedJson::new(text))
    }
}

fn json(text: &str) -> RpcResult<SharedJson> {
    let raw = RawValue::from_string(text.to_owned()).map_err(RpcError::internal)?;
    Ok(SharedJson::new(raw))
}

impl ReceiptsApiServer for Receipts {
    fn get_block_receipts(
        &self,
        ext: &Extensions,
        block: Option<serde_json::Value>,
    ) -> JsonRpcResult<Answer<SharedJson>> {
        let param = parse_block_param(block)?;
        Ok(raw_answer::answer(ext, self.block_receipts_json(&param)?))
    }
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[("eth_getBlockReceipts", 1)];

/// The module the node registers.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    Receipts::new(ctx).into_rpc().into()
}

#[cfg(test)]
mod tests;
