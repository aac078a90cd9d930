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

/// geth reads a missing or null `blockStateCalls` as empty and refuses it with -32602 "empty
/// input", no `data` (upstream eth_simulateV1/ethSimulate-empty-ethSimulate.io); -32602 for a
/// field that does not decode carries no `data` either, as geth answers.
#[test]
fn simulate_without_block_state_calls_is_empty_input() {
    let node = Node::execution_apis(&[]);
    for payload in [
        json!({}),
        json!({"blockStateCalls": null}),
        json!({"blockStateCalls": []}),
    ] {
        let r = node.call("eth_simulateV1", json!([payload, "latest"]));
        assert_eq!(
            r["error"],
            json!({"code": -32602, "message": "empty input"}),
            "{payload}: {r}"
        );
    }
    let r = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{"calls": [{"to": "0x12"}]}]}, "latest"]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r["error"].get("data").is_none(), "{r}");
}

/// The spec titles the override field `MovePrecompileToAddress`; geth matches field names
/// without regard to case and so moves (or refuses to move) under that spelling too
/// (upstream eth_simulateV1/ethSimulate-try-to-move-non-precompile.io).
#[test]
fn simulate_reads_move_precompile_under_the_specs_title() {
    let node = Node::execution_apis(&[]);
    let not_precompile = "0xc000000000000000000000000000000000000000";
    let r = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{"stateOverrides": {not_precompile: {
            "MovePrecompileToAddress": "0xc100000000000000000000000000000000000000"
        }}}]}, "latest"]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    // A precompile moves under that spelling too: its old address is left without code.
    let r = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{
            "stateOverrides": {"0x0000000000000000000000000000000000000002": {
                "MovePrecompileToAddress": "0x0000000000000000000000000000000000123456"
            }},
            "calls": [
                {"to": "0x0000000000000000000000000000000000123456", "input": "0x1234"},
                {"to": "0x0000000000000000000000000000000000000002", "input": "0x1234"}
            ]
        }]}, "latest"]),
    );
    let calls = &r["result"][0]["calls"];
    assert_eq!(
        calls[0]["returnData"],
        "0x3a103a4e5729ad68c02a678ae39accfbc0ae208096437401b7ceab63cca0622f",
        "sha256 at its new address: {r}"
    );
    assert_eq!(
        calls[1]["returnData"], "0x",
        "nothing left at the old one: {r}"
    );
}

/// A transaction type the block's fork lacks is refused with -32000, as geth does: before
/// Cancun `maxFeePerBlobGas` alone makes a blob transaction (eth_call, eth_estimateGas and
/// eth_createAccessList), and before Berlin eth_createAccessList, which always runs an
/// access-list transaction, has none to run (upstream *-fork-inactive*.io). Block 0x29 of the
/// execution-apis chain is before Cancun, 0x17 before Berlin.
#[test]
fn fork_inactive_transaction_types_are_refused() {
    let node = Node::execution_apis(&[]);
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let to = "0x0100000000000000000000000000000000000000";
    for method in ["eth_call", "eth_estimateGas", "eth_createAccessList"] {
        let r = node.call(
            method,
            json!([{"from": from, "maxFeePerBlobGas": "0x1", "to": to}, "0x29"]),
        );
        assert_eq!(r["error"]["code"], -32000, "{method}: {r}");
        let r = node.call(method, json!([{"from": from, "to": to}, "0x29"]));
        assert!(
            r.get("result").is_some(),
            "{method} without the blob fee: {r}"
        );
    }
    let r = node.call(
        "eth_createAccessList",
        json!([{"from": from, "to": to}, "0x17"]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let r = node.call("eth_call", json!([{"from": from, "to": to}, "0x17"]));
    assert_eq!(r["result"], "0x", "a plain call before Berlin runs: {r}");
}

/// eth_createAccessList reports the gas of the transaction carrying the list, also for a
/// legacy request (gasPrice only): the list's intrinsic cost is charged and its slots are
/// warm, as for a typed request (upstream eth_createAccessList/create-al-omitted-block.io).
#[test]
fn access_list_gas_is_the_same_for_legacy_and_typed_requests() {
    let node = Node::execution_apis(&[]);
    // A contract on this chain that reads two storage slots when called.
    let call = json!({
        "from": "0x0c2c51a0990aee1d73c1228de158688341557508",
        "to": "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df",
        "input": "0x010203040506",
        "gas": "0xea60",
    });
    let mut legacy = call.clone();
    legacy["gasPrice"] = json!("0x1a21397");
    let mut typed = call;
    typed["maxFeePerGas"] = json!("0x1a21397");
    typed["maxPriorityFeePerGas"] = json!("0x0");
    let legacy = node.call("eth_createAccessList", json!([legacy, "latest"]));
    let typed = node.call("eth_createAccessList", json!([typed, "latest"]));
    let keys = legacy["result"]["accessList"][0]["storageKeys"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(keys, 2, "the call reads two slots: {legacy}");
    assert_eq!(legacy["result"], typed["result"], "{legacy} / {typed}");
}

/// eth_getHeaderByNumber / eth_getHeaderByHash answer the block's header: the block object
/// without its body (size, transactions, uncles, withdrawals), null when unknown (upstream
/// eth_getHeaderByNumber/*.io, eth_getHeaderByHash/*.io).
#[test]
fn headers_are_blocks_without_their_bodies() {
    let node = Node::execution_apis(&[]);
    for block in ["0x0", "0x1b", "0x2a", "latest", "finalized"] {
        let mut want = node.call("eth_getBlockByNumber", json!([block, false]))["result"].clone();
        let fields = want.as_object_mut().expect("a block");
        for body in ["size", "transactions", "uncles", "withdrawals"] {
            fields.remove(body);
        }
        let by_number = node.call("eth_getHeaderByNumber", json!([block]));
        assert_eq!(by_number["result"], want, "{block}");
        let by_hash = node.call("eth_getHeaderByHash", json!([want["hash"]]));
        assert_eq!(by_hash["result"], want, "{block} by hash");
    }
    let r = node.call("eth_getHeaderByNumber", json!(["0x3e8"]));
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 1, "result": null}));
    let r = node.call(
        "eth_getHeaderByHash",
        json!([format!("0x{}", "00".repeat(32))]),
    );
    assert_eq!(r["result"], serde_json::Value::Null, "{r}");
}

/// eth_getRawTransactionByHash answers a transaction's EIP-2718 bytes, the same as
/// debug_getRawTransaction, and null for an unknown hash (upstream
/// eth_getRawTransactionByHash/*.io).
#[test]
fn raw_transaction_by_hash_is_the_transactions_bytes() {
    let node = Node::execution_apis(&[]);
    let block = node.call("eth_getBlockByNumber", json!(["0x2", false]));
    let hash = block["result"]["transactions"][0].clone();
    assert!(hash.is_string(), "block 2 has transactions: {block}");
    let raw = node.call("eth_getRawTransactionByHash", json!([hash]));
    let debug = node.call("debug_getRawTransaction", json!([hash]));
    assert!(raw["result"].as_str().is_some_and(|r| r.len() > 2), "{raw}");
    assert_eq!(raw["result"], debug["result"]);
    for unknown in [
        format!("0x{}", "00".repeat(32)),
        format!("0x{}deadbeef", "00".repeat(28)),
    ] {
        let r = node.call("eth_getRawTransactionByHash", json!([unknown]));
        assert_eq!(r["result"], serde_json::Value::Null, "{r}");
        assert!(r.get("error").is_none(), "{r}");
    }
}

/// geth's tip oracle: no transaction on this chain tips 2 wei or more, so every sampled block counts as
/// geth's default of 0.001 gwei (upstream eth_maxPriorityFeePerGas/get-current-tip.io); eth_gasPrice is
/// that tip on top of the head's base fee.
#[test]
fn the_suggested_tip_falls_back_to_geths_default_when_blocks_tip_only_dust() {
    let node = Node::execution_apis(&[]);
    let r = node.call("eth_maxPriorityFeePerGas", json!([]));
    assert_eq!(r["result"], "0xf4240", "{r}");
    let head = node.call("eth_getBlockByNumber", json!(["latest", false]));
    let base = u64::from_str_radix(
        head["result"]["baseFeePerGas"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let r = node.call("eth_gasPrice", json!([]));
    assert_eq!(r["result"], format!("{:#x}", base + 1_000_000), "{r}");
}

/// EIP-7928 access lists start at Amsterdam: an existing block of this Osaka chain is refused with 4445
/// (upstream eth_getBlockAccessList/get-access-list-pre-amsterdam.io), an unknown one is null.
#[test]
fn block_access_lists_do_not_exist_before_amsterdam() {
    let node = Node::execution_apis(&[]);
    let head = node.call("eth_getBlockByNumber", json!(["latest", false]));
    let hash = head["result"]["hash"].clone();
    for block in [hash, json!("latest"), json!("0x1"), json!("earliest")] {
        let r = node.call("eth_getBlockAccessList", json!([block]));
        assert_eq!(r["error"]["code"], 4445, "{block}: {r}");
    }
    for block in [json!(format!("0x{}", "00".repeat(32))), json!("0x1000")] {
        let r = node.call("eth_getBlockAccessList", json!([block]));
        assert_eq!(r["result"], serde_json::Value::Null, "{block}: {r}");
    }
}

/// A params array longer than a method takes is refused as geth does (-32602 "too many arguments, want at
/// most N") instead of the extra argument being silently dropped: every served method, from its module's
/// table, in a batch too. Exactly N arguments pass the check (whatever the method then makes of nulls).
#[test]
fn extra_positional_params_are_refused_by_every_method() {
    let node = Node::execution_apis(&[]);
    let mut tables = simnode::rpc::modules::MODULE_METHOD_PARAMS.to_vec();
    tables.push(simnode::sync::testing::METHOD_PARAMS);
    for (method, max) in tables.iter().flat_map(|t| t.iter()) {
        let too_many = vec![serde_json::Value::Null; max + 1];
        let r = node.call(method, json!(too_many));
        assert_eq!(
            r["error"],
            json!({"code": -32602, "message": format!("too many arguments, want at most {max}")}),
            "{method}: {r}"
        );
        let enough = vec![serde_json::Value::Null; *max];
        let r = node.call(method, json!(enough));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.contains("too many arguments"), "{method}: {r}");
    }
    // The old behaviour this replaces: block overrides to a method that had none were dropped.
    let r = node.call(
        "eth_getBalance",
        json!(["0x0c2c51a0990aee1d73c1228de158688341557508", "latest", {"number": "0x1"}]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, text) = node.rpc_raw(
        &json!([
            {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": [1]},
            {"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "params": []},
        ])
        .to_string(),
    );
    let batch: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(batch[0]["error"]["code"], -32602, "{batch}");
    assert!(batch[1]["result"].is_string(), "{batch}");
}

/// Params that are neither an array nor an object are refused as geth does (-32602 "non-array
/// args"), by methods that take no arguments too, which would otherwise ignore them.
#[test]
fn params_that_are_not_an_array_are_refused() {
    let node = Node::execution_apis(&[]);
    for method in ["eth_blockNumber", "eth_chainId", "eth_getBalance"] {
        for params in [json!("x"), json!(5), json!(true)] {
            let r = node.call(method, params.clone());
            assert_eq!(
                r["error"],
                json!({"code": -32602, "message": "non-array args"}),
                "{method} {params}: {r}"
            );
        }
    }
    for params in [json!([]), serde_json::Value::Null] {
        let r = node.call("eth_blockNumber", params.clone());
        assert!(r["result"].is_string(), "{params}: {r}");
    }
}

/// debug_executionWitness (upstream debug_executionWitness/*.io, recorded from geth on this chain): for
/// every block, the witness holds the parent's state root node, the parent-state proof of each
/// transaction's sender and recipient, the code of each called contract, and the parent header first;
/// pending, genesis and unknown blocks are refused with -32000 as geth does.
#[test]
fn execution_witness_holds_what_re_executing_the_block_reads() {
    use alloy::primitives::{keccak256, Bytes};
    use std::collections::BTreeSet;

    // Several calls per block: no per-key rate limit.
    let node = Node::execution_apis(&["--rpc.rate-limit", "0"]);
    for block in [
        json!("pending"),
        json!("0x0"),
        json!("0xfffffffff"),
        json!(format!("0x{}", "11".repeat(32))),
    ] {
        let r = node.call("debug_executionWitness", json!([block]));
        assert_eq!(r["error"]["code"], -32000, "{block}: {r}");
    }
    let head = node.result("eth_blockNumber", json!([]));
    let head = u64::from_str_radix(head.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let bytes = |v: &serde_json::Value| -> Bytes { v.as_str().unwrap().parse().unwrap() };
    let mut checked_accounts = 0;
    for number in 1..=head {
        let block = node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), true]),
        );
        let by_hash = node.result("debug_executionWitness", json!([block["hash"]]));
        let witness = node.result("debug_executionWitness", json!([format!("{number:#x}")]));
        assert_eq!(by_hash, witness, "block {number}");
        let state: BTreeSet<Bytes> = witness["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(bytes)
            .collect();
        let codes: BTreeSet<Bytes> = witness["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(bytes)
            .collect();
        let sorted: Vec<Bytes> = witness["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(bytes)
            .collect();
        assert!(
            sorted.windows(2).all(|w| w[0] < w[1]),
            "block {number}: state sorted, no repeats"
        );

        let parent = format!("{:#x}", number - 1);
        let raw_parent = node.result("debug_getRawHeader", json!([parent]));
        assert_eq!(witness["headers"][0], raw_parent, "block {number}");
        let parent_block = node.result("eth_getBlockByNumber", json!([parent, false]));
        let parent_root: alloy::primitives::B256 =
            parent_block["stateRoot"].as_str().unwrap().parse().unwrap();
        assert!(
            state.iter().any(|n| keccak256(n) == parent_root),
            "block {number}: the parent's state root node"
        );
        for tx in block["transactions"].as_array().unwrap() {
            for who in [&tx["from"], &tx["to"]] {
                if who.is_null() {
                    continue;
                }
                let proof = node.result("eth_getProof", json!([who, [], parent]));
                for node_rlp in proof["accountProof"].as_array().unwrap().iter().map(bytes) {
                    if node_rlp.len() >= 32 {
                        assert!(state.contains(&node_rlp), "block {number}: proof of {who}");
                    }
                }
                checked_accounts += 1;
                let code = bytes(&node.result("eth_getCode", json!([who, parent])));
                if !code.is_empty() && who == &tx["to"] {
                    assert!(codes.contains(&code), "block {number}: code of {who}");
                }
            }
        }
    }
    assert!(
        checked_accounts > 20,
        "the chain's transactions were checked"
    );
}

/// eth_estimateGas searches as geth does (optimistic first guess with the call stipend, low-skewed
/// bisection, stop within 1.5%), so both give the same estimate; geth's answers on this chain, from
/// upstream eth_estimateGas/estimate-eip7623-*.io and estimate-floor-calldata-cost-dominates.io.
#[test]
fn gas_estimates_are_geths_to_the_unit() {
    let node = Node::execution_apis(&[]);
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let to = "0x0100000000000000000000000000000000000000";
    let auth = json!([{
        "address": "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "chainId": "0x1", "nonce": "0x0",
        "r": format!("0x{}", "11".repeat(32)), "s": format!("0x{}", "22".repeat(32)), "yParity": "0x0"
    }]);
    let zeros = format!("0x{}", "00".repeat(32));
    let ones = format!("0x{}", "ff".repeat(1024));
    for (request, expected) in [
        (json!({"from": from, "to": to, "value": "0x1"}), "0x5208"),
        (
            json!({"from": from, "to": to, "value": "0x1", "input": zeros}),
            "0x53ee",
        ),
        (
            json!({"from": from, "to": to, "value": "0x1", "input": zeros, "type": "0x4", "authorizationList": auth}),
            "0xb5ae",
        ),
        (
            json!({"from": from, "to": to, "value": "0x1", "type": "0x4", "authorizationList": auth}),
            "0xb52e",
        ),
        (
            json!({"from": from, "to": to, "value": "0x1", "input": ones}),
            "0xf545",
        ),
    ] {
        let r = node.call("eth_estimateGas", json!([request]));
        assert_eq!(r["result"], expected, "{request}: {r}");
    }
    // A transfer to an account without code that 21000 gas cannot pay for (an access list's
    // 2400 + 1900 more) goes on to geth's search: at least the 25300 it needs, within 1.5%.
    let listed = json!([{"address": to, "storageKeys": [zeros]}]);
    let r = node.call(
        "eth_estimateGas",
        json!([{"from": from, "to": to, "value": "0x1", "accessList": listed}]),
    );
    let estimate = u64::from_str_radix(
        r["result"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap_or_default();
    assert!((25_300..=25_300 * 1015 / 1000).contains(&estimate), "{r}");
}

/// eth_createAccessList leaves the sender, the recipient and precompiles out, as geth does,
/// unless the request lists slots of theirs: those stay (and are paid for).
#[test]
fn access_lists_keep_the_slots_a_request_gives_for_the_recipient() {
    let node = Node::execution_apis(&[]);
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let to = "0x0100000000000000000000000000000000000000";
    let zeros = format!("0x{}", "00".repeat(32));
    let create = |listed: serde_json::Value| {
        node.result(
            "eth_createAccessList",
            json!([{"from": from, "to": to, "value": "0x1", "accessList": listed}]),
        )
    };
    let with_slot = create(json!([{"address": to, "storageKeys": [zeros]}]));
    assert_eq!(
        with_slot,
        json!({"accessList": [{"address": to, "storageKeys": [zeros]}], "gasUsed": "0x62d4"})
    );
    let without = create(json!([{"address": to, "storageKeys": []}]));
    assert_eq!(without, json!({"accessList": [], "gasUsed": "0x5208"}));
}

/// debug_traceCall (upstream debug_traceCall/*.io): a mined transaction sent again as a call, on its
/// block with `txIndex` at its position, traces exactly as debug_traceTransaction traces it, with the
/// call tracer and the struct logger; overrides apply; an unknown block is -32000 as geth answers.
#[test]
fn trace_call_at_a_transactions_position_traces_like_the_transaction() {
    let node = Node::execution_apis(&["--rpc.rate-limit", "0"]);
    let head = node.result("eth_blockNumber", json!([]));
    let head = u64::from_str_radix(head.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let mut traced = 0;
    for number in 1..=head {
        let block = node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), true]),
        );
        for (index, tx) in block["transactions"].as_array().unwrap().iter().enumerate() {
            let mut call = serde_json::Map::new();
            for key in [
                "from",
                "to",
                "gas",
                "gasPrice",
                "maxFeePerGas",
                "maxPriorityFeePerGas",
                "value",
                "input",
                "nonce",
                "accessList",
                "authorizationList",
                "blobVersionedHashes",
                "maxFeePerBlobGas",
                "chainId",
                "type",
            ] {
                if let Some(v) = tx.get(key).filter(|v| !v.is_null()) {
                    call.insert(key.into(), v.clone());
                }
            }
            if call.contains_key("maxFeePerGas") {
                call.remove("gasPrice");
            }
            for tracer in [json!({"tracer": "callTracer"}), json!({})] {
                let expected = node.call("debug_traceTransaction", json!([tx["hash"], tracer]));
                let mut opts = tracer.clone();
                opts["txIndex"] = json!(format!("{index:#x}"));
                let got = node.call("debug_traceCall", json!([call, block["hash"], opts]));
                assert_eq!(
                    got["result"], expected["result"],
                    "block {number} tx {index} {tracer}: {got}"
                );
                assert!(got["result"].is_object(), "{got}");
            }
            traced += 1;
        }
    }
    assert!(traced > 20, "the chain's transactions were traced");

    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let echo = "0x00000000000000000000000000000000000000c0";
    // PUSH2 0xffee PUSH1 0 MSTORE PUSH1 2 PUSH1 30 RETURN, put there by a state override.
    let code = "0x61ffee6000526002601ef3";
    let r = node.call(
        "debug_traceCall",
        json!([{"from": from, "to": echo, "gas": "0x100000"}, null,
               {"tracer": "callTracer", "stateOverrides": {echo: {"code": code}}}]),
    );
    assert_eq!(r["result"]["output"], "0xffee", "{r}");
    assert_eq!(r["result"]["type"], "CALL", "{r}");
    let r = node.call("debug_traceCall", json!([{"from": from, "to": echo}]));
    assert_eq!(
        r["result"]["failed"], false,
        "omitted block is latest, default tracer: {r}"
    );
    let r = node.call(
        "debug_traceCall",
        json!([{"from": from, "to": echo}, "0xfffffffff", {"tracer": "callTracer"}]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let r = node.call(
        "debug_traceCall",
        json!([{"from": from, "to": echo}, "0x1", {"txIndex": "0x5"}]),
    );
    assert_eq!(
        r["error"]["code"], -32000,
        "a position past the block's transactions: {r}"
    );
    let block1 = node.result("eth_getBlockByNumber", json!(["0x1", false]));
    assert_eq!(
        r["error"]["message"],
        format!(
            "transaction index 5 out of range for block {}",
            block1["hash"].as_str().unwrap()
        ),
        "geth's words"
    );
    let r = node.call(
        "debug_traceCall",
        json!([{"from": from, "to": echo}, "0x0", {"txIndex": "0x0"}]),
    );
    assert_eq!(r["error"]["message"], "no transaction in genesis", "{r}");
}

/// geth's callTracer numbers each log (`index`) by its place among the block's logs, as the
/// receipt's `logIndex` (upstream debug_traceTransaction/calltracer-with-log-index.io, recorded
/// on a later chain). Every log of every transaction of this chain, traced by block and alone,
/// sorted by `index`, is its receipt's log with the same number.
#[test]
fn call_tracer_logs_carry_their_block_log_index() {
    // Three traces per transaction with logs: past the default per-key rate.
    let node = Node::execution_apis(&["--rpc.rate-limit", "0"]);
    fn trace_logs(frame: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
        if let Some(logs) = frame["logs"].as_array() {
            out.extend(logs.iter().cloned());
        }
        if let Some(calls) = frame["calls"].as_array() {
            for call in calls {
                trace_logs(call, out);
            }
        }
    }
    let sorted = |frame: &serde_json::Value| {
        let mut logs = Vec::new();
        trace_logs(frame, &mut logs);
        logs.sort_by_key(|l| {
            l["index"]
                .as_str()
                .and_then(|i| u64::from_str_radix(i.trim_start_matches("0x"), 16).ok())
        });
        logs.into_iter()
            .map(|l| {
                (
                    l["address"].clone(),
                    l["topics"].clone(),
                    l["data"].clone(),
                    l["index"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let with_log = json!({"tracer": "callTracer", "tracerConfig": {"withLog": true}});
    let mut checked = 0;
    for number in 1..=54u64 {
        let block = format!("{number:#x}");
        let receipts = node.call("eth_getBlockReceipts", json!([block]));
        let receipts = receipts["result"].as_array().cloned().unwrap_or_default();
        if !receipts
            .iter()
            .any(|r| !r["logs"].as_array().unwrap().is_empty())
        {
            continue;
        }
        let traces = node.call("debug_traceBlockByNumber", json!([block, with_log]));
        let traces = traces["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{traces}"))
            .clone();
        assert_eq!(traces.len(), receipts.len());
        for (receipt, traced) in receipts.iter().zip(&traces) {
            let expected: Vec<_> = receipt["logs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| {
                    (
                        l["address"].clone(),
                        l["topics"].clone(),
                        l["data"].clone(),
                        l["logIndex"].clone(),
                    )
                })
                .collect();
            assert_eq!(sorted(&traced["result"]), expected, "block {number}");
            if !expected.is_empty() {
                let alone = node.call(
                    "debug_traceTransaction",
                    json!([receipt["transactionHash"], with_log]),
                );
                assert_eq!(sorted(&alone["result"]), expected, "block {number} alone");
                // With onlyTopCall the top frame's logs keep their numbers, whatever nested
                // logs before them go unreported.
                let top = node.call(
                    "debug_traceTransaction",
                    json!([receipt["transactionHash"], {"tracer": "callTracer",
                        "tracerConfig": {"withLog": true, "onlyTopCall": true}}]),
                );
                assert_eq!(
                    top["result"]["logs"], alone["result"]["logs"],
                    "block {number} top"
                );
                checked += expected.len();
            }
        }
    }
    assert!(checked > 10, "the chain has logs to check ({checked})");
}

/// eth_call's fee checks are geth's: a call that names a price is checked against the base fee
/// (a gas price too, not only a fee cap), a tip above the cap is refused first, and the balance
/// must cover gas times the fee cap, not the effective price. Blob and set-code calls without a
/// recipient are refused before they run (geth's pre-checks), where they ran as creations.
#[test]
fn eth_call_checks_fees_as_geth_does() {
    let node = Node::execution_apis(&[]);
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let base_fee = u128::from_str_radix(
        head["baseFeePerGas"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let payer = "0x00000000000000000000000000000000000b0b0b";
    let to = "0x00000000000000000000000000000000000c0c0c";
    let hex = |v: u128| format!("{v:#x}");
    let call = |fields: serde_json::Value, balance: u128| {
        let mut request = json!({"from": payer, "to": to, "gas": "0x5208"});
        for (k, v) in fields.as_object().unwrap() {
            request[k] = v.clone();
        }
        node.call(
            "eth_call",
            json!([request, "latest", {payer: {"balance": hex(balance)}}]),
        )
    };
    let rich = 10u128.pow(24);
    let error = |r: &serde_json::Value| {
        (
            r["error"]["code"].clone(),
            r["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };

    let (code, message) = error(&call(json!({"gasPrice": "0x1"}), rich));
    assert_eq!(code, -32000);
    assert!(
        message.contains("max fee per gas less than block base fee"),
        "{message}"
    );
    let (code, message) = error(&call(
        json!({"maxFeePerGas": hex(base_fee * 2), "maxPriorityFeePerGas": hex(base_fee * 3)}),
        rich,
    ));
    assert_eq!(code, -32000);
    assert!(
        message.contains("max priority fee per gas higher than max fee per gas"),
        "{message}"
    );

    // Enough for 21000 gas at the base fee, not at a fee cap ten times it.
    let exact = 21_000 * base_fee;
    let (code, message) = error(&call(json!({"maxFeePerGas": hex(base_fee * 10)}), exact));
    assert_eq!(code, -32000);
    assert!(message.contains("insufficient funds"), "{message}");
    let r = call(json!({"maxFeePerGas": hex(base_fee)}), exact);
    assert_eq!(r["result"], "0x", "{r}");
    let r = call(json!({"gasPrice": hex(base_fee)}), exact);
    assert_eq!(r["result"], "0x", "{r}");
    // A call naming no fee pays nothing and is not checked against the base fee.
    let r = call(json!({}), 0);
    assert_eq!(r["result"], "0x", "{r}");

    let blob_hash = format!("0x01{}", "00".repeat(31));
    for (fields, words) in [
        (
            json!({"blobVersionedHashes": [blob_hash], "maxFeePerBlobGas": "0x10"}),
            "blob transaction of type create",
        ),
        (
            json!({"authorizationList": [{"chainId": "0x0", "address": to, "nonce": "0x0",
                                          "yParity": "0x0", "r": "0x1", "s": "0x1"}]}),
            "set code transaction must not be a create transaction",
        ),
    ] {
        let mut request = json!({"from": payer});
        for (k, v) in fields.as_object().unwrap() {
            request[k] = v.clone();
        }
        let r = node.call("eth_call", json!([request, "latest"]));
        assert_eq!(r["error"]["code"], -32000, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(words),
            "{r}"
        );
    }
}

/// From Osaka an estimate stays within EIP-7825's per-transaction cap (2^24 gas): a call that
/// needs more cannot be sent, so it gets geth's "gas required exceeds allowance (16777216)".
#[test]
fn estimates_stay_within_the_osaka_transaction_gas_cap() {
    let node = Node::execution_apis(&[]);
    // Counts down from 800,000: about 21M gas.
    let burner = "0x00000000000000000000000000000000000d0d0d";
    let overrides = json!({burner: {"code": "0x620c35005b600190038060045700"}});
    let r = node.call(
        "eth_estimateGas",
        json!([{"to": burner}, "latest", overrides]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("gas required exceeds allowance (16777216)"),
        "{r}"
    );
    // One that fits is estimated as before.
    let small = json!({burner: {"code": "0x6203e8005b600190038060045700"}});
    let r = node.call("eth_estimateGas", json!([{"to": burner}, "latest", small]));
    assert!(r["result"].is_string(), "{r}");
}

/// Topic positions count as geth counts them: a log with fewer topics than the filter names
/// positions (wildcards included) does not match, in eth_getLogs and in filters alike.
#[test]
fn log_filters_need_as_many_topics_as_positions_given() {
    let node = Node::execution_apis(&[]);
    let all = node.result(
        "eth_getLogs",
        json!([{"fromBlock": "0x0", "toBlock": "latest"}]),
    );
    let all = all.as_array().expect("logs");
    let with_at_least = |n: usize| {
        all.iter()
            .filter(|l| l["topics"].as_array().unwrap().len() >= n)
            .count()
    };
    assert!(
        with_at_least(0) > with_at_least(1),
        "some logs without topics are needed"
    );
    for positions in 0..=4 {
        let topics = vec![serde_json::Value::Null; positions];
        let filter = json!({"fromBlock": "0x0", "toBlock": "latest", "topics": topics});
        let logs = node.result("eth_getLogs", json!([filter.clone()]));
        assert_eq!(
            logs.as_array().unwrap().len(),
            with_at_least(positions),
            "{positions} wildcard positions"
        );
        let id = node.result("eth_newFilter", json!([filter]));
        let logs = node.result("eth_getFilterLogs", json!([id]));
        assert_eq!(logs.as_array().unwrap().len(), with_at_least(positions));
    }
    // geth's limits: four topic positions and 1,000 alternatives in one, refused while the
    // criteria decode (-32602); 1,000 addresses, -32000 past them.
    let one = "0x0000000000000000000000000000000000000000000000000000000000000001";
    let too_many = [
        (json!({"topics": [null, null, null, null, null]}), -32602),
        (json!({"topics": [vec![one; 1001]]}), -32602),
        (
            json!({"address": vec!["0x0000000000000000000000000000000000000001"; 1001]}),
            -32000,
        ),
    ];
    for (filter, code) in too_many {
        for method in ["eth_getLogs", "eth_newFilter"] {
            let r = node.call(method, json!([filter]));
            assert_eq!(r["error"]["code"], code, "{method}: {r}");
        }
    }
    let at_the_limit = json!({"topics": [vec![one; 1000]], "address": vec![
        "0x0000000000000000000000000000000000000001"; 1000]});
    assert!(node.call("eth_getLogs", json!([at_the_limit]))["result"].is_array());
}

/// eth_getLogs block ranges as geth refuses them: a start past the head with the head as
/// the end is a range in the wrong order, an end past the head extends beyond it, and the
/// pending block has no logs to give.
#[test]
fn log_ranges_refused_in_geths_words() {
    let node = Node::execution_apis(&[]);
    let head = node.result("eth_blockNumber", json!([]));
    let head = u64::from_str_radix(head.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let past = format!("{:#x}", head + 2);
    let cases = [
        (json!({"fromBlock": past}), "invalid block range params"),
        (
            json!({"fromBlock": past, "toBlock": "latest"}),
            "invalid block range params",
        ),
        (
            json!({"fromBlock": "0x2", "toBlock": "0x1"}),
            "invalid block range params",
        ),
        (
            json!({"fromBlock": past, "toBlock": format!("{:#x}", head + 4)}),
            "block range extends beyond current head block",
        ),
        (
            json!({"fromBlock": "pending"}),
            "pending logs are not supported",
        ),
        (
            json!({"fromBlock": "0x1", "toBlock": "pending"}),
            "pending logs are not supported",
        ),
    ];
    for (filter, message) in cases {
        let r = node.call("eth_getLogs", json!([filter]));
        assert_eq!(r["error"]["code"], -32602, "{filter}: {r}");
        assert_eq!(r["error"]["message"], message, "{filter}: {r}");
    }
    let from_head = json!({"fromBlock": format!("{head:#x}"), "toBlock": "latest"});
    assert!(node.call("eth_getLogs", json!([from_head]))["result"].is_array());
}

/// eth_call and its kin take `movePrecompileToAddress` as geth does (eth_simulateV1 did
/// already): the identity precompile moved to another address answers there, the old address
/// has no precompile left, and an override of a precompile's address runs its code. Methods
/// that cannot apply a move refuse it rather than run without it.
/// A call runs no system calls: a beacon-root block override is refused, as geth refuses it.
#[test]
fn calls_refuse_a_beacon_root_override() {
    let node = Node::execution_apis(&[]);
    let to = "0x0100000000000000000000000000000000000000";
    let root = format!("0x{}", "11".repeat(32));
    for method in ["eth_call", "eth_estimateGas"] {
        let r = node.call(
            method,
            json!([{"to": to}, "latest", null, {"beaconRoot": root}]),
        );
        assert_eq!(r["error"]["code"], -32000, "{method}: {r}");
        assert_eq!(
            r["error"]["message"],
            "block override \"beaconRoot\" is not supported for this RPC method"
        );
    }
    let r = node.call(
        "eth_call",
        json!([{"to": to}, "latest", null, {"time": "0x1000"}]),
    );
    assert_eq!(r["result"], "0x", "{r}");
}

#[test]
fn calls_take_precompile_moves() {
    let node = Node::execution_apis(&[]);
    let identity = "0x0000000000000000000000000000000000000004";
    let moved_to = "0x0000000000000000000000000000000000001234";
    let moved = json!({identity: {"movePrecompileToAddress": moved_to}});
    let call = |to: &str, overrides: &serde_json::Value| {
        node.call(
            "eth_call",
            json!([{"to": to, "input": "0xdeadbeef"}, "latest", overrides]),
        )
    };
    assert_eq!(call(moved_to, &json!({}))["result"], "0x");
    assert_eq!(call(moved_to, &moved)["result"], "0xdeadbeef");
    assert_eq!(call(identity, &moved)["result"], "0x");
    assert_eq!(call(identity, &json!({}))["result"], "0xdeadbeef");
    // Code on a precompile's address runs instead of it: returns the word 42.
    let code = json!({identity: {"code": "0x602a60005260206000f3"}});
    assert_eq!(call(identity, &code)["result"], format!("0x{:064x}", 42),);
    let not_precompile = json!({moved_to: {"movePrecompileToAddress": identity}});
    let r = call(identity, &not_precompile);
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not a precompile"),
        "{r}"
    );

    let r = node.call(
        "eth_estimateGas",
        json!([{"to": moved_to, "input": "0xdeadbeef"}, "latest", moved]),
    );
    assert!(r["result"].is_string(), "{r}");
    let r = node.call(
        "debug_traceCall",
        json!([{"to": moved_to, "input": "0xdeadbeef"}, "latest",
               {"tracer": "callTracer", "stateOverrides": moved}]),
    );
    assert_eq!(r["result"]["output"], "0xdeadbeef", "{r}");

    let r = node.call(
        "trace_call",
        json!([{"to": moved_to, "input": "0xdeadbeef"}, ["trace"], "latest", moved]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = node.call(
        "eth_callMany",
        json!([[{"transactions": [{"to": moved_to, "input": "0xdeadbeef"}]}], {}, moved]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// A legacy transaction signed without a chain id can be replayed on any chain: refused over
/// RPC as geth refuses it, unless the node is started with `--rpc.allow-unprotected-txs` (a
/// dev node takes it always; `tests/dev_chain.rs`).
#[test]
fn unprotected_transactions_need_the_flag() {
    let raw = support::unprotected_transfer_from_dev_key(0, 100_000_000_000);
    let node = Node::execution_apis(&[]);
    let r = node.call("eth_sendRawTransaction", json!([raw]));
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only replay-protected (EIP-155) transactions"),
        "{r}"
    );
    drop(node);
    let node = Node::execution_apis(&["--rpc.allow-unprotected-txs"]);
    let r = node.call("eth_sendRawTransaction", json!([raw]));
    // Past that check: the key's account has nothing on this chain.
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("replay-protected"), "{r}");
    assert!(message.contains("insufficient funds"), "{r}");
}

/// The struct logger's step errors read as geth's (and as the callTracer's), not as revm's
/// enum names (`Some(InvalidJump)`), and sit where geth's logger puts them: on a step that
/// fails a check made before it runs (the stack, the gas). A step that fails while it runs (a
/// bad jump, INVALID) reaches geth's tracers as a fault, which the struct logger leaves out.
#[test]
fn struct_log_errors_read_as_geths() {
    let node = Node::execution_apis(&[]);
    let at = "0x00000000000000000000000000000000000e0e0e";
    for (code, words) in [
        ("0x600056", serde_json::Value::Null),
        ("0x01", json!("stack underflow (0 <=> 2)")),
        // JUMPDEST PUSH1 0 JUMP: an endless loop.
        ("0x5b600056", json!("out of gas")),
        ("0xfe", serde_json::Value::Null),
    ] {
        let r = node.call(
            "debug_traceCall",
            json!([{"to": at, "gas": "0x10000"}, "latest",
                   {"stateOverrides": {at: {"code": code}}}]),
        );
        let logs = r["result"]["structLogs"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"));
        let last = logs.last().expect("a step");
        assert_eq!(last["error"], words, "{code}: {last}");
    }
    let r = node.call(
        "debug_traceCall",
        json!([{"to": at, "gas": "0x5300"}, "latest",
               {"stateOverrides": {at: {"code": "0x5b600056"}}}]),
    );
    let logs = r["result"]["structLogs"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        logs.iter()
            .all(|l| !l["error"].as_str().unwrap_or_default().starts_with("Some(")),
        "{r}"
    );
}

/// A call naming another chain's id is refused before it runs, in geth's words, by every
/// method that runs one.
#[test]
fn calls_for_another_chain_are_refused() {
    let node = Node::execution_apis(&[]);
    let call = json!({"to": "0x0000000000000000000000000000000000000001", "chainId": "0x1"});
    for method in ["eth_call", "eth_estimateGas", "eth_createAccessList"] {
        let r = node.call(method, json!([call, "latest"]));
        assert_eq!(r["error"]["code"], -32000, "{method}: {r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("chainId does not match node's (have=1, want="),
            "{method}: {r}"
        );
    }
}

/// A block override numbering the call's block before London brings that block's rules back,
/// as geth's (its forks by time need London by number): PUSH0 is then no instruction.
#[test]
fn a_block_number_override_before_london_runs_its_rules() {
    let node = Node::execution_apis(&[]);
    let push0 = "0x0000000000000000000000000000000000005f5f";
    let state = json!({push0: {"code": "0x5f5ff3"}});
    let call = json!({"to": push0});
    let r = node.call("eth_call", json!([call, "latest", state]));
    assert_eq!(r["result"], "0x", "{r}");
    let r = node.call(
        "eth_call",
        json!([call, "latest", state, {"number": "0x1a"}]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert_eq!(r["error"]["message"], "invalid opcode: PUSH0", "{r}");
}

/// eth_getStorageAt reads its key as geth does: hex digits only, and only once the block's
/// state is found.
#[test]
fn storage_keys_are_hex_digits_read_after_the_block() {
    let node = Node::execution_apis(&[]);
    let account = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";
    for key in ["0x+0", "+0", "0x00+0"] {
        let r = node.call("eth_getStorageAt", json!([account, key, "latest"]));
        assert_eq!(r["error"]["code"], -32602, "{key}: {r}");
    }
    let r = node.call("eth_getStorageAt", json!([account, "0xzz", "0x100"]));
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let r = node.call("eth_getStorageAt", json!([account, "0x0", "latest"]));
    assert!(r["result"].is_string(), "{r}");
}

/// Simulated blocks past the merge and before Shanghai are assembled as geth's beacon engine
/// assembles them: with an empty withdrawal list, so with the empty withdrawals root.
#[test]
fn simulated_blocks_between_the_merge_and_shanghai_have_the_empty_withdrawals_root() {
    let node = Node::execution_apis(&[]);
    // Block 0x24 (36) is past the merge; Shanghai starts at block 39 (time 390).
    let blocks = node.result(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{}, {}]}, "0x24"]),
    );
    for block in blocks.as_array().expect("blocks") {
        assert_eq!(
            block["withdrawalsRoot"],
            "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421",
            "{block}"
        );
        assert_eq!(block["withdrawals"], json!([]), "{block}");
    }
    // A list that is not empty is still refused there.
    let withdrawal = json!({"index": "0x0", "validatorIndex": "0x0",
        "address": "0x0000000000000000000000000000000000000aaa", "amount": "0x1"});
    let r = node.call(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{"blockOverrides": {"withdrawals": [withdrawal]}}]}, "0x24"]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
}

/// eth_simulateV1 takes any code an override gives, as geth: code that begins like an EIP-7702
/// designator but is none runs as plain code and halts on its 0xef.
#[test]
fn simulated_code_that_is_no_designator_runs_as_plain_code() {
    let node = Node::execution_apis(&[]);
    let target = "0x00000000000000000000000000000000000000c0";
    let blocks = node.result(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{
            "stateOverrides": {target: {"code": "0xef0100aa"}},
            "calls": [{"to": target}],
        }]}, "latest"]),
    );
    let call = &blocks[0]["calls"][0];
    assert_eq!(call["status"], "0x0", "{call}");
    assert_eq!(call["error"]["code"], -32015, "{call}");
}

/// eth_feeHistory's percentiles must rise strictly, as current geth wants them, and a request
/// for no blocks is answered before anything else is checked.
#[test]
fn fee_history_percentiles_rise_strictly() {
    let node = Node::execution_apis(&[]);
    // The last block before Cancun (41, time 410) has no blob fee, nor has the one after it in
    // geth's answer (it only prices blob gas after a block that carries some).
    let r = node.result("eth_feeHistory", json!(["0x1", "0x29"]));
    assert_eq!(r["baseFeePerBlobGas"], json!(["0x0", "0x0"]), "{r}");
    // Refused as geth's oracle refuses them: plain errors, -32000.
    for bad in [json!([10, 10]), json!([20, 10]), json!([101]), json!([-1])] {
        let r = node.call("eth_feeHistory", json!(["0x2", "latest", bad]));
        assert_eq!(r["error"]["code"], -32000, "{bad}: {r}");
    }
    // A newest block past the head: geth's oracle names both.
    let r = node.call("eth_feeHistory", json!(["0x2", "0x40", []]));
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert_eq!(
        r["error"]["message"], "request beyond head block: requested 64, head 54",
        "{r}"
    );
    // No blocks: geth's answer before anything else is looked at.
    for params in [
        json!(["0x0", "latest", []]),
        json!(["0x0", "0x99", []]),
        json!(["0x0", "latest", [101]]),
    ] {
        let r = node.call("eth_feeHistory", params.clone());
        assert_eq!(
            r["result"],
            json!({"oldestBlock": "0x0", "gasUsedRatio": null}),
            "{params}: {r}"
        );
    }
    let r = node.call("eth_feeHistory", json!(["0x2", "latest", [10, 20]]));
    assert_eq!(
        r["result"]["reward"].as_array().map(Vec::len),
        Some(2),
        "{r}"
    );
    // No percentiles, no `reward` (geth leaves it out, as when the list is not sent at all).
    for params in [json!(["0x2", "latest", []]), json!(["0x2", "latest"])] {
        let r = node.call("eth_feeHistory", params.clone());
        assert!(r["result"].get("reward").is_none(), "{params}: {r}");
    }
}

/// eth_getProof takes storage keys of at most 32 bytes, as geth does (longer hex with zero
/// leading bytes was taken), and echoes a short key as it was given.
#[test]
fn proof_keys_are_at_most_32_bytes() {
    let node = Node::execution_apis(&[]);
    let account = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let long = format!("0x{}", "00".repeat(33));
    let r = node.call("eth_getProof", json!([account, [long], "latest"]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = node.call("eth_getProof", json!([account, ["0x1"], "latest"]));
    assert_eq!(r["result"]["storageProof"][0]["key"], "0x1", "{r}");
    // Hex without its prefix is still hex (geth's decodeHash), not decimal.
    let r = node.call("eth_getProof", json!([account, ["10", "0Xff"], "latest"]));
    assert_eq!(r["result"]["storageProof"][0]["key"], "0x10", "{r}");
    assert_eq!(r["result"]["storageProof"][1]["key"], "0xff", "{r}");
    // No keys at all, as geth reads a null list.
    let r = node.call("eth_getProof", json!([account, null, "latest"]));
    assert_eq!(r["result"]["storageProof"], json!([]), "{r}");
}

/// eth_getStorageValues takes slots as geth's `common.Hash` (0x and 64 hex digits) and counts
/// slots, not addresses, for its "empty request".
#[test]
fn storage_values_take_whole_slot_hashes() {
    let node = Node::execution_apis(&[]);
    let account = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";
    let zero = format!("0x{}", "00".repeat(32));
    let r = node.result("eth_getStorageValues", json!([{account: [zero]}, "latest"]));
    assert_eq!(r[account].as_array().map(Vec::len), Some(1), "{r}");
    for (request, what) in [
        (json!({account: []}), "no slots"),
        (json!({account: ["0x0"]}), "a short slot"),
        (json!({account: ["00".repeat(32)]}), "no 0x"),
    ] {
        let r = node.call("eth_getStorageValues", json!([request, "latest"]));
        assert_eq!(r["error"]["code"], -32602, "{what}: {r}");
    }
}
