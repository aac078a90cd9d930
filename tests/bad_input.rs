//! Bad input never breaks the node: every request of the execution-apis and reth trace fixtures,
//! mutated at random (a value swapped for one of the wrong type, size or range, a field dropped,
//! an element repeated, a field added), is answered with a JSON-RPC result or error over HTTP
//! 200, never with a dropped connection, an internal error or a panic in the node's log, and
//! the node still answers afterwards.
//!
//! The mutations are seeded: `SIMNODE_BAD_INPUT_SEED` and `SIMNODE_BAD_INPUT_COUNT` run other or
//! more of them.

mod support;

use serde_json::{json, Value};
use support::{
    conformance_dir, fixture_groups,
    mutate::{mutate, palette, Rng},
    reth_trace_dir, Fixture, Node,
};

/// geth answers these with -32603 itself (core.ErrNonceMax, core.ErrEmptyAuthList and
/// core.ErrMissingBlobHashes in eth_simulateV1's validation), and the fixtures expect it.
const GETH_INTERNAL_ERRORS: &[&str] = &[
    "nonce has max value",
    "empty authorization list",
    "empty blobs",
];

fn seed_requests() -> Vec<Value> {
    let mut requests = Vec::new();
    for root in [conformance_dir(), reth_trace_dir()] {
        for (_, files) in fixture_groups(&root) {
            for file in files {
                let fixture = Fixture::load(&file).unwrap_or_else(|e| panic!("{e}"));
                for (request, _) in fixture.exchanges {
                    if let Ok(v) = serde_json::from_str::<Value>(&request) {
                        if v.get("params").is_some() {
                            requests.push(v);
                        }
                    }
                }
            }
        }
    }
    requests
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_fixture_requests_get_answers() {
    let seed = env_u64("SIMNODE_BAD_INPUT_SEED", 0x5eed_1234);
    let count = env_u64("SIMNODE_BAD_INPUT_COUNT", 3000);
    let node = Node::execution_apis(&[
        "--rpc.max-simulate-blocks",
        "256",
        "--rpc.rate-limit",
        "1000000",
        "--rpc.rate-burst",
        "1000000",
    ]);
    let requests = seed_requests();
    assert!(requests.len() > 100, "fixtures found: {}", requests.len());
    let palette = palette();
    let mut rng = Rng(seed | 1);
    let mut failures = Vec::new();
    for _ in 0..count {
        let base = rng.pick(&requests);
        let request = mutate(&mut rng, base, &palette);
        let body = request.to_string();
        let answer = match node.try_rpc_raw(&body) {
            Ok((200, text)) => serde_json::from_str::<Value>(&text).ok(),
            // The one refusal a request may earn at the door: too large a body.
            Ok((413, _)) => continue,
            Ok((status, text)) => {
                failures.push(format!("HTTP {status} {text:.300} for {body:.1500}"));
                continue;
            }
            Err(e) => {
                failures.push(format!("no answer ({e}) for {body:.1500}"));
                continue;
            }
        };
        let Some(answer) = answer.filter(|a| a.get("result").is_some() || a.get("error").is_some())
        else {
            failures.push(format!("not a JSON-RPC answer for {body:.1500}"));
            continue;
        };
        let internal = answer["error"]["code"] == -32603;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        if internal && !GETH_INTERNAL_ERRORS.iter().any(|m| message.contains(m)) {
            failures.push(format!("internal error {message:.300} for {body:.1500}"));
        }
    }
    assert_eq!(
        node.result("eth_blockNumber", json!([])),
        "0x36",
        "the node still answers"
    );
    let log = node.log();
    assert!(!log.contains("panicked"), "the node panicked:\n{log}");
    assert!(
        failures.is_empty(),
        "{} of {count} mutated requests (seed {seed:#x}) went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
