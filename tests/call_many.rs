//! eth_callMany and debug_traceCallMany end to end on the imported execution-apis chain: calls
//! see the changes of the calls and bundles before them, a bundle's block override holds for
//! its calls, `transactionIndex` picks the state inside a mined block (checked against the
//! balances the chain itself reports before and after it), and bad requests are refused.
//! eth_callMany skips empty bundles; debug_traceCallMany keeps them and runs each bundle one
//! block after the one before it (both as reth does).

mod support;

use serde_json::{json, Value};
use support::Node;

/// Called with 32 bytes, stores them in slot 0; called with none, returns slot 0.
const STORE_OR_LOAD: &str = "0x36600f5760005460005260206000f35b60003560005500";
/// Returns the balance of the address given as its 32-byte calldata.
const BALANCE_OF: &str = "0x6000353160005260206000f3";
/// Returns the block number.
const NUMBER: &str = "0x4360005260206000f3";
/// Reverts with no data.
const REVERTS: &str = "0x60006000fd";

const STORE: &str = "0x00000000000000000000000000000000000000000000000000000000000000aa";
const BALANCE: &str = "0x00000000000000000000000000000000000000000000000000000000000000ba";
const NUM: &str = "0x00000000000000000000000000000000000000000000000000000000000000bb";
const REV: &str = "0x00000000000000000000000000000000000000000000000000000000000000bc";

fn word(value: u128) -> String {
    format!("0x{value:064x}")
}

/// The address of a 32-byte word above.
fn to(w: &str) -> String {
    format!("0x{}", &w[26..])
}

/// The four contracts installed at their addresses.
fn overrides() -> Value {
    json!({
        to(STORE): {"code": STORE_OR_LOAD},
        to(BALANCE): {"code": BALANCE_OF},
        to(NUM): {"code": NUMBER},
        to(REV): {"code": REVERTS},
    })
}

#[test]
fn bundles_see_the_calls_before_them() {
    let node = Node::execution_apis(&[]);
    let store = to(STORE);
    let result = node.result(
        "eth_callMany",
        json!([
            [
                {"transactions": [
                    {"to": store, "data": word(0x2a)},
                    {"to": store},
                    {"to": to(REV)},
                ]},
                {"transactions": []},
                {"transactions": [{"to": store}, {"to": to(NUM)}],
                 "blockOverride": {"number": "0x1234"}},
            ],
            {"blockNumber": "latest"},
            overrides(),
        ]),
    );
    assert_eq!(
        result,
        json!([
            [
                {"value": "0x"},
                {"value": word(0x2a)},
                {"error": "execution reverted"},
            ],
            [{"value": word(0x2a)}, {"value": word(0x1234)}],
        ]),
        "the empty bundle leaves no entry"
    );
    // Nothing was stored: a new request starts from the chain's state.
    let again = node.result(
        "eth_callMany",
        json!([[{"transactions": [{"to": store}]}], null, overrides()]),
    );
    assert_eq!(again, json!([[{"value": word(0)}]]));
}

#[test]
fn transaction_index_picks_the_state_inside_a_block() {
    let node = Node::execution_apis(&[]);
    // A block with several transactions; its first sender's balance before and after it.
    let (number, block) = (1..=54u64)
        .map(|n| {
            let block = node.result("eth_getBlockByNumber", json!([format!("{n:#x}"), true]));
            (n, block)
        })
        .find(|(_, b)| b["transactions"].as_array().is_some_and(|t| t.len() >= 2))
        .expect("a block with two transactions");
    let txs = block["transactions"].as_array().unwrap();
    let sender = txs[0]["from"].as_str().unwrap().to_string();
    let before = node.result(
        "eth_getBalance",
        json!([sender, format!("{:#x}", number - 1)]),
    );
    let after = node.result("eth_getBalance", json!([sender, format!("{number:#x}")]));
    assert_ne!(before, after, "the sender pays for its transaction");
    let balance_at = |index: i64| {
        let r = node.result(
            "eth_callMany",
            json!([
                [{"transactions": [{"to": to(BALANCE),
                                    "data": format!("0x{:0>64}", &sender[2..])}]}],
                {"blockNumber": format!("{number:#x}"), "transactionIndex": index},
                overrides(),
            ]),
        );
        let hex = r[0][0]["value"].as_str().expect("a value").to_string();
        format!("{:#x}", u128::from_str_radix(&hex[2..], 16).unwrap())
    };
    assert_eq!(
        balance_at(0),
        before.as_str().unwrap(),
        "before the block's first"
    );
    assert_eq!(
        balance_at(-1),
        after.as_str().unwrap(),
        "after the whole block"
    );
    assert_eq!(balance_at(txs.len() as i64), after.as_str().unwrap());
    // The calls run in that block's environment.
    let r = node.result(
        "eth_callMany",
        json!([
            [{"transactions": [{"to": to(NUM)}]}],
            {"blockNumber": format!("{number:#x}"), "transactionIndex": 1},
            overrides(),
        ]),
    );
    assert_eq!(r, json!([[{"value": word(number.into())}]]));
}

#[test]
fn bad_requests_are_refused() {
    let node = Node::execution_apis(&[]);
    for (params, code) in [
        (json!([[]]), -32602),
        (
            json!([[{"transactions": [{"to": to(NUM)}]}], {"transactionIndex": -2}]),
            -32602,
        ),
        (
            json!([[{"transactions": [{"to": to(NUM)}]}], {"blockNumber": "0x999"}]),
            -32000,
        ),
        (
            json!([[{"transactions": [{"to": to(NUM)}]}], {"block": "latest"}]),
            -32602,
        ),
    ] {
        let r = node.call("eth_callMany", params.clone());
        assert_eq!(r["error"]["code"], code, "{params}: {r}");
    }
    // erigon's fourth parameter: the request's own, shorter deadline (calls that loop until
    // their gas runs out; the deadline is checked between them).
    let looping = json!({to(NUM): {"code": "0x5b600056"}});
    let calls: Vec<Value> = (0..3)
        .map(|_| json!({"to": to(NUM), "gas": "0x2faf080"}))
        .collect();
    let r = node.call(
        "eth_callMany",
        json!([[{"transactions": calls}], null, looping, 1]),
    );
    assert_eq!(r["error"]["code"], -32016, "{r}");
    // More calls than one request may hold.
    let many: Vec<Value> = (0..1001).map(|_| json!({"to": to(NUM)})).collect();
    let r = node.call("eth_callMany", json!([[{"transactions": many}]]));
    assert_eq!(r["error"]["code"], -32005, "{r}");
    // A call whose fees the sender cannot pay fails the request, as in reth.
    let r = node.call(
        "eth_callMany",
        json!([[{"transactions": [{"from": to(NUM), "to": to(NUM), "gasPrice": "0x1000000000"}]}]]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("bundle 0, call 0: "), "{message}");
}

#[test]
fn traced_bundles_follow_one_another() {
    let node = Node::execution_apis(&[]);
    let head = node.result("eth_blockNumber", json!([]));
    let head = u128::from_str_radix(&head.as_str().unwrap()[2..], 16).unwrap();
    let store = to(STORE);
    let call_tracer = json!({"tracer": "callTracer", "stateOverrides": overrides()});
    let traces = node.result(
        "debug_traceCallMany",
        json!([
            [
                {"transactions": [{"to": store, "data": word(0x2a)}, {"to": to(NUM)}]},
                {"transactions": []},
                {"transactions": [{"to": store}, {"to": to(NUM)}, {"to": to(REV)}]},
            ],
            {"blockNumber": "latest"},
            call_tracer,
        ]),
    );
    let outputs: Vec<Vec<Value>> = traces
        .as_array()
        .expect("bundles")
        .iter()
        .map(|b| {
            b.as_array()
                .unwrap()
                .iter()
                .map(|t| t.get("output").cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    assert_eq!(
        outputs,
        vec![
            vec![Value::Null, json!(word(head))],
            vec![],
            vec![json!(word(0x2a)), json!(word(head + 2)), Value::Null],
        ],
        "{traces}"
    );
    assert_eq!(traces[2][2]["error"], "execution reverted", "{traces}");

    // One call alone traces as debug_traceCall traces it (default struct logger).
    let request = json!({"to": store, "data": word(7)});
    let opts = json!({"stateOverrides": overrides()});
    let many = node.result(
        "debug_traceCallMany",
        json!([[{"transactions": [request]}], null, opts]),
    );
    let single = node.result("debug_traceCall", json!([request, "latest", opts]));
    assert_eq!(many, json!([[single]]));

    let r = node.call("debug_traceCallMany", json!([[]]));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let many: Vec<Value> = (0..65).map(|_| json!({"to": to(NUM)})).collect();
    let r = node.call("debug_traceCallMany", json!([[{"transactions": many}]]));
    assert_eq!(r["error"]["code"], -32005, "{r}");
}

/// Calls are prepared as reth prepares them for eth_callMany and debug_traceCallMany (these are
/// reth's and erigon's methods, not geth's): a price under the base fee runs, and a call with a
/// price and no gas gets the gas its sender can pay for, not the RPC gas cap it could not pay.
/// A timeout of 0 sets no deadline, as in erigon.
#[test]
fn calls_are_prepared_as_reth_prepares_them() {
    let node = Node::execution_apis(&[]);
    let gas_left = "0x00000000000000000000000000000000000000000000000000000000000000c1";
    // GAS, returned as a word.
    let reports_gas = json!({to(gas_left): {"code": "0x5a60005260206000f3"}});
    let gas_price: u128 = 1 << 40;
    let payer = "0x00000000000000000000000000000000000000f1";
    let mut overrides = reports_gas.clone();
    overrides[payer] = json!({"balance": format!("0x{:x}", 30_000 * gas_price)});
    let call = json!({"from": payer, "to": to(gas_left), "gasPrice": format!("0x{gas_price:x}")});
    let r = node.result(
        "eth_callMany",
        json!([[{"transactions": [call]}], {"blockNumber": "latest"}, overrides, 0]),
    );
    let left =
        u64::from_str_radix(&r[0][0]["value"].as_str().expect("a word")[2..], 16).expect("hex");
    // 30,000 gas bought; the call's intrinsic 21,000 and the GAS opcode's 2 are spent first.
    assert_eq!(left, 30_000 - 21_000 - 2, "{r}");
    let traced = node.result(
        "debug_traceCallMany",
        json!([[{"transactions": [call]}], {"blockNumber": "latest"}, {"tracer": "callTracer", "stateOverrides": overrides}]),
    );
    assert_eq!(traced[0][0]["gas"], "0x7530", "{traced}");

    let under_base_fee = json!({"to": to(gas_left), "gasPrice": "0x1"});
    let r = node.result(
        "eth_callMany",
        json!([[{"transactions": [under_base_fee]}], null, reports_gas]),
    );
    assert!(r[0][0]["value"].is_string(), "{r}");
    // eth_call is geth's and keeps geth's check.
    let r = node.call("eth_call", json!([under_base_fee, "latest", reports_gas]));
    assert_eq!(r["error"]["code"], -32000, "{r}");
}
