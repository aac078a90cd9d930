//! `debug_getBadBlocks`: the blocks the node refused (on import or over the Engine API), as
//! geth answers them: each block's hash, the block with whole transactions, and its RLP. A
//! sender that cannot be recovered shows as the zero address, as in geth.

use alloy::{
    consensus::{transaction::SignerRecoverable, Block, Sealed, TxEnvelope},
    primitives::{Address, Bytes, B256},
    rlp::Decodable,
};
use serde::Serialize;
use simnode_api::{rpc_block, ModuleContext, RpcError, RpcResult, StoredBlock};

#[derive(Debug, Clone, Serialize)]
pub struct BadBlock {
    hash: B256,
    block: alloy::rpc::types::Block,
    rlp: Bytes,
}

pub fn bad_blocks(ctx: &ModuleContext) -> RpcResult<Vec<BadBlock>> {
    ctx.chain
        .bad_blocks()?
        .into_iter()
        .map(|(hash, rlp)| {
            let block = Block::<TxEnvelope>::decode(&mut rlp.as_ref()).map_err(|e| {
                RpcError::internal(format!("bad block {hash} does not decode: {e}"))
            })?;
            let senders = block
                .body
                .transactions
                .iter()
                .map(|tx| tx.recover_signer().unwrap_or(Address::ZERO))
                .collect();
            let stored = StoredBlock {
                header: Sealed::new_unchecked(block.header, hash),
                body: block.body,
                senders,
            };
            Ok(BadBlock {
                hash,
                block: rpc_block::block(&stored, true),
                rlp,
            })
        })
        .collect()
}
