//! Test-chain controls on `--dev`, as hardhat and anvil serve them, so that a dapp's test suite
//! runs against a dev node unchanged:
//!
//! - `evm_mine [options]`: a block now, even an empty one; options a timestamp (number or hex)
//!   for it, or `{timestamp, blocks}` for several (at most [`MAX_BLOCKS_PER_MINE`]). `"0x0"`.
//! - `anvil_mine` / `hardhat_mine [blocks, interval]`: several blocks, `interval` seconds apart.
//! - `evm_increaseTime seconds`: later blocks' clock moves ahead (of the head's timestamp at
//!   least); the total offset from the wall clock in seconds, a JSON number as anvil answers
//!   (negative when the clock is behind it, after a block took an earlier timestamp).
//! - `evm_setNextBlockTimestamp timestamp`: the next block's timestamp (after the head's); the
//!   clock of the blocks after it goes on from there.
//! - `evm_snapshot`: an id for the chain as it is now (head and clock); ids are never reused.
//! - `evm_revert id`: the chain back to that snapshot, the blocks after it dropped with their
//!   transactions; `true`, or `false` for an unknown id. A snapshot is used up by its revert,
//!   and the snapshots taken after it go with it (hardhat's rule).
//! - `anvil_setBalance` / `hardhat_setBalance address balance`, `*_setNonce address nonce`,
//!   `*_setCode address code`, `*_setStorageAt address slot value`: one account changed outside
//!   any transaction. Each edit is mined at once as a block of its own (no transactions, see
//!   [`DevChain::edit`]), so the block number moves by one where anvil and hardhat edit in
//!   place. The anvil names answer `null` (`true` for setStorageAt), the hardhat names `true`.
//! - `anvil_impersonateAccount` / `hardhat_impersonateAccount address`,
//!   `*_stopImpersonatingAccount address`, `anvil_autoImpersonateAccount enabled`:
//!   `eth_sendTransaction` sends for the account without its key (for every account with auto
//!   impersonation on), see [`crate::rpc::accounts`]. A block holding such a transaction is
//!   marked and runs without EIP-3607, so a contract can send one. The anvil names answer
//!   `null`, the hardhat names `true`.
//! - Mining modes, as anvil has them: `evm_setAutomine` / `anvil_setAutomine enabled` (on: a
//!   block per transaction; off: blocks only when asked), `evm_setIntervalMining` /
//!   `anvil_setIntervalMining seconds` (a block every so many seconds, as anvil reads it where
//!   hardhat reads milliseconds; 0 turns it off), `anvil_getAutomine` / `hardhat_getAutomine`.
//! - The pool: `anvil_dropTransaction` / `hardhat_dropTransaction hash` (anvil's answers the
//!   hash if it was waiting, else null; hardhat's whether it was, and refuses one a block
//!   took), `anvil_dropAllTransactions`, `anvil_removePoolTransactions address`.
//! - `anvil_setCoinbase` / `hardhat_setCoinbase address`: the beneficiary of later blocks.
//! - `anvil_setNextBlockBaseFeePerGas` / `hardhat_setNextBlockBaseFeePerGas fee`: the next
//!   block's base fee (the blocks after it derive theirs from it, as EIP-1559 does).
//! - `hardhat_setPrevRandao value`: the next block's PREVRANDAO (`mixHash`). `true`.
//! - `evm_setBlockGasLimit` / `anvil_setBlockGasLimit gas`: the gas limit of later blocks
//!   (5000 to 2^63 - 1, geth's bounds). `true`.
//! - `anvil_setBlockTimestampInterval seconds`: later blocks' timestamps step by it from their
//!   parent's instead of following the clock; `anvil_removeBlockTimestampInterval` (whether one
//!   was set). `anvil_setTime timestamp`: the next block's timestamp, answering how far it is
//!   ahead of the wall clock in seconds.
//! - `anvil_reset` / `hardhat_reset`: the chain back to genesis (no forking).
//! - `anvil_setLoggingEnabled` / `hardhat_setLoggingEnabled enabled`: the node's logs off, or
//!   back on at the level they started with.
//! - `anvil_metadata` / `hardhat_metadata`: the client, chain id, head, snapshots and an
//!   instance id that a reset renews (a restart keeps it: the chain is still there), so tools
//!   that key deployments by it (OpenZeppelin's upgrades plugin) see a reset chain as a new one.
//! - anvil's other names of the evm_* controls: `anvil_increaseTime`,
//!   `anvil_setNextBlockTimestamp`, `anvil_snapshot`, `anvil_revert`.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Mutex,
};

use alloy::primitives::{Address, Bytes, B256, U256, U64};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use revm::bytecode::Bytecode;
use serde_json::Value;
use simnode_api::RpcError;

use crate::{
    rpc::accounts::Impersonation,
    sync::dev::{DevChain, DevClock, MiningMode, StateEdit},
};

/// Most blocks one `evm_mine` / `*_mine` mines: enough for a governance test's voting period
/// (tens of thousands of blocks; about 1.4 ms an empty block in the release build), a bound on
/// what one request can make the node do. Hardhat and anvil set none; zero mines nothing.
pub const MAX_BLOCKS_PER_MINE: u64 = 1_000_000;

/// The most positional params each method reads.
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("evm_mine", 1),
    ("anvil_mine", 2),
    ("hardhat_mine", 2),
    ("evm_increaseTime", 1),
    ("anvil_increaseTime", 1),
    ("evm_setNextBlockTimestamp", 1),
    ("anvil_setNextBlockTimestamp", 1),
    ("evm_snapshot", 0),
    ("anvil_snapshot", 0),
    ("evm_revert", 1),
    ("anvil_revert", 1),
    ("anvil_reset", 1),
    ("hardhat_reset", 1),
    ("anvil_setBalance", 2),
    ("hardhat_setBalance", 2),
    ("anvil_setNonce", 2),
    ("hardhat_setNonce", 2),
    ("anvil_setCode", 2),
    ("hardhat_setCode", 2),
    ("anvil_setStorageAt", 3),
    ("hardhat_setStorageAt", 3),
    ("anvil_impersonateAccount", 1),
    ("hardhat_impersonateAccount", 1),
    ("anvil_stopImpersonatingAccount", 1),
    ("hardhat_stopImpersonatingAccount", 1),
    ("anvil_autoImpersonateAccount", 1),
    ("evm_setAutomine", 1),
    ("anvil_setAutomine", 1),
    ("anvil_getAutomine", 0),
    ("hardhat_getAutomine", 0),
    ("evm_setIntervalMining", 1),
    ("anvil_setIntervalMining", 1),
    ("anvil_dropTransaction", 1),
    ("hardhat_dropTransaction", 1),
    ("anvil_dropAllTransactions", 0),
    ("anvil_removePoolTransactions", 1),
    ("anvil_setNextBlockBaseFeePerGas", 1),
    ("hardhat_setNextBlockBaseFeePerGas", 1),
    ("hardhat_setPrevRandao", 1),
    ("evm_setBlockGasLimit", 1),
    ("anvil_setBlockGasLimit", 1),
    ("anvil_setBlockTimestampInterval", 1),
    ("anvil_removeBlockTimestampInterval", 0),
    ("anvil_setTime", 1),
    ("anvil_setCoinbase", 1),
    ("hardhat_setCoinbase", 1),
    ("anvil_metadata", 0),
    ("hardhat_metadata", 0),
    ("anvil_setLoggingEnabled", 1),
    ("hardhat_setLoggingEnabled", 1),
];

#[rpc(server)]
pub trait DevControlsApi {
    #[method(name = "evm_mine")]
    async fn mine(&self, options: Option<Value>) -> RpcResult<String>;
    /// `blocks` blocks (default 1), the clock moved on `interval` seconds before each (default:
    /// the clock's pace), as anvil's `anvil_mine` and its `hardhat_mine` (viem's
    /// `testClient.mine`, hardhat's `mine()` and `time.increase()` helpers).
    #[method(name = "anvil_mine", aliases = ["hardhat_mine"])]
    async fn mine_blocks(&self, blocks: Option<Value>, interval: Option<Value>) -> RpcResult<()>;
    #[method(name = "evm_increaseTime", aliases = ["anvil_increaseTime"])]
    fn increase_time(&self, seconds: Value) -> RpcResult<Value>;
    #[method(name = "evm_setNextBlockTimestamp", aliases = ["anvil_setNextBlockTimestamp"])]
    fn set_next_block_timestamp(&self, timestamp: Value) -> RpcResult<()>;
    #[method(name = "evm_snapshot", aliases = ["anvil_snapshot"])]
    fn snapshot(&self) -> RpcResult<U64>;
    #[method(name = "evm_revert", aliases = ["anvil_revert"])]
    async fn revert(&self, id: U64) -> RpcResult<bool>;
    #[method(name = "anvil_setBalance")]
    async fn anvil_set_balance(&self, address: Address, balance: Value) -> RpcResult<()>;
    #[method(name = "hardhat_setBalance")]
    async fn hardhat_set_balance(&self, address: Address, balance: Value) -> RpcResult<bool>;
    #[method(name = "anvil_setNonce")]
    async fn anvil_set_nonce(&self, address: Address, nonce: Value) -> RpcResult<()>;
    #[method(name = "hardhat_setNonce")]
    async fn hardhat_set_nonce(&self, address: Address, nonce: Value) -> RpcResult<bool>;
    #[method(name = "anvil_setCode")]
    async fn anvil_set_code(&self, address: Address, code: Bytes) -> RpcResult<()>;
    #[method(name = "hardhat_setCode")]
    async fn hardhat_set_code(&self, address: Address, code: Bytes) -> RpcResult<bool>;
    /// Both names answer `true`.
    #[method(name = "anvil_setStorageAt", aliases = ["hardhat_setStorageAt"])]
    async fn set_storage_at(&self, address: Address, slot: Value, value: Value) -> RpcResult<bool>;
    #[method(name = "anvil_impersonateAccount")]
    fn anvil_impersonate(&self, address: Address) -> RpcResult<()>;
    #[method(name = "hardhat_impersonateAccount")]
    fn hardhat_impersonate(&self, address: Address) -> RpcResult<bool>;
    #[method(name = "anvil_stopImpersonatingAccount")]
    fn anvil_stop_impersonating(&self, address: Address) -> RpcResult<()>;
    #[method(name = "hardhat_stopImpersonatingAccount")]
    fn hardhat_stop_impersonating(&self, address: Address) -> RpcResult<bool>;
    #[method(name = "anvil_autoImpersonateAccount")]
    fn auto_impersonate(&self, enabled: bool) -> RpcResult<()>;
    #[method(name = "evm_setAutomine", aliases = ["anvil_setAutomine"])]
    fn set_automine(&self, enabled: bool) -> RpcResult<()>;
    #[method(name = "anvil_getAutomine", aliases = ["hardhat_getAutomine"])]
    fn automine(&self) -> RpcResult<bool>;
    #[method(name = "evm_setIntervalMining", aliases = ["anvil_setIntervalMining"])]
    fn set_interval_mining(&self, seconds: Value) -> RpcResult<()>;
    /// The hash when it was waiting (and is dropped), else null (anvil's answer).
    #[method(name = "anvil_dropTransaction")]
    fn anvil_drop_transaction(&self, hash: B256) -> RpcResult<Option<B256>>;
    #[method(name = "hardhat_dropTransaction")]
    fn hardhat_drop_transaction(&self, hash: B256) -> RpcResult<bool>;
    #[method(name = "anvil_dropAllTransactions")]
    fn drop_all_transactions(&self) -> RpcResult<()>;
    #[method(name = "anvil_removePoolTransactions")]
    fn remove_pool_transactions(&self, address: Address) -> RpcResult<()>;
    /// The chain back to its genesis block (no forking: options naming a chain to fork are
    /// refused).
    #[method(name = "anvil_reset")]
    async fn anvil_reset(&self, options: Option<Value>) -> RpcResult<()>;
    #[method(name = "hardhat_reset")]
    async fn hardhat_reset(&self, options: Option<Value>) -> RpcResult<bool>;
    #[method(name = "anvil_setNextBlockBaseFeePerGas")]
    fn anvil_set_next_base_fee(&self, fee: Value) -> RpcResult<()>;
    #[method(name = "hardhat_setNextBlockBaseFeePerGas")]
    fn hardhat_set_next_base_fee(&self, fee: Value) -> RpcResult<bool>;
    /// The next block's PREVRANDAO (its `mixHash`), 32 bytes.
    #[method(name = "hardhat_setPrevRandao")]
    fn hardhat_set_prev_randao(&self, randao: B256) -> RpcResult<bool>;
    #[method(name = "evm_setBlockGasLimit", aliases = ["anvil_setBlockGasLimit"])]
    fn set_block_gas_limit(&self, gas_limit: Value) -> RpcResult<bool>;
    #[method(name = "anvil_setBlockTimestampInterval")]
    fn set_block_timestamp_interval(&self, seconds: Value) -> RpcResult<()>;
    #[method(name = "anvil_removeBlockTimestampInterval")]
    fn remove_block_timestamp_interval(&self) -> RpcResult<bool>;
    /// The next block's timestamp, as `evm_setNextBlockTimestamp`; the seconds it is ahead of
    /// the wall clock, as a number (anvil's answer).
    #[method(name = "anvil_setTime")]
    fn set_time(&self, timestamp: Value) -> RpcResult<u64>;
    #[method(name = "anvil_setCoinbase")]
    fn anvil_set_coinbase(&self, address: Address) -> RpcResult<()>;
    #[method(name = "hardhat_setCoinbase")]
    fn hardhat_set_coinbase(&self, address: Address) -> RpcResult<bool>;
    #[method(name = "anvil_metadata", aliases = ["hardhat_metadata"])]
    fn metadata(&self) -> RpcResult<Value>;
    #[method(name = "anvil_setLoggingEnabled")]
    fn anvil_set_logging_enabled(&self, enabled: bool) -> RpcResult<()>;
    #[method(name = "hardhat_setLoggingEnabled")]
    fn hardhat_set_logging_enabled(&self, enabled: bool) -> RpcResult<bool>;
}

#[derive(Debug, Clone, Copy)]
struct Snapshot {
    id: u64,
    number: u64,
    hash: B256,
    clock: DevClock,
}

pub struct DevControls {
    dev: Arc<DevChain>,
    snapshots: Mutex<Vec<Snapshot>>,
    /// The last snapshot id given: ids only grow, never reused after a revert or reset, so a
    /// stale id is refused rather than taken for a newer snapshot (as hardhat and anvil). Each
    /// run on a datadir starts them at its own multiple of 2^32: snapshots do not outlive the
    /// process, and an id a client kept from an earlier run must not name a new one.
    last_snapshot_id: std::sync::atomic::AtomicU64,
    impersonation: Arc<Impersonation>,
}

/// A number no other dev chain is expected to draw (not a secret): std's per-process random
/// hash keys over the wall clock's nanoseconds.
fn new_instance() -> u64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos)
}

impl DevControls {
    pub fn new(dev: Arc<DevChain>, impersonation: Arc<Impersonation>) -> Self {
        // A datadir that cannot count the start takes the wall clock's seconds instead: later
        // than any count a datadir reaches, and as unlikely to repeat.
        let run = dev.store().count_dev_start().unwrap_or_else(|err| {
            tracing::warn!(target: "simnode::dev", %err, "counting the dev node's start failed");
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs())
        });
        Self {
            dev,
            snapshots: Mutex::new(Vec::new()),
            last_snapshot_id: std::sync::atomic::AtomicU64::new(run.wrapping_shl(32)),
            impersonation,
        }
    }

    /// `*_metadata`'s `instanceId`: the same for the chain in this datadir (restarts
    /// included) until a reset starts a new one.
    fn instance_id(&self) -> Result<B256, RpcError> {
        let store = self.dev.store();
        let instance = match store.dev_instance().map_err(RpcError::internal)? {
            Some(instance) => instance,
            None => {
                let instance = new_instance();
                store
                    .set_dev_instance(instance)
                    .map_err(RpcError::internal)?;
                instance
            }
        };
        let genesis = store.spec().genesis_header.hash();
        Ok(alloy::primitives::keccak256(
            [genesis.as_slice(), &instance.to_be_bytes()].concat(),
        ))
    }

    fn snapshots(&self) -> std::sync::MutexGuard<'_, Vec<Snapshot>> {
        self.snapshots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mines `edit` of `address` as a block of its own.
    async fn edit(&self, address: Address, edit: StateEdit) -> RpcResult<()> {
        let dev = self.dev.clone();
        tokio::task::spawn_blocking(move || dev.edit(address, edit))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        Ok(())
    }

    /// `anvil_reset` without forking: the chain back to genesis with the blocks after it
    /// dropped, the pool emptied, the snapshots forgotten and the clock back on the wall clock.
    /// Mining mode, coinbase and impersonation stay as they are.
    async fn reset(&self, options: Option<Value>) -> RpcResult<()> {
        let forking = match &options {
            None | Some(Value::Null) => None,
            Some(Value::Object(fields)) => fields.get("forking").filter(|f| !f.is_null()),
            Some(other) => Some(other),
        };
        if let Some(forking) = forking {
            return Err(RpcError::invalid_params(format!(
                "cannot reset to {forking}: simnode does not fork other chains; reset without options goes back to genesis"
            ))
            .into());
        }
        self.snapshots().clear();
        let dev = self.dev.clone();
        tokio::task::spawn_blocking(move || {
            let genesis = dev.store().spec().genesis_header.hash();
            let reverted = dev.revert_to(0, genesis, DevClock::default())?;
            dev.pool().drop_all(None);
            // A new chain from here on, for `*_metadata`.
            dev.store().set_dev_instance(new_instance())?;
            Ok::<_, crate::exec::BlockError>(reverted)
        })
        .await
        .map_err(internal)?
        .map_err(internal)?;
        Ok(())
    }

    async fn set_balance(&self, address: Address, balance: Value) -> RpcResult<()> {
        let balance = word(&balance, "balance")?;
        self.edit(address, StateEdit::Balance(balance)).await
    }

    async fn set_nonce(&self, address: Address, nonce: Value) -> RpcResult<()> {
        let nonce = quantity(&nonce, "nonce")?;
        self.edit(address, StateEdit::Nonce(nonce)).await
    }

    async fn set_code(&self, address: Address, code: Bytes) -> RpcResult<()> {
        let code = bytecode(code)?;
        self.edit(address, StateEdit::Code(code)).await
    }
}

/// A non-negative integer as the dev controls take one: a JSON number, or a hex (`0x`) or
/// decimal string; `None` for anything else.
fn integer(value: &Value) -> Option<U256> {
    match value {
        Value::Number(n) => n.as_u64().map(U256::from),
        // ruint reads an empty string as zero; neither "" nor "0x" is a number.
        Value::String(s) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some("") => None,
            Some(hex) => U256::from_str_radix(hex, 16).ok(),
            None if s.is_empty() => None,
            None => U256::from_str_radix(s, 10).ok(),
        },
        _ => None,
    }
}

/// A balance or a storage slot: an [`integer`] below 2^256.
fn word(value: &Value, what: &str) -> Result<U256, RpcError> {
    integer(value).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "invalid {what} {value}: expected a non-negative integer below 2^256 (a number, or a hex or decimal string)"
        ))
    })
}

/// A storage value: 32 bytes of hex, as anvil and hardhat take it (a shorter hex quantity is
/// read as a number, as viem may send one).
fn storage_value(value: &Value) -> Result<U256, RpcError> {
    match value {
        Value::String(s) if s.starts_with("0x") || s.starts_with("0X") => {
            word(value, "storage value")
        }
        _ => Err(RpcError::invalid_params(format!(
            "invalid storage value {value}: expected 32 bytes of hex"
        ))),
    }
}

fn bytecode(code: Bytes) -> Result<Bytecode, RpcError> {
    Bytecode::new_raw_checked(code)
        .map_err(|e| RpcError::invalid_params(format!("invalid code: {e}")))
}

/// A count, a timestamp or a nonce: an [`integer`] below 2^64.
fn quantity(value: &Value, what: &str) -> Result<u64, RpcError> {
    integer(value)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "invalid {what} {value}: expected a non-negative integer below 2^64 (a number, or a hex or decimal string)"
            ))
        })
}

/// Set once the request that started a run of mined blocks is gone (its caller disconnected
/// and the server dropped it): the blocks not yet mined are left unmined.
struct CallerLeft(Arc<AtomicBool>);

impl CallerLeft {
    /// The guard the request holds, and the flag the mining loop reads.
    fn watch() -> (Self, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        (Self(flag.clone()), flag)
    }
}

impl Drop for CallerLeft {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn check_block_count(blocks: u64) -> Result<(), RpcError> {
    if blocks > MAX_BLOCKS_PER_MINE {
        return Err(RpcError::invalid_params(format!(
            "invalid block count {blocks}: at most {MAX_BLOCKS_PER_MINE}"
        )));
    }
    Ok(())
}

fn internal(err: impl std::fmt::Display) -> jsonrpsee::types::ErrorObjectOwned {
    RpcError::internal(err).into()
}

#[jsonrpsee::core::async_trait]
impl DevControlsApiServer for DevControls {
    async fn mine(&self, options: Option<Value>) -> RpcResult<String> {
        let (timestamp, blocks) = match &options {
            None | Some(Value::Null) => (None, 1),
            Some(Value::Object(fields)) => {
                let timestamp = match fields.get("timestamp") {
                    None | Some(Value::Null) => None,
                    Some(t) => Some(quantity(t, "timestamp")?),
                };
                let blocks = match fields.get("blocks") {
                    None | Some(Value::Null) => 1,
                    Some(b) => quantity(b, "block count")?,
                };
                (timestamp, blocks)
            }
            Some(t) => (Some(quantity(t, "timestamp")?), 1),
        };
        check_block_count(blocks)?;
        if let Some(timestamp) = timestamp {
            self.dev
                .set_next_timestamp(timestamp)
                .map_err(RpcError::invalid_params)?;
        }
        let dev = self.dev.clone();
        let (_caller, left) = CallerLeft::watch();
        tokio::task::spawn_blocking(move || {
            for _ in 0..blocks {
                if left.load(Ordering::Relaxed) {
                    break;
                }
                dev.mine(true)?;
            }
            Ok::<_, crate::exec::BlockError>(())
        })
        .await
        .map_err(internal)?
        .map_err(internal)?;
        Ok("0x0".into())
    }

    async fn mine_blocks(&self, blocks: Option<Value>, interval: Option<Value>) -> RpcResult<()> {
        let optional = |value: Option<Value>, what| match value {
            None | Some(Value::Null) => Ok(None),
            Some(v) => quantity(&v, what).map(Some),
        };
        let blocks = optional(blocks, "block count")?.unwrap_or(1);
        let interval = optional(interval, "interval")?;
        check_block_count(blocks)?;
        let dev = self.dev.clone();
        let (_caller, left) = CallerLeft::watch();
        tokio::task::spawn_blocking(move || {
            for _ in 0..blocks {
                if left.load(Ordering::Relaxed) {
                    break;
                }
                // anvil moves the clock on by the interval before each block: a timestamp set
                // for the next block still comes first, and time moved before stays moved.
                if let Some(interval) = interval {
                    dev.increase_time(interval)
                        .map_err(RpcError::invalid_params)?;
                }
                dev.mine(true).map_err(RpcError::internal)?;
            }
            Ok::<_, RpcError>(())
        })
        .await
        .map_err(internal)??;
        Ok(())
    }

    fn increase_time(&self, seconds: Value) -> RpcResult<Value> {
        let seconds = quantity(&seconds, "number of seconds")?;
        let offset = self
            .dev
            .increase_time(seconds)
            .map_err(RpcError::invalid_params)?;
        // anvil's answer: the whole offset from the wall clock as a plain number (negative
        // behind it), which viem's and ethers' helpers pass on as they get it.
        Ok(Value::from(offset))
    }

    fn set_next_block_timestamp(&self, timestamp: Value) -> RpcResult<()> {
        let timestamp = quantity(&timestamp, "timestamp")?;
        self.dev
            .set_next_timestamp(timestamp)
            .map_err(|e| RpcError::invalid_params(e).into())
    }

    fn snapshot(&self) -> RpcResult<U64> {
        let head = self.dev.store().head_header().map_err(internal)?;
        let mut snapshots = self.snapshots();
        let id = self
            .last_snapshot_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        snapshots.push(Snapshot {
            id,
            number: head.number,
            hash: head.hash(),
            clock: self.dev.clock(),
        });
        Ok(U64::from(id))
    }

    async fn revert(&self, id: U64) -> RpcResult<bool> {
        let id: u64 = id.saturating_to();
        let snapshot = {
            let mut snapshots = self.snapshots();
            let Some(at) = snapshots.iter().position(|s| s.id == id) else {
                return Ok(false);
            };
            let snapshot = snapshots[at];
            snapshots.truncate(at);
            snapshot
        };
        let dev = self.dev.clone();
        let reverted = tokio::task::spawn_blocking(move || {
            dev.revert_to(snapshot.number, snapshot.hash, snapshot.clock)
        })
        .await
        .map_err(internal)?
        .map_err(internal)?;
        Ok(reverted)
    }

    async fn anvil_set_balance(&self, address: Address, balance: Value) -> RpcResult<()> {
        self.set_balance(address, balance).await
    }

    async fn hardhat_set_balance(&self, address: Address, balance: Value) -> RpcResult<bool> {
        self.set_balance(address, balance).await.map(|()| true)
    }

    async fn anvil_set_nonce(&self, address: Address, nonce: Value) -> RpcResult<()> {
        self.set_nonce(address, nonce).await
    }

    async fn hardhat_set_nonce(&self, address: Address, nonce: Value) -> RpcResult<bool> {
        self.set_nonce(address, nonce).await.map(|()| true)
    }

    async fn anvil_set_code(&self, address: Address, code: Bytes) -> RpcResult<()> {
        self.set_code(address, code).await
    }

    async fn hardhat_set_code(&self, address: Address, code: Bytes) -> RpcResult<bool> {
        self.set_code(address, code).await.map(|()| true)
    }

    async fn set_storage_at(&self, address: Address, slot: Value, value: Value) -> RpcResult<bool> {
        let slot = word(&slot, "storage slot")?;
        let value = storage_value(&value)?;
        self.edit(address, StateEdit::Storage { slot, value })
            .await
            .map(|()| true)
    }

    fn anvil_impersonate(&self, address: Address) -> RpcResult<()> {
        self.impersonation.start(address);
        Ok(())
    }

    fn hardhat_impersonate(&self, address: Address) -> RpcResult<bool> {
        self.anvil_impersonate(address).map(|()| true)
    }

    fn anvil_stop_impersonating(&self, address: Address) -> RpcResult<()> {
        self.impersonation.stop(address);
        Ok(())
    }

    fn hardhat_stop_impersonating(&self, address: Address) -> RpcResult<bool> {
        self.anvil_stop_impersonating(address).map(|()| true)
    }

    fn auto_impersonate(&self, enabled: bool) -> RpcResult<()> {
        self.impersonation.set_auto(enabled);
        Ok(())
    }

    fn set_automine(&self, enabled: bool) -> RpcResult<()> {
        self.dev.set_mining_mode(if enabled {
            MiningMode::Auto
        } else {
            MiningMode::Manual
        });
        Ok(())
    }

    fn automine(&self) -> RpcResult<bool> {
        Ok(self.dev.mining_mode() == MiningMode::Auto)
    }

    fn set_interval_mining(&self, seconds: Value) -> RpcResult<()> {
        let seconds = quantity(&seconds, "interval")?;
        self.dev.set_mining_mode(match seconds {
            0 => MiningMode::Manual,
            s => MiningMode::Interval(std::time::Duration::from_secs(s)),
        });
        Ok(())
    }

    fn anvil_drop_transaction(&self, hash: B256) -> RpcResult<Option<B256>> {
        let dropped = self
            .dev
            .between_blocks(|| self.dev.pool().drop_transaction(&hash));
        Ok(dropped.then_some(hash))
    }

    /// Whether `hash` was waiting (and is dropped); one a block has taken is an error, as in
    /// hardhat. Between blocks, so that a block being mined cannot take it meanwhile.
    fn hardhat_drop_transaction(&self, hash: B256) -> RpcResult<bool> {
        self.dev.between_blocks(|| {
            let mined = simnode_api::ChainView::transaction_location(&**self.dev.store(), &hash)
                .map_err(internal)?
                .is_some();
            if mined {
                return Err(RpcError::invalid_params(format!(
                    "Transaction {hash} cannot be dropped because it's already mined"
                ))
                .into());
            }
            Ok(self.dev.pool().drop_transaction(&hash))
        })
    }

    fn hardhat_set_prev_randao(&self, randao: B256) -> RpcResult<bool> {
        self.dev.set_next_prev_randao(randao);
        Ok(true)
    }

    fn drop_all_transactions(&self) -> RpcResult<()> {
        self.dev.pool().drop_all(None);
        Ok(())
    }

    fn remove_pool_transactions(&self, address: Address) -> RpcResult<()> {
        self.dev.pool().drop_all(Some(address));
        Ok(())
    }

    async fn anvil_reset(&self, options: Option<Value>) -> RpcResult<()> {
        self.reset(options).await
    }

    fn set_block_gas_limit(&self, gas_limit: Value) -> RpcResult<bool> {
        let gas_limit = quantity(&gas_limit, "gas limit")?;
        self.dev
            .set_gas_limit(gas_limit)
            .map_err(RpcError::invalid_params)?;
        Ok(true)
    }

    fn set_block_timestamp_interval(&self, seconds: Value) -> RpcResult<()> {
        let seconds = quantity(&seconds, "interval")?;
        self.dev.set_timestamp_interval(Some(seconds));
        Ok(())
    }

    fn remove_block_timestamp_interval(&self) -> RpcResult<bool> {
        Ok(self.dev.set_timestamp_interval(None))
    }

    fn set_time(&self, timestamp: Value) -> RpcResult<u64> {
        let timestamp = quantity(&timestamp, "timestamp")?;
        self.dev
            .set_next_timestamp(timestamp)
            .map_err(RpcError::invalid_params)?;
        Ok(timestamp.saturating_sub(crate::sync::build::now()))
    }

    fn anvil_set_next_base_fee(&self, fee: Value) -> RpcResult<()> {
        let fee = quantity(&fee, "base fee")?;
        self.dev
            .set_next_base_fee(fee)
            .map_err(|e| RpcError::invalid_params(e).into())
    }

    fn hardhat_set_next_base_fee(&self, fee: Value) -> RpcResult<bool> {
        self.anvil_set_next_base_fee(fee).map(|()| true)
    }

    async fn hardhat_reset(&self, options: Option<Value>) -> RpcResult<bool> {
        self.reset(options).await.map(|()| true)
    }

    fn anvil_set_coinbase(&self, address: Address) -> RpcResult<()> {
        self.dev.set_coinbase(address);
        Ok(())
    }

    fn metadata(&self) -> RpcResult<Value> {
        let head = self.dev.store().head_header().map_err(internal)?;
        let snapshots: serde_json::Map<String, Value> = self
            .snapshots()
            .iter()
            .map(|s| {
                (
                    format!("{:#x}", s.id),
                    serde_json::json!([s.number, s.hash]),
                )
            })
            .collect();
        let instance = self.instance_id()?;
        Ok(serde_json::json!({
            "clientVersion": simnode_eth::DEV_CLIENT_VERSION,
            "chainId": self.dev.store().spec().chain_id,
            "instanceId": instance,
            "latestBlockNumber": head.number,
            "latestBlockHash": head.hash(),
            "forkedNetwork": null,
            "snapshots": snapshots,
        }))
    }

    fn anvil_set_logging_enabled(&self, enabled: bool) -> RpcResult<()> {
        crate::rpc::logging::set_enabled(enabled).map_err(|e| RpcError::internal(e).into())
    }

    fn hardhat_set_logging_enabled(&self, enabled: bool) -> RpcResult<bool> {
        self.anvil_set_logging_enabled(enabled).map(|()| true)
    }

    fn hardhat_set_coinbase(&self, address: Address) -> RpcResult<bool> {
        self.anvil_set_coinbase(address).map(|()| true)
    }
}

/// The controls of `dev`'s chain; the impersonation methods set `impersonation`, which the
/// accounts methods read.
pub fn rpc_module(dev: Arc<DevChain>, impersonation: Arc<Impersonation>) -> jsonrpsee::Methods {
    DevControls::new(dev, impersonation).into_rpc().into()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn integers_are_numbers_or_hex_or_decimal_strings() {
        for (value, expected) in [
            (json!(7), Some(7u64)),
            (json!("0x1f"), Some(31)),
            (json!("0X1F"), Some(31)),
            (json!("42"), Some(42)),
            (json!("0x"), None),
            (json!(""), None),
            (json!(-1), None),
            (json!(1.5), None),
            (json!("-1"), None),
            (json!("0xzz"), None),
            (json!(true), None),
            (json!(null), None),
        ] {
            assert_eq!(integer(&value), expected.map(U256::from), "{value}");
        }
        let max = format!("0x{}", "f".repeat(64));
        assert_eq!(integer(&json!(max)), Some(U256::MAX));
        assert_eq!(integer(&json!(format!("0x1{}", "0".repeat(64)))), None);
    }

    #[test]
    fn quantities_stop_at_u64_and_words_at_u256() {
        assert_eq!(
            quantity(&json!("0xffffffffffffffff"), "nonce").ok(),
            Some(u64::MAX)
        );
        let too_big: jsonrpsee::types::ErrorObjectOwned =
            quantity(&json!("0x10000000000000000"), "nonce")
                .expect_err("past u64")
                .into();
        assert_eq!(too_big.code(), -32602);
        assert!(too_big.message().contains("below 2^64"), "{too_big:?}");
        assert_eq!(
            word(&json!("0x10000000000000000"), "balance").ok(),
            Some(U256::from(1u128 << 64))
        );
        assert!(word(&json!("0x"), "balance").is_err());
    }
}
