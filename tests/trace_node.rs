//! trace_callMany through the running node, as a user reaches it: `simnode node` on the
//! imported execution-apis chain, JSON-RPC over HTTP at `/v3/<key>`.
//!
//! The reth fixtures that reth answers correctly are replayed here byte for byte (errors by
//! code). The ones where reth's answer is wrong (vmTrace details, a Rust enum name as error
//! text, omitted trace types) and the 50M-gas loop (seconds in a debug build, against the
//! node's 5 s deadline) are checked in-process in `trace_conformance.rs`.

mod support;

use serde_json::{json, Value};
use support::{Fixture, Node};

const CHECKED_IN_PROCESS: &[&str] = &[
    "create-and-call-all-types.io",
    "nested-all-types-explicit-gas.io",
    "nested-create2-collision.io",
    "missing-trace-types.io",
    "oog-default-gas.io",
];

#[test]
fn trace_call_many_over_http() {
    let node = Node::execution_apis(&[]);

    let dir = support::conformance_dir().join("../reth-trace/trace_callMany");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "io"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut replayed = 0;
    for file in &files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if CHECKED_IN_PROCESS.contains(&name.as_str()) {
            continue;
        }
        replayed += 1;
        if let Err(why) = Fixture::load(file).and_then(|f| f.replay(&node)) {
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(
        replayed >= 10,
        "only {replayed} fixtures found in {}",
        dir.display()
    );
    assert!(
        failures.is_empty(),
        "{}\nnode log:\n{}",
        failures.join("\n"),
        node.log()
    );

    // State carries between calls: a transfer to a fresh account, which then sends on part of
    // it; the second call's stateDiff starts where the first one's ended.
    let a = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let fresh = "0x00000000000000000000000000000000000000f1";
    let got = node.result(
        "trace_callMany",
        json!([[
            [{"from": a, "to": fresh, "value": "0x100"}, ["stateDiff"]],
            [{"from": fresh, "to": a, "value": "0x40"}, ["stateDiff", "trace"]]
        ], "latest"]),
    );
    assert_eq!(got[0]["stateDiff"][fresh]["balance"], json!({"+": "0x100"}));
    assert_eq!(
        got[1]["stateDiff"][fresh]["balance"],
        json!({"*": {"from": "0x100", "to": "0xc0"}})
    );
    let a_after_first = got[0]["stateDiff"][a]["balance"]["*"]["to"].clone();
    assert_eq!(
        got[1]["stateDiff"][a]["balance"]["*"]["from"],
        a_after_first
    );
    assert_eq!(got[1]["trace"][0]["action"]["from"], fresh);

    // Errors keep their codes through the server.
    let code = |params: Value| node.call("trace_callMany", params)["error"]["code"].clone();
    assert_eq!(
        code(json!([[[{"from": a, "to": fresh}, ["trace"]]], "0xffff"])),
        -32001
    );
    assert_eq!(
        code(json!([[[{"from": a, "to": fresh}, ["bogus"]]], "latest"])),
        -32602
    );
    assert_eq!(
        code(json!([[[{"from": a, "to": fresh, "gas": "0x2faf081"}, []]], "latest"])),
        -32000
    );
}

/// Calls the EVM refuses get reth's codes (reth is the reference for trace_*): -32003 for a
/// transaction the state rejects (funds, a tip above the fee cap), -32000 for the call's own
/// bad gas, fee cap or chain id, -32602 for two fee styles at once.
#[test]
fn refused_calls_get_reths_error_codes() {
    let node = Node::execution_apis(&[]);
    let code = |call: Value| {
        let r = node.call("trace_callMany", json!([[[call, ["trace"]]], "latest"]));
        r["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error: {r}"))
    };
    let empty = "0x1111111111111111111111111111111111111111";
    let to = "0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2";
    let call = |extra: Value| {
        let mut c = json!({"from": empty, "to": to});
        for (k, v) in extra.as_object().expect("object") {
            c[k] = v.clone();
        }
        c
    };
    assert_eq!(
        code(call(json!({"value": "0x1"}))),
        -32003,
        "value over balance"
    );
    assert_eq!(
        code(call(json!({"value": "0x1", "gasPrice": "0x1"}))),
        -32003,
        "value over balance, gas from the balance"
    );
    assert_eq!(
        code(call(
            json!({"maxFeePerGas": "0x10000000", "maxPriorityFeePerGas": "0x20000000"})
        )),
        -32003,
        "tip above the fee cap"
    );
    assert_eq!(
        code(call(json!({"maxFeePerGas": "0x1"}))),
        -32000,
        "fee cap below base fee"
    );
    assert_eq!(code(call(json!({"gas": "0x1"}))), -32000, "intrinsic gas");
    assert_eq!(code(call(json!({"chainId": "0x5"}))), -32000, "chain id");
    assert_eq!(
        code(call(
            json!({"maxFeePerGas": "0x10000000", "gasPrice": "0x1"})
        )),
        -32602,
        "two fee styles"
    );
    // Later calls name their index; the code stays.
    let r = node.call(
        "trace_callMany",
        json!([
            [
                [call(json!({})), ["trace"]],
                [call(json!({"value": "0x1"})), ["trace"]]
            ],
            "latest"
        ]),
    );
    assert_eq!(r["error"]["code"], -32003, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("call 1: ")),
        "{r}"
    );
}
