//! Looking things up across blocks without an index: an address's transactions (blocks walked
//! and traced one by one), a sender's transaction by nonce and a contract's creator (the state
//! history bisected, then one block looked into).

use std::{sync::Arc, time::Instant};

use alloy::{
    primitives::{Address, B256},
    rpc::types::trace::otterscan::{ContractCreator, TransactionsWithReceipts},
};
use revm::DatabaseRef;
use revm_inspectors::tracing::types::CallKind;
use simnode_api::{
    call::Bounds, lookup, rpc_block, ModuleContext, RpcError, RpcResult, StoredBlock,
};

use crate::{ots_receipt, replay};

/// The indexes of `block`'s transactions that touch `address`: sent by it, or with a frame
/// (the transaction's own or an inner call, a creation, a self-destruct) from or to it.
fn touching(
    ctx: &ModuleContext,
    block: &StoredBlock,
    address: Address,
    bounds: &Bounds,
) -> RpcResult<Vec<usize>> {
    let replayed = replay::block(ctx, block, bounds)?;
    Ok(replayed
        .iter()
        .enumerate()
        .filter(|(index, replayed)| {
            block.senders.get(*index) == Some(&address)
                || replayed.frames.iter().map(|frame| &frame.call).any(|call| {
                    call.caller == address
                        || call.address == address
                        || call.selfdestruct_refund_target == Some(address)
                })
        })
        .map(|(index, _)| index)
        .collect())
}

/// Matching transactions: a block and an index in it.
type Found = Vec<(Arc<StoredBlock>, usize)>;

/// Walks blocks in `numbers` until `page_size` matching transactions are found (whole blocks:
/// a page may hold more). Returns the matches, newest first, and whether the walk ran out of
/// blocks (rather than stopping on a full page or at the deadline with something to show).
fn walk(
    ctx: &ModuleContext,
    address: Address,
    numbers: impl Iterator<Item = u64>,
    page_size: usize,
    bounds: &Bounds,
) -> RpcResult<(Found, bool)> {
    let mut found = Vec::new();
    for number in numbers {
        if Instant::now() >= bounds.deadline {
            if found.is_empty() {
                return Err(bounds.timed_out());
            }
            return Ok((found, false));
        }
        let Some(block) = ctx.chain.block(number)? else {
            break;
        };
        if block.body.transactions.is_empty() {
            continue;
        }
        let hits = match touching(ctx, &block, address, bounds) {
            Ok(hits) => hits,
            // The deadline came inside this block: answer with the blocks walked so far.
            Err(RpcError::Timeout(_)) if !found.is_empty() => return Ok((found, false)),
            Err(err) => return Err(err),
        };
        found.extend(hits.into_iter().map(|index| (block.clone(), index)));
        if found.len() >= page_size {
            return Ok((found, false));
        }
    }
    Ok((found, true))
}

/// The transactions and receipts of `found` (newest first) in Otterscan's form.
fn page(
    ctx: &ModuleContext,
    mut found: Found,
    first_page: bool,
    last_page: bool,
) -> RpcResult<TransactionsWithReceipts> {
    found.sort_by_key(|(block, index)| std::cmp::Reverse((block.number(), *index)));
    let mut txs = Vec::with_capacity(found.len());
    let mut receipts = Vec::with_capacity(found.len());
    for (block, index) in found {
        let stored = ctx.chain.receipts(block.number())?.ok_or_else(|| {
            RpcError::Internal(format!("block {} has no receipts", block.number()))
        })?;
        let receipt = simnode_receipts::build_receipt(&ctx.spec, &block, &stored, index)?
            .ok_or_else(|| {
                RpcError::Internal(format!("block {} lacks receipt {index}", block.number()))
            })?;
        receipts.push(ots_receipt(&receipt, Some(block.header.timestamp)));
        txs.push(rpc_block::transaction(&block, index));
    }
    Ok(TransactionsWithReceipts {
        txs,
        receipts,
        first_page,
        last_page,
    })
}

/// `ots_searchTransactionsBefore`: blocks before `block` (0: from the head down), newest first.
pub fn before(
    ctx: &ModuleContext,
    address: Address,
    block: u64,
    page_size: usize,
    bounds: &Bounds,
) -> RpcResult<TransactionsWithReceipts> {
    let head = ctx.chain.head().latest;
    let (top, first_page) = match block {
        0 => (head, true),
        b if b > head => (head, true),
        b => (b - 1, false),
    };
    // Genesis holds no transactions.
    let (found, ran_out) = walk(ctx, address, (1..=top).rev(), page_size, bounds)?;
    page(ctx, found, first_page, ran_out)
}

/// `ots_searchTransactionsAfter`: blocks after `block` (0: from genesis up), the page newest
/// first as well.
pub fn after(
    ctx: &ModuleContext,
    address: Address,
    block: u64,
    page_size: usize,
    bounds: &Bounds,
) -> RpcResult<TransactionsWithReceipts> {
    let head = ctx.chain.head().latest;
    let (found, ran_out) = walk(
        ctx,
        address,
        block.saturating_add(1).max(1)..=head,
        page_size,
        bounds,
    )?;
    page(ctx, found, ran_out, block == 0)
}

/// `ots_getTransactionBySenderAndNonce`: the hash of the sender's mined transaction.
pub fn by_sender_and_nonce(
    ctx: &ModuleContext,
    sender: Address,
    nonce: u64,
) -> RpcResult<Option<B256>> {
    Ok(lookup::mined_by_sender_and_nonce(ctx, sender, nonce)?.map(|(_, hash)| hash))
}

/// Whether `address` holds code in the state after canonical block `number`.
pub(crate) fn has_code_after(
    ctx: &ModuleContext,
    number: u64,
    address: Address,
) -> RpcResult<bool> {
    let state = ctx.chain.state_at(number)?;
    Ok(state
        .basic_ref(address)
        .map_err(RpcError::from)?
        .is_some_and(|account| account.code_hash != revm::primitives::KECCAK_EMPTY))
}

/// `ots_getContractCreator`: the block whose state first holds code at `address`, and in it the
/// creation frame that put it there (its transaction, and who ran the CREATE). Contracts of
/// the genesis state have no creator.
pub fn creator(
    ctx: &ModuleContext,
    address: Address,
    bounds: &Bounds,
) -> RpcResult<Option<ContractCreator>> {
    let head = ctx.chain.head().latest;
    let has_code = |number: u64| has_code_after(ctx, number, address);
    if !has_code(head)? || has_code(0)? {
        return Ok(None);
    }
    let number = lookup::first_block_where(head, has_code)?;
    let Some(block) = ctx.chain.block(number)? else {
        return Ok(None);
    };
    for (index, replayed) in replay::block(ctx, &block, bounds)?.into_iter().enumerate() {
        let created = replayed.frames.iter().rev().find(|frame| {
            frame.kept
                && frame.call.address == address
                && matches!(frame.call.kind, CallKind::Create | CallKind::Create2)
        });
        if let Some(frame) = created {
            return Ok(Some(ContractCreator {
                hash: *block.body.transactions[index].tx_hash(),
                creator: frame.call.caller,
            }));
        }
    }
    Ok(None)
}
