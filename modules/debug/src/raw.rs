//! `debug_getRawHeader`, `debug_getRawBlock`, `debug_getRawReceipts`, `debug_getRawTransaction`:
//! the consensus encodings of stored data, as geth answers them.
//!
//! - header and block: RLP (the block as `[header, transactions, ommers, withdrawals?]`, typed
//!   transactions as EIP-2718 byte strings inside it);
//! - receipts: one EIP-2718 envelope per transaction (`MarshalBinary`: a legacy receipt is its
//!   RLP list, a typed one `type || rlp`);
//! - transaction: its EIP-2718 encoding, from the chain or else from the pool.
//!
//! What is missing answers as geth does: an unknown or future block *number* is `null`, an
//! unknown block *hash* is a -32000 error for header and block and `[]` for receipts, an unknown
//! transaction is `null`; `safe`/`finalized` before a consensus client named them are -32000.

use alloy::{
    consensus::Block,
    eips::eip2718::Encodable2718,
    primitives::{Bytes, B256},
};
use simnode_api::{block_id::BlockTag, BlockParam, ModuleContext, RpcError, RpcResult};

/// How a block parameter resolved.
enum Resolved {
    Number(u64),
    /// A number (or tag) naming no block: `null`.
    NoBlock,
    /// A hash naming no canonical block.
    UnknownHash(B256),
}

fn resolve(ctx: &ModuleContext, param: &BlockParam) -> RpcResult<Resolved> {
    match ctx.chain.resolve(param)? {
        Some(n) => Ok(Resolved::Number(n)),
        None => match *param {
            BlockParam::Hash { hash, .. } => Ok(Resolved::UnknownHash(hash)),
            BlockParam::Tag(BlockTag::Safe) => Err(RpcError::Server("safe block not found".into())),
            BlockParam::Tag(BlockTag::Finalized) => {
                Err(RpcError::Server("finalized block not found".into()))
            }
            _ => Ok(Resolved::NoBlock),
        },
    }
}

pub(crate) fn raw_header(ctx: &ModuleContext, param: &BlockParam) -> RpcResult<Option<Bytes>> {
    let number = match resolve(ctx, param)? {
        Resolved::Number(n) => n,
        Resolved::NoBlock => return Ok(None),
        Resolved::UnknownHash(hash) => {
            return Err(RpcError::Server(format!("header {hash} not found")))
        }
    };
    Ok(ctx
        .chain
        .header(number)?
        .map(|header| alloy::rlp::encode(header.inner()).into()))
}

pub(crate) fn raw_block(ctx: &ModuleContext, param: &BlockParam) -> RpcResult<Option<Bytes>> {
    let number = match resolve(ctx, param)? {
        Resolved::Number(n) => n,
        Resolved::NoBlock => return Ok(None),
        Resolved::UnknownHash(hash) => {
            return Err(RpcError::Server(format!("block {hash} not found")))
        }
    };
    Ok(ctx.chain.block(number)?.map(|stored| {
        let block = Block::new(stored.header.inner().clone(), stored.body.clone());
        alloy::rlp::encode(&block).into()
    }))
}

pub(crate) fn raw_receipts(
    ctx: &ModuleContext,
    param: &BlockParam,
) -> RpcResult<Option<Vec<Bytes>>> {
    let number = match resolve(ctx, param)? {
        Resolved::Number(n) => n,
        Resolved::NoBlock => return Ok(None),
        Resolved::UnknownHash(_) => return Ok(Some(Vec::new())),
    };
    let Some(receipts) = ctx.chain.receipts(number)? else {
        return Ok(None);
    };
    Ok(Some(
        receipts
            .iter()
            .map(|receipt| receipt.encoded_2718().into())
            .collect(),
    ))
}
