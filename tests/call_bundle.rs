//! eth_callBundle end to end on a dev node: signed transactions run in order on a block's state,
//! each with what it paid the coinbase (fees, direct payments), the bundle's totals and hash,
//! block overrides, the state inside a mined block, the chain left untouched, and refusals that
//! name the transaction at fault.

mod support;

use std::path::Path;

use alloy::primitives::{address, keccak256, Address};
use serde_json::{json, Value};
use support::{Node, TempDir};

const ADDR0: Address = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
const GWEI: u128 = 1_000_000_000;
const ETHER: u128 = 1_000_000_000_000_000_000;

/// Deploys [`PAYER`].
const PAYER_INIT: &str = "685f5f5f5f34415af1005f5260096017f3";
/// Sends the call's value on to the block's coinbase.
const PAYER: &str = "0x5f5f5f5f34415af100";
/// An init code that reverts with the one byte 0xaa.
const REVERTS_AA: &str = "60aa5f526001601ffd";
/// An init code that returns the block's timestamp and number, a word each.
const TIME_AND_NUMBER: &str = "425f524360205260405ff3";

fn signed(nonce: u64, to: Option<Address>, value: u128, input: &str, chain_id: u64) -> String {
    support::dev_tx_on(chain_id, nonce, to, value, input)
}

fn tx(nonce: u64, to: Option<Address>, value: u128, input: &str) -> String {
    support::dev_tx(nonce, to, value, input)
}

fn quantity(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().expect("a quantity").trim_start_matches("0x"), 16).expect("hex")
}

/// The bundle answers' amounts are decimal strings.
fn amount(v: &Value) -> u128 {
    v.as_str()
        .unwrap_or_else(|| panic!("a decimal string: {v}"))
        .parse()
        .expect("decimal")
}

fn hash_of(raw: &str) -> String {
    format!("{:#x}", keccak256(alloy::hex::decode(raw).expect("hex")))
}

#[test]
fn bundles_run_in_order_and_report_what_the_coinbase_earned() {
    let node = Node::start(TempDir::new("bundle"), Path::new("dev"), &["--dev"]);
    // Block 1 holds two transfers (nonce 1 sent first waits behind the gap until 0 arrives).
    let to = address!("000000000000000000000000000000000000beef");
    let first = node.result("eth_sendRawTransaction", json!([tx(1, Some(to), 5, "")]));
    let zeroth = node.result("eth_sendRawTransaction", json!([tx(0, Some(to), 7, "")]));
    let (r0, r1) = (
        support::wait_for_receipt(&node, &zeroth),
        support::wait_for_receipt(&node, &first),
    );
    assert_eq!(r0["blockNumber"], r1["blockNumber"], "one block: {r0} {r1}");
    let head = node.result("eth_getBlockByNumber", json!(["latest", false]));
    let number = quantity(&head["number"]) as u64;
    let time = quantity(&head["timestamp"]);
    let base_fee = quantity(&head["baseFeePerGas"]);
    assert!(base_fee < 9 * GWEI, "the tip is the whole priority fee");

    let payer = ADDR0.create(2);
    let raws = [
        tx(2, None, 0, PAYER_INIT),
        tx(3, Some(payer), ETHER, ""),
        tx(4, None, 0, REVERTS_AA),
        tx(5, None, 0, TIME_AND_NUMBER),
    ];
    let answer = node.result(
        "eth_callBundle",
        json!([{"txs": raws, "blockNumber": format!("{:#x}", number + 1), "stateBlockNumber": "latest"}]),
    );
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{answer}");
    let mut gas = 0u128;
    let mut fees = 0u128;
    let mut diff = 0u128;
    for (r, raw) in results.iter().zip(&raws) {
        assert_eq!(r["txHash"], hash_of(raw), "{r}");
        assert_eq!(r["fromAddress"], json!(ADDR0), "{r}");
        assert_eq!(amount(&r["gasPrice"]), GWEI, "{r}");
        let used = r["gasUsed"].as_u64().expect("gasUsed") as u128;
        assert_eq!(amount(&r["gasFees"]), used * GWEI, "{r}");
        gas += used;
        fees += used * GWEI;
        diff += amount(&r["coinbaseDiff"]);
    }
    let [deploy, pay, revert, probe] = [&results[0], &results[1], &results[2], &results[3]];
    assert_eq!(deploy["toAddress"], Value::Null);
    assert_eq!(deploy["value"], PAYER, "the deployed code: {deploy}");
    assert_eq!(amount(&deploy["ethSentToCoinbase"]), 0);
    assert_eq!(amount(&deploy["coinbaseDiff"]), amount(&deploy["gasFees"]));
    // The payer sends the call's value on to the coinbase: a direct payment beside the fee.
    assert_eq!(pay["toAddress"], json!(payer));
    assert_eq!(amount(&pay["ethSentToCoinbase"]), ETHER, "{pay}");
    assert_eq!(
        amount(&pay["coinbaseDiff"]),
        ETHER + amount(&pay["gasFees"])
    );
    assert_eq!(revert["revert"], "0xaa", "{revert}");
    assert_eq!(revert.get("value"), None, "{revert}");
    // The bundle's block: the next number, 12 s after the state block.
    let word = |i: usize| {
        let value = probe["value"].as_str().expect("output");
        u128::from_str_radix(&value[2 + 64 * i..2 + 64 * (i + 1)], 16).expect("hex")
    };
    assert_eq!(
        (word(0), word(1)),
        (time + 12, number as u128 + 1),
        "{probe}"
    );

    assert_eq!(answer["totalGasUsed"].as_u64(), Some(gas as u64));
    assert_eq!(amount(&answer["gasFees"]), fees);
    assert_eq!(amount(&answer["coinbaseDiff"]), diff);
    assert_eq!(diff, fees + ETHER);
    assert_eq!(amount(&answer["ethSentToCoinbase"]), ETHER);
    assert_eq!(amount(&answer["bundleGasPrice"]), diff / gas);
    assert_eq!(answer["stateBlockNumber"].as_u64(), Some(number));
    let hashes: Vec<u8> = raws
        .iter()
        .flat_map(|raw| keccak256(alloy::hex::decode(raw).expect("hex")).0)
        .collect();
    assert_eq!(answer["bundleHash"], format!("{:#x}", keccak256(hashes)));

    // Nothing was sent: the chain and the pool are as they were.
    assert_eq!(
        node.result("eth_getTransactionCount", json!([ADDR0, "pending"])),
        "0x2"
    );
    assert_eq!(
        node.result("eth_blockNumber", json!([])),
        format!("{number:#x}")
    );

    // The block's fields as asked: number, time, coinbase (whose earnings are reported) and a
    // base fee that leaves half a gwei of the tip.
    let coinbase = address!("00000000000000000000000000000000c0ffee00");
    let answer = node.result(
        "eth_callBundle",
        json!([{
            "txs": [raws[0], raws[1], tx(4, None, 0, TIME_AND_NUMBER)],
            "blockNumber": "0x64", "stateBlockNumber": format!("{number:#x}"),
            "timestamp": "0x77359400", "coinbase": coinbase, "baseFee": format!("{:#x}", 9 * GWEI + GWEI / 2),
        }]),
    );
    let results = answer["results"].as_array().expect("results");
    assert_eq!(amount(&results[0]["gasPrice"]), GWEI / 2, "{answer}");
    assert_eq!(amount(&results[1]["ethSentToCoinbase"]), ETHER, "{answer}");
    let value = results[2]["value"].as_str().expect("output");
    assert_eq!(
        (&value[2 + 56..2 + 64], &value[2 + 64 + 62..]),
        ("77359400", "64"),
        "{answer}"
    );

    // Inside block `number`: before its transactions nonce 0 is the sender's next.
    let inside = |index: i64, nonce: u64| {
        node.call(
            "eth_callBundle",
            json!([{"txs": [tx(nonce, Some(to), 1, "")], "blockNumber": format!("{:#x}", number),
                "stateBlockNumber": format!("{number:#x}"), "transactionIndex": index}]),
        )
    };
    for (index, nonce) in [(0, 0), (1, 1), (-1, 2)] {
        let r = inside(index, nonce);
        assert_eq!(r["result"]["results"][0]["gasUsed"], 21_000, "{index}: {r}");
    }
    let r = inside(0, 2);
    assert_eq!(r["error"]["code"], -32000, "{r}");
}

#[test]
fn bad_bundles_are_refused_naming_the_transaction() {
    let node = Node::start(TempDir::new("bundle-bad"), Path::new("dev"), &["--dev"]);
    let to = Some(address!("000000000000000000000000000000000000beef"));
    let refused = |bundle: Value, code: i64, words: &[&str]| {
        let r = node.call("eth_callBundle", json!([bundle]));
        assert_eq!(r["error"]["code"], code, "{bundle}: {r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        for w in words {
            assert!(message.contains(w), "{w:?} in {r}");
        }
    };
    let good = tx(0, to, 1, "");
    let bundle =
        |txs: Vec<String>| json!({"txs": txs, "blockNumber": "0x1", "stateBlockNumber": "latest"});
    refused(bundle(vec![]), -32602, &["missing txs"]);
    refused(
        json!({"txs": [good], "blockNumber": "0x0", "stateBlockNumber": "latest"}),
        -32602,
        &["blockNumber"],
    );
    refused(json!({"txs": [good]}), -32602, &[]);
    refused(
        bundle(vec![good.clone(), "0x1234".into()]),
        -32602,
        &["tx 1:"],
    );
    let gapped = tx(5, to, 1, "");
    refused(
        bundle(vec![good.clone(), gapped.clone()]),
        -32000,
        &[&format!("tx 1 ({})", hash_of(&gapped)), "nonce too high"],
    );
    refused(bundle(vec![signed(0, to, 1, "", 1)]), -32000, &["tx 0 ("]);
    refused(
        json!({"txs": [good], "blockNumber": "0x1", "stateBlockNumber": "latest", "gasLimit": "0x2faf081"}),
        -32602,
        &["gas cap"],
    );
    refused(
        json!({"txs": [good], "blockNumber": "0x1", "stateBlockNumber": "latest", "baseFee": format!("{:#x}", 20 * GWEI)}),
        -32000,
        &["tx 0 (", "base fee"],
    );
    refused(
        json!({"txs": [good], "blockNumber": "0x1", "stateBlockNumber": "0x99"}),
        -32000,
        &["header not found"],
    );
    // The same bundle, well formed, runs.
    let r = node.result("eth_callBundle", json!([bundle(vec![good])]));
    assert_eq!(r["results"][0]["gasUsed"], 21_000, "{r}");
}

/// A bundle whose block falls in a later fork than its state block runs under that block's
/// rules: block 42 of the execution-apis chain is its first Cancun block, and its transactions
/// as a bundle on block 41's state cost what their receipts say.
#[test]
fn a_bundle_block_in_the_next_fork_runs_under_its_rules() {
    let node = Node::execution_apis(&[]);
    let block = node.result("eth_getBlockByNumber", json!(["0x2a", false]));
    let hashes = block["transactions"].as_array().expect("hashes").clone();
    assert!(!hashes.is_empty());
    let raws: Vec<Value> = hashes
        .iter()
        .map(|hash| node.result("eth_getRawTransactionByHash", json!([hash])))
        .collect();
    let answer = node.result(
        "eth_callBundle",
        json!([{"txs": raws, "blockNumber": "0x2a", "stateBlockNumber": "0x29",
                "timestamp": block["timestamp"], "coinbase": block["miner"],
                "baseFee": block["baseFeePerGas"]}]),
    );
    for (result, hash) in answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .zip(&hashes)
    {
        let receipt = node.result("eth_getTransactionReceipt", json!([hash]));
        assert_eq!(
            result["gasUsed"].as_u64(),
            Some(quantity(&receipt["gasUsed"]) as u64),
            "{hash}: {result}"
        );
    }
}
