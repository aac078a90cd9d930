//! Reorgs over the Engine API, end to end: a node on the execution-apis chain (nothing
//! finalized) rewinds to an older canonical block with forkchoiceUpdated, answers JSON-RPC for
//! the shorter chain, and goes forward again to the old head from its side table. Competing
//! branches (reorgs between two blocks of the same height, invalid branches, the finalized
//! limit) are covered by the unit tests in `src/sync/engine.rs`.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{execution_apis_genesis, import_execution_apis_chain, Node};

fn fcu(node: &Node, head: &Value) -> Value {
    let req = json!({"jsonrpc":"2.0","id":1,"method":"engine_forkchoiceUpdatedV3",
        "params":[{"headBlockHash": head, "safeBlockHash": head,
                   "finalizedBlockHash": "0x0000000000000000000000000000000000000000000000000000000000000000"}, null]});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = node.engine_raw(&req.to_string());
        if status == 200 || Instant::now() > deadline {
            return serde_json::from_str(&body).unwrap_or(json!({ "raw": body }));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rewind_and_forward_over_the_engine_api() {
    let node = Node::start(
        import_execution_apis_chain(),
        &execution_apis_genesis(),
        &[],
    );
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let head_number = u64::from_str_radix(
        head["number"].as_str().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let target_number = head_number - 3;
    let target = node.result(
        "eth_getBlockByNumber",
        json!([format!("{target_number:#x}"), false]),
    );
    let miner = head["miner"].clone();
    let balance_at_target = node.result(
        "eth_getBalance",
        json!([miner, format!("{target_number:#x}")]),
    );
    let balance_at_head = node.result("eth_getBalance", json!([miner, "latest"]));

    assert_ne!(
        balance_at_target, balance_at_head,
        "the check below must mean something"
    );
    let v = fcu(&node, &target["hash"]);
    assert_eq!(v["result"]["payloadStatus"]["status"], "VALID", "{v}");
    let latest = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(latest["hash"], target["hash"]);
    assert_eq!(
        node.result(
            "eth_getBlockByNumber",
            json!([format!("{:#x}", target_number + 1), false])
        ),
        Value::Null
    );
    assert_eq!(
        node.result("eth_getBalance", json!([miner, "latest"])),
        balance_at_target
    );

    let v = fcu(&node, &head["hash"]);
    assert_eq!(v["result"]["payloadStatus"]["status"], "VALID", "{v}");
    let latest = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(latest["hash"], head["hash"]);
    assert_eq!(
        node.result("eth_getBalance", json!([miner, "latest"])),
        balance_at_head
    );
}
