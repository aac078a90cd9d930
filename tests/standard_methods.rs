//! Standard methods the shared fixtures do not cover, checked against the execution-apis chain
//! itself: the uncle methods (the chain's proof-of-work blocks carry uncles) and what the node
//! says about itself (`eth_accounts` and signing without keys, `net_listening`,
//! `net_peerCount`, `web3_sha3`), and geth's raw transactions by block and index.

mod support;

use serde_json::{json, Value};
use support::Node;

/// The node's head block number.
fn head_number(node: &Node) -> u64 {
    let head = node.result("eth_blockNumber", json!([]));
    u64::from_str_radix(
        head.as_str().expect("a quantity").trim_start_matches("0x"),
        16,
    )
    .expect("hex")
}

/// Every block's uncles, by number and by hash: as many as the block lists, each hashing to
/// the listed hash (`hash` is computed by the node from the stored header), older than the
/// block, a header-only block (no `transactions`, no uncles of its own); past the last index
/// and for unknown blocks, `null`.
#[test]
fn uncles_are_the_headers_their_blocks_name() {
    // A few hundred requests back to back: past the default per-key rate.
    let node =
        Node::execution_apis(&["--rpc.rate-limit", "1000000", "--rpc.rate-burst", "1000000"]);
    let head = head_number(&node);
    let mut seen = 0;
    for number in 0..=head {
        let tag = format!("{number:#x}");
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        let listed = block["uncles"].as_array().expect("uncles").clone();
        let count = json!(format!("{:#x}", listed.len()));
        assert_eq!(
            node.result("eth_getUncleCountByBlockNumber", json!([tag])),
            count
        );
        assert_eq!(
            node.result("eth_getUncleCountByBlockHash", json!([block["hash"]])),
            count
        );
        for (index, hash) in listed.iter().enumerate() {
            let index = format!("{index:#x}");
            let uncle = node.result("eth_getUncleByBlockNumberAndIndex", json!([tag, index]));
            assert_eq!(&uncle["hash"], hash, "block {number}: {uncle}");
            assert_eq!(uncle["uncles"], json!([]));
            assert!(uncle.get("transactions").is_none(), "{uncle}");
            assert!(uncle["size"].is_string(), "{uncle}");
            let uncle_number = u64::from_str_radix(
                uncle["number"].as_str().unwrap().trim_start_matches("0x"),
                16,
            )
            .unwrap();
            assert!(uncle_number < number, "block {number}: {uncle}");
            let by_hash = node.result(
                "eth_getUncleByBlockHashAndIndex",
                json!([block["hash"], index]),
            );
            assert_eq!(by_hash, uncle);
            seen += 1;
        }
        let past = format!("{:#x}", listed.len());
        assert_eq!(
            node.result("eth_getUncleByBlockNumberAndIndex", json!([tag, past])),
            Value::Null
        );
    }
    assert!(seen > 0, "the chain has uncles to check");
    let unknown = format!("{:#x}", head + 1);
    assert_eq!(
        node.result("eth_getUncleCountByBlockNumber", json!([unknown])),
        Value::Null
    );
    let no_hash = format!("0x{}", "11".repeat(32));
    assert_eq!(
        node.result("eth_getUncleByBlockHashAndIndex", json!([no_hash, "0x0"])),
        Value::Null
    );
}

#[test]
fn the_node_says_what_it_is() {
    let node = Node::execution_apis(&[]);
    // Not a dev node: no keys, so nothing to sign with.
    assert_eq!(node.result("eth_accounts", json!([])), json!([]));
    assert_eq!(node.result("eth_pendingTransactions", json!([])), json!([]));
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    assert_eq!(
        node.call("eth_sendTransaction", json!([{"from": from, "to": from}]))["error"],
        json!({"code": -32000, "message": "unknown account"})
    );
    assert_eq!(node.result("net_listening", json!([])), json!(true));
    assert_eq!(node.result("net_peerCount", json!([])), json!("0x0"));
    // keccak256("hello")
    assert_eq!(
        node.result("web3_sha3", json!(["0x68656c6c6f"])),
        json!("0x1c8aff950685c2ed4bc3174f3472287b56d9517b9c948127319a09a7a36deac8")
    );
    assert_eq!(
        node.call("web3_sha3", json!(["hello"]))["error"]["code"],
        -32602
    );
    assert_eq!(
        node.call("eth_accounts", json!([1]))["error"]["code"],
        -32602
    );
    // Whether to give full transactions is a required argument (geth, reth and anvil).
    let block_hash = node.result("eth_getBlockByNumber", json!(["0x1", false]))["hash"].clone();
    for (method, first) in [
        ("eth_getBlockByNumber", json!("0x1")),
        ("eth_getBlockByHash", block_hash),
    ] {
        let error = &node.call(method, json!([first]))["error"];
        assert_eq!(error["code"], -32602, "{method}");
        assert_eq!(
            error["message"], "missing value for required argument 1",
            "{method}"
        );
    }
    // The dev chain's controls exist only on a dev node.
    for method in [
        "evm_mine",
        "evm_snapshot",
        "evm_increaseTime",
        "anvil_setBalance",
        "anvil_impersonateAccount",
        "evm_setAutomine",
        "anvil_dropAllTransactions",
        "eth_sendUnsignedTransaction",
        "anvil_metadata",
        "hardhat_metadata",
        "anvil_setLoggingEnabled",
    ] {
        assert_eq!(
            node.call(method, json!([]))["error"]["code"],
            -32601,
            "{method}"
        );
    }
}

/// geth's eth_getRawTransactionByBlockHashAndIndex / ByBlockNumberAndIndex: every transaction
/// of the chain, by its block's number and hash, is the raw transaction eth_getRawTransactionByHash
/// gives for its hash (and hashes to it); past the last index and for unknown blocks, `0x`.
#[test]
fn raw_transactions_by_block_and_index() {
    let node =
        Node::execution_apis(&["--rpc.rate-limit", "1000000", "--rpc.rate-burst", "1000000"]);
    let head = head_number(&node);
    let mut seen = 0;
    for number in 0..=head {
        let tag = format!("{number:#x}");
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        let hashes = block["transactions"].as_array().expect("hashes").clone();
        for i in 0..=hashes.len() {
            let index = format!("{i:#x}");
            let by_number = node.result(
                "eth_getRawTransactionByBlockNumberAndIndex",
                json!([tag, index]),
            );
            let by_hash = node.result(
                "eth_getRawTransactionByBlockHashAndIndex",
                json!([block["hash"], index]),
            );
            assert_eq!(by_number, by_hash, "block {number} index {i}");
            match hashes.get(i) {
                Some(hash) => {
                    let raw = node.result("eth_getRawTransactionByHash", json!([hash]));
                    assert_eq!(by_number, raw, "block {number} index {i}");
                    let bytes = alloy::hex::decode(raw.as_str().expect("hex")).expect("hex");
                    assert_eq!(json!(alloy::primitives::keccak256(bytes)), *hash);
                    seen += 1;
                }
                None => assert_eq!(by_number, Value::Null, "block {number} index {i}"),
            }
        }
    }
    assert!(seen > 50, "only {seen} transactions");
    let unknown = format!("0x{}", "ab".repeat(32));
    for (method, block) in [
        (
            "eth_getRawTransactionByBlockNumberAndIndex",
            json!("0x10000"),
        ),
        ("eth_getRawTransactionByBlockHashAndIndex", json!(unknown)),
    ] {
        assert_eq!(
            node.result(method, json!([block, "0x0"])),
            Value::Null,
            "{method}"
        );
    }
}

/// geth's debug_traceBlock: a block given as RLP traces on its canonical parent exactly as the
/// stored block traces by number (every block of the chain, two tracers); blocks that cannot
/// run are refused with geth's reasons (undecodable, genesis, a parent the chain does not hold),
/// and an unknown bad block is not found.
#[test]
fn blocks_given_as_rlp_trace_as_the_stored_ones() {
    use alloy::{
        consensus::{Block, TxEnvelope},
        rlp::Decodable,
    };
    let node =
        Node::execution_apis(&["--rpc.rate-limit", "1000000", "--rpc.rate-burst", "1000000"]);
    let head = head_number(&node);
    let tracers = [
        json!({"tracer": "callTracer"}),
        json!({"tracer": "prestateTracer"}),
    ];
    for number in 1..=head {
        let tag = format!("{number:#x}");
        let rlp = node.result("debug_getRawBlock", json!([tag]));
        for opts in &tracers {
            let stored = node.result("debug_traceBlockByNumber", json!([tag, opts]));
            let given = node.result("debug_traceBlock", json!([rlp, opts]));
            assert_eq!(given, stored, "block {number}, {opts}");
        }
    }

    let refused = |params: Value, words: &str| {
        let r = node.call("debug_traceBlock", params);
        assert_eq!(r["error"]["code"], -32000, "{r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{words:?} in {r}");
    };
    refused(json!(["0x1234"]), "could not decode block");
    let genesis = node.result("debug_getRawBlock", json!(["0x0"]));
    refused(json!([genesis]), "genesis is not traceable");
    let raw = node.result("debug_getRawBlock", json!(["0x5"]));
    let bytes = alloy::hex::decode(raw.as_str().expect("hex")).expect("hex");
    let mut block = Block::<TxEnvelope>::decode(&mut bytes.as_slice()).expect("a block");
    block.header.parent_hash = alloy::primitives::B256::repeat_byte(0x33);
    let orphan = format!("0x{}", alloy::hex::encode(alloy::rlp::encode(&block)));
    refused(json!([orphan]), "parent 0x3333");
    let r = node.call("debug_traceBlock", json!(["1234"]));
    assert_eq!(r["error"]["code"], -32602, "{r}");

    let r = node.call(
        "debug_traceBadBlock",
        json!([format!("0x{}", "ab".repeat(32))]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("bad block"),
        "{r}"
    );
}

/// geth's debug_intermediateRoots: one state root per transaction, and where nothing runs after
/// the transactions (a proof-of-stake block without withdrawals or requests) the last is the
/// block's own `stateRoot`, which geth recorded; genesis and unknown blocks are refused.
#[test]
fn intermediate_roots_end_at_the_blocks_state_root() {
    let node =
        Node::execution_apis(&["--rpc.rate-limit", "1000000", "--rpc.rate-burst", "1000000"]);
    // sha256 of no requests: a Prague block that carries none.
    const NO_REQUESTS: &str = "0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let (mut ending_at_state_root, mut roots_seen) = (0, 0);
    for number in 1..=head_number(&node) {
        let block = node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), false]),
        );
        let roots = node.result("debug_intermediateRoots", json!([block["hash"]]));
        let roots = roots.as_array().expect("a list of roots");
        let txs = block["transactions"].as_array().expect("hashes");
        assert_eq!(roots.len(), txs.len(), "block {number}");
        roots_seen += roots.len();
        let nothing_after = block["difficulty"] == "0x0"
            && block["withdrawals"].as_array().is_none_or(|w| w.is_empty())
            && (block["requestsHash"].is_null() || block["requestsHash"] == NO_REQUESTS);
        if nothing_after && !roots.is_empty() {
            assert_eq!(roots.last(), Some(&block["stateRoot"]), "block {number}");
            ending_at_state_root += 1;
        }
        // Each root differs from the one before: every transaction moves the sender's nonce.
        for pair in roots.windows(2) {
            assert_ne!(pair[0], pair[1], "block {number}");
        }
    }
    assert!(roots_seen > 50, "only {roots_seen} roots");
    assert!(
        ending_at_state_root >= 5,
        "only {ending_at_state_root} blocks end at their state root"
    );
    let genesis = node.result("eth_getBlockByNumber", json!(["0x0", false]));
    for hash in [
        genesis["hash"].clone(),
        json!(format!("0x{}", "ab".repeat(32))),
    ] {
        let r = node.call("debug_intermediateRoots", json!([hash]));
        assert_eq!(r["error"]["code"], -32000, "{hash}: {r}");
    }
    let r = node.call("debug_intermediateRoots", json!([]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// eth_call prepares a call as geth's CallDefaults and ToMessage do: a fee cap without a tip
/// tips nothing (GASPRICE is the base fee), BLOBBASEFEE is the block's unless the call names a
/// blob fee cap of 0, `input` wins over `data`, the fork's rules follow a block override of the
/// time, and geth's plain errors are -32000.
#[test]
fn calls_are_prepared_as_geths() {
    let node = Node::execution_apis(&[]);
    let c = "0x00000000000000000000000000000000000000c0";
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let with_code = |code: &str| json!({c: {"code": code}});
    let word = |v: &Value| {
        let hex = v.as_str().unwrap_or_else(|| panic!("a word: {v}"));
        u128::from_str_radix(hex.trim_start_matches("0x"), 16).expect("hex")
    };
    let latest = node.result("eth_getBlockByNumber", json!(["latest", false]));
    // GASPRICE; RETURN it.
    let gas_price = node.result(
        "eth_call",
        json!([{"from": from, "to": c, "maxFeePerGas": "0x20000000"}, "latest", with_code("0x3a60005260206000f3")]),
    );
    assert_eq!(
        word(&gas_price),
        word(&latest["baseFeePerGas"]),
        "{gas_price}"
    );
    // BLOBBASEFEE; RETURN it.
    let blob_fee = node.result(
        "eth_call",
        json!([{"to": c}, "latest", with_code("0x4a60005260206000f3"), {"blobBaseFee": "0x99"}]),
    );
    assert_eq!(word(&blob_fee), 0x99, "{blob_fee}");
    // The identity precompile echoes `input`.
    let echoed = node.result(
        "eth_call",
        json!([{"to": "0x0000000000000000000000000000000000000004", "input": "0x11", "data": "0x22"}, "latest"]),
    );
    assert_eq!(echoed, "0x11");
    // eth_estimateGas bounds the gas by the balance left after the blob gas, as geth does.
    let payer = "0x00000000000000000000000000000000000000aa";
    let blob_hash = format!("0x01{}", "01".repeat(31));
    let estimate = node.call(
        "eth_estimateGas",
        json!([
            {"from": payer, "to": c, "data": "0x01", "maxFeePerGas": "0x1", "maxPriorityFeePerGas": "0x0", "maxFeePerBlobGas": "0x1", "blobVersionedHashes": [blob_hash]},
            "latest",
            {payer: {"balance": "0x27530"}, c: {"code": "0x00"}},
            {"baseFeePerGas": "0x1"}
        ]),
    );
    assert!(estimate["result"].is_string(), "{estimate}");
    // PUSH0 in a block whose time is before Shanghai (390 on this chain).
    let push0 = node.call(
        "eth_call",
        json!([{"to": c}, "latest", with_code("0x5f60005260206000f3"), {"time": "0x100"}]),
    );
    assert_eq!(push0["error"]["code"], -32000, "{push0}");
    for (params, what) in [
        (
            json!([{"to": c, "gasPrice": "0x1", "maxFeePerGas": "0x1"}, "latest"]),
            "both fee styles",
        ),
        (
            json!([{"to": c}, "latest", {c: {"state": {}, "stateDiff": {}}}]),
            "state and stateDiff",
        ),
        (
            json!([{"to": c, "blobVersionedHashes": []}, "latest"]),
            "an empty blob hash list",
        ),
        (
            json!([{"to": c}, "latest", null, {"withdrawals": []}]),
            "a withdrawals override",
        ),
    ] {
        let refused = node.call("eth_call", params);
        assert_eq!(refused["error"]["code"], -32000, "{what}: {refused}");
    }
}

/// A call that halts gets geth's message for it: the instruction it halted on, or the
/// precompile's own error (eth_createAccessList's `error` is a compared result field).
#[test]
fn halts_are_described_as_geth_describes_them() {
    let node = Node::execution_apis(&[]);
    let c = "0x00000000000000000000000000000000000000c0";
    for (code, words) in [
        ("0x0c", "invalid opcode: opcode 0xc not defined"),
        ("0x600001", "stack underflow (1 <=> 2)"),
    ] {
        let overrides = json!({c: {"code": code}});
        let listed = node.result(
            "eth_createAccessList",
            json!([{"to": c}, "latest", overrides]),
        );
        assert_eq!(listed["error"], words, "{code}: {listed}");
        let called = node.call("eth_call", json!([{"to": c}, "latest", overrides]));
        assert_eq!(called["error"]["message"], words, "{code}: {called}");
    }
    // blake2f with one byte of input.
    let listed = node.result(
        "eth_createAccessList",
        json!([{"to": "0x0000000000000000000000000000000000000009", "data": "0x00"}, "latest"]),
    );
    assert_eq!(listed["error"], "invalid input length", "{listed}");
}

/// eth_createAccessList applies state overrides without the precompile table, as geth's does:
/// an override of a precompile's account leaves the precompile running there, and a move is
/// refused (where eth_call moves and replaces precompiles).
#[test]
fn access_lists_keep_precompiles_in_place() {
    let node = Node::execution_apis(&[]);
    let ecrecover = "0x0000000000000000000000000000000000000001";
    let reverts = json!({ecrecover: {"code": "0x60006000fd"}});
    let listed = node.result(
        "eth_createAccessList",
        json!([{"to": ecrecover}, "latest", reverts]),
    );
    assert!(listed.get("error").is_none(), "{listed}");
    let called = node.call("eth_call", json!([{"to": ecrecover}, "latest", reverts]));
    assert_eq!(called["error"]["code"], 3, "{called}");
    let moved = json!({ecrecover: {"movePrecompileToAddress": "0x00000000000000000000000000000000000000c1"}});
    let refused = node.call(
        "eth_createAccessList",
        json!([{"to": ecrecover}, "latest", moved]),
    );
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
}
