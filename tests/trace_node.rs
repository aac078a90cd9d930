//! trace_callMany through the running node, as a user reaches it: `simnode node` on the
//! imported execution-apis chain, JSON-RPC over HTTP at `/v3/<key>`.
//!
//! The reth fixtures that reth answers correctly are replayed here byte for byte (errors by
//! code). The ones where reth's answer is wrong (vmTrace details, a Rust enum name as error
//! text, omitted trace types) and the 50M-gas loop (seconds in a debug build, against the
//! node's 5 s deadline) are checked in-process in `trace_conformance.rs`.

mod support;

use serde_json::{json, Value};
use support::{Fixture, Node, TempDir};

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
    // Value the sender cannot pay: reth's "transaction rejected".
    assert_eq!(
        code(json!([[[{"from": fresh, "to": a, "value": "0x1"}, []]], "latest"])),
        -32003
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

fn hex_u128(v: &Value) -> u128 {
    let s = v.as_str().unwrap_or_else(|| panic!("a hex quantity: {v}"));
    u128::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex")
}

/// A `*` change's (from, to) in a stateDiff entry, or `None` if the value did not change.
fn changed(entry: &Value) -> Option<(u128, u128)> {
    let change = entry.get("*")?;
    Some((hex_u128(&change["from"]), hex_u128(&change["to"])))
}

/// Every mined transaction of the chain traced again: trace_replayBlockTransactions and
/// trace_replayTransaction agree, the top call is the transaction as geth's call tracer saw
/// it, and the stateDiff charges the sender and pays the coinbase what the receipt says.
#[test]
fn replays_of_mined_transactions_match_their_receipts() {
    let node = Node::execution_apis(UNLIMITED);
    let checked = check_replays(&node);
    assert!(checked > 20, "only {checked} transactions in the chain");

    // What is not there.
    let types = json!(["trace", "stateDiff"]);
    assert_eq!(
        node.result("trace_replayBlockTransactions", json!(["0xffff", types])),
        Value::Null
    );
    assert_eq!(
        node.result("trace_replayBlockTransactions", json!(["0x0", types])),
        json!([])
    );
    let unknown = format!("0x{}", "ab".repeat(32));
    let r = node.call("trace_replayTransaction", json!([unknown, types]));
    assert_eq!(r["error"]["code"], -32001, "{r}");
}

/// The same, and trace_block's checks, on the project's own test chain (`testdata/devchain.rlp`), which has what the
/// execution-apis chain lacks: nested calls, reverts and out-of-gas inside a block, blob and
/// EIP-7702 transactions.
#[test]
fn replays_of_the_testdata_chain_match_their_receipts() {
    let datadir = TempDir::new("trace-devchain");
    let out = std::process::Command::new(support::simnode_bin())
        .args(["import", "--chain", "dev", "--datadir"])
        .arg(datadir.path())
        .arg(support::repo_root().join("testdata/devchain.rlp"))
        .output()
        .expect("run simnode import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = Node::start(datadir, std::path::Path::new("dev"), UNLIMITED);
    let checked = check_replays(&node);
    assert!(checked > 80, "only {checked} transactions in the chain");
    assert_eq!(check_block_traces(&node), 0, "no rewards after the merge");
    assert!(
        check_trace_get(&node) > 1,
        "a transaction with nested calls"
    );
    let nested = (1..=8u64).any(|n| {
        let traces = node.result("trace_block", json!([format!("{n:#x}")]));
        traces
            .as_array()
            .expect("a list")
            .iter()
            .any(|t| t["traceAddress"].as_array().is_some_and(|a| !a.is_empty()))
    });
    assert!(nested, "the chain has nested calls");
}

/// Several requests per transaction: past the default 100 per second.
const UNLIMITED: &[&str] = &["--rpc.rate-limit", "100000", "--rpc.rate-burst", "100000"];

/// Checks every mined transaction of the node's chain (see the tests above); returns how many.
fn check_replays(node: &Node) -> usize {
    let types = json!(["trace", "stateDiff"]);
    let mut checked = 0;
    let head = node.result("eth_blockNumber", json!([]));
    for number in 1..=hex_u128(&head) as u64 {
        let tag = format!("{number:#x}");
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        let replayed = node.result("trace_replayBlockTransactions", json!([tag, types]));
        let hashes = block["transactions"].as_array().expect("hashes");
        let replayed = replayed.as_array().expect("a list");
        assert_eq!(replayed.len(), hashes.len(), "block {number}");
        let base_fee = block.get("baseFeePerGas").map(hex_u128);
        let coinbase = block["miner"].as_str().expect("miner").to_string();
        for (hash, traced) in hashes.iter().zip(replayed) {
            assert_eq!(&traced["transactionHash"], hash);
            let one = node.result("trace_replayTransaction", json!([hash, types]));
            let mut without_hash = traced.clone();
            without_hash
                .as_object_mut()
                .expect("object")
                .remove("transactionHash");
            assert_eq!(one, without_hash, "{hash}: one transaction as in its block");

            let tx = node.result("eth_getTransactionByHash", json!([hash]));
            let receipt = node.result("eth_getTransactionReceipt", json!([hash]));
            let calls = node.result(
                "debug_traceTransaction",
                json!([hash, {"tracer": "callTracer"}]),
            );
            let top = &traced["trace"][0];
            assert_eq!(top["traceAddress"], json!([]));
            let from = tx["from"].as_str().expect("from");
            assert_eq!(top["action"]["from"], from, "{hash}");
            assert_eq!(top["action"]["value"], tx["value"], "{hash}");
            if tx["to"].is_null() {
                assert_eq!(top["type"], "create", "{hash}");
                assert_eq!(top["action"]["init"], tx["input"], "{hash}");
            } else {
                assert_eq!(top["action"]["to"], tx["to"], "{hash}");
                assert_eq!(top["action"]["input"], tx["input"], "{hash}");
            }
            let failed = receipt["status"] == "0x0";
            assert_eq!(top.get("error").is_some(), failed, "{hash}: {top}");
            assert_eq!(calls.get("error").is_some(), failed, "{hash}: {calls}");

            // The sender pays gas used times the effective price, its blob gas, and the value
            // (which a failed transaction does not move).
            let diff = &traced["stateDiff"];
            let gas_used = hex_u128(&receipt["gasUsed"]);
            let price = hex_u128(&receipt["effectiveGasPrice"]);
            let blob_fee = match receipt.get("blobGasUsed") {
                Some(used) => hex_u128(used) * hex_u128(&receipt["blobGasPrice"]),
                None => 0,
            };
            let value = if failed { 0 } else { hex_u128(&tx["value"]) };
            let (before, after) =
                changed(&diff[from]["balance"]).unwrap_or_else(|| panic!("{hash}: {diff}"));
            let to = tx["to"].as_str().unwrap_or_default();
            if to != from && coinbase != from {
                assert_eq!(
                    before - after,
                    gas_used * price + blob_fee + value,
                    "{hash}"
                );
            }
            let nonce = changed(&diff[from]["nonce"]).expect("the sender's nonce moves");
            if tx["type"] == "0x4" {
                // A sender may also sign one of its authorizations.
                assert!(nonce.1 > nonce.0, "{hash}");
            } else {
                assert_eq!(nonce.1, nonce.0 + 1, "{hash}");
            }
            // The coinbase earns the tip on every unit of gas.
            if let Some(base_fee) = base_fee {
                let tip = gas_used * (price - base_fee);
                if tip > 0 && coinbase != from && coinbase != to {
                    let earned = match diff.get(&coinbase).map(|e| &e["balance"]) {
                        Some(b) if b.get("+").is_some() => hex_u128(&b["+"]),
                        Some(b) => changed(b).map_or(0, |(before, after)| after - before),
                        None => 0,
                    };
                    assert_eq!(earned, tip, "{hash}");
                }
            }
            checked += 1;
        }
    }
    checked
}

/// trace_call is trace_callMany's single call, with state and block overrides on top.
#[test]
fn trace_call_with_overrides() {
    let node = Node::execution_apis(&[]);
    let a = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let fresh = "0x00000000000000000000000000000000000000f1";
    let call = json!({"from": a, "to": fresh, "value": "0x100"});
    let one = node.result(
        "trace_call",
        json!([call, ["trace", "stateDiff"], "latest"]),
    );
    let many = node.result(
        "trace_callMany",
        json!([[[call, ["trace", "stateDiff"]]], "latest"]),
    );
    assert_eq!(one, many[0]);

    // Code that returns NUMBER, put at an address by a state override, under a block override.
    let probe = "0x00000000000000000000000000000000000000c4";
    let number_code = "0x4360005260206000f3";
    let r = node.result(
        "trace_call",
        json!([
            {"from": fresh, "to": probe},
            ["trace"],
            "latest",
            {probe: {"code": number_code}, fresh: {"balance": "0x1000"}},
            {"number": "0x1234"}
        ]),
    );
    assert_eq!(
        r["output"],
        format!("0x{:064x}", 0x1234),
        "the block override is what NUMBER reads: {r}"
    );
    // Without the override it is the block's own number.
    let r = node.result(
        "trace_call",
        json!([{"from": fresh, "to": probe}, [], "0x10", {probe: {"code": number_code}}]),
    );
    assert_eq!(r["output"], format!("0x{:064x}", 0x10), "{r}");
    // A value the overridden balance pays for, and one it does not.
    let ok = node.call(
        "trace_call",
        json!([{"from": fresh, "to": a, "value": "0x1000"}, ["trace"], "latest",
               {fresh: {"balance": "0x1000"}}]),
    );
    assert!(ok.get("result").is_some(), "{ok}");
    let poor = node.call(
        "trace_call",
        json!([{"from": fresh, "to": a, "value": "0x1001"}, ["trace"], "latest",
               {fresh: {"balance": "0x1000"}}]),
    );
    assert_eq!(poor["error"]["code"], -32003, "{poor}");
    // The trace types are required, as in reth.
    let r = node.call("trace_call", json!([{"from": a, "to": fresh}]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// trace_block and trace_transaction: each transaction's call tree placed in the chain (the same
/// tree trace_replayTransaction gives, the root's gas being the receipt's), and before the merge
/// the block reward, which with the tips is what the miner's balance gained over the block.
#[test]
fn block_traces_place_calls_and_pay_rewards() {
    let node = Node::execution_apis(UNLIMITED);
    let rewarded = check_block_traces(&node);
    assert!(
        rewarded >= 30,
        "the chain's proof-of-work blocks: {rewarded}"
    );
    assert_eq!(
        node.result("trace_block", json!(["0x0"])),
        json!([]),
        "genesis pays nothing"
    );
    assert_eq!(node.result("trace_block", json!(["0xffff"])), Value::Null);
    let unknown = format!("0x{}", "ab".repeat(32));
    assert_eq!(
        node.result("trace_transaction", json!([unknown])),
        Value::Null
    );
}

/// Checks trace_block and trace_transaction on every block of the node's chain (see above);
/// returns how many blocks paid a reward.
fn check_block_traces(node: &Node) -> usize {
    let ether: u128 = 1_000_000_000_000_000_000;
    let mut rewarded = 0;
    let head = hex_u128(&node.result("eth_blockNumber", json!([]))) as u64;
    for number in 1..=head {
        let tag = format!("{number:#x}");
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        let traces = node.result("trace_block", json!([tag]));
        let traces = traces.as_array().expect("a list");
        let hashes = block["transactions"].as_array().expect("hashes");
        let mut expected = Vec::new();
        let mut tips = 0u128;
        for (position, hash) in hashes.iter().enumerate() {
            let of_tx = node.result("trace_transaction", json!([hash]));
            let replayed = node.result("trace_replayTransaction", json!([hash, ["trace"]]));
            let receipt = node.result("eth_getTransactionReceipt", json!([hash]));
            let of_tx = of_tx.as_array().expect("a list");
            assert_eq!(
                of_tx.len(),
                replayed["trace"].as_array().expect("trace").len()
            );
            for (placed, plain) in of_tx.iter().zip(replayed["trace"].as_array().unwrap()) {
                assert_eq!(placed["transactionHash"], *hash);
                assert_eq!(placed["transactionPosition"], position);
                assert_eq!(placed["blockNumber"], number);
                assert_eq!(placed["blockHash"], block["hash"]);
                let mut placed = placed.clone();
                let plain = plain.clone();
                for key in [
                    "transactionHash",
                    "transactionPosition",
                    "blockNumber",
                    "blockHash",
                ] {
                    placed.as_object_mut().unwrap().remove(key);
                }
                // The root too: its gas used is the call's own, not the receipt's.
                assert_eq!(placed, plain, "{hash}");
            }
            expected.extend(of_tx.iter().cloned());
            let price = hex_u128(&receipt["effectiveGasPrice"]);
            let base_fee = block.get("baseFeePerGas").map_or(0, hex_u128);
            tips += hex_u128(&receipt["gasUsed"]) * (price - base_fee);
        }
        let rewards: Vec<&Value> = traces.iter().filter(|t| t["type"] == "reward").collect();
        let miner = block["miner"].as_str().expect("miner");
        if block["difficulty"] != "0x0" {
            let base = match number {
                0..=8 => 5 * ether,
                9..=11 => 3 * ether,
                _ => 2 * ether,
            };
            let uncles = block["uncles"].as_array().expect("uncles").len();
            assert_eq!(rewards.len(), 1 + uncles, "block {number}");
            assert_eq!(rewards[0]["action"]["author"], miner);
            assert_eq!(rewards[0]["action"]["rewardType"], "block");
            assert_eq!(
                hex_u128(&rewards[0]["action"]["value"]),
                base + base / 32 * uncles as u128,
                "block {number}"
            );
            for uncle in &rewards[1..] {
                assert_eq!(uncle["action"]["rewardType"], "uncle");
                // (8 + uncle number - block number) / 8 of the base, the uncle 1 to 6 back.
                let value = hex_u128(&uncle["action"]["value"]);
                assert!(
                    (1..=7).any(|eighths| value == base * eighths / 8),
                    "block {number}: {uncle}"
                );
            }
            for reward in &rewards {
                assert_eq!(reward["transactionHash"], Value::Null);
                assert_eq!(reward["blockNumber"], number);
            }
            // What the miner's balance gained over the block: its rewards and the tips.
            let to_miner: u128 = rewards
                .iter()
                .filter(|r| r["action"]["author"] == miner)
                .map(|r| hex_u128(&r["action"]["value"]))
                .sum();
            let balance = |n: u64| {
                hex_u128(&node.result("eth_getBalance", json!([miner, format!("{n:#x}")])))
            };
            assert_eq!(
                balance(number) - balance(number - 1),
                to_miner + tips,
                "block {number}"
            );
            expected.extend(rewards.iter().map(|r| (*r).clone()));
            rewarded += 1;
        } else {
            assert!(
                rewards.is_empty(),
                "block {number}: no reward after the merge"
            );
        }
        assert_eq!(traces, &expected, "block {number}");
    }
    rewarded
}

/// trace_filter is trace_block over a range, filtered by addresses and paged; trace_get picks
/// one entry of trace_transaction's list.
#[test]
fn filter_and_get_select_from_block_traces() {
    let node = Node::execution_apis(UNLIMITED);
    let mut all = Vec::new();
    for number in 1..=54u64 {
        let traces = node.result("trace_block", json!([format!("{number:#x}")]));
        all.extend(traces.as_array().expect("a list").iter().cloned());
    }
    let filter = |f: Value| node.result("trace_filter", json!([f]));
    assert_eq!(
        filter(json!({"fromBlock": "0x1", "toBlock": "0x36"})),
        json!(all)
    );
    assert_eq!(
        filter(json!({"fromBlock": "0x1", "toBlock": "0x36", "after": 3, "count": 2})),
        json!(all[3..5])
    );
    // From one sender: its calls and creations, no rewards.
    let sender = all
        .iter()
        .find(|t| t["type"] == "call")
        .map(|t| t["action"]["from"].clone())
        .expect("a call in the chain");
    let from_sender: Vec<&Value> = all
        .iter()
        .filter(|t| t["type"] != "reward" && t["action"]["from"] == sender)
        .collect();
    assert!(!from_sender.is_empty());
    assert_eq!(
        filter(json!({"fromBlock": "0x1", "toBlock": "0x36", "fromAddress": [sender]})),
        json!(from_sender)
    );
    // To a miner: its block rewards (a reward's author is its "to").
    let miner = all
        .iter()
        .find(|t| t["type"] == "reward")
        .map(|t| t["action"]["author"].clone())
        .expect("a reward in the chain");
    let got = filter(json!({"fromBlock": "0x1", "toBlock": "0x36", "toAddress": [miner]}));
    assert!(
        got.as_array()
            .expect("a list")
            .iter()
            .filter(|t| t["type"] == "reward")
            .all(|t| t["action"]["author"] == miner),
        "{got}"
    );
    let code = |f: Value| node.call("trace_filter", json!([f]))["error"]["code"].clone();
    assert_eq!(code(json!({"fromBlock": "0x5", "toBlock": "0x4"})), -32602);
    // Past the head is reth's "block not found", whichever end and whatever the order.
    let past = node.call(
        "trace_filter",
        json!([{"fromBlock": "0x1", "toBlock": "0x37"}]),
    );
    assert_eq!(past["error"]["code"], -32001, "{past}");
    assert_eq!(past["error"]["message"], "block not found: 0x37", "{past}");
    assert_eq!(code(json!({"fromBlock": "0x40"})), -32001);
    assert_eq!(code(json!({"fromBlock": "0x40", "toBlock": "0x3"})), -32001);

    check_trace_get(&node);
}

/// trace_get gives each entry of trace_transaction's list by its index, and nothing past the
/// list or for more than one index; returns the most traces one transaction had.
fn check_trace_get(node: &Node) -> usize {
    let head = hex_u128(&node.result("eth_blockNumber", json!([]))) as u64;
    let mut most = 0;
    for number in 1..=head {
        let block = node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), false]),
        );
        for hash in block["transactions"].as_array().expect("hashes") {
            let of_tx = node.result("trace_transaction", json!([hash]));
            let of_tx = of_tx.as_array().expect("a list");
            for (i, trace) in of_tx.iter().enumerate() {
                let index = format!("{i:#x}");
                assert_eq!(&node.result("trace_get", json!([hash, [index]])), trace);
            }
            let past = format!("{:#x}", of_tx.len());
            assert_eq!(node.result("trace_get", json!([hash, [past]])), Value::Null);
            assert_eq!(
                node.result("trace_get", json!([hash, ["0x0", "0x0"]])),
                Value::Null,
                "one index only"
            );
            most = most.max(of_tx.len());
        }
    }
    most
}

/// trace_rawTransaction runs a signed transaction on a block's state as that block would: the
/// first transaction of each block, sent raw on its parent, traces as its replay does; after it
/// is mined its nonce is spent.
#[test]
fn raw_transactions_trace_like_their_replays() {
    let node = Node::execution_apis(UNLIMITED);
    let mut checked = 0;
    for number in 1..=54u64 {
        let block = node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), false]),
        );
        let Some(hash) = block["transactions"].get(0) else {
            continue;
        };
        let raw = node.result("eth_getRawTransactionByHash", json!([hash]));
        let parent = format!("{:#x}", number - 1);
        let traced = node.call("trace_rawTransaction", json!([raw, ["trace"], parent]));
        if let Some(error) = traced.get("error") {
            // The parent's environment refuses what the block took: a type from the block's
            // fork, or a fee cap under the parent's (higher) base fee.
            assert!(
                error["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("not supported") || m.contains("base fee")),
                "{hash}: {error}"
            );
            continue;
        }
        let traced = &traced["result"];
        let replayed = node.result("trace_replayTransaction", json!([hash, ["trace"]]));
        assert_eq!(
            traced["trace"][0]["action"], replayed["trace"][0]["action"],
            "{hash}"
        );
        assert_eq!(
            traced["trace"][0].get("error"),
            replayed["trace"][0].get("error"),
            "{hash}"
        );
        let tx = node.result("eth_getTransactionByHash", json!([hash]));
        if tx["input"] == "0x" {
            assert_eq!(traced, &replayed, "{hash}: a transfer traces the same");
        }
        let spent = node.call(
            "trace_rawTransaction",
            json!([raw, ["trace"], format!("{number:#x}")]),
        );
        assert_eq!(spent["error"]["code"], -32000, "nonce too low: {spent}");
        checked += 1;
    }
    assert!(checked > 20, "{checked}");
    let bad = node.call("trace_rawTransaction", json!(["0x02f0", ["trace"]]));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}
