//! Random damage to JSON-RPC requests, for tests that bad input never breaks the node: a value
//! swapped for one of the wrong type, size or range, a field dropped, an element repeated, a
//! field added. Seeded, so a failure can be replayed.

use serde_json::{json, Value};

/// xorshift64*: the same mutations on every run for one seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values that are wrong somewhere: types, sizes, ranges, tags and shapes.
pub fn palette() -> Vec<Value> {
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
pub fn mutate(rng: &mut Rng, request: &Value, palette: &[Value]) -> Value {
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
