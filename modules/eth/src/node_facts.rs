//! What the node says about itself to the clients that ask before they do anything else: it
//! holds no keys (`eth_accounts` is empty: transactions arrive signed), it serves RPC but has
//! no peer-to-peer network (`net_listening` true and `net_peerCount` 0, as geth answers with
//! discovery off), and `web3_sha3` hashes what it is given.

use alloy::primitives::{keccak256, Address, Bytes, B256, U64};
use jsonrpsee::{core::RpcResult as JsonRpcResult, proc_macros::rpc};

#[rpc(server)]
pub trait NodeFactsApi {
    #[method(name = "eth_accounts")]
    fn accounts(&self) -> JsonRpcResult<Vec<Address>>;
    #[method(name = "net_listening")]
    fn listening(&self) -> JsonRpcResult<bool>;
    #[method(name = "net_peerCount")]
    fn peer_count(&self) -> JsonRpcResult<U64>;
    #[method(name = "web3_sha3")]
    fn sha3(&self, data: Bytes) -> JsonRpcResult<B256>;
}

pub struct NodeFacts;

impl NodeFactsApiServer for NodeFacts {
    fn accounts(&self) -> JsonRpcResult<Vec<Address>> {
        Ok(Vec::new())
    }

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
