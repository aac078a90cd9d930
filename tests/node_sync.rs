//! The node's ways of receiving blocks, end to end: `simnode import` of the execution-apis
//! chain (re-runs, interruption by SIGKILL, corrupt and truncated files) and the same chain
//! replayed through the Engine API, and damaged Engine API requests that must leave it whole.

mod support;

use std::{path::Path, process::Command, time::Duration};

use alloy::{
    consensus::{Block, TxEnvelope},
    primitives::B256,
    rlp::{Decodable, Encodable},
    rpc::types::engine::ExecutionPayload,
};
use serde_json::{json, Value};
use support::{conformance_dir, execution_apis_genesis, simnode_bin, Node, TempDir};

const HEAD_54: &str = support::EXECUTION_APIS_HEAD;
/// Where the shared copy's legacy transaction (eth_sendRawTransaction) sends its 10 wei.
const RECIPIENT: &str = "0xaa00000000000000000000000000000000000000";

fn chain_blocks() -> Vec<Block<TxEnvelope>> {
    let data = std::fs::read(conformance_dir().join("chain.rlp")).expect("read chain.rlp");
    let mut rest = data.as_slice();
    let mut blocks = Vec::new();
    while !rest.is_empty() {
        blocks.push(Block::<TxEnvelope>::decode(&mut rest).expect("chain.rlp decodes"));
    }
    blocks
}

/// `simnode import` of `file` into `datadir` on the execution-apis genesis.
fn import_command(datadir: &Path, file: &Path) -> Command {
    let mut command = Command::new(simnode_bin());
    command
        .arg("import")
        .arg("--chain")
        .arg(execution_apis_genesis())
        .arg("--datadir")
        .arg(datadir)
        .arg(file);
    command
}

fn import(datadir: &Path, file: &Path) -> (bool, String) {
    let out = import_command(datadir, file)
        .output()
        .expect("run simnode import");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A named pipe `chain.fifo` in `dir`.
fn make_fifo(dir: &TempDir) -> std::path::PathBuf {
    let fifo = dir.path().join("chain.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    fifo
}

/// A chain read from a pipe (a FIFO, `<(zcat chain.rlp.gz)`) is read once, whole: the import
/// does not open it a second time after the writer has gone.
#[test]
fn import_reads_a_pipe_once() {
    let dir = TempDir::new("import-fifo");
    let fifo = make_fifo(&dir);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let data = std::fs::read(conformance_dir().join("chain.rlp")).expect("chain.rlp");
            std::fs::write(&fifo, data)
        })
    };
    let datadir = TempDir::new("import-fifo-data");
    let (ok, out) = import(datadir.path(), &fifo);
    assert!(ok, "{out}");
    assert!(out.contains("54 blocks imported"), "{out}");
    writer
        .join()
        .expect("writer")
        .expect("the whole chain written");
}

/// An import waiting on a pipe whose writer stalled has made what it imported durable: killed
/// there, it loses none of those blocks.
#[cfg(target_os = "linux")]
#[test]
fn an_import_waiting_on_a_stalled_pipe_has_synced_its_blocks() {
    use std::io::Write;
    let dir = TempDir::new("import-stall");
    let fifo = make_fifo(&dir);
    let datadir = TempDir::new("import-stall-data");
    let mut import = import_command(datadir.path(), &fifo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn simnode import");
    let blocks = chain_blocks();
    let mut first = Vec::new();
    for block in &blocks[..28] {
        block.encode(&mut first);
    }
    // The writer stays open: the import waits for more.
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open the fifo");
    writer.write_all(&first).expect("write 28 blocks");
    writer.flush().expect("flush");
    // Waiting in the pipe's read means the 28 blocks are in.
    let wchan = format!("/proc/{}/wchan", import.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let waiting = std::fs::read_to_string(&wchan).unwrap_or_default();
        if waiting.contains("pipe_read") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the import never waited on the pipe ({waiting})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    import.kill().expect("kill the import");
    import.wait().expect("reap the import");
    drop(writer);
    let (head, _) = stored_head(datadir.path());
    assert_eq!(head, 28);
}

/// Head number and hash, and a check that every block up to the head is whole.
fn stored_head(datadir: &Path) -> (u64, B256) {
    let chain = simnode::chain::load(execution_apis_genesis().to_str().expect("utf8 path"))
        .expect("genesis");
    let store = simnode::store::Store::open(
        datadir,
        std::sync::Arc::new(chain.spec),
        chain.alloc.as_ref(),
    )
    .expect("open store");
    let head = store.head().latest;
    for n in 0..=head {
        let block = store
            .block(n)
            .expect("read block")
            .unwrap_or_else(|| panic!("block {n} missing"));
        let receipts = store
            .receipts(n)
            .expect("read receipts")
            .unwrap_or_else(|| panic!("receipts {n} missing"));
        assert_eq!(
            block.body.transactions.len(),
            receipts.len(),
            "block {n} half written"
        );
        assert_eq!(
            block.body.transactions.len(),
            block.senders.len(),
            "block {n} senders"
        );
    }
    (head, store.head_header().expect("head header").hash())
}

fn write_blocks(path: &Path, blocks: &[Block<TxEnvelope>]) {
    let mut out = Vec::new();
    for b in blocks {
        b.encode(&mut out);
    }
    std::fs::write(path, out).expect("write rlp");
}

#[test]
fn import_validates_and_skips_stored_blocks() {
    let dir = TempDir::new("import");
    let chain = conformance_dir().join("chain.rlp");
    let (ok, out) = import(dir.path(), &chain);
    assert!(ok, "{out}");
    assert!(out.contains("54 blocks imported"), "{out}");
    assert_eq!(stored_head(dir.path()), (54, HEAD_54.parse().unwrap()));
    let (ok, out) = import(dir.path(), &chain);
    assert!(ok, "{out}");
    assert!(
        out.contains("0 blocks imported, 54 already stored"),
        "{out}"
    );
}

#[test]
fn killed_import_resumes_without_losing_blocks() {
    let chain = conformance_dir().join("chain.rlp");
    // Kill at several points of the file; each time the database must hold whole blocks only,
    // and a re-run must finish the chain.
    for delay_ms in [5u64, 40, 120] {
        let dir = TempDir::new("killed");
        let mut child = import_command(dir.path(), &chain)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn import");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        if dir.path().join("chain.redb").exists() {
            let (head, _) = stored_head(dir.path());
            assert!(head <= 54);
        }
        let (ok, out) = import(dir.path(), &chain);
        assert!(ok, "re-run after kill at {delay_ms} ms: {out}");
        assert_eq!(stored_head(dir.path()), (54, HEAD_54.parse().unwrap()));
    }
}

#[test]
fn bad_block_is_rejected_by_number_and_earlier_blocks_stay() {
    let blocks = chain_blocks();
    let dir = TempDir::new("bad-block");
    // Block 10 claims a different state root: execution disagrees.
    let mut bad = blocks.clone();
    bad[9].header.state_root = B256::repeat_byte(0x11);
    let file = dir.path().join("bad.rlp");
    write_blocks(&file, &bad[..12]);
    let data = dir.path().join("data");
    let (ok, out) = import(&data, &file);
    assert!(!ok);
    assert!(out.contains("block 10"), "error must name the block: {out}");
    assert!(
        out.contains("state root"),
        "error must name the field: {out}"
    );
    assert_eq!(stored_head(&data).0, 9);

    // The refused block is kept for debug_getBadBlocks, as it was in the file; so is a block
    // that does not extend the chain (as geth keeps one on import), listed first, being higher.
    let kept = TempDir::new("bad-block-kept");
    let (ok, _) = import(kept.path(), &file);
    assert!(!ok);
    let mut orphan = blocks[11].clone();
    orphan.header.parent_hash = B256::repeat_byte(0x33);
    let orphan_file = dir.path().join("orphan.rlp");
    write_blocks(&orphan_file, std::slice::from_ref(&orphan));
    let (ok, out) = import(kept.path(), &orphan_file);
    assert!(!ok && out.contains("unknown parent"), "{out}");
    let node = Node::start(kept, &execution_apis_genesis(), &[]);
    let listed = node.result("debug_getBadBlocks", json!([]));
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    for (entry, block) in listed.as_array().unwrap().iter().zip([&orphan, &bad[9]]) {
        let hash = block.header.hash_slow();
        assert_eq!(entry["hash"], json!(hash));
        let rlp = alloy::primitives::Bytes::from(alloy::rlp::encode(block));
        assert_eq!(entry["rlp"], json!(rlp));
        assert_eq!(entry["block"]["hash"], json!(hash));
        assert_eq!(
            entry["block"]["number"],
            json!(format!("{:#x}", block.header.number))
        );
    }
    // debug_traceBadBlock runs the refused block on its parent (block 9, the head): its
    // transactions trace as the good block 10's do, given as RLP. The orphan's parent is unknown.
    let opts = json!({"tracer": "callTracer"});
    assert!(
        !blocks[9].body.transactions.is_empty(),
        "block 10 has transactions to trace"
    );
    let bad_trace = node.result(
        "debug_traceBadBlock",
        json!([bad[9].header.hash_slow(), opts]),
    );
    let good_rlp = alloy::primitives::Bytes::from(alloy::rlp::encode(&blocks[9]));
    let good_trace = node.result("debug_traceBlock", json!([good_rlp, opts]));
    assert_eq!(bad_trace, good_trace);
    assert_eq!(
        bad_trace.as_array().map(Vec::len),
        Some(blocks[9].body.transactions.len())
    );
    let r = node.call(
        "debug_traceBadBlock",
        json!([orphan.header.hash_slow(), opts]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("parent"),
        "{r}"
    );
    // debug_intermediateRoots runs it the same way: its roots are those of the good block 10
    // on a node holding the whole chain (the bad header's state root plays no part in running).
    let bad_roots = node.result(
        "debug_intermediateRoots",
        json!([bad[9].header.hash_slow()]),
    );
    assert_eq!(
        bad_roots.as_array().map(Vec::len),
        Some(blocks[9].body.transactions.len())
    );
    let whole = Node::execution_apis(&[]);
    let good_roots = whole.result(
        "debug_intermediateRoots",
        json!([blocks[9].header.hash_slow()]),
    );
    assert_eq!(bad_roots, good_roots);
    let r = node.call(
        "debug_intermediateRoots",
        json!([orphan.header.hash_slow()]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    drop(node);

    // A wrong gas used is named too.
    let mut bad = blocks.clone();
    bad[2].header.gas_used += 1;
    write_blocks(&file, &bad[..4]);
    let data = dir.path().join("data2");
    let (ok, out) = import(&data, &file);
    assert!(!ok);
    assert!(out.contains("block 3") && out.contains("gasUsed"), "{out}");
    assert_eq!(stored_head(&data).0, 2);
}

#[test]
fn truncated_file_stops_with_a_clear_error() {
    let dir = TempDir::new("truncated");
    let data = std::fs::read(conformance_dir().join("chain.rlp")).expect("read chain.rlp");
    let blocks = chain_blocks();
    let mut prefix = Vec::new();
    for b in &blocks[..20] {
        b.encode(&mut prefix);
    }
    // Cut block 21 in half.
    let cut = prefix.len() + (data.len() - prefix.len()).min(blocks[20].length()) / 2;
    let file = dir.path().join("cut.rlp");
    std::fs::write(&file, &data[..cut]).expect("write");
    let datadir = dir.path().join("data");
    let (ok, out) = import(&datadir, &file);
    assert!(!ok);
    assert!(out.contains("corrupt or truncated"), "{out}");
    assert_eq!(stored_head(&datadir).0, 20);
}

/// A node on a datadir holding the chain's proof-of-work blocks (imported: payloads cannot carry
/// PoW headers, so a consensus client only ever sends the post-merge part), and the rest.
fn node_at_merge(
    name: &str,
) -> (
    Node,
    Vec<Block<TxEnvelope>>,
    Vec<Vec<alloy::primitives::Bytes>>,
) {
    let blocks = chain_blocks();
    let merge = blocks
        .iter()
        .position(|b| b.header.difficulty.is_zero())
        .expect("chain reaches the merge");
    let dir = TempDir::new(name);
    let file = dir.path().join("pow.rlp");
    write_blocks(&file, &blocks[..merge]);
    let datadir = TempDir::new(name);
    let (ok, out) = import(datadir.path(), &file);
    assert!(ok, "{out}");
    let node = Node::start(datadir, &execution_apis_genesis(), &[]);
    // The EIP-7685 requests a consensus client would send along; here from a reference import
    // (the payload's header hash only matches with exactly the block's requests).
    let reference = support::import_execution_apis_chain();
    let chain =
        simnode::chain::load(execution_apis_genesis().to_str().expect("utf8")).expect("genesis");
    let store =
        simnode::store::Store::open(reference.path(), std::sync::Arc::new(chain.spec), None)
            .expect("store");
    let requests = blocks[merge..]
        .iter()
        .map(|b| store.requests(b.header.number).expect("requests"))
        .collect();
    (node, blocks[merge..].to_vec(), requests)
}

/// The `engine_newPayloadV*` request a consensus client sends for `block` (its fork picks the
/// version), carrying the block's EIP-7685 `requests` from Prague on.
fn new_payload_request(block: &Block<TxEnvelope>, requests: &[alloy::primitives::Bytes]) -> Value {
    let (payload, sidecar) =
        ExecutionPayload::from_block_unchecked(block.header.hash_slow(), block);
    match &payload {
        ExecutionPayload::V1(p) => {
            json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV1","params":[p]})
        }
        ExecutionPayload::V2(p) => {
            json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV2","params":[p]})
        }
        ExecutionPayload::V3(p) => {
            let cancun = sidecar.cancun().expect("cancun fields");
            if block.header.requests_hash.is_some() {
                json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV4",
                    "params":[p, cancun.versioned_hashes, cancun.parent_beacon_block_root, requests]})
            } else {
                json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV3",
                    "params":[p, cancun.versioned_hashes, cancun.parent_beacon_block_root]})
            }
        }
        ExecutionPayload::V4(_) => panic!("no Amsterdam payloads in this chain"),
    }
}

/// The spec's rules around the merge and payload structures: a proof-of-work block before
/// the terminal one is never a head (INVALID, latest valid zeros, nothing moves), payloads
/// must have their fork's structure (-32602), forkchoiceUpdated takes two params at most, and
/// engine_exchangeCapabilities does not list itself.
#[test]
fn the_engine_api_keeps_the_specs_rules_at_the_merge() {
    let (node, post_merge, requests) = node_at_merge("engine-merge-rules");
    let caps = node.engine_call(
        "engine_exchangeCapabilities",
        json!([["engine_newPayloadV1"]]),
    );
    let caps = caps["result"].as_array().expect("a list").clone();
    assert!(caps.contains(&json!("engine_newPayloadV4")), "{caps:?}");
    assert!(
        !caps.contains(&json!("engine_exchangeCapabilities")),
        "{caps:?}"
    );
    let r = node.engine_call(
        "engine_exchangeCapabilities",
        json!(["engine_newPayloadV1"]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");

    let terminal = post_merge[0].header.parent_hash;
    let head_number = || node.result("eth_blockNumber", json!([]));
    let before = head_number();
    let hash_of = |number: u64| {
        node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), false]),
        )["hash"]
            .clone()
    };
    let fcu = |head: &Value| {
        node.engine_call(
            "engine_forkchoiceUpdatedV1",
            json!([{"headBlockHash": head, "safeBlockHash": B256::ZERO, "finalizedBlockHash": B256::ZERO}]),
        )
    };
    let r = fcu(&json!(terminal));
    assert_eq!(r["result"]["payloadStatus"]["status"], "VALID", "{r}");
    let number =
        u64::from_str_radix(before.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let r = fcu(&hash_of(number - 1));
    assert_eq!(r["result"]["payloadStatus"]["status"], "INVALID", "{r}");
    assert_eq!(
        r["result"]["payloadStatus"]["latestValidHash"],
        json!(B256::ZERO),
        "{r}"
    );
    assert_eq!(r["result"]["payloadId"], Value::Null, "{r}");
    assert_eq!(head_number(), before, "a refused head moves nothing");
    // The proof-of-work genesis too (hive's pre-TTD forkchoice test).
    let r = fcu(&hash_of(0));
    assert_eq!(r["result"]["payloadStatus"]["status"], "INVALID", "{r}");
    assert_eq!(
        r["result"]["payloadStatus"]["latestValidHash"],
        json!(B256::ZERO),
        "{r}"
    );
    assert_eq!(head_number(), before);
    // A proof-of-stake block on one of them is INVALID at once (not kept as a side branch).
    let mut on_pow = post_merge[0].clone();
    on_pow.header.parent_hash = serde_json::from_value(hash_of(number - 1)).expect("hash");
    let request = new_payload_request(&on_pow, &requests[0]);
    let r = node.engine_call(
        request["method"].as_str().expect("method"),
        request["params"].clone(),
    );
    assert_eq!(r["result"]["status"], "INVALID", "{r}");
    assert_eq!(r["result"]["latestValidHash"], json!(B256::ZERO), "{r}");
    // The zero hash is no head (geth's answer), and no sync is waited for.
    let r = fcu(&json!(B256::ZERO));
    assert_eq!(r["result"]["payloadStatus"]["status"], "INVALID", "{r}");
    assert_eq!(node.result("eth_syncing", json!([])), json!(false));
    let r = node.engine_call(
        "engine_forkchoiceUpdatedV1",
        json!([{"headBlockHash": terminal, "safeBlockHash": B256::ZERO, "finalizedBlockHash": B256::ZERO}, null, "0xdead"]),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // The first post-merge block is before Shanghai: a V1 payload, whatever the version.
    let first = new_payload_request(&post_merge[0], &requests[0]);
    assert_eq!(first["method"], "engine_newPayloadV1");
    let payload = first["params"][0].clone();
    let with = |field: &str, value: Value| {
        let mut p = payload.clone();
        p[field] = value;
        p
    };
    for (method, bad) in [
        ("engine_newPayloadV1", with("withdrawals", json!([]))),
        ("engine_newPayloadV2", with("withdrawals", json!([]))),
        ("engine_newPayloadV2", with("blobGasUsed", json!("0x0"))),
        ("engine_newPayloadV2", with("excessBlobGas", json!("0x0"))),
    ] {
        let r = node.engine_call(method, json!([bad]));
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
    }
    // Up to the first Shanghai block, which V2 wants with its withdrawals.
    for (block, requests) in post_merge.iter().zip(&requests) {
        let request = new_payload_request(block, requests);
        if request["method"] == "engine_newPayloadV2" {
            let mut bare = request["params"][0].clone();
            bare.as_object_mut().expect("payload").remove("withdrawals");
            let r = node.engine_call("engine_newPayloadV2", json!([bare]));
            assert_eq!(r["error"]["code"], -32602, "{r}");
            return;
        }
        let (_, body) = node.engine_raw(&request.to_string());
        assert!(body.contains("VALID"), "{body}");
    }
    panic!("the chain reaches Shanghai");
}

#[test]
fn engine_api_replay_gives_the_same_head_as_import() {
    let (node, post_merge, requests) = node_at_merge("engine");
    assert!(
        post_merge.len() > 10,
        "most of the chain goes through the Engine API"
    );
    for (block, requests) in post_merge.into_iter().zip(requests) {
        let hash = block.header.hash_slow();
        let number = block.header.number;
        let request = new_payload_request(&block, &requests);
        let (status, body) = node.engine_raw(&request.to_string());
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["result"]["status"], "VALID", "block {number}: {v}");
        assert_eq!(
            v["result"]["latestValidHash"],
            json!(hash),
            "block {number}"
        );
    }
    let fcu =
        std::fs::read_to_string(conformance_dir().join("headfcu.json")).expect("headfcu.json");
    let (_, body) = node.engine_raw(&fcu);
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["result"]["payloadStatus"]["status"], "VALID", "{v}");
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(head["hash"], HEAD_54);
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["finalized", false]))["hash"],
        HEAD_54
    );
}

/// Until a consensus client names safe and finalized blocks, those tags are errors, not "no
/// block": -32000 "safe block not found" as geth answers for block getters, state methods,
/// receipts and simulations alike, and -39001 "unknown block" for trace methods, as reth. The
/// forkchoice then sets them.
#[test]
fn safe_and_finalized_are_errors_until_a_forkchoice_sets_them() {
    let node = Node::start(
        support::import_execution_apis_chain(),
        &execution_apis_genesis(),
        &[],
    );
    let from = "0x0c2c51a0990aee1d73c1228de158688341557508";
    let trace = |tag: &str| {
        node.call(
            "trace_callMany",
            json!([[[{"from": from, "to": from}, ["trace"]]], tag]),
        )
    };
    for tag in ["safe", "finalized"] {
        let expected = json!({"code": -32000, "message": format!("{tag} block not found")});
        for (method, params) in [
            ("eth_getBlockByNumber", json!([tag, false])),
            ("eth_getHeaderByNumber", json!([tag])),
            ("eth_getBlockTransactionCountByNumber", json!([tag])),
            ("eth_getBalance", json!([from, tag])),
            ("eth_call", json!([{"from": from, "to": from}, tag])),
            ("eth_getBlockReceipts", json!([tag])),
            (
                "eth_simulateV1",
                json!([{"blockStateCalls": [{"calls": []}]}, tag]),
            ),
            ("debug_getRawHeader", json!([tag])),
        ] {
            let r = node.call(method, params);
            assert_eq!(r["error"], expected, "{method} at {tag}: {r}");
        }
        let r = trace(tag);
        assert_eq!(
            r["error"],
            json!({"code": -39001, "message": "unknown block"}),
            "{r}"
        );
    }
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["latest", false]))["hash"],
        HEAD_54
    );

    node.send_head_forkchoice();
    for tag in ["safe", "finalized"] {
        let block = node.result("eth_getBlockByNumber", json!([tag, false]));
        assert_eq!(block["hash"], HEAD_54, "{tag}");
        let receipts = node.result("eth_getBlockReceipts", json!([tag]));
        assert!(receipts.is_array(), "{tag}: {receipts}");
        let r = trace(tag);
        assert!(r["result"].is_array(), "{tag}: {r}");
    }
}

#[test]
fn engine_api_refuses_bad_tokens_and_reports_unknown_parents() {
    let (node, post_merge, _) = node_at_merge("engine-auth");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], node.auth_port));
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"engine_exchangeCapabilities","params":[[]]}"#;
    let (status, _) =
        support::http_post(addr, "/", &[("Content-Type", "application/json")], body).expect("post");
    assert_eq!(status, 401, "no token");
    let (status, _) = support::http_post(
        addr,
        "/",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer not.a.jwt"),
        ],
        body,
    )
    .expect("post");
    assert_eq!(status, 401, "bad token");
    let (status, answer) = node.engine_raw(std::str::from_utf8(body).unwrap());
    assert_eq!(status, 200);
    assert!(answer.contains("engine_newPayloadV4"), "{answer}");

    // The second post-merge block before the first: its parent is unknown, so SYNCING.
    let block = &post_merge[1];
    let (payload, _) = ExecutionPayload::from_block_unchecked(block.header.hash_slow(), block);
    let ExecutionPayload::V1(p) = payload else {
        panic!("an early post-merge block is a V1 payload")
    };
    let req = json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV1","params":[p]});
    let (_, answer) = node.engine_raw(&req.to_string());
    let v: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(v["result"]["status"], "SYNCING", "{v}");

    // A payload whose hash does not match its contents is INVALID.
    let block = &post_merge[0];
    let (payload, _) = ExecutionPayload::from_block_unchecked(B256::repeat_byte(1), block);
    let ExecutionPayload::V1(p) = payload else {
        panic!("the first post-merge block is a V1 payload")
    };
    let req = json!({"jsonrpc":"2.0","id":1,"method":"engine_newPayloadV1","params":[p]});
    let (_, answer) = node.engine_raw(&req.to_string());
    let v: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(v["result"]["status"], "INVALID", "{v}");
}

/// Copies of `block` that are wrong in one way each, re-hashed so that the hash matches the
/// contents and only validation or execution can tell. Every one must be refused.
fn corrupted(block: &Block<TxEnvelope>) -> Vec<(&'static str, Block<TxEnvelope>)> {
    let with = |what: &'static str, change: &dyn Fn(&mut Block<TxEnvelope>)| {
        let mut b = block.clone();
        change(&mut b);
        (what, b)
    };
    let mut out = vec![
        with("state root", &|b| {
            b.header.state_root = B256::repeat_byte(0x11)
        }),
        with("receipts root", &|b| {
            b.header.receipts_root = B256::repeat_byte(0x22)
        }),
        with("gas used", &|b| b.header.gas_used += 1),
        with("logs bloom", &|b| b.header.logs_bloom.0[7] ^= 0x40),
        with("timestamp not after the parent's", &|b| {
            b.header.timestamp -= 12;
        }),
        with("gas limit past the 1/1024 step", &|b| {
            b.header.gas_limit += b.header.gas_limit / 512
        }),
        with("base fee", &|b| {
            b.header.base_fee_per_gas = b.header.base_fee_per_gas.map(|f| f + 1)
        }),
        with("extra data over 32 bytes", &|b| {
            b.header.extra_data = vec![7u8; 33].into()
        }),
    ];
    if !block.body.transactions.is_empty() {
        out.push(with("a transaction left out", &|b| {
            b.body.transactions.pop();
            b.header.transactions_root =
                alloy::consensus::proofs::calculate_transaction_root(&b.body.transactions);
        }));
        out.push(with("transactions swapped", &|b| {
            b.body.transactions.reverse();
            b.header.transactions_root =
                alloy::consensus::proofs::calculate_transaction_root(&b.body.transactions);
        }));
    }
    if let Some(withdrawals) = &block.body.withdrawals {
        let mut more = withdrawals.clone();
        more.push(alloy::eips::eip4895::Withdrawal {
            index: 999,
            validator_index: 1,
            address: alloy::primitives::Address::repeat_byte(0x99),
            amount: 1,
        });
        let root = alloy::consensus::proofs::calculate_withdrawals_root(&more);
        out.push(with("a withdrawal added", &move |b| {
            b.body.withdrawals = Some(more.clone());
            b.header.withdrawals_root = Some(root);
        }));
    }
    // A swap of two transactions gives the same list when there is one, or two alike.
    out.retain(|(_, b)| b.header.hash_slow() != block.header.hash_slow());
    out
}

#[test]
fn engine_api_refuses_corrupted_payloads_and_keeps_the_chain() {
    let (node, post_merge, requests) = node_at_merge("engine-corrupt");
    let mut refused = 0;
    let mut bad_hashes = std::collections::HashSet::new();
    // The first payload's parent is the last proof-of-work block: the spec has an INVALID
    // answer name no PoW block as the latest valid one, but zeros.
    let mut parent = B256::ZERO;
    for (block, requests) in post_merge.iter().zip(&requests) {
        let number = block.header.number;
        for (what, bad) in corrupted(block) {
            bad_hashes.insert(bad.header.hash_slow());
            let mut request = new_payload_request(&bad, requests);
            let (status, body) = node.engine_raw(&request.to_string());
            assert_eq!(status, 200, "{body}");
            let v: Value = serde_json::from_str(&body).expect("json");
            // Moved back across Cancun (420) or Prague (450) on this chain, the payload is
            // outside the fork of the method version its shape needs: -38005 comes first;
            // moved back across Shanghai (390), its withdrawals are the wrong structure for
            // the time it names: -32602.
            let ts = block.header.timestamp;
            let crosses = |fork: u64| ts - 12 < fork && fork <= ts;
            if what == "timestamp not after the parent's" && (crosses(420) || crosses(450)) {
                assert_eq!(v["error"]["code"], -38005, "block {number}, {what}: {v}");
                refused += 1;
                continue;
            }
            if what == "timestamp not after the parent's" && crosses(390) {
                assert_eq!(v["error"]["code"], -32602, "block {number}, {what}: {v}");
                refused += 1;
                continue;
            }
            assert_eq!(
                v["result"]["status"], "INVALID",
                "block {number}, {what}: {v}"
            );
            // The parent when the block could be built, none when its contents cannot make one.
            let latest_valid = if what == "extra data over 32 bytes" {
                Value::Null
            } else {
                json!(parent)
            };
            assert_eq!(
                v["result"]["latestValidHash"], latest_valid,
                "block {number}, {what}"
            );
            refused += 1;
            // The same block again gets the same answer, without being stored in between.
            request["id"] = json!(2);
            let (_, again) = node.engine_raw(&request.to_string());
            let again: Value = serde_json::from_str(&again).expect("json");
            assert_eq!(
                again["result"]["status"], "INVALID",
                "block {number}, {what}"
            );
        }
        // A transaction that does not decode: no block to hash or run.
        if !block.body.transactions.is_empty() {
            let mut request = new_payload_request(block, requests);
            request["params"][0]["transactions"][0] = json!("0x02ff");
            let (_, body) = node.engine_raw(&request.to_string());
            let v: Value = serde_json::from_str(&body).expect("json");
            assert_eq!(v["result"]["status"], "INVALID", "block {number}: {v}");
            assert_eq!(v["result"]["latestValidHash"], Value::Null, "{v}");
        }
        let hash = block.header.hash_slow();
        let (_, body) = node.engine_raw(&new_payload_request(block, requests).to_string());
        let v: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["result"]["status"], "VALID", "block {number}: {v}");
        parent = hash;
    }
    assert!(refused > 8 * post_merge.len(), "{refused} refusals");

    // The refused blocks that could be built are kept as bad blocks: the ten highest.
    let listed = node.result("debug_getBadBlocks", json!([]));
    let listed = listed.as_array().expect("a list");
    assert_eq!(listed.len(), 10, "geth's number of bad blocks");
    let numbers: Vec<u64> = listed
        .iter()
        .map(|b| {
            u64::from_str_radix(
                b["block"]["number"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("0x"),
                16,
            )
            .unwrap()
        })
        .collect();
    assert!(
        numbers.windows(2).all(|w| w[0] >= w[1]),
        "highest first: {numbers:?}"
    );
    assert_eq!(numbers[0], post_merge.last().unwrap().header.number);
    for entry in listed {
        let hash: B256 = serde_json::from_value(entry["hash"].clone()).expect("a hash");
        assert!(bad_hashes.contains(&hash), "{hash} was refused");
        let rlp: alloy::primitives::Bytes =
            serde_json::from_value(entry["rlp"].clone()).expect("rlp bytes");
        let block = Block::<TxEnvelope>::decode(&mut rlp.as_ref()).expect("the rlp decodes");
        assert_eq!(block.header.hash_slow(), hash);
        assert_eq!(entry["block"]["hash"], json!(hash));
        let txs = entry["block"]["transactions"]
            .as_array()
            .expect("whole transactions");
        assert_eq!(txs.len(), block.body.transactions.len());
        assert!(txs
            .iter()
            .all(|tx| tx["from"].is_string() && tx["blockHash"] == json!(hash)));
    }

    let fcu =
        std::fs::read_to_string(conformance_dir().join("headfcu.json")).expect("headfcu.json");
    let (_, body) = node.engine_raw(&fcu);
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["result"]["payloadStatus"]["status"], "VALID", "{v}");
    // Every block is the real one, with the real receipts.
    for block in &post_merge {
        let tag = format!("{:#x}", block.header.number);
        let stored = node.result("eth_getBlockByNumber", json!([tag, false]));
        assert_eq!(stored["hash"], json!(block.header.hash_slow()), "{tag}");
        let receipts = node.result("eth_getBlockReceipts", json!([tag]));
        assert_eq!(
            receipts.as_array().map(Vec::len),
            Some(block.body.transactions.len()),
            "{tag}"
        );
    }
    assert_eq!(
        node.result("eth_getBlockByNumber", json!(["latest", false]))["hash"],
        HEAD_54
    );
}

/// Damaged Engine API requests (payloads and forkchoice updates of this chain, mutated at
/// random) get JSON-RPC answers and leave the chain as it was: the undamaged rest of the chain
/// still imports on top and reaches the same head as an import of the file.
#[test]
fn damaged_engine_requests_leave_the_chain_whole() {
    use support::mutate::{mutate, palette, Rng};
    let (node, post_merge, requests) = node_at_merge("engine-damage");
    let half = post_merge.len() / 2;
    let genuine: Vec<Value> = post_merge
        .iter()
        .zip(&requests)
        .map(|(block, requests)| new_payload_request(block, requests))
        .collect();
    for (number, request) in genuine[..half].iter().enumerate() {
        let (_, body) = node.engine_raw(&request.to_string());
        assert!(body.contains("\"VALID\""), "block {number}: {body}");
    }

    let fcu: Value = serde_json::from_str(
        &std::fs::read_to_string(conformance_dir().join("headfcu.json")).expect("headfcu.json"),
    )
    .expect("headfcu json");
    let palette = palette();
    let mut rng = Rng(0x0e17_91e5);
    for _ in 0..400 {
        let base = if rng.below(4) == 0 {
            &fcu
        } else {
            rng.pick(&genuine)
        };
        let request = mutate(&mut rng, base, &palette).to_string();
        let (status, body) = node.engine_raw(&request);
        let answer: Option<Value> = serde_json::from_str(&body).ok();
        assert!(
            status == 200
                && answer
                    .as_ref()
                    .is_some_and(|a| a.get("result").is_some() || a.get("error").is_some()),
            "HTTP {status} {body:.300} for {request:.1500}"
        );
    }
    let log = node.log();
    assert!(!log.contains("panicked"), "the node panicked:\n{log}");
    // The payloads above wait for a forkchoice to name them, and a change the block hash does
    // not cover (an unknown field, say) leaves a forkchoice whole, so the head may have moved
    // on, but only along the chain.
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let number = u64::from_str_radix(
        head["number"]
            .as_str()
            .expect("number")
            .trim_start_matches("0x"),
        16,
    )
    .expect("hex number");
    let first = post_merge[0].header.number;
    assert!(number >= first - 1, "the head went back: {head}");
    let expected = match number.checked_sub(first) {
        Some(i) => post_merge[i as usize].header.hash_slow(),
        None => post_merge[0].header.parent_hash,
    };
    assert_eq!(head["hash"], json!(expected), "the head left the chain");

    for (i, request) in genuine.iter().enumerate() {
        let (_, body) = node.engine_raw(&request.to_string());
        assert!(body.contains("\"VALID\""), "post-merge block {i}: {body}");
    }
    let (_, body) = node.engine_raw(&fcu.to_string());
    assert!(body.contains("\"VALID\""), "{body}");
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(head["hash"], HEAD_54);
    for n in 0..=54u64 {
        let receipts = node.result("eth_getBlockReceipts", json!([format!("{n:#x}")]));
        assert!(receipts.is_array(), "block {n} whole: {receipts}");
    }
}

/// What a consensus client reads back over the Engine API: payload bodies by range and by hash
/// (the block's transactions as EIP-2718 bytes, withdrawals null before Shanghai), the client
/// version, and the `eth_` methods it asks the same URL (Lighthouse's liveness check is
/// `eth_syncing`), while the rest of the public RPC stays off the Engine API.
#[test]
fn engine_api_serves_payload_bodies_client_version_and_eth_methods() {
    use alloy::eips::eip2718::Encodable2718;

    let node = Node::execution_apis(&[]);
    let engine = |method: &str, params: Value| node.engine_call(method, params);
    let blocks = chain_blocks();
    let expected = |block: &Block<TxEnvelope>| -> Value {
        let txs: Vec<String> = block
            .body
            .transactions
            .iter()
            .map(|t| alloy::hex::encode_prefixed(t.encoded_2718()))
            .collect();
        json!({"transactions": txs, "withdrawals": block.body.withdrawals})
    };

    // The whole chain in one range, cut at the head (54) rather than padded.
    let r = engine("engine_getPayloadBodiesByRangeV1", json!(["0x1", "0x400"]));
    let bodies = r["result"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert_eq!(bodies.len(), blocks.len());
    for (body, block) in bodies.iter().zip(&blocks) {
        assert_eq!(body, &expected(block), "block {}", block.header.number);
    }
    assert!(
        bodies.iter().any(|b| b["withdrawals"].is_null())
            && bodies.iter().any(|b| b["withdrawals"].is_array()),
        "the chain spans Shanghai"
    );
    let r = engine("engine_getPayloadBodiesByRangeV1", json!(["0x37", "0x2"]));
    assert_eq!(r["result"], json!([]), "{r}");
    for params in [json!(["0x0", "0x1"]), json!(["0x1", "0x0"])] {
        let r = engine("engine_getPayloadBodiesByRangeV1", params);
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    let r = engine("engine_getPayloadBodiesByRangeV1", json!(["0x1", "0x401"]));
    assert_eq!(r["error"]["code"], -38004, "{r}");

    let (first, last) = (&blocks[0], &blocks[blocks.len() - 1]);
    let r = engine(
        "engine_getPayloadBodiesByHashV1",
        json!([[
            last.header.hash_slow(),
            B256::repeat_byte(1),
            first.header.hash_slow()
        ]]),
    );
    assert_eq!(
        r["result"],
        json!([expected(last), null, expected(first)]),
        "{r}"
    );

    let r = engine(
        "engine_getClientVersionV1",
        json!([{"code": "XY", "name": "a client", "version": "v1.0.0", "commit": "0x01020304"}]),
    );
    assert_eq!(r["result"][0]["code"], "SN", "{r}");
    assert_eq!(r["result"][0]["name"], "simnode", "{r}");

    let r = engine("engine_exchangeCapabilities", json!([[]]));
    let caps = r["result"].as_array().unwrap_or_else(|| panic!("{r}"));
    for method in [
        "engine_getPayloadBodiesByHashV1",
        "engine_getPayloadBodiesByRangeV1",
        "engine_getClientVersionV1",
    ] {
        assert!(caps.contains(&json!(method)), "{method} in {r}");
    }

    assert_eq!(engine("eth_syncing", json!([]))["result"], json!(false));
    assert_eq!(
        engine("eth_chainId", json!([]))["result"],
        "0xc72dd9d5e883e"
    );
    let r = engine("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(r["result"]["hash"], HEAD_54, "{r}");
    let r = engine("eth_getBlockByHash", json!([HEAD_54, false]));
    assert_eq!(r["result"]["number"], "0x36", "{r}");
    // Only the eth namespace joins the Engine API.
    let r = engine("debug_getRawHeader", json!(["latest"]));
    assert_eq!(r["error"]["code"], -32601, "{r}");
}

/// A validator's round trip over the Engine API's JSON: forkchoiceUpdatedV3 with payload
/// attributes on the head answers a payload id, getPayloadV5 (the chain is at Osaka) gives the
/// built block, and sent back with newPayloadV4 it is VALID and becomes the head.
#[test]
fn engine_api_builds_a_payload_a_consensus_client_can_propose() {
    let node = Node::execution_apis(&[]);
    let engine = |method: &str, params: Value| node.engine_call(method, params);
    let (state, attributes, beacon_root) = support::proposal_on_execution_apis_head();
    let r = engine("engine_forkchoiceUpdatedV3", json!([state, attributes]));
    assert_eq!(r["result"]["payloadStatus"]["status"], "VALID", "{r}");
    let id = r["result"]["payloadId"].clone();
    assert!(id.is_string(), "{r}");
    // Through V2: the beacon root is not in its structure; without it, Osaka is not its fork.
    let r2 = engine("engine_forkchoiceUpdatedV2", json!([state, attributes]));
    assert_eq!(r2["error"]["code"], -38003, "{r2}");
    let mut v2_shaped = attributes.clone();
    v2_shaped
        .as_object_mut()
        .expect("object")
        .remove("parentBeaconBlockRoot");
    let r2 = engine("engine_forkchoiceUpdatedV2", json!([state, v2_shaped]));
    assert_eq!(r2["error"]["code"], -38005, "{r2}");

    let r = engine("engine_getPayloadV4", json!([id]));
    assert_eq!(r["error"]["code"], -38005, "an Osaka payload: {r}");
    let r = engine("engine_getPayloadV5", json!([id]));
    let envelope = &r["result"];
    let payload = &envelope["executionPayload"];
    assert_eq!(payload["blockNumber"], "0x37", "{r}");
    assert_eq!(payload["parentHash"], HEAD_54);
    assert_eq!(payload["withdrawals"][0]["amount"], "0x3b9aca00");
    assert_eq!(envelope["blobsBundle"]["commitments"], json!([]));
    let hash = payload["blockHash"].clone();
    // An Osaka payload through V3 or V2 is not their fork (-38005), whatever else is wrong.
    let r = engine("engine_newPayloadV3", json!([payload, [], beacon_root]));
    assert_eq!(r["error"]["code"], -38005, "{r}");
    let mut v2_payload = payload.clone();
    for field in ["blobGasUsed", "excessBlobGas"] {
        v2_payload.as_object_mut().expect("object").remove(field);
    }
    let r = engine("engine_newPayloadV2", json!([v2_payload]));
    assert_eq!(r["error"]["code"], -38005, "{r}");
    // Execution requests that break EIP-7685's form are invalid params, not a block to judge:
    // a type byte alone, nothing, out of order, a type twice.
    for requests in [
        json!(["0x00"]),
        json!(["0x"]),
        json!(["0x01aa", "0x00bb"]),
        json!(["0x01aa", "0x01bb"]),
    ] {
        let r = engine(
            "engine_newPayloadV4",
            json!([payload, [], beacon_root, requests]),
        );
        assert_eq!(r["error"]["code"], -32602, "{requests}: {r}");
    }
    let r = engine(
        "engine_newPayloadV4",
        json!([payload, [], beacon_root, envelope["executionRequests"]]),
    );
    assert_eq!(r["result"]["status"], "VALID", "{r}");
    let r = engine(
        "engine_forkchoiceUpdatedV3",
        json!([{"headBlockHash": hash, "safeBlockHash": HEAD_54, "finalizedBlockHash": HEAD_54}, null]),
    );
    assert_eq!(r["result"]["payloadStatus"]["status"], "VALID", "{r}");
    assert_eq!(r["result"]["payloadId"], Value::Null);
    let r = node.call("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(r["result"]["hash"], hash, "{r}");
    // The withdrawal was paid: 1 gwei in wei to 0xaa.
    let r = node.call(
        "eth_getBalance",
        json!(["0x00000000000000000000000000000000000000aa", "latest"]),
    );
    let before = node.call(
        "eth_getBalance",
        json!(["0x00000000000000000000000000000000000000aa", "0x36"]),
    );
    let wei = |v: &Value| {
        u128::from_str_radix(v["result"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    };
    assert_eq!(
        wei(&r) - wei(&before),
        1_000_000_000_000_000_000,
        "{r} {before}"
    );
}

/// A synced node's `pending` tag names the block it would build on its head now from its pool:
/// a transaction sent with eth_sendRawTransaction is in it, and its effect shows at `pending`
/// and not at `latest`, until a payload carrying it becomes the head.
#[test]
fn a_synced_nodes_pending_block_holds_its_pool() {
    let node = Node::execution_apis(&[]);
    let path = conformance_dir().join("eth_sendRawTransaction/send-legacy-transaction.io");
    let fixture = support::Fixture::load(&path).expect("the fixture");
    let request: Value = serde_json::from_str(&fixture.exchanges[0].0).expect("a request");
    let raw = request["params"][0].clone();
    let empty = node.result("eth_getBlockByNumber", json!(["pending", false]));
    assert_eq!(empty["parentHash"], HEAD_54, "{empty}");
    assert_eq!(empty["number"], "0x37");
    assert_eq!(empty["transactions"], json!([]));
    // Its gas limit steps toward geth's ceiling, as geth's miner lays its pending block out
    // (the execution-apis testing_buildBlockV1 fixture shows the same step from 0xbebc200).
    assert_eq!(empty["gasLimit"], "0xbe8c711", "{empty}");
    let balance = |tag: &str| {
        let r = node.result("eth_getBalance", json!([RECIPIENT, tag]));
        u128::from_str_radix(r.as_str().expect("a quantity").trim_start_matches("0x"), 16)
            .expect("hex")
    };
    let before = balance("latest");

    let hash = node.result("eth_sendRawTransaction", json!([raw]));
    let pending = node.result("eth_getBlockByNumber", json!(["pending", false]));
    assert_eq!(pending["transactions"], json!([hash]), "{pending}");
    assert_eq!(pending["hash"], Value::Null);
    assert_eq!(balance("latest"), before);
    assert_eq!(balance("pending"), before + 10);
    let full = node.result("eth_getBlockByNumber", json!(["pending", true]));
    assert_eq!(full["transactions"][0]["hash"], hash, "{full}");
    assert_eq!(full["transactions"][0]["blockNumber"], "0x37");
    // Not mined: the transaction is still the pool's.
    assert_eq!(
        node.result("eth_getTransactionReceipt", json!([hash])),
        Value::Null
    );
}

/// A proposer's payload carries the blob transactions whose sidecars the node holds, with
/// their blobs bundle (`BlobsBundleV2` on an Osaka chain), and the block takes its place in the
/// chain like any other. Before it is included, a consensus client can fetch the blob from the
/// pool with `engine_getBlobsV2`; afterwards it is gone with its transaction. A blob
/// transaction sent without its sidecar stays out of the payload (no blobs to publish).
#[test]
fn a_proposers_payload_carries_blob_transactions_and_their_bundle() {
    use alloy::eips::eip7594::CELLS_PER_EXT_BLOB;
    // The dev chain (Osaka from genesis, funded dev accounts), followed through the Engine API.
    let node = Node::start(TempDir::new("blob-proposer"), Path::new("dev"), &[]);
    let engine = |method: &str, params: Value| node.engine_call(method, params);
    let versioned = support::zero_blob_versioned_hash();
    let infinity = json!(support::infinity_point());
    let zero_blob = json!(format!("0x{}", "00".repeat(131_072)));

    let raw = support::dev_blob_tx(
        0,
        &[versioned],
        support::BlobForm::CellProofs(CELLS_PER_EXT_BLOB),
    );
    let with_sidecar = node.result("eth_sendRawTransaction", json!([raw]));
    let mut bare_versioned = versioned;
    bare_versioned.0[31] ^= 1;
    let bare = node.result(
        "eth_sendRawTransaction",
        json!([support::dev_blob_tx(
            1,
            &[bare_versioned],
            support::BlobForm::Bare
        )]),
    );

    let fetched = engine("engine_getBlobsV2", json!([[versioned]]));
    assert_eq!(fetched["result"][0]["blob"], zero_blob);
    assert_eq!(
        fetched["result"][0]["proofs"],
        json!(vec![infinity.clone(); CELLS_PER_EXT_BLOB])
    );
    // All or nothing: the bare transaction's blob is not held.
    let r = engine("engine_getBlobsV2", json!([[versioned, bare_versioned]]));
    assert_eq!(r["result"], Value::Null, "{r}");
    let r = engine("engine_getBlobsV3", json!([[bare_versioned, versioned]]));
    assert_eq!(r["result"][0], Value::Null, "{r}");
    assert_eq!(r["result"][1]["blob"], zero_blob);
    let r = engine("engine_getBlobsV1", json!([[versioned]]));
    assert_eq!(r["error"]["code"], -38005, "V1 is before Osaka: {r}");

    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let head_hash = head["hash"].clone();
    let timestamp = u64::from_str_radix(
        head["timestamp"]
            .as_str()
            .expect("a quantity")
            .trim_start_matches("0x"),
        16,
    )
    .expect("hex");
    let beacon_root = format!("0x{}", "11".repeat(32));
    let state = json!({"headBlockHash": head_hash, "safeBlockHash": head_hash, "finalizedBlockHash": head_hash});
    let attributes = json!({
        "timestamp": format!("{:#x}", timestamp + 12),
        "prevRandao": format!("0x{}", "22".repeat(32)),
        "suggestedFeeRecipient": "0x00000000000000000000000000000000000000fe",
        "withdrawals": [],
        "parentBeaconBlockRoot": beacon_root,
    });
    let r = engine("engine_forkchoiceUpdatedV3", json!([state, attributes]));
    let id = r["result"]["payloadId"].clone();
    assert!(id.is_string(), "{r}");
    let r = engine("engine_getPayloadV5", json!([id]));
    let envelope = &r["result"];
    let payload = &envelope["executionPayload"];
    let txs = payload["transactions"].as_array().expect("transactions");
    assert_eq!(
        txs.len(),
        1,
        "only the transaction with a sidecar: {payload}"
    );
    assert_eq!(payload["blobGasUsed"], "0x20000", "{payload}");
    let bundle = &envelope["blobsBundle"];
    assert_eq!(bundle["commitments"], json!([infinity]));
    assert_eq!(bundle["blobs"], json!([zero_blob]));
    assert_eq!(
        bundle["proofs"],
        json!(vec![infinity; CELLS_PER_EXT_BLOB]),
        "a proof per cell"
    );

    let r = engine(
        "engine_newPayloadV4",
        json!([
            payload,
            [versioned],
            beacon_root,
            envelope["executionRequests"]
        ]),
    );
    assert_eq!(r["result"]["status"], "VALID", "{r}");
    let hash = payload["blockHash"].clone();
    let r = engine(
        "engine_forkchoiceUpdatedV3",
        json!([{"headBlockHash": hash, "safeBlockHash": head_hash, "finalizedBlockHash": head_hash}, null]),
    );
    assert_eq!(r["result"]["payloadStatus"]["status"], "VALID", "{r}");
    let receipt = node.result("eth_getTransactionReceipt", json!([with_sidecar]));
    assert_eq!(receipt["blockHash"], hash, "{receipt}");
    assert_eq!(receipt["status"], "0x1");

    // Included: its blob left the pool with it. The bare transaction still waits.
    let r = engine("engine_getBlobsV2", json!([[versioned]]));
    assert_eq!(r["result"], Value::Null, "{r}");
    let waiting = node.result("eth_getTransactionByHash", json!([bare]));
    assert_eq!(waiting["blockHash"], Value::Null, "{waiting}");
}

/// A datadir keeps the chain configuration its blocks ran under: opened with a genesis.json
/// that moves a fork its blocks already passed, or names another chain id, the node refuses
/// to start (it would execute and trace its own blocks under other rules), naming the
/// difference; a fork moved past the head is taken.
#[test]
fn a_datadir_refuses_a_chain_configuration_its_blocks_contradict() {
    let dir = TempDir::new("chain-config");
    let chain = conformance_dir().join("chain.rlp");
    let genesis: Value = serde_json::from_str(
        &std::fs::read_to_string(execution_apis_genesis()).expect("genesis.json"),
    )
    .expect("genesis json");
    let import = |genesis: &Value, name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, genesis.to_string()).expect("write genesis");
        Command::new(simnode_bin())
            .args(["import", "--chain"])
            .arg(&path)
            .arg("--datadir")
            .arg(dir.path().join("data"))
            .arg(&chain)
            .output()
            .expect("run simnode import")
    };
    let first = import(&genesis, "genesis.json");
    assert!(first.status.success(), "{first:?}");

    let mut moved = genesis.clone();
    // (The forks after London move with it: out of order, the file is refused for that.)
    for fork in [
        "londonBlock",
        "arrowGlacierBlock",
        "grayGlacierBlock",
        "mergeNetsplitBlock",
    ] {
        moved["config"][fork] = json!(40);
    }
    let refused = import(&moved, "london-moved.json");
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("chain configuration") && stderr.contains("block 40"),
        "{stderr}"
    );

    let mut other_id = genesis.clone();
    other_id["config"]["chainId"] = json!(999);
    let refused = import(&other_id, "chain-999.json");
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("chain id 999"), "{stderr}");

    // A fork scheduled after the head (timestamp 540) may be added or moved.
    let mut later = genesis.clone();
    later["config"]["amsterdamTime"] = json!(100_000);
    let taken = import(&later, "later-fork.json");
    assert!(taken.status.success(), "{taken:?}");
    // And the original still opens.
    let again = import(&genesis, "genesis.json");
    assert!(again.status.success(), "{again:?}");
}

/// A damaged database file stops the node with an error naming it, not a panic (redb panics
/// on some damage it meets while opening).
#[test]
fn a_damaged_database_is_an_error_not_a_panic() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = TempDir::new("damaged-db");
    let data = dir.path().join("data");
    let import = || {
        Command::new(simnode_bin())
            .args(["import", "--chain"])
            .arg(execution_apis_genesis())
            .arg("--datadir")
            .arg(&data)
            .arg(conformance_dir().join("chain.rlp"))
            .output()
            .expect("run simnode import")
    };
    assert!(import().status.success());
    let path = data.join("chain.redb");
    let size = std::fs::metadata(&path).expect("chain.redb").len();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open chain.redb");
    for offset in (65_536..size).step_by(65_536) {
        file.seek(SeekFrom::Start(offset)).expect("seek");
        file.write_all(&[0x80; 64]).expect("write");
    }
    drop(file);
    let damaged = import();
    assert_eq!(damaged.status.code(), Some(1), "{damaged:?}");
    let stderr = String::from_utf8_lossy(&damaged.stderr);
    assert!(stderr.contains("error: opening the database"), "{stderr}");
}

/// A node that is not a dev node applies geth's EIP-7702 pool limits to what
/// eth_sendRawTransaction brings: an account with a delegation has one transaction waiting at
/// most (a replacement of it goes in), and none behind a nonce gap.
#[test]
fn a_delegated_sender_has_one_transaction_in_flight() {
    use alloy::{
        consensus::{SignableTransaction, TxEip1559},
        eips::Encodable2718,
        primitives::{Address, Bytes, TxKind, U256},
    };
    let keys = simnode::chain::dev_signing_keys().expect("dev keys");
    let (delegated, key) = (&keys[0].0, &keys[0].1);
    let mut genesis = serde_json::to_value(simnode::chain::dev_genesis()).expect("genesis json");
    let mut code = vec![0xef, 0x01, 0x00];
    code.extend_from_slice(Address::repeat_byte(0xde).as_slice());
    let alloc = genesis["alloc"].as_object_mut().expect("an alloc");
    let entry = alloc
        .iter_mut()
        .find(|(address, _)| address.parse::<Address>().ok() == Some(*delegated))
        .map(|(_, account)| account)
        .expect("the first dev account is funded");
    entry["code"] = json!(Bytes::from(code));
    let dir = TempDir::new("delegated-sender");
    let path = dir.path().join("genesis.json");
    std::fs::write(&path, genesis.to_string()).expect("write genesis");
    let node = Node::start(TempDir::new("delegated-sender-data"), &path, &[]);

    let send = |nonce: u64, fee: u128| {
        let tx = TxEip1559 {
            chain_id: simnode::chain::DEV_CHAIN_ID,
            nonce,
            gas_limit: 100_000,
            max_fee_per_gas: fee,
            max_priority_fee_per_gas: fee,
            to: TxKind::Call(Address::repeat_byte(0xaa)),
            value: U256::from(1),
            ..Default::default()
        };
        let signature = simnode::chain::sign_hash(key, tx.signature_hash()).expect("a signature");
        let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
        node.call("eth_sendRawTransaction", json!([Bytes::from(raw)]))
    };
    let gwei = 1_000_000_000;
    let gapped = send(1, 10 * gwei);
    assert_eq!(
        gapped["error"]["message"], "gapped-nonce tx from delegated accounts",
        "{gapped}"
    );
    let first = send(0, 10 * gwei);
    assert!(first["result"].is_string(), "{first}");
    let second = send(1, 10 * gwei);
    assert_eq!(
        second["error"]["message"], "in-flight transaction limit reached for delegated accounts",
        "{second}"
    );
    assert_eq!(second["error"]["code"], -32000);
    let replacement = send(0, 20 * gwei);
    assert!(replacement["result"].is_string(), "{replacement}");
}

/// `--dev` on a datadir holding an imported (or followed) chain is refused before it touches
/// it: a dev node would mine its own blocks onto the chain and mark them final for good.
#[test]
fn dev_mode_refuses_a_followed_chain() {
    let datadir = TempDir::new("dev-on-followed");
    let (ok, text) = import(datadir.path(), &conformance_dir().join("chain.rlp"));
    assert!(ok, "{text}");
    let out = Command::new(simnode_bin())
        .args(["node", "--dev", "--chain"])
        .arg(execution_apis_genesis())
        .arg("--datadir")
        .arg(datadir.path())
        .output()
        .expect("run simnode node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--dev would mine"), "{stderr}");
    // Nothing was changed: the chain has no finalized block, and no dev key was made.
    let node = Node::start(datadir, &execution_apis_genesis(), &[]);
    let r = node.call("eth_getBlockByNumber", json!(["finalized", false]));
    assert!(r["error"].is_object() || r["result"].is_null(), "{r}");
}

/// A chain file of another chain is refused in words that say so, and a datadir held by a
/// running import or node is refused as in use.
#[test]
fn imports_of_another_chain_or_into_a_busy_datadir_say_why() {
    let datadir = TempDir::new("import-other-chain");
    let out = Command::new(simnode_bin())
        .args(["import", "--chain", "dev", "--datadir"])
        .arg(datadir.path())
        .arg(conformance_dir().join("chain.rlp"))
        .output()
        .expect("run simnode import");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("not on this datadir's genesis"), "{stderr}");

    let node = Node::execution_apis(&[]);
    let (ok, text) = import(node.datadir(), &conformance_dir().join("chain.rlp"));
    assert!(!ok, "{text}");
    assert!(text.contains("is in use by another process"), "{text}");
}
