//! trace_callMany on the in-memory Prague chain, with expected answers worked out by hand
//! against the Parity trace format (gas from the Prague schedule: EIP-2929 cold/warm access,
//! EIP-2200/3529 SSTORE, EIP-3860 init-code words, 200 per deposited code byte, 63/64 rule).
//!
//! Accounts: A (1000 ETH) sends everything; B (1 ETH) receives. Contracts in the genesis state:
//! STORE at S (set slot 0 from calldata word 0, or return slot 0 when there is no calldata),
//! REVERTER at R (reverts with 0xde), KILL at K (self-destructs to B), LOOP at L (endless
//! loop), NESTED at N (CALL, STATICCALL, DELEGATECALL into STORE, a CALL into REVERTER, a
//! CREATE2 of a child and a CALL into it, the child self-destructing).

mod common;

use std::time::Duration;

use alloy::primitives::{address, Address, U256};
use common::*;
use serde_json::{json, Value};

const A: Address = address!("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
const B: Address = address!("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
const S: Address = address!("5555555555555555555555555555555555555555");
const R: Address = address!("7777777777777777777777777777777777777777");
const K: Address = address!("6666666666666666666666666666666666666666");
const L: Address = address!("8888888888888888888888888888888888888888");
const N: Address = address!("4444444444444444444444444444444444444444");

const A_BALANCE: &str = "0x3635c9adc5dea00000"; // 1000 ETH
const B_BALANCE: &str = "0xde0b6b3a7640000"; // 1 ETH

fn store_runtime() -> Vec<u8> {
    asm("CALLDATASIZE ISZERO PUSH1 0x0c JUMPI \
         PUSH1 0 CALLDATALOAD PUSH1 0 SSTORE STOP \
         JUMPDEST PUSH1 0 SLOAD PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN")
}

/// STORE's init code: stores 7 in slot 0, then returns the runtime.
fn store_init() -> Vec<u8> {
    deploy(&asm("PUSH1 7 PUSH1 0 SSTORE"), &store_runtime())
}

/// The child NESTED creates: its runtime is `CALLER SELFDESTRUCT`.
fn child_init() -> Vec<u8> {
    asm("PUSH2 0x33ff PUSH1 0 MSTORE PUSH1 2 PUSH1 0x1e RETURN")
}

fn nested_runtime() -> Vec<u8> {
    let child = child_init();
    assert_eq!(child.len(), 11);
    asm(&format!(
        // CALL S (value 1, calldata word 0x2a)
        "PUSH1 0x2a PUSH1 0 MSTORE \
         PUSH1 0 PUSH1 0 PUSH1 0x20 PUSH1 0 PUSH1 1 PUSH20 {S} GAS CALL POP \
         \
         PUSH1 0x20 PUSH1 0x20 PUSH1 0 PUSH1 0 PUSH20 {S} GAS STATICCALL POP \
         \
         PUSH1 0x20 PUSH1 0x40 PUSH1 0 PUSH1 0 PUSH20 {S} GAS DELEGATECALL POP \
         \
         PUSH1 0 PUSH1 0 PUSH1 0 PUSH1 0 PUSH1 0 PUSH20 {R} GAS CALL POP \
         \
         PUSH11 {child} PUSH1 0x60 MSTORE \
         PUSH1 1 PUSH1 0x0b PUSH1 0x75 PUSH1 0 CREATE2 \
         PUSH1 0 PUSH1 0 PUSH1 0 PUSH1 0 PUSH1 0 DUP6 GAS CALL POP POP \
         \
         PUSH1 0x40 PUSH1 0x20 RETURN",
        child = hex(&child),
    ))
}

fn chain() -> Genesis {
    Genesis::default()
        .account(A, U256::from(1000u128 * 10u128.pow(18)))
        .account(B, U256::from(10u128.pow(18)))
        .contract(S, U256::ZERO, &store_runtime())
        .storage(S, U256::ZERO, U256::from(7))
        .contract(
            R,
            U256::ZERO,
            &asm("PUSH1 0xde PUSH1 0 MSTORE8 PUSH1 1 PUSH1 0 REVERT"),
        )
        .contract(
            K,
            U256::from(100),
            &asm(&format!("PUSH20 {B} SELFDESTRUCT")),
        )
        .contract(L, U256::ZERO, &asm("loop: JUMPDEST PUSH2 @loop JUMP"))
        .contract(N, U256::from(100), &nested_runtime())
}

fn word(n: u64) -> String {
    format!("{:#066x}", n)
}

fn addr(a: Address) -> String {
    format!("{a:#x}")
}

#[tokio::test(flavor = "multi_thread")]
async fn transfer_all_types() {
    let got = result(
        &chain().methods(),
        json!([[[{"from": A, "to": B, "value": "0x10"}, ["trace", "stateDiff", "vmTrace"]]], "latest"]),
    )
    .await;
    let want = json!([{
        "output": "0x",
        "trace": [{
            "type": "call",
            // 50M default gas (the RPC gas cap) less 21000 intrinsic gas.
            "action": {"from": A, "callType": "call", "gas": "0x2fa9e78", "input": "0x", "to": B, "value": "0x10"},
            "result": {"gasUsed": "0x0", "output": "0x"},
            "subtraces": 0,
            "traceAddress": []
        }],
        // No gas price: no fee, the coinbase is untouched.
        "stateDiff": {
            addr(A): {"balance": {"*": {"from": A_BALANCE, "to": "0x3635c9adc5de9ffff0"}}, "code": "=", "nonce": {"*": {"from": "0x0", "to": "0x1"}}, "storage": {}},
            addr(B): {"balance": {"*": {"from": B_BALANCE, "to": "0xde0b6b3a7640010"}}, "code": "=", "nonce": "=", "storage": {}}
        },
        "vmTrace": {"code": "0x", "ops": []}
    }]);
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread")]
async fn transfer_to_new_account_and_from_unknown_sender() {
    let fresh = address!("00000000000000000000000000000000000000f1");
    let got = result(
        &chain().methods(),
        json!([[
            [{"from": A, "to": fresh, "value": "0x3"}, ["stateDiff"]],
            // The fresh account spends what it just got: state carries over.
            [{"from": fresh, "to": B, "value": "0x2"}, ["stateDiff"]]
        ]]),
    )
    .await;
    assert_eq!(
        got[0]["stateDiff"][addr(fresh)],
        json!({"balance": {"+": "0x3"}, "code": {"+": "0x"}, "nonce": {"+": "0x0"}, "storage": {}})
    );
    assert_eq!(
        got[1]["stateDiff"][addr(fresh)],
        json!({"balance": {"*": {"from": "0x3", "to": "0x1"}}, "code": "=", "nonce": {"*": {"from": "0x0", "to": "0x1"}}, "storage": {}})
    );
    assert_eq!(got[1]["trace"], json!([]));
    assert_eq!(got[1]["vmTrace"], Value::Null);
}

/// Call 1 creates STORE (constructor stores 7), call 2 sets slot 0 to 0x2a, call 3 reads it.
fn create_set_get(types: Value) -> Value {
    json!([[
        [{"from": A, "value": "0x5", "input": hex(&store_init())}, types],
        [{"from": A, "to": A.create(0), "value": "0x3", "data": word(0x2a)}, types],
        [{"from": A, "to": A.create(0)}, types]
    ], "latest"])
}

#[tokio::test(flavor = "multi_thread")]
async fn create_then_call_the_created_contract() {
    let c = A.create(0);
    let runtime = hex(&store_runtime());
    let got = result(
        &chain().methods(),
        create_set_get(json!(["trace", "stateDiff"])),
    )
    .await;

    // Call 1. Init code: 41 bytes, 9 zero and 32 non-zero: intrinsic gas
    // 21000 + 32000 + 9*4 + 32*16 + 2 words * 2 = 53552; 50M - 53552 = 0x2fa1f50.
    // Execution: PUSH1 PUSH1 (6), SSTORE cold 0 -> 7 (2100 + 20000), 3 PUSH1 (9),
    // CODECOPY of 24 bytes into fresh memory (3 + 3 + 3), 2 PUSH1 (6), RETURN (0) = 22130,
    // plus 24 * 200 deposit = 26930 = 0x6932.
    assert_eq!(
        got[0],
        json!({
            "output": runtime,
            "trace": [{
                "type": "create",
                "action": {"from": A, "gas": "0x2fa1f50", "init": hex(&store_init()), "value": "0x5", "creationMethod": "create"},
                "result": {"address": c, "code": runtime, "gasUsed": "0x6932"},
                "subtraces": 0,
                "traceAddress": []
            }],
            "stateDiff": {
                addr(A): {"balance": {"*": {"from": A_BALANCE, "to": "0x3635c9adc5de9ffffb"}}, "code": "=", "nonce": {"*": {"from": "0x0", "to": "0x1"}}, "storage": {}},
                addr(c): {"balance": {"+": "0x5"}, "code": {"+": runtime}, "nonce": {"+": "0x1"}, "storage": {word(0): {"+": word(7)}}}
            },
            "vmTrace": null
        })
    );

    // Call 2. Calldata 31 zero bytes and one non-zero: 21000 + 124 + 16 = 21140;
    // 50M - 21140 = 0x2fa9dec. Execution: 27 for the 7 operations before SSTORE, SSTORE of a
    // cold slot whose value at the start of this call is 7 (call 1 committed it), 7 -> 0x2a:
    // 2100 + 2900; total 5027 = 0x13a3.
    assert_eq!(
        got[1],
        json!({
            "output": "0x",
            "trace": [{
                "type": "call",
                "action": {"from": A, "callType": "call", "gas": "0x2fa9dec", "input": word(0x2a), "to": c, "value": "0x3"},
                "result": {"gasUsed": "0x13a3", "output": "0x"},
                "subtraces": 0,
                "traceAddress": []
            }],
            "stateDiff": {
                addr(A): {"balance": {"*": {"from": "0x3635c9adc5de9ffffb", "to": "0x3635c9adc5de9ffff8"}}, "code": "=", "nonce": {"*": {"from": "0x1", "to": "0x2"}}, "storage": {}},
                addr(c): {"balance": {"*": {"from": "0x5", "to": "0x8"}}, "code": "=", "nonce": "=", "storage": {word(0): {"*": {"from": word(7), "to": word(0x2a)}}}}
            },
            "vmTrace": null
        })
    );

    // Call 3 reads what call 2 wrote. CALLDATASIZE ISZERO PUSH1 JUMPI (18), JUMPDEST (1),
    // PUSH1 (3), SLOAD cold (2100), PUSH1 (3), MSTORE into fresh memory (6), 2 PUSH1 (6),
    // RETURN (0) = 2137 = 0x859. Nothing changes but the sender's nonce.
    assert_eq!(
        got[2],
        json!({
            "output": word(0x2a),
            "trace": [{
                "type": "call",
                "action": {"from": A, "callType": "call", "gas": "0x2fa9e78", "input": "0x", "to": c, "value": "0x0"},
                "result": {"gasUsed": "0x859", "output": word(0x2a)},
                "subtraces": 0,
                "traceAddress": []
            }],
            "stateDiff": {
                addr(A): {"balance": "=", "code": "=", "nonce": {"*": {"from": "0x2", "to": "0x3"}}, "storage": {}}
            },
            "vmTrace": null
        })
    );
}

/// Every `from` in a call's stateDiff equals the matching `to` of the call before.
#[tokio::test(flavor = "multi_thread")]
async fn state_diffs_chain_from_call_to_call() {
    let got = result(&chain().methods(), create_set_get(json!(["stateDiff"]))).await;
    let mut checked = 0;
    for pair in got.as_array().unwrap().windows(2) {
        let (before, after) = (&pair[0]["stateDiff"], &pair[1]["stateDiff"]);
        for (account, diff) in after.as_object().unwrap() {
            for field in ["balance", "nonce", "code"] {
                if let Some(from) = diff[field].pointer("/*/from") {
                    let prev = &before[account][field];
                    let to = prev.pointer("/*/to").or_else(|| prev.get("+")).unwrap_or_else(|| {
                        panic!("{account} {field} changes in a later call but not in the one before")
                    });
                    assert_eq!(from, to, "{account} {field}");
                    checked += 1;
                }
            }
            for (slot, delta) in diff["storage"].as_object().unwrap() {
                let prev = &before[account]["storage"][slot];
                let to = prev
                    .pointer("/*/to")
                    .or_else(|| prev.get("+"))
                    .expect("slot written before");
                assert_eq!(delta.pointer("/*/from").unwrap(), to, "{account} {slot}");
                checked += 1;
            }
        }
    }
    // call 2: A balance, A nonce, C balance, C slot 0; call 3: A nonce.
    assert_eq!(checked, 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn vm_trace_of_a_call() {
    let got = result(&chain().methods(), create_set_get(json!(["vmTrace"]))).await;
    // Call 3, operation by operation; `used` is the gas left after the operation, starting
    // from 50M - 21000 = 49979000.
    let op = |pc: u64, op: &str, cost: u64, used: u64, push: Value, mem: Value| json!({"pc": pc, "op": op, "cost": cost, "ex": {"used": used, "push": push, "mem": mem, "store": null}, "sub": null});
    assert_eq!(
        got[2]["vmTrace"],
        json!({
            "code": hex(&store_runtime()),
            "ops": [
                op(0, "CALLDATASIZE", 2, 49978998, json!(["0x0"]), Value::Null),
                op(1, "ISZERO", 3, 49978995, json!(["0x1"]), Value::Null),
                op(2, "PUSH1", 3, 49978992, json!(["0xc"]), Value::Null),
                op(4, "JUMPI", 10, 49978982, json!([]), Value::Null),
                op(12, "JUMPDEST", 1, 49978981, json!([]), Value::Null),
                op(13, "PUSH1", 3, 49978978, json!(["0x0"]), Value::Null),
                op(15, "SLOAD", 2100, 49976878, json!(["0x2a"]), Value::Null),
                op(16, "PUSH1", 3, 49976875, json!(["0x0"]), Value::Null),
                op(18, "MSTORE", 6, 49976869, json!([]), json!({"off": 0, "data": word(0x2a)})),
                op(19, "PUSH1", 3, 49976866, json!(["0x20"]), Value::Null),
                op(21, "PUSH1", 3, 49976863, json!(["0x0"]), Value::Null),
                op(23, "RETURN", 0, 49976863, json!([]), Value::Null),
            ]
        })
    );
    // Call 2's SSTORE reports the write; call 1's vmTrace runs the init code.
    let sstore = got[1]["vmTrace"]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["op"] == "SSTORE")
        .unwrap();
    assert_eq!(sstore["ex"]["store"], json!({"key": "0x0", "val": "0x2a"}));
    assert_eq!(sstore["cost"], 5000);
    assert_eq!(got[0]["vmTrace"]["code"], json!(hex(&store_init())));
    assert_eq!(got[0]["vmTrace"]["ops"][2]["op"], "SSTORE");
    assert_eq!(
        got[0]["vmTrace"]["ops"][2]["ex"]["store"],
        json!({"key": "0x0", "val": "0x7"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn each_trace_type_combination() {
    let methods = chain().methods();
    let full = result(
        &methods,
        create_set_get(json!(["trace", "stateDiff", "vmTrace"])),
    )
    .await;
    let names = ["trace", "stateDiff", "vmTrace"];
    for mask in 0..8u8 {
        let types: Vec<&str> = (0..3)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| names[i])
            .collect();
        let got = result(&methods, create_set_get(json!(types))).await;
        for (i, call) in got.as_array().unwrap().iter().enumerate() {
            assert_eq!(call["output"], full[i]["output"], "{types:?}");
            let want_trace = if types.contains(&"trace") {
                full[i]["trace"].clone()
            } else {
                json!([])
            };
            assert_eq!(call["trace"], want_trace, "{types:?} call {i}");
            for field in ["stateDiff", "vmTrace"] {
                let want = if types.contains(&field) {
                    full[i][field].clone()
                } else {
                    Value::Null
                };
                assert_eq!(call[field], want, "{types:?} call {i} {field}");
            }
        }
    }
    // Left out or null: no traces, as with an empty list.
    let call = json!({"from": A, "to": B, "value": "0x1"});
    for entry in [json!([call]), json!([call, null])] {
        let got = result(&methods, json!([[entry]])).await;
        assert_eq!(
            got,
            json!([{"output": "0x", "trace": [], "stateDiff": null, "vmTrace": null}])
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn nested_calls_revert_create2_and_selfdestruct() {
    let child = N.create2(
        U256::from(1).to_be_bytes::<32>(),
        alloy::primitives::keccak256(child_init()),
    );
    let got = result(
        &chain().methods(),
        json!([[[{"from": A, "to": N}, ["trace", "stateDiff"]]]]),
    )
    .await;
    let traces = got[0]["trace"].as_array().unwrap();
    let shape: Vec<Value> = traces
        .iter()
        .map(|t| {
            json!([
                t["type"],
                t["action"]["callType"],
                t["action"]["from"],
                t["action"]["to"],
                t["action"]["value"],
                t["traceAddress"],
                t["subtraces"],
                t["error"]
            ])
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            json!(["call", "call", A, N, "0x0", [], 6, null]),
            json!(["call", "call", N, S, "0x1", [0], 0, null]),
            json!(["call", "staticcall", N, S, "0x0", [1], 0, null]),
            // DELEGATECALL runs S's code for N: from N, to S, the value of N's own call.
            json!(["call", "delegatecall", N, S, "0x0", [2], 0, null]),
            json!(["call", "call", N, R, "0x0", [3], 0, "Reverted"]),
            json!(["create", null, N, null, "0x0", [4], 0, null]),
            json!(["call", "call", N, child, "0x0", [5], 1, null]),
            json!(["suicide", null, null, null, null, [5, 0], 0, null]),
        ]
    );
    // The CALL into S: before it 32 gas of operations (PUSH1 PUSH1 MSTORE with expansion, 5
    // PUSH1, PUSH20, GAS), so GAS pushed 49979000 - 32 = 49978968. CALL charges cold access
    // 2600 and value transfer 9000, leaving 49967368, of which 63/64 is 49186628 (less than
    // asked); with the 2300 stipend the callee gets 49188928 = 0x2ee9040. It sets S's slot 0
    // from 7 to 0x2a: 27 + 5000 = 0x13a3.
    assert_eq!(traces[1]["action"]["gas"], "0x2ee9040");
    assert_eq!(traces[1]["action"]["input"], word(0x2a));
    assert_eq!(
        traces[1]["result"],
        json!({"gasUsed": "0x13a3", "output": "0x"})
    );
    // STATICCALL reads the new value; DELEGATECALL reads N's own (empty) slot 0.
    assert_eq!(traces[2]["result"]["output"], word(0x2a));
    assert_eq!(traces[3]["result"]["output"], word(0));
    // A reverted call has an error and keeps its result (gas used and revert data).
    assert_eq!(
        traces[4]["result"],
        json!({"gasUsed": "0x12", "output": "0xde"})
    );
    assert_eq!(traces[5]["action"]["creationMethod"], "create2");
    assert_eq!(traces[5]["action"]["init"], hex(&child_init()));
    assert_eq!(traces[5]["result"]["address"], json!(child));
    assert_eq!(traces[5]["result"]["code"], "0x33ff");
    assert_eq!(
        traces[7]["action"],
        json!({"address": child, "refundAddress": N, "balance": "0x0"})
    );
    assert_eq!(traces[7]["result"], Value::Null);
    // The root returns STATICCALL's and DELEGATECALL's outputs.
    assert_eq!(got[0]["output"], format!("{}{}", word(0x2a), &word(0)[2..]));

    // The child was created and destroyed in this call: not in the diff. N paid 1 wei to S
    // and its nonce went up for the CREATE2.
    assert_eq!(
        got[0]["stateDiff"],
        json!({
            addr(A): {"balance": "=", "code": "=", "nonce": {"*": {"from": "0x0", "to": "0x1"}}, "storage": {}},
            addr(N): {"balance": {"*": {"from": "0x64", "to": "0x63"}}, "code": "=", "nonce": {"*": {"from": "0x1", "to": "0x2"}}, "storage": {}},
            addr(S): {"balance": {"*": {"from": "0x0", "to": "0x1"}}, "code": "=", "nonce": "=", "storage": {word(0): {"*": {"from": word(7), "to": word(0x2a)}}}}
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn selfdestruct_of_an_existing_contract() {
    let got = result(
        &chain().methods(),
        json!([[[{"from": A, "to": K}, ["trace", "stateDiff"]]]]),
    )
    .await;
    // PUSH20 (3) + SELFDESTRUCT (5000 + 2600 for cold B) = 7603 = 0x1db3.
    assert_eq!(
        got[0]["trace"],
        json!([
            {"type": "call", "action": {"from": A, "callType": "call", "gas": "0x2fa9e78", "input": "0x", "to": K, "value": "0x0"},
             "result": {"gasUsed": "0x1db3", "output": "0x"}, "subtraces": 1, "traceAddress": []},
            {"type": "suicide", "action": {"address": K, "refundAddress": B, "balance": "0x64"},
             "result": null, "subtraces": 0, "traceAddress": [0]}
        ])
    );
    // Since Cancun (EIP-6780) a contract not created in the same transaction keeps its code
    // and storage; only its balance moves.
    assert_eq!(
        got[0]["stateDiff"][addr(K)],
        json!({"balance": {"*": {"from": "0x64", "to": "0x0"}}, "code": "=", "nonce": "=", "storage": {}})
    );
    assert_eq!(
        got[0]["stateDiff"][addr(B)]["balance"],
        json!({"*": {"from": B_BALANCE, "to": "0xde0b6b3a7640064"}})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn revert_and_out_of_gas_at_the_top() {
    let got = result(
        &chain().methods(),
        json!([[
            [{"from": A, "to": R}, ["trace"]],
            [{"from": A, "to": L, "gas": "0x7530"}, ["trace"]]
        ]]),
    )
    .await;
    // The revert data is the output. A reverted call keeps its result, as reth and erigon
    // serve it (OpenEthereum left it out): PUSH1 PUSH1 (6), MSTORE8 with memory expansion
    // (6), PUSH1 PUSH1 (6), REVERT (0) = 0x12.
    assert_eq!(got[0]["output"], "0xde");
    assert_eq!(
        got[0]["trace"],
        json!([{"type": "call", "action": {"from": A, "callType": "call", "gas": "0x2fa9e78", "input": "0x", "to": R, "value": "0x0"},
                "error": "Reverted", "result": {"gasUsed": "0x12", "output": "0xde"}, "subtraces": 0, "traceAddress": []}])
    );
    // 30000 gas less 21000 intrinsic: 9000 = 0x2328 for the loop, which runs out.
    assert_eq!(got[1]["output"], "0x");
    assert_eq!(
        got[1]["trace"],
        json!([{"type": "call", "action": {"from": A, "callType": "call", "gas": "0x2328", "input": "0x", "to": L, "value": "0x0"},
                "error": "Out of gas", "result": null, "subtraces": 0, "traceAddress": []}])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gas_price_charges_fees_against_the_block_base_fee() {
    // gasPrice 10 against the block's base fee of 7: the sender pays 21000 * 10 + value, the
    // coinbase gets 21000 * 3 (the base fee is burnt).
    let got = result(
        &chain().methods(),
        json!([[[{"from": A, "to": B, "value": "0x1", "gas": "0x5208", "gasPrice": "0xa"}, ["stateDiff", "trace"]]]]),
    )
    .await;
    let paid = U256::from(21000 * 10 + 1);
    let a_after = U256::from(1000u128 * 10u128.pow(18)) - paid;
    assert_eq!(
        got[0]["stateDiff"][addr(A)]["balance"]["*"]["to"],
        json!(a_after)
    );
    assert_eq!(
        got[0]["stateDiff"][addr(COINBASE)]["balance"],
        json!({"+": format!("{:#x}", 21000 * 3)})
    );
    assert_eq!(got[0]["trace"][0]["action"]["gas"], "0x0");

    // Without gas, a gas price limits the default to what the sender can pay: an account with
    // 21000 * 10 + 5 wei sending 5 gets exactly 21000 gas.
    let poor = address!("00000000000000000000000000000000000000f2");
    let methods = chain().account(poor, U256::from(21000 * 10 + 5)).methods();
    let got = result(&methods, json!([[[{"from": poor, "to": B, "value": "0x5", "gasPrice": "0xa"}, ["trace", "stateDiff"]]]])).await;
    assert_eq!(got[0]["trace"][0]["action"]["gas"], "0x0");
    assert_eq!(
        got[0]["stateDiff"][addr(poor)]["balance"],
        json!({"*": {"from": "0x33455", "to": "0x0"}})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn block_env_is_the_named_block() {
    // NUMBER, TIMESTAMP, COINBASE at block 0 and at latest (block 1), and BASEFEE with a gas
    // price (without one it reads 0).
    let probe = address!("00000000000000000000000000000000000000f3");
    let code = asm(
        "NUMBER PUSH1 0 MSTORE TIMESTAMP PUSH1 0x20 MSTORE COINBASE PUSH1 0x40 MSTORE \
         BASEFEE PUSH1 0x60 MSTORE PUSH1 0x80 PUSH1 0 RETURN",
    );
    let methods = chain().contract(probe, U256::ZERO, &code).methods();
    let out = |n: u64, fee: u64| {
        format!(
            "0x{}{}{}{}",
            &word(n)[2..],
            &word(TIMESTAMP + 12 * n)[2..],
            &format!("{:0>64}", alloy::hex::encode(COINBASE)),
            &word(fee)[2..]
        )
    };
    let got = result(&methods, json!([[[{"from": A, "to": probe}, []]], "0x0"])).await;
    assert_eq!(got[0]["output"], out(0, 0));
    let got = result(
        &methods,
        json!([[[{"from": A, "to": probe, "gasPrice": "0x7"}, []]], "latest"]),
    )
    .await;
    assert_eq!(got[0]["output"], out(1, BASE_FEE));
}

#[tokio::test(flavor = "multi_thread")]
async fn errors() {
    let methods = chain().methods();
    let transfer = json!({"from": A, "to": B, "value": "0x1"});
    // Unknown block: number, hash.
    assert_eq!(
        error_code(&methods, json!([[[transfer, ["trace"]]], "0x10"])).await,
        -32001
    );
    let resp = request(
        &methods,
        json!([[[transfer, ["trace"]]], format!("0x{}", "ab".repeat(32))]),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32001);
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&"ab".repeat(32)),
        "{resp}"
    );
    // Malformed parameters: -32602 naming the problem.
    let resp = request(&methods, json!([[[transfer, ["foo"]]], "latest"])).await;
    assert_eq!(resp["error"]["code"], -32602);
    assert!(resp.to_string().contains("foo"), "{resp}");
    let resp = request(&methods, json!([[[{"from": A, "gas": "lots"}, ["trace"]]]])).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    assert_eq!(error_code(&methods, json!([])).await, -32602);
    assert_eq!(error_code(&methods, json!([{"from": A}])).await, -32602);
    assert_eq!(
        error_code(&methods, json!([[[transfer, ["trace"]]], "soon"])).await,
        -32602
    );
    assert_eq!(
        error_code(
            &methods,
            json!([[[{"from": A, "to": B, "input": "0x01", "data": "0x02"}, []]]])
        )
        .await,
        -32602
    );
    // Gas above the cap runs at the cap, as in reth (50M less the 21000 intrinsic gas).
    let capped = result(
        &methods,
        json!([[[{"from": A, "to": B, "gas": "0xffffffffff"}, ["trace"]]]]),
    )
    .await;
    assert_eq!(
        capped[0]["trace"][0]["action"]["gas"], "0x2fa9e78",
        "{capped}"
    );
    // Value the sender cannot pay.
    let empty = address!("00000000000000000000000000000000000000f4");
    let resp = request(
        &methods,
        json!([[[transfer, []], [{"from": empty, "to": B, "value": "0x1"}, []]]]),
    )
    .await;
    // reth's "transaction rejected" code for what the state refuses.
    assert_eq!(resp["error"]["code"], -32003, "{resp}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("call 1:"),
        "{resp}"
    );
    // In geth's words, as eth_call says it.
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "insufficient funds for gas * price + value: address {empty} have 0 want 1"
        )),
        "{resp}"
    );
    // An empty list is an empty answer.
    assert_eq!(result(&methods, json!([[]])).await, json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn limits() {
    let transfer = json!([{"from": A, "to": B, "value": "0x1"}, ["trace"]]);
    let methods = chain().methods_with(|l| l.max_calls = 2);
    assert_eq!(
        result(&methods, json!([[transfer, transfer]]))
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        error_code(&methods, json!([[transfer, transfer, transfer]])).await,
        -32005
    );

    // Total gas: two loops of 1M gas fit in 2.5M, a third does not get its gas.
    let methods = chain().methods_with(|l| l.max_total_gas = 2_500_000);
    let looped = json!([{"from": A, "to": L, "gas": "0xf4240"}, []]);
    assert_eq!(
        result(&methods, json!([[looped, looped]]))
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        error_code(&methods, json!([[looped, looped, looped]])).await,
        -32005
    );

    // Deadline: an endless loop, stopped after 200 ms. Two billion gas of it, as 50M gas of
    // this loop can finish within 200 ms in a release build.
    let methods = chain().methods_with(|l| {
        l.timeout = Duration::from_millis(200);
        l.gas_cap = 2_000_000_000;
        l.max_total_gas = 2_000_000_000;
    });
    let started = std::time::Instant::now();
    let resp = request(&methods, json!([[[{"from": A, "to": L}, ["trace"]]]])).await;
    assert_eq!(resp["error"]["code"], -32016, "{resp}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stopped late: {:?}",
        started.elapsed()
    );

    // vmTrace size: the endless loop with a vmTrace stops at 1 MB instead of growing.
    let methods = chain().methods_with(|l| l.max_trace_bytes = 1 << 20);
    let resp = request(&methods, json!([[[{"from": A, "to": L}, ["vmTrace"]]]])).await;
    assert_eq!(resp["error"]["code"], -32005, "{resp}");
    // ... and small traces still fit.
    let got = result(&methods, create_set_get(json!(["vmTrace", "trace"]))).await;
    assert_eq!(got.as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn tracing_slots_bound_concurrent_requests() {
    // One slot: while a request tracing an endless loop holds it (until its 1 s deadline), a
    // quick request sent 50 ms later waits for the slot; it then either runs or finds its own
    // deadline passed, but not before the slow one let go.
    let methods = chain().methods_with(|l| {
        l.max_concurrent = 1;
        l.timeout = Duration::from_secs(1);
        // Enough gas that the loop outlasts the deadline in a release build too.
        l.gas_cap = 2_000_000_000;
        l.max_total_gas = 2_000_000_000;
    });
    let slow = json!([[[{"from": A, "to": L}, ["trace"]]]]);
    let quick = json!([[[{"from": A, "to": B, "value": "0x1"}, []]]]);
    let (a, (b, waited)) = tokio::join!(request(&methods, slow), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = std::time::Instant::now();
        (request(&methods, quick.clone()).await, started.elapsed())
    });
    assert_eq!(a["error"]["code"], -32016, "{a}");
    assert!(
        waited >= Duration::from_millis(800),
        "the quick request did not wait: {waited:?} {b}"
    );
    // Once free, the slot serves again.
    assert_eq!(result(&methods, quick).await.as_array().unwrap().len(), 1);
}
