//! Otterscan's ots_* methods end to end on a dev node whose blocks hold what a block explorer
//! shows: a contract creation, a call that forwards value (an internal transfer), a creation
//! inside a creation, a revert with data, a plain transfer and a block of three transactions
//! (and reth's eth_getTransactionBySenderAndNonce, which shares the sender-and-nonce lookup).

mod support;

use std::path::Path;

use alloy::primitives::{address, Address};
use serde_json::{json, Value};
use support::{Node, TempDir};

const ADDR0: Address = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
const X: Address = address!("000000000000000000000000000000000000beef");

/// Deploys a contract that sends the call's value on to the block's coinbase.
const PAYER_INIT: &str = "685f5f5f5f34415af1005f5260096017f3";
/// Creates, from its init code, a child whose code is the one byte 0x00; keeps no code itself.
const MAKES_CHILD_INIT: &str = "6360015ff35f526004601c5ff05000";
/// Deploys a contract that reverts with the one byte 0xaa.
const REVERTER_INIT: &str = "6860aa5f526001601ffd5f5260096017f3";

fn tx(nonce: u64, to: Option<Address>, value: u128, input: &str) -> String {
    support::dev_tx(nonce, to, value, input)
}

fn receipt(node: &Node, hash: &Value) -> Value {
    support::wait_for_receipt(node, hash)
}

/// Sends `raw` and waits for it to be mined.
fn mined(node: &Node, raw: String) -> (Value, Value) {
    let hash = node.result("eth_sendRawTransaction", json!([raw]));
    let receipt = receipt(node, &hash);
    (hash, receipt)
}

fn quantity(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().expect("quantity").trim_start_matches("0x"), 16).expect("hex")
}

fn lower(a: Address) -> Value {
    json!(a)
}

#[test]
fn otterscan_sees_what_the_blocks_did() {
    let node = Node::start(
        TempDir::new("otterscan"),
        Path::new("dev"),
        &["--dev", "--rpc.rate-limit", "0"],
    );
    let payer = ADDR0.create(0);
    let maker = ADDR0.create(2);
    let child = maker.create(1);
    let reverter = ADDR0.create(3);
    let (deploy, _) = mined(&node, tx(0, None, 0, PAYER_INIT));
    let (pay, pay_receipt) = mined(&node, tx(1, Some(payer), 1_000, ""));
    let (make, _) = mined(&node, tx(2, None, 0, MAKES_CHILD_INIT));
    mined(&node, tx(3, None, 0, REVERTER_INIT));
    let (revert, revert_receipt) = mined(&node, tx(4, Some(reverter), 0, ""));
    assert_eq!(revert_receipt["status"], "0x0");
    let (transfer, _) = mined(&node, tx(5, Some(X), 7, ""));
    // Three transactions in one block: the two above the gap wait for the lowest.
    let batch: Vec<Value> = [8, 7, 6]
        .iter()
        .map(|&n| node.result("eth_sendRawTransaction", json!([tx(n, Some(X), 1, "")])))
        .collect();
    let batch_block = receipt(&node, &batch[0])["blockNumber"].clone();
    for hash in &batch {
        assert_eq!(receipt(&node, hash)["blockNumber"], batch_block);
    }
    let coinbase = node.result("eth_getBlockByNumber", json!(["0x2", false]))["miner"].clone();

    assert_eq!(node.result("ots_getApiLevel", json!([])), 8);
    assert_eq!(node.result("ots_hasCode", json!([payer, "latest"])), true);
    assert_eq!(node.result("ots_hasCode", json!([payer, "0x0"])), false);
    assert_eq!(node.result("ots_hasCode", json!([X, "latest"])), false);

    // The call tree: the transaction's own frame, then the payer's call to the coinbase.
    let trace = node.result("ots_traceTransaction", json!([pay]));
    assert_eq!(
        trace,
        json!([
            {"type": "CALL", "depth": 0, "from": lower(ADDR0), "to": lower(payer), "value": "0x3e8", "input": "0x", "output": "0x"},
            {"type": "CALL", "depth": 1, "from": lower(payer), "to": coinbase, "value": "0x3e8", "input": "0x", "output": "0x"},
        ])
    );
    // Internal operations: not the transaction's own frame.
    assert_eq!(
        node.result("ots_getInternalOperations", json!([pay])),
        json!([{"type": 0, "from": lower(payer), "to": coinbase, "value": "0x3e8"}])
    );
    assert_eq!(
        node.result("ots_getInternalOperations", json!([deploy])),
        json!([])
    );
    assert_eq!(
        node.result("ots_getInternalOperations", json!([make])),
        json!([{"type": 2, "from": lower(maker), "to": lower(child), "value": "0x0"}])
    );
    assert_eq!(
        node.result("ots_getTransactionError", json!([revert])),
        "0xaa"
    );
    assert_eq!(node.result("ots_getTransactionError", json!([pay])), "0x");
    let unknown = format!("0x{}", "ab".repeat(32));
    for method in [
        "ots_getTransactionError",
        "ots_traceTransaction",
        "ots_getInternalOperations",
    ] {
        assert_eq!(
            node.result(method, json!([unknown])),
            Value::Null,
            "{method}"
        );
    }

    // Block details: the header, the count, no issuance after the merge, the fees paid.
    let details = node.result("ots_getBlockDetails", json!([2]));
    let block2 = node.result("eth_getBlockByNumber", json!(["0x2", false]));
    assert_eq!(details["block"]["hash"], block2["hash"], "{details}");
    assert_eq!(details["block"]["transactionCount"], 1);
    assert_eq!(details["block"].get("transactions"), None);
    assert_eq!(details["issuance"]["issuance"], "0x0");
    let fees = quantity(&pay_receipt["gasUsed"]) * quantity(&pay_receipt["effectiveGasPrice"]);
    assert_eq!(quantity(&details["totalFees"]), fees);
    assert_eq!(
        node.result("ots_getBlockDetailsByHash", json!([block2["hash"]])),
        details
    );
    assert_eq!(
        node.result("ots_getBlockDetails", json!([9_999])),
        Value::Null
    );
    let header = node.result("erigon_getHeaderByNumber", json!([2]));
    assert_eq!(header["hash"], block2["hash"]);

    // A block's transactions a page at a time, from its end.
    let number = quantity(&batch_block) as u64;
    let page =
        |page: u64, size: u64| node.result("ots_getBlockTransactions", json!([number, page, size]));
    let first = page(0, 2);
    assert_eq!(first["fullblock"]["transactionCount"], 3, "{first}");
    let hashes = |p: &Value| -> Vec<Value> {
        p["fullblock"]["transactions"]
            .as_array()
            .expect("txs")
            .iter()
            .map(|t| t["hash"].clone())
            .collect()
    };
    // Pages count from the block's end (erigon's and reth's cut); each is in block order,
    // where the batch's nonces put batch[2] first.
    assert_eq!(hashes(&first), vec![batch[1].clone(), batch[0].clone()]);
    assert_eq!(first["receipts"][0]["transactionHash"], batch[1]);
    assert_eq!(first["receipts"][0]["logs"], Value::Null);
    assert_eq!(hashes(&page(1, 2)), vec![batch[2].clone()]);
    assert_eq!(hashes(&page(2, 2)), Vec::<Value>::new());
    for size in [0, 5_000] {
        let r = node.call("ots_getBlockTransactions", json!([number, 0, size]));
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }

    // An address's transactions, newest first: the payer's creation and the call to it.
    let search = node.result("ots_searchTransactionsBefore", json!([payer, 0, 10]));
    let found = |s: &Value| -> Vec<Value> {
        s["txs"]
            .as_array()
            .expect("txs")
            .iter()
            .map(|t| t["hash"].clone())
            .collect()
    };
    assert_eq!(
        found(&search),
        vec![pay.clone(), deploy.clone()],
        "{search}"
    );
    assert_eq!(
        (search["firstPage"].clone(), search["lastPage"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(search["receipts"][0]["transactionHash"], pay);
    assert!(search["receipts"][0]["timestamp"].is_string(), "{search}");
    // Whole blocks make a page: the three-transaction block fills one of two.
    let newest = node.result("ots_searchTransactionsBefore", json!([ADDR0, 0, 2]));
    assert_eq!(
        found(&newest),
        vec![batch[0].clone(), batch[1].clone(), batch[2].clone()]
    );
    assert_eq!(newest["lastPage"], false);
    let older = node.result("ots_searchTransactionsBefore", json!([ADDR0, number, 1]));
    assert_eq!(found(&older), vec![transfer.clone()]);
    let oldest = node.result("ots_searchTransactionsAfter", json!([ADDR0, 0, 2]));
    assert_eq!(found(&oldest), vec![pay.clone(), deploy.clone()]);
    assert_eq!(
        (oldest["firstPage"].clone(), oldest["lastPage"].clone()),
        (json!(false), json!(true))
    );
    let to_x = node.result("ots_searchTransactionsAfter", json!([X, 0, 10]));
    assert_eq!(found(&to_x).len(), 4, "{to_x}");
    assert_eq!(to_x["firstPage"], true);
    // The coinbase is reached only by an inner call.
    let coinbase: Address = serde_json::from_value(coinbase).expect("address");
    let paid = node.result("ots_searchTransactionsBefore", json!([coinbase, 0, 10]));
    assert_eq!(found(&paid), vec![pay.clone()]);

    // By sender and nonce, and who created a contract (a transaction's or an inner CREATE).
    for (nonce, hash) in [(0, &deploy), (4, &revert), (7, &batch[1])] {
        assert_eq!(
            node.result("ots_getTransactionBySenderAndNonce", json!([ADDR0, nonce])),
            *hash,
            "nonce {nonce}"
        );
    }
    assert_eq!(
        node.result("ots_getTransactionBySenderAndNonce", json!([ADDR0, "0x64"])),
        Value::Null
    );
    // reth's eth_getTransactionBySenderAndNonce: the whole transaction, mined or pooled.
    let mined_tx = node.result("eth_getTransactionBySenderAndNonce", json!([ADDR0, "0x4"]));
    assert_eq!(
        mined_tx,
        node.result("eth_getTransactionByHash", json!([revert]))
    );
    let gapped = node.result("eth_sendRawTransaction", json!([tx(10, Some(X), 1, "")]));
    let pooled = node.result("eth_getTransactionBySenderAndNonce", json!([ADDR0, 10]));
    assert_eq!(
        (pooled["hash"].clone(), pooled["blockNumber"].clone()),
        (gapped, Value::Null)
    );
    assert_eq!(
        node.result("eth_getTransactionBySenderAndNonce", json!([ADDR0, 9])),
        Value::Null
    );

    // Undone effects are no internal operations: a wrapper calls the payer with its value (the
    // payer forwards it), then reverts; every frame but the wrapper's succeeded.
    let runtime = format!("5f5f5f5f3473{}5af1505f5ffd", alloy::hex::encode(payer));
    assert_eq!(runtime.len(), 64);
    let (_, wrapper_deploy) = mined(&node, tx(9, None, 0, &format!("7f{runtime}5f5260205ff3")));
    let wrapper: Address =
        serde_json::from_value(wrapper_deploy["contractAddress"].clone()).expect("address");
    let (undone, undone_receipt) = mined(&node, tx(11, Some(wrapper), 5, ""));
    assert_eq!(undone_receipt["status"], "0x0");
    let trace = node.result("ots_traceTransaction", json!([undone]));
    assert_eq!(trace.as_array().map(Vec::len), Some(3), "{trace}");
    assert_eq!(
        node.result("ots_getInternalOperations", json!([undone])),
        json!([])
    );

    // Genesis: no transactions, no fees, no issuance.
    let genesis = node.result("ots_getBlockDetails", json!([0]));
    assert_eq!(genesis["block"]["transactionCount"], 0, "{genesis}");
    assert_eq!(genesis["totalFees"], "0x0");
    assert_eq!(genesis["issuance"]["issuance"], "0x0");
    let genesis_page = node.result("ots_getBlockTransactions", json!([0, 0, 10]));
    assert_eq!(
        genesis_page["fullblock"]["transactionCount"], 0,
        "{genesis_page}"
    );
    assert_eq!(genesis_page["receipts"], json!([]));
    assert_eq!(
        node.result("ots_getContractCreator", json!([payer])),
        json!({"hash": deploy, "creator": lower(ADDR0)})
    );
    assert_eq!(
        node.result("ots_getContractCreator", json!([child])),
        json!({"hash": make, "creator": lower(maker)})
    );
    assert_eq!(
        node.result("ots_getContractCreator", json!([X])),
        Value::Null
    );
}

/// Block details across the execution-apis chain, proof-of-work blocks with uncles included:
/// the issuance is what trace_block's reward traces pay, the fees what the receipts paid.
#[test]
fn block_details_match_the_rewards_and_receipts() {
    let node = Node::execution_apis(&["--rpc.rate-limit", "0"]);
    let head = quantity(&node.result("eth_blockNumber", json!([]))) as u64;
    let mut with_uncles = 0;
    for number in 1..=head {
        let details = node.result("ots_getBlockDetails", json!([number]));
        let (mut block_reward, mut uncle_reward) = (0u128, 0u128);
        for trace in node
            .result("trace_block", json!([format!("{number:#x}")]))
            .as_array()
            .expect("traces")
        {
            if trace["type"] == "reward" {
                let value = quantity(&trace["action"]["value"]);
                match trace["action"]["rewardType"].as_str() {
                    Some("block") => block_reward += value,
                    _ => uncle_reward += value,
                }
            }
        }
        assert_eq!(
            quantity(&details["issuance"]["blockReward"]),
            block_reward,
            "block {number}"
        );
        assert_eq!(
            quantity(&details["issuance"]["uncleReward"]),
            uncle_reward,
            "block {number}"
        );
        assert_eq!(
            quantity(&details["issuance"]["issuance"]),
            block_reward + uncle_reward,
            "block {number}"
        );
        with_uncles += usize::from(uncle_reward > 0);
        let receipts = node.result("eth_getBlockReceipts", json!([format!("{number:#x}")]));
        let fees: u128 = receipts
            .as_array()
            .expect("receipts")
            .iter()
            .map(|r| quantity(&r["gasUsed"]) * quantity(&r["effectiveGasPrice"]))
            .sum();
        assert_eq!(quantity(&details["totalFees"]), fees, "block {number}");
    }
    assert!(with_uncles > 0, "no block with uncles was checked");
}

/// An address search that reaches `--rpc.evm-timeout` with nothing found says so (-32016)
/// rather than answering an empty page that would claim there is nothing.
#[test]
fn a_search_past_the_deadline_is_a_timeout() {
    let node = Node::start(
        TempDir::new("otterscan-deadline"),
        Path::new("dev"),
        &["--dev", "--rpc.evm-timeout", "0"],
    );
    mined(&node, tx(0, Some(X), 7, ""));
    for method in [
        "ots_searchTransactionsBefore",
        "ots_searchTransactionsAfter",
    ] {
        let r = node.call(method, json!([X, 0, 10]));
        assert_eq!(r["error"]["code"], -32016, "{method}: {r}");
    }
}
