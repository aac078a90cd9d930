//! trace_callMany against the reth-recorded fixtures in `../shared/conformance/reth-trace/`,
//! served in-process by the trace module over the node's own store with the execution-apis
//! chain imported (`simnode import`), requests sent as JSON-RPC text through the module's
//! methods, answers compared as JSON (errors by code only).
//!
//! Where reth's answer is wrong, the comparison says so and checks our answer instead:
//!
//! - **vmTrace** (`create-and-call-all-types`, `nested-all-types-explicit-gas`,
//!   `transfer-vmtrace` for its `code`): reth's recording comes from an older revm-inspectors
//!   whose vmTrace is not Parity's. It reports `ex.used` as the gas *before* the operation (Parity:
//!   gas left after it), `ex.mem` as `{"off":0,"data":"0x"}` on every operation and the written
//!   range one operation late (Parity: the memory the operation wrote, null when none), `ex.store`
//!   null on SSTORE (Parity: `{key, val}`), no pushed success flag on CALL/CREATE (Parity
//!   reports every pushed item), and `code` "0x" for creations (Parity: the init code that runs).
//!   Our vmTrace is checked by hand against the Parity format in
//!   `modules/trace/tests/call_many.rs`; here the rest of each answer must match reth exactly
//!   and our vmTrace must have the same shape (same ops, pcs, costs and sub-traces).
//! - **Trace error names** (`nested-create2-collision`): for failures without a Parity name reth
//!   prints the Rust enum name (`CreateCollision`); we print "Contract address collision".
//! - **Omitted trace types** (`missing-trace-types`): issue 6 says the trace-type list may be
//!   omitted (no traces); reth requires it (-32602). We follow the issue: the call runs and
//!   its `output` is reported.
//!
//! `TRACE_FIXTURE=<substring>` limits the run to matching files; `SIMNODE_RETH_TRACE_DIR` reads
//! the fixtures from another folder.

use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use serde_json::{json, Value};
use simnode_api::{ModuleContext, RpcLimits};

mod support;

/// The trace module over the execution-apis chain, imported once per test binary.
fn methods() -> jsonrpsee::Methods {
    static DATADIR: OnceLock<PathBuf> = OnceLock::new();
    let datadir = DATADIR.get_or_init(|| {
        support::import_into_process_dir("trace-datadir").unwrap_or_else(|e| panic!("{e}"))
    });
    let args = simnode::cli::ChainArgs {
        chain: support::execution_apis_genesis()
            .to_string_lossy()
            .into_owned(),
        datadir: Some(datadir.clone()),
    };
    let (store, chain) = simnode::node::open_store(&args).expect("opening the store");
    let ctx = ModuleContext {
        spec: Arc::new(chain.spec.clone()),
        chain: store,
        pool: Arc::new(simnode::pool::Pool::default()),
        // Debug builds run the 50M-gas loop of `oog-default-gas` in seconds; the deadline is
        // not what these fixtures check.
        limits: Arc::new(RpcLimits {
            evm_timeout: std::time::Duration::from_secs(60),
            ..RpcLimits::default()
        }),
    };
    simnode_trace::rpc_module(ctx)
}

async fn answer(methods: &jsonrpsee::Methods, request: &str) -> Value {
    let (resp, _rx) = methods
        .raw_json_request(request, 1)
        .await
        .expect("a JSON-RPC request");
    serde_json::from_str(resp.get()).expect("a JSON response")
}

/// The parts of a vmTrace both reth and Parity agree on: each op's pc, name, cost and
/// sub-trace, recursively.
fn vm_shape(vm: &Value) -> Value {
    if vm.is_null() {
        return Value::Null;
    }
    let ops = vm["ops"].as_array().map(|ops| {
        ops.iter()
            .map(|op| json!({"pc": op["pc"], "op": op["op"], "cost": op["cost"], "sub": vm_shape(&op["sub"])}))
            .collect::<Vec<_>>()
    });
    json!({ "ops": ops })
}

/// Rewrites reth's answer where reth is wrong (see the file docs), so that the rest of it
/// can be compared exactly.
fn adjust_reth(name: &str, want: &mut Value, got: &Value) {
    let Some(results) = want.get_mut("result").and_then(Value::as_array_mut) else {
        return;
    };
    for (i, result) in results.iter_mut().enumerate() {
        let ours = &got["result"][i];
        if !result["vmTrace"].is_null() {
            assert_eq!(
                vm_shape(&ours["vmTrace"]),
                vm_shape(&result["vmTrace"]),
                "{name}: vmTrace shape of call {i}"
            );
            result["vmTrace"] = ours["vmTrace"].clone();
        }
        if let Some(traces) = result["trace"].as_array_mut() {
            for trace in traces {
                if trace["error"] == "CreateCollision" {
                    trace["error"] = json!("Contract address collision");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reth_fixtures() {
    let methods = methods();
    let files = support::io_files_filtered(
        &support::reth_trace_dir().join("trace_callMany"),
        "TRACE_FIXTURE",
    );
    let mut failures = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let fixture = support::Fixture::load(file).unwrap_or_else(|e| panic!("{e}"));
        let [(request, want)] = fixture.exchanges.as_slice() else {
            panic!("{name}: one request per fixture");
        };
        let mut want: Value = serde_json::from_str(want).expect("fixture json");
        let got = answer(&methods, request).await;

        if name == "missing-trace-types.io" {
            // reth: -32602; issue 6: the list may be omitted. The call is a plain transfer.
            assert_eq!(
                got["result"],
                json!([{"output": "0x", "stateDiff": null, "trace": [], "vmTrace": null}]),
                "{name}: {got}"
            );
            continue;
        }
        let diff = match want.get("error") {
            Some(err) => (got.pointer("/error/code") != err.get("code"))
                .then(|| format!("error code: got {}, want {}", got["error"], err)),
            None => {
                adjust_reth(&name, &mut want, &got);
                support::json_difference(&want["result"], &got["result"])
            }
        };
        if let Some(diff) = diff {
            failures.push(format!("{name}: {diff}"));
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
