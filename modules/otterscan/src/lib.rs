//! Otterscan's `ots_*` methods (API level 8, as erigon defines them and anvil serves them), so a
//! local Otterscan block explorer can browse the node's chain: block details with issuance and
//! fees, a block's transactions a page at a time, call trees, internal operations, revert data,
//! an address's transactions, a contract's creator and a sender's transaction by nonce.
//!
//! Everything comes from the stored chain; what blocks do not record (call trees, internal
//! transfers, who touched an address) comes from replaying their transactions under a call
//! tracer, within `--rpc.evm-timeout`. The node keeps no address index: an address search walks
//! blocks from its starting point, tracing each, until it has a page (-32016 when the deadline
//! comes first with nothing found). A sender's transaction by nonce and a contract's creator are
//! found by bisecting the state history (nonce and code are kept per block) and then looking
//! into one block.

mod replay;
mod search;

use std::sync::Arc;

use alloy::{
    consensus::Transaction as _,
    primitives::{Address, Bytes, B256, U256},
    rpc::types::{
        trace::otterscan::{
            BlockDetails, ContractCreator, InternalIssuance, InternalOperation, OperationType,
            OtsBlock, OtsBlockTransactions, OtsReceipt, OtsTransactionReceipt, TraceEntry,
            TransactionsWithReceipts,
        },
        Block, BlockTransactions, TransactionReceipt,
    },
};
use alloy_evm::block::calc;
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc};
use revm::context::result::ExecutionResult;
use revm_inspectors::tracing::types::{CallKind, CallTrace};
use simnode_api::{
    call::Bounds, count::Count, rpc_block, BlockParam, KnownTransaction, ModuleContext, RpcError,
    RpcResult, StoredBlock,
};

/// The Otterscan API level these methods implement (Otterscan 2 asks for at least 8).
pub const API_LEVEL: u64 = 8;

/// Most transactions one page may ask for.
pub const MAX_PAGE_SIZE: u64 = 1_000;

#[rpc(server)]
pub trait OtterscanApi {
    #[method(name = "ots_getApiLevel")]
    fn api_level(&self) -> JsonRpcResult<u64>;

    #[method(name = "ots_hasCode")]
    fn has_code(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<bool>;

    #[method(name = "ots_getInternalOperations")]
    async fn internal_operations(
        &self,
        hash: B256,
    ) -> JsonRpcResult<Option<Vec<InternalOperation>>>;

    #[method(name = "ots_getTransactionError")]
    async fn transaction_error(&self, hash: B256) -> JsonRpcResult<Option<Bytes>>;

    #[method(name = "ots_traceTransaction")]
    async fn trace_transaction(&self, hash: B256) -> JsonRpcResult<Option<Vec<TraceEntry>>>;

    #[method(name = "ots_getBlockDetails")]
    fn block_details(&self, block: BlockParam) -> JsonRpcResult<Option<BlockDetails>>;

    #[method(name = "ots_getBlockDetailsByHash")]
    fn block_details_by_hash(&self, hash: B256) -> JsonRpcResult<Option<BlockDetails>>;

    #[method(name = "ots_getBlockTransactions")]
    fn block_transactions(
        &self,
        block: BlockParam,
        page: Count,
        page_size: Count,
    ) -> JsonRpcResult<Option<OtsBlockTransactions>>;

    #[method(name = "ots_searchTransactionsBefore")]
    async fn search_before(
        &self,
        address: Address,
        block: Count,
        page_size: Count,
    ) -> JsonRpcResult<TransactionsWithReceipts>;

    #[method(name = "ots_searchTransactionsAfter")]
    async fn search_after(
        &self,
        address: Address,
        block: Count,
        page_size: Count,
    ) -> JsonRpcResult<TransactionsWithReceipts>;

    #[method(name = "ots_getTransactionBySenderAndNonce")]
    fn transaction_by_sender_and_nonce(
        &self,
        sender: Address,
        nonce: Count,
    ) -> JsonRpcResult<Option<B256>>;

    #[method(name = "ots_getContractCreator")]
    async fn contract_creator(&self, address: Address) -> JsonRpcResult<Option<ContractCreator>>;

    /// Otterscan reads headers with erigon's method: the block without its transactions.
    #[method(name = "erigon_getHeaderByNumber")]
    fn header_by_number(&self, block: BlockParam) -> JsonRpcResult<Option<Block>>;
}

pub struct Otterscan {
    ctx: ModuleContext,
}

impl Otterscan {
    pub fn new(ctx: ModuleContext) -> Self {
        Self { ctx }
    }

    fn block(&self, block: &BlockParam) -> RpcResult<Option<Arc<StoredBlock>>> {
        match self.ctx.chain.resolve(block)? {
            Some(number) => self.ctx.chain.block(number),
            None => Ok(None),
        }
    }

    /// Runs `f` on the blocking pool with the request's bounds.
    async fn run_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(ModuleContext, Bounds) -> RpcResult<T> + Send + 'static,
    ) -> RpcResult<T> {
        let ctx = self.ctx.clone();
        let bounds = Bounds::starting_now(&ctx.limits);
        tokio::task::spawn_blocking(move || f(ctx, bounds))
            .await
            .map_err(RpcError::internal)?
    }

    /// The mined transaction `hash` run again, or `None` when no block holds it.
    async fn replayed(&self, hash: B256) -> RpcResult<Option<replay::Replayed>> {
        self.run_blocking(move |ctx, bounds| match ctx.find_transaction(&hash)? {
            Some(KnownTransaction::Mined { block, index }) => {
                replay::transaction(&ctx, &block, index, &bounds).map(Some)
            }
            _ => Ok(None),
        })
        .await
    }

    fn details(&self, block: Option<Arc<StoredBlock>>) -> RpcResult<Option<BlockDetails>> {
        let Some(block) = block else {
            return Ok(None);
        };
        // Genesis has no receipts stored, nor transactions to pay fees.
        let receipts = self.ctx.chain.receipts(block.number())?.unwrap_or_default();
        let total_fees = total_fees(&block, &receipts);
        Ok(Some(BlockDetails::new(
            rpc_block::block(&block, false),
            issuance(&self.ctx, &block),
            total_fees,
        )))
    }
}

#[jsonrpsee::core::async_trait]
impl OtterscanApiServer for Otterscan {
    fn api_level(&self) -> JsonRpcResult<u64> {
        Ok(API_LEVEL)
    }

    fn has_code(&self, address: Address, block: Option<BlockParam>) -> JsonRpcResult<bool> {
        let number = self
            .ctx
            .chain
            .resolve(&block.unwrap_or_default())?
            .ok_or(RpcError::HeaderNotFound)?;
        Ok(search::has_code_after(&self.ctx, number, address)?)
    }

    async fn internal_operations(
        &self,
        hash: B256,
    ) -> JsonRpcResult<Option<Vec<InternalOperation>>> {
        Ok(self
            .replayed(hash)
            .await?
            .map(|replayed| internal_operations(&replayed.frames)))
    }

    async fn transaction_error(&self, hash: B256) -> JsonRpcResult<Option<Bytes>> {
        Ok(self
            .replayed(hash)
            .await?
            .map(|replayed| match replayed.result {
                ExecutionResult::Revert { output, .. } => output,
                _ => Bytes::new(),
            }))
    }

    async fn trace_transaction(&self, hash: B256) -> JsonRpcResult<Option<Vec<TraceEntry>>> {
        Ok(self
            .replayed(hash)
            .await?
            .map(|replayed| trace_entries(&replayed.frames)))
    }

    fn block_details(&self, block: BlockParam) -> JsonRpcResult<Option<BlockDetails>> {
        Ok(self.details(self.block(&block)?)?)
    }

    fn block_details_by_hash(&self, hash: B256) -> JsonRpcResult<Option<BlockDetails>> {
        let block = match self.ctx.chain.block_number(&hash)? {
            Some(number) => self.ctx.chain.block(number)?,
            None => None,
        };
        Ok(self.details(block)?)
    }

    fn block_transactions(
        &self,
        block: BlockParam,
        page: Count,
        page_size: Count,
    ) -> JsonRpcResult<Option<OtsBlockTransactions>> {
        let page_size = checked_page_size(page_size)?;
        let Some(block) = self.block(&block)? else {
            return Ok(None);
        };
        // Genesis has no receipts stored, nor transactions to page through.
        let receipts = self.ctx.chain.receipts(block.number())?.unwrap_or_default();
        // Pages count from the block's end, as erigon and reth cut them (Otterscan shows the
        // newest first): page 0 is the last `page_size` transactions, in block order.
        let count = block.body.transactions.len();
        let end = count.saturating_sub(
            usize::try_from(page.0.saturating_mul(page_size)).unwrap_or(usize::MAX),
        );
        let start = end.saturating_sub(page_size as usize);
        let mut rpc = rpc_block::block(&block, true);
        if let BlockTransactions::Full(txs) = &mut rpc.transactions {
            *txs = txs.drain(start..end).collect();
        }
        let all = simnode_receipts::build_block_receipts(&self.ctx.spec, &block, &receipts)?;
        let receipts = all[start..end]
            .iter()
            .map(|receipt| ots_receipt(receipt, None))
            .collect();
        Ok(Some(OtsBlockTransactions {
            fullblock: OtsBlock {
                block: rpc,
                transaction_count: count,
            },
            receipts,
        }))
    }

    async fn search_before(
        &self,
        address: Address,
        block: Count,
        page_size: Count,
    ) -> JsonRpcResult<TransactionsWithReceipts> {
        let page_size = checked_page_size(page_size)?;
        Ok(self
            .run_blocking(move |ctx, bounds| {
                search::before(&ctx, address, block.0, page_size as usize, &bounds)
            })
            .await?)
    }

    async fn search_after(
        &self,
        address: Address,
        block: Count,
        page_size: Count,
    ) -> JsonRpcResult<TransactionsWithReceipts> {
        let page_size = checked_page_size(page_size)?;
        Ok(self
            .run_blocking(move |ctx, bounds| {
                search::after(&ctx, address, block.0, page_size as usize, &bounds)
            })
            .await?)
    }

    fn transaction_by_sender_and_nonce(
        &self,
        sender: Address,
        nonce: Count,
    ) -> JsonRpcResult<Option<B256>> {
        Ok(search::by_sender_and_nonce(&self.ctx, sender, nonce.0)?)
    }

    async fn contract_creator(&self, address: Address) -> JsonRpcResult<Option<ContractCreator>> {
        Ok(self
            .run_blocking(move |ctx, bounds| search::creator(&ctx, address, &bounds))
            .await?)
    }

    fn header_by_number(&self, block: BlockParam) -> JsonRpcResult<Option<Block>> {
        Ok(self.block(&block)?.map(|b| rpc_block::block(&b, false)))
    }
}

fn checked_page_size(page_size: Count) -> RpcResult<u64> {
    match page_size.0 {
        0 => Err(RpcError::invalid_params("pageSize must be at least 1")),
        n if n > MAX_PAGE_SIZE => Err(RpcError::invalid_params(format!(
            "pageSize {n} is above the limit of {MAX_PAGE_SIZE}"
        ))),
        n => Ok(n),
    }
}

/// The call tree as Otterscan draws it: every frame, the transaction's own at depth 0, with
/// `value` only for the kinds that move it (not STATICCALL or DELEGATECALL).
fn trace_entries(frames: &[replay::Frame]) -> Vec<TraceEntry> {
    let mut entries = ExecutionOrder::default();
    for frame in frames.iter().map(|frame| &frame.call) {
        let moves_value = !matches!(frame.kind, CallKind::StaticCall | CallKind::DelegateCall);
        entries.frame(
            frame.depth,
            Some(TraceEntry {
                r#type: frame.kind.to_string(),
                depth: frame.depth as u32,
                from: frame.caller,
                to: frame.address,
                value: moves_value.then_some(frame.value),
                input: frame.data.clone(),
                output: frame.output.clone(),
            }),
            self_destruct(frame).map(|(from, to, value)| TraceEntry {
                r#type: "SELFDESTRUCT".into(),
                depth: frame.depth as u32 + 1,
                from,
                to,
                value: Some(value),
                input: Bytes::new(),
                output: Bytes::new(),
            }),
        );
    }
    entries.finish()
}

/// What moved inside a transaction (not its own frame): value sent by inner calls, contracts
/// created, self-destructs. Frames whose effects were undone (by their own revert or an outer
/// frame's) are left out: they moved nothing.
fn internal_operations(frames: &[replay::Frame]) -> Vec<InternalOperation> {
    let mut ops = ExecutionOrder::default();
    for frame in frames
        .iter()
        .filter(|frame| frame.kept)
        .map(|frame| &frame.call)
    {
        let kind = match frame.kind {
            CallKind::Create => Some(OperationType::OpCreate),
            CallKind::Create2 => Some(OperationType::OpCreate2),
            CallKind::Call | CallKind::CallCode if !frame.value.is_zero() => {
                Some(OperationType::OpTransfer)
            }
            _ => None,
        };
        ops.frame(
            frame.depth,
            kind.filter(|_| frame.depth > 0)
                .map(|kind| InternalOperation {
                    r#type: kind,
                    from: frame.caller,
                    to: frame.address,
                    value: frame.value,
                }),
            self_destruct(frame).map(|(from, to, value)| InternalOperation {
                r#type: OperationType::OpSelfDestruct,
                from,
                to,
                value,
            }),
        );
    }
    ops.finish()
}

/// The frame's SELFDESTRUCT, if it ran one: (contract, beneficiary, value).
fn self_destruct(frame: &CallTrace) -> Option<(Address, Address, U256)> {
    Some((
        frame.selfdestruct_address.unwrap_or(frame.address),
        frame.selfdestruct_refund_target?,
        frame.selfdestruct_transferred_value?,
    ))
}

/// Entries of call frames (given in pre-order, with their depth) in the order they happened:
/// a frame's SELFDESTRUCT ends it, so it comes after the calls the frame made before it.
struct ExecutionOrder<T> {
    entries: Vec<T>,
    /// Self-destructs of the open frames, with the frame's depth, innermost last.
    pending: Vec<(usize, T)>,
}

impl<T> Default for ExecutionOrder<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            pending: Vec::new(),
        }
    }
}

impl<T> ExecutionOrder<T> {
    fn frame(&mut self, depth: usize, own: Option<T>, destruct: Option<T>) {
        self.close_to(depth);
        self.entries.extend(own);
        if let Some(destruct) = destruct {
            self.pending.push((depth, destruct));
        }
    }

    /// Emits the self-destructs of the frames that ended before one at `depth` starts.
    fn close_to(&mut self, depth: usize) {
        while self.pending.last().is_some_and(|(open, _)| *open >= depth) {
            if let Some((_, entry)) = self.pending.pop() {
                self.entries.push(entry);
            }
        }
    }

    fn finish(mut self) -> Vec<T> {
        self.close_to(0);
        self.entries
    }
}

/// The block's new ether before the merge: the miner's reward (with 1/32 of it per uncle) and
/// the uncles' miners'; nothing after it, and nothing for genesis.
fn issuance(ctx: &ModuleContext, block: &StoredBlock) -> InternalIssuance {
    let number = block.number();
    let Some(base) = calc::base_block_reward(&*ctx.spec, number).filter(|_| number > 0) else {
        return InternalIssuance::default();
    };
    let block_reward = U256::from(calc::block_reward(base, block.body.ommers.len()));
    let uncle_reward: U256 = block
        .body
        .ommers
        .iter()
        .filter(|uncle| uncle.number + 8 >= number)
        .map(|uncle| U256::from(calc::ommer_reward(base, number, uncle.number)))
        .sum();
    InternalIssuance {
        block_reward,
        uncle_reward,
        issuance: block_reward + uncle_reward,
    }
}

/// What the block's transactions paid in fees: gas used times the effective gas price, base
/// fee included (the part burnt too), as erigon reports `totalFees`.
fn total_fees(block: &StoredBlock, receipts: &[alloy::consensus::ReceiptEnvelope]) -> U256 {
    let base_fee = block.header.base_fee_per_gas;
    block
        .body
        .transactions
        .iter()
        .zip(simnode_receipts::gas_used_each(receipts))
        .map(|(tx, gas)| U256::from(gas) * U256::from(tx.effective_gas_price(base_fee)))
        .sum()
}

/// A receipt in Otterscan's lighter form: no logs or bloom, optionally the block's time.
fn ots_receipt(receipt: &TransactionReceipt, timestamp: Option<u64>) -> OtsTransactionReceipt {
    let receipt = receipt.clone().map_inner(|inner| OtsReceipt {
        status: inner.status(),
        cumulative_gas_used: inner.cumulative_gas_used(),
        logs: None,
        logs_bloom: None,
        r#type: inner.tx_type() as u8,
    });
    OtsTransactionReceipt { receipt, timestamp }
}

/// The most positional params each method of this module reads.
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("ots_getApiLevel", 0),
    ("ots_hasCode", 2),
    ("ots_getInternalOperations", 1),
    ("ots_getTransactionError", 1),
    ("ots_traceTransaction", 1),
    ("ots_getBlockDetails", 1),
    ("ots_getBlockDetailsByHash", 1),
    ("ots_getBlockTransactions", 3),
    ("ots_searchTransactionsBefore", 3),
    ("ots_searchTransactionsAfter", 3),
    ("ots_getTransactionBySenderAndNonce", 2),
    ("ots_getContractCreator", 1),
    ("erigon_getHeaderByNumber", 1),
];

/// The module the node registers.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    Otterscan::new(ctx).into_rpc().into()
}

#[cfg(test)]
mod tests {
    use super::ExecutionOrder;

    #[test]
    fn a_self_destruct_comes_after_the_calls_its_frame_made() {
        // Pre-order frames: a (depth 0, self-destructs), b (1), c (2, self-destructs), d (1).
        let mut order = ExecutionOrder::default();
        order.frame(0, Some("a"), Some("a destructs"));
        order.frame(1, Some("b"), None);
        order.frame(2, Some("c"), Some("c destructs"));
        order.frame(1, Some("d"), None);
        assert_eq!(
            order.finish(),
            ["a", "b", "c", "c destructs", "d", "a destructs"]
        );
        // Siblings that both self-destruct, and a frame that lists nothing of its own.
        let mut order = ExecutionOrder::default();
        order.frame(0, None, None);
        order.frame(1, Some("x"), Some("x destructs"));
        order.frame(1, Some("y"), Some("y destructs"));
        assert_eq!(order.finish(), ["x", "x destructs", "y", "y destructs"]);
    }
}
