//! The generated dev chain (`testdata/devchain.rlp`, described by `testdata/devchain.json`):
//! `simnode import` takes it to the recorded head, a re-run imports nothing, and the stored
//! blocks, receipts and state are what each recorded case says. Also: the generator produces
//! the committed files byte for byte.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use alloy::{
    consensus::{proofs::calculate_transaction_root, Transaction, TxType, EMPTY_ROOT_HASH},
    eips::eip4844::DATA_GAS_PER_BLOB,
    primitives::{keccak256, Address, B256, U256},
};
use revm::DatabaseRef;
use serde_json::Value;
use simnode::{cli::ChainArgs, exec, node::open_store, store::Store};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("simnode-testdata-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(Path::new(TESTDATA).join("devchain.json"))
        .expect("testdata/devchain.json (run `just testdata`)");
    serde_json::from_str(&text).expect("devchain.json parses")
}

fn field<T: serde::de::DeserializeOwned>(v: &Value, path: &[&str]) -> T {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    serde_json::from_value(cur.clone()).unwrap_or_else(|e| panic!("manifest {path:?}: {e}"))
}

fn import(datadir: &Path) -> String {
    import_with(datadir, &[])
}

fn import_with(datadir: &Path, flags: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_simnode"))
        .args(["import", "--chain", "dev"])
        .args(flags)
        .arg("--datadir")
        .arg(datadir)
        .arg(Path::new(TESTDATA).join("devchain.rlp"))
        .output()
        .expect("run simnode import");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "simnode import failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn open(datadir: &Path) -> std::sync::Arc<Store> {
    let args = ChainArgs {
        chain: "dev".into(),
        datadir: Some(datadir.to_path_buf()),
    };
    open_store(&args).expect("open the imported store").0
}

/// The receipt and transaction of a named case, checked against its recorded hash.
struct CaseView {
    block: u64,
    receipt: alloy::consensus::ReceiptEnvelope,
    tx: alloy::consensus::TxEnvelope,
    /// Gas this transaction used (difference of cumulative gas).
    gas_used: u64,
}

fn case(store: &Store, m: &Value, name: &str) -> CaseView {
    let c = &m["cases"][name];
    assert!(c.is_object(), "no case {name} in devchain.json");
    let block: u64 = field(c, &["block"]);
    let index: usize = field(c, &["index"]);
    let hash: B256 = field(c, &["hash"]);
    let body = store
        .block(block)
        .expect("read")
        .expect("block stored")
        .body;
    let receipts = store
        .receipts(block)
        .expect("read")
        .expect("receipts stored");
    let tx = body.transactions[index].clone();
    assert_eq!(*tx.tx_hash(), hash, "case {name}: tx hash");
    let before = if index == 0 {
        0
    } else {
        receipts[index - 1].cumulative_gas_used()
    };
    let receipt = receipts[index].clone();
    CaseView {
        block,
        gas_used: receipt.cumulative_gas_used() - before,
        receipt,
        tx,
    }
}

fn word(v: u64) -> B256 {
    B256::from(U256::from(v))
}

/// With no storage tries kept in memory every block's storage roots come from the tables,
/// and the chain still imports to its recorded head (each block's state root is checked).
#[test]
fn devchain_imports_without_kept_storage_tries() {
    let m = manifest();
    let datadir = temp_dir("import-no-storage-cache");
    let out = import_with(&datadir, &["--cache.storage-slots", "0"]);
    let blocks = m["blocks"].as_array().expect("blocks").len();
    assert!(
        out.contains(&format!("{blocks} blocks imported, 0 already stored")),
        "{out}"
    );
    let store = open(&datadir);
    let head_hash: B256 = field(&m, &["head", "hash"]);
    let head = store
        .header_raw(store.head().latest)
        .unwrap()
        .expect("head header");
    assert_eq!(head.hash(), head_hash);
}

#[test]
fn devchain_imports_to_recorded_head_with_expected_receipts_and_state() {
    let m = manifest();
    let datadir = temp_dir("import");

    let first = import(&datadir);
    let blocks = m["blocks"].as_array().expect("blocks").len();
    assert!(
        first.contains(&format!("{blocks} blocks imported, 0 already stored")),
        "{first}"
    );
    let again = import(&datadir);
    assert!(
        again.contains(&format!("0 blocks imported, {blocks} already stored")),
        "{again}"
    );

    let store = open(&datadir);
    let head_number: u64 = field(&m, &["head", "number"]);
    let head_hash: B256 = field(&m, &["head", "hash"]);
    assert_eq!(store.head().latest, head_number);
    let head = store.header_raw(head_number).unwrap().expect("head header");
    assert_eq!(head.hash(), head_hash);
    assert_eq!(
        store.spec().genesis_header.hash(),
        field::<B256>(&m, &["genesisHash"])
    );

    // Every block: hash as recorded, and its roots recomputed from what is stored.
    for b in m["blocks"].as_array().unwrap() {
        let number: u64 = field(b, &["number"]);
        let stored = store.block(number).unwrap().expect("block");
        let receipts = store.receipts(number).unwrap().expect("receipts");
        let header = &stored.header;
        assert_eq!(header.hash(), field::<B256>(b, &["hash"]), "block {number}");
        assert_eq!(
            stored.body.transactions.len(),
            field::<usize>(b, &["transactions"])
        );
        assert_eq!(
            calculate_transaction_root(&stored.body.transactions),
            header.transactions_root,
            "block {number} transactions root"
        );
        assert_eq!(
            exec::receipts_root(&receipts),
            header.receipts_root,
            "block {number} receipts root"
        );
        assert_eq!(exec::logs_bloom(&receipts), header.logs_bloom);
        assert_eq!(
            receipts.last().map_or(0, |r| r.cumulative_gas_used()),
            header.gas_used
        );
        assert_eq!(
            header.timestamp,
            number * field::<u64>(&m, &["blockTime"]),
            "fixed timestamps"
        );
    }
    assert_eq!(
        store
            .state_root_with(head_number, &Default::default())
            .unwrap(),
        head.state_root,
        "state root of the head recomputed from the stored state"
    );

    // Every case: its tx type, status and number of logs, as recorded.
    let cases = m["cases"].as_object().expect("cases");
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for (name, c) in cases {
        let v = case(&store, &m, name);
        assert_eq!(
            u8::from(v.tx.tx_type()),
            field::<u8>(c, &["type"]),
            "{name}"
        );
        assert_eq!(v.receipt.status(), field::<bool>(c, &["status"]), "{name}");
        assert_eq!(
            v.receipt.logs().len(),
            field::<usize>(c, &["logs"]),
            "{name}"
        );
        let senders = store.block(v.block).unwrap().unwrap().senders;
        let index: usize = field(c, &["index"]);
        assert_eq!(senders[index], field::<Address>(c, &["from"]), "{name}");
    }
    let types: std::collections::BTreeSet<u8> =
        cases.values().map(|c| field::<u8>(c, &["type"])).collect();
    assert_eq!(
        types,
        [0, 1, 2, 3, 4].into(),
        "every transaction type is covered"
    );

    let emitter: Address = field(&m, &["contracts", "emitter"]);
    let forwarder: Address = field(&m, &["contracts", "forwarder"]);
    let ping: B256 = field(&m, &["pingTopic"]);
    assert_eq!(ping, keccak256("Ping(address,uint256)"));
    let accounts: Vec<Address> = field(&m, &["accounts"]);

    // Deployments: code where the manifest says.
    let state = store.state_after(head_number).unwrap();
    for name in ["emitter", "counter", "reverter", "forwarder"] {
        let address: Address = field(&m, &["contracts", name]);
        let account = state.account(&address).unwrap().expect(name);
        assert_ne!(
            account.code_hash,
            alloy::primitives::KECCAK256_EMPTY,
            "{name}"
        );
    }

    // The event: Ping(caller, 42) from Emitter. Emitter stores each value in slot 0; the last
    // write of that block is the nested call's 7.
    let v = case(&store, &m, "emitEvent");
    let log = &v.receipt.logs()[0];
    assert_eq!(log.address, emitter);
    assert_eq!(log.topics(), &[ping, accounts[1].into_word()]);
    assert_eq!(log.data.data.as_ref(), word(42).as_slice());
    let after = store.state_after(v.block).unwrap();
    assert_eq!(
        after.storage_value(&emitter, &U256::ZERO).unwrap(),
        U256::from(7)
    );
    let before = store.state_after(v.block - 1).unwrap();
    assert_eq!(
        before.storage_value(&emitter, &U256::ZERO).unwrap(),
        U256::ZERO
    );

    // The nested call logs from Emitter with the Forwarder as caller.
    let v = case(&store, &m, "nestedCall");
    let log = &v.receipt.logs()[0];
    assert_eq!(log.address, emitter);
    assert_eq!(log.topics()[1], forwarder.into_word());
    assert_eq!(log.data.data.as_ref(), word(7).as_slice());

    // Reverts: status 0, no logs; out of gas uses all of its gas.
    for name in ["revert", "busyRevert", "outOfGas", "failedCreate"] {
        let v = case(&store, &m, name);
        assert!(!v.receipt.status(), "{name}");
        assert!(v.receipt.logs().is_empty(), "{name}");
    }
    let v = case(&store, &m, "outOfGas");
    assert_eq!(v.gas_used, v.tx.gas_limit());
    let v = case(&store, &m, "failedCreate");
    let would_be = field::<Address>(&m["cases"]["failedCreate"], &["from"]).create(v.tx.nonce());
    let state = store.state_after(v.block).unwrap();
    assert!(state.account(&would_be).unwrap().is_none());

    // Legacy without a chain id, and with one.
    assert_eq!(
        case(&store, &m, "legacyUnprotectedTransfer").tx.chain_id(),
        None
    );
    assert_eq!(case(&store, &m, "legacyTransfer").tx.chain_id(), Some(1337));

    // Blobs: versioned hashes in the transaction, blob gas in the header.
    let blob_hash: B256 = field(&m, &["blobVersionedHash"]);
    let v = case(&store, &m, "blobTx");
    assert_eq!(v.tx.tx_type(), TxType::Eip4844);
    assert_eq!(
        v.tx.blob_versioned_hashes().expect("blob hashes"),
        &[blob_hash, blob_hash]
    );
    assert_eq!(blob_hash[0], 1, "version byte");
    let header = store.header_raw(v.block).unwrap().unwrap();
    assert_eq!(header.blob_gas_used, Some(3 * DATA_GAS_PER_BLOB));
    let single = case(&store, &m, "blobTxSingle");
    assert_eq!(single.block, v.block);
    assert_eq!(single.tx.blob_versioned_hashes().map(|h| h.len()), Some(1));

    // EIP-7702: type 4, the log comes from the delegating EOA, whose code is the delegation
    // designator until the revocation clears it.
    let eoa = accounts[5];
    let v = case(&store, &m, "setCode");
    assert_eq!(v.tx.tx_type(), TxType::Eip7702);
    assert_eq!(v.tx.authorization_list().map(|a| a.len()), Some(1));
    assert_eq!(v.receipt.logs()[0].address, eoa);
    let mut designator = vec![0xef, 0x01, 0x00];
    designator.extend_from_slice(emitter.as_slice());
    let state = store.state_after(v.block).unwrap();
    let account = state.account(&eoa).unwrap().expect("delegated EOA");
    assert_eq!(account.code_hash, keccak256(&designator));
    assert_eq!(
        state
            .code_by_hash_ref(account.code_hash)
            .unwrap()
            .original_bytes()
            .as_ref(),
        designator.as_slice()
    );
    let v = case(&store, &m, "delegatedCall");
    assert_eq!(v.receipt.logs()[0].address, eoa);
    assert_eq!(v.receipt.logs()[0].topics()[1], accounts[6].into_word());
    let v = case(&store, &m, "delegatedSelfCall");
    assert_eq!(v.receipt.logs()[0].topics()[1], eoa.into_word());
    let state = store.state_after(v.block).unwrap();
    assert_eq!(
        state.storage_value(&eoa, &U256::ZERO).unwrap(),
        U256::from(55)
    );
    let v = case(&store, &m, "revokeDelegation");
    assert_eq!(v.tx.tx_type(), TxType::Eip7702);
    let state = store.state_after(v.block).unwrap();
    let account = state.account(&eoa).unwrap().expect("EOA");
    assert_eq!(account.code_hash, alloy::primitives::KECCAK256_EMPTY);
    assert_ne!(account.storage_root, EMPTY_ROOT_HASH, "storage stays");

    // The busy block the receipts benchmark uses.
    let busy: u64 = field(&m, &["busyBlock"]);
    let receipts = store.receipts(busy).unwrap().unwrap();
    assert!(receipts.len() >= 50, "{} receipts", receipts.len());
    assert!(receipts.iter().map(|r| r.logs().len()).sum::<usize>() >= 20);

    drop(store);
    let _ = std::fs::remove_dir_all(&datadir);
}

#[test]
fn generator_reproduces_the_committed_testdata() {
    let gen = |name: &str| {
        let dir = temp_dir(name);
        let out = Command::new(env!("CARGO_BIN_EXE_gen-testdata"))
            .arg("--out")
            .arg(&dir)
            .output()
            .expect("run gen-testdata");
        assert!(
            out.status.success(),
            "gen-testdata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    };
    let (a, b) = (gen("gen-a"), gen("gen-b"));
    for file in ["devchain.rlp", "devchain.json"] {
        let first = std::fs::read(a.join(file)).expect("generated");
        let second = std::fs::read(b.join(file)).expect("generated");
        assert!(first == second, "{file}: two runs of the generator differ");
        let committed = std::fs::read(Path::new(TESTDATA).join(file)).expect("committed");
        assert!(
            first == committed,
            "testdata/{file} is not what the generator produces: run `just testdata` and commit"
        );
    }
    let size = std::fs::metadata(Path::new(TESTDATA).join("devchain.rlp"))
        .unwrap()
        .len();
    assert!(size < 1 << 20, "devchain.rlp is {size} bytes");
    let _ = std::fs::remove_dir_all(a);
    let _ = std::fs::remove_dir_all(b);
}
