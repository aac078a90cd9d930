//! The debug methods against a small in-memory chain: a genesis block and block 1 with two
//! transactions from one sender (a value transfer, then a call into a contract that stores a
//! slot and emits a log), all forks through Prague active, so the pre-block system calls run.

use std::{sync::Arc, time::Duration};

use alloy::{
    consensus::{
        transaction::Recovered, BlockBody, Eip658Value, Header, Receipt, ReceiptEnvelope,
        SignableTransaction, TxEnvelope, TxLegacy,
    },
    eips::{eip2718::Decodable2718, eip7840::BlobParams},
    primitives::{Address, Bytes, Sealable, Sealed, Signature, TxKind, B256, U256},
    rlp::Decodable,
};
use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork as F, ForkCondition};
use revm::{
    bytecode::Bytecode,
    database::{CacheDB, EmptyDB},
    state::AccountInfo,
};
use serde_json::{json, Value};
use simnode_api::{
    testing::{MemoryChain, MemoryPool},
    ChainSpec, ModuleContext, RpcLimits, StoredBlock,
};

const SENDER: Address = Address::repeat_byte(0xa1);
const RECIPIENT: Address = Address::repeat_byte(0xb2);
const CONTRACT: Address = Address::repeat_byte(0xc3);
const COINBASE: Address = Address::repeat_byte(0xcb);
const BASE_FEE: u64 = 7;

/// PUSH1 0x2a PUSH1 0x01 SSTORE PUSH1 0 PUSH1 0 LOG0 STOP
const CODE: &[u8] = &[
    0x60, 0x2a, 0x60, 0x01, 0x55, 0x60, 0x00, 0x60, 0x00, 0xa0, 0x00,
];

fn spec(genesis: Sealed<Header>) -> ChainSpec {
    let mut forks = vec![];
    for f in [
        F::Frontier,
        F::Homestead,
        F::Tangerine,
        F::SpuriousDragon,
        F::Byzantium,
        F::Constantinople,
        F::Petersburg,
        F::Istanbul,
        F::Berlin,
        F::London,
        F::Paris,
    ] {
        forks.push((f, ForkCondition::Block(0)));
    }
    for f in [F::Shanghai, F::Cancun, F::Prague] {
        forks.push((f, ForkCondition::Timestamp(0)));
    }
    ChainSpec {
        name: "custom".into(),
        chain_id: 1337,
        hardforks: EthereumChainHardforks::new(forks),
        blob_schedule: vec![(0, BlobParams::cancun()), (0, BlobParams::prague())],
        deposit_contract: None,
        genesis_header: genesis,
    }
}

fn header(number: u64, parent: B256) -> Header {
    Header {
        number,
        parent_hash: parent,
        timestamp: 1_000 + 12 * number,
        gas_limit: 30_000_000,
        base_fee_per_gas: Some(BASE_FEE),
        beneficiary: COINBASE,
        excess_blob_gas: Some(0),
        blob_gas_used: Some(0),
        parent_beacon_block_root: Some(B256::repeat_byte(0xbe)),
        requests_hash: Some(B256::ZERO),
        withdrawals_root: Some(alloy::consensus::constants::EMPTY_WITHDRAWALS),
        ..Default::default()
    }
}

fn legacy(nonce: u64, to: Address, gas: u64, value: u64) -> TxEnvelope {
    let tx = TxLegacy {
        chain_id: Some(1337),
        nonce,
        gas_price: 10,
        gas_limit: gas,
        to: TxKind::Call(to),
        value: U256::from(value),
        input: Bytes::new(),
    };
    TxEnvelope::Legacy(tx.into_signed(Signature::test_signature()))
}

struct Fixture {
    ctx: ModuleContext,
    block1: Arc<StoredBlock>,
    pooled: TxEnvelope,
}

fn fixture_with(limits: RpcLimits) -> Fixture {
    let mut db = CacheDB::new(EmptyDB::default());
    db.insert_account_info(
        SENDER,
        AccountInfo {
            balance: U256::from(10u128.pow(18)),
            ..Default::default()
        },
    );
    db.insert_account_info(
        CONTRACT,
        AccountInfo::default().with_code(Bytecode::new_raw(Bytes::from_static(CODE))),
    );

    let genesis = header(0, B256::ZERO).seal_slow();
    let block0 = StoredBlock {
        header: genesis.clone(),
        body: BlockBody {
            transactions: vec![],
            ommers: vec![],
            withdrawals: Some(Default::default()),
        },
        senders: vec![],
    };
    let txs = vec![
        legacy(0, RECIPIENT, 21_000, 1),
        legacy(1, CONTRACT, 100_000, 0),
    ];
    let block1 = Arc::new(StoredBlock {
        header: header(1, genesis.hash()).seal_slow(),
        body: BlockBody {
            transactions: txs.clone(),
            ommers: vec![],
            withdrawals: Some(Default::default()),
        },
        senders: vec![SENDER, SENDER],
    });
    let receipt = |cumulative: u64| {
        ReceiptEnvelope::Legacy(
            Receipt {
                status: Eip658Value::Eip658(true),
                cumulative_gas_used: cumulative,
                logs: vec![],
            }
            .with_bloom(),
        )
    };
    let pooled = legacy(2, RECIPIENT, 21_000, 5);
    // Only the genesis state is kept: block 1 is the only one ever replayed.
    let chain = MemoryChain::new()
        .block(block0, vec![])
        .block(block1.clone(), vec![receipt(21_000), receipt(60_000)])
        .state(0, Arc::new(db));
    let ctx = ModuleContext {
        spec: Arc::new(spec(genesis)),
        chain: Arc::new(chain),
        pool: Arc::new(MemoryPool::with(vec![Recovered::new_unchecked(
            pooled.clone(),
            SENDER,
        )])),
        limits: Arc::new(limits),
    };
    Fixture {
        ctx,
        block1,
        pooled,
    }
}

fn fixture() -> Fixture {
    fixture_with(RpcLimits::default())
}

async fn call(ctx: &ModuleContext, method: &str, params: Value) -> Value {
    let methods = crate::rpc_module(ctx.clone());
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (resp, _rx) = tokio::time::timeout(
        Duration::from_secs(60),
        methods.raw_json_request(&req.to_string(), 1),
    )
    .await
    .expect("answered within a minute")
    .expect("request is JSON-RPC");
    serde_json::from_str(resp.get()).expect("response is JSON")
}

async fn result(ctx: &ModuleContext, method: &str, params: Value) -> Value {
    let resp = call(ctx, method, params).await;
    match resp.get("result") {
        Some(r) => r.clone(),
        None => panic!("{method}: expected a result, got {resp}"),
    }
}

async fn error_code(ctx: &ModuleContext, method: &str, params: Value) -> i64 {
    let resp = call(ctx, method, params).await;
    match resp.pointer("/error/code").and_then(Value::as_i64) {
        Some(c) => c,
        None => panic!("{method}: expected an error, got {resp}"),
    }
}

fn bytes(v: &Value) -> Vec<u8> {
    v.as_str().unwrap().parse::<Bytes>().unwrap().to_vec()
}

#[tokio::test]
async fn raw_methods_encode_what_is_stored() {
    let f = fixture();
    let ctx = &f.ctx;
    let hash = f.block1.hash().to_string();

    for param in [
        json!("0x1"),
        json!(hash),
        json!({"blockHash": hash}),
        json!("latest"),
    ] {
        let raw = bytes(&result(ctx, "debug_getRawHeader", json!([param])).await);
        let decoded = Header::decode(&mut raw.as_slice()).unwrap();
        assert_eq!(decoded.hash_slow(), f.block1.hash(), "{param}");
    }

    let raw = bytes(&result(ctx, "debug_getRawBlock", json!(["0x1"])).await);
    let block = alloy::consensus::Block::<TxEnvelope>::decode(&mut raw.as_slice()).unwrap();
    assert_eq!(block.header.hash_slow(), f.block1.hash());
    assert_eq!(block.body.transactions, f.block1.body.transactions);

    let raw = result(ctx, "debug_getRawReceipts", json!(["0x1"])).await;
    let raw = raw.as_array().unwrap();
    assert_eq!(raw.len(), 2);
    let second = ReceiptEnvelope::decode_2718(&mut bytes(&raw[1]).as_slice()).unwrap();
    assert_eq!(second.cumulative_gas_used(), 60_000);
    assert_eq!(
        result(ctx, "debug_getRawReceipts", json!(["0x0"])).await,
        json!([])
    );

    let tx = &f.block1.body.transactions[1];
    let raw = bytes(&result(ctx, "debug_getRawTransaction", json!([tx.tx_hash()])).await);
    assert_eq!(&TxEnvelope::decode_2718(&mut raw.as_slice()).unwrap(), tx);
    let raw = bytes(&result(ctx, "debug_getRawTransaction", json!([f.pooled.tx_hash()])).await);
    assert_eq!(
        TxEnvelope::decode_2718(&mut raw.as_slice()).unwrap(),
        f.pooled,
        "pooled transactions are served too"
    );
}

#[tokio::test]
async fn raw_methods_answer_missing_things_as_geth() {
    let f = fixture();
    let ctx = &f.ctx;
    let unknown = B256::repeat_byte(0x77).to_string();
    for method in [
        "debug_getRawHeader",
        "debug_getRawBlock",
        "debug_getRawReceipts",
    ] {
        assert_eq!(
            result(ctx, method, json!(["0x9"])).await,
            Value::Null,
            "{method}: a future number is null"
        );
        assert_eq!(
            error_code(ctx, method, json!(["2"])).await,
            -32602,
            "{method}"
        );
        assert_eq!(
            error_code(ctx, method, json!([1])).await,
            -32602,
            "{method}"
        );
        assert_eq!(error_code(ctx, method, json!([])).await, -32602, "{method}");
        assert_eq!(
            error_code(ctx, method, json!(["finalized"])).await,
            -32000,
            "{method}: no finalized block yet"
        );
    }
    assert_eq!(
        error_code(ctx, "debug_getRawHeader", json!([unknown])).await,
        -32000
    );
    assert_eq!(
        error_code(ctx, "debug_getRawBlock", json!([unknown])).await,
        -32000
    );
    assert_eq!(
        result(ctx, "debug_getRawReceipts", json!([unknown])).await,
        json!([])
    );
    assert_eq!(
        result(ctx, "debug_getRawTransaction", json!([unknown])).await,
        Value::Null
    );
    assert_eq!(
        error_code(
            ctx,
            "debug_getRawTransaction",
            json!([unknown.trim_start_matches("0x")])
        )
        .await,
        -32602
    );
}

#[tokio::test]
async fn struct_logs_of_a_block() {
    let f = fixture();
    let ctx = &f.ctx;
    let traces = result(ctx, "debug_traceBlockByNumber", json!(["0x1"])).await;
    let traces = traces.as_array().unwrap();
    assert_eq!(traces.len(), 2);
    let txs = &f.block1.body.transactions;
    assert_eq!(traces[0]["txHash"], json!(txs[0].tx_hash()));
    assert_eq!(
        traces[0]["result"],
        json!({"gas": 21000, "failed": false, "returnValue": "0x", "structLogs": []})
    );
    let second = &traces[1]["result"];
    assert_eq!(second["failed"], false);
    let logs = second["structLogs"].as_array().unwrap();
    let ops: Vec<&str> = logs.iter().map(|l| l["op"].as_str().unwrap()).collect();
    assert_eq!(
        ops,
        ["PUSH1", "PUSH1", "SSTORE", "PUSH1", "PUSH1", "LOG0", "STOP"]
    );
    assert_eq!(logs[2]["stack"], json!(["0x2a", "0x1"]));
    assert_eq!(
        logs[2]["storage"],
        json!({format!("0x{:064x}", 1): format!("0x{:064x}", 0x2a)})
    );
    assert!(logs[0].get("memory").is_none(), "memory is off by default");
    // 21000 intrinsic + 2 * 3 + 22100 (cold SSTORE of a new slot) + 2 * 3 + 375 (LOG0)
    assert_eq!(second["gas"], 21_000 + 6 + 22_100 + 6 + 375);

    let by_hash = result(ctx, "debug_traceBlockByHash", json!([f.block1.hash()])).await;
    assert_eq!(&by_hash, &Value::Array(traces.clone()));

    let quiet = result(
        ctx,
        "debug_traceBlockByNumber",
        json!(["latest", {"disableStack": true, "disableStorage": true, "enableMemory": true}]),
    )
    .await;
    let logs = quiet[1]["result"]["structLogs"].as_array().unwrap();
    assert!(logs[2].get("stack").is_none());
    assert!(logs[2].get("storage").is_none());
    assert!(
        logs.iter()
            .all(|l| l.get("memory").is_none() && l.get("refund").is_none()),
        "empty memory and a zero refund are left out, as geth leaves them out"
    );
}

#[tokio::test]
async fn trace_transaction_replays_what_came_before() {
    let f = fixture();
    let ctx = &f.ctx;
    let txs = &f.block1.body.transactions;
    // The second transaction has nonce 1: it only runs if the first one was committed.
    let alone = result(ctx, "debug_traceTransaction", json!([txs[1].tx_hash()])).await;
    let block = result(ctx, "debug_traceBlockByNumber", json!(["0x1"])).await;
    assert_eq!(alone, block[1]["result"]);

    let unknown = B256::repeat_byte(0x55);
    let resp = call(ctx, "debug_traceTransaction", json!([unknown])).await;
    assert_eq!(resp["error"]["code"], -32000);
    assert_eq!(resp["error"]["message"], "transaction not found");
}

#[tokio::test]
async fn geths_tracers() {
    let f = fixture();
    let ctx = &f.ctx;
    let hash = f.block1.body.transactions[1].tx_hash();
    let trace = |opts: Value| {
        let ctx = ctx.clone();
        async move { result(&ctx, "debug_traceTransaction", json!([hash, opts])).await }
    };

    let calls = trace(json!({"tracer": "callTracer", "tracerConfig": {"withLog": true}})).await;
    assert_eq!(calls["type"], "CALL");
    assert_eq!(calls["from"], json!(SENDER));
    assert_eq!(calls["to"], json!(CONTRACT));
    assert_eq!(calls["gasUsed"], "0xa9df"); // 43487, as structLogs' gas
    assert_eq!(calls["logs"][0]["address"], json!(CONTRACT));
    let top = trace(json!({"tracer": "callTracer", "tracerConfig": {"onlyTopCall": true}})).await;
    assert!(top.get("logs").is_none());

    let pre = trace(json!({"tracer": "prestateTracer"})).await;
    assert_eq!(
        pre[CONTRACT.to_string().to_lowercase()]["code"],
        json!(Bytes::from_static(CODE))
    );
    assert_eq!(pre[SENDER.to_string().to_lowercase()]["nonce"], 1);
    let diff = trace(json!({"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}})).await;
    let contract = CONTRACT.to_string().to_lowercase();
    assert_eq!(
        diff["post"][&contract]["storage"],
        json!({format!("0x{:064x}", 1): format!("0x{:064x}", 0x2a)})
    );

    assert_eq!(trace(json!({"tracer": "4byteTracer"})).await, json!({}));
    assert_eq!(trace(json!({"tracer": "noopTracer"})).await, json!({}));
    // A muxTracer takes its sub-tracers' configs as geth does: `{}` for one without options,
    // `null` for one with them.
    let mux = trace(json!({"tracer": "muxTracer", "tracerConfig": {
        "4byteTracer": {}, "noopTracer": null, "callTracer": null, "prestateTracer": {}
    }}))
    .await;
    assert_eq!(mux["4byteTracer"], json!({}), "{mux}");
    assert_eq!(mux["noopTracer"], json!({}), "{mux}");
    assert_eq!(mux["callTracer"]["type"], "CALL", "{mux}");
    assert_eq!(
        mux["prestateTracer"][&contract]["code"],
        json!(Bytes::from_static(CODE))
    );

    let resp = call(
        ctx,
        "debug_traceTransaction",
        json!([hash, {"tracer": "noSuchTracer"}]),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    assert_eq!(
        error_code(
            ctx,
            "debug_traceTransaction",
            json!([hash, {"disableStack": "yes"}])
        )
        .await,
        -32602
    );
}

/// The struct logger's `limit` counts bytes of JSON as geth's does: entries are taken while
/// those taken come to at most `limit` bytes.
#[tokio::test]
async fn struct_log_limit_counts_bytes() {
    let f = fixture();
    let ctx = &f.ctx;
    let hash = f.block1.body.transactions[1].tx_hash();
    let all = result(ctx, "debug_traceTransaction", json!([hash])).await;
    let logs = all["structLogs"].as_array().expect("struct logs").clone();
    assert!(logs.len() > 3, "{all}");
    let first = serde_json::to_string(&logs[0]).unwrap().len() as u64;
    let limited = |limit: u64| {
        let ctx = ctx.clone();
        async move {
            let r = result(
                &ctx,
                "debug_traceTransaction",
                json!([hash, {"limit": limit}]),
            )
            .await;
            r["structLogs"].as_array().expect("struct logs").clone()
        }
    };
    assert_eq!(limited(first - 1).await, logs[..1]);
    assert_eq!(limited(first).await, logs[..2]);
    assert_eq!(limited(0).await, logs, "0 is no limit");
}

/// A call that logs and then fails keeps no logs in the callTracer, as none reach a receipt;
/// a call that cannot run at all fails in geth's words for tracing.
#[tokio::test]
async fn call_tracer_drops_the_logs_of_a_failed_call() {
    let f = fixture();
    let ctx = &f.ctx;
    // PUSH1 0 PUSH1 0 LOG0 PUSH1 0 PUSH1 0 REVERT
    let logs_then_reverts = "0x60006000a060006000fd";
    let target = Address::repeat_byte(0xd4);
    let opts = json!({
        "tracer": "callTracer",
        "tracerConfig": {"withLog": true},
        "stateOverrides": {target.to_string(): {"code": logs_then_reverts}},
    });
    let request = json!({"from": SENDER, "to": target});
    let frame = result(ctx, "debug_traceCall", json!([request, "0x0", opts])).await;
    assert_eq!(frame["error"], "execution reverted", "{frame}");
    assert!(frame.get("logs").is_none(), "{frame}");

    let broke = Address::repeat_byte(0xe5);
    let request = json!({"from": broke, "to": target, "value": "0x10"});
    let resp = call(ctx, "debug_traceCall", json!([request, "0x0"])).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("tracing failed: insufficient funds for gas * price + value"),
        "{resp}"
    );
}

/// geth's struct logger shows an error on a step only for what it checks before running it:
/// the stack and the gas. A step that fails while it runs (INVALID, a write in a static call)
/// is shown without one; the trace as a whole still failed.
#[tokio::test]
async fn struct_logs_show_errors_where_geth_does() {
    let f = fixture();
    let ctx = &f.ctx;
    let trace = |code: &str| {
        let ctx = ctx.clone();
        let target = Address::repeat_byte(0xd6);
        let opts = json!({"stateOverrides": {target.to_string(): {"code": code}}});
        let request = json!({"from": SENDER, "to": target, "gas": "0x7530"});
        async move { result(&ctx, "debug_traceCall", json!([request, "0x0", opts])).await }
    };
    // PUSH1 0 PUSH1 0 INVALID
    let invalid = trace("0x60006000fe").await;
    assert_eq!(invalid["failed"], true);
    let last = invalid["structLogs"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["op"], "INVALID", "{invalid}");
    assert!(last.get("error").is_none(), "{last}");
    // ADD on an empty stack: checked before it runs.
    let underflow = trace("0x01").await;
    let last = underflow["structLogs"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["op"], "ADD", "{underflow}");
    assert!(
        last["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("stack underflow"),
        "{last}"
    );
}

#[tokio::test]
async fn genesis_unknown_blocks_and_bad_params() {
    let f = fixture();
    let ctx = &f.ctx;
    for (method, param) in [
        ("debug_traceBlockByNumber", json!("0x0")),
        ("debug_traceBlockByNumber", json!("earliest")),
        (
            "debug_traceBlockByHash",
            json!(ctx.spec.genesis_header.hash()),
        ),
    ] {
        let resp = call(ctx, method, json!([param])).await;
        assert_eq!(resp["error"]["code"], -32000, "{method} {param}");
        assert_eq!(resp["error"]["message"], "genesis is not traceable");
    }
    assert_eq!(
        error_code(ctx, "debug_traceBlockByNumber", json!(["0x5"])).await,
        -32000
    );
    assert_eq!(
        error_code(ctx, "debug_traceBlockByHash", json!([B256::repeat_byte(1)])).await,
        -32000
    );
    assert_eq!(
        error_code(ctx, "debug_traceBlockByNumber", json!(["1"])).await,
        -32602
    );
    assert_eq!(
        error_code(ctx, "debug_traceBlockByNumber", json!([f.block1.hash()])).await,
        -32602,
        "traceBlockByNumber takes no hash"
    );
}

#[tokio::test]
async fn deadline_and_trace_size_are_enforced() {
    let f = fixture();
    let resp = call(
        &f.ctx,
        "debug_traceBlockByNumber",
        json!(["0x1", {"timeout": "0s"}]),
    )
    .await;
    // The tracer's own `timeout` ends as geth ends it; the request's deadline is -32016.
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    assert_eq!(resp["error"]["message"], "execution timeout", "{resp}");
    let slow = fixture_with(RpcLimits {
        evm_timeout: Duration::ZERO,
        ..Default::default()
    });
    let resp = call(&slow.ctx, "debug_traceBlockByNumber", json!(["0x1"])).await;
    assert_eq!(resp["error"]["code"], -32016, "{resp}");

    let small = fixture_with(RpcLimits {
        max_vm_trace_bytes: 1_000,
        ..Default::default()
    });
    let resp = call(&small.ctx, "debug_traceBlockByNumber", json!(["0x1"])).await;
    assert_eq!(resp["error"]["code"], -32005, "{resp}");
    // Without struct logs the same block fits.
    result(
        &small.ctx,
        "debug_traceBlockByNumber",
        json!(["0x1", {"tracer": "noopTracer"}]),
    )
    .await;
}

/// With `enableMemory`, each step's memory counts as the answer writes it out (the tracer
/// shares an unchanged snapshot between steps; the answer repeats it for each): a 26 MB answer
/// recorded 4 KiB and got past a 5 MB bound.
#[tokio::test]
async fn recorded_memory_counts_at_its_answers_size() {
    let f = fixture_with(RpcLimits {
        max_vm_trace_bytes: 5_000_000,
        ..Default::default()
    });
    // PUSH2 0x0fe0 MLOAD POP, then JUMPDEST PUSH1 5 JUMP until the gas runs out: about 2,400
    // steps, each showing the same 4 KiB of memory.
    let target = Address::repeat_byte(0xd7);
    let request = json!({"from": SENDER, "to": target, "gas": "0x7918"});
    let trace = |memory: bool| {
        let ctx = f.ctx.clone();
        let request = request.clone();
        async move {
            let opts = json!({
                "enableMemory": memory,
                "stateOverrides": {target.to_string(): {"code": "0x610fe051505b600556"}},
            });
            call(&ctx, "debug_traceCall", json!([request, "0x0", opts])).await
        }
    };
    let refused = trace(true).await;
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
    let plain = trace(false).await;
    let steps = plain["result"]["structLogs"].as_array().map_or(0, Vec::len);
    assert!(steps > 2_000, "{steps} steps");
}

#[test]
fn go_durations() {
    use crate::parse_go_duration as p;
    assert_eq!(p("5s"), Some(Duration::from_secs(5)));
    assert_eq!(p("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(p("2.5ms"), Some(Duration::from_micros(2500)));
    assert_eq!(p("0"), Some(Duration::ZERO));
    assert_eq!(p("5"), None);
    assert_eq!(p(""), None);
    assert_eq!(p("3 s"), None);
}
