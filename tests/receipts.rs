//! eth_getBlockReceipts end to end on the imported execution-apis chain: every block-parameter
//! form, the errors, and consistency with eth_getTransactionReceipt and the block headers.

mod support;

use serde_json::{json, Value};
use support::Node;

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex")
}

#[test]
fn block_parameter_forms_and_errors() {
    let node = Node::execution_apis(&[]);
    let by_hex = node.result("eth_getBlockReceipts", json!(["0x2"]));
    let hash = node.result("eth_getBlockByNumber", json!(["0x2", false]))["hash"].clone();
    for param in [
        json!("2"),
        json!(2),
        json!(hash),
        json!({"blockHash": hash}),
        json!({"blockHash": hash, "requireCanonical": true}),
        json!({"blockNumber": "0x2"}),
    ] {
        assert_eq!(
            node.result("eth_getBlockReceipts", json!([param])),
            by_hex,
            "param {param}"
        );
    }
    let latest = node.result("eth_getBlockReceipts", json!(["latest"]));
    assert!(!latest.as_array().unwrap().is_empty());
    // `pending` is `latest` here, as the hosted provider documents (DESIGN.md section 5).
    for tag in ["pending", "safe", "finalized", "0x36"] {
        assert_eq!(
            node.result("eth_getBlockReceipts", json!([tag])),
            latest,
            "{tag}"
        );
    }
    assert_eq!(
        node.result("eth_getBlockReceipts", json!(["earliest"])),
        json!([])
    );
    assert_eq!(
        node.result("eth_getBlockReceipts", json!(["0xffff"])),
        Value::Null
    );
    for bad in [
        json!([]),
        json!(["0x1ffffffffffffffff"]),
        json!([format!("0x{}", "zz".repeat(32))]),
        json!(["lates"]),
        json!([-1]),
    ] {
        let r = node.call("eth_getBlockReceipts", bad.clone());
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
        assert!(!r["error"]["message"].as_str().unwrap_or("").is_empty());
    }
}

#[test]
fn every_block_agrees_with_headers_and_single_receipts() {
    // A few hundred requests in a burst: lift the per-key rate limit.
    let node =
        Node::execution_apis(&["--rpc.rate-limit", "1000000", "--rpc.rate-burst", "1000000"]);
    let mut saw_root = false;
    let mut saw_blob = false;
    let mut saw_7702 = false;
    for n in 1..=0x36u64 {
        let block = node.result("eth_getBlockByNumber", json!([format!("{n:#x}"), false]));
        let receipts = node.result("eth_getBlockReceipts", json!([format!("{n:#x}")]));
        let receipts = receipts.as_array().unwrap();
        let txs = block["transactions"].as_array().unwrap();
        assert_eq!(receipts.len(), txs.len(), "block {n}");
        let (mut gas, mut log_index) = (0u64, 0u64);
        for (i, r) in receipts.iter().enumerate() {
            assert_eq!(r["transactionHash"], txs[i], "block {n} tx {i}");
            assert_eq!(hex(&r["transactionIndex"]), i as u64);
            gas += hex(&r["gasUsed"]);
            assert_eq!(hex(&r["cumulativeGasUsed"]), gas, "block {n} tx {i}");
            for log in r["logs"].as_array().unwrap() {
                assert_eq!(hex(&log["logIndex"]), log_index);
                assert_eq!(log["blockTimestamp"], block["timestamp"]);
                log_index += 1;
            }
            assert_eq!(r.get("root").is_some(), r.get("status").is_none());
            saw_root |= r.get("root").is_some();
            let is_blob = r["type"] == "0x3";
            assert_eq!(r.get("blobGasUsed").is_some(), is_blob);
            assert_eq!(r.get("blobGasPrice").is_some(), is_blob);
            saw_blob |= is_blob;
            saw_7702 |= r["type"] == "0x4";
            assert_eq!(
                &node.result("eth_getTransactionReceipt", json!([txs[i]])),
                r
            );
        }
        assert_eq!(gas, hex(&block["gasUsed"]), "block {n}");
    }
    assert!(
        saw_root && saw_blob && saw_7702,
        "chain covers pre-Byzantium, blob and 7702 receipts"
    );
    let block2 = node.result("eth_getBlockReceipts", json!(["0x2"]));
    assert!(
        block2.as_array().unwrap().len() >= 50,
        "block 2 is the big one"
    );
}
