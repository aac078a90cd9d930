//! eth_simulateV1 against the geth-recorded execution-apis fixtures, run in-process on the
//! imported test chain (the simulate module over the node's own store), plus the provider's
//! limits that the fixtures do not cover.
//!
//! `SIMULATE_FIXTURE=<substring>` limits the run to matching files and prints the first
//! difference of each failure.

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use simnode_api::{BlockParam, ModuleContext, RpcLimits};
use simnode_simulate::{Simulate, SimulatePayload};

mod support;

type Chain = (Arc<simnode::store::Store>, Arc<simnode_api::ChainSpec>);

/// The execution-apis chain, imported and opened once per test binary (the database allows
/// one opener).
fn imported_chain() -> Chain {
    static CHAIN: OnceLock<Chain> = OnceLock::new();
    CHAIN
        .get_or_init(|| {
            let datadir = support::import_into_process_dir("simulate-datadir")
                .unwrap_or_else(|e| panic!("{e}"));
            let args = simnode::cli::ChainArgs {
                chain: support::execution_apis_genesis()
                    .to_string_lossy()
                    .into_owned(),
                datadir: Some(datadir),
            };
            let (store, chain) = simnode::node::open_store(&args).expect("opening the store");
            (store, Arc::new(chain.spec.clone()))
        })
        .clone()
}

fn context(limits: RpcLimits) -> ModuleContext {
    let (store, spec) = imported_chain();
    ModuleContext {
        spec,
        chain: store,
        pool: Arc::new(simnode::pool::Pool::default()),
        limits: Arc::new(limits),
    }
}

/// Answers one JSON-RPC request the way the server would.
fn answer(sim: &Simulate, request: &Value) -> Value {
    let id = request["id"].clone();
    let params = request["params"].as_array().cloned().unwrap_or_default();
    let payload: Result<SimulatePayload, _> =
        serde_json::from_value(params.first().cloned().unwrap_or(Value::Null));
    let block = match params.get(1) {
        None | Some(Value::Null) => Ok(BlockParam::LATEST),
        Some(v) => BlockParam::from_value(v),
    };
    let result = match (payload, block) {
        (Ok(payload), Ok(block)) => sim.simulate_blocking(payload, block, Instant::now()),
        (Err(e), _) => Err(simnode_api::RpcError::invalid_params(e.to_string())),
        (_, Err(e)) => Err(simnode_api::RpcError::invalid_params(e)),
    };
    match result {
        Ok(blocks) => json!({"jsonrpc": "2.0", "id": id, "result": blocks}),
        Err(e) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code(), "message": e.to_string()}})
        }
    }
}

#[test]
fn simulate_fixtures() {
    let limits = RpcLimits {
        max_simulate_blocks: 256,
        ..RpcLimits::default()
    };
    let sim = Simulate::new(context(limits));
    let files = support::io_files_filtered(
        &support::conformance_dir().join("eth_simulateV1"),
        "SIMULATE_FIXTURE",
    );
    let mut failures = Vec::new();
    for file in &files {
        let fixture = support::Fixture::load(file).unwrap_or_else(|e| panic!("{e}"));
        for (request, expected) in &fixture.exchanges {
            let request: Value = serde_json::from_str(request).expect("fixture request");
            let expected: Value = serde_json::from_str(expected).expect("fixture response");
            let actual = answer(&sim, &request);
            if let Err(diff) = support::compare_responses(&expected, &actual, false) {
                let name = file.file_name().unwrap_or_default().to_string_lossy();
                failures.push(format!("{name}: {diff}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// The conformance comparison leaves error messages out; clients show them to people, and
/// ours are geth's word for word on every fixture that expects an error.
#[test]
fn error_messages_are_geths() {
    let sim = Simulate::new(context(RpcLimits {
        max_simulate_blocks: 256,
        ..RpcLimits::default()
    }));
    let mut checked = 0;
    for file in support::fixture_files("eth_simulateV1") {
        let fixture = support::Fixture::load(&file).unwrap_or_else(|e| panic!("{e}"));
        for (request, expected) in &fixture.exchanges {
            let expected: Value = serde_json::from_str(expected).expect("fixture response");
            let Some(want) = expected.get("error") else {
                continue;
            };
            let request: Value = serde_json::from_str(request).expect("fixture request");
            let got = answer(&sim, &request);
            assert_eq!(&got["error"], want, "{}", file.display());
            checked += 1;
        }
    }
    assert!(checked > 0, "no error fixtures");
}

fn request(payload: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [payload, "latest"]})
}

fn ok_blocks(resp: &Value) -> &Vec<Value> {
    resp["result"]
        .as_array()
        .unwrap_or_else(|| panic!("expected a result, got {resp}"))
}

#[test]
fn default_limit_is_16_blocks_filler_included() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let blocks = |n: usize| Value::Array(vec![json!({}); n]);
    let resp = answer(&sim, &request(json!({"blockStateCalls": blocks(16)})));
    assert_eq!(ok_blocks(&resp).len(), 16);
    let resp = answer(&sim, &request(json!({"blockStateCalls": blocks(17)})));
    assert_eq!(resp["error"]["code"], -38026, "{resp}");
    // Two given blocks, but the second jumps 16 numbers ahead: filler blocks count.
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [{}, {"blockOverrides": {"number": "0x47"}}]})),
    );
    assert_eq!(resp["error"]["code"], -38026, "{resp}");
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [{}, {"blockOverrides": {"number": "0x46"}}]})),
    );
    assert_eq!(ok_blocks(&resp).len(), 16);
}

/// No timestamp follows u64::MAX: a block (or a filler block) after one at the largest
/// timestamp is out of order (-38021), not given the same timestamp again.
#[test]
fn no_default_timestamp_after_the_largest() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let last = json!({"blockOverrides": {"time": "0xffffffffffffffff"}});
    let resp = answer(&sim, &request(json!({"blockStateCalls": [last.clone()]})));
    assert_eq!(ok_blocks(&resp)[0]["timestamp"], "0xffffffffffffffff");
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [last.clone(), {}]})),
    );
    assert_eq!(resp["error"]["code"], -38021, "{resp}");
    let base = json!({"blockOverrides": {"number": "0x37", "time": "0xffffffffffffffff"}});
    let gap = json!({"blockOverrides": {"number": "0x39"}});
    let resp = answer(&sim, &request(json!({"blockStateCalls": [base, gap]})));
    assert_eq!(resp["error"]["code"], -38021, "filler block: {resp}");
}

#[test]
fn full_transactions_under_either_name() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let call = json!({"from": "0xc000000000000000000000000000000000000000", "to": "0xc100000000000000000000000000000000000000"});
    for name in ["returnFullTransactions", "returnFullTransactionObjects"] {
        let resp = answer(
            &sim,
            &request(json!({"blockStateCalls": [{"calls": [call]}], name: true})),
        );
        let tx = &ok_blocks(&resp)[0]["transactions"][0];
        assert!(tx.is_object(), "{name}: {tx}");
        assert_eq!(tx["from"], "0xc000000000000000000000000000000000000000");
    }
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [{"calls": [call]}]})),
    );
    assert!(ok_blocks(&resp)[0]["transactions"][0].is_string());
    // An unsigned legacy transaction as geth's block objects show it: v, r, s zero and the
    // chain id geth derives from v zero.
    let legacy = json!({"from": "0xc000000000000000000000000000000000000000", "to": "0xc100000000000000000000000000000000000000", "gasPrice": "0x0"});
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [{"calls": [legacy]}], "returnFullTransactions": true})),
    );
    let tx = &ok_blocks(&resp)[0]["transactions"][0];
    assert_eq!(tx["type"], "0x0", "{tx}");
    assert_eq!(tx["v"], "0x0", "{tx}");
    assert_eq!(tx["chainId"], "0x7fffffffffffffee", "{tx}");
}

/// JUMPDEST; PUSH1 0; JUMP: loops until its gas runs out.
fn endless_loop_payload(gas: &str) -> Value {
    json!({"blockStateCalls": [
        {"stateOverrides": {"0xc200000000000000000000000000000000000000": {"code": "0x5b600056"}},
         "calls": [{"to": "0xc200000000000000000000000000000000000000", "gas": gas}]},
        {"calls": [{"to": "0xc200000000000000000000000000000000000000", "gas": gas}]}
    ]})
}

#[test]
fn deadline_stops_the_request_with_32016() {
    let limits = RpcLimits {
        evm_timeout: Duration::from_millis(1),
        ..RpcLimits::default()
    };
    let sim = Simulate::new(context(limits));
    let started = Instant::now();
    let resp = answer(&sim, &request(endless_loop_payload("0x2faf080")));
    assert_eq!(resp["error"]["code"], -32016, "{resp}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn loop_within_the_deadline_runs_out_of_gas() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let resp = answer(&sim, &request(endless_loop_payload("0x30d40")));
    let blocks = ok_blocks(&resp);
    for block in blocks {
        let call = &block["calls"][0];
        assert_eq!(call["status"], "0x0");
        assert_eq!(call["error"]["code"], -32015, "{call}");
        assert_eq!(call["error"]["message"], "out of gas");
        assert_eq!(call["gasUsed"], "0x30d40");
    }
}

/// A precompile whose run time grows with its input cannot be stopped once begun, so a call
/// of one does not begin with little time left: a short run (a request's first try on its RPC
/// thread) gives way at once, to run again where it has time, instead of holding its thread
/// for the precompile's whole run. With time, it runs, where it is or moved.
#[test]
fn heavy_precompiles_wait_for_a_run_with_time() {
    // blake2f, 10,000,000 rounds: a tenth of a second or more.
    let input = format!("0x{:08x}{}01", 10_000_000, "00".repeat(208));
    let moved = "0x00000000000000000000000000000000000b1a4e";
    let payload = json!({"blockStateCalls": [
        {"stateOverrides": {"0x0000000000000000000000000000000000000009": {"movePrecompileToAddress": moved}},
         "calls": [{"to": moved, "input": input}]},
        {"calls": [{"to": "0x0000000000000000000000000000000000000009", "input": input}]}
    ]});
    let short = Simulate::new(context(RpcLimits {
        evm_timeout: Duration::from_millis(20),
        ..RpcLimits::default()
    }));
    let started = Instant::now();
    let resp = answer(&short, &request(payload.clone()));
    let gave_way = started.elapsed();
    assert_eq!(resp["error"]["code"], -32016, "{resp}");
    let sim = Simulate::new(context(RpcLimits::default()));
    let started = Instant::now();
    let resp = answer(&sim, &request(payload));
    let ran = started.elapsed();
    assert!(
        gave_way * 4 < ran,
        "gave way after {gave_way:?}, ran in {ran:?}"
    );
    for block in ok_blocks(&resp) {
        let call = &block["calls"][0];
        assert_eq!(call["status"], "0x1", "{call}");
        assert_eq!(
            call["returnData"].as_str().map(str::len),
            Some(2 + 128),
            "{call}"
        );
    }
}

#[test]
fn overrides_carry_into_later_blocks() {
    let sim = Simulate::new(context(RpcLimits::default()));
    // Block 1 gives 0xc0 a balance, code and a storage slot; block 2 reads all three.
    // Code: SLOAD(0), BALANCE(ADDRESS) added, returned as one word.
    let code = "0x60005430310160005260206000f3";
    let payload = json!({"blockStateCalls": [
        {"stateOverrides": {"0xc000000000000000000000000000000000000000": {
            "balance": "0x10", "code": code,
            "stateDiff": {"0x0000000000000000000000000000000000000000000000000000000000000000": "0x0000000000000000000000000000000000000000000000000000000000000005"}}}},
        {"calls": [{"to": "0xc000000000000000000000000000000000000000"}]}
    ]});
    let resp = answer(&sim, &request(payload));
    let blocks = ok_blocks(&resp);
    assert_eq!(
        blocks[1]["calls"][0]["returnData"],
        "0x0000000000000000000000000000000000000000000000000000000000000015"
    );
    // The state root of the empty first block already reflects the overrides.
    assert_ne!(blocks[0]["stateRoot"], blocks[1]["parentHash"]);
}

#[test]
fn trace_transfers_nested_and_reverted() {
    let sim = Simulate::new(context(RpcLimits::default()));
    // 0xc1 forwards its call value to 0xc2 (CALL), then calls 0xc3 with value 1 which reverts,
    // and delegate-calls 0xc2 (no transfer log).
    // 0xc1: CALL(gas, 0xc2, callvalue, 0,0,0,0); POP; CALL(gas, 0xc3, 1, 0,0,0,0); POP;
    //       DELEGATECALL(gas, 0xc2, 0,0,0,0); POP; STOP
    let c1 = concat!(
        "0x",
        "6000600060006000",
        "34",
        "73c200000000000000000000000000000000000000",
        "5a",
        "f1",
        "50",
        "6000600060006000",
        "6001",
        "73c300000000000000000000000000000000000000",
        "5a",
        "f1",
        "50",
        "60006000600060006000",
        "73c200000000000000000000000000000000000000",
        "5a",
        "f4",
        "50",
        "00"
    );
    // 0xc3: REVERT(0, 0)
    let c3 = "0x60006000fd";
    let payload = json!({"traceTransfers": true, "blockStateCalls": [{
        "stateOverrides": {
            "0xc000000000000000000000000000000000000000": {"balance": "0x100"},
            "0xc100000000000000000000000000000000000000": {"code": c1, "balance": "0x10"},
            "0xc300000000000000000000000000000000000000": {"code": c3}
        },
        "calls": [{"from": "0xc000000000000000000000000000000000000000", "to": "0xc100000000000000000000000000000000000000", "value": "0x7"}]
    }]});
    let resp = answer(&sim, &request(payload));
    let block = &ok_blocks(&resp)[0];
    let logs = block["calls"][0]["logs"].as_array().expect("logs");
    assert_eq!(
        transfers(logs),
        vec![
            (
                "c000000000000000000000000000000000000000".into(),
                "c100000000000000000000000000000000000000".into(),
                "07".into()
            ),
            (
                "c100000000000000000000000000000000000000".into(),
                "c200000000000000000000000000000000000000".into(),
                "07".into()
            ),
        ],
        "{logs:?}"
    );
    // Transfer logs stay out of the bloom.
    assert!(block["logsBloom"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("0x")
        .chars()
        .all(|c| c == '0'));
}

/// The transfer logs among `logs` as (from, to, value) in hex without `0x` (values under 256).
fn transfers(logs: &[Value]) -> Vec<(String, String, String)> {
    logs.iter()
        .map(|l| {
            assert_eq!(l["address"], "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee");
            (
                l["topics"][1].as_str().unwrap_or_default()[26..].to_string(),
                l["topics"][2].as_str().unwrap_or_default()[26..].to_string(),
                l["data"].as_str().unwrap_or_default()[64..].to_string(),
            )
        })
        .collect()
}

/// A SELFDESTRUCT pays the contract's whole balance to its beneficiary, which geth reports also
/// when that is the contract itself (after Cancun an existing contract then keeps its balance);
/// one inside a frame that reverts is not reported.
#[test]
fn trace_transfers_self_destructs() {
    let sim = Simulate::new(context(RpcLimits::default()));
    // 0xd1: CALL(gas, 0xd5, 0, 0,0,0,0); POP; CALL(gas, 0xd2, 1, 0,0,0,0); POP;
    //       SELFDESTRUCT(ADDRESS)
    let d1 = concat!(
        "0x",
        "6000600060006000",
        "6000",
        "73d500000000000000000000000000000000000000",
        "5af150",
        "6000600060006000",
        "6001",
        "73d200000000000000000000000000000000000000",
        "5af150",
        "30ff"
    );
    // 0xd5: CALL(gas, 0xd6, 0, 0,0,0,0); POP; REVERT(0, 0)
    let d5 = concat!(
        "0x",
        "6000600060006000",
        "6000",
        "73d600000000000000000000000000000000000000",
        "5af150",
        "60006000fd"
    );
    // 0xd6: SELFDESTRUCT(0xd7)
    let d6 = "0x73d700000000000000000000000000000000000000ff";
    let payload = json!({"traceTransfers": true, "blockStateCalls": [{
        "stateOverrides": {
            "0xc000000000000000000000000000000000000000": {"balance": "0x100"},
            "0xd100000000000000000000000000000000000000": {"code": d1, "balance": "0x10"},
            "0xd500000000000000000000000000000000000000": {"code": d5},
            "0xd600000000000000000000000000000000000000": {"code": d6, "balance": "0x5"}
        },
        "calls": [{"from": "0xc000000000000000000000000000000000000000", "to": "0xd100000000000000000000000000000000000000", "value": "0x7"}]
    }]});
    let resp = answer(&sim, &request(payload));
    let block = &ok_blocks(&resp)[0];
    assert_eq!(block["calls"][0]["status"], "0x1", "{block}");
    let logs = block["calls"][0]["logs"].as_array().expect("logs");
    let d1 = "d100000000000000000000000000000000000000";
    assert_eq!(
        transfers(logs),
        vec![
            (
                "c000000000000000000000000000000000000000".into(),
                d1.into(),
                "07".into()
            ),
            (
                d1.into(),
                "d200000000000000000000000000000000000000".into(),
                "01".into()
            ),
            (d1.into(), d1.into(), "16".into()),
        ],
        "{logs:?}"
    );
}

/// An account emptied by an override alone stays in the state (with its storage); EIP-161
/// removes it only once a transaction touches it, as geth does. So touching the emptied
/// contract in a later block changes the state root, while touching an address that never
/// existed does not add anything: the two requests below agree on block 1 and differ on block 2.
#[test]
fn override_emptied_account_stays_until_a_transaction_touches_it() {
    let sim = Simulate::new(context(RpcLimits::default()));
    // A contract with storage on the execution-apis chain (slot 0 = 0x38, balance 0x76).
    let contract = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";
    let never_existed = "0x00000000000000000000000000000000000d0e5d";
    let roots = |touch: &str| -> Vec<String> {
        let payload = json!({"blockStateCalls": [
            {"stateOverrides": {contract: {"balance": "0x0", "nonce": "0x0", "code": "0x"}}},
            {"calls": [{"from": "0xc000000000000000000000000000000000000000", "to": touch}]}
        ]});
        let resp = answer(&sim, &request(payload));
        ok_blocks(&resp)
            .iter()
            .map(|b| b["stateRoot"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let touched = roots(contract);
    let elsewhere = roots(never_existed);
    assert_eq!(touched[0], elsewhere[0], "block 1 is the same in both");
    assert_ne!(
        touched[1], elsewhere[1],
        "touching the emptied contract removes it; before that it was still in the state"
    );
}

/// Overrides are the state before the block's first call, not rules that hold for the block:
/// a contract created later at an overridden (empty) address keeps its own code, and code
/// put on a precompile's address without moving the precompile runs instead of it.
#[test]
fn overrides_are_pre_state_that_calls_can_replace() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let sender: alloy_primitives::Address = "0xc000000000000000000000000000000000000123"
        .parse()
        .expect("an address");
    // Where the sender's first creation lands; the override leaves it an existing empty account.
    let created = sender.create(0);
    // Init code returning the runtime 0x602a60005260206000f3 (returns the word 42).
    let init = "0x69602a60005260206000f3600052600a6016f3";
    let forty_two = format!("0x{:064x}", 42);
    let payload = json!({"blockStateCalls": [{
        "stateOverrides": {
            created.to_string(): {"code": "0x"},
            "0x0000000000000000000000000000000000000004": {"code": "0x602a60005260206000f3"}
        },
        "calls": [
            {"from": sender, "input": init},
            {"from": sender, "to": created},
            {"from": sender, "to": "0x0000000000000000000000000000000000000004", "input": "0x1234"}
        ]
    }]});
    let resp = answer(&sim, &request(payload));
    let calls = &ok_blocks(&resp)[0]["calls"];
    assert_eq!(calls[0]["status"], "0x1", "the creation succeeds: {resp}");
    assert_eq!(calls[0]["returnData"], "0x602a60005260206000f3");
    assert_eq!(
        calls[1]["returnData"],
        forty_two.as_str(),
        "the created code runs"
    );
    // The identity precompile would have echoed 0x1234.
    assert_eq!(
        calls[2]["returnData"],
        forty_two.as_str(),
        "the override runs"
    );
}

/// A fee too large for the EVM's integers is a cost the sender cannot pay: geth's
/// insufficient-funds error (-38014), with or without validation, not an internal error.
#[test]
fn an_unpayable_huge_fee_is_insufficient_funds() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let from = "0xc000000000000000000000000000000000000000";
    let huge = "0xffffffffffffffffffffffffffffffff";
    for (validation, fees) in [
        (false, json!({"gasPrice": huge})),
        (
            true,
            json!({"maxFeePerGas": huge, "maxPriorityFeePerGas": "0x1"}),
        ),
    ] {
        let mut call = json!({"from": from, "to": from});
        call.as_object_mut()
            .expect("an object")
            .extend(fees.as_object().expect("an object").clone());
        let payload = json!({"validation": validation, "blockStateCalls": [{"calls": [call]}]});
        let resp = answer(&sim, &request(payload));
        assert_eq!(resp["error"]["code"], -38014, "{resp}");
        let message = resp["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("have 0 want"), "{message}");
    }
}

/// A blob fee cap under the block's blob base fee is refused even without validation, as geth
/// refuses it (only a cap of zero skips the check), with geth's -32603: the spec has no code for
/// it. Under the cap, the same call runs.
#[test]
fn a_blob_fee_cap_under_the_blob_base_fee_is_geths_internal_error() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let from = "0xc000000000000000000000000000000000000000";
    let versioned = "0x010657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014";
    let payload = |blob_base_fee: &str| {
        json!({"blockStateCalls": [{
            "blockOverrides": {"blobBaseFee": blob_base_fee},
            "stateOverrides": {from: {"balance": "0x3b9aca00"}},
            "calls": [{"from": from, "to": from, "blobVersionedHashes": [versioned],
                "maxFeePerBlobGas": "0xa", "maxFeePerGas": "0x10"}],
        }]})
    };
    let resp = answer(&sim, &request(payload("0xb")));
    assert_eq!(resp["error"]["code"], -32603, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("max fee per blob gas less than block blob gas fee"),
        "{message}"
    );
    let resp = answer(&sim, &request(payload("0xa")));
    assert_eq!(ok_blocks(&resp)[0]["calls"][0]["status"], "0x1", "{resp}");
}

/// Blob calls the EVM refuses before running them, with no code of the spec: geth's -32603 in
/// its words. A hash of another version than KZG's, more blobs than a transaction may carry
/// (six from Osaka on, the chain's fork at its head).
#[test]
fn malformed_blob_calls_are_geths_internal_errors() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let from = "0xc000000000000000000000000000000000000000";
    let kzg = "0x010657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014";
    let other = "0x020657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014";
    for (call, words) in [
        (
            json!({"from": from, "to": from, "blobVersionedHashes": [kzg, other]}),
            "blob 1 has invalid hash version",
        ),
        (
            json!({"from": from, "to": from, "blobVersionedHashes": vec![kzg; 7]}),
            "blob transaction has too many blobs: have 7, max 6",
        ),
    ] {
        let payload = json!({"blockStateCalls": [{"calls": [call]}]});
        let resp = answer(&sim, &request(payload));
        assert_eq!(resp["error"]["code"], -32603, "{resp}");
        let message = resp["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{message}");
    }
}

/// A call that halts on an instruction gets geth's message naming it (the per-call `error` is
/// compared word for word, unlike a request's error).
#[test]
fn halts_name_the_instruction_as_geth_does() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let contract = "0xc200000000000000000000000000000000000000";
    for (code, message) in [
        ("0x0c", "invalid opcode: opcode 0xc not defined"),
        ("0x600001", "stack underflow (1 <=> 2)"),
        ("0xfe", "invalid opcode: INVALID"),
    ] {
        let payload = json!({"blockStateCalls": [{
            "stateOverrides": {contract: {"code": code}},
            "calls": [{"to": contract, "gas": "0x100000"}],
        }]});
        let resp = answer(&sim, &request(payload));
        let error = &ok_blocks(&resp)[0]["calls"][0]["error"];
        assert_eq!(error["code"], -32015, "{code}: {resp}");
        assert_eq!(error["message"], message, "{code}");
    }
    // A precompile called directly with bad input: its own reason, as geth gives it.
    let payload = json!({"blockStateCalls": [{"calls": [
        {"to": "0x0000000000000000000000000000000000000009", "input": "0x00", "gas": "0x100000"},
    ]}]});
    let resp = answer(&sim, &request(payload));
    let error = &ok_blocks(&resp)[0]["calls"][0]["error"];
    assert_eq!(error["message"], "invalid input length", "{resp}");
    // Before Shanghai (block 1 of the chain), PUSH0 is an opcode geth names but does not run.
    let payload = json!({"blockStateCalls": [{
        "stateOverrides": {contract: {"code": "0x5f"}},
        "calls": [{"to": contract, "gas": "0x100000"}],
    }]});
    let resp = answer(
        &sim,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [payload, "0x1"]}),
    );
    let error = &ok_blocks(&resp)[0]["calls"][0]["error"];
    assert_eq!(error["message"], "invalid opcode: PUSH0", "{resp}");
}

/// Where a call fails more than one check, the one geth reports: it reads the call's fields
/// (fee styles, chain id) before checking the nonce, and buys the gas (balance) before checking
/// the intrinsic gas, which it checks before the init code's size; revm's own order differs.
#[test]
fn a_call_failing_several_checks_gets_geths_first_refusal() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let funded = "0xc000000000000000000000000000000000000000";
    let unfunded = "0xc100000000000000000000000000000000000000";
    let init_code = format!("0x{}", "00".repeat(49_153));
    for (call, validation, code, words) in [
        (
            json!({"from": funded, "to": funded, "gasPrice": "0x1", "maxFeePerGas": "0x1", "nonce": "0x5"}),
            true,
            -32000,
            "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified".to_string(),
        ),
        (
            json!({"from": funded, "to": funded, "chainId": "0x1", "nonce": "0x5"}),
            true,
            -32000,
            "chainId does not match node's (have=1".to_string(),
        ),
        (
            json!({"from": unfunded, "to": funded, "value": "0x1", "gas": "0x100"}),
            false,
            -38014,
            format!("insufficient funds for gas * price + value: address {unfunded} have 0 want 1"),
        ),
        (
            json!({"from": unfunded, "input": init_code, "value": "0x1"}),
            false,
            -38014,
            "insufficient funds".to_string(),
        ),
        (
            json!({"from": funded, "input": init_code, "gas": "0x100"}),
            false,
            -38013,
            "intrinsic gas too low".to_string(),
        ),
        (
            json!({"from": funded, "input": init_code}),
            false,
            -38025,
            "max initcode size exceeded: code size 49153 limit 49152".to_string(),
        ),
        (
            json!({"from": funded, "to": funded, "maxFeePerGas": "0x1", "maxPriorityFeePerGas": "0x2"}),
            false,
            -32602,
            "maxPriorityFeePerGas: 2, maxFeePerGas: 1".to_string(),
        ),
        (
            json!({"from": funded, "to": funded, "blobVersionedHashes": []}),
            false,
            -32603,
            "err: blob transaction missing blob hashes".to_string(),
        ),
    ] {
        let payload = json!({"blockStateCalls": [{"calls": [call]}], "validation": validation});
        let resp = answer(&sim, &request(payload));
        assert_eq!(resp["error"]["code"], code, "{resp}");
        let message = resp["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&words), "{message}");
        assert!(!message.starts_with("internal error"), "{message}");
    }
}

/// On a block before Cancun (the chain's genesis) a blob call is a transaction type the fork
/// does not have: geth's -32603 with its words, as eth_call's -32000 has them.
#[test]
fn a_blob_call_before_cancun_is_a_type_not_supported() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let from = "0xc000000000000000000000000000000000000000";
    let kzg = "0x010657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014";
    let payload = json!({"blockStateCalls": [{"calls": [
        {"from": from, "to": from, "blobVersionedHashes": [kzg], "maxFeePerBlobGas": "0x1"}
    ]}]});
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1",
        "params": [payload, "earliest"]});
    let resp = answer(&sim, &request);
    assert_eq!(resp["error"]["code"], -32603, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("transaction type not supported: blob tx (sender 0xC000"),
        "{message}"
    );
}

/// Without validation a blob call that names no blob fee cap is not held to the blob base fee
/// (geth skips the check for a zero cap) but still pays the blob fee: it runs when the sender
/// can pay it, and is short of funds (-38014) when it cannot. With validation it is refused.
#[test]
fn a_blob_call_without_a_fee_cap_runs_without_validation() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let from = "0xc000000000000000000000000000000000000000";
    let kzg = "0x010657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014";
    let call = json!({"from": from, "to": from, "blobVersionedHashes": [kzg]});
    let payload = |validation: bool, balance: &str| {
        json!({"validation": validation, "blockStateCalls": [{
            "blockOverrides": {"blobBaseFee": "0x2"},
            "stateOverrides": {from: {"balance": balance}},
            "calls": [call],
        }]})
    };
    let resp = answer(&sim, &request(payload(false, "0x40000")));
    let block = &ok_blocks(&resp)[0];
    assert_eq!(block["calls"][0]["status"], "0x1", "{resp}");
    assert_eq!(block["blobGasUsed"], "0x20000");
    let resp = answer(&sim, &request(payload(false, "0x3ffff")));
    assert_eq!(resp["error"]["code"], -38014, "one wei short: {resp}");
    let resp = answer(&sim, &request(payload(true, "0x40000")));
    assert!(resp["error"].is_object(), "{resp}");
}

/// Answers one request through the module's RPC methods, as the server calls them (the
/// first run on the calling thread, within `evm_inline_budget`, then on the blocking pool).
fn answer_rpc(limits: RpcLimits, request: &Value) -> Value {
    let methods = simnode_simulate::rpc_module(context(limits));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (resp, _rx) = runtime
        .block_on(methods.raw_json_request(&request.to_string(), 1))
        .expect("raw request");
    serde_json::from_str(resp.get()).expect("response json")
}

#[test]
fn a_run_past_the_inline_budget_restarts_on_the_pool_with_the_same_answer() {
    // 2M gas of a tight loop takes well over 1 µs in any build: the first run stops at the
    // inline budget and the second finishes, out of gas, exactly as a pool-only run does.
    let payload = request(endless_loop_payload("0x1e8480"));
    let inline_first = RpcLimits {
        evm_inline_budget: Duration::from_micros(1),
        ..RpcLimits::default()
    };
    let pool_only = RpcLimits {
        evm_inline_budget: Duration::ZERO,
        ..RpcLimits::default()
    };
    let restarted = answer_rpc(inline_first, &payload);
    let blocks = ok_blocks(&restarted);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[1]["calls"][0]["error"]["message"], "out of gas");
    assert_eq!(restarted, answer_rpc(pool_only, &payload));
    // A short request answered inline is the same as one answered on the pool.
    let transfer = request(json!({"blockStateCalls": [{"calls": [
        {"from": "0xc000000000000000000000000000000000000000", "to": "0xc100000000000000000000000000000000000000"}]}]}));
    assert_eq!(
        answer_rpc(RpcLimits::default(), &transfer),
        answer_rpc(
            RpcLimits {
                evm_inline_budget: Duration::ZERO,
                ..RpcLimits::default()
            },
            &transfer
        )
    );
}

#[test]
fn the_deadline_still_holds_after_a_restart_on_the_pool() {
    // A billion gas of loop: far longer than the deadline in any build (50M gas of this loop
    // fits in 50 ms in a release build).
    let limits = RpcLimits {
        evm_timeout: Duration::from_millis(50),
        evm_inline_budget: Duration::from_millis(5),
        gas_cap: 1_000_000_000,
        ..RpcLimits::default()
    };
    let mut payload = endless_loop_payload("0x3b9aca00");
    payload["blockStateCalls"][0]["blockOverrides"] = json!({"gasLimit": "0x3b9aca00"});
    let started = Instant::now();
    let resp = answer_rpc(limits, &request(payload));
    assert_eq!(resp["error"]["code"], -32016, "{resp}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

// The system calls of a first simulated block are remembered per base block
// (modules/simulate/src/system_calls.rs); these requests come after one that recorded them.

const EMPTY_REQUESTS_HASH: &str =
    "0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const HISTORY_CONTRACT: &str = "0x0000f90827f1c53a10cb7a02335b175320002935";

fn remember_system_calls(sim: &Simulate) -> Value {
    let resp = answer(sim, &request(json!({"blockStateCalls": [{}]})));
    let block = ok_blocks(&resp)[0].clone();
    assert_eq!(block["requestsHash"], EMPTY_REQUESTS_HASH, "{block}");
    block
}

#[test]
fn a_withdrawal_request_queued_by_a_call_is_dequeued_by_the_block() {
    let sim = Simulate::new(context(RpcLimits::default()));
    remember_system_calls(&sim);
    // 48-byte validator key and 8-byte amount, with more than the EIP-7002 fee.
    let data = format!("0x{}{}", "ab".repeat(48), "00".repeat(8));
    let call = json!({"from": "0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f",
        "to": "0x00000961ef480eb55e80d19ad83579a64c007002", "value": "0x3b9aca00", "input": data});
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [{"calls": [call]}]})),
    );
    let block = &ok_blocks(&resp)[0];
    assert_eq!(block["calls"][0]["status"], "0x1", "{block}");
    assert_ne!(block["requestsHash"], EMPTY_REQUESTS_HASH, "{block}");
}

#[test]
fn an_overridden_system_contract_runs_its_own_code() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let recorded = remember_system_calls(&sim);
    // Called by the system address it stores its input (the parent hash) in slot 0; called by
    // anyone else it returns slot 0.
    let code = "0x3373fffffffffffffffffffffffffffffffffffffffe14602257\
                5f545f5260205ff35b5f355f5500";
    let payload = json!({"blockStateCalls": [{
        "stateOverrides": {HISTORY_CONTRACT: {"code": code}},
        "calls": [{"from": "0xc000000000000000000000000000000000000000", "to": HISTORY_CONTRACT}]
    }]});
    let resp = answer(&sim, &request(payload));
    let block = &ok_blocks(&resp)[0];
    assert_eq!(
        block["calls"][0]["returnData"], block["parentHash"],
        "{block}"
    );
    assert_ne!(block["stateRoot"], recorded["stateRoot"]);
}

#[test]
fn a_precompile_moved_onto_a_system_contract_answers_its_call() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let recorded = remember_system_calls(&sim);
    // The EIP-2935 call then reaches the identity precompile and stores nothing.
    let payload = json!({"blockStateCalls": [{
        "stateOverrides": {"0x0000000000000000000000000000000000000004":
            {"movePrecompileToAddress": HISTORY_CONTRACT}}
    }]});
    let resp = answer(&sim, &request(payload));
    let block = &ok_blocks(&resp)[0];
    assert_ne!(block["stateRoot"], recorded["stateRoot"], "{block}");
}

/// `payload` with a precompile moved in its first block, which changes nothing else here (no
/// call reaches either address) but keeps the request from the recorded system-call results.
fn without_recorded_system_calls(payload: &Value) -> Value {
    let mut payload = payload.clone();
    payload["blockStateCalls"][0]["stateOverrides"]["0x000000000000000000000000000000000000000a"] =
        json!({"movePrecompileToAddress": "0x00000000000000000000000000000000000a000a"});
    payload
}

#[test]
fn recorded_system_calls_answer_later_blocks_only_where_the_state_agrees() {
    let sim = Simulate::new(context(RpcLimits::default()));
    // Twenty withdrawal requests in the first block: sixteen leave the EIP-7002 queue with that
    // block and four with the second, so the second block's dequeue call reads other slots
    // than in a request whose first block queues nothing. Same block environments in both
    // (the base fee would otherwise follow the first block's gas).
    let sender = "0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f";
    let fee = json!({"baseFeePerGas": "0x7"});
    let request_call = |i: usize| {
        json!({"from": sender, "to": "0x00000961ef480eb55e80d19ad83579a64c007002",
            "value": "0x3b9aca00", "input": format!("0x{:096x}{}", i + 1, "00".repeat(8))})
    };
    let queued = json!({"blockStateCalls": [
        {"blockOverrides": fee, "calls": (0..20).map(request_call).collect::<Vec<_>>(),
         "stateOverrides": {sender: {"balance": "0xde0b6b3a7640000"}}},
        {"blockOverrides": fee},
        {"blockOverrides": fee}
    ]});
    let empty = json!({"blockStateCalls": [
        {"blockOverrides": fee}, {"blockOverrides": fee}, {"blockOverrides": fee}
    ]});
    let mut second_blocks = Vec::new();
    for payload in [&queued, &empty, &queued, &empty] {
        let recorded = answer(&sim, &request(payload.clone()));
        let run = answer(&sim, &request(without_recorded_system_calls(payload)));
        assert_eq!(
            recorded, run,
            "answers with and without recorded system calls differ"
        );
        second_blocks.push(ok_blocks(&recorded)[1].clone());
    }
    // The four left over leave with the second block of the queueing request only.
    assert_ne!(second_blocks[0]["requestsHash"], EMPTY_REQUESTS_HASH);
    assert_eq!(second_blocks[1]["requestsHash"], EMPTY_REQUESTS_HASH);
    assert_ne!(second_blocks[0]["stateRoot"], second_blocks[1]["stateRoot"]);
}

/// Every way a simulated block writes state (calls, a creation destroyed in its own
/// transaction, overrides that set fields or none, storage replaced and patched, an account
/// put back as the base has it, withdrawals, a wrapping nonce) moves that block's state root
/// on from the one before. Debug builds also check, block by block, that the changes of the
/// accounts written since the block before add up to the whole simulation's changes: the
/// carried roots rely on that.
#[test]
fn every_kind_of_write_reaches_the_next_state_root() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let sender = "0xc000000000000000000000000000000000000123";
    let never_existed = "0x00000000000000000000000000000000000d0e5d";
    let payee = "0x00000000000000000000000000000000000da7ee";
    let destructible = "0x0000000000000000000000000000000000000c0d";
    // A contract of the chain with storage (slot 0 = 0x38) and balance 0x76.
    let contract = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";
    let slot0 = format!("0x{:064x}", 0);
    let word = |v: u64| format!("0x{v:064x}");
    let payload = json!({"blockStateCalls": [
        {
            "stateOverrides": {
                sender: {"balance": "0xde0b6b3a7640000"},
                contract: {"balance": "0x1"}
            },
            "calls": [
                {"from": sender, "to": never_existed},
                {"from": sender, "to": payee, "value": "0x1"},
                // Init code ORIGIN SELFDESTRUCT: created and destroyed in one transaction.
                {"from": sender, "input": "0x32ff", "value": "0x2"}
            ]
        },
        {
            "stateOverrides": {
                never_existed: {},
                destructible: {"code": "0x32ff", "balance": "0x5", "state": {slot0.clone(): word(1)}}
            },
            "calls": [{"from": sender, "to": destructible}]
        },
        {
            "blockOverrides": {"withdrawals": [
                {"index": "0x0", "validatorIndex": "0x1", "address": payee, "amount": "0x1"}
            ]},
            "stateOverrides": {
                contract: {"balance": "0x76"},
                destructible: {"stateDiff": {slot0.clone(): word(2)}}
            }
        },
        {
            "stateOverrides": {sender: {"nonce": "0xffffffffffffffff"}},
            "calls": [{"from": sender, "to": payee, "value": "0x1"}]
        }
    ]});
    let resp = answer(&sim, &request(payload));
    let blocks = ok_blocks(&resp);
    assert_eq!(blocks.len(), 4, "{resp}");
    for (i, block) in blocks.iter().enumerate() {
        for call in block["calls"].as_array().into_iter().flatten() {
            assert_eq!(call["status"], "0x1", "block {i}: {call}");
        }
    }
    let roots: Vec<&str> = blocks
        .iter()
        .map(|b| b["stateRoot"].as_str().unwrap_or_default())
        .collect();
    for pair in roots.windows(2) {
        assert_ne!(
            pair[0], pair[1],
            "a block with writes keeps the root: {roots:?}"
        );
    }
}

/// A block's transaction root, receipt root and logs bloom are those of its transactions and
/// call results, also in blocks large enough to have those roots computed on another core
/// while this one computes the state root (48 calls and more, in a run on the EVM threads).
#[test]
fn large_blocks_roots_match_their_transactions_and_results() {
    use alloy::{
        consensus::{
            proofs::{calculate_receipt_root, calculate_transaction_root},
            Eip658Value, Receipt, ReceiptEnvelope, TxEnvelope,
        },
        primitives::{Bloom, Log},
    };

    // No inline budget: the run goes to the EVM threads, where blocks may hand their roots over.
    let sim = Simulate::new(context(RpcLimits {
        evm_inline_budget: Duration::ZERO,
        ..RpcLimits::default()
    }));
    let sender = "0xc0ffee0000000000000000000000000000000000";
    // LOG1(offset 0, size 0, topic CALLER); STOP
    let logger = "0xc0de000000000000000000000000000000000000";
    let calls = |first: u32| -> Vec<Value> {
        (first..first + 60)
            .map(|i| {
                if i % 2 == 0 {
                    json!({"from": sender, "to": format!("0x{:040x}", 0x5000_0000u64 + u64::from(i)), "value": "0x1"})
                } else {
                    json!({"from": sender, "to": logger})
                }
            })
            .collect()
    };
    let payload = json!({"returnFullTransactions": true, "blockStateCalls": [
        {"stateOverrides": {sender: {"balance": "0xffffffff"}, logger: {"code": "0x3360006000a100"}},
         "calls": calls(0)},
        {"calls": calls(60)}
    ]});
    let payload: SimulatePayload = serde_json::from_value(payload).expect("a payload");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let blocks = runtime
        .block_on(sim.simulate(payload, BlockParam::default()))
        .expect("the simulation");
    assert_eq!(blocks.len(), 2);
    for block in blocks {
        let block: Value = serde_json::from_str(block.get()).expect("block JSON");
        let txs: Vec<TxEnvelope> = block["transactions"]
            .as_array()
            .expect("full transactions")
            .iter()
            .map(|tx| {
                serde_json::from_value::<alloy::rpc::types::Transaction>(tx.clone())
                    .expect("a transaction object")
                    .into_inner()
            })
            .collect();
        let results = block["calls"].as_array().expect("call results");
        assert_eq!((txs.len(), results.len()), (60, 60));
        let mut cumulative = 0u64;
        let receipts: Vec<ReceiptEnvelope> = txs
            .iter()
            .zip(results)
            .map(|(tx, result)| {
                let gas = result["gasUsed"].as_str().expect("gasUsed");
                cumulative += u64::from_str_radix(gas.trim_start_matches("0x"), 16).unwrap();
                let logs: Vec<Log> =
                    serde_json::from_value::<Vec<alloy::rpc::types::Log>>(result["logs"].clone())
                        .expect("logs")
                        .into_iter()
                        .map(|log| log.inner)
                        .collect();
                let receipt = Receipt {
                    status: Eip658Value::Eip658(result["status"] == "0x1"),
                    cumulative_gas_used: cumulative,
                    logs,
                };
                ReceiptEnvelope::from_typed(tx.tx_type(), receipt.with_bloom())
            })
            .collect();
        let mut bloom = Bloom::ZERO;
        for r in &receipts {
            bloom |= *r.logs_bloom();
        }
        assert_ne!(bloom, Bloom::ZERO, "the logger's logs are in the bloom");
        let field = |name: &str| block[name].as_str().expect(name).to_string();
        assert_eq!(
            field("transactionsRoot"),
            calculate_transaction_root(&txs).to_string()
        );
        assert_eq!(
            field("receiptsRoot"),
            calculate_receipt_root(&receipts).to_string()
        );
        assert_eq!(field("logsBloom"), bloom.to_string());
    }
}

/// The calls that redo a stored block's transactions: same senders, nonces, gas, fees and
/// access lists, with the block's own header fields as overrides. A legacy transaction names
/// its gas price (so it stays legacy); typed ones name their fee caps.
fn replay_payload(number: u64) -> (Value, simnode_api::StoredBlock) {
    use alloy::consensus::Transaction;
    use simnode_api::ChainView;
    let (store, _) = imported_chain();
    let block = ChainView::block(&*store, number)
        .expect("read")
        .expect("stored block");
    let calls: Vec<Value> = block
        .body
        .transactions
        .iter()
        .zip(&block.senders)
        .map(|(tx, from)| {
            let mut call = json!({
                "from": from,
                "to": tx.to(),
                "input": tx.input(),
                "value": tx.value(),
                "gas": format!("{:#x}", tx.gas_limit()),
                "nonce": format!("{:#x}", tx.nonce()),
            });
            if tx.is_legacy() {
                call["gasPrice"] = json!(format!("{:#x}", tx.max_fee_per_gas()));
            } else {
                call["maxFeePerGas"] = json!(format!("{:#x}", tx.max_fee_per_gas()));
                call["maxPriorityFeePerGas"] = json!(format!(
                    "{:#x}",
                    tx.max_priority_fee_per_gas().unwrap_or_default()
                ));
                call["accessList"] = json!(tx.access_list().cloned().unwrap_or_default());
            }
            call
        })
        .collect();
    let header = &block.header;
    let mut overrides = json!({
        "time": format!("{:#x}", header.timestamp),
        "gasLimit": format!("{:#x}", header.gas_limit),
        "feeRecipient": header.beneficiary,
        "prevRandao": header.mix_hash,
    });
    if let Some(fee) = header.base_fee_per_gas {
        overrides["baseFeePerGas"] = json!(format!("{fee:#x}"));
    }
    if let Some(withdrawals) = &block.body.withdrawals {
        overrides["withdrawals"] = json!(withdrawals);
    }
    if let Some(root) = header.parent_beacon_block_root {
        overrides["beaconRoot"] = json!(root);
    }
    let payload = json!({
        "blockStateCalls": [{"blockOverrides": overrides, "calls": calls}],
        "validation": true,
    });
    (
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [payload, format!("{:#x}", number - 1)]}),
        block.as_ref().clone(),
    )
}

/// Redoing a stored block of the chain from its parent gives that block's state and receipt
/// roots, across the old forks: block 5 comes before EIP-161 (a contract created empty stays
/// in the state) and before Byzantium (receipts hold the state root after each transaction),
/// block 8 after EIP-161 and still before Byzantium, and block 36 is the first after the merge,
/// simulated on a proof-of-work parent (no difficulty, so no block reward). The chain's blocks
/// with uncles are left out: a simulated block has none, so their rewards differ.
#[test]
fn replayed_blocks_reproduce_their_state_and_receipt_roots() {
    let sim = Simulate::new(context(RpcLimits::default()));
    for number in [5u64, 8, 36, 40] {
        let (request, stored) = replay_payload(number);
        assert!(
            !stored.body.transactions.is_empty() && stored.body.ommers.is_empty(),
            "block {number} should hold transactions and no uncles"
        );
        let response = answer(&sim, &request);
        let block = &ok_blocks(&response)[0];
        let header = &stored.header;
        assert_eq!(
            block["stateRoot"],
            json!(header.state_root),
            "block {number}"
        );
        assert_eq!(
            block["receiptsRoot"],
            json!(header.receipts_root),
            "block {number}"
        );
        assert_eq!(
            block["logsBloom"],
            json!(header.logs_bloom),
            "block {number}"
        );
        assert_eq!(
            block["difficulty"],
            json!(header.difficulty),
            "block {number}"
        );
        assert_eq!(
            block["gasUsed"],
            json!(format!("{:#x}", header.gas_used)),
            "block {number}"
        );
    }
}

/// A call that names a gas price is a legacy transaction in the result (geth's rule), hashed
/// unsigned with v, r and s zero and no EIP-155 chain id; so is every call before London. The hash
/// below was computed outside simnode (viem's `keccak256(toRlp([...]))` of the nine fields).
#[test]
fn a_call_with_a_gas_price_is_a_legacy_transaction() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let from = "0x00000000000000000000000000000000000a11ce";
    let response = answer(
        &sim,
        &request(json!({
            "blockStateCalls": [{
                "stateOverrides": {from: {"balance": "0xde0b6b3a7640000"}},
                "calls": [{
                    "from": from,
                    "to": "0xc100000000000000000000000000000000000000",
                    "gas": "0x5208",
                    "gasPrice": "0x77359400",
                    "nonce": "0x0",
                    "value": "0x1",
                }],
            }],
            "validation": true,
            "returnFullTransactions": true,
        })),
    );
    let block = &ok_blocks(&response)[0];
    let tx = &block["transactions"][0];
    assert_eq!(tx["type"], "0x0", "{tx}");
    assert_eq!(tx["gasPrice"], "0x77359400", "{tx}");
    assert_eq!(
        (&tx["v"], &tx["r"], &tx["s"]),
        (&json!("0x0"), &json!("0x0"), &json!("0x0"))
    );
    // geth's object names the chain id it derives from v zero (its own simulate tests show it).
    assert_eq!(tx["chainId"], "0x7fffffffffffffee", "{tx}");
    assert_eq!(
        tx["hash"], "0x91541a7fdb018a39eacb52672bf8d38deaf9967a1df3b03413071916268148a6",
        "{tx}"
    );
    assert_eq!(block["calls"][0]["status"], "0x1");

    // Before London (block 0x10 on this chain) a call without fee fields is legacy too.
    let response = answer(
        &sim,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [
            {"blockStateCalls": [{"calls": [{"to": "0xc100000000000000000000000000000000000000"}]}],
             "returnFullTransactions": true},
            "0x10"]}),
    );
    let tx = &ok_blocks(&response)[0]["transactions"][0];
    assert_eq!(
        (&tx["type"], &tx["gasPrice"]),
        (&json!("0x0"), &json!("0x0")),
        "{tx}"
    );

    // A blob or set-code call cannot be legacy: a gas price with their fields is refused.
    let response = answer(
        &sim,
        &request(json!({"blockStateCalls": [{"calls": [{
            "to": "0xc100000000000000000000000000000000000000",
            "gasPrice": "0x1",
            "authorizationList": [],
        }]}]})),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
}

/// A system contract overridden with code that reverts fails the block: the request's doing,
/// answered with -32000 as geth does, not as an internal error of the node.
#[test]
fn a_reverting_system_contract_is_the_requests_error() {
    let sim = Simulate::new(context(RpcLimits::default()));
    for contract in [
        // EIP-7002 withdrawal requests, EIP-7251 consolidation requests (after the calls).
        "0x00000961Ef480Eb55e80D19ad83579A64c007002",
        "0x0000BBdDc7CE488642fb579F8B00f3a590007251",
    ] {
        let response = answer(
            &sim,
            &request(json!({"blockStateCalls": [{
                "stateOverrides": {contract: {"code": "0x60006000fd"}},
            }]})),
        );
        assert_eq!(response["error"]["code"], -32000, "{contract}: {response}");
    }
}

/// A simulated block has its own fork's precompiles, as geth picks them since geth#33363: on
/// block 44 (Cancun) the next block is in Prague, where 0x0b is BLS12-381 G1ADD, which fails
/// on empty input and can be moved; in Cancun it was an empty account.
#[test]
fn a_simulated_block_has_its_own_forks_precompiles() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let on_44 = |payload: Value| {
        answer(
            &sim,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [payload, "0x2c"]}),
        )
    };
    let bls = "0x000000000000000000000000000000000000000b";
    let resp = on_44(json!({"blockStateCalls": [{"calls": [
        {"from": "0xc000000000000000000000000000000000000000", "to": bls, "gas": "0x10000"}
    ]}]}));
    let call = &ok_blocks(&resp)[0]["calls"][0];
    assert_eq!(call["status"], "0x0", "{call}");
    assert_eq!(call["gasUsed"], "0x10000", "{call}");
    let resp = on_44(json!({"blockStateCalls": [{
        "stateOverrides": {bls: {"movePrecompileToAddress": "0x0000000000000000000000000000000000123456"}},
        "calls": []
    }]}));
    assert!(resp["result"].is_array(), "{resp}");
}

/// Withdrawals in a block before Shanghai are refused, as geth's consensus engines refuse to
/// assemble the block (they were dropped without a word); an empty list is no withdrawal.
#[test]
fn withdrawals_before_shanghai_are_refused() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let on = |base: &str, withdrawals: Value| {
        answer(
            &sim,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [
                {"blockStateCalls": [{"blockOverrides": {"withdrawals": withdrawals}}]}, base]}),
        )
    };
    let one = json!([{"index": "0x0", "validatorIndex": "0x1",
        "address": "0xc100000000000000000000000000000000000000", "amount": "0x10"}]);
    // Block 37 is after the merge and before Shanghai (time 390); block 11 is proof of work.
    for (base, words) in [
        ("0x24", "withdrawals set before Shanghai activation"),
        ("0xa", "ethash does not support withdrawals"),
    ] {
        let resp = on(base, one.clone());
        assert_eq!(resp["error"]["code"], -32000, "{resp}");
        assert_eq!(resp["error"]["message"], words, "{resp}");
        assert!(on(base, json!([]))["result"].is_array());
    }
}

/// geth's call limits, checked before anything runs: 5,000 calls in a block, 10,000 in all.
#[test]
fn too_many_calls_are_refused_up_front() {
    let sim = Simulate::new(context(RpcLimits::default()));
    let calls = |n: usize| vec![json!({"to": "0xc100000000000000000000000000000000000000"}); n];
    let resp = answer(
        &sim,
        &request(json!({"blockStateCalls": [{"calls": calls(5_001)}]})),
    );
    assert_eq!(resp["error"]["code"], -38026, "{}", resp["error"]);
    assert_eq!(
        resp["error"]["message"],
        "too many calls in block: 5001 > 5000"
    );
    let three = vec![json!({"calls": calls(4_000)}); 3];
    let resp = answer(&sim, &request(json!({"blockStateCalls": three})));
    assert_eq!(resp["error"]["code"], -38026, "{}", resp["error"]);
    assert_eq!(resp["error"]["message"], "too many calls: 12000 > 10000");
}

/// A difficulty override is the block's difficulty and what DIFFICULTY reads before the merge.
#[test]
fn the_difficulty_override_is_the_blocks() {
    let sim = Simulate::new(context(RpcLimits::default()));
    // DIFFICULTY, returned as a word.
    let reader = "0x00000000000000000000000000000000000d1ff1";
    let resp = answer(
        &sim,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [
            {"blockStateCalls": [{
                "blockOverrides": {"difficulty": "0x1234"},
                "stateOverrides": {reader: {"code": "0x4460005260206000f3"}},
                "calls": [{"to": reader}]
            }]}, "0x10"]}),
    );
    let block = &ok_blocks(&resp)[0];
    assert_eq!(block["difficulty"], "0x1234", "{block}");
    assert_eq!(
        block["calls"][0]["returnData"],
        format!("0x{:064x}", 0x1234),
        "{block}"
    );
}
