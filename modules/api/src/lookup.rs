//! Finding a mined transaction by sender and nonce without an index: a sender's nonce only
//! grows, so the first block whose state has it past the nonce holds the transaction (when a
//! transaction used that nonce at all: an EIP-7702 authorization also moves it). A bisection of
//! the state history, then one block looked into.

use alloy::{
    consensus::Transaction as _,
    primitives::{Address, B256},
};
use revm::DatabaseRef;

use crate::{ModuleContext, RpcError, RpcResult};

/// The smallest block in `1..=last` after which `holds` is true, given that it is false after
/// block 0 and true after `last`. Where `holds` is not monotonic the answer is still a block
/// after which it holds and before which it did not.
pub fn first_block_where(
    last: u64,
    mut holds: impl FnMut(u64) -> RpcResult<bool>,
) -> RpcResult<u64> {
    let (mut lo, mut hi) = (1, last);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

/// The canonical block number and hash of `sender`'s mined transaction with `nonce`.
pub fn mined_by_sender_and_nonce(
    ctx: &ModuleContext,
    sender: Address,
    nonce: u64,
) -> RpcResult<Option<(u64, B256)>> {
    let head = ctx.chain.head().latest;
    let nonce_after = |number: u64| -> RpcResult<u64> {
        let state = ctx.chain.state_at(number)?;
        Ok(state
            .basic_ref(sender)
            .map_err(RpcError::from)?
            .map_or(0, |account| account.nonce))
    };
    if nonce_after(head)? <= nonce || nonce_after(0)? > nonce {
        return Ok(None);
    }
    let number = first_block_where(head, |number| Ok(nonce_after(number)? > nonce))?;
    let Some(block) = ctx.chain.block(number)? else {
        return Ok(None);
    };
    for (tx, from) in block.body.transactions.iter().zip(&block.senders) {
        if *from == sender && tx.nonce() == nonce {
            return Ok(Some((number, *tx.tx_hash())));
        }
    }
    Ok(None)
}
