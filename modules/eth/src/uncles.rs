//! Uncles (ommers) of proof-of-work blocks: how many a block names, and each one as geth
//! answers it, a block of the uncle's header alone (no `transactions`, `uncles` empty, `size`
//! that of the header-only block). `null` for an unknown block or an index past its uncles.

use alloy::{
    primitives::{B256, U64},
    rpc::types::Block,
};
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc};
use simnode_api::{rpc_block, BlockParam, ModuleContext, RpcResult, StoredBlock};
use std::sync::Arc;

#[rpc(server)]
pub trait EthUncleApi {
    #[method(name = "eth_getUncleCountByBlockNumber")]
    fn uncle_count_by_number(&self, block: BlockParam) -> JsonRpcResult<Option<U64>>;
    #[method(name = "eth_getUncleCountByBlockHash")]
    fn uncle_count_by_hash(&self, hash: B256) -> JsonRpcResult<Option<U64>>;
    #[method(name = "eth_getUncleByBlockNumberAndIndex")]
    fn uncle_by_number_and_index(
        &self,
        block: BlockParam,
        index: U64,
    ) -> JsonRpcResult<Option<Block>>;
    #[method(name = "eth_getUncleByBlockHashAndIndex")]
    fn uncle_by_hash_and_index(&self, hash: B256, index: U64) -> JsonRpcResult<Option<Block>>;
}

pub struct EthUncles {
    ctx: ModuleContext,
}

impl EthUncles {
    pub fn new(ctx: ModuleContext) -> Self {
        Self { ctx }
    }

    fn by_number(&self, block: &BlockParam) -> RpcResult<Option<Arc<StoredBlock>>> {
        match self.ctx.chain.resolve(block)? {
            Some(number) => self.ctx.chain.block(number),
            None => Ok(None),
        }
    }

    fn by_hash(&self, hash: &B256) -> RpcResult<Option<Arc<StoredBlock>>> {
        match self.ctx.chain.block_number(hash)? {
            Some(number) => self.ctx.chain.block(number),
            None => Ok(None),
        }
    }
}

fn uncle_count(block: Option<Arc<StoredBlock>>) -> Option<U64> {
    block.map(|b| U64::from(b.body.ommers.len()))
}

fn uncle_at(block: Option<Arc<StoredBlock>>, index: U64) -> Option<Block> {
    let block = block?;
    let index = usize::try_from(index).ok()?;
    block.body.ommers.get(index).map(rpc_block::uncle)
}

impl EthUncleApiServer for EthUncles {
    fn uncle_count_by_number(&self, block: BlockParam) -> JsonRpcResult<Option<U64>> {
        Ok(uncle_count(self.by_number(&block)?))
    }

    fn uncle_count_by_hash(&self, hash: B256) -> JsonRpcResult<Option<U64>> {
        Ok(uncle_count(self.by_hash(&hash)?))
    }

    fn uncle_by_number_and_index(
        &self,
        block: BlockParam,
        index: U64,
    ) -> JsonRpcResult<Option<Block>> {
        Ok(uncle_at(self.by_number(&block)?, index))
    }

    fn uncle_by_hash_and_index(&self, hash: B256, index: U64) -> JsonRpcResult<Option<Block>> {
        Ok(uncle_at(self.by_hash(&hash)?, index))
    }
}
