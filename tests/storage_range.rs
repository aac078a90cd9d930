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
    refused(json!(["latest", "0x0", contract, "0x00", 1]), -32602);
    // An account that does not exist has no storage, as geth answers it.
    let none = node.result(
        "debug_storageRangeAt",
        json!([block1["hash"], 0, Address::repeat_byte(0x5a), "0x00", 1]),
    );
    assert_eq!(none, json!({"storage": null, "nextKey": null}));
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

/// The store reads a page from its start key on, merging the stored slots with the history of
/// the blocks after the one asked for (a slot they created reads as absent, one they deleted
/// as it was). At every block of the execution-apis chain, for a contract of the chain and the
/// system contracts whose ring buffers change every block, the whole storage rebuilds the
/// storage root eth_getProof's path proves, and every page with a start at, between or past
/// the slots and a small limit is the matching cut of it.
#[test]
fn pages_from_any_start_are_cuts_of_the_whole_storage() {
    use simnode_api::ChainView;
    let datadir = support::import_execution_apis_chain();
    let genesis = support::execution_apis_genesis();
    let chain = simnode::chain::load(genesis.to_str().expect("utf8")).expect("genesis");
    let store = simnode::store::Store::open(datadir.path(), std::sync::Arc::new(chain.spec), None)
        .expect("store");
    let head = store.head().latest;
    let contracts = [
        address!("7dcd17433742f4c0ca53122ab541d0ba67fc27df"),
        // EIP-4788's beacon roots and EIP-2935's block hashes.
        address!("000F3df6D732807Ef1319fB7B8bB8522d0Beac02"),
        address!("0000F90827F1C53a10cb7A02335B175320002935"),
    ];
    let mut pages = 0;
    for number in 0..=head {
        for contract in contracts {
            let whole = store
                .storage_slots(number, contract, B256::ZERO, usize::MAX)
                .expect("whole storage");
            let proof = store.proof(number, contract, &[]).expect("proof");
            assert_eq!(
                storage_root(&whole),
                proof.storage_hash,
                "block {number}, {contract}"
            );
            let mut starts = vec![B256::ZERO, B256::repeat_byte(0xff)];
            for (slot, _) in &whole {
                starts.push(*slot);
                let next = U256::from_be_bytes(slot.0).saturating_add(U256::from(1));
                starts.push(B256::from(next));
            }
            for start in starts {
                for limit in [1, 2, 3] {
                    let expected: Vec<_> = whole
                        .iter()
                        .filter(|(slot, _)| *slot >= start)
                        .take(limit)
                        .copied()
                        .collect();
                    let page = store
                        .storage_slots(number, contract, start, limit)
                        .expect("a page");
                    assert_eq!(page, expected, "block {number}, {contract}, from {start}");
                    pages += 1;
                }
            }
        }
    }
    assert!(pages > 1_000, "only {pages} pages checked");
}

/// Stores `calldata[0..32]` in slot `calldata[32..64]`.
const KEY_VALUE: &str = "6000356020355500";

/// A slot an earlier transaction of the block zeroed is not in the page, and does not take a
/// place in it: a page of one slot is the next slot, with the one after it as `nextKey`. A slot
/// a later block deleted is read back from the history, in its place between the stored ones.
#[test]
fn slots_zeroed_earlier_in_the_block_leave_no_gap_in_a_page() {
    let node = Node::start(TempDir::new("storage-zeroed"), Path::new("dev"), &["--dev"]);
    let sender = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    let contract = sender.create(0);
    let init = format!("6008600c60003960086000f3{KEY_VALUE}");
    let deployed = node.result("eth_sendRawTransaction", json!([tx(0, None, &init)]));
    assert_eq!(
        receipt(&node, &deployed)["contractAddress"],
        json!(contract)
    );
    let store = |value: u8, slot: u8| format!("{:064x}{:064x}", value, slot);
    for (nonce, slot) in [(1, 1u8), (2, 2), (3, 3)] {
        let hash = node.result(
            "eth_sendRawTransaction",
            json!([tx(nonce, Some(contract), &store(0x11 * slot, slot))]),
        );
        assert_eq!(receipt(&node, &hash)["status"], "0x1");
    }
    // In trie order: by hashed slot.
    let mut order: Vec<(B256, u8)> = [1u8, 2, 3]
        .iter()
        .map(|s| (keccak256(B256::from(U256::from(*s))), *s))
        .collect();
    order.sort();
    let (first, second, third) = (order[0], order[1], order[2]);
    // One block: the first transaction zeroes the first slot in trie order, the second stores
    // elsewhere (sent first, it waits behind the gap).
    let later = node.result(
        "eth_sendRawTransaction",
        json!([tx(5, Some(contract), &store(0x99, 9))]),
    );
    let zeroing = node.result(
        "eth_sendRawTransaction",
        json!([tx(4, Some(contract), &store(0, first.1))]),
    );
    let block = receipt(&node, &zeroing)["blockHash"].clone();
    assert_eq!(receipt(&node, &later)["blockHash"], block);

    let page = |index: u64| {
        node.result(
            "debug_storageRangeAt",
            json!([block, index, contract, "0x", 1]),
        )
    };
    let before = page(0);
    assert_eq!(
        entries(&before),
        vec![(first.0, U256::from(0x11 * first.1))]
    );
    assert_eq!(before["nextKey"], json!(second.0));
    let after = page(1);
    assert_eq!(
        entries(&after),
        vec![(second.0, U256::from(0x11 * second.1))],
        "{after}"
    );
    assert_eq!(after["nextKey"], json!(third.0), "{after}");

    // A later block deletes the second slot: read at that block's start, the slot comes from
    // the history between the stored ones, while the first slot's deletion (before it) stays.
    let deleting = node.result(
        "eth_sendRawTransaction",
        json!([tx(6, Some(contract), &store(0, second.1))]),
    );
    let later = receipt(&node, &deleting)["blockHash"].clone();
    let nine = keccak256(B256::from(U256::from(9)));
    let mut expected = vec![
        (second.0, U256::from(0x11 * second.1)),
        (third.0, U256::from(0x11 * third.1)),
        (nine, U256::from(0x99)),
    ];
    expected.sort();
    let whole = node.result(
        "debug_storageRangeAt",
        json!([later, 0, contract, "0x", 10]),
    );
    assert_eq!(entries(&whole), expected, "{whole}");
    let first_two = node.result("debug_storageRangeAt", json!([later, 0, contract, "0x", 2]));
    assert_eq!(entries(&first_two), expected[..2].to_vec(), "{first_two}");
    assert_eq!(first_two["nextKey"], json!(expected[2].0));
}
