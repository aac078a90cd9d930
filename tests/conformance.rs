//! Replays the geth-recorded execution-apis fixtures against `simnode node` on the imported
//! test chain: one test per method group, each failing with the list of every failing file.
//!
//! Comparison is exact JSON equality, error messages aside; `speconly` fixtures are checked for
//! the kind of answer only (as hive checks them against the schema only).

mod support;

use support::{replay_methods, Node};

#[test]
fn receipts_fixtures() {
    let node = Node::execution_apis(&[]);
    replay_methods(&node, &["eth_getBlockReceipts"]).assert_all_passed();
}

/// Read-only standard methods. Run on their own node, before anything is sent to the pool.
#[test]
fn eth_read_fixtures() {
    let node = Node::execution_apis(&[]);
    replay_methods(
        &node,
        &[
            "eth_chainId",
            "net_version",
            "eth_blockNumber",
            "eth_syncing",
            "eth_getBlockByHash",
            "eth_getBlockByNumber",
            "eth_getBlockTransactionCountByHash",
            "eth_getBlockTransactionCountByNumber",
            "eth_getTransactionByHash",
            "eth_getTransactionByBlockHashAndIndex",
            "eth_getTransactionByBlockNumberAndIndex",
            "eth_getTransactionReceipt",
            "eth_getBalance",
            "eth_getCode",
            "eth_getStorageAt",
            "eth_getStorageValues",
            "eth_getTransactionCount",
            "eth_getLogs",
            "eth_baseFee",
            "eth_blobBaseFee",
            "eth_feeHistory",
        ],
    )
    .assert_all_passed();
}

/// Methods that run the EVM.
#[test]
fn eth_call_fixtures() {
    let node = Node::execution_apis(&[]);
    replay_methods(
        &node,
        &["eth_call", "eth_estimateGas", "eth_createAccessList"],
    )
    .assert_all_passed();
}

/// Transaction submission: the fixtures send to one node in file order, as hive does.
#[test]
fn eth_send_raw_transaction_fixtures() {
    let node = Node::execution_apis(&[]);
    replay_methods(&node, &["eth_sendRawTransaction"]).assert_all_passed();
}
