//! eth_getBlockReceipts over HTTP on the project's own chain (`testdata/devchain.rlp`): the blob
//! and EIP-7702 transactions, read the way an indexer reads them.

mod support;

use std::{path::Path, process::Command};

use serde_json::{json, Value};
use support::{simnode_bin, Node, TempDir};

fn manifest() -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/devchain.json"),
    )
    .expect("testdata/devchain.json");
    serde_json::from_str(&text).expect("devchain.json parses")
}

fn node_on_devchain() -> Node {
    let datadir = TempDir::new("devchain-receipts");
    let out = Command::new(simnode_bin())
        .args(["import", "--chain", "dev", "--datadir"])
        .arg(datadir.path())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/devchain.rlp"))
        .output()
        .expect("run import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Node::start(datadir, Path::new("dev"), &[])
}

fn receipt_of(node: &Node, case: &Value) -> Value {
    let block = case["block"].as_u64().expect("block number");
    let index = case["index"].as_u64().expect("index") as usize;
    let receipts = node.result("eth_getBlockReceipts", json!([format!("0x{block:x}")]));
    let receipt = receipts[index].clone();
    assert_eq!(
        receipt["transactionHash"], case["hash"],
        "case order in block {block}"
    );
    // The block call and the single-receipt call agree.
    assert_eq!(
        node.result("eth_getTransactionReceipt", json!([case["hash"]])),
        receipt
    );
    receipt
}

#[test]
fn blob_and_7702_receipts_of_the_generated_chain() {
    let m = manifest();
    let node = node_on_devchain();

    let blob = receipt_of(&node, &m["cases"]["blobTx"]);
    assert_eq!(blob["type"], "0x3");
    assert_eq!(blob["status"], "0x1");
    assert_eq!(blob["blobGasUsed"], "0x40000", "2 blobs x 131072");
    let price = blob["blobGasPrice"]
        .as_str()
        .expect("blobGasPrice on a blob transaction");
    assert!(u64::from_str_radix(price.trim_start_matches("0x"), 16).expect("hex") >= 1);
    assert_eq!(blob["logs"].as_array().map(Vec::len), Some(1));
    let single = receipt_of(&node, &m["cases"]["blobTxSingle"]);
    assert_eq!(single["blobGasUsed"], "0x20000");

    let set_code = receipt_of(&node, &m["cases"]["setCode"]);
    assert_eq!(set_code["type"], "0x4");
    assert_eq!(set_code["status"], "0x1");
    assert!(
        set_code.get("blobGasUsed").is_none(),
        "blob fields only on blob transactions: {set_code}"
    );
    // The log comes from the delegated account itself, running the delegate's code.
    assert_eq!(set_code["logs"][0]["address"], m["cases"]["setCode"]["to"]);

    let revoke = receipt_of(&node, &m["cases"]["revokeDelegation"]);
    assert_eq!(revoke["type"], "0x4");
    assert_eq!(revoke["logs"], json!([]));
}
