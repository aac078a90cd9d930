//! What the node says about itself to the clients that ask before they do anything else: it
//! serves RPC but has no peer-to-peer network (`net_listening` true and `net_peerCount` 0, as
//! geth answers with discovery off), and `web3_sha3` hashes what it is given. (The node's own
//! accounts, `eth_accounts`, are the node's to serve: it holds the keys.)

use alloy::primitives::{keccak256, Bytes, B256, U64};
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc};

#[rpc(server)]
pub trait NodeFactsApi {
    #[method(name = "net_listening")]
    fn listening(&self) -> JsonRpcResult<bool>;
    #[method(name = "net_peerCount")]
    fn peer_count(&self) -> JsonRpcResult<U64>;
    #[method(name = "web3_sha3")]
    fn sha3(&self, data: Bytes) -> JsonRpcResult<B256>;
}

pub struct NodeFacts;

impl NodeFactsApiServer for NodeFacts {
    fn listening(&self) -> JsonRpcResult<bool> {
        Ok(true)
    }

    fn peer_count(&self) -> JsonRpcResult<U64> {
        Ok(U64::ZERO)
    }

    fn sha3(&self, data: Bytes) -> JsonRpcResult<B256> {
        Ok(keccak256(&data))
    }
}
