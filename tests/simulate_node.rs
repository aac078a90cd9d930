//! eth_simulateV1 end to end: `simnode node` on the imported execution-apis chain, fixtures
//! replayed over HTTP (started with `--rpc.max-simulate-blocks 256`, as the fixtures expect),
//! and the provider's default limit of 16 blocks on a node started without the flag.

mod support;

use serde_json::json;
use support::{replay_methods, Node};

#[test]
fn simulate_fixtures_over_http() {
    let node = Node::execution_apis(&["--rpc.max-simulate-blocks", "256"]);
    replay_methods(&node, &["eth_simulateV1"]).assert_all_passed();
}

#[test]
fn default_node_allows_16_blocks() {
    let node = Node::execution_apis(&[]);
    let blocks = |n: usize| serde_json::Value::Array(vec![json!({}); n]);
    let ok = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": blocks(16)}, "latest"]),
    );
    assert_eq!(ok["result"].as_array().map(Vec::len), Some(16), "{ok}");
    let err = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": blocks(17)}, "latest"]),
    );
    assert_eq!(err["error"]["code"], -38026, "{err}");
    // The provider's field name, and no block parameter at all (defaults to latest).
    let full = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{"calls": [{"to": "0xc100000000000000000000000000000000000000"}]}],
                "returnFullTransactionObjects": true}]),
    );
    assert!(full["result"][0]["transactions"][0].is_object(), "{full}");
}
