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
use support::{conformance_dir, fixture_groups, reth_trace_dir, Fixture, Node};

/// geth answers these with -32603 itself (core.ErrNonceMax, core.ErrEmptyAuthList and
/// core.ErrMissingBlobHashes in eth_simulateV1's validation), and the fixtures expect it.
const GETH_INTERNAL_ERRORS: &[&str] = &[
    "nonce has max value",
    "empty authorization list",
    "empty blobs",
];

/// xorshift64*: the same mutations on every run for one seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values that are wrong somewhere: types, sizes, ranges, tags and shapes.
fn palette() -> Vec<Value> {
    let hex = |digits: usize| Value::String(format!("0x{}", "f".repeat(digits)));
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(1e300),
        json!(u64::MAX),
        json!(""),
        json!("0x"),
        json!("0x0"),
        json!("0x00"),
        json!("0xzz"),
        json!("-1"),
        json!("1e3"),
        hex(16),
        hex(17),
        hex(40),
        hex(64),
        hex(65),
        hex(20_000),
        json!("0x7fffffffffffffff"),
        json!("0x10000000000000000"),
        json!("latest"),
        json!("pending"),
        json!("earliest"),
        json!("safe"),
        json!("finalized"),
        json!("x".repeat(5000)),
        json!([]),
        json!({}),
        json!([[]]),
        json!([{}]),
        json!([null]),
        json!([1, 2, 3]),
        json!({"blockHash": format!("0x{}", "00".repeat(32))}),
        json!({"blockNumber": "0xffffffff", "requireCanonical": true}),
        json!({"blockOverrides": {"number": "0xffffffffffffffff", "time": "0x0"}}),
        json!({"gas": "0xffffffffffffffff", "value": hex(64)}),
        json!({"nonce": "0xffffffffffffffff"}),
        json!({"calls": null, "stateOverrides": null}),
    ]
}

/// Field names worth adding where they are not expected (or are, with a wrong value).
const FIELDS: &[&str] = &[
    "gas",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "maxFeePerBlobGas",
    "nonce",
    "value",
    "input",
    "data",
    "to",
    "from",
    "type",
    "chainId",
    "accessList",
    "authorizationList",
    "blobVersionedHashes",
    "number",
    "time",
    "gasLimit",
    "baseFeePerGas",
    "blobBaseFee",
    "withdrawals",
    "state",
    "stateDiff",
    "code",
    "balance",
    "movePrecompileToAddress",
    "validation",
    "traceTransfers",
    "returnFullTransactions",
    "fromBlock",
    "toBlock",
    "topics",
    "address",
    "blockHash",
];

/// Paths (object keys and array indices) of every value inside `v`, `v` itself first.
fn paths(v: &Value, here: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(here.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                here.push(json!(k));
                paths(child, here, out);
                here.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                here.push(json!(i));
                paths(child, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        Value::String(k) => &mut v[k.as_str()],
        step => &mut v[step.as_u64().expect("index") as usize],
    })
}

/// One to three random changes to the params of `request`.
fn mutate(rng: &mut Rng, request: &Value, palette: &[Value]) -> Value {
    let mut request = request.clone();
    let params = &mut request["params"];
    for _ in 0..1 + rng.below(3) {
        let mut all = Vec::new();
        paths(params, &mut Vec::new(), &mut all);
        let path = rng.pick(&all).clone();
        let Some((last, parent_path)) = path.split_last() else {
            if rng.below(3) == 0 {
                *params = rng.pick(palette).clone();
            }
            continue;
        };
        let parent = at(params, parent_path);
        match (rng.below(10), parent) {
            (0..=5, parent) => *at(parent, std::slice::from_ref(last)) = rng.pick(palette).clone(),
            (6 | 7, Value::Object(map)) => {
                map.remove(last.as_str().expect("key"));
            }
            (6 | 7, Value::Array(items)) => {
                items.remove(last.as_u64().expect("index") as usize);
            }
            (8, Value::Array(items)) => {
                let copy = items[last.as_u64().expect("index") as usize].clone();
                items.push(copy);
            }
            (_, Value::Object(map)) => {
                map.insert(rng.pick(FIELDS).to_string(), rng.pick(palette).clone());
            }
            _ => {}
        }
    }
    request
}

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
    let palette = palette();
    let mut rng = Rng(seed | 1);
    let mut failures = Vec::new();
    for _ in 0..count {
        let base = rng.pick(&requests);
        let request = mutate(&mut rng, base, &palette);
        let body = request.to_string();
        let answer = match node.try_rpc_raw(&body) {
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
    assert_eq!(
        node.result("eth_blockNumber", json!([])),
        "0x36",
        "the node still answers"
    );
    let log = node.log();
    assert!(!log.contains("panicked"), "the node panicked:\n{log}");
    assert!(
        failures.is_empty(),
        "{} of {count} mutated requests (seed {seed:#x}) went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
