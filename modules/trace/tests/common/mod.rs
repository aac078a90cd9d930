//! A small in-memory chain to serve `trace_callMany` from: a Prague chain of two blocks whose
//! state is a revm `CacheDB` with accounts and hand-assembled contracts, behind the same
//! `ChainView` the node gives modules.

#![allow(dead_code)]

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::primitives::Sealable;
use alloy::{
    consensus::Header,
    eips::eip7840::BlobParams,
    primitives::{Address, Bytes, B256, U256},
};
use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork as F, ForkCondition};
use revm::{
    bytecode::Bytecode,
    database::{CacheDB, EmptyDB},
    state::AccountInfo,
};
use serde_json::Value;
use simnode_api::{
    testing::{MemoryChain, MemoryPool},
    ChainSpec, ModuleContext, RpcLimits,
};
use simnode_trace::TraceLimits;

pub const COINBASE: Address = Address::repeat_byte(0xc0);
pub const BASE_FEE: u64 = 7;
pub const BLOCK_GAS_LIMIT: u64 = 30_000_000;
pub const TIMESTAMP: u64 = 1_700_000_000;

pub fn spec() -> ChainSpec {
    let mut forks: Vec<(F, ForkCondition)> = [
        F::Frontier,
        F::Homestead,
        F::Tangerine,
        F::SpuriousDragon,
        F::Byzantium,
        F::Constantinople,
        F::Petersburg,
        F::Istanbul,
        F::Berlin,
        F::London,
    ]
    .into_iter()
    .map(|f| (f, ForkCondition::Block(0)))
    .collect();
    forks.push((
        F::Paris,
        ForkCondition::TTD {
            activation_block_number: 0,
            fork_block: None,
            total_difficulty: U256::ZERO,
        },
    ));
    for f in [F::Shanghai, F::Cancun, F::Prague] {
        forks.push((f, ForkCondition::Timestamp(0)));
    }
    ChainSpec {
        name: "custom".into(),
        chain_id: 1337,
        hardforks: EthereumChainHardforks::new(forks),
        blob_schedule: vec![(0, BlobParams::cancun()), (0, BlobParams::prague())],
        deposit_contract: None,
        genesis_header: header(0).seal_slow(),
    }
}

pub fn header(number: u64) -> Header {
    header_with_base_fee(number, BASE_FEE)
}

pub fn header_with_base_fee(number: u64, base_fee: u64) -> Header {
    header_with(number, base_fee, COINBASE)
}

pub fn header_with(number: u64, base_fee: u64, coinbase: Address) -> Header {
    Header {
        number,
        timestamp: TIMESTAMP + 12 * number,
        gas_limit: BLOCK_GAS_LIMIT,
        base_fee_per_gas: Some(base_fee),
        beneficiary: coinbase,
        excess_blob_gas: Some(0),
        blob_gas_used: Some(0),
        parent_beacon_block_root: Some(B256::ZERO),
        requests_hash: Some(B256::ZERO),
        withdrawals_root: Some(B256::ZERO),
        ..Default::default()
    }
}

/// Chain state as accounts are added to it; every block sees the same state.
#[derive(Default)]
pub struct Genesis {
    db: CacheDB<EmptyDB>,
    base_fee: Option<u64>,
    coinbase: Option<Address>,
}

impl Genesis {
    pub fn coinbase(mut self, coinbase: Address) -> Self {
        self.coinbase = Some(coinbase);
        self
    }

    pub fn base_fee(mut self, base_fee: u64) -> Self {
        self.base_fee = Some(base_fee);
        self
    }

    pub fn account(mut self, address: Address, balance: U256) -> Self {
        self.db.insert_account_info(
            address,
            AccountInfo {
                balance,
                ..Default::default()
            },
        );
        self
    }

    pub fn account_with_nonce(mut self, address: Address, balance: U256, nonce: u64) -> Self {
        self.db.insert_account_info(
            address,
            AccountInfo {
                balance,
                nonce,
                ..Default::default()
            },
        );
        self
    }

    pub fn contract(mut self, address: Address, balance: U256, code: &[u8]) -> Self {
        let code = Bytecode::new_raw(Bytes::copy_from_slice(code));
        self.db.insert_account_info(
            address,
            AccountInfo {
                balance,
                nonce: 1,
                code_hash: code.hash_slow(),
                code: Some(code),
                ..Default::default()
            },
        );
        self
    }

    pub fn storage(mut self, address: Address, slot: U256, value: U256) -> Self {
        self.db
            .insert_account_storage(address, slot, value)
            .expect("account exists");
        self
    }

    pub fn context(self) -> ModuleContext {
        let spec = Arc::new(spec());
        let state = Arc::new(self.db);
        let chain = (0..2).fold(MemoryChain::new(), |chain, n| {
            let header = header_with(
                n,
                self.base_fee.unwrap_or(BASE_FEE),
                self.coinbase.unwrap_or(COINBASE),
            );
            chain.header(header.seal_slow()).state(n, state.clone())
        });
        ModuleContext {
            spec,
            chain: Arc::new(chain),
            pool: Arc::new(MemoryPool::default()),
            limits: Arc::new(RpcLimits::default()),
        }
    }

    pub fn methods(self) -> jsonrpsee::Methods {
        simnode_trace::rpc_module(self.context())
    }

    pub fn methods_with(self, f: impl FnOnce(&mut TraceLimits)) -> jsonrpsee::Methods {
        let ctx = self.context();
        let mut limits = TraceLimits::from_rpc(&ctx.limits);
        f(&mut limits);
        simnode_trace::rpc_module_with_limits(ctx, limits)
    }
}

/// Sends one JSON-RPC request and returns the whole response object.
pub async fn request(methods: &jsonrpsee::Methods, params: Value) -> Value {
    let req = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "trace_callMany", "params": params});
    raw(methods, &req.to_string()).await
}

pub async fn raw(methods: &jsonrpsee::Methods, req: &str) -> Value {
    let (resp, _rx) =
        tokio::time::timeout(Duration::from_secs(60), methods.raw_json_request(req, 1))
            .await
            .expect("answered within a minute")
            .expect("request is JSON-RPC");
    serde_json::from_str(resp.get()).expect("response is JSON")
}

/// The `result` of a successful response; panics with the response otherwise.
pub async fn result(methods: &jsonrpsee::Methods, params: Value) -> Value {
    let resp = request(methods, params).await;
    match resp.get("result") {
        Some(r) => r.clone(),
        None => panic!("expected a result, got {resp}"),
    }
}

/// The error code of a failed response; panics with the response otherwise.
pub async fn error_code(methods: &jsonrpsee::Methods, params: Value) -> i64 {
    let resp = request(methods, params).await;
    match resp.pointer("/error/code").and_then(Value::as_i64) {
        Some(c) => c,
        None => panic!("expected an error, got {resp}"),
    }
}

/// Assembles EVM code from mnemonics. `PUSHn` takes the next token as its immediate (hex,
/// left-padded to n bytes); `name:` marks a position and `@name` after `PUSH2` refers to it.
pub fn asm(src: &str) -> Vec<u8> {
    let ops: HashMap<&str, u8> = OPS.iter().copied().collect();
    let mut code = Vec::new();
    let mut labels = HashMap::new();
    let mut fixups = Vec::new();
    let mut tokens = src.split_whitespace();
    while let Some(tok) = tokens.next() {
        if let Some(label) = tok.strip_suffix(':') {
            labels.insert(label.to_string(), code.len());
            continue;
        }
        if let Some(n) = tok
            .strip_prefix("PUSH")
            .and_then(|n| n.parse::<usize>().ok())
        {
            code.push(0x5f + n as u8);
            if n == 0 {
                continue;
            }
            let imm = tokens.next().expect("PUSH immediate");
            if let Some(label) = imm.strip_prefix('@') {
                assert_eq!(n, 2, "labels are PUSH2");
                fixups.push((code.len(), label.to_string()));
                code.extend([0, 0]);
                continue;
            }
            let hex = imm.trim_start_matches("0x");
            let hex = if hex.len() % 2 == 1 {
                format!("0{hex}")
            } else {
                hex.to_string()
            };
            let bytes = alloy::hex::decode(&hex).expect("hex immediate");
            assert!(bytes.len() <= n, "immediate {imm} too long for PUSH{n}");
            code.extend(std::iter::repeat_n(0, n - bytes.len()));
            code.extend(bytes);
            continue;
        }
        if let Some(n) = tok.strip_prefix("DUP").and_then(|n| n.parse::<u8>().ok()) {
            code.push(0x7f + n);
            continue;
        }
        if let Some(n) = tok.strip_prefix("SWAP").and_then(|n| n.parse::<u8>().ok()) {
            code.push(0x8f + n);
            continue;
        }
        code.push(
            *ops.get(tok)
                .unwrap_or_else(|| panic!("unknown mnemonic {tok}")),
        );
    }
    for (at, label) in fixups {
        let pos = labels[&label] as u16;
        code[at..at + 2].copy_from_slice(&pos.to_be_bytes());
    }
    code
}

/// Init code that returns `runtime` as the contract's code after running `constructor`
/// (which must leave the stack empty and memory unused).
pub fn deploy(constructor: &[u8], runtime: &[u8]) -> Vec<u8> {
    // PUSH1 len PUSH1 offset PUSH1 0 CODECOPY PUSH1 len PUSH1 0 RETURN = 12 bytes
    assert!(runtime.len() < 256);
    let offset = constructor.len() + 12;
    assert!(offset < 256);
    let mut code = constructor.to_vec();
    code.extend(asm(&format!(
        "PUSH1 {:#x} PUSH1 {offset:#x} PUSH1 0 CODECOPY PUSH1 {:#x} PUSH1 0 RETURN",
        runtime.len(),
        runtime.len()
    )));
    code.extend_from_slice(runtime);
    code
}

pub fn hex(bytes: &[u8]) -> String {
    format!("0x{}", alloy::hex::encode(bytes))
}

const OPS: &[(&str, u8)] = &[
    ("STOP", 0x00),
    ("ADD", 0x01),
    ("MUL", 0x02),
    ("SUB", 0x03),
    ("LT", 0x10),
    ("GT", 0x11),
    ("EQ", 0x14),
    ("ISZERO", 0x15),
    ("NOT", 0x19),
    ("ADDRESS", 0x30),
    ("BALANCE", 0x31),
    ("ORIGIN", 0x32),
    ("CALLER", 0x33),
    ("CALLVALUE", 0x34),
    ("CALLDATALOAD", 0x35),
    ("CALLDATASIZE", 0x36),
    ("CALLDATACOPY", 0x37),
    ("CODESIZE", 0x38),
    ("CODECOPY", 0x39),
    ("RETURNDATASIZE", 0x3d),
    ("RETURNDATACOPY", 0x3e),
    ("NUMBER", 0x43),
    ("TIMESTAMP", 0x42),
    ("BASEFEE", 0x48),
    ("COINBASE", 0x41),
    ("POP", 0x50),
    ("MLOAD", 0x51),
    ("MSTORE", 0x52),
    ("MSTORE8", 0x53),
    ("SLOAD", 0x54),
    ("SSTORE", 0x55),
    ("JUMP", 0x56),
    ("JUMPI", 0x57),
    ("GAS", 0x5a),
    ("JUMPDEST", 0x5b),
    ("LOG0", 0xa0),
    ("LOG1", 0xa1),
    ("CREATE", 0xf0),
    ("CALL", 0xf1),
    ("RETURN", 0xf3),
    ("DELEGATECALL", 0xf4),
    ("CREATE2", 0xf5),
    ("STATICCALL", 0xfa),
    ("REVERT", 0xfd),
    ("INVALID", 0xfe),
    ("SELFDESTRUCT", 0xff),
];
