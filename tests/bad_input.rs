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

/// eth_simulateV1 refusals geth answers with -32603 itself: the spec has no code for them, and
/// its txValidationError gives its default (core.ErrNonceMax, ErrEmptyAuthList,
/// ErrMissingBlobHashes, ErrBlobFeeCapTooLow, ErrBlobTxCreate, ErrGasLimitTooHigh,
/// ErrTxTypeNotSupported, a blob hash of another version, too many blobs). The fixtures expect
/// it for the first three.
const GETH_INTERNAL_ERRORS: &[&str] = &[
    "nonce has max value",
    "empty auth list",
    "empty blobs",
    "missing blob hashes",
    "max fee per blob gas less than block blob gas fee",
    "has invalid hash version",
    "blob transaction of type create",
    "blob transaction has too many blobs",
    "transaction gas limit too high",
    "transaction type not supported",
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
    mutate_and_check(&node, &requests, seed, count, &|b| node.try_rpc_raw(b));
    assert_eq!(
        node.result("eth_blockNumber", json!([])),
        "0x36",
        "the node still answers"
    );
}

/// The methods without fixtures (a dev node's signing and controls, uncles, bad blocks, the
/// node's facts), mutated the same way on a dev node, where the signing methods have keys to
/// sign with.
#[test]
fn mutated_requests_of_methods_without_fixtures_get_answers() {
    let seed = env_u64("SIMNODE_BAD_INPUT_SEED", 0x5eed_1234);
    let count = env_u64("SIMNODE_BAD_INPUT_COUNT", 3000) / 3;
    let node = Node::start(
        support::TempDir::new("bad-input-dev"),
        std::path::Path::new("dev"),
        &[
            "--dev",
            "--rpc.rate-limit",
            "1000000",
            "--rpc.rate-burst",
            "1000000",
        ],
    );
    let dev = [
        "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    ];
    let to = "0x000000000000000000000000000000000000beef";
    let sync_transfer = support::sign_with_dev_key(alloy::consensus::TxEip1559 {
        chain_id: 1337,
        gas_limit: 21_000,
        max_fee_per_gas: 10_000_000_000,
        to: alloy::primitives::TxKind::Call(alloy::primitives::address!(
            "000000000000000000000000000000000000beef"
        )),
        value: alloy::primitives::U256::from(1u64),
        ..Default::default()
    });
    let typed = json!({
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"}],
            "Note": [{"name": "text", "type": "string"}, {"name": "amount", "type": "uint256"}]
        },
        "primaryType": "Note",
        "domain": {"name": "simnode", "chainId": 1337},
        "message": {"text": "hello", "amount": 7}
    });
    let zero_blob = format!("0x{}", "00".repeat(131_072));
    let infinity = json!(support::infinity_point());
    let requests: Vec<Value> = [
        ("eth_accounts", json!([])),
        ("eth_sendTransaction", json!([{"from": dev[0], "to": to, "value": "0x1"}])),
        // Nonce 0 of the first account: mined, refused as known or too low, never left waiting
        // behind a gap (so no mutation holds the request for its wait).
        ("eth_sendRawTransactionSync", json!([sync_transfer, 2_000])),
        ("eth_callBundle", json!([{"txs": [sync_transfer], "blockNumber": "0x2", "stateBlockNumber": "latest", "transactionIndex": -1, "coinbase": to, "timestamp": "0x6b091696", "timeout": "0x3e8", "gasLimit": "0x1c9c380", "difficulty": "0x0", "baseFee": "0x7"}])),
        ("eth_sendTransaction", json!([{"from": dev[1], "input": "0x602a60005500", "gas": "0x186a0", "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x1"}])),
        ("eth_signTransaction", json!([{"from": dev[0], "to": to, "gasPrice": "0x3b9aca00", "gas": "0x5208", "nonce": "0x7"}])),
        ("eth_fillTransaction", json!([{"from": dev[1], "to": to, "accessList": [{"address": to, "storageKeys": []}]}])),
        // Blob fields (src/rpc/blob_args.rs): the zero blob alone, and with its commitment and
        // proof (both the point at infinity).
        ("eth_fillTransaction", json!([{"from": dev[0], "to": to, "blobs": [zero_blob]}])),
        ("eth_signTransaction", json!([{"from": dev[1], "to": to, "blobs": [zero_blob], "commitments": [infinity], "proofs": [infinity]}])),
        ("eth_sign", json!([dev[0], "0x68656c6c6f"])),
        ("personal_sign", json!(["0x68656c6c6f", dev[1]])),
        ("eth_signTypedData_v4", json!([dev[0], typed])),
        ("eth_signTypedData_v4", json!([dev[1], typed.to_string()])),
        ("eth_getUncleCountByBlockNumber", json!(["latest"])),
        ("eth_getUncleCountByBlockHash", json!([format!("0x{}", "11".repeat(32))])),
        ("eth_getUncleByBlockNumberAndIndex", json!(["0x0", "0x0"])),
        ("eth_getUncleByBlockHashAndIndex", json!([format!("0x{}", "11".repeat(32)), "0x1"])),
        ("debug_getBadBlocks", json!([])),
        ("debug_storageRangeAt", json!(["latest", 0, dev[0], "0x00", 5])),
        ("debug_traceBlock", json!(["0xf90200c0c0", {"tracer": "callTracer"}])),
        ("debug_traceBadBlock", json!([format!("0x{}", "11".repeat(32)), {"tracer": "prestateTracer"}])),
        ("debug_intermediateRoots", json!([format!("0x{}", "11".repeat(32)), {"timeout": "2s"}])),
        ("eth_getBlockByNumber", json!(["pending", true])),
        ("eth_getBlockReceipts", json!(["pending"])),
        ("eth_call", json!([{"from": dev[0], "to": to, "value": "0x1"}, "pending"])),
        ("eth_simulateV1", json!([{"blockStateCalls": [{"calls": [{"from": dev[0], "to": to}]}]}, "pending"])),
        ("web3_sha3", json!(["0x68656c6c6f"])),
        ("net_listening", json!([])),
        ("net_peerCount", json!([])),
        ("evm_mine", json!([{"blocks": 2}])),
        ("anvil_mine", json!(["0x2", "0x1"])),
        ("evm_increaseTime", json!([60])),
        ("evm_setNextBlockTimestamp", json!(["0xffffffff"])),
        ("evm_snapshot", json!([])),
        ("evm_revert", json!(["0x1"])),
        ("anvil_setBalance", json!([to, "0x3635c9adc5dea00000"])),
        ("hardhat_setNonce", json!([to, "0x5"])),
        ("anvil_setCode", json!([to, "0x602a60005260206000f3"])),
        ("hardhat_setStorageAt", json!([to, "0x1", format!("0x{}", "07".repeat(32))])),
        ("anvil_impersonateAccount", json!([to])),
        ("hardhat_stopImpersonatingAccount", json!([to])),
        ("anvil_autoImpersonateAccount", json!([true])),
        ("evm_setAutomine", json!([false])),
        ("anvil_getAutomine", json!([])),
        ("evm_setIntervalMining", json!([0])),
        ("anvil_setAutomine", json!([true])),
        ("hardhat_dropTransaction", json!([format!("0x{}", "11".repeat(32))])),
        ("anvil_removePoolTransactions", json!([to])),
        ("hardhat_setCoinbase", json!([to])),
        ("anvil_snapshot", json!([])),
        ("anvil_revert", json!(["0x1"])),
        ("anvil_increaseTime", json!([60])),
        ("anvil_setNextBlockBaseFeePerGas", json!(["0x3b9aca00"])),
        ("evm_setBlockGasLimit", json!(["0x1c9c380"])),
        ("anvil_setBlockTimestampInterval", json!([12])),
        ("anvil_removeBlockTimestampInterval", json!([])),
        ("anvil_metadata", json!([])),
        ("eth_sendUnsignedTransaction", json!([{"from": to, "to": dev[1], "value": "0x1"}])),
        ("eth_sendTransaction", json!([{"from": to, "to": dev[0], "value": "0x1"}])),
        ("ots_getBlockTransactions", json!([1, 0, 10])),
        ("ots_searchTransactionsBefore", json!([dev[0], 0, 5])),
        ("ots_searchTransactionsAfter", json!([to, 0, 5])),
        ("ots_getTransactionBySenderAndNonce", json!([dev[0], 1])),
        ("ots_getContractCreator", json!([to])),
        ("ots_getBlockDetails", json!([1])),
        ("ots_hasCode", json!([to, "latest"])),
        ("eth_getBlockByNumber", json!(["safe", false])),
        ("eth_getBalance", json!([dev[0], "finalized"])),
    ]
    .into_iter()
    .enumerate()
    .map(|(id, (method, params))| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    .collect();
    mutate_and_check(&node, &requests, seed, count, &|b| node.try_rpc_raw(b));
    // Mutations that leave a transaction valid are signed and mined: the signing path ran.
    assert_ne!(
        node.result("eth_blockNumber", json!([])),
        "0x0",
        "the node still answers, with blocks mined from the node's own signatures"
    );
}

/// The Engine API's methods a consensus client calls, mutated the same way (over the Engine
/// API's port, with a valid token): payload building, payloads, bodies, the client version and
/// the eth methods served there. The chain may move (a mutated payload can be valid); the node
/// must answer every request and stay up.
#[test]
fn mutated_engine_api_requests_get_answers() {
    let seed = env_u64("SIMNODE_BAD_INPUT_SEED", 0x5eed_1234);
    let count = env_u64("SIMNODE_BAD_INPUT_COUNT", 3000) / 5;
    let node = Node::execution_apis(&[]);
    let head = support::EXECUTION_APIS_HEAD;
    let (state, attributes, root) = support::proposal_on_execution_apis_head();
    let built = node.engine_call("engine_forkchoiceUpdatedV3", json!([state, attributes]));
    let id = built["result"]["payloadId"].clone();
    let envelope = node.engine_call("engine_getPayloadV5", json!([id]))["result"].clone();
    assert!(envelope.is_object(), "{envelope}");
    let requests: Vec<Value> = [
        ("engine_forkchoiceUpdatedV3", json!([state, attributes])),
        ("engine_forkchoiceUpdatedV2", json!([state, {"timestamp": "0x230", "prevRandao": root, "suggestedFeeRecipient": head[..42], "withdrawals": []}])),
        ("engine_forkchoiceUpdatedV1", json!([state, null])),
        ("engine_getPayloadV5", json!([id])),
        ("engine_getPayloadV3", json!([id])),
        ("engine_getPayloadV1", json!(["0x0000000000000001"])),
        ("engine_newPayloadV4", json!([envelope["executionPayload"], [], root, envelope["executionRequests"]])),
        ("engine_getPayloadBodiesByRangeV1", json!(["0x1", "0x20"])),
        ("engine_getPayloadBodiesByHashV1", json!([[head, root]])),
        ("engine_getBlobsV1", json!([[root]])),
        ("engine_getBlobsV2", json!([[root, head]])),
        ("engine_getBlobsV3", json!([[root]])),
        ("engine_getClientVersionV1", json!([{"code": "LH", "name": "Lighthouse", "version": "v8.0.0", "commit": "0x01020304"}])),
        ("engine_exchangeCapabilities", json!([["engine_newPayloadV4"]])),
        ("eth_syncing", json!([])),
        ("eth_getBlockByNumber", json!(["latest", false])),
        ("eth_chainId", json!([])),
    ]
    .into_iter()
    .enumerate()
    .map(|(id, (method, params))| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    .collect();
    mutate_and_check(&node, &requests, seed, count, &|b| node.try_engine_raw(b));
    let caps = node.engine_call("engine_exchangeCapabilities", json!([[]]));
    assert!(
        caps["result"].is_array(),
        "the Engine API still answers: {caps}"
    );
    assert!(node.result("eth_blockNumber", json!([])).is_string());
}

/// Sends `count` seeded mutations of `requests` through `send` (the public RPC or the Engine
/// API) and requires each to get a JSON-RPC answer over HTTP 200 (or 413 for too large a
/// body), no internal error beyond geth's own, and no panic in the node's log.
fn mutate_and_check(
    node: &Node,
    requests: &[Value],
    seed: u64,
    count: u64,
    send: &dyn Fn(&str) -> std::io::Result<(u16, String)>,
) {
    let palette = palette();
    let mut rng = Rng(seed | 1);
    let mut failures = Vec::new();
    for _ in 0..count {
        let base = rng.pick(requests);
        let request = mutate(&mut rng, base, &palette);
        let body = request.to_string();
        let answer = match send(&body) {
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
    let log = node.log();
    assert!(!log.contains("panicked"), "the node panicked:\n{log}");
    assert!(
        failures.is_empty(),
        "{} of {count} mutated requests (seed {seed:#x}) went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
