//! Following the chain, end to end: `eth_subscribe` over WebSocket and polled filters over
//! HTTP. On `--dev`, a transaction sent over HTTP shows up as a pending transaction, its block
//! as a new head and its log as a log, each equal to what the HTTP methods answer for them;
//! over the Engine API, a rewind brings the logs of the unwound blocks again with
//! `removed: true`, and going forward brings them anew.

mod support;

use std::{path::Path, time::Duration};

use alloy::{
    consensus::TxEip1559,
    primitives::{TxKind, U256},
};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{
    execution_apis_genesis, import_execution_apis_chain, sign_with_dev_key, Node, TempDir,
};
use tokio_tungstenite::tungstenite::Message;

/// A contract creation whose init code logs one topic (0x2a) and returns nothing.
fn create_logging_contract(nonce: u64) -> String {
    // PUSH1 0x2a PUSH1 0 PUSH1 0 LOG1 STOP
    let init = alloy::primitives::hex::decode("602a60006000a100").unwrap();
    sign_with_dev_key(TxEip1559 {
        chain_id: 1337,
        nonce,
        gas_limit: 100_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Create,
        value: U256::ZERO,
        input: init.into(),
        ..Default::default()
    })
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Ws {
    socket: Socket,
    next_id: u64,
    /// Notifications that arrived while waiting for an answer.
    early: Vec<Value>,
}

impl Ws {
    async fn connect(node: &Node) -> Self {
        let (socket, _) = tokio_tungstenite::connect_async(node.ws_url())
            .await
            .expect("ws connect");
        Self {
            socket,
            next_id: 1,
            early: Vec::new(),
        }
    }

    async fn recv(&mut self, wait: Duration) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(wait, self.socket.next())
                .await
                .ok()??;
            match msg.expect("ws frame") {
                Message::Text(text) => return Some(serde_json::from_str(&text).expect("json")),
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("unexpected ws message {other:?}"),
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.socket
            .send(Message::Text(request.to_string().into()))
            .await
            .expect("ws send");
        loop {
            let msg = self
                .recv(Duration::from_secs(10))
                .await
                .expect("an answer in time");
            if msg["id"] == json!(id) {
                return msg;
            }
            self.early.push(msg);
        }
    }

    async fn subscribe(&mut self, params: Value) -> String {
        let answer = self.call("eth_subscribe", params).await;
        answer["result"]
            .as_str()
            .unwrap_or_else(|| panic!("a subscription id: {answer}"))
            .to_string()
    }

    /// Notifications, by subscription id, until `done` says there are enough or `wait` passes
    /// without one.
    async fn notifications(
        &mut self,
        wait: Duration,
        mut done: impl FnMut(&[Value]) -> bool,
    ) -> Vec<Value> {
        let mut got: Vec<Value> = std::mem::take(&mut self.early);
        while !done(&got) {
            match self.recv(wait).await {
                Some(msg) => got.push(msg),
                None => break,
            }
        }
        got
    }
}

fn results_of<'a>(notes: &'a [Value], sub: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter(|n| n["method"] == "eth_subscription" && n["params"]["subscription"] == sub)
        .map(|n| &n["params"]["result"])
        .collect()
}

/// Runs a blocking HTTP call of the test harness off the async runtime.
async fn http(node: &std::sync::Arc<Node>, method: &'static str, params: Value) -> Value {
    let node = node.clone();
    tokio::task::spawn_blocking(move || node.result(method, params))
        .await
        .expect("http call")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_logs_and_pending_transactions_on_the_dev_chain() {
    let node = std::sync::Arc::new(Node::start(
        TempDir::new("subs"),
        Path::new("dev"),
        &["--dev"],
    ));
    let mut ws = Ws::connect(&node).await;
    let heads = ws.subscribe(json!(["newHeads"])).await;
    // A quantity of at most 128 bits, without leading zeros (34 characters only when the random
    // id's first digit is not zero: it failed one run in sixteen when it asked for exactly 34).
    let digits = heads.strip_prefix("0x").unwrap_or_default();
    assert!(
        (1..=32).contains(&digits.len())
            && !digits.starts_with('0')
            && digits.chars().all(|c| c.is_ascii_hexdigit()),
        "geth-style id: {heads}"
    );
    let logs = ws.subscribe(json!(["logs"])).await;
    let topic = format!("0x{:064x}", 0x2a);
    let logs_by_topic = ws.subscribe(json!(["logs", {"topics": [topic]}])).await;
    let logs_elsewhere = ws
        .subscribe(json!(["logs", {"address": "0x00000000000000000000000000000000000000aa"}]))
        .await;
    // A range bounds the new blocks whose logs come: this one's first block is 1.
    let logs_in_range = ws
        .subscribe(json!(["logs", {"fromBlock": "0x1", "toBlock": "0x1"}]))
        .await;
    let logs_out_of_range = ws
        .subscribe(json!(["logs", {"fromBlock": "0x0", "toBlock": "0x0"}]))
        .await;
    let hashes = ws.subscribe(json!(["newPendingTransactions"])).await;
    let full = ws.subscribe(json!(["newPendingTransactions", true])).await;

    let tx_hash = http(
        &node,
        "eth_sendRawTransaction",
        json!([create_logging_contract(0)]),
    )
    .await;
    let mut notes = ws
        .notifications(Duration::from_secs(10), |got| {
            [&heads, &logs, &logs_by_topic, &hashes, &full]
                .iter()
                .all(|sub| !results_of(got, sub).is_empty())
        })
        .await;
    // Whatever else was going to arrive for this block (nothing, if all is well).
    notes.extend(
        ws.notifications(Duration::from_millis(300), |_| false)
            .await,
    );

    assert_eq!(results_of(&notes, &hashes), vec![&tx_hash]);
    let pending = results_of(&notes, &full);
    assert_eq!(pending.len(), 1, "{notes:?}");
    assert_eq!(pending[0]["hash"], tx_hash);
    assert_eq!(pending[0]["blockHash"], Value::Null);
    // As eth_getTransactionByHash and txpool_content show a waiting transaction (geth).
    assert_eq!(
        pending[0].get("blockTimestamp"),
        Some(&Value::Null),
        "{:?}",
        pending[0]
    );

    let block = http(&node, "eth_getBlockByNumber", json!(["0x1", false])).await;
    let new_heads = results_of(&notes, &heads);
    assert_eq!(new_heads.len(), 1, "{notes:?}");
    assert_eq!(new_heads[0]["hash"], block["hash"]);
    assert_eq!(new_heads[0]["number"], "0x1");
    assert_eq!(new_heads[0]["stateRoot"], block["stateRoot"]);
    assert!(new_heads[0].get("transactions").is_none());

    let expected = http(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": "0x1", "toBlock": "0x1"}]),
    )
    .await;
    let expected: Vec<&Value> = expected.as_array().expect("logs").iter().collect();
    assert_eq!(expected.len(), 1);
    assert_eq!(expected[0]["transactionHash"], tx_hash);
    assert_eq!(results_of(&notes, &logs), expected);
    assert_eq!(results_of(&notes, &logs_by_topic), expected);
    assert!(results_of(&notes, &logs_elsewhere).is_empty());
    assert_eq!(results_of(&notes, &logs_in_range), expected);
    assert!(results_of(&notes, &logs_out_of_range).is_empty());

    // Unsubscribed: the next block is not announced to that subscription any more.
    let answer = ws.call("eth_unsubscribe", json!([heads])).await;
    assert_eq!(answer["result"], true, "{answer}");
    // Ended already: geth's error, as for an id the connection never held, and -32602 for
    // anything but an id.
    let answer = ws.call("eth_unsubscribe", json!([heads])).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!(answer["error"]["message"], "subscription not found");
    for bad in [json!([]), json!([123])] {
        let answer = ws.call("eth_unsubscribe", bad).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }

    http(
        &node,
        "eth_sendRawTransaction",
        json!([create_logging_contract(1)]),
    )
    .await;
    let notes = ws
        .notifications(Duration::from_secs(10), |got| {
            results_of(got, &logs).len() == 1
        })
        .await;
    assert_eq!(results_of(&notes, &logs).len(), 1);
    assert!(results_of(&notes, &heads).is_empty(), "{notes:?}");

    // Bad params are -32602, a kind that does not exist -32601 (geth's codes), a range no new
    // block can be in -32000; over HTTP there is nothing to push to.
    for params in [
        json!(["syncing", {"x": 1}]),
        json!(["newHeads", {"x": 1}]),
        json!(["logs", {"blockHash": format!("0x{}", "11".repeat(32))}]),
        json!(["logs", {"address": "0x12"}]),
        json!(["newPendingTransactions", "yes"]),
    ] {
        let answer = ws.call("eth_subscribe", params.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
    let answer = ws.call("eth_subscribe", json!(["blocks"])).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let answer = ws
        .call(
            "eth_subscribe",
            json!(["logs", {"fromBlock": "0x5", "toBlock": "0x4"}]),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let answer = ws
        .call("eth_subscribe", json!(["logs", {"toBlock": "pending"}]))
        .await;
    assert_eq!(
        answer["error"]["message"], "pending logs are not supported",
        "{answer}"
    );
    // Params jsonrpsee itself refuses (no kind at all) get one answer, not two.
    for params in [json!([]), Value::Null, json!({}), json!([1])] {
        let answer = ws.call("eth_subscribe", params.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
        while let Some(msg) = ws.recv(Duration::from_millis(300)).await {
            assert_ne!(
                msg["id"], answer["id"],
                "{params}: answered twice: {answer}, {msg}"
            );
            ws.early.push(msg);
        }
    }
    let node2 = node.clone();
    let answer =
        tokio::task::spawn_blocking(move || node2.call("eth_subscribe", json!(["newHeads"])))
            .await
            .expect("http call");
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(answer["error"]["message"], "notifications not supported");
}

/// Moves the head to `hash` with forkchoiceUpdated (off the async runtime); it must be VALID.
async fn move_head(node: &std::sync::Arc<Node>, hash: &Value) {
    let (node, hash) = (node.clone(), hash.clone());
    let v = tokio::task::spawn_blocking(move || engine_fcu(&node, &hash))
        .await
        .expect("fcu");
    assert_eq!(v["result"]["payloadStatus"]["status"], "VALID", "{v}");
}

fn engine_fcu(node: &Node, head: &Value) -> Value {
    let req = json!({"jsonrpc":"2.0","id":1,"method":"engine_forkchoiceUpdatedV3",
        "params":[{"headBlockHash": head, "safeBlockHash": head,
                   "finalizedBlockHash": "0x0000000000000000000000000000000000000000000000000000000000000000"}, null]});
    let (status, body) = node.engine_raw(&req.to_string());
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_removes_logs_and_going_forward_adds_them_again() {
    let node = std::sync::Arc::new(Node::start(
        import_execution_apis_chain(),
        &execution_apis_genesis(),
        &[],
    ));
    let head = http(&node, "eth_getBlockByNumber", json!(["latest", false])).await;
    let head_number = u64::from_str_radix(
        head["number"].as_str().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    // Far enough back that the unwound blocks carry logs.
    let mut target_number = head_number;
    let mut unwound_logs: Vec<Value> = Vec::new();
    while unwound_logs.len() < 2 && target_number > 1 {
        target_number -= 1;
        let tag = format!("{:#x}", target_number + 1);
        let logs = http(
            &node,
            "eth_getLogs",
            json!([{"fromBlock": tag, "toBlock": tag}]),
        )
        .await;
        // Highest block first, as they leave the chain.
        unwound_logs.extend(logs.as_array().expect("logs").iter().cloned());
    }
    assert!(!unwound_logs.is_empty(), "the chain has logs to unwind");
    let target = http(
        &node,
        "eth_getBlockByNumber",
        json!([format!("{target_number:#x}"), false]),
    )
    .await;

    let mut ws = Ws::connect(&node).await;
    let logs = ws.subscribe(json!(["logs"])).await;
    let heads = ws.subscribe(json!(["newHeads"])).await;
    let log_filter = http(&node, "eth_newFilter", json!([{}])).await;

    move_head(&node, &target["hash"]).await;
    let want = unwound_logs.len();
    let notes = ws
        .notifications(Duration::from_secs(10), |got| {
            results_of(got, &logs).len() >= want
        })
        .await;
    let removed: Vec<Value> = results_of(&notes, &logs).into_iter().cloned().collect();
    // Blocks leave lowest first, as geth sends them; within a block the logs keep their order.
    let mut expected_removed = Vec::new();
    for number in target_number + 1..=head_number {
        for log in unwound_logs
            .iter()
            .filter(|l| l["blockNumber"] == json!(format!("{number:#x}")))
        {
            let mut log = log.clone();
            log["removed"] = json!(true);
            expected_removed.push(log);
        }
    }
    assert_eq!(removed, expected_removed);
    assert!(
        results_of(&notes, &heads).is_empty(),
        "no new head on a rewind"
    );
    let polled = http(&node, "eth_getFilterChanges", json!([log_filter])).await;
    assert_eq!(polled, json!(expected_removed));

    move_head(&node, &head["hash"]).await;
    let blocks = (head_number - target_number) as usize;
    let notes = ws
        .notifications(Duration::from_secs(10), |got| {
            results_of(got, &logs).len() >= want && results_of(got, &heads).len() >= blocks
        })
        .await;
    let mut expected_added: Vec<Value> = unwound_logs.clone();
    // Blocks come back lowest first; the sort is stable, so a block's logs keep their order.
    expected_added.sort_by_key(|l| {
        u64::from_str_radix(
            l["blockNumber"].as_str().unwrap().trim_start_matches("0x"),
            16,
        )
        .unwrap()
    });
    let added: Vec<Value> = results_of(&notes, &logs).into_iter().cloned().collect();
    assert_eq!(added, expected_added);
    let polled = http(&node, "eth_getFilterChanges", json!([log_filter])).await;
    assert_eq!(polled, json!(expected_added));
    let numbers: Vec<&Value> = results_of(&notes, &heads)
        .iter()
        .map(|h| &h["number"])
        .collect();
    let expected_numbers: Vec<Value> = (target_number + 1..=head_number)
        .map(|n| json!(format!("{n:#x}")))
        .collect();
    assert_eq!(numbers, expected_numbers.iter().collect::<Vec<_>>());
    assert_eq!(
        results_of(&notes, &heads).last().unwrap()["hash"],
        head["hash"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polled_filters_on_the_dev_chain() {
    const OTHER_KEY: &str = "otherkey0123456789abcdef0123456789";
    let node = std::sync::Arc::new(Node::start(
        TempDir::new("filters"),
        Path::new("dev"),
        &["--dev", "--api-key", OTHER_KEY],
    ));
    let blocks = http(&node, "eth_newBlockFilter", json!([])).await;
    let pending = http(&node, "eth_newPendingTransactionFilter", json!([])).await;
    let pending_whole = http(&node, "eth_newPendingTransactionFilter", json!([true])).await;
    let topic = format!("0x{:064x}", 0x2a);
    let criteria = json!({"topics": [topic]});
    let logs = http(&node, "eth_newFilter", json!([criteria])).await;
    let elsewhere = http(
        &node,
        "eth_newFilter",
        json!([{"address": "0x00000000000000000000000000000000000000aa"}]),
    )
    .await;
    let ids = [&blocks, &pending, &pending_whole, &logs, &elsewhere];
    for id in ids {
        let id = id.as_str().expect("an id");
        assert!(id.starts_with("0x") && id.len() == 34, "{id}");
        let changes = http(&node, "eth_getFilterChanges", json!([id])).await;
        assert_eq!(changes, json!([]), "nothing happened yet");
    }

    let tx_hash = http(
        &node,
        "eth_sendRawTransaction",
        json!([create_logging_contract(0)]),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while http(&node, "eth_blockNumber", json!([])).await != "0x1" {
        assert!(std::time::Instant::now() < deadline, "block 1 mined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let block = http(&node, "eth_getBlockByNumber", json!(["0x1", false])).await;
    let block_logs = http(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": "0x1", "toBlock": "0x1"}]),
    )
    .await;
    assert_eq!(block_logs.as_array().map(Vec::len), Some(1));

    let changes = |id: &Value| http(&node, "eth_getFilterChanges", json!([id]));
    assert_eq!(changes(&blocks).await, json!([block["hash"]]));
    assert_eq!(changes(&pending).await, json!([tx_hash]));
    let whole = changes(&pending_whole).await;
    assert_eq!(whole.as_array().map(Vec::len), Some(1), "{whole}");
    assert_eq!(whole[0]["hash"], tx_hash, "{whole}");
    assert_eq!(
        whole[0]["blockHash"],
        Value::Null,
        "pooled when it came: {whole}"
    );
    assert_eq!(changes(&logs).await, block_logs);
    assert_eq!(changes(&elsewhere).await, json!([]));
    for id in ids {
        assert_eq!(changes(id).await, json!([]), "each change is told once");
    }

    // A filter belongs to the key that installed it: to another key it does not exist.
    let addr = node.http_addr();
    let as_other = |method: &str, id: &Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": [id]});
        let path = format!("/v3/{OTHER_KEY}");
        let body = body.to_string();
        async move {
            tokio::task::spawn_blocking(move || {
                let headers = [("Content-Type", "application/json")];
                let (status, text) =
                    support::http_post(addr, &path, &headers, body.as_bytes()).expect("post");
                assert_eq!(status, 200, "{text}");
                serde_json::from_str::<Value>(&text).expect("json")
            })
            .await
            .expect("http call")
        }
    };
    for method in ["eth_getFilterChanges", "eth_getFilterLogs"] {
        let answer = as_other(method, &logs).await;
        assert_eq!(answer["error"]["message"], "filter not found", "{answer}");
    }
    assert_eq!(
        as_other("eth_uninstallFilter", &logs).await["result"],
        false
    );

    // The whole range of a log filter's criteria, as eth_getLogs answers it.
    let all = http(&node, "eth_getFilterLogs", json!([logs])).await;
    assert_eq!(all, http(&node, "eth_getLogs", json!([criteria])).await);

    let node2 = node.clone();
    let call = move |method: &'static str, params: Value| {
        let node = node2.clone();
        async move {
            tokio::task::spawn_blocking(move || node.call(method, params))
                .await
                .expect("http call")
        }
    };
    let answer = call("eth_getFilterLogs", json!([blocks])).await;
    assert_eq!(
        answer["error"]["code"], -32000,
        "not a log filter: {answer}"
    );
    assert_eq!(
        call("eth_uninstallFilter", json!([logs])).await["result"],
        true
    );
    assert_eq!(
        call("eth_uninstallFilter", json!([logs])).await["result"],
        false
    );
    let answer = call("eth_getFilterChanges", json!([logs])).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!(answer["error"]["message"], "filter not found");
    let answer = call("eth_getFilterChanges", json!(["0x1234"])).await;
    assert_eq!(answer["error"]["message"], "filter not found", "{answer}");
    let answer = call("eth_newFilter", json!([{"address": "0x12"}])).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A range other than geth's three live ones is refused when installed, as geth does; so
    // is the pending block, whose logs geth no longer gives.
    for range in [
        json!({"fromBlock": "0x5", "toBlock": "0x3"}),
        json!({"fromBlock": "latest", "toBlock": "0x3"}),
        json!({"toBlock": "0x3"}),
        json!({"fromBlock": "earliest", "toBlock": "0x3"}),
        json!({"fromBlock": "safe"}),
        json!({"fromBlock": "0x3", "toBlock": "finalized"}),
    ] {
        let answer = call("eth_newFilter", json!([range])).await;
        assert_eq!(answer["error"]["code"], -32602, "{range}: {answer}");
        assert_eq!(answer["error"]["message"], "invalid block range params");
    }
    for range in [
        json!({"fromBlock": "pending"}),
        json!({"toBlock": "pending"}),
    ] {
        let answer = call("eth_newFilter", json!([range])).await;
        assert_eq!(answer["error"]["code"], -32602, "{range}: {answer}");
        assert_eq!(answer["error"]["message"], "pending logs are not supported");
    }
    for range in [
        json!({}),
        json!({"fromBlock": "latest", "toBlock": "latest"}),
        json!({"fromBlock": "0x3", "toBlock": "0x3"}),
        json!({"fromBlock": "0x3", "toBlock": "latest"}),
    ] {
        let answer = call("eth_newFilter", json!([range])).await;
        assert!(answer["result"].is_string(), "{range}: {answer}");
    }
}

/// An `engine_newPayloadV3/V4` request for a copy of `raw_block` (the node's head) moved
/// `ahead` blocks up and hung on an unknown parent: a block the node cannot connect.
fn orphan_payload(raw_block: &str, ahead: u64) -> Value {
    use alloy::{
        consensus::{Block, TxEnvelope},
        eips::eip7685::EMPTY_REQUESTS_HASH,
        rlp::Decodable,
        rpc::types::engine::ExecutionPayload,
    };
    let bytes = alloy::primitives::hex::decode(raw_block).expect("hex block");
    let mut block = Block::<TxEnvelope>::decode(&mut bytes.as_slice()).expect("block rlp");
    block.header.number += ahead;
    block.header.parent_hash = alloy::primitives::B256::repeat_byte(0x42);
    let prague = block.header.requests_hash.is_some();
    if prague {
        block.header.requests_hash = Some(EMPTY_REQUESTS_HASH);
    }
    let (payload, sidecar) =
        ExecutionPayload::from_block_unchecked(block.header.hash_slow(), &block);
    let ExecutionPayload::V3(p) = payload else {
        panic!("the execution-apis chain's head is a Cancun or Prague block")
    };
    let cancun = sidecar.cancun().expect("cancun fields");
    if prague {
        json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV4",
            "params":[p, cancun.versioned_hashes, cancun.parent_beacon_block_root, []]})
    } else {
        json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV3",
            "params":[p, cancun.versioned_hashes, cancun.parent_beacon_block_root]})
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncing_while_the_consensus_client_is_ahead() {
    let node = std::sync::Arc::new(Node::start(
        import_execution_apis_chain(),
        &execution_apis_genesis(),
        &[],
    ));
    let head = http(&node, "eth_getBlockByNumber", json!(["latest", false])).await;
    let number = head["number"].as_str().expect("number").to_string();
    let head_number = u64::from_str_radix(number.trim_start_matches("0x"), 16).unwrap();
    let raw = http(&node, "debug_getRawBlock", json!(["latest"])).await;

    let mut ws = Ws::connect(&node).await;
    let sub = ws.subscribe(json!(["syncing"])).await;
    let first = |got: &[Value]| !results_of(got, &sub).is_empty();
    let notes = ws.notifications(Duration::from_secs(10), first).await;
    assert_eq!(
        results_of(&notes, &sub),
        [&json!(false)],
        "the status at once"
    );
    assert_eq!(http(&node, "eth_syncing", json!([])).await, json!(false));
    let (status, body) = health(&node, "").await;
    assert_eq!((status, &body["status"]), (200, &json!("ok")), "{body}");
    assert_eq!(body["head"]["number"], head_number, "{body}");
    // The chain's blocks are from 1970: a balancer asking for a fresh head is told it is stale.
    let (status, body) = health(&node, "?max_head_age=60").await;
    assert_eq!((status, &body["status"]), (503, &json!("stale")), "{body}");

    // The consensus client sends a block ten ahead that the node cannot connect.
    let request = orphan_payload(raw.as_str().expect("raw block"), 10).to_string();
    let answer = {
        let node = node.clone();
        tokio::task::spawn_blocking(move || node.engine_raw(&request))
            .await
            .expect("engine call")
            .1
    };
    let answer: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(answer["result"]["status"], "SYNCING", "{answer}");
    let highest = format!("{:#x}", head_number + 10);
    let notes = ws.notifications(Duration::from_secs(10), first).await;
    assert_eq!(
        results_of(&notes, &sub),
        [
            &json!({"syncing": true, "startingBlock": number, "currentBlock": number,
                 "highestBlock": highest})
        ]
    );
    assert_eq!(
        http(&node, "eth_syncing", json!([])).await,
        json!({"startingBlock": number, "currentBlock": number, "highestBlock": highest})
    );
    let (status, body) = health(&node, "").await;
    assert_eq!(
        (status, &body["status"]),
        (503, &json!("syncing")),
        "{body}"
    );
    assert_eq!(
        body["syncing"],
        json!({"startingBlock": head_number, "currentBlock": head_number,
               "highestBlock": head_number + 10}),
        "{body}"
    );

    // It names the node's own head: in sync again.
    move_head(&node, &head["hash"]).await;
    let notes = ws.notifications(Duration::from_secs(10), first).await;
    assert_eq!(results_of(&notes, &sub), [&json!(false)]);
    assert_eq!(http(&node, "eth_syncing", json!([])).await, json!(false));
    assert_eq!(health(&node, "").await.0, 200);
}

/// `GET /health{query}` (no key): status and JSON body.
async fn health(node: &std::sync::Arc<Node>, query: &str) -> (u16, Value) {
    let addr = node.http_addr();
    let path = format!("/health{query}");
    let (status, text) = tokio::task::spawn_blocking(move || {
        support::http_request(addr, "GET", &path, &[], b"").expect("GET /health")
    })
    .await
    .expect("health call");
    (status, serde_json::from_str(&text).expect("a JSON body"))
}

/// A subscription inside a WebSocket batch is refused in the batch's answer, and that answer
/// is the only one: jsonrpsee would write the subscription's answer to the socket on its own
/// and again inside the array.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_inside_a_batch_is_refused_in_one_answer() {
    let node = Node::start(TempDir::new("subs-batch"), Path::new("dev"), &["--dev"]);
    let mut ws = Ws::connect(&node).await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "params": []},
    ]);
    ws.socket
        .send(Message::Text(batch.to_string().into()))
        .await
        .expect("ws send");
    let answer = ws
        .recv(Duration::from_secs(10))
        .await
        .expect("an answer in time");
    let answers = answer
        .as_array()
        .unwrap_or_else(|| panic!("an array: {answer}"));
    assert_eq!(answers.len(), 2, "{answer}");
    assert_eq!(answers[0]["id"], 1, "{answer}");
    assert_eq!(answers[0]["error"]["code"], -32600, "{answer}");
    assert_eq!(answers[1]["result"], "0x0", "{answer}");
    assert_eq!(ws.recv(Duration::from_millis(500)).await, None);
    // On its own the subscription is served.
    ws.subscribe(json!(["newHeads"])).await;
}

/// A rewind deeper than the event channel holds (a dev `evm_revert` of 1,100 blocks) reaches
/// subscribers as one removal: none falls behind and is closed. (Sent block by block, the
/// removals outran the subscribers and every one was closed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_rewind_closes_no_subscription() {
    let node = std::sync::Arc::new(Node::start(
        TempDir::new("subs-deep"),
        Path::new("dev"),
        &["--dev"],
    ));
    let snapshot = http(&node, "evm_snapshot", json!([])).await;
    http(&node, "anvil_mine", json!(["0x44c"])).await;
    let mut ws = Ws::connect(&node).await;
    let mut heads = Vec::new();
    for _ in 0..4 {
        heads.push(ws.subscribe(json!(["newHeads"])).await);
        ws.subscribe(json!(["logs"])).await;
    }
    assert_eq!(http(&node, "evm_revert", json!([snapshot])).await, true);
    http(&node, "evm_mine", json!([])).await;
    let notes = ws
        .notifications(Duration::from_secs(5), |got| {
            got.iter()
                .filter(|n| n["params"]["result"]["number"] == "0x1")
                .count()
                >= heads.len()
        })
        .await;
    assert!(
        notes.iter().all(|n| n["params"]["error"].is_null()),
        "{notes:?}"
    );
    for sub in &heads {
        let got = results_of(&notes, sub);
        assert_eq!(got.len(), 1, "{sub}: {notes:?}");
        assert_eq!(got[0]["number"], "0x1");
    }
}
