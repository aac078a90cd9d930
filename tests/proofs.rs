//! `eth_getProof` on the imported execution-apis chain, checked the way a light client checks
//! it: every account proof verifies against the block's `stateRoot` and every storage proof
//! against the account's `storageHash`, for present and absent accounts and slots, at the head
//! and at older blocks; the proven values agree with eth_getBalance / eth_getTransactionCount /
//! eth_getStorageAt at the same block, and eth_getAccount / eth_getAccountInfo answer the same
//! account.

mod support;

use alloy::{
    primitives::{keccak256, Address, Bytes, B256, U256},
    rlp,
};
use alloy_trie::{proof::verify_proof, Nibbles, TrieAccount};
use serde_json::{json, Value};
use support::Node;

fn hex_u256(v: &Value) -> U256 {
    v.as_str()
        .and_then(|s| U256::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| panic!("not a quantity: {v}"))
}

fn b256(v: &Value) -> B256 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a hash: {v}"))
}

fn nodes(v: &Value) -> Vec<Bytes> {
    v.as_array()
        .expect("proof array")
        .iter()
        .map(|n| n.as_str().and_then(|s| s.parse().ok()).expect("hex node"))
        .collect()
}

/// Fetches and verifies one proof; returns it.
fn check(node: &Node, address: Address, slots: &[&str], block: u64) -> Value {
    let tag = format!("{block:#x}");
    let header = node.result("eth_getBlockByNumber", json!([tag, false]));
    let state_root = b256(&header["stateRoot"]);
    let proof = node.result("eth_getProof", json!([address, slots, tag]));

    let balance = hex_u256(&proof["balance"]);
    let nonce = hex_u256(&proof["nonce"]).to::<u64>();
    let code_hash = b256(&proof["codeHash"]);
    let storage_hash = b256(&proof["storageHash"]);
    assert_eq!(
        balance,
        hex_u256(&node.result("eth_getBalance", json!([address, tag])))
    );
    assert_eq!(
        nonce,
        hex_u256(&node.result("eth_getTransactionCount", json!([address, tag]))).to::<u64>()
    );
    let code = node.result("eth_getCode", json!([address, tag]));
    let code: Bytes = code.as_str().and_then(|s| s.parse().ok()).expect("code");
    let exists = !(balance.is_zero() && nonce == 0 && code.is_empty());
    if !code.is_empty() {
        assert_eq!(code_hash, keccak256(&code));
    }
    // eth_getAccount answers the proven leaf (null for an account the trie does not hold), and
    // eth_getAccountInfo the same balance and nonce with the code.
    let leaf = json!({
        "nonce": format!("{nonce:#x}"), "balance": format!("{balance:#x}"),
        "storageRoot": storage_hash, "codeHash": code_hash,
    });
    let account = node.result("eth_getAccount", json!([address, tag]));
    assert_eq!(
        account,
        if exists { leaf } else { Value::Null },
        "{address} at {block}"
    );
    if !exists {
        // geth's hashes for an account the state does not hold: zeros.
        assert_eq!(
            (code_hash, storage_hash),
            (B256::ZERO, B256::ZERO),
            "{proof}"
        );
    }
    let info = node.result("eth_getAccountInfo", json!([address, tag]));
    assert_eq!(
        info,
        json!({"balance": format!("{balance:#x}"), "nonce": format!("{nonce:#x}"), "code": code}),
        "{address} at {block}"
    );

    let expected = exists.then(|| {
        rlp::encode(TrieAccount {
            nonce,
            balance,
            storage_root: storage_hash,
            code_hash,
        })
    });
    verify_proof(
        state_root,
        Nibbles::unpack(keccak256(address)),
        expected,
        &nodes(&proof["accountProof"]),
    )
    .unwrap_or_else(|e| panic!("account proof of {address} at {block}: {e:?}\n{proof}"));

    let storage = proof["storageProof"].as_array().expect("storageProof");
    assert_eq!(storage.len(), slots.len());
    for (entry, slot) in storage.iter().zip(slots) {
        let slot_value = hex_u256(&json!(slot));
        assert_eq!(
            hex_u256(&entry["key"]),
            slot_value,
            "keys come back in order"
        );
        let value = hex_u256(&entry["value"]);
        let stored = node.result(
            "eth_getStorageAt",
            json!([address, format!("{slot_value:#x}"), tag]),
        );
        assert_eq!(
            value,
            U256::from_be_bytes(b256(&stored).0),
            "{address} {slot} at {block}"
        );
        // An absent account's (zero) storage hash stands for the empty trie.
        let storage_root = if storage_hash.is_zero() {
            alloy_trie::EMPTY_ROOT_HASH
        } else {
            storage_hash
        };
        verify_proof(
            storage_root,
            Nibbles::unpack(keccak256(B256::from(slot_value))),
            (!value.is_zero()).then(|| rlp::encode(value)),
            &nodes(&entry["proof"]),
        )
        .unwrap_or_else(|e| panic!("storage proof of {address} {slot} at {block}: {e:?}"));
    }
    proof
}

#[test]
fn proofs_verify_against_the_block_roots() {
    // Many calls per second: no per-key rate limit.
    let node = Node::execution_apis(&["--rpc.rate-limit", "0"]);
    let head = hex_u256(&node.result("eth_blockNumber", json!([]))).to::<u64>();

    // Accounts that occur in the chain: senders and recipients of block 2's transactions,
    // the coinbase, a contract with storage (from the fixtures), and one never seen.
    let block2 = node.result("eth_getBlockByNumber", json!(["0x2", true]));
    let mut accounts: Vec<Address> = block2["transactions"]
        .as_array()
        .expect("txs")
        .iter()
        .take(5)
        .flat_map(|tx| [tx["from"].clone(), tx["to"].clone()])
        .filter_map(|a| a.as_str().and_then(|s| s.parse().ok()))
        .collect();
    accounts.push(
        "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df"
            .parse()
            .expect("address"),
    );
    accounts.push(Address::repeat_byte(0x5a));
    accounts.sort();
    accounts.dedup();
    assert!(accounts.len() >= 4, "{accounts:?}");

    let slots = ["0x0", "0x1", "0x2", "0x1234"];
    let mut with_storage = 0;
    for block in [1, 2, 10, head / 2, head] {
        for address in &accounts {
            let proof = check(&node, *address, &slots, block);
            if proof["storageProof"][0]["proof"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
            {
                with_storage += 1;
            }
        }
    }
    assert!(with_storage > 0, "no account with storage was proven");

    // Bad input is an error naming it, not a panic.
    let too_many: Vec<String> = (0..1025).map(|i| format!("{i:#x}")).collect();
    let answer = node.call("eth_getProof", json!([Address::ZERO, too_many, "latest"]));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    for (method, params) in [
        ("eth_getProof", json!([Address::ZERO, [], "0x10000"])),
        ("eth_getAccount", json!([Address::ZERO, "0x10000"])),
        ("eth_getAccountInfo", json!([Address::ZERO, "0x10000"])),
    ] {
        let answer = node.call(method, params);
        assert_eq!(answer["error"]["code"], -32000, "{method}: {answer}");
    }
}
