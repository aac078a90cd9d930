//! Blocks the chain does not hold, traced on the state of their parent: a block given as RLP
//! (`debug_traceBlock`) and a block the node refused (`debug_traceBadBlock`). As in geth, the
//! parent must be the canonical block before it (its state is what the block would have run
//! on), and the genesis block is not traceable.

use alloy::{
    consensus::{transaction::SignerRecoverable, Block, Sealed, TxEnvelope},
    primitives::B256,
    rlp::Decodable,
};
use simnode_api::{ModuleContext, RpcError, RpcResult, StoredBlock};

/// The block `rlp` encodes, its senders recovered, ready to run on its canonical parent.
pub(crate) fn from_rlp(ctx: &ModuleContext, rlp: &[u8]) -> RpcResult<StoredBlock> {
    let block = Block::<TxEnvelope>::decode(&mut &rlp[..])
        .map_err(|err| RpcError::Server(format!("could not decode block: {err}")))?;
    let senders = block
        .body
        .transactions
        .iter()
        .enumerate()
        .map(|(i, tx)| {
            tx.recover_signer().map_err(|_| {
                RpcError::Server(format!("transaction {i} of the block: invalid signature"))
            })
        })
        .collect::<RpcResult<Vec<_>>>()?;
    let stored = StoredBlock {
        header: Sealed::new(block.header),
        body: block.body,
        senders,
    };
    let Some(parent) = stored.number().checked_sub(1) else {
        return Err(RpcError::Server("genesis is not traceable".into()));
    };
    if ctx.chain.canonical_hash(parent)? != Some(stored.header.parent_hash) {
        return Err(RpcError::Server(format!(
            "parent {} not found",
            stored.header.parent_hash
        )));
    }
    Ok(stored)
}

/// The refused block with hash `hash`, ready to run on its canonical parent.
pub(crate) fn bad_block(ctx: &ModuleContext, hash: B256) -> RpcResult<StoredBlock> {
    refused(ctx, hash)?.ok_or_else(|| RpcError::Server(format!("bad block {hash} not found")))
}

/// [`bad_block`], with `None` when the node refused no block with that hash.
pub(crate) fn refused(ctx: &ModuleContext, hash: B256) -> RpcResult<Option<StoredBlock>> {
    let Some((_, rlp)) = ctx
        .chain
        .bad_blocks()?
        .into_iter()
        .find(|(bad, _)| *bad == hash)
    else {
        return Ok(None);
    };
    from_rlp(ctx, &rlp).map(Some)
}
