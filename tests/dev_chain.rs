//! `simnode node --dev`: transactions sent with eth_sendRawTransaction are mined into blocks
//! that go through the same execution and store path as imported ones.

mod support;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use alloy::{
    consensus::TxEip1559,
    primitives::{address, Address, TxKind, U256},
};
use serde_json::{json, Value};
use support::{sign_with_dev_key, Node, TempDir};

const ADDR0: Address = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

fn transfer(nonce: u64, to: Address, value: U256) -> String {
    sign_with_dev_key(TxEip1559 {
        chain_id: 1337,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(to),
        value,
        ..Default::default()
    })
}

fn wait_for(node: &Node, what: &str, mut f: impl FnMut(&Node) -> Option<Value>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f(node) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The receipt of transaction `hash` once it is mined.
fn receipt_when_mined(node: &Node, what: &str, hash: &Value) -> Value {
    wait_for(node, what, |n| {
        let r = n.result("eth_getTransactionReceipt", json!([hash]));
        (!r.is_null()).then_some(r)
    })
}

/// Each request is refused with -32602 (invalid params).
fn assert_invalid_params(node: &Node, requests: impl IntoIterator<Item = (&'static str, Value)>) {
    for (method, params) in requests {
        let answer = node.call(method, params);
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
    }
}

#[test]
fn dev_node_mines_sent_transactions() {
    let node = Node::start(TempDir::new("dev"), Path::new("dev"), &["--dev"]);
    assert_eq!(node.result("eth_chainId", json!([])), "0x539");
    let balance = node.result("eth_getBalance", json!([ADDR0, "latest"]));
    assert_eq!(balance, "0x21e19e0c9bab2400000", "10,000 ETH prefunded");
    // A dev chain is final as it goes, genesis included (geth --dev also names genesis safe
    // and finalized before its first block).
    for tag in ["safe", "finalized"] {
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        assert_eq!(block["number"], "0x0", "{tag}: {block}");
    }

    let to = address!("000000000000000000000000000000000000beef");
    // A transaction behind a nonce gap waits in the pool: no block is mined for it (and the
    // send does not wait for one).
    let sent_at = std::time::Instant::now();
    let gapped = node.result(
        "eth_sendRawTransaction",
        json!([transfer(3, to, U256::from(1u64))]),
    );
    assert!(
        sent_at.elapsed() < Duration::from_secs(1),
        "{:?}",
        sent_at.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        node.result("eth_blockNumber", json!([])),
        "0x0",
        "nothing mineable yet"
    );
    assert_eq!(
        node.result("eth_getTransactionCount", json!([ADDR0, "pending"])),
        "0x0"
    );
    let mut hashes = Vec::new();
    for nonce in 0..3 {
        let raw = transfer(nonce, to, U256::from(1_000u64));
        let hash = node.result("eth_sendRawTransaction", json!([raw]));
        // Automine answers once the block is stored, as hardhat does: the receipt is there
        // for a client that asks right after.
        let receipt = node.result("eth_getTransactionReceipt", json!([hash]));
        assert_eq!(receipt["transactionHash"], hash, "{receipt}");
        hashes.push(hash);
    }
    for hash in &hashes {
        let receipt = receipt_when_mined(&node, "the receipt", hash);
        assert_eq!(receipt["status"], "0x1", "{receipt}");
        assert_eq!(
            receipt["from"],
            json!(ADDR0).as_str().unwrap().to_lowercase()
        );
    }
    // Once the gap is filled, the waiting transaction (nonce 3) is mined too.
    receipt_when_mined(&node, "the gapped transaction", &gapped);
    assert_eq!(
        node.result("eth_getBalance", json!([to, "latest"])),
        "0xbb9"
    );
    assert_eq!(
        node.result("eth_getTransactionCount", json!([ADDR0, "latest"])),
        "0x4"
    );

    // A replayed transaction is refused by nonce.
    let again = node.call(
        "eth_sendRawTransaction",
        json!([transfer(0, to, U256::from(1u64))]),
    );
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("nonce too low"),
        "{again}"
    );

    // Every mined block's receipts are served, in one call, like an imported block's.
    let head = node.result("eth_blockNumber", json!([]));
    for tag in ["safe", "finalized"] {
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        assert_eq!(block["number"], head, "{tag}");
    }
    let receipts = node.result("eth_getBlockReceipts", json!([head]));
    assert!(
        receipts.as_array().is_some_and(|r| !r.is_empty()),
        "{receipts}"
    );
}

#[test]
fn dev_node_mines_on_an_interval() {
    let node = Node::start(
        TempDir::new("dev-interval"),
        Path::new("dev"),
        &["--dev", "--dev.block-time", "1"],
    );
    wait_for(&node, "two empty blocks", |n| {
        let number = n.result("eth_blockNumber", json!([]));
        (u64::from_str_radix(number.as_str()?.trim_start_matches("0x"), 16).ok()? >= 2)
            .then_some(number)
    });
}

/// `--rpc.gascap 0` means no cap, as in geth: a call that names no gas still runs (it gets
/// half of u64::MAX, not zero), in every module that defaults gas from the cap.
#[test]
fn gas_cap_zero_means_no_cap() {
    let node = Node::start(
        TempDir::new("dev-gascap0"),
        Path::new("dev"),
        &["--dev", "--rpc.gascap", "0"],
    );
    let to = address!("000000000000000000000000000000000000beef");
    let call = json!({"from": ADDR0, "to": to, "value": "0x1"});
    assert_eq!(node.result("eth_call", json!([call, "latest"])), "0x");
    assert_eq!(
        node.result("eth_estimateGas", json!([call, "latest"])),
        "0x5208"
    );
    let traces = node.result("trace_callMany", json!([[[call, ["trace"]]], "latest"]));
    assert_eq!(traces[0]["trace"][0]["action"]["value"], "0x1", "{traces}");
    let gas = &traces[0]["trace"][0]["action"]["gas"];
    assert_eq!(
        gas, "0x7fffffffffffadf7",
        "u64::MAX / 2 less the intrinsic gas"
    );
    let blocks = node.result(
        "eth_simulateV1",
        json!([{"blockStateCalls": [{"calls": [call, call]}]}, "latest"]),
    );
    let calls = &blocks[0]["calls"];
    assert_eq!(calls[0]["status"], "0x1", "{blocks}");
    assert_eq!(calls[1]["status"], "0x1", "{blocks}");
}

/// eth_simulateV1's blocks reach the client the same on every path: a single HTTP request
/// (the front door writes the answer around the blocks' JSON text), a batch item and a
/// WebSocket message (both through jsonrpsee).
#[test]
fn simulate_answers_the_same_single_batched_and_over_websocket() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let node = Node::start(TempDir::new("dev-sim-paths"), Path::new("dev"), &["--dev"]);
    let to = address!("000000000000000000000000000000000000beef");
    let params = json!([{
        "traceTransfers": true,
        "blockStateCalls": [
            {"calls": [{"from": ADDR0, "to": to, "value": "0x1"}]},
            {"calls": [{"from": ADDR0, "to": to, "value": "0x2"}]}
        ]
    }, "latest"]);
    let request =
        |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "eth_simulateV1", "params": params});

    let (status, single) = node.rpc_raw(&request(7).to_string());
    assert_eq!(status, 200);
    let single: Value = serde_json::from_str(&single).expect("json");
    assert_eq!(single["id"], 7);
    let blocks = single["result"].as_array().expect("blocks");
    assert_eq!(blocks.len(), 2, "{single}");
    assert_eq!(
        blocks[1]["calls"][0]["logs"][0]["data"],
        format!("0x{:064x}", 2)
    );

    let (_, batch) = node.rpc_raw(&json!([request(8), request(9)]).to_string());
    let batch: Value = serde_json::from_str(&batch).expect("json");
    assert_eq!(batch[0]["result"], single["result"], "{batch}");
    assert_eq!(batch[1]["result"], single["result"], "{batch}");

    let over_ws = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let (mut ws, _) = tokio_tungstenite::connect_async(node.ws_url())
                .await
                .expect("ws connect");
            ws.send(Message::Text(request(10).to_string().into()))
                .await
                .expect("ws send");
            loop {
                match ws.next().await.expect("an answer").expect("ws frame") {
                    Message::Text(text) => {
                        break serde_json::from_str::<Value>(&text).expect("json")
                    }
                    Message::Ping(_) | Message::Pong(_) => continue,
                    other => panic!("unexpected ws message {other:?}"),
                }
            }
        });
    assert_eq!(over_ws["id"], 10);
    assert_eq!(over_ws["result"], single["result"]);
}

/// A call past `--rpc.evm-timeout` with more gas than a block holds answers -32016 and stops
/// running: the node goes idle right after. (eth_call, eth_estimateGas and eth_createAccessList
/// used to answer at the deadline while the EVM ran on in a blocking thread until the gas was
/// used up, which with `--rpc.gascap 0` is never.)
#[cfg(target_os = "linux")]
#[test]
fn calls_past_the_deadline_stop_running() {
    let flags = ["--rpc.gascap", "0", "--rpc.evm-timeout", "300"];
    let dev = Node::start(
        TempDir::new("dev-deadline"),
        Path::new("dev"),
        &[&["--dev"][..], &flags].concat(),
    );
    let looping = address!("00000000000000000000000000000000000100ff");
    // JUMPDEST PUSH1 0 JUMP: loops until the gas runs out.
    let overrides = json!({ looping.to_string(): {"code": "0x5b600056"} });
    // Without gas, eth_call gets half of u64::MAX; the others are given more than any block
    // holds (a defaulted estimate is bounded by the block gas limit, and runs that small end
    // on their own).
    let no_gas = json!({"from": ADDR0, "to": looping});
    let much_gas = json!({"from": ADDR0, "to": looping, "gas": "0x1000000000"});
    for (method, call) in [("eth_call", &no_gas), ("eth_createAccessList", &much_gas)] {
        let r = dev.call(method, json!([call, "latest", overrides]));
        assert_eq!(r["error"]["code"], -32016, "{method}: {r}");
    }
    // From Osaka (the dev chain's rules) an estimate stays under EIP-7825's 2^24 gas, a run
    // that ends on its own; before it the estimate's first run has all the gas it is given.
    // The execution-apis chain is Prague at block 0x2f.
    let prague = Node::execution_apis(&flags);
    let r = prague.call(
        "eth_estimateGas",
        json!([{"to": looping, "gas": "0x1000000000"}, "0x2f", overrides]),
    );
    assert_eq!(r["error"]["code"], -32016, "eth_estimateGas: {r}");
    // Runs stopped at the deadline have ended by now; measure what is still running.
    std::thread::sleep(Duration::from_millis(300));
    for node in [&dev, &prague] {
        let before = node.cpu_ticks();
        std::thread::sleep(Duration::from_secs(1));
        let used = node.cpu_ticks() - before;
        assert!(
            used < 30,
            "the node used {used} ticks of CPU in the second after: a timed-out call still runs"
        );
    }
}

/// A dev node signs with the test mnemonic's keys, as geth --dev and anvil do: eth_accounts
/// lists them, eth_sendTransaction fills in what a request leaves out (nonce, gas, fees) and
/// mines it, eth_signTransaction signs without sending, eth_sign and personal_sign sign
/// messages (EIP-191). Other senders are "unknown account".
#[test]
fn dev_node_signs_with_its_accounts() {
    use alloy::{
        consensus::{transaction::SignerRecoverable, TxEnvelope},
        eips::eip2718::Decodable2718,
        primitives::{Bytes, Signature},
    };
    let node = Node::start(TempDir::new("dev-accounts"), Path::new("dev"), &["--dev"]);
    let accounts = node.result("eth_accounts", json!([]));
    let accounts: Vec<Address> = serde_json::from_value(accounts).expect("addresses");
    assert_eq!(accounts.len(), 10);
    assert_eq!(accounts[0], ADDR0);

    // Three transfers back to back, nothing but sender, receiver and value given: consecutive
    // nonces, all mined.
    let to = address!("000000000000000000000000000000000000cafe");
    let hashes: Vec<Value> = (0..3)
        .map(|_| {
            node.result(
                "eth_sendTransaction",
                json!([{"from": ADDR0, "to": to, "value": "0x64"}]),
            )
        })
        .collect();
    for hash in &hashes {
        let receipt = receipt_when_mined(&node, "the receipt", hash);
        assert_eq!(receipt["status"], "0x1", "{receipt}");
        assert_eq!(receipt["type"], "0x2", "fees default to EIP-1559 ones");
    }
    assert_eq!(
        node.result("eth_getBalance", json!([to, "latest"])),
        "0x12c"
    );
    let nonces: Vec<Value> = hashes
        .iter()
        .map(|h| node.result("eth_getTransactionByHash", json!([h]))["nonce"].clone())
        .collect();
    assert_eq!(nonces, vec![json!("0x0"), json!("0x1"), json!("0x2")]);

    // A contract creation gets its gas estimated: PUSH1 42 PUSH1 0 SSTORE, empty runtime.
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": accounts[1], "input": "0x602a60005500"}]),
    );
    let receipt = receipt_when_mined(&node, "the creation", &hash);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    assert!(receipt["contractAddress"].is_string(), "{receipt}");

    // Signed, not sent: the encoding recovers to the sender and is the transaction shown.
    let signed = node.result(
        "eth_signTransaction",
        json!([{"from": accounts[2], "to": to, "value": "0x1", "gasPrice": "0x3b9aca00"}]),
    );
    let raw: Bytes = serde_json::from_value(signed["raw"].clone()).expect("raw bytes");
    let tx = TxEnvelope::decode_2718(&mut raw.as_ref()).expect("a transaction");
    assert_eq!(tx.recover_signer().expect("a signer"), accounts[2]);
    assert_eq!(signed["tx"]["hash"], json!(tx.tx_hash()));
    assert_eq!(
        signed["tx"]["type"], "0x0",
        "a gas price makes a legacy transaction"
    );
    assert_eq!(
        node.result("eth_getTransactionByHash", json!([tx.tx_hash()])),
        Value::Null,
        "not sent"
    );

    // A type the request names is the type signed: an access-list transaction with a gas price
    // and no list gets an empty one (alloy and geth would pick legacy from the fields), a
    // legacy one gets a gas price; fields the named type cannot carry are refused.
    for (request, want) in [
        (json!({"type": "0x1", "gasPrice": "0x3b9aca00"}), 1u8),
        (json!({"type": "0x1"}), 1),
        (json!({"type": "0x0"}), 0),
        (json!({"type": "0x2"}), 2),
    ] {
        let mut request = request;
        request["from"] = json!(accounts[2]);
        request["to"] = json!(to);
        let signed = node.result("eth_signTransaction", json!([request]));
        let raw: Bytes = serde_json::from_value(signed["raw"].clone()).expect("raw bytes");
        let tx = TxEnvelope::decode_2718(&mut raw.as_ref()).expect("a transaction");
        assert_eq!(tx.tx_type() as u8, want, "{request}: {signed}");
        assert_eq!(tx.recover_signer().expect("a signer"), accounts[2]);
        if want == 1 {
            assert_eq!(signed["tx"]["accessList"], json!([]), "{signed}");
        }
    }
    for request in [
        json!({"type": "0x1", "maxFeePerGas": "0x1"}),
        json!({"type": "0x0", "accessList": []}),
        json!({"type": "0x2", "gasPrice": "0x1"}),
        json!({"type": "0x4"}),
        json!({"type": "0x7"}),
    ] {
        let mut request = request;
        request["from"] = json!(accounts[2]);
        request["to"] = json!(to);
        let answer = node.call("eth_signTransaction", json!([request]));
        assert_eq!(answer["error"]["code"], -32000, "{request}: {answer}");
    }
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": accounts[2], "to": to, "type": "0x1", "gasPrice": "0x3b9aca00"}]),
    );
    let receipt = receipt_when_mined(&node, "the access-list transaction", &hash);
    assert_eq!(receipt["type"], "0x1", "{receipt}");

    // Filled in, unsigned: geth's eth_fillTransaction (the gas is estimated against the
    // sender's balance at the fee cap, so the sender must be able to pay).
    let filled = node.result(
        "eth_fillTransaction",
        json!([{"from": accounts[4], "to": to}]),
    );
    let tx = &filled["tx"];
    assert_eq!(tx["type"], "0x2", "{filled}");
    assert_eq!(tx["nonce"], "0x0");
    assert_eq!(tx["gas"], "0x5208");
    assert_eq!(tx["chainId"], "0x539");
    assert_eq!(tx["r"], "0x0");
    assert!(tx["maxFeePerGas"].is_string() && tx["maxPriorityFeePerGas"].is_string());
    let raw: Bytes = serde_json::from_value(filled["raw"].clone()).expect("raw bytes");
    assert_eq!(raw[0], 2, "an EIP-1559 envelope");
    // A legacy one unsigned, as geth leaves it: v, r and s zero, so no EIP-155 chain id, and
    // hashed that way.
    let filled = node.result(
        "eth_fillTransaction",
        json!([{"from": accounts[4], "to": to, "gasPrice": "0x3b9aca00", "gas": "0x5208"}]),
    );
    let tx = &filled["tx"];
    assert_eq!(
        (&tx["type"], &tx["v"], &tx["r"], &tx["s"]),
        (&json!("0x0"), &json!("0x0"), &json!("0x0"), &json!("0x0")),
        "{filled}"
    );
    assert!(tx.get("chainId").is_none(), "{filled}");
    let raw: Bytes = serde_json::from_value(filled["raw"].clone()).expect("raw bytes");
    assert!(raw.ends_with(&[0x80, 0x80, 0x80]), "{filled}");
    assert_eq!(
        tx["hash"],
        json!(alloy::primitives::keccak256(&raw)),
        "{filled}"
    );

    // Messages, in geth's and MetaMask's argument orders.
    for (method, params) in [
        ("eth_sign", json!([accounts[3], "0x68656c6c6f"])),
        ("personal_sign", json!(["0x68656c6c6f", accounts[3]])),
    ] {
        let signature: Bytes =
            serde_json::from_value(node.result(method, params)).expect("signature bytes");
        assert_eq!(signature.len(), 65);
        assert!(matches!(signature[64], 27 | 28), "v as 27 or 28");
        let signature = Signature::try_from(signature.as_ref()).expect("a signature");
        assert_eq!(
            signature
                .recover_address_from_msg(b"hello")
                .expect("recovers"),
            accounts[3],
            "{method}"
        );
    }

    // EIP-712: the specification's own example, whose signing hash it gives; as an object
    // and as the JSON text MetaMask and viem send.
    let mail = json!({
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"}
            ],
            "Person": [{"name": "name", "type": "string"}, {"name": "wallet", "type": "address"}],
            "Mail": [
                {"name": "from", "type": "Person"},
                {"name": "to", "type": "Person"},
                {"name": "contents", "type": "string"}
            ]
        },
        "primaryType": "Mail",
        "domain": {
            "name": "Ether Mail",
            "version": "1",
            "chainId": 1,
            "verifyingContract": "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC"
        },
        "message": {
            "from": {"name": "Cow", "wallet": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"},
            "to": {"name": "Bob", "wallet": "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"},
            "contents": "Hello, Bob!"
        }
    });
    let digest: alloy::primitives::B256 =
        "0xbe609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2"
            .parse()
            .unwrap();
    for typed in [mail.clone(), json!(mail.to_string())] {
        let signature: Bytes = serde_json::from_value(
            node.result("eth_signTypedData_v4", json!([accounts[5], typed])),
        )
        .expect("signature bytes");
        let signature = Signature::try_from(signature.as_ref()).expect("a signature");
        assert_eq!(
            signature
                .recover_address_from_prehash(&digest)
                .expect("recovers"),
            accounts[5]
        );
    }
    let r = node.call("eth_signTypedData_v4", json!([accounts[5], {"types": 1}]));
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // What the node cannot sign for, or will not.
    let stranger = Address::repeat_byte(0x77);
    for (method, params, message) in [
        (
            "eth_sendTransaction",
            json!([{"from": stranger, "to": to}]),
            "unknown account",
        ),
        ("eth_sign", json!([stranger, "0x00"]), "unknown account"),
        (
            "eth_sendTransaction",
            json!([{"from": ADDR0, "to": to, "chainId": "0x1"}]),
            "chainId does not match node's (have=1, want=1337)",
        ),
        (
            "eth_sendTransaction",
            json!([{"from": ADDR0}]),
            "contract creation without any data provided",
        ),
        (
            "eth_sendTransaction",
            json!([{"from": ADDR0, "to": to, "gasPrice": "0x1", "maxFeePerGas": "0x2"}]),
            "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified",
        ),
    ] {
        let r = node.call(method, params);
        assert_eq!(
            r["error"],
            json!({"code": -32000, "message": message}),
            "{method}: {r}"
        );
    }
    // A request the pool refuses is refused as sent signed (here: too little gas).
    let r = node.call(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "gas": "0x100"}]),
    );
    assert!(r.get("error").is_some(), "{r}");
}

fn quantity(v: &Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("a quantity: {v}"));
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex")
}

/// The test-chain controls hardhat and anvil users drive: blocks on demand, the clock moved
/// or set, and snapshots the chain is reverted to with what was mined after them gone.
#[test]
fn dev_node_mines_on_demand_moves_its_clock_and_reverts_to_snapshots() {
    let node = Node::start(TempDir::new("dev-controls"), Path::new("dev"), &["--dev"]);
    let head = |node: &Node| node.result("eth_getBlockByNumber", json!(["latest", false]));

    // A block on demand, empty; then at a set time; then three, the clock moved an hour ahead
    // and going on from the set time.
    let first = node.result("evm_snapshot", json!([]));
    assert_eq!(node.result("evm_mine", json!([])), "0x0");
    assert_eq!(quantity(&head(&node)["number"]), 1);
    assert_eq!(head(&node)["transactions"], json!([]));
    let at = quantity(&head(&node)["timestamp"]) + 1_000_000;
    assert_eq!(
        node.result("evm_setNextBlockTimestamp", json!([at])),
        Value::Null
    );
    node.result("evm_mine", json!([]));
    assert_eq!(quantity(&head(&node)["timestamp"]), at);
    // The answer is the whole offset from the wall clock: the set time's, plus the hour.
    let offset = node.result("evm_increaseTime", json!(["0xe10"]));
    let offset = offset
        .as_u64()
        .unwrap_or_else(|| panic!("a number, as anvil's: {offset}"));
    assert!(offset >= 3600 + 900_000, "{offset}");
    node.result("evm_mine", json!([{"blocks": 3}]));
    let last = head(&node);
    assert_eq!(quantity(&last["number"]), 5);
    assert!(quantity(&last["timestamp"]) >= at + 3600, "{last}");
    let at = quantity(&last["timestamp"]) + 50;
    node.result("evm_mine", json!([format!("{at:#x}")]));
    assert_eq!(quantity(&head(&node)["timestamp"]), at);

    // anvil's and hardhat's own: blocks an interval apart (the clock moved on by it before
    // each, so a second that passes meanwhile adds to the gap, as on anvil).
    let timestamp_of = |number: u64| {
        quantity(
            &node.result(
                "eth_getBlockByNumber",
                json!([format!("{number:#x}"), false]),
            )["timestamp"],
        )
    };
    let from = quantity(&head(&node)["timestamp"]);
    assert_eq!(
        node.result("anvil_mine", json!(["0x3", "0xa"])),
        Value::Null
    );
    assert_eq!(quantity(&head(&node)["number"]), 9);
    let mut previous = from;
    for number in 7..=9 {
        let gap = timestamp_of(number) - previous;
        assert!((10..=12).contains(&gap), "block {number}: {gap}");
        previous += gap;
    }
    node.result("hardhat_mine", json!([]));
    assert_eq!(quantity(&head(&node)["number"]), 10);
    // Time moved or set before it stays: hardhat's `time.increase()` sets the next timestamp
    // and mines with an interval of 1; viem's `mine` sends an interval of 0.
    let at = quantity(&head(&node)["timestamp"]) + 86_400;
    node.result("evm_setNextBlockTimestamp", json!([at]));
    node.result("hardhat_mine", json!(["0x3", "0x2"]));
    assert_eq!(timestamp_of(11), at);
    for number in 12..=13 {
        let gap = timestamp_of(number) - timestamp_of(number - 1);
        assert!((2..=4).contains(&gap), "block {number}: {gap}");
    }
    let before = quantity(&head(&node)["timestamp"]);
    node.result("evm_increaseTime", json!([3600]));
    node.result("anvil_mine", json!(["0x1", "0x0"]));
    let gap = quantity(&head(&node)["timestamp"]) - before;
    assert!((3600..=3602).contains(&gap), "{gap}");

    // A transfer after a snapshot, then back: the block and its transaction are gone, the
    // balance is what it was, and the snapshot is used up.
    let snapshot = node.result("evm_snapshot", json!([]));
    let before = head(&node);
    let to = address!("000000000000000000000000000000000000f00d");
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "value": "0x7"}]),
    );
    receipt_when_mined(&node, "the transfer", &hash);
    assert_eq!(node.result("eth_getBalance", json!([to, "latest"])), "0x7");
    assert_eq!(node.result("evm_revert", json!([snapshot])), json!(true));
    assert_eq!(head(&node)["hash"], before["hash"]);
    assert_eq!(node.result("eth_getBalance", json!([to, "latest"])), "0x0");
    assert_eq!(
        node.result("eth_getTransactionReceipt", json!([hash])),
        Value::Null
    );
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["finalized", false]))["hash"],
        before["hash"],
        "a dev chain's finality goes back with its head"
    );
    assert_eq!(node.result("evm_revert", json!([snapshot])), json!(false));
    // Ids are never given again: a new snapshot does not take the used-up one's id, so that
    // id stays refused rather than naming the new snapshot.
    let newer = node.result("evm_snapshot", json!([]));
    assert_ne!(newer, snapshot);
    assert_eq!(node.result("evm_revert", json!([snapshot])), json!(false));
    // The same transfer again: the sender's nonce is back too.
    let again = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "value": "0x7"}]),
    );
    let receipt = receipt_when_mined(&node, "the transfer again", &again);
    assert_eq!(
        node.result("eth_getTransactionByHash", json!([again]))["nonce"],
        "0x0"
    );
    assert_eq!(
        receipt["blockNumber"],
        json!(format!("{:#x}", quantity(&before["number"]) + 1))
    );

    // Back to the first snapshot: genesis.
    assert_eq!(node.result("evm_revert", json!([first])), json!(true));
    assert_eq!(node.result("eth_blockNumber", json!([])), "0x0");

    // What it refuses.
    for (method, params) in [
        ("evm_setNextBlockTimestamp", json!([0])),
        ("evm_mine", json!([{"blocks": 1_000_001}])),
        ("evm_increaseTime", json!([-5])),
        ("evm_increaseTime", json!(["soon"])),
        // Past what a timestamp, or the next block's, can hold.
        ("evm_setNextBlockTimestamp", json!([u64::MAX])),
        ("evm_increaseTime", json!([u64::MAX])),
    ] {
        let r = node.call(method, params);
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
    }
    assert_eq!(node.result("evm_revert", json!(["0x99"])), json!(false));
}

/// A timestamp set earlier than the wall clock (a fresh chain's genesis is at 0) is where the
/// clock goes on from, as on anvil and hardhat: the blocks after it do not jump to the wall
/// clock, `evm_increaseTime` counts from it, and its answer is the negative offset.
#[test]
fn dev_clock_goes_on_from_a_timestamp_before_the_wall_clock() {
    let node = Node::start(TempDir::new("dev-past-clock"), Path::new("dev"), &["--dev"]);
    let head_time = |node: &Node| {
        quantity(&node.result("eth_getBlockByNumber", json!(["latest", false]))["timestamp"])
    };
    let set = 1_000_000u64;
    node.result("evm_setNextBlockTimestamp", json!([set]));
    node.result("evm_mine", json!([]));
    assert_eq!(head_time(&node), set);
    node.result("evm_mine", json!([]));
    let next = head_time(&node);
    assert!((set + 1..set + 120).contains(&next), "{next}");

    let offset = node.result("evm_increaseTime", json!([3600]));
    let offset = offset
        .as_i64()
        .unwrap_or_else(|| panic!("a negative number: {offset}"));
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    assert!(
        (offset + wall - (next as i64 + 3600)).abs() < 120,
        "{offset}"
    );
    // A sent transaction's block too.
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": ADDR0, "value": "0x1"}]),
    );
    let receipt = receipt_when_mined(&node, "the transfer", &hash);
    let block = node.result("eth_getBlockByHash", json!([receipt["blockHash"], false]));
    let mined = quantity(&block["timestamp"]);
    assert!((next + 3600..next + 3720).contains(&mined), "{mined}");
}

/// anvil_setLoggingEnabled / hardhat_setLoggingEnabled: the node's log stops and starts again.
#[test]
fn dev_node_logging_turns_off_and_on() {
    let node = Node::start(TempDir::new("dev-logging"), Path::new("dev"), &["--dev"]);
    let mined = |node: &Node, number: u64| {
        node.log()
            .lines()
            .any(|l| l.contains("mined block") && l.contains(&format!("number={number}")))
    };
    node.result("evm_mine", json!([]));
    wait_for(&node, "the first block's log line", |n| {
        mined(n, 1).then_some(Value::Null)
    });
    assert_eq!(
        node.result("anvil_setLoggingEnabled", json!([false])),
        Value::Null
    );
    node.result("evm_mine", json!([]));
    assert_eq!(node.result("eth_blockNumber", json!([])), "0x2");
    assert_eq!(
        node.result("hardhat_setLoggingEnabled", json!([true])),
        json!(true)
    );
    node.result("evm_mine", json!([]));
    wait_for(&node, "the third block's log line", |n| {
        mined(n, 3).then_some(Value::Null)
    });
    assert!(!mined(&node, 2), "block 2 was mined with logging off");
    assert_invalid_params(&node, [("anvil_setLoggingEnabled", json!(["yes"]))]);
}

/// A blob transaction sent in its network form (with blobs, commitments and cell proofs) is
/// mined as the transaction alone: its raw bytes hash to its hash, as any client computes the
/// block's transactions root over them. A sidecar that does not belong to the transaction, or
/// whose proofs are false, is refused.
#[test]
fn blob_transactions_sent_with_their_sidecar_are_mined_without_it() {
    use alloy::{
        eips::eip7594::{BlobTransactionSidecarVariant, CELLS_PER_EXT_BLOB},
        primitives::keccak256,
    };
    let node = Node::start(TempDir::new("dev-blob"), Path::new("dev"), &["--dev"]);
    let network_form = |nonce, versioned, proofs| {
        support::dev_blob_tx(nonce, &[versioned], support::BlobForm::CellProofs(proofs))
    };
    let versioned = support::zero_blob_versioned_hash();

    let raw = network_form(0, versioned, CELLS_PER_EXT_BLOB);
    assert!(raw.len() > 2 * 131_072, "the sidecar travels with it");
    let hash = node.result("eth_sendRawTransaction", json!([raw]));
    let receipt = receipt_when_mined(&node, "the blob transaction's receipt", &hash);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    assert_eq!(receipt["blobGasUsed"], "0x20000", "{receipt}");
    let mined = node.result("eth_getRawTransactionByHash", json!([hash]));
    let mined = alloy::hex::decode(mined.as_str().expect("hex")).expect("hex");
    assert!(mined.len() < 1_000, "mined without its sidecar");
    assert_eq!(json!(keccak256(&mined)), hash);
    let tx = node.result("eth_getTransactionByHash", json!([hash]));
    assert_eq!(tx["blobVersionedHashes"], json!([versioned]), "{tx}");

    // Sidecars that do not belong to their transaction.
    let refused = |raw: String, words: &str| {
        let r = node.call("eth_sendRawTransaction", json!([raw]));
        assert_eq!(r["error"]["code"], -32000, "{r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{r}");
    };
    let mut other = versioned;
    other.0[31] ^= 1;
    refused(network_form(1, other, CELLS_PER_EXT_BLOB), "mismatches");
    refused(network_form(1, versioned, 1), "proofs");
    refused(
        support::dev_blob_tx(1, &[versioned], support::BlobForm::FalseCellProofs),
        "KZG verification error",
    );
    // Blob transactions no block could take, refused rather than left waiting for ever.
    let bare = |hashes: &[alloy::primitives::B256]| {
        support::dev_blob_tx(1, hashes, support::BlobForm::Bare)
    };
    refused(bare(&[]), "blobless blob transaction");
    refused(
        bare(&[versioned; 7]),
        "too many blobs in transaction: have 7, permitted 6",
    );
    let mut version_2 = versioned;
    version_2.0[0] = 2;
    refused(
        bare(&[version_2]),
        "blob 0 hash version mismatch (have 2, supported 1)",
    );
    // Nor can a set-code transaction without authorizations.
    let set_code = alloy::consensus::TxEip7702 {
        chain_id: 1337,
        nonce: 1,
        gas_limit: 50_000,
        max_fee_per_gas: 10_000_000_000,
        to: address!("000000000000000000000000000000000000b10b"),
        ..Default::default()
    };
    let signature = support::dev_key_signature(
        alloy::consensus::SignableTransaction::signature_hash(&set_code),
    );
    let set_code = alloy::consensus::TxEnvelope::from(
        alloy::consensus::SignableTransaction::into_signed(set_code, signature),
    );
    refused(
        format!(
            "0x{}",
            alloy::hex::encode(alloy::eips::Encodable2718::encoded_2718(&set_code))
        ),
        "EIP-7702 transaction with empty auth list",
    );
    // Still nothing of nonce 1 waits: every refusal left the pool alone.
    let waiting = node.result("txpool_status", json!([]));
    assert_eq!(waiting["pending"], "0x0", "{waiting}");

    // Blobs with data, their commitments and proofs made by the KZG library: taken and mined;
    // with two of the proofs swapped: refused.
    let taken_unless_swapped = |nonce, sidecar: BlobTransactionSidecarVariant| {
        let mut swapped = sidecar.clone();
        match &mut swapped {
            BlobTransactionSidecarVariant::Eip4844(s) => s.proofs.swap(0, 1),
            BlobTransactionSidecarVariant::Eip7594(s) => s.cell_proofs.swap(0, 1),
        }
        refused(
            support::dev_blob_tx_with(nonce, swapped),
            "KZG verification error",
        );
        let raw = support::dev_blob_tx_with(nonce, sidecar);
        let hash = node.result("eth_sendRawTransaction", json!([raw]));
        receipt_when_mined(&node, "the data blobs' receipt", &hash)
    };
    let kzg = simnode_api::pool::kzg_settings();
    let mut blobs = vec![alloy::eips::eip4844::Blob::ZERO; 2];
    blobs[0][31] = 0x42;
    blobs[1][1000] = 0x07;
    let per_cell =
        alloy::eips::eip7594::BlobTransactionSidecarEip7594::try_from_blobs_with_settings(
            blobs.clone(),
            kzg,
        )
        .expect("blobs of field elements");
    let receipt = taken_unless_swapped(1, per_cell.into());
    assert_eq!(receipt["blobGasUsed"], "0x40000", "{receipt}");
    // The dev chain is Osaka: a sidecar with a proof per blob, as tools made them before it, is
    // taken too (its cells' proofs computed).
    let per_blob =
        alloy::eips::eip4844::BlobTransactionSidecar::try_from_blobs_with_settings(blobs, kzg)
            .expect("blobs of field elements");
    let receipt = taken_unless_swapped(2, per_blob.into());
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    // A blob transaction behind a nonce gap is refused, as geth's blob pool and reth refuse it
    // (the account is at nonce 3).
    let r = node.call(
        "eth_sendRawTransaction",
        json!([support::dev_blob_tx(
            4,
            &[versioned],
            support::BlobForm::CellProofs(CELLS_PER_EXT_BLOB)
        )]),
    );
    assert_eq!(r["error"]["code"], 2, "{r}");
    assert_eq!(
        r["error"]["message"], "nonce too high: tx nonce 4, gapped nonce 3",
        "{r}"
    );
}

/// The node's accounts send blob transactions as geth's do: blobs alone get their commitments
/// and proofs computed (cell proofs on the Osaka dev chain) and the versioned hashes and blob
/// fee cap filled in; eth_fillTransaction and eth_signTransaction encode the transaction with
/// its sidecar; the mined transaction is without it. Before, blobs alone were dropped and the
/// transaction went out as a plain transfer.
#[test]
fn dev_accounts_send_blob_transactions() {
    use alloy::eips::eip7594::CELLS_PER_EXT_BLOB;
    let node = Node::start(
        TempDir::new("dev-blob-accounts"),
        Path::new("dev"),
        &["--dev"],
    );
    let from = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    let to = "0x000000000000000000000000000000000000b10b";
    let blob = |last: u8| format!("0x{}{last:02x}", "00".repeat(131_071));
    let refused = |method: &str, request: Value, words: &str| {
        let r = node.call(method, json!([request]));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{method} {words}: {r}");
    };

    let filled = node.result(
        "eth_fillTransaction",
        json!([{"from": from, "to": to, "blobs": [blob(1), blob(2)]}]),
    );
    let tx = &filled["tx"];
    assert_eq!(tx["type"], "0x3", "{tx}");
    let hashes = tx["blobVersionedHashes"]
        .as_array()
        .expect("hashes")
        .clone();
    assert_eq!(hashes.len(), 2, "{tx}");
    assert!(tx["maxFeePerBlobGas"].is_string(), "{tx}");
    // Described with its sidecar, as geth puts the blobs back on what it fills or signs.
    assert_eq!(tx["blobs"].as_array().map(Vec::len), Some(2), "{tx}");
    assert_eq!(tx["commitments"].as_array().map(Vec::len), Some(2), "{tx}");
    let raw = filled["raw"].as_str().expect("raw");
    assert!(raw.len() > 4 * 131_072, "encoded with its sidecar");

    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": from, "to": to, "blobs": [blob(1), blob(2)]}]),
    );
    let receipt = receipt_when_mined(&node, "the blob transaction", &hash);
    assert_eq!(receipt["blobGasUsed"], "0x40000", "{receipt}");
    let mined = node.result("eth_getTransactionByHash", json!([hash]));
    assert_eq!(mined["blobVersionedHashes"], json!(hashes), "{mined}");
    let mined_raw = node.result("eth_getRawTransactionByHash", json!([hash]));
    assert!(
        mined_raw.as_str().expect("raw").len() < 2_000,
        "mined without its sidecar"
    );

    // Signed with the sidecar: eth_sendRawTransaction takes the encoding as it is.
    let signed = node.result(
        "eth_signTransaction",
        json!([{"from": from, "to": to, "blobs": [blob(3)], "blobVersionedHashes": null}]),
    );
    let hash = node.result("eth_sendRawTransaction", json!([signed["raw"]]));
    assert_eq!(hash, signed["tx"]["hash"]);
    receipt_when_mined(&node, "the signed blob transaction", &hash);

    // Commitments and proofs given must belong to the blobs.
    let per_blob = alloy::eips::eip4844::BlobTransactionSidecar::try_from_blobs_with_settings(
        vec![alloy::eips::eip4844::Blob::ZERO; 1],
        simnode_api::pool::kzg_settings(),
    )
    .expect("the zero blob");
    let cells = vec![per_blob.proofs[0]; CELLS_PER_EXT_BLOB];
    refused(
        "eth_sendTransaction",
        json!({"from": from, "to": to, "blobs": [blob(1)], "commitments": per_blob.commitments, "proofs": cells}),
        "KZG verification error",
    );
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": from, "to": to, "blobs": [blob(0)], "commitments": per_blob.commitments, "proofs": per_blob.proofs}]),
    );
    receipt_when_mined(&node, "the proof-per-blob transaction", &hash);
    refused(
        "eth_sendTransaction",
        json!({"from": from, "blobs": [blob(1)]}),
        "missing \"to\" in blob transaction",
    );
    refused(
        "eth_fillTransaction",
        json!({"from": from, "to": to, "blobs": [blob(1)], "blobVersionedHashes": [hashes[1]]}),
        "blob hash verification failed",
    );
    refused(
        "eth_fillTransaction",
        json!({"from": from, "to": to, "blobs": [blob(1)], "proofs": []}),
        "blob proofs provided while commitments were not",
    );
    refused(
        "eth_fillTransaction",
        json!({"from": from, "to": to, "blobs": vec![blob(1); 7]}),
        "too many blobs in transaction: have 7, permitted 6",
    );
    assert_invalid_params(
        &node,
        [(
            "eth_fillTransaction",
            json!([{"from": from, "to": to, "blobs": ["0x0102"]}]),
        )],
    );

    // For an impersonated account too, the sidecar goes to the pool, not into the block.
    let stranger = "0x000000000000000000000000000000000000a11c";
    node.result("anvil_setBalance", json!([stranger, "0xde0b6b3a7640000"]));
    let hash = node.result(
        "eth_sendUnsignedTransaction",
        json!([{"from": stranger, "to": to, "blobs": [blob(4)]}]),
    );
    let receipt = receipt_when_mined(&node, "the impersonated blob transaction", &hash);
    assert_eq!(receipt["blobGasUsed"], "0x20000", "{receipt}");
    let mined_raw = node.result("eth_getRawTransactionByHash", json!([hash]));
    assert!(
        mined_raw.as_str().expect("raw").len() < 2_000,
        "mined without its sidecar"
    );
}

/// EIP-7966, as geth serves it: eth_sendRawTransactionSync answers with the receipt of the block
/// that takes the transaction, or with error 4 and the transaction's hash once the wait is over
/// (the transaction stays in the pool and is mined when it can be).
#[test]
fn send_raw_transaction_sync_answers_with_the_receipt_or_the_hash() {
    let node = Node::start(
        TempDir::new("dev-sync"),
        Path::new("dev"),
        &["--dev", "--rpc.tx-sync-max-timeout", "1500"],
    );
    let to = address!("000000000000000000000000000000000000beef");

    // Mined at once: the receipt is the one the chain keeps.
    let receipt = node.result(
        "eth_sendRawTransactionSync",
        json!([transfer(0, to, U256::from(1_000u64))]),
    );
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    let stored = node.result(
        "eth_getTransactionReceipt",
        json!([receipt["transactionHash"]]),
    );
    assert_eq!(receipt, stored);
    // The wait as a hex quantity, as well as a number.
    let receipt = node.result(
        "eth_sendRawTransactionSync",
        json!([transfer(1, to, U256::from(1_000u64)), "0x3e8"]),
    );
    assert_eq!(receipt["blockNumber"], "0x2", "{receipt}");

    // Behind a nonce gap no block takes it: error 4 after the wait, with the hash to follow.
    let timed_out = |raw: String, wait: Value, shown: &str, at_least: Duration| {
        let started = Instant::now();
        let r = node.call("eth_sendRawTransactionSync", json!([raw, wait]));
        let took = started.elapsed();
        assert_eq!(r["error"]["code"], 4, "{r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(shown), "{r}");
        assert!(
            took >= at_least && took < at_least + Duration::from_secs(3),
            "{took:?}"
        );
        let hash = r["error"]["data"].clone();
        let pending = node.result("eth_getTransactionByHash", json!([hash]));
        assert_eq!(pending["nonce"], json!(raw_nonce(&raw)), "{pending}");
        assert_eq!(pending["blockNumber"], Value::Null, "{pending}");
        hash
    };
    let third = timed_out(
        transfer(3, to, U256::from(1u64)),
        json!(300),
        "300ms",
        Duration::from_millis(300),
    );
    // A wait past --rpc.tx-sync-max-timeout is cut to it.
    let fourth = timed_out(
        transfer(4, to, U256::from(1u64)),
        json!(3_600_000),
        "1.5s",
        Duration::from_millis(1_500),
    );

    // A request waiting while the gap is filled by another gets its receipt from the block.
    let answer = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            node.call(
                "eth_sendRawTransactionSync",
                json!([transfer(5, to, U256::from(1u64)), 1_400]),
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        node.result(
            "eth_sendRawTransaction",
            json!([transfer(2, to, U256::from(1u64))]),
        );
        waiting.join().expect("the waiting request")
    });
    let receipt = &answer["result"];
    assert_eq!(receipt["status"], "0x1", "{answer}");
    let mined = node.result(
        "eth_getTransactionByHash",
        json!([receipt["transactionHash"]]),
    );
    assert_eq!(mined["nonce"], "0x5", "{mined}");
    for hash in [third, fourth] {
        let mined = node.result("eth_getTransactionReceipt", json!([hash]));
        assert_eq!(mined["status"], "0x1", "{mined}");
    }

    // Refused transactions are answered at once, as eth_sendRawTransaction answers them.
    let r = node.call(
        "eth_sendRawTransactionSync",
        json!([transfer(0, to, U256::from(1u64))]),
    );
    assert_eq!(r["error"]["code"], 1, "nonce too low: {r}");
    for bad in [json!("soon"), json!(-1), json!(1.5)] {
        let r = node.call(
            "eth_sendRawTransactionSync",
            json!([transfer(6, to, U256::from(1u64)), bad]),
        );
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    let r = node.call(
        "eth_sendRawTransactionSync",
        json!([transfer(6, to, U256::from(1u64)), 100, 1]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// The nonce of a transaction signed by [`transfer`], as a quantity.
fn raw_nonce(raw: &str) -> String {
    use alloy::{consensus::Transaction as _, eips::eip2718::Decodable2718};
    let bytes = alloy::hex::decode(raw).expect("hex");
    let tx =
        alloy::consensus::TxEnvelope::decode_2718(&mut bytes.as_slice()).expect("a transaction");
    format!("{:#x}", tx.nonce())
}

/// anvil's and hardhat's state edits: each is a block of its own (no transactions, the marker in
/// extraData) whose stored state carries the edit, so reads, calls, later transactions and
/// evm_revert all see it, and the block's stateRoot is the root of what the node stores.
#[test]
fn dev_node_state_edits_are_blocks_of_their_own() {
    let node = Node::start(TempDir::new("dev-edits"), Path::new("dev"), &["--dev"]);
    let head = |node: &Node| node.result("eth_getBlockByNumber", json!(["latest", false]));
    let number = |node: &Node| quantity(&head(node)["number"]);
    let who = address!("000000000000000000000000000000000000beef");
    let contract = address!("000000000000000000000000000000000000c0de");
    let start = number(&node);

    // Balance: anvil's name answers null, hardhat's true; one block per edit.
    assert_eq!(
        node.result("anvil_setBalance", json!([who, "0x3635c9adc5dea00000"])),
        Value::Null
    );
    assert_eq!(
        node.result("eth_getBalance", json!([who, "latest"])),
        "0x3635c9adc5dea00000"
    );
    let edit = head(&node);
    assert_eq!(quantity(&edit["number"]), start + 1);
    assert_eq!(edit["transactions"], json!([]));
    assert_eq!(
        edit["extraData"],
        format!("0x{}", alloy::hex::encode(b"simnode state edit"))
    );
    assert_eq!(
        node.result("hardhat_setBalance", json!([who, "1000"])),
        json!(true)
    );
    assert_eq!(
        node.result("eth_getBalance", json!([who, "latest"])),
        "0x3e8"
    );
    // The state before the edit is still there.
    assert_eq!(
        node.result("eth_getBalance", json!([who, format!("{start:#x}")])),
        "0x0"
    );

    // Nonce, code and storage.
    assert_eq!(
        node.result("hardhat_setNonce", json!([who, "0x5"])),
        json!(true)
    );
    assert_eq!(
        node.result("eth_getTransactionCount", json!([who, "latest"])),
        "0x5"
    );
    // PUSH1 0x2a PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN: returns 42.
    let code = "0x602a60005260206000f3";
    assert_eq!(
        node.result("anvil_setCode", json!([contract, code])),
        Value::Null
    );
    assert_eq!(
        node.result("eth_getCode", json!([contract, "latest"])),
        code
    );
    let word = |n: u64| format!("0x{n:064x}");
    assert_eq!(
        node.result("eth_call", json!([{"to": contract}, "latest"])),
        word(42)
    );
    assert_eq!(
        node.result("anvil_setStorageAt", json!([contract, "0x1", word(7)])),
        json!(true)
    );
    assert_eq!(
        node.result("hardhat_setStorageAt", json!([contract, "0x2", word(9)])),
        json!(true)
    );
    assert_eq!(
        node.result("eth_getStorageAt", json!([contract, "0x1", "latest"])),
        word(7)
    );
    assert_eq!(
        node.result("eth_getStorageAt", json!([contract, "0x2", "latest"])),
        word(9)
    );
    assert_eq!(number(&node), start + 6, "one block per edit");

    // The header's root is the root of the stored state: eth_getProof rebuilds the tries from
    // the tables, and its first account node hashes to the header's stateRoot.
    let proof = node.result("eth_getProof", json!([contract, ["0x1"], "latest"]));
    assert_eq!(proof["storageProof"][0]["value"], "0x7");
    assert_eq!(
        node.result("web3_sha3", json!([proof["accountProof"][0]])),
        head(&node)["stateRoot"]
    );
    // Only execution can be traced or witnessed: an edit block has no traces, and no witness.
    assert_eq!(node.result("trace_block", json!(["latest"])), json!([]));
    let witness = node.call("debug_executionWitness", json!(["latest"]));
    assert_eq!(witness["error"]["code"], -32000, "{witness}");

    // A nonce edit of a dev account: its next transaction takes the new nonce and is mined on
    // the edited state.
    assert_eq!(
        node.result("anvil_setNonce", json!([ADDR0, "0x10"])),
        Value::Null
    );
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": contract, "value": "0x1"}]),
    );
    let receipt = receipt_when_mined(&node, "the transaction after the nonce edit", &hash);
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(
        node.result("eth_getTransactionByHash", json!([hash]))["nonce"],
        "0x10"
    );
    // The block after the edits executes again to its own root.
    let mined = node.result("debug_executionWitness", json!([receipt["blockNumber"]]));
    assert!(mined["state"].is_array(), "{mined}");

    // Emptied, an account is gone; a snapshot taken before an edit takes it back.
    let snapshot = node.result("evm_snapshot", json!([]));
    node.result("anvil_setBalance", json!([who, "0x0"]));
    node.result("anvil_setNonce", json!([who, "0x0"]));
    let gone = node.result("eth_getProof", json!([who, [], "latest"]));
    assert_eq!(gone["balance"], "0x0");
    assert_eq!(gone["nonce"], "0x0");
    assert_eq!(node.result("evm_revert", json!([snapshot])), json!(true));
    assert_eq!(
        node.result("eth_getBalance", json!([who, "latest"])),
        "0x3e8"
    );
    assert_eq!(
        node.result("eth_getTransactionCount", json!([who, "latest"])),
        "0x5"
    );

    // Bad input is refused before anything is mined.
    let before = number(&node);
    assert_invalid_params(
        &node,
        [
            ("anvil_setBalance", json!([who, "-1"])),
            ("anvil_setBalance", json!([who, "0x"])),
            // ruint reads "" as zero: it once wiped the balance.
            ("anvil_setBalance", json!([who, ""])),
            ("anvil_setNonce", json!([who, ""])),
            (
                "anvil_setBalance",
                json!([who, format!("0x1{}", "0".repeat(64))]),
            ),
            ("anvil_setNonce", json!([who, "0x10000000000000000"])),
            ("anvil_setCode", json!([contract, "0xef0100aa"])),
            ("anvil_setCode", json!([contract, "0xzz"])),
            ("anvil_setStorageAt", json!([contract, "0x1", "7"])),
            (
                "anvil_setStorageAt",
                json!([contract, "0x1", format!("0x{}", "f".repeat(65))]),
            ),
            ("hardhat_setBalance", json!(["0x1234", "0x1"])),
        ],
    );
    assert_eq!(number(&node), before);
}

/// anvil's and hardhat's impersonation: eth_sendTransaction sends for an account without its
/// key, even a contract's. The transaction names its sender in a stand-in signature, hashes
/// like any other, and its block (marked, EIP-3607 off) replays to the same traces and root.
#[test]
fn dev_node_sends_for_impersonated_accounts() {
    let node = Node::start(
        TempDir::new("dev-impersonate"),
        Path::new("dev"),
        &["--dev"],
    );
    let who = address!("000000000000000000000000000000000000beef");
    let to = address!("0000000000000000000000000000000000002222");
    let contract = address!("000000000000000000000000000000000000c0de");
    let send = |node: &Node, from: Address, value: &str| {
        node.call(
            "eth_sendTransaction",
            json!([{"from": from, "to": to, "value": value}]),
        )
    };
    let mined =
        |node: &Node, hash: &Value| receipt_when_mined(node, "the impersonated transaction", hash);
    let accounts = |node: &Node| node.result("eth_accounts", json!([]));
    let marker = format!("0x{}", alloy::hex::encode(b"simnode impersonation"));

    // Not impersonated: the node has no key for it.
    assert_eq!(send(&node, who, "0x1")["error"]["code"], -32000);
    assert_eq!(
        node.result("anvil_impersonateAccount", json!([who])),
        Value::Null
    );
    let listed = accounts(&node);
    assert_eq!(listed.as_array().unwrap().len(), 11, "{listed}");
    assert_eq!(listed[10], json!(who));
    // Checked as a signed transaction would be: no funds yet.
    let poor = send(&node, who, "0x1");
    assert!(
        poor["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("insufficient funds"),
        "{poor}"
    );
    node.result("anvil_setBalance", json!([who, "0xde0b6b3a7640000"]));
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": who, "to": to, "value": "0x5"}]),
    );
    let receipt = mined(&node, &hash);
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(receipt["from"], json!(who));
    let tx = node.result("eth_getTransactionByHash", json!([hash]));
    assert_eq!(tx["from"], json!(who));
    assert_eq!(tx["r"], "0xbeef");
    assert_eq!(tx["s"], "0x1");
    // The hash is that of the encoding, as for any transaction.
    let raw = node.result("eth_getRawTransactionByHash", json!([hash]));
    assert_eq!(node.result("web3_sha3", json!([raw])), hash);
    assert_eq!(node.result("eth_getBalance", json!([to, "latest"])), "0x5");
    let block = node.result(
        "eth_getBlockByNumber",
        json!([receipt["blockNumber"], false]),
    );
    assert_eq!(block["extraData"], marker);
    // Replays read the stored sender.
    let traced = node.result(
        "debug_traceTransaction",
        json!([hash, {"tracer": "callTracer"}]),
    );
    assert_eq!(traced["from"], json!(who));
    assert_eq!(traced["value"], "0x5");
    let witness = node.result("debug_executionWitness", json!([receipt["blockNumber"]]));
    assert!(witness["state"].is_array(), "{witness}");
    // Nothing is signed for it.
    let signed = node.call(
        "eth_signTransaction",
        json!([{"from": who, "to": to, "value": "0x1"}]),
    );
    assert_eq!(signed["error"]["code"], -32000, "{signed}");

    // A contract sends: EIP-3607 is off in the marked block, when mined and when traced.
    node.result("anvil_setCode", json!([contract, "0x602a60005260206000f3"]));
    node.result("anvil_setBalance", json!([contract, "0xde0b6b3a7640000"]));
    assert_eq!(
        node.result("hardhat_impersonateAccount", json!([contract])),
        json!(true)
    );
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": contract, "to": to, "value": "0x7"}]),
    );
    let receipt = mined(&node, &hash);
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(node.result("eth_getBalance", json!([to, "latest"])), "0xc");
    let traces = node.result("trace_transaction", json!([hash]));
    assert_eq!(traces[0]["action"]["from"], json!(contract), "{traces}");

    // Stopped: unknown again, and off the list; a signed transaction's block is not marked.
    assert_eq!(
        node.result("anvil_stopImpersonatingAccount", json!([who])),
        Value::Null
    );
    assert_eq!(
        node.result("hardhat_stopImpersonatingAccount", json!([contract])),
        json!(true)
    );
    assert_eq!(send(&node, who, "0x1")["error"]["code"], -32000);
    assert_eq!(accounts(&node).as_array().unwrap().len(), 10);
    // anvil's eth_sendUnsignedTransaction sends for it all the same (and wants a sender).
    let hash = node.result(
        "eth_sendUnsignedTransaction",
        json!([{"from": who, "to": to, "value": "0x3"}]),
    );
    assert_eq!(mined(&node, &hash)["from"], json!(who));
    let anonymous = node.call("eth_sendUnsignedTransaction", json!([{"to": to}]));
    assert_eq!(anonymous["error"]["code"], -32602, "{anonymous}");
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "value": "0x1"}]),
    );
    let receipt = mined(&node, &hash);
    let block = node.result(
        "eth_getBlockByNumber",
        json!([receipt["blockNumber"], false]),
    );
    assert_ne!(block["extraData"], marker);

    // Auto impersonation covers every account without a key, and lists none.
    assert_eq!(
        node.result("anvil_autoImpersonateAccount", json!([true])),
        Value::Null
    );
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": who, "to": to, "value": "0x1"}]),
    );
    assert_eq!(mined(&node, &hash)["status"], "0x1");
    assert_eq!(accounts(&node).as_array().unwrap().len(), 10);
    node.result("anvil_autoImpersonateAccount", json!([false]));
    assert_eq!(send(&node, who, "0x1")["error"]["code"], -32000);

    assert_invalid_params(
        &node,
        [
            ("anvil_impersonateAccount", json!(["0x1234"])),
            ("anvil_autoImpersonateAccount", json!(["yes"])),
            ("hardhat_impersonateAccount", json!([])),
        ],
    );
}

/// anvil's mining modes (automine on and off, interval mining), its pool controls and its
/// coinbase, as test suites use them to put several transactions in one block.
#[test]
fn dev_node_mining_modes_pool_drops_and_coinbase() {
    let node = Node::start(TempDir::new("dev-modes"), Path::new("dev"), &["--dev"]);
    let number = |node: &Node| quantity(&node.result("eth_blockNumber", json!([])));
    let pending = |node: &Node| quantity(&node.result("txpool_status", json!([]))["pending"]);
    let to = address!("0000000000000000000000000000000000002222");
    let coinbase = address!("00000000000000000000000000000000000c0b1e");
    let send = |node: &Node| {
        node.result(
            "eth_sendTransaction",
            json!([{"from": ADDR0, "to": to, "value": "0x1"}]),
        )
    };
    let receipt = |node: &Node, hash: &Value| receipt_when_mined(node, "a receipt", hash);
    assert_eq!(node.result("anvil_getAutomine", json!([])), json!(true));

    // Automine off: transactions wait until a block is asked for, and go in one block.
    assert_eq!(node.result("evm_setAutomine", json!([false])), Value::Null);
    assert_eq!(node.result("hardhat_getAutomine", json!([])), json!(false));
    let start = number(&node);
    let first = send(&node);
    let second = send(&node);
    let third = send(&node);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(number(&node), start, "nothing mined without automine");
    assert_eq!(pending(&node), 3);
    // Dropped: gone from the pool (anvil answers its hash, hardhat whether it was there).
    assert_eq!(node.result("anvil_dropTransaction", json!([third])), third);
    assert_eq!(
        node.result("anvil_dropTransaction", json!([third])),
        Value::Null,
        "gone already"
    );
    assert_eq!(
        node.result("hardhat_dropTransaction", json!([third])),
        json!(false)
    );
    assert_eq!(pending(&node), 2);
    assert_eq!(
        node.result("eth_getTransactionByHash", json!([third])),
        Value::Null
    );
    assert_eq!(
        node.result("anvil_setCoinbase", json!([coinbase])),
        Value::Null
    );
    node.result("evm_mine", json!([]));
    let (a, b) = (receipt(&node, &first), receipt(&node, &second));
    assert_eq!(a["blockNumber"], b["blockNumber"], "one block for both");
    let block = node.result("eth_getBlockByNumber", json!([a["blockNumber"], false]));
    assert_eq!(block["miner"], json!(coinbase));
    assert_ne!(
        node.result("eth_getBalance", json!([coinbase, "latest"])),
        "0x0"
    );
    assert_eq!(pending(&node), 0);

    // A block takes the best-paying transaction first, whoever sent first (geth's miner and
    // anvil's fee ordering); the pending block shows the same order.
    let other = node.result("eth_accounts", json!([]))[1].clone();
    let tipping = |from: &Value, tip: &str| {
        node.result(
            "eth_sendTransaction",
            json!([{"from": from, "to": to, "value": "0x1", "maxPriorityFeePerGas": tip,
                    "maxFeePerGas": "0x174876e800"}]),
        )
    };
    let low = tipping(&json!(ADDR0), "0x3b9aca00");
    let high = tipping(&other, "0x12a05f200");
    // The node's accounts' waiting transactions, as geth lists them.
    let ours = node.result("eth_pendingTransactions", json!([]));
    let mut hashes: Vec<&Value> = ours
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["hash"])
        .collect();
    hashes.sort_by_key(|h| h.as_str().map(str::to_owned));
    let mut sent = vec![&low, &high];
    sent.sort_by_key(|h| h.as_str().map(str::to_owned));
    assert_eq!(hashes, sent, "{ours}");
    assert_eq!(ours[0]["blockHash"], Value::Null, "{ours}");
    let in_pending = node.result("eth_getBlockByNumber", json!(["pending", false]));
    assert_eq!(
        in_pending["transactions"],
        json!([high, low]),
        "{in_pending}"
    );
    node.result("evm_mine", json!([]));
    let mined = receipt(&node, &low)["blockNumber"].clone();
    let block = node.result("eth_getBlockByNumber", json!([mined, false]));
    assert_eq!(block["transactions"], json!([high, low]), "{block}");

    // Clearing the pool, by sender and whole.
    send(&node);
    node.result("anvil_removePoolTransactions", json!([ADDR0]));
    assert_eq!(pending(&node), 0);
    send(&node);
    node.result("anvil_dropAllTransactions", json!([]));
    assert_eq!(pending(&node), 0);
    // Its nonce is free again.
    let waiting = send(&node);
    // Automine back on mines what waits at once.
    assert_eq!(node.result("anvil_setAutomine", json!([true])), Value::Null);
    assert_eq!(receipt(&node, &waiting)["status"], "0x1");
    let hash = send(&node);
    assert_eq!(receipt(&node, &hash)["status"], "0x1");

    // Interval mining: blocks come by themselves, empty ones too; 0 stops it.
    assert_eq!(
        node.result("evm_setIntervalMining", json!([1])),
        Value::Null
    );
    assert_eq!(node.result("anvil_getAutomine", json!([])), json!(false));
    let at = number(&node);
    wait_for(&node, "two interval blocks", |n| {
        (number(n) >= at + 2).then_some(Value::Null)
    });
    assert_eq!(
        node.result("anvil_setIntervalMining", json!(["0x0"])),
        Value::Null
    );
    // A block the miner was building when the mode changed may still land.
    std::thread::sleep(Duration::from_millis(200));
    let stopped = number(&node);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(number(&node), stopped, "no interval blocks after 0");
    assert_eq!(
        node.result("hardhat_setCoinbase", json!([ADDR0])),
        json!(true)
    );

    assert_invalid_params(
        &node,
        [
            ("evm_setIntervalMining", json!(["-1"])),
            ("evm_setAutomine", json!(["yes"])),
            ("anvil_dropTransaction", json!(["0x12"])),
            ("anvil_setCoinbase", json!([])),
        ],
    );
}

/// anvil_reset / hardhat_reset without forking: back to genesis, pool and snapshots emptied;
/// anvil's names of the evm_* controls answer as those do.
#[test]
fn dev_node_resets_to_genesis() {
    let node = Node::start(TempDir::new("dev-reset"), Path::new("dev"), &["--dev"]);
    let to = address!("0000000000000000000000000000000000002222");
    let genesis = node.result("eth_getBlockByNumber", json!(["0x0", false]));
    // Shanghai holds from genesis: its body has an empty withdrawals list, as geth's and
    // anvil's, counted in its size and raw form.
    assert_eq!(genesis["withdrawals"], json!([]), "{genesis}");
    let raw = node.result("debug_getRawBlock", json!(["0x0"]));
    let raw_len = (raw.as_str().unwrap_or_default().len() - 2) / 2;
    assert_eq!(genesis["size"], json!(format!("{raw_len:#x}")));
    assert!(
        raw.as_str().unwrap_or_default().ends_with("c0c0c0"),
        "{raw}"
    );
    let snapshot = node.result("anvil_snapshot", json!([]));
    // The metadata tools read to tell a dev chain and its resets apart.
    let before = node.result("anvil_metadata", json!([]));
    assert_eq!(
        before["clientVersion"],
        node.result("web3_clientVersion", json!([]))
    );
    assert_eq!(before["chainId"], json!(1337));
    assert_eq!(before["latestBlockNumber"], json!(0));
    assert_eq!(before["latestBlockHash"], genesis["hash"]);
    assert_eq!(before["forkedNetwork"], Value::Null);
    assert_eq!(
        before["snapshots"],
        json!({snapshot.as_str().unwrap_or_default(): [0, genesis["hash"]]})
    );
    let instance = before["instanceId"].clone();
    assert_eq!(instance.as_str().map(str::len), Some(66), "{before}");
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "value": "0x1"}]),
    );
    receipt_when_mined(&node, "the transfer", &hash);
    node.result("anvil_increaseTime", json!([3600]));
    node.result("evm_setAutomine", json!([false]));
    node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "value": "0x2"}]),
    );
    // Forking is not served: refused, nothing changed.
    let fork = node.call(
        "hardhat_reset",
        json!([{"forking": {"jsonRpcUrl": "http://localhost:8545"}}]),
    );
    assert_eq!(fork["error"]["code"], -32602, "{fork}");
    assert_eq!(node.result("eth_blockNumber", json!([])), "0x1");

    let after_mining = node.result("hardhat_metadata", json!([]));
    assert_eq!(
        after_mining["instanceId"], instance,
        "the same chain until a reset"
    );
    assert_eq!(after_mining["latestBlockNumber"], json!(1));
    assert_eq!(node.result("anvil_reset", json!([])), Value::Null);
    assert_eq!(node.result("eth_blockNumber", json!([])), "0x0");
    let after_reset = node.result("anvil_metadata", json!([]));
    assert_ne!(
        after_reset["instanceId"], instance,
        "a reset chain is a new instance"
    );
    assert_eq!(after_reset["snapshots"], json!({}));
    assert_eq!(after_reset["latestBlockNumber"], json!(0));
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["latest", false]))["hash"],
        genesis["hash"]
    );
    assert_eq!(node.result("eth_getBalance", json!([to, "latest"])), "0x0");
    assert_eq!(
        node.result("eth_getTransactionReceipt", json!([hash])),
        Value::Null
    );
    assert_eq!(
        node.result("txpool_status", json!([]))["pending"],
        "0x0",
        "the pool is emptied"
    );
    assert_eq!(
        node.result("anvil_revert", json!([snapshot])),
        json!(false),
        "snapshots are forgotten"
    );
    // The chain goes on from genesis, on the wall clock again.
    node.result("evm_setAutomine", json!([true]));
    assert_eq!(
        node.result("hardhat_reset", json!([{"forking": null}])),
        json!(true)
    );
    node.result("evm_mine", json!([]));
    let block = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(block["number"], "0x1");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(quantity(&block["timestamp"]) < now + 600, "{block}");

    // A restart keeps the chain, so it keeps the instance; the second reset renewed it.
    let instance = node.result("anvil_metadata", json!([]))["instanceId"].clone();
    assert_ne!(instance, after_reset["instanceId"]);
    let kept = node.result("evm_snapshot", json!([]));
    let node = Node::start(node.stop(), Path::new("dev"), &["--dev"]);
    let restarted = node.result("anvil_metadata", json!([]));
    assert_eq!(restarted["instanceId"], instance);
    assert_eq!(restarted["latestBlockNumber"], json!(1));
    // Snapshots do not outlive the run, and the new run's ids are new: as many snapshots as
    // the kept id counts do not give it again.
    let fresh: Vec<Value> = (0..quantity(&kept))
        .map(|_| node.result("evm_snapshot", json!([])))
        .collect();
    assert!(!fresh.contains(&kept), "{kept} given again: {fresh:?}");
    assert_eq!(node.result("evm_revert", json!([kept])), json!(false));
    assert_eq!(node.result("evm_revert", json!([fresh[0]])), json!(true));
}

/// anvil_setNextBlockBaseFeePerGas: one block takes the base fee set, the blocks after it
/// derive theirs from it as EIP-1559 does; transactions pay it.
#[test]
fn dev_node_next_block_base_fee() {
    let node = Node::start(TempDir::new("dev-base-fee"), Path::new("dev"), &["--dev"]);
    let to = address!("0000000000000000000000000000000000002222");
    let latest = |node: &Node| node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(
        node.result("anvil_setNextBlockBaseFeePerGas", json!(["0x7"])),
        Value::Null
    );
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": to, "value": "0x1", "maxPriorityFeePerGas": "0x2"}]),
    );
    let receipt = receipt_when_mined(&node, "the transfer", &hash);
    let block = node.result(
        "eth_getBlockByNumber",
        json!([receipt["blockNumber"], false]),
    );
    assert_eq!(block["baseFeePerGas"], "0x7");
    assert_eq!(receipt["effectiveGasPrice"], "0x9");
    // Used up: the next block derives its own (a block under its gas target lowers it).
    assert_eq!(
        node.result("hardhat_setNextBlockBaseFeePerGas", json!([1000])),
        json!(true)
    );
    node.result("evm_mine", json!([]));
    assert_eq!(latest(&node)["baseFeePerGas"], "0x3e8");
    node.result("evm_mine", json!([]));
    let derived = quantity(&latest(&node)["baseFeePerGas"]);
    assert!(derived < 1000 && derived > 800, "{derived}");
    for params in [json!(["-1"]), json!([]), json!(["0x1ffffffffffffffff"])] {
        let answer = node.call("anvil_setNextBlockBaseFeePerGas", params.clone());
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
}

/// anvil's block gas limit, timestamp interval and setTime.
#[test]
fn dev_node_gas_limit_and_timestamp_interval() {
    let node = Node::start(TempDir::new("dev-gas-limit"), Path::new("dev"), &["--dev"]);
    let latest = |node: &Node| node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(
        node.result("evm_setBlockGasLimit", json!(["0x1000000"])),
        json!(true)
    );
    node.result("evm_mine", json!([]));
    assert_eq!(latest(&node)["gasLimit"], "0x1000000");
    node.result("evm_mine", json!([]));
    assert_eq!(latest(&node)["gasLimit"], "0x1000000", "it stays");
    assert_eq!(
        node.result("anvil_setBlockGasLimit", json!([30_000_000])),
        json!(true)
    );

    // Blocks step by the interval from their parent, whatever the clock says.
    assert_eq!(
        node.result("anvil_setBlockTimestampInterval", json!([100])),
        Value::Null
    );
    node.result("evm_mine", json!([]));
    let first = quantity(&latest(&node)["timestamp"]);
    node.result("evm_mine", json!([]));
    assert_eq!(quantity(&latest(&node)["timestamp"]), first + 100);
    assert_eq!(latest(&node)["gasLimit"], "0x1c9c380");
    assert_eq!(
        node.result("anvil_removeBlockTimestampInterval", json!([])),
        json!(true)
    );
    assert_eq!(
        node.result("anvil_removeBlockTimestampInterval", json!([])),
        json!(false)
    );

    // setTime: the next block's timestamp, answered as seconds ahead of the wall clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = first + 100_000;
    let ahead = node.result("anvil_setTime", json!([at]));
    let ahead = ahead.as_u64().expect("a number");
    assert!(ahead <= at - now && ahead + 60 >= at - now, "{ahead}");
    node.result("evm_mine", json!([]));
    assert_eq!(quantity(&latest(&node)["timestamp"]), at);

    assert_invalid_params(
        &node,
        [
            ("evm_setBlockGasLimit", json!([4999])),
            ("evm_setBlockGasLimit", json!(["0x8000000000000000"])),
            ("anvil_setBlockTimestampInterval", json!(["-5"])),
            ("anvil_setTime", json!([1])),
        ],
    );
}

/// With automine off, `pending` names the block the miner would build from the pool now: reads
/// at `pending` see the waiting transactions, the block comes without the fields geth leaves
/// out of a pending one, and once mined (at the timestamp set for it) it is that very block.
#[test]
fn pending_tag_reads_the_block_the_pool_would_make() {
    let node = Node::start(TempDir::new("dev-pending"), Path::new("dev"), &["--dev"]);
    let to = address!("0000000000000000000000000000000000003333");
    node.result("evm_setAutomine", json!([false]));
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    // A set timestamp makes the pending block and the block mined later the same block.
    let at = quantity(&head["timestamp"]) + 100;
    node.result("evm_setNextBlockTimestamp", json!([at]));

    let empty = node.result("eth_getBlockByNumber", json!(["pending", false]));
    assert_eq!(
        quantity(&empty["number"]),
        quantity(&head["number"]) + 1,
        "{empty}"
    );
    assert_eq!(empty["parentHash"], head["hash"]);
    assert_eq!(quantity(&empty["timestamp"]), at);
    assert_eq!(empty["transactions"], json!([]));
    for field in ["hash", "nonce", "miner"] {
        assert_eq!(empty[field], Value::Null, "{field}");
    }

    let sent: Vec<Value> = (0..2)
        .map(|_| {
            node.result(
                "eth_sendTransaction",
                json!([{"from": ADDR0, "to": to, "value": "0x5"}]),
            )
        })
        .collect();
    assert_eq!(
        node.result("eth_getBalance", json!([to, "latest"])),
        json!("0x0")
    );
    assert_eq!(
        node.result("eth_getBalance", json!([to, "pending"])),
        json!("0xa")
    );
    assert_eq!(
        node.result("eth_getTransactionCount", json!([ADDR0, "pending"])),
        json!("0x2")
    );
    // A waiting transaction shows its block fields as null, blockTimestamp included (geth).
    let pooled = node.result("eth_getTransactionByHash", json!([sent[0]]));
    for field in [
        "blockHash",
        "blockNumber",
        "blockTimestamp",
        "transactionIndex",
    ] {
        assert_eq!(pooled.get(field), Some(&Value::Null), "{field}: {pooled}");
    }
    let pending = node.result("eth_getBlockByNumber", json!(["pending", false]));
    assert_eq!(pending["transactions"], json!(sent));
    assert_eq!(
        node.result("eth_getBlockTransactionCountByNumber", json!(["pending"])),
        json!("0x2")
    );
    // Its transactions name it by the hash it will have once sealed as it is.
    let full = node.result("eth_getBlockByNumber", json!(["pending", true]));
    let pending_hash = full["transactions"][0]["blockHash"].clone();
    assert!(pending_hash.is_string(), "{full}");
    // Receipts are of mined transactions: there `pending` is `latest`, as the hosted provider
    // documents it.
    assert_eq!(
        node.result("eth_getBlockReceipts", json!(["pending"])),
        node.result("eth_getBlockReceipts", json!(["latest"]))
    );
    // A simulation at `pending` starts from the state after the waiting transactions.
    let payload =
        json!({"blockStateCalls": [{"calls": [{"from": ADDR0, "to": to, "value": "0x1"}]}]});
    let on_pending = node.result("eth_simulateV1", json!([payload, "pending"]));
    assert_eq!(on_pending[0]["parentHash"], pending_hash);
    // No number names the pending block, and what needs its tries is refused.
    assert_eq!(
        node.result("eth_getBlockByNumber", json!([pending["number"], false])),
        Value::Null
    );
    let proof = node.call("eth_getProof", json!([to, [], "pending"]));
    assert_eq!(proof["error"]["code"], -32000, "{proof}");

    node.result("evm_mine", json!([]));
    let mined = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let fields = pending.as_object().expect("a block").keys();
    for field in fields.filter(|f| !["hash", "nonce", "miner"].contains(&f.as_str())) {
        assert_eq!(pending[field], mined[field], "{field}");
    }
    // The mined block is the one that was pending, hash and all.
    assert_eq!(mined["hash"], pending_hash);
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["latest", true]))["transactions"],
        full["transactions"]
    );
    assert_eq!(
        node.result("eth_simulateV1", json!([payload, "latest"])),
        on_pending
    );
    assert_eq!(
        node.result("eth_getBalance", json!([to, "latest"])),
        json!("0xa")
    );

    let next = node.result("eth_getBlockByNumber", json!(["pending", false]));
    assert_eq!(next["parentHash"], mined["hash"]);
    assert_eq!(next["transactions"], json!([]));
}

/// With automine off, eth_sendTransaction estimates gas on the pending block: a call to a
/// contract whose creation still waits in the pool gets the gas its code needs, and both go in
/// the next block.
#[test]
fn sent_transactions_are_estimated_on_the_pending_block() {
    let node = Node::start(TempDir::new("dev-estimate"), Path::new("dev"), &["--dev"]);
    node.result("evm_setAutomine", json!([false]));
    // Runtime code 0x600160005500: slot 0 = 1 (a fresh SSTORE, 20000 gas past the call's 21000).
    let init = "0x656001600055006000526006601af3";
    let created = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "input": init}]),
    );
    let contract = ADDR0.create(0);
    let called = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": contract}]),
    );
    node.result("evm_mine", json!([]));
    for hash in [&created, &called] {
        let receipt = node.result("eth_getTransactionReceipt", json!([hash]));
        assert_eq!(receipt["status"], "0x1", "{receipt}");
    }
    assert_eq!(
        node.result("eth_getStorageAt", json!([contract, "0x0", "latest"])),
        json!(format!("0x{:064x}", 1))
    );
}

/// A dev node takes a legacy transaction signed without a chain id (deterministic deployment
/// proxies are sent that way), as anvil does, and mines it.
#[test]
fn dev_node_takes_unprotected_transactions() {
    let node = Node::start(
        TempDir::new("dev-unprotected"),
        Path::new("dev"),
        &["--dev"],
    );
    let raw = support::unprotected_transfer_from_dev_key(0, 10_000_000_000);
    let hash = node.result("eth_sendRawTransaction", json!([raw]));
    let receipt = receipt_when_mined(&node, "the unprotected transfer", &hash);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    let tx = node.result("eth_getTransactionByHash", json!([hash]));
    assert!(tx.get("chainId").is_none(), "{tx}");
}

/// trace_callMany without a block runs on the pending block, as reth's does: the calls see
/// the transactions waiting in the pool and the next block's number; trace_call (and
/// trace_callMany at `latest`) run on the head.
#[test]
fn trace_call_many_defaults_to_the_pending_block() {
    let node = Node::start(
        TempDir::new("dev-trace-pending"),
        Path::new("dev"),
        &["--dev"],
    );
    // Returns NUMBER.
    let reader = "0x0000000000000000000000000000000000004444";
    node.result("anvil_setCode", json!([reader, "0x4360005260206000f3"]));
    node.result("evm_setAutomine", json!([false]));
    let to = address!("0000000000000000000000000000000000003333");
    for _ in 0..2 {
        node.result(
            "eth_sendTransaction",
            json!([{"from": ADDR0, "to": to, "value": "0x5"}]),
        );
    }
    let head = quantity(&node.result("eth_getBlockByNumber", json!(["latest", false]))["number"]);
    let call = json!({"from": ADDR0, "to": reader, "gas": "0x10000"});
    let sender = ADDR0.to_string().to_lowercase();
    for (params, number, nonce) in [
        (json!([[[call.clone(), ["stateDiff"]]]]), head + 1, "0x2"),
        (
            json!([[[call.clone(), ["stateDiff"]]], "pending"]),
            head + 1,
            "0x2",
        ),
        (
            json!([[[call.clone(), ["stateDiff"]]], "latest"]),
            head,
            "0x0",
        ),
    ] {
        let traced = node.result("trace_callMany", params.clone());
        assert_eq!(quantity(&traced[0]["output"]), number, "{params}: {traced}");
        assert_eq!(
            traced[0]["stateDiff"][&sender]["nonce"]["*"]["from"], nonce,
            "{params}: {traced}"
        );
    }
    let traced = node.result("trace_call", json!([call, ["trace"]]));
    assert_eq!(quantity(&traced["output"]), head, "{traced}");
}

/// The pool's rules from geth that a dev node leaves off unless asked (anvil has none of
/// them): a least tip, the RPC fee cap; and those it always keeps: a sender's pooled
/// transactions must be payable together, EIP-7623's calldata floor, the last nonce.
#[test]
fn the_pool_keeps_geths_rules() {
    let node = Node::start(
        TempDir::new("dev-pool-rules"),
        Path::new("dev"),
        &["--dev", "--rpc.txfeecap", "1", "--txpool.pricelimit", "1"],
    );
    assert_eq!(node.result("evm_setAutomine", json!([false])), Value::Null);
    // 0.01 ether.
    node.result("anvil_setBalance", json!([ADDR0, "0x2386f26fc10000"]));
    let nonce = quantity(&node.result("eth_getTransactionCount", json!([ADDR0, "latest"])));
    let tx = |nonce: u64, value: u128, fee_cap: u128, tip: u128, gas: u64, input: Vec<u8>| {
        sign_with_dev_key(alloy::consensus::TxEip1559 {
            chain_id: 1337,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: fee_cap,
            max_priority_fee_per_gas: tip,
            to: alloy::primitives::TxKind::Call(address!(
                "00000000000000000000000000000000000f00d5"
            )),
            value: alloy::primitives::U256::from(value),
            input: input.into(),
            ..Default::default()
        })
    };
    let gwei = 1_000_000_000u128;
    let accepted = |raw: String| {
        let r = node.call("eth_sendRawTransaction", json!([raw]));
        assert!(r["result"].is_string(), "{r}");
    };
    let refused = |raw: String, words: &str| {
        let r = node.call("eth_sendRawTransaction", json!([raw]));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(words), "{words}: {r}");
        r["error"]["code"].clone()
    };
    let code = refused(
        tx(nonce, 1, 10 * gwei, 0, 21_000, vec![]),
        "transaction gas price below minimum: gas tip cap 0, minimum needed 1",
    );
    assert_eq!(code, 802, "the spec's gas price below configured minimum");
    refused(
        tx(nonce, 1, 100_000 * gwei, gwei, 21_000, vec![]),
        "tx fee (2.10 ether) exceeds the configured cap (1.00 ether)",
    );
    refused(
        tx(nonce, 1, 10 * gwei, gwei, 24_000, vec![0xff; 100]),
        "insufficient gas for floor data gas cost: gas 24000, minimum needed 25000",
    );
    refused(
        tx(u64::MAX, 1, 10 * gwei, gwei, 21_000, vec![]),
        "nonce has max value",
    );
    // EIP-7825's cap comes before the block's gas limit, as in geth's pool (tiny fees: the
    // RPC fee cap is not what refuses them).
    for gas in [20_000_000, 3_000_000_000] {
        refused(
            tx(nonce, 1, 2, 1, gas, vec![]),
            &format!("transaction gas limit too high (cap: 16777216, tx: {gas})"),
        );
    }
    // A transaction behind a nonce gap is not pending: what it may spend does not count.
    let gapped = tx(
        nonce + 3,
        9_000_000_000_000_000,
        10 * gwei,
        gwei,
        21_000,
        vec![],
    );
    accepted(gapped);
    // Two transfers of 0.006 ether: each fits the balance, both do not.
    let first = tx(
        nonce,
        6_000_000_000_000_000,
        10 * gwei,
        gwei,
        21_000,
        vec![],
    );
    accepted(first);
    let code = refused(
        tx(nonce + 1, 6_000_000_000_000_000, 10 * gwei, gwei, 21_000, vec![]),
        "insufficient funds for gas * price + value: balance 10000000000000000, queued cost 6210000000000000, tx cost 6210000000000000, overshot 2420000000000000",
    );
    assert_eq!(code, 809);
    // A replacement counts for what it adds.
    refused(
        tx(
            nonce,
            10_000_000_000_000_000,
            20 * gwei,
            2 * gwei,
            21_000,
            vec![],
        ),
        "insufficient funds for gas * price + value",
    );
    let cheaper = tx(
        nonce,
        1_000_000_000_000_000,
        20 * gwei,
        2 * gwei,
        21_000,
        vec![],
    );
    accepted(cheaper);
    // A fee cap under the next base fee waits in the pool while blocks are mined on request
    // (the base fee may come down); under automine, which mines no empty blocks, it is
    // refused at once, as anvil refuses it.
    accepted(tx(nonce + 1, 1, 2, 1, 21_000, vec![]));
    node.result("anvil_dropAllTransactions", json!([]));
    node.result("evm_setAutomine", json!([true]));
    refused(
        tx(nonce, 1, 2, 1, 21_000, vec![]),
        "max fee per gas less than block base fee",
    );
}

/// What hardhat-network-helpers need of a dev node, sent as they send it: a client version
/// they accept (they refuse to run otherwise), `hardhat_setPrevRandao`, `mine` of any count,
/// a dropped transaction that was mined is an error, and snapshot ids that are never reused.
#[test]
fn hardhat_network_helpers_find_what_they_need() {
    let node = Node::start(TempDir::new("dev-hardhat"), Path::new("dev"), &["--dev"]);
    let version = node.result("web3_clientVersion", json!([]));
    assert!(
        version
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
            .starts_with("anvil"),
        "{version}"
    );
    // setPrevRandao(0x75bcd15): the next block's mixHash (what PREVRANDAO reads).
    let randao = format!("0x{:064x}", 0x75bcd15);
    assert_eq!(
        node.result("hardhat_setPrevRandao", json!([randao])),
        json!(true)
    );
    node.result("hardhat_mine", json!(["0x1", "0x1"]));
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(head["mixHash"], json!(randao));
    node.result("hardhat_mine", json!(["0x1"]));
    let next = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_ne!(next["mixHash"], json!(randao), "for one block only");
    // mine(0) mines nothing; mineUpTo past the old 1,000-block bound works.
    let before = quantity(&node.result("eth_blockNumber", json!([])));
    assert_eq!(node.result("hardhat_mine", json!(["0x0"])), Value::Null);
    assert_eq!(quantity(&node.result("eth_blockNumber", json!([]))), before);
    node.result("hardhat_mine", json!(["0x3e9"]));
    assert_eq!(
        quantity(&node.result("eth_blockNumber", json!([]))),
        before + 1001
    );
    // A transaction a block took cannot be dropped.
    let hash = node.result(
        "eth_sendTransaction",
        json!([{"from": ADDR0, "to": ADDR0, "value": "0x1"}]),
    );
    receipt_when_mined(&node, "the transfer", &hash);
    let r = node.call("hardhat_dropTransaction", json!([hash]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// A dev node serves a test suite as anvil does: no per-key rate limit by default (ethers
/// batches a hundred reads at a time; a key's default burst is 200).
#[test]
fn dev_node_does_not_rate_limit_a_test_suite() {
    let node = Node::start(TempDir::new("dev-unlimited"), Path::new("dev"), &["--dev"]);
    let batch: Vec<Value> = (0..100)
        .map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "eth_blockNumber", "params": []}))
        .collect();
    let batch = serde_json::to_string(&batch).expect("json");
    for _ in 0..5 {
        let (status, body) = node.rpc_raw(&batch);
        assert_eq!(status, 200, "{body}");
        assert!(!body.contains("error"), "{body}");
    }
}

/// A run of mined blocks stops when its caller goes away: a client that asked for a million
/// blocks and disconnected does not leave the node mining for a quarter of an hour.
#[test]
fn mining_stops_when_the_caller_leaves() {
    use std::io::Write;
    let node = Node::start(TempDir::new("dev-mine-leave"), Path::new("dev"), &["--dev"]);
    let number = |node: &Node| quantity(&node.result("eth_blockNumber", json!([])));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "anvil_mine", "params": ["0xf4240"]})
        .to_string();
    let mut stream = std::net::TcpStream::connect(node.http_addr()).expect("connect");
    let url = node.url();
    let path = url.trim_start_matches(&format!("http://{}", node.http_addr()));
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    std::thread::sleep(Duration::from_millis(500));
    drop(stream);
    std::thread::sleep(Duration::from_millis(500));
    let stopped_at = number(&node);
    assert!(stopped_at > 0, "it mined while the caller waited");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        number(&node),
        stopped_at,
        "still mining after the caller left"
    );
}

/// Method flags naming nothing served, or one method both allowed and denied, are warned about
/// when the node starts; the denial holds.
#[test]
fn method_flags_that_do_nothing_are_warned_about() {
    let node = Node::start(
        TempDir::new("dev-method-flags"),
        Path::new("dev"),
        &[
            "--dev",
            "--rpc.deny-method",
            "eth_nonexistent,eth_call",
            "--rpc.allow-method",
            "eth_call",
        ],
    );
    let log = node.log();
    assert!(
        log.contains("--rpc.deny-method names a method this node does not serve")
            && log.contains("eth_nonexistent"),
        "{log}"
    );
    assert!(
        log.contains("both --rpc.allow-method and --rpc.deny-method"),
        "{log}"
    );
    let r = node.call("eth_call", json!([{"to": ADDR0}, "latest"]));
    assert_eq!(r["error"]["code"], -32601, "{r}");
}

/// A notification (a request without an id) runs and gets no answer, alone or in a batch, as
/// the JSON-RPC spec and geth have it (jsonrpsee answered it without running it).
#[test]
fn notifications_run_without_an_answer() {
    let node = Node::start(TempDir::new("dev-notify"), Path::new("dev"), &["--dev"]);
    let height = |node: &Node| quantity(&node.result("eth_blockNumber", json!([])));
    let before = height(&node);
    let (status, body) = node.rpc_raw(r#"{"jsonrpc":"2.0","method":"evm_mine","params":[]}"#);
    assert_eq!((status, body.as_str()), (200, ""));
    assert_eq!(height(&node), before + 1);
    let (status, body) = node.rpc_raw(
        r#"[{"jsonrpc":"2.0","method":"evm_mine"},{"jsonrpc":"2.0","method":"evm_mine","params":[]}]"#,
    );
    assert_eq!((status, body.as_str()), (200, ""));
    assert_eq!(height(&node), before + 3);
    // Beside a call, the batch answers the call alone.
    let (_, body) = node.rpc_raw(
        r#"[{"jsonrpc":"2.0","method":"evm_mine"},{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber"}]"#,
    );
    let answers: Value = serde_json::from_str(&body).expect("a JSON answer");
    assert_eq!(answers.as_array().map(Vec::len), Some(1), "{answers}");
    assert_eq!(
        answers[0]["result"],
        format!("{:#x}", before + 4),
        "{answers}"
    );
    // A call whose id jsonrpsee cannot hold (it takes it for a notification) runs once, and
    // is answered with its id.
    let (_, body) = node.rpc_raw(r#"{"jsonrpc":"2.0","id":-1,"method":"evm_mine","params":[]}"#);
    assert!(body.contains(r#""id":-1"#), "{body}");
    assert_eq!(height(&node), before + 5);
}
