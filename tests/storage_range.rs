//! debug_storageRangeAt: a contract's storage before a transaction of a block, a page at a time
//! in hashed-slot order. On the execution-apis chain a whole page rebuilds the storage root the
//! chain proves (eth_getProof's storageHash) and pages of one slot chain together through
//! `nextKey`; on a dev node, slots written by earlier transactions of the same block count.

mod support;

use std::path::Path;

use alloy::primitives::{address, keccak256, Address, B256, U256};
use alloy_trie::{HashBuilder, Nibbles};
use serde_json::{json, Value};
use support::{Node, TempDir};

/// The root of the storage trie holding `slots` (hashed slot, value).
fn storage_root(slots: &[(B256, U256)]) -> B256 {
    let mut sorted = slots.to_vec();
    sorted.sort();
    let mut hb = HashBuilder::default();
    for (hashed, value) in &sorted {
        hb.add_leaf(Nibbles::unpack(hashed), &alloy::rlp::encode(value));
    }
    hb.root()
}

fn entries(page: &Value) -> Vec<(B256, U256)> {
    page["storage"]
        .as_object()
        .map(|storage| {
            storage
                .iter()
                .map(|(hashed, entry)| {
                    assert_eq!(entry["key"], Value::Null, "no preimages: {entry}");
                    let value: B256 =
                        serde_json::from_value(entry["value"].clone()).expect("a word");
                    (
                        hashed.parse().expect("a hash"),
                        U256::from_be_bytes(value.0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn pages_rebuild_the_proven_storage_root() {
    let node = Node::execution_apis(&["--rpc.rate-limit", "0"]);
    let head = node.result("eth_blockNumber", json!([]));
    let head = u64::from_str_radix(head.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let contract = address!("7dcd17433742f4c0ca53122ab541d0ba67fc27df");
    let mut checked = 0;
    for number in 2..=head {
        let block = node.result(
            "eth_getBlockByNumber",
            json!([format!("{number:#x}"), false]),
        );
        if block["transactions"].as_array().is_none_or(Vec::is_empty) {
            continue;
        }
        let parent = format!("{:#x}", number - 1);
        let proof = node.result("eth_getProof", json!([contract, [], parent]));
        let page = node.call(
            "debug_storageRangeAt",
            json!([block["hash"], 0, contract, "0x00", 10_000]),
        );
        if proof["codeHash"] == json!(alloy::primitives::KECCAK256_EMPTY) {
            continue;
        }
        let page = &page["result"];
        let slots = entries(page);
        let root: B256 = serde_json::from_value(proof["storageHash"].clone()).expect("hash");
        assert_eq!(storage_root(&slots), root, "block {number}: {page}");
        assert_eq!(page["nextKey"], Value::Null);
        if slots.len() > 1 {
            // One slot a page, following nextKey, walks the same slots in order.
            let mut walked = Vec::new();
            let mut start = json!("0x00");
            loop {
                let one = node.result(
                    "debug_storageRangeAt",
                    json!([block["hash"], 0, contract, start, 1]),
                );
                walked.extend(entries(&one));
                if one["nextKey"].is_null() {
                    break;
                }
                start = one["nextKey"].clone();
            }
            let mut sorted = slots.clone();
            sorted.sort();
            assert_eq!(walked, sorted, "block {number}");
            checked += 1;
        }
    }
    assert!(checked > 0, "no block where the contract had several slots");

    // Refusals, as geth words them.
    let block1 = node.result("eth_getBlockByNumber", json!(["0x1", false]));
    let refused = |params: Value, code: i64| {
        let r = node.call("debug_storageRangeAt", params.clone());
        assert_eq!(r["error"]["code"], code, "{params}: {r}");
    };
    refused(json!([block1["hash"], 99, contract, "0x00", 1]), -32000);
    refused(json!(["0x0", 0, contract, "0x00", 1]), -32000);
    refused(
        json!(["latest", 0, Address::repeat_byte(0x5a), "0x00", 1]),
        -32000,
    );
    refused(json!(["latest", "0x0", contract, "0x00", 1]), -32602);
    refused(
        json!(["latest", 0, contract, format!("0x{}", "00".repeat(33)), 1]),
        -32602,
    );
}

/// Called with 32 bytes, stores them in slot 0; called with none, returns slot 0.
const STORE_OR_LOAD: &str = "36600f5760005460005260206000f35b60003560005500";

fn tx(nonce: u64, to: Option<Address>, input: &str) -> String {
    support::dev_tx(nonce, to, 0, input)
}

fn receipt(node: &Node, hash: &Value) -> Value {
    support::wait_for_receipt(node, hash)
}

#[test]
fn earlier_transactions_of_the_block_count() {
    let node = Node::start(TempDir::new("storage-range"), Path::new("dev"), &["--dev"]);
    let sender = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    let contract = sender.create(0);
    // Deploys STORE_OR_LOAD (init: copy the runtime to memory and return it).
    let init = format!("6017600c60003960176000f3{STORE_OR_LOAD}");
    let deployed = node.result("eth_sendRawTransaction", json!([tx(0, None, &init)]));
    assert_eq!(
        receipt(&node, &deployed)["contractAddress"],
        json!(contract)
    );
    // Two stores to slot 0 in one block (the second sent first waits behind the gap).
    let word = |v: u8| format!("{:064x}", v);
    let second = node.result(
        "eth_sendRawTransaction",
        json!([tx(2, Some(contract), &word(0xbb))]),
    );
    let first = node.result(
        "eth_sendRawTransaction",
        json!([tx(1, Some(contract), &word(0xaa))]),
    );
    let block = receipt(&node, &first)["blockHash"].clone();
    assert_eq!(receipt(&node, &second)["blockHash"], block);
    assert_eq!(receipt(&node, &second)["transactionIndex"], "0x1");

    let slot0 = keccak256([0u8; 32]);
    let at = |index: u64| {
        node.result(
            "debug_storageRangeAt",
            json!([block, index, contract, "0x", 10]),
        )
    };
    let before = at(0);
    assert_eq!(
        before["storage"],
        Value::Null,
        "no storage before the block: {before}"
    );
    assert_eq!(entries(&at(1)), vec![(slot0, U256::from(0xaa))]);
    // An empty block's index 0 is its start (as geth), here after both stores.
    node.result("evm_mine", json!([]));
    let empty = node.result("eth_getBlockByNumber", json!(["latest", false]));
    assert_eq!(empty["transactions"], json!([]));
    let after = node.result(
        "debug_storageRangeAt",
        json!([empty["hash"], 0, contract, "0x", 10]),
    );
    assert_eq!(entries(&after), vec![(slot0, U256::from(0xbb))]);
    let r = node.call(
        "debug_storageRangeAt",
        json!([empty["hash"], 1, contract, "0x", 10]),
    );
    assert_eq!(r["error"]["code"], -32000, "{r}");
    // A page starting past the only slot is empty, with nothing after it.
    let past = node.result(
        "debug_storageRangeAt",
        json!([
            block,
            1,
            contract,
            format!("{:#x}", U256::from_be_bytes(slot0.0) + U256::from(1)),
            10
        ]),
    );
    assert_eq!(
        (past["storage"].clone(), past["nextKey"].clone()),
        (json!({}), Value::Null)
    );
}
