//! `gen-testdata`: the deterministic generator of the chains this project tests and benchmarks
//! against. It builds blocks on a fresh temporary datadir with the node's own block builder
//! (`simnode::sync::dev::build_block`), signing every transaction itself with the well-known
//! keys of the test mnemonic, at fixed timestamps (12 s apart from genesis), so the output is
//! the same bytes on every run.
//!
//! ```text
//! gen-testdata [--out DIR]                 testdata chain: DIR/devchain.rlp + DIR/devchain.json
//!                                          (default DIR: testdata)
//! gen-testdata --bench N [--out FILE.rlp]  1 setup block + N full (60M gas) blocks on the bench
//!                                          genesis (default FILE: target/bench-chain.rlp; also
//!                                          writes bench-genesis.json and bench-chain.json beside it)
//! ```
//!
//! The output files are concatenated RLP blocks, as `geth export` writes them and
//! `simnode import` reads them.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use alloy::{
    consensus::{
        transaction::{Recovered, SignerRecoverable},
        Block, SignableTransaction, Signed, TxEip1559, TxEip2930, TxEip4844, TxEip4844Variant,
        TxEip7702, TxEnvelope, TxLegacy,
    },
    eips::{
        eip2930::{AccessList, AccessListItem},
        eip7702::Authorization,
    },
    genesis::Genesis,
    primitives::{keccak256, Address, Bytes, Signature, TxKind, B256, U256},
    rlp::Encodable,
};
use anyhow::{bail, ensure, Context};
use k256::ecdsa::SigningKey;
use serde::Serialize;
use simnode::{
    chain::{self, DEV_ACCOUNTS},
    store::{NewBlock, Store},
    sync::dev::build_block,
};

const GWEI: u128 = 1_000_000_000;
const BLOCK_TIME: u64 = 12;
/// EIP-7825 (Osaka) per-transaction gas cap is 2^24; bench storage calls stay under it.
const FILLER_CALL_GAS: u64 = 16_000_000;

// ---------------------------------------------------------------------------------------------
// Contracts, hand-assembled. Each is runtime code; `initcode` wraps it in a constructor that
// returns it.
// ---------------------------------------------------------------------------------------------

/// The event of [`emitter`]: `Ping(address indexed caller, uint256 value)`.
pub fn ping_topic() -> B256 {
    keccak256("Ping(address,uint256)")
}

/// Emitter: logs `Ping(caller, calldata word 0)` and stores that word in slot 0. Payable.
///
/// ```text
/// 00 PUSH1 0 CALLDATALOAD PUSH1 0 MSTORE      mem[0..32] = v
/// 06 CALLER PUSH32 topic0 PUSH1 32 PUSH1 0    LOG2(0, 32, Ping, caller)
/// 2c LOG2
/// 2d PUSH1 0 CALLDATALOAD PUSH1 0 SSTORE      slot 0 = v
/// 33 STOP
/// ```
fn emitter() -> Vec<u8> {
    let mut code = vec![0x60, 0x00, 0x35, 0x60, 0x00, 0x52, 0x33, 0x7f];
    code.extend_from_slice(ping_topic().as_slice());
    code.extend_from_slice(&[0x60, 0x20, 0x60, 0x00, 0xa2]);
    code.extend_from_slice(&[0x60, 0x00, 0x35, 0x60, 0x00, 0x55, 0x00]);
    code
}

/// The revert reason of [`reverter`].
pub const REVERT_REASON: &str = "simnode: reverted";

/// Reverter: always reverts with `Error("simnode: reverted")` (ABI-encoded, 100 bytes) that it
/// copies from the end of its own code.
///
/// ```text
/// 00 PUSH1 100 PUSH1 12 PUSH1 0 CODECOPY      mem[0..100] = code[12..112]
/// 07 PUSH1 100 PUSH1 0 REVERT
/// 0c <Error(string) encoding>
/// ```
fn reverter() -> Vec<u8> {
    let mut data = vec![0x08, 0xc3, 0x79, 0xa0];
    data.extend_from_slice(&U256::from(32).to_be_bytes::<32>());
    data.extend_from_slice(&U256::from(REVERT_REASON.len()).to_be_bytes::<32>());
    let mut reason = [0u8; 32];
    reason[..REVERT_REASON.len()].copy_from_slice(REVERT_REASON.as_bytes());
    data.extend_from_slice(&reason);
    assert_eq!(data.len(), 100);
    let mut code = vec![
        0x60, 100, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, 100, 0x60, 0x00, 0xfd,
    ];
    code.extend_from_slice(&data);
    code
}

/// Counter: increments slot 0 and returns the new value as one word.
///
/// ```text
/// 00 PUSH1 0 SLOAD PUSH1 1 ADD               v = slot0 + 1
/// 05 DUP1 PUSH1 0 SSTORE                     slot0 = v
/// 09 PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN  return v
/// ```
fn counter() -> Vec<u8> {
    vec![
        0x60, 0x00, 0x54, 0x60, 0x01, 0x01, 0x80, 0x60, 0x00, 0x55, 0x60, 0x00, 0x52, 0x60, 0x20,
        0x60, 0x00, 0xf3,
    ]
}

/// Forwarder: calls `target` with its own calldata and value (a nested call for traces and
/// logs from another address); reverts (empty data) if the inner call fails.
///
/// ```text
/// 00 CALLDATASIZE PUSH1 0 PUSH1 0 CALLDATACOPY          mem = calldata
/// 06 PUSH1 0 PUSH1 0 CALLDATASIZE PUSH1 0 CALLVALUE
/// 0e PUSH20 target GAS CALL                              CALL(gas, target, value, 0, cds, 0, 0)
/// 25 ISZERO PUSH1 0x2a JUMPI STOP
/// 2a JUMPDEST PUSH1 0 PUSH1 0 REVERT
/// ```
fn forwarder(target: Address) -> Vec<u8> {
    let mut code = vec![
        0x36, 0x60, 0x00, 0x60, 0x00, 0x37, 0x60, 0x00, 0x60, 0x00, 0x36, 0x60, 0x00, 0x34, 0x73,
    ];
    code.extend_from_slice(target.as_slice());
    code.extend_from_slice(&[
        0x5a, 0xf1, 0x15, 0x60, 0x2a, 0x57, 0x00, 0x5b, 0x60, 0x00, 0x60, 0x00, 0xfd,
    ]);
    code
}

/// Filler (bench): writes fresh storage slots until less than 50,000 gas is left, so a call
/// uses (almost) all of its gas limit. Slot 0 is a cursor: call k writes slots cursor+1.. .
///
/// ```text
/// 00 PUSH1 0 SLOAD                    c = slot0
/// 03 JUMPDEST PUSH2 50000 GAS GT      loop: while gas > 50000
/// 08 ISZERO PUSH1 0x16 JUMPI
/// 0c PUSH1 1 ADD DUP1 DUP1 SSTORE         c += 1; slot[c] = c
/// 12 PUSH1 3 JUMP
/// 15 JUMPDEST PUSH1 0 SSTORE STOP     slot0 = c
/// ```
fn filler() -> Vec<u8> {
    vec![
        0x60, 0x00, 0x54, 0x5b, 0x61, 0xc3, 0x50, 0x5a, 0x11, 0x15, 0x60, 0x16, 0x57, 0x60, 0x01,
        0x01, 0x80, 0x80, 0x55, 0x60, 0x03, 0x56, 0x5b, 0x60, 0x00, 0x55, 0x00,
    ]
}

/// A constructor that copies `runtime` to memory and returns it.
///
/// ```text
/// 00 PUSH2 len DUP1 PUSH1 12 PUSH1 0 CODECOPY   mem[0..len] = code[12..]
/// 09 PUSH1 0 RETURN                             return mem[0..len]
/// 0c <runtime>
/// ```
fn initcode(runtime: &[u8]) -> Bytes {
    let len = u16::try_from(runtime.len()).expect("runtime fits a PUSH2");
    let [hi, lo] = len.to_be_bytes();
    let mut code = vec![
        0x61, hi, lo, 0x80, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, 0x00, 0xf3,
    ];
    code.extend_from_slice(runtime);
    code.into()
}

/// A constructor that reverts without data: `PUSH1 0 PUSH1 0 REVERT`.
fn reverting_initcode() -> Bytes {
    Bytes::from_static(&[0x60, 0x00, 0x60, 0x00, 0xfd])
}

fn word(v: u64) -> Bytes {
    Bytes::from(U256::from(v).to_be_bytes::<32>().to_vec())
}

/// The versioned hash of the all-zero blob. Its KZG commitment is the point at infinity
/// (compressed: 0xc0 followed by 47 zero bytes), so this is a real versioned hash and the
/// sidecar could be rebuilt; every blob of the generated chains is that blob.
fn zero_blob_versioned_hash() -> B256 {
    use sha2::Digest;
    let mut commitment = [0u8; 48];
    commitment[0] = 0xc0;
    let mut hash = B256::from_slice(&sha2::Sha256::digest(commitment));
    hash[0] = alloy::eips::eip4844::VERSIONED_HASH_VERSION_KZG;
    hash
}

// ---------------------------------------------------------------------------------------------
// Signing
// ---------------------------------------------------------------------------------------------

struct Wallet {
    key: SigningKey,
    address: Address,
    nonce: u64,
}

impl Wallet {
    fn sign_hash(&self, hash: B256) -> anyhow::Result<Signature> {
        chain::sign_hash(&self.key, hash)
    }

    /// Signs the transaction `make` builds with this wallet's next nonce and checks the signature
    /// recovers to this wallet, as an importer will check it.
    fn sign<T>(&mut self, make: impl FnOnce(u64) -> T) -> anyhow::Result<Recovered<TxEnvelope>>
    where
        T: SignableTransaction<Signature>,
        TxEnvelope: From<Signed<T>>,
    {
        let tx = make(self.nonce);
        let signature = self.sign_hash(tx.signature_hash())?;
        let envelope = TxEnvelope::from(tx.into_signed(signature));
        let signer = envelope.recover_signer()?;
        ensure!(signer == self.address, "signature recovers to {signer}");
        self.nonce += 1;
        Ok(Recovered::new_unchecked(envelope, self.address))
    }

    fn authorize(
        &mut self,
        chain_id: u64,
        delegate: Address,
    ) -> anyhow::Result<alloy::eips::eip7702::SignedAuthorization> {
        let auth = Authorization {
            chain_id: U256::from(chain_id),
            address: delegate,
            nonce: self.nonce,
        };
        let signature = self.sign_hash(auth.signature_hash())?;
        let signed = auth.into_signed(signature);
        ensure!(
            signed.recover_authority()? == self.address,
            "authorization recovers to another address"
        );
        // A valid authorization bumps the authority's nonce when its transaction runs.
        self.nonce += 1;
        Ok(signed)
    }
}

fn wallets() -> anyhow::Result<Vec<Wallet>> {
    Ok(chain::dev_signing_keys()?
        .into_iter()
        .map(|(address, key)| Wallet {
            key,
            address,
            nonce: 0,
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// Transaction templates (fees follow the next block's base fee)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Fees {
    /// Legacy / 2930 gas price.
    gas_price: u128,
    max_fee: u128,
    tip: u128,
}

fn legacy(
    nonce: u64,
    f: Fees,
    chain_id: Option<u64>,
    to: TxKind,
    value: U256,
    input: Bytes,
    gas: u64,
) -> TxLegacy {
    TxLegacy {
        chain_id,
        nonce,
        gas_price: f.gas_price,
        gas_limit: gas,
        to,
        value,
        input,
    }
}

fn eip2930(
    nonce: u64,
    f: Fees,
    to: TxKind,
    value: U256,
    input: Bytes,
    gas: u64,
    access_list: AccessList,
) -> TxEip2930 {
    TxEip2930 {
        chain_id: chain::DEV_CHAIN_ID,
        nonce,
        gas_price: f.gas_price,
        gas_limit: gas,
        to,
        value,
        access_list,
        input,
    }
}

fn eip1559(nonce: u64, f: Fees, to: TxKind, value: U256, input: Bytes, gas: u64) -> TxEip1559 {
    TxEip1559 {
        chain_id: chain::DEV_CHAIN_ID,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: f.max_fee,
        max_priority_fee_per_gas: f.tip,
        to,
        value,
        access_list: AccessList::default(),
        input,
    }
}

fn ether(n: u64) -> U256 {
    U256::from(n) * U256::from(10u64).pow(U256::from(18))
}

/// A fresh, deterministic address nobody has a key for.
fn fresh_address(tag: &str, i: u64) -> Address {
    let mut seed = tag.as_bytes().to_vec();
    seed.extend_from_slice(&i.to_be_bytes());
    Address::from_slice(&keccak256(seed)[12..])
}

// ---------------------------------------------------------------------------------------------
// Chain building
// ---------------------------------------------------------------------------------------------

struct Builder {
    store: Store,
    wallets: Vec<Wallet>,
    blocks: Vec<NewBlock>,
    datadir: PathBuf,
}

impl Builder {
    fn new(genesis: &Genesis, tag: &str) -> anyhow::Result<Self> {
        let datadir = std::env::temp_dir().join(format!(
            "simnode-gen-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        let node_chain = chain::from_genesis(tag, genesis);
        let store = Store::open(
            &datadir,
            Arc::new(node_chain.spec.clone()),
            node_chain.alloc.as_ref(),
        )?;
        Ok(Self {
            store,
            wallets: wallets()?,
            blocks: Vec::new(),
            datadir,
        })
    }

    /// Fees that any transaction of the next block can pay: the gas price is twice the next
    /// base fee plus the tip.
    fn fees(&self) -> anyhow::Result<Fees> {
        let head = self.store.head_header()?;
        let base = self
            .store
            .spec()
            .next_base_fee(&head)
            .context("the chain has no base fee")? as u128;
        let tip = GWEI;
        Ok(Fees {
            gas_price: 2 * base + tip,
            max_fee: 2 * base + tip,
            tip,
        })
    }

    fn next_number(&self) -> u64 {
        self.store.head().latest + 1
    }

    /// Builds and stores the next block from `txs`, which must all be included.
    fn block(&mut self, txs: Vec<Recovered<TxEnvelope>>) -> anyhow::Result<&NewBlock> {
        let number = self.next_number();
        let block = build_block(&self.store, &txs, number * BLOCK_TIME)?;
        let included: Vec<B256> = block
            .body
            .transactions
            .iter()
            .map(|t| *t.tx_hash())
            .collect();
        let wanted: Vec<B256> = txs.iter().map(|t| *t.tx_hash()).collect();
        if included != wanted {
            let missing: Vec<_> = wanted.iter().filter(|h| !included.contains(h)).collect();
            bail!("block {number}: the builder left out {missing:?}");
        }
        self.blocks.push(block);
        Ok(self.blocks.last().expect("just pushed"))
    }

    fn rlp(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for b in &self.blocks {
            let block = Block {
                header: b.header.inner().clone(),
                body: b.body.clone(),
            };
            block.encode(&mut out);
        }
        out
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.datadir);
    }
}

// ---------------------------------------------------------------------------------------------
// The testdata chain
// ---------------------------------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    description: &'static str,
    chain: &'static str,
    chain_id: u64,
    genesis_hash: B256,
    head: BlockRef,
    block_time: u64,
    blocks: Vec<BlockInfo>,
    accounts: Vec<Address>,
    contracts: BTreeMap<&'static str, Address>,
    /// The event every emitter call logs: Ping(address indexed caller, uint256 value).
    ping_topic: B256,
    revert_reason: &'static str,
    blob_versioned_hash: B256,
    /// The block with the most transactions (>= 50).
    busy_block: u64,
    cases: BTreeMap<&'static str, Case>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BlockRef {
    number: u64,
    hash: B256,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BlockInfo {
    number: u64,
    hash: B256,
    timestamp: u64,
    transactions: usize,
    gas_used: u64,
    blob_gas_used: u64,
    base_fee_per_gas: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    block: u64,
    index: usize,
    hash: B256,
    #[serde(rename = "type")]
    tx_type: u8,
    from: Address,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<Address>,
    /// Receipt status expected.
    status: bool,
    /// Number of logs expected in the receipt.
    logs: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    contract_address: Option<Address>,
    note: &'static str,
}

/// What a case expects, recorded at signing time and placed once its block is built.
struct Pending {
    name: &'static str,
    hash: B256,
    status: bool,
    logs: usize,
    contract_address: Option<Address>,
    note: &'static str,
}

struct TestChain {
    b: Builder,
    cases: BTreeMap<&'static str, Case>,
    pending: Vec<Pending>,
}

impl TestChain {
    /// Remembers `tx` as the named case.
    fn case(
        &mut self,
        name: &'static str,
        tx: &Recovered<TxEnvelope>,
        status: bool,
        logs: usize,
        contract_address: Option<Address>,
        note: &'static str,
    ) {
        self.pending.push(Pending {
            name,
            hash: *tx.tx_hash(),
            status,
            logs,
            contract_address,
            note,
        });
    }

    fn block(&mut self, txs: Vec<Recovered<TxEnvelope>>) -> anyhow::Result<()> {
        let block = self.b.block(txs)?;
        let number = block.header.number;
        for p in self.pending.drain(..) {
            let index = block
                .body
                .transactions
                .iter()
                .position(|t| *t.tx_hash() == p.hash)
                .with_context(|| format!("case {} is not in block {number}", p.name))?;
            let tx = &block.body.transactions[index];
            let receipt = &block.receipts[index];
            ensure!(
                receipt.status() == p.status,
                "case {}: status {} expected {}",
                p.name,
                receipt.status(),
                p.status
            );
            ensure!(
                receipt.logs().len() == p.logs,
                "case {}: {} logs, expected {}",
                p.name,
                receipt.logs().len(),
                p.logs
            );
            use alloy::consensus::Transaction;
            self.cases.insert(
                p.name,
                Case {
                    block: number,
                    index,
                    hash: p.hash,
                    tx_type: tx.tx_type() as u8,
                    from: block.senders[index],
                    to: tx.to(),
                    status: p.status,
                    logs: p.logs,
                    contract_address: p.contract_address,
                    note: p.note,
                },
            );
        }
        Ok(())
    }
}

fn testdata_chain() -> anyhow::Result<(Vec<u8>, Manifest)> {
    let genesis = chain::dev_genesis();
    let mut t = TestChain {
        b: Builder::new(&genesis, "dev")?,
        cases: BTreeMap::new(),
        pending: Vec::new(),
    };
    let create = TxKind::Create;
    let zero = U256::ZERO;

    // Addresses of the contracts deployed in block 1.
    let emitter_addr = t.b.wallets[0].address.create(0);
    let counter_addr = t.b.wallets[1].address.create(0);
    let reverter_addr = t.b.wallets[2].address.create(0);
    let forwarder_addr = t.b.wallets[0].address.create(1);
    let (a3, a5, a9) = (
        t.b.wallets[3].address,
        t.b.wallets[5].address,
        t.b.wallets[9].address,
    );

    // Block 1: deployments, one per transaction type that can create.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let tx_emitter = w[0].sign(|n| {
        legacy(
            n,
            f,
            Some(1337),
            create,
            zero,
            initcode(&emitter()),
            200_000,
        )
    })?;
    let tx_forwarder = w[0].sign(|n| {
        eip1559(
            n,
            f,
            create,
            zero,
            initcode(&forwarder(emitter_addr)),
            200_000,
        )
    })?;
    let tx_counter = w[1].sign(|n| {
        eip2930(
            n,
            f,
            create,
            zero,
            initcode(&counter()),
            200_000,
            AccessList::default(),
        )
    })?;
    let tx_reverter = w[2].sign(|n| eip1559(n, f, create, zero, initcode(&reverter()), 200_000))?;
    t.case(
        "deployEmitter",
        &tx_emitter,
        true,
        0,
        Some(emitter_addr),
        "legacy (EIP-155) contract creation: Emitter",
    );
    t.case(
        "deployForwarder",
        &tx_forwarder,
        true,
        0,
        Some(forwarder_addr),
        "EIP-1559 contract creation: Forwarder (calls Emitter)",
    );
    t.case(
        "deployCounter",
        &tx_counter,
        true,
        0,
        Some(counter_addr),
        "EIP-2930 contract creation: Counter",
    );
    t.case(
        "deployReverter",
        &tx_reverter,
        true,
        0,
        Some(reverter_addr),
        "EIP-1559 contract creation: Reverter",
    );
    t.block(vec![tx_emitter, tx_forwarder, tx_counter, tx_reverter])?;

    // Block 2: calls, an event, a revert, value transfers of every pre-blob type.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let call = TxKind::Call;
    let tx_event = w[1].sign(|n| eip1559(n, f, call(emitter_addr), zero, word(42), 100_000))?;
    let tx_revert =
        w[2].sign(|n| eip1559(n, f, call(reverter_addr), zero, Bytes::new(), 100_000))?;
    let tx_legacy =
        w[3].sign(|n| legacy(n, f, Some(1337), call(a9), ether(1), Bytes::new(), 21_000))?;
    let tx_unprotected =
        w[3].sign(|n| legacy(n, f, None, call(a9), ether(2), Bytes::new(), 21_000))?;
    let access = AccessList(vec![AccessListItem {
        address: counter_addr,
        storage_keys: vec![B256::ZERO],
    }]);
    let tx_2930_call = w[4].sign(|n| {
        eip2930(
            n,
            f,
            call(counter_addr),
            zero,
            Bytes::new(),
            100_000,
            access,
        )
    })?;
    let tx_2930_transfer = w[4].sign(|n| {
        eip2930(
            n,
            f,
            call(a9),
            ether(3),
            Bytes::new(),
            21_000,
            AccessList::default(),
        )
    })?;
    let tx_1559_transfer = w[6].sign(|n| {
        eip1559(
            n,
            f,
            call(fresh_address("transfer", 0)),
            ether(1),
            Bytes::new(),
            21_000,
        )
    })?;
    let tx_forward = w[7].sign(|n| {
        eip1559(
            n,
            f,
            call(forwarder_addr),
            U256::from(1000),
            word(7),
            200_000,
        )
    })?;
    t.case(
        "emitEvent",
        &tx_event,
        true,
        1,
        None,
        "EIP-1559 call to Emitter with word 42: one Ping(caller, 42) log",
    );
    t.case(
        "revert",
        &tx_revert,
        false,
        0,
        None,
        "EIP-1559 call to Reverter: status 0, reverts with Error(\"simnode: reverted\")",
    );
    t.case(
        "legacyTransfer",
        &tx_legacy,
        true,
        0,
        None,
        "legacy EIP-155 transfer of 1 ETH to account 9",
    );
    t.case(
        "legacyUnprotectedTransfer",
        &tx_unprotected,
        true,
        0,
        None,
        "legacy pre-EIP-155 (no chain id) transfer of 2 ETH to account 9",
    );
    t.case(
        "accessListCall",
        &tx_2930_call,
        true,
        0,
        None,
        "EIP-2930 call to Counter with an access list (Counter, slot 0)",
    );
    t.case(
        "accessListTransfer",
        &tx_2930_transfer,
        true,
        0,
        None,
        "EIP-2930 transfer of 3 ETH to account 9",
    );
    t.case(
        "dynamicFeeTransfer",
        &tx_1559_transfer,
        true,
        0,
        None,
        "EIP-1559 transfer of 1 ETH to a new account",
    );
    t.case("nestedCall", &tx_forward, true, 1, None, "EIP-1559 call to Forwarder with 1000 wei, which calls Emitter: the log comes from Emitter with caller = Forwarder");
    t.block(vec![
        tx_event,
        tx_revert,
        tx_legacy,
        tx_unprotected,
        tx_2930_call,
        tx_2930_transfer,
        tx_1559_transfer,
        tx_forward,
    ])?;

    // Block 3: blob transactions (3 blobs in all) and a plain transfer beside them.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let blob_hash = zero_blob_versioned_hash();
    let blob_tx = |nonce: u64, blobs: usize, input: Bytes| -> TxEip4844Variant {
        TxEip4844Variant::TxEip4844(TxEip4844 {
            chain_id: chain::DEV_CHAIN_ID,
            nonce,
            gas_limit: 100_000,
            max_fee_per_gas: f.max_fee,
            max_priority_fee_per_gas: f.tip,
            to: emitter_addr,
            value: U256::ZERO,
            access_list: AccessList::default(),
            blob_versioned_hashes: vec![blob_hash; blobs],
            max_fee_per_blob_gas: GWEI,
            input,
        })
    };
    let tx_blob2 = w[3].sign(|n| blob_tx(n, 2, word(4844)))?;
    let tx_blob1 = w[8].sign(|n| blob_tx(n, 1, word(4845)))?;
    let tx_plain = w[8].sign(|n| eip1559(n, f, call(a3), ether(1), Bytes::new(), 21_000))?;
    t.case(
        "blobTx",
        &tx_blob2,
        true,
        1,
        None,
        "EIP-4844 call to Emitter carrying 2 (zero) blobs: 262144 blob gas",
    );
    t.case(
        "blobTxSingle",
        &tx_blob1,
        true,
        1,
        None,
        "EIP-4844 call to Emitter carrying 1 (zero) blob",
    );
    t.block(vec![tx_blob2, tx_blob1, tx_plain])?;

    // Block 4: EIP-7702. Account 4 sends a set-code transaction carrying account 5's
    // authorization to delegate to Emitter, and calls account 5 in it.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let auth = w[5].authorize(chain::DEV_CHAIN_ID, emitter_addr)?;
    let tx_7702 = |nonce| TxEip7702 {
        chain_id: chain::DEV_CHAIN_ID,
        nonce,
        gas_limit: 200_000,
        max_fee_per_gas: f.max_fee,
        max_priority_fee_per_gas: f.tip,
        to: a5,
        value: U256::ZERO,
        access_list: AccessList::default(),
        authorization_list: vec![auth],
        input: word(7702),
    };
    let tx_7702 = w[4].sign(tx_7702)?;
    t.case("setCode", &tx_7702, true, 1, None, "EIP-7702: account 4 sends account 5's authorization (delegate to Emitter, chain 1337) and calls account 5 with word 7702: Ping log from account 5");
    t.block(vec![tx_7702])?;

    // Block 5: calls through the delegated EOA, from another account and from itself.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let tx_delegated = w[6].sign(|n| eip1559(n, f, call(a5), U256::from(5), word(5), 100_000))?;
    let tx_self = w[5].sign(|n| eip1559(n, f, call(a5), zero, word(55), 100_000))?;
    t.case("delegatedCall", &tx_delegated, true, 1, None, "EIP-1559 call from account 6 to the delegated account 5 (runs Emitter code): Ping log from account 5, slot 0 = 5");
    t.case(
        "delegatedSelfCall",
        &tx_self,
        true,
        1,
        None,
        "the delegated account 5 sends a transaction to itself: Ping(account 5, 55)",
    );
    t.block(vec![tx_delegated, tx_self])?;

    // Block 6: a busy block of 60 transactions from all ten accounts (every type but blobs),
    // with one revert and one out-of-gas call among them.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let mut txs = Vec::new();
    for i in 0..60u64 {
        let s = (i % 10) as usize;
        let tx = match i {
            30 => w[s].sign(|n| {
                legacy(
                    n,
                    f,
                    Some(1337),
                    call(reverter_addr),
                    zero,
                    Bytes::new(),
                    60_000,
                )
            })?,
            // 21,000 intrinsic + 2,000: Counter's cold SLOAD alone needs 2,100.
            45 => w[s].sign(|n| eip1559(n, f, call(counter_addr), zero, Bytes::new(), 23_000))?,
            _ => match i % 6 {
                0 => w[s].sign(|n| {
                    legacy(
                        n,
                        f,
                        Some(1337),
                        call(fresh_address("busy", i)),
                        U256::from(i + 1),
                        Bytes::new(),
                        21_000,
                    )
                })?,
                1 => {
                    w[s].sign(|n| eip1559(n, f, call(emitter_addr), zero, word(1000 + i), 100_000))?
                }
                2 => {
                    let access = AccessList(vec![AccessListItem {
                        address: counter_addr,
                        storage_keys: vec![B256::ZERO],
                    }]);
                    w[s].sign(|n| {
                        eip2930(
                            n,
                            f,
                            call(counter_addr),
                            zero,
                            Bytes::new(),
                            100_000,
                            access,
                        )
                    })?
                }
                3 => w[s].sign(|n| {
                    eip1559(
                        n,
                        f,
                        call(fresh_address("busy", i)),
                        U256::from(i + 1),
                        Bytes::new(),
                        21_000,
                    )
                })?,
                4 => w[s]
                    .sign(|n| eip1559(n, f, call(forwarder_addr), zero, word(2000 + i), 200_000))?,
                _ => w[s].sign(|n| {
                    legacy(
                        n,
                        f,
                        Some(1337),
                        call(emitter_addr),
                        zero,
                        word(3000 + i),
                        100_000,
                    )
                })?,
            },
        };
        txs.push(tx);
    }
    t.case(
        "busyRevert",
        &txs[30],
        false,
        0,
        None,
        "legacy call to Reverter in the busy block: status 0",
    );
    t.case(
        "outOfGas",
        &txs[45],
        false,
        0,
        None,
        "EIP-1559 call to Counter with 23,000 gas: out of gas, all gas used",
    );
    let busy_block = t.b.next_number();
    t.block(txs)?;

    // Block 7: account 5 revokes its delegation (authorization to the zero address, valid on
    // any chain: chain id 0), a call to it then runs no code; a constructor that reverts; and
    // 20 transfers.
    let f = t.b.fees()?;
    let w = &mut t.b.wallets;
    let revoke = w[5].authorize(0, Address::ZERO)?;
    let tx_revoke = |nonce| TxEip7702 {
        chain_id: chain::DEV_CHAIN_ID,
        nonce,
        gas_limit: 100_000,
        max_fee_per_gas: f.max_fee,
        max_priority_fee_per_gas: f.tip,
        to: a9,
        value: U256::from(1),
        access_list: AccessList::default(),
        authorization_list: vec![revoke],
        input: Bytes::new(),
    };
    let tx_revoke = w[4].sign(tx_revoke)?;
    let tx_after = w[6].sign(|n| eip1559(n, f, call(a5), U256::from(1), word(6), 100_000))?;
    let tx_bad_create =
        w[7].sign(|n| eip1559(n, f, create, zero, reverting_initcode(), 100_000))?;
    let mut txs = vec![tx_revoke, tx_after, tx_bad_create];
    for i in 0..20u64 {
        let s = [0usize, 1, 2, 3, 8, 9][(i % 6) as usize];
        txs.push(w[s].sign(|n| {
            eip1559(
                n,
                f,
                call(fresh_address("block7", i)),
                ether(1),
                Bytes::new(),
                21_000,
            )
        })?);
    }
    t.case(
        "revokeDelegation",
        &txs[0],
        true,
        0,
        None,
        "EIP-7702 with account 5's authorization to the zero address (chain id 0): clears its code",
    );
    t.case(
        "callRevokedAccount",
        &txs[1],
        true,
        0,
        None,
        "call to account 5 after the revocation: a plain transfer, no logs",
    );
    t.case(
        "failedCreate",
        &txs[2],
        false,
        0,
        None,
        "EIP-1559 contract creation whose constructor reverts: status 0, no contract",
    );
    t.block(txs)?;

    // Block 8: empty.
    t.block(Vec::new())?;

    ensure!(t.pending.is_empty(), "unplaced cases");
    let rlp = t.b.rlp();
    let head = t.b.blocks.last().context("no blocks")?;
    let manifest = Manifest {
        description: "Generated by `just testdata` (src/bin/gen-testdata.rs): import with `simnode import --chain dev testdata/devchain.rlp`.",
        chain: "dev",
        chain_id: chain::DEV_CHAIN_ID,
        genesis_hash: t.b.store.spec().genesis_header.hash(),
        head: BlockRef {
            number: head.header.number,
            hash: head.header.hash(),
        },
        block_time: BLOCK_TIME,
        blocks: t.b.blocks.iter().map(block_info).collect(),
        accounts: DEV_ACCOUNTS.to_vec(),
        contracts: BTreeMap::from([
            ("emitter", emitter_addr),
            ("counter", counter_addr),
            ("reverter", reverter_addr),
            ("forwarder", forwarder_addr),
        ]),
        ping_topic: ping_topic(),
        revert_reason: REVERT_REASON,
        blob_versioned_hash: blob_hash,
        busy_block,
        cases: std::mem::take(&mut t.cases),
    };
    Ok((rlp, manifest))
}

fn block_info(b: &NewBlock) -> BlockInfo {
    BlockInfo {
        number: b.header.number,
        hash: b.header.hash(),
        timestamp: b.header.timestamp,
        transactions: b.body.transactions.len(),
        gas_used: b.header.gas_used,
        blob_gas_used: b.header.blob_gas_used.unwrap_or_default(),
        base_fee_per_gas: b.header.base_fee_per_gas.unwrap_or_default(),
    }
}

// ---------------------------------------------------------------------------------------------
// The bench chain
// ---------------------------------------------------------------------------------------------

/// The bench genesis: the dev chain with a genesis base fee of 7 wei instead of 1 gwei. Two
/// hundred full blocks raise the base fee by 12.5% each (x 1.6e10 in all); from 1 gwei that
/// would cost more ether than the dev accounts hold, from 7 wei it ends near 40 gwei.
fn bench_genesis() -> Genesis {
    let mut genesis = chain::dev_genesis();
    genesis.base_fee_per_gas = Some(7);
    genesis
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BenchSummary {
    genesis: String,
    blocks: u64,
    transactions: u64,
    gas_used: u64,
    head: BlockRef,
}

/// Block 1 deploys three Fillers (accounts 0-2); each of the next `n` blocks holds three
/// 16M-gas Filler calls (fresh storage slots) and 571 transfers of 1 wei to new accounts
/// (accounts 3-9), about 59.9M of the 60M gas limit.
fn bench_chain(n: u64) -> anyhow::Result<(Vec<u8>, BenchSummary, Genesis)> {
    let genesis = bench_genesis();
    let mut b = Builder::new(&genesis, "bench")?;
    let gas_limit = genesis.gas_limit;
    let fillers: Vec<Address> = (0..3).map(|i| b.wallets[i].address.create(0)).collect();

    let f = b.fees()?;
    let mut txs = Vec::new();
    for i in 0..3 {
        let w = &mut b.wallets[i];
        txs.push(w.sign(|n| {
            eip1559(
                n,
                f,
                TxKind::Create,
                U256::ZERO,
                initcode(&filler()),
                200_000,
            )
        })?);
    }
    b.block(txs)?;

    let transfers = (gas_limit - 3 * FILLER_CALL_GAS) / 21_000;
    let mut fresh = 0u64;
    for _ in 0..n {
        let f = b.fees()?;
        let mut txs = Vec::with_capacity(3 + transfers as usize);
        for (i, filler) in fillers.iter().enumerate() {
            let w = &mut b.wallets[i];
            txs.push(w.sign(|n| {
                eip1559(
                    n,
                    f,
                    TxKind::Call(*filler),
                    U256::ZERO,
                    Bytes::new(),
                    FILLER_CALL_GAS,
                )
            })?);
        }
        for k in 0..transfers {
            let w = &mut b.wallets[3 + (k % 7) as usize];
            fresh += 1;
            let to = fresh_address("bench", fresh);
            txs.push(
                w.sign(|n| eip1559(n, f, TxKind::Call(to), U256::from(1), Bytes::new(), 21_000))?,
            );
        }
        let block = b.block(txs)?;
        ensure!(
            block.header.gas_used * 100 >= gas_limit * 99,
            "block {} is not full: {} gas",
            block.header.number,
            block.header.gas_used
        );
        if block.header.number % 20 == 0 {
            eprintln!(
                "gen-testdata: bench block {} of {}",
                block.header.number,
                n + 1
            );
        }
    }
    let head = b.blocks.last().context("no blocks")?;
    let summary = BenchSummary {
        genesis: String::new(),
        blocks: b.blocks.len() as u64,
        transactions: b
            .blocks
            .iter()
            .map(|b| b.body.transactions.len() as u64)
            .sum(),
        gas_used: b.blocks.iter().map(|b| b.header.gas_used).sum(),
        head: BlockRef {
            number: head.header.number,
            hash: head.header.hash(),
        },
    };
    Ok((b.rlp(), summary, genesis))
}

// ---------------------------------------------------------------------------------------------

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn json<T: Serialize>(value: &T) -> anyhow::Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    Ok(text)
}

fn usage() -> ! {
    eprintln!("usage: gen-testdata [--out DIR] | gen-testdata --bench N [--out FILE.rlp]");
    std::process::exit(2)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut out, mut bench) = (None::<PathBuf>, None::<u64>);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(args.next().unwrap_or_else(|| usage()).into()),
            "--bench" => {
                let n = args.next().unwrap_or_else(|| usage());
                bench = Some(n.parse().with_context(|| format!("--bench {n}"))?);
            }
            _ => usage(),
        }
    }
    match bench {
        None => {
            let dir = out.unwrap_or_else(|| "testdata".into());
            let (rlp, manifest) = testdata_chain()?;
            write(&dir.join("devchain.rlp"), &rlp)?;
            write(&dir.join("devchain.json"), &json(&manifest)?)?;
            println!(
                "{}: {} blocks, head #{} {}, {} bytes",
                dir.join("devchain.rlp").display(),
                manifest.blocks.len(),
                manifest.head.number,
                manifest.head.hash,
                rlp.len()
            );
        }
        Some(n) => {
            ensure!(n >= 1, "--bench needs at least one block");
            let file = out.unwrap_or_else(|| "target/bench-chain.rlp".into());
            let (rlp, mut summary, genesis) = bench_chain(n)?;
            let genesis_path = file.with_file_name("bench-genesis.json");
            summary.genesis = genesis_path.display().to_string();
            write(&genesis_path, &json(&genesis)?)?;
            write(&file, &rlp)?;
            write(&file.with_extension("json"), &json(&summary)?)?;
            println!(
                "{}: {} blocks, {} transactions, {} gas, head #{} {} (genesis {})",
                file.display(),
                summary.blocks,
                summary.transactions,
                summary.gas_used,
                summary.head.number,
                summary.head.hash,
                genesis_path.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_dev_accounts() {
        let w = wallets().expect("keys");
        assert_eq!(w.len(), 10);
    }

    #[test]
    fn zero_blob_hash_is_versioned() {
        let h = zero_blob_versioned_hash();
        assert_eq!(h[0], 1);
    }

    #[test]
    fn initcode_header_is_12_bytes() {
        let code = initcode(&[0xaa, 0xbb]);
        assert_eq!(&code[12..], &[0xaa, 0xbb]);
        assert_eq!(&code[..3], &[0x61, 0x00, 0x02]);
    }
}
