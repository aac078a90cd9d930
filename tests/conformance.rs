//! Replays the geth-recorded execution-apis fixtures against `simnode node` on the imported
//! test chain, the way hive's rpc-compat suite does: one node (started with
//! `--rpc.max-simulate-blocks 256`, headfcu.json sent over the Engine API), every `.io` file
//! under the directory in path order, exact comparison with error messages aside (`speconly`
//! fixtures: the kind of answer only).
//!
//! `every_fixture` prints a per-method table of everything under the directory, served or not
//! (`just conformance DIR`), and fails if any fixture of a method we serve fails.
//! `runner_catches_a_broken_receipt_field` shows the runner itself fails when one field of a
//! receipt is wrong.

mod support;

use std::sync::Arc;

use serde_json::Value;
use support::{
    chain_dir, conformance_dir, fixture_files, fixture_groups, replay_dir, replay_methods, Fixture,
    Node, TamperingProxy,
};

/// Methods whose every fixture must pass: `eth_getBlockReceipts`, `eth_simulateV1` and the
/// standard methods of the RPC front-door issue (plus the few small extras we serve).
const MUST_PASS: &[&str] = &[
    "eth_getBlockReceipts",
    "eth_simulateV1",
    "eth_chainId",
    "net_version",
    "eth_blockNumber",
    "eth_syncing",
    "eth_getBlockByHash",
    "eth_getBlockByNumber",
    "eth_getBlockTransactionCountByHash",
    "eth_getBlockTransactionCountByNumber",
    "eth_getTransactionByHash",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getTransactionReceipt",
    "eth_getBalance",
    "eth_getCode",
    "eth_getStorageAt",
    "eth_getStorageValues",
    "eth_getTransactionCount",
    "eth_getLogs",
    "eth_baseFee",
    "eth_blobBaseFee",
    "eth_feeHistory",
    "eth_call",
    "eth_estimateGas",
    "eth_createAccessList",
    "eth_sendRawTransaction",
    "eth_config",
    "eth_capabilities",
    "eth_getProof",
    "testing_buildBlockV1",
    "debug_getRawBlock",
    "debug_getRawHeader",
    "debug_getRawReceipts",
    "debug_getRawTransaction",
    "debug_traceTransaction",
    "debug_traceBlockByNumber",
    "debug_traceBlockByHash",
    "txpool_content",
    "txpool_contentFrom",
    "txpool_status",
];

#[test]
fn every_fixture() {
    let root = conformance_dir();
    let groups = fixture_groups(&root);
    assert!(
        !groups.is_empty(),
        "no .io fixtures under {}; set SIMNODE_CONFORMANCE_DIR",
        root.display()
    );
    let node = Node::execution_apis(&["--rpc.max-simulate-blocks", "256"]);
    let report = replay_dir(&node, &root);
    // In the execution-apis layout every method we must serve has fixtures; elsewhere (a
    // custom DIR) only the ones present are held to passing.
    let required: Vec<&str> = if root == chain_dir() {
        MUST_PASS.to_vec()
    } else {
        MUST_PASS
            .iter()
            .copied()
            .filter(|m| report.method(m).is_some())
            .collect()
    };
    report.assert_passed(&required);
}

/// A proxy in front of the node adds 1 to `gasUsed` of the first receipt in every
/// `eth_getBlockReceipts` answer: the runner must fail exactly the fixtures with receipts, each
/// naming that field, and pass the rest (and pass all of them without the proxy).
#[test]
fn runner_catches_a_broken_receipt_field() {
    let node = Node::execution_apis(&[]);
    let method = "eth_getBlockReceipts";

    let honest = replay_methods(&node, &[method]);
    honest.assert_all_passed();

    let tamper = Arc::new(|request: &Value, response: &mut Value| {
        if request["method"] != "eth_getBlockReceipts" {
            return;
        }
        if let Some(gas) = response.pointer_mut("/result/0/gasUsed") {
            let n = u64::from_str_radix(gas.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)
                .unwrap_or(0);
            *gas = Value::String(format!("{:#x}", n + 1));
        }
    });
    let proxy = TamperingProxy::start(node.http_addr(), &format!("/v3/{}", node.api_key), tamper);
    let broken = replay_methods(&proxy, &[method]);
    eprintln!("{}", broken.table());

    let result = broken.method(method).expect("receipts fixtures replayed");
    let mut with_receipts = 0;
    for file in &fixture_files(method) {
        let fixture = Fixture::load(file).expect("load fixture");
        let expected: Value = serde_json::from_str(&fixture.exchanges[0].1).expect("fixture JSON");
        let has_receipts = expected["result"].as_array().is_some_and(|r| !r.is_empty());
        let failure = result.failures.iter().find(|(f, _)| f == file);
        if has_receipts {
            with_receipts += 1;
            let (_, why) = failure.unwrap_or_else(|| {
                panic!("{}: a broken gasUsed passed the runner", file.display())
            });
            assert!(
                why.contains("$.result[0].gasUsed"),
                "{}: the diff should name the field: {why}",
                file.display()
            );
        } else {
            assert!(
                failure.is_none(),
                "{}: no receipts to break, yet it failed: {failure:?}",
                file.display()
            );
        }
    }
    assert!(
        with_receipts >= 2,
        "too few receipt fixtures to show anything"
    );
    assert_eq!(result.failures.len(), with_receipts);
}
