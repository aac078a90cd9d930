//! Behaviour gaps found by replaying upstream execution-apis fixtures that our local copy
//! lacks, pinned end to end on the imported execution-apis chain.

mod support;

use serde_json::json;
use support::Node;

/// geth: `maxFeePerBlobGas` without blob hashes is valid from Cancun; the call is not a blob
/// transaction (upstream eth_call/call-blob-fee-without-hashes.io).
#[test]
fn blob_fee_without_blob_hashes_is_not_a_blob_transaction() {
    let node = Node::execution_apis(&[]);
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let to = "0x0100000000000000000000000000000000000000";
    let r = node.call(
        "eth_call",
        json!([{"from": from, "maxFeePerBlobGas": "0x1", "to": to}, "latest"]),
    );
    assert_eq!(r["result"], "0x", "{r}");
    let r = node.call(
        "eth_call",
        json!([{"from": from, "maxFeePerBlobGas": "0x1", "blobVersionedHashes": [], "to": to}, "latest"]),
    );
    assert!(
        r.get("error").is_some(),
        "an empty hash list is refused: {r}"
    );
    let r = node.call(
        "eth_estimateGas",
        json!([{"from": from, "maxFeePerBlobGas": "0x1", "to": to}, "latest"]),
    );
    assert_eq!(r["result"], "0x5208", "{r}");
    // A contract creation with the field alone is no blob creation either.
    let r = node.call(
        "eth_call",
        json!([{"from": from, "maxFeePerBlobGas": "0x1", "input": "0x602a60005260206000f3"}, "latest"]),
    );
    assert!(r.get("result").is_some(), "{r}");
}
