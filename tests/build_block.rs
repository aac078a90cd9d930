//! `testing_buildBlockV1` on the imported execution-apis chain: the block it builds is one the
//! node itself accepts over the Engine API (same hash, VALID), building stores nothing, and
//! bad input is answered with an error.

mod support;

use serde_json::{json, Value};
use support::{chain_dir, Node};

/// The request of one of the chain's own testing_buildBlockV1 fixtures: a signed transfer
/// from a funded account, on the head.
fn fixture_params(name: &str) -> Value {
    let text = std::fs::read_to_string(chain_dir().join("testing_buildBlockV1").join(name))
        .expect("read fixture");
    let request: Value = text
        .lines()
        .find_map(|l| l.strip_prefix(">> "))
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("request line");
    request["params"].clone()
}

#[test]
fn built_blocks_are_valid_and_not_stored() {
    let node = Node::execution_apis(&[]);
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let params = fixture_params("build-block-with-transactions.io");

    let built = node.result("testing_buildBlockV1", params.clone());
    let payload = &built["executionPayload"];
    assert_eq!(payload["parentHash"], head["hash"]);
    assert_eq!(payload["transactions"].as_array().map(Vec::len), Some(1));
    assert_ne!(
        built["blockValue"], "0x0",
        "the fee recipient earns the tip"
    );
    // Building does not store: the head is unchanged.
    assert_eq!(
        node.result("eth_blockNumber", json!([])),
        head["number"],
        "building must not store the block"
    );

    // The node accepts its own block through the Engine API.
    let beacon_root = &params[1]["parentBeaconBlockRoot"];
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "engine_newPayloadV4",
        "params": [payload, [], beacon_root, built["executionRequests"]],
    });
    let (_, answer) = node.engine_raw(&body.to_string());
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["result"]["status"], "VALID", "{answer}");
    // Stored, found by hash, and the head once a forkchoice update names it.
    let latest = || node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(latest()["hash"], head["hash"]);
    let by_hash = node.result("eth_getBlockByHash", json!([payload["blockHash"], false]));
    assert_eq!(by_hash["number"], payload["blockNumber"]);
    let head_hash = &payload["blockHash"];
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "engine_forkchoiceUpdatedV3",
        "params": [{"headBlockHash": head_hash, "safeBlockHash": head_hash, "finalizedBlockHash": head_hash}, null],
    });
    let (_, answer) = node.engine_raw(&body.to_string());
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(
        answer["result"]["payloadStatus"]["status"], "VALID",
        "{answer}"
    );
    let stored = latest();
    assert_eq!(stored["hash"], payload["blockHash"]);

    // Errors: an unapplicable transaction, an unknown parent, a timestamp not after the parent.
    let mut bad = fixture_params("build-block-invalid-transaction.io");
    bad[0] = stored["hash"].clone();
    bad[1]["timestamp"] = json!("0x10000");
    let answer = node.call("testing_buildBlockV1", bad);
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let mut unknown = params.clone();
    unknown[0] = json!(format!("0x{}", "ab".repeat(32)));
    let answer = node.call("testing_buildBlockV1", unknown);
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let mut early = params;
    early[0] = stored["hash"].clone();
    let answer = node.call("testing_buildBlockV1", early);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["latest", false]))["hash"],
        stored["hash"]
    );
}
