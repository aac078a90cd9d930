//! A stored block, its transactions and its uncles as JSON-RPC answers give them (geth's
//! fields: `size` of the whole block, uncle hashes, transaction hashes or whole transactions
//! with their position in the block). Shared by the methods of every module that answer with
//! blocks.

use alloy::{
    consensus::{transaction::Recovered, BlockBody, Header, TxEnvelope},
    primitives::{Sealable, U256},
    rpc::types::{Block, BlockTransactions, Header as RpcHeader, Transaction, TransactionInfo},
};

use crate::StoredBlock;

/// `block` as an answer: with its transactions whole (`full`) or as hashes.
pub fn block(block: &StoredBlock, full: bool) -> Block {
    let size = alloy::consensus::Block {
        header: block.header.inner().clone(),
        body: block.body.clone(),
    };
    let size = alloy::rlp::Encodable::length(&size);
    let header = RpcHeader::from_consensus(block.header.clone(), None, Some(U256::from(size)));
    let transactions = if full {
        BlockTransactions::Full(
            (0..block.body.transactions.len())
                .map(|i| transaction(block, i))
                .collect(),
        )
    } else {
        BlockTransactions::Hashes(
            block
                .body
                .transactions
                .iter()
                .map(|tx| *tx.tx_hash())
                .collect(),
        )
    };
    let uncles = block.body.ommers.iter().map(|h| h.hash_slow()).collect();
    Block {
        header,
        uncles,
        transactions,
        withdrawals: block.body.withdrawals.clone(),
    }
}

/// Transaction `index` of `block`, with its place in the block.
pub fn transaction(block: &StoredBlock, index: usize) -> Transaction {
    let tx = block.body.transactions[index].clone();
    let info = TransactionInfo {
        hash: Some(*tx.tx_hash()),
        index: Some(index as u64),
        block_hash: Some(block.hash()),
        block_number: Some(block.number()),
        base_fee: block.header.base_fee_per_gas,
        block_timestamp: Some(block.header.timestamp),
    };
    Transaction::from_transaction(Recovered::new_unchecked(tx, block.senders[index]), info)
}

/// A transaction waiting in the pool as geth shows it: the RPC transaction with its block
/// fields `null`, `blockTimestamp` included (alloy leaves that field out when it is unknown;
/// geth writes it). As in geth, `gasPrice` of a fee-market transaction is its `maxFeePerGas`
/// (no block, so no effective price).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolTransaction {
    #[serde(flatten)]
    pub tx: Transaction,
    /// Always `null`.
    pub block_timestamp: Option<alloy::primitives::U64>,
}

impl PoolTransaction {
    pub fn of(tx: Recovered<TxEnvelope>) -> Self {
        Self {
            tx: Transaction::from_transaction(tx, TransactionInfo::default()),
            block_timestamp: None,
        }
    }
}

/// A transaction as eth_getTransactionByHash answers it: in a block, or waiting in the pool.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum FoundTransaction {
    Mined(Transaction),
    Pooled(PoolTransaction),
}

/// An uncle as geth answers it: a block of the uncle's header alone (no `transactions`,
/// `uncles` empty, `size` that of the header-only block).
pub fn uncle(header: &Header) -> Block {
    let alone = alloy::consensus::Block::<TxEnvelope> {
        header: header.clone(),
        body: BlockBody {
            transactions: vec![],
            ommers: vec![],
            withdrawals: None,
        },
    };
    let size = alloy::rlp::Encodable::length(&alone);
    let sealed = alone.header.seal_slow();
    Block {
        header: RpcHeader::from_consensus(sealed, None, Some(U256::from(size))),
        uncles: vec![],
        transactions: BlockTransactions::Uncle,
        withdrawals: None,
    }
}
