//! The `txpool` namespace as geth serves it: `txpool_content`, `txpool_contentFrom`,
//! `txpool_inspect` and `txpool_status`, read from the node's transaction pool.
//!
//! The pool keeps every accepted transaction per sender and nonce without splitting them, so
//! the split is made here as geth makes it: against the sender's nonce in the latest state, the
//! transactions that follow on from it without a gap are `pending` (executable), the ones behind
//! a gap `queued`. A transaction whose nonce is below the account's (already superseded, about
//! to be dropped by the pool) is in neither.
//!
//! Shapes: `content` maps the sender (checksummed) to the nonce (decimal string) to the RPC
//! transaction (block fields `null`, `gasPrice` the effective price at the latest base fee);
//! `contentFrom` maps the nonce to the transaction for one sender; `status` counts both kinds.

use std::collections::{BTreeMap, HashMap};

use alloy::{
    consensus::{transaction::Recovered, Transaction as _, TxEnvelope},
    primitives::{Address, U64},
};
use jsonrpsee::proc_macros::rpc;
use serde::Serialize;
use serde_json::Value;
use simnode_api::{ModuleContext, RpcError, RpcResult};

pub use simnode_api::rpc_block::PoolTransaction;

/// Transactions of one sender by nonce (decimal string, as geth keys them).
pub type ByNonce = BTreeMap<String, PoolTransaction>;

/// The pool per sender (checksummed), pending and queued apart; `T` is what each sender's
/// transactions are shown as.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BySender<T> {
    pub pending: BTreeMap<String, T>,
    pub queued: BTreeMap<String, T>,
}

impl<T> BySender<T> {
    /// Shows each sender's non-empty pending and queued lists with `show`.
    fn from_split(
        split: BTreeMap<Address, Split>,
        show: impl Fn(Vec<Recovered<TxEnvelope>>) -> T,
    ) -> Self {
        let mut out = Self {
            pending: BTreeMap::new(),
            queued: BTreeMap::new(),
        };
        for (sender, Split { pending, queued }) in split {
            let key = sender.to_checksum(None);
            if !pending.is_empty() {
                out.pending.insert(key.clone(), show(pending));
            }
            if !queued.is_empty() {
                out.queued.insert(key, show(queued));
            }
        }
        out
    }
}

/// `txpool_content`.
pub type Content = BySender<ByNonce>;

/// `txpool_contentFrom`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ContentFrom {
    pub pending: ByNonce,
    pub queued: ByNonce,
}

/// `txpool_inspect`: nonce (decimal string) to a summary line, per sender.
pub type Inspect = BySender<BTreeMap<String, String>>;

/// `txpool_status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    pub pending: U64,
    pub queued: U64,
}

/// Pool transactions of one sender, split as described in the crate docs.
#[derive(Debug, Default)]
pub struct Split {
    pub pending: Vec<Recovered<TxEnvelope>>,
    pub queued: Vec<Recovered<TxEnvelope>>,
}

/// Splits pool transactions per sender into executable and gapped ones, given each sender's
/// nonce in the latest state.
pub fn split(
    txs: Vec<Recovered<TxEnvelope>>,
    mut state_nonce: impl FnMut(&Address) -> RpcResult<u64>,
) -> RpcResult<BTreeMap<Address, Split>> {
    let mut by_sender: HashMap<Address, BTreeMap<u64, Recovered<TxEnvelope>>> = HashMap::new();
    for tx in txs {
        by_sender
            .entry(tx.signer())
            .or_default()
            .insert(tx.inner().nonce(), tx);
    }
    let mut out = BTreeMap::new();
    for (sender, txs) in by_sender {
        let mut next = state_nonce(&sender)?;
        let mut split = Split::default();
        for (nonce, tx) in txs {
            if nonce < next {
                // Stale: the account has moved past it (the pool drops it with the next block).
                continue;
            }
            if nonce == next && split.queued.is_empty() {
                split.pending.push(tx);
                next += 1;
            } else {
                split.queued.push(tx);
            }
        }
        if !split.pending.is_empty() || !split.queued.is_empty() {
            out.insert(sender, split);
        }
    }
    Ok(out)
}

#[rpc(server, namespace = "txpool")]
pub trait TxPoolApi {
    /// Every pooled transaction, pending and queued, by sender and nonce.
    #[method(name = "content")]
    fn content(&self) -> Result<Content, RpcError>;

    /// The pooled transactions of one sender, by nonce.
    #[method(name = "contentFrom")]
    fn content_from(&self, address: Option<Value>) -> Result<ContentFrom, RpcError>;

    /// Every pooled transaction as geth's one-line summary, by sender and nonce.
    #[method(name = "inspect")]
    fn inspect(&self) -> Result<Inspect, RpcError>;

    /// How many transactions are pending and queued.
    #[method(name = "status")]
    fn status(&self) -> Result<Status, RpcError>;
}

/// The `txpool` namespace over the node's pool.
#[derive(Debug, Clone)]
pub struct TxPoolRpc {
    ctx: ModuleContext,
}

impl TxPoolRpc {
    pub fn new(ctx: ModuleContext) -> Self {
        Self { ctx }
    }

    /// The pool's non-blob transactions split per sender, and how many blob transactions it
    /// holds. geth keeps blob transactions in a pool of their own whose content it does not
    /// list but whose transactions `txpool_status` counts as pending; the same is done here.
    fn snapshot(&self, only: Option<Address>) -> RpcResult<(BTreeMap<Address, Split>, usize)> {
        let mut txs = self.ctx.pool.pending();
        if let Some(only) = only {
            txs.retain(|tx| tx.signer() == only);
        }
        let before = txs.len();
        txs.retain(|tx| !tx.inner().is_eip4844());
        let blobs = before - txs.len();
        if txs.is_empty() {
            return Ok((BTreeMap::new(), blobs));
        }
        let latest = self.ctx.chain.head().latest;
        let state = self.ctx.chain.state_at(latest)?;
        let split = split(txs, |sender| {
            Ok(state
                .basic_ref(*sender)
                .map_err(RpcError::from)?
                .map(|acc| acc.nonce)
                .unwrap_or_default())
        })?;
        Ok((split, blobs))
    }
}

/// The RPC form of pooled transactions, by nonce.
fn rpc_txs(txs: Vec<Recovered<TxEnvelope>>) -> ByNonce {
    txs.into_iter()
        .map(|tx| (tx.inner().nonce().to_string(), PoolTransaction::of(tx)))
        .collect()
}

/// geth's summary of a pooled transaction: "TO: VALUE wei + GAS gas × PRICE wei", with
/// "contract creation" for TO when it creates and the fee cap as PRICE for fee-market ones.
fn summaries(txs: Vec<Recovered<TxEnvelope>>) -> BTreeMap<String, String> {
    txs.into_iter()
        .map(|tx| {
            let tx = tx.inner();
            let to = tx
                .to()
                .map_or_else(|| "contract creation".to_owned(), |to| to.to_checksum(None));
            let line = format!(
                "{to}: {} wei + {} gas × {} wei",
                tx.value(),
                tx.gas_limit(),
                tx.max_fee_per_gas()
            );
            (tx.nonce().to_string(), line)
        })
        .collect()
}

/// geth's `common.Address` parameter: 0x-prefixed, 20 bytes.
fn parse_address(value: Option<Value>) -> RpcResult<Address> {
    let invalid = |msg: &str| RpcError::invalid_params(format!("invalid argument 0: {msg}"));
    match value {
        None | Some(Value::Null) => Err(RpcError::invalid_params(
            "missing value for required argument 0",
        )),
        Some(Value::String(s)) => {
            let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) else {
                return Err(invalid(
                    "json: cannot unmarshal hex string without 0x prefix into Go value of type common.Address",
                ));
            };
            if hex.len() != 40 {
                return Err(invalid(
                    "json: cannot unmarshal hex string of wrong length into Go value of type common.Address",
                ));
            }
            s.parse::<Address>().map_err(|_| {
                invalid("json: cannot unmarshal invalid hex string into Go value of type common.Address")
            })
        }
        Some(_) => Err(invalid(
            "json: cannot unmarshal non-string into Go value of type common.Address",
        )),
    }
}

impl TxPoolApiServer for TxPoolRpc {
    fn content(&self) -> Result<Content, RpcError> {
        let (split, _) = self.snapshot(None)?;
        Ok(BySender::from_split(split, rpc_txs))
    }

    fn content_from(&self, address: Option<Value>) -> Result<ContentFrom, RpcError> {
        let address = parse_address(address)?;
        let (mut split, _) = self.snapshot(Some(address))?;
        let Split { pending, queued } = split.remove(&address).unwrap_or_default();
        Ok(ContentFrom {
            pending: rpc_txs(pending),
            queued: rpc_txs(queued),
        })
    }

    fn inspect(&self) -> Result<Inspect, RpcError> {
        let (split, _) = self.snapshot(None)?;
        Ok(BySender::from_split(split, summaries))
    }

    fn status(&self) -> Result<Status, RpcError> {
        let (split, blobs) = self.snapshot(None)?;
        let (pending, queued) = split.values().fold((blobs as u64, 0u64), |(p, q), s| {
            (p + s.pending.len() as u64, q + s.queued.len() as u64)
        });
        Ok(Status {
            pending: U64::from(pending),
            queued: U64::from(queued),
        })
    }
}

/// The most positional params each method of this module reads; the node refuses more (see
/// `simnode_api::MethodParams`).
pub const METHOD_PARAMS: simnode_api::MethodParams = &[
    ("txpool_content", 0),
    ("txpool_contentFrom", 1),
    ("txpool_inspect", 0),
    ("txpool_status", 0),
];

/// The methods of this module.
pub fn rpc_module(ctx: ModuleContext) -> jsonrpsee::Methods {
    TxPoolRpc::new(ctx).into_rpc().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::{
        consensus::{SignableTransaction, TxLegacy},
        primitives::Signature,
    };

    fn tx(sender: Address, nonce: u64) -> Recovered<TxEnvelope> {
        let t = TxLegacy {
            nonce,
            gas_price: 10,
            gas_limit: 21_000,
            ..Default::default()
        };
        Recovered::new_unchecked(
            TxEnvelope::Legacy(t.into_signed(Signature::test_signature())),
            sender,
        )
    }

    fn nonces(txs: &[Recovered<TxEnvelope>]) -> Vec<u64> {
        txs.iter().map(|t| t.inner().nonce()).collect()
    }

    #[test]
    fn gapped_transactions_are_queued_and_stale_ones_left_out() {
        let a = Address::repeat_byte(1);
        let b = Address::repeat_byte(2);
        let c = Address::repeat_byte(3);
        let txs = vec![
            tx(a, 5),
            tx(a, 6),
            tx(a, 8),
            tx(a, 9),
            tx(b, 3),
            tx(c, 0),
            tx(c, 1),
        ];
        let split = split(txs, |s| {
            Ok(match s {
                s if *s == a => 5,
                s if *s == b => 1,
                _ => 1,
            })
        })
        .unwrap();
        assert_eq!(nonces(&split[&a].pending), vec![5, 6]);
        assert_eq!(nonces(&split[&a].queued), vec![8, 9]);
        assert!(split[&b].pending.is_empty());
        assert_eq!(nonces(&split[&b].queued), vec![3]);
        assert_eq!(nonces(&split[&c].pending), vec![1], "nonce 0 is stale");
        assert!(split[&c].queued.is_empty());
    }

    #[test]
    fn inspect_lines_are_geths() {
        let a = Address::repeat_byte(0xab);
        let to = Address::repeat_byte(0xaa);
        let call = TxLegacy {
            nonce: 0,
            gas_price: 91_635_045,
            gas_limit: 25_000,
            to: alloy::primitives::TxKind::Call(to),
            value: alloy::primitives::U256::from(10),
            ..Default::default()
        };
        let creation = alloy::consensus::TxEip1559 {
            nonce: 1,
            max_fee_per_gas: 91_635_544,
            max_priority_fee_per_gas: 1,
            gas_limit: 60_000,
            value: alloy::primitives::U256::from(42),
            ..Default::default()
        };
        let txs = vec![
            Recovered::new_unchecked(
                TxEnvelope::Legacy(call.into_signed(Signature::test_signature())),
                a,
            ),
            Recovered::new_unchecked(
                TxEnvelope::Eip1559(creation.into_signed(Signature::test_signature())),
                a,
            ),
        ];
        let lines = summaries(txs);
        assert_eq!(
            lines["0"],
            format!(
                "{}: 10 wei + 25000 gas × 91635045 wei",
                to.to_checksum(None)
            )
        );
        assert_eq!(
            lines["1"],
            "contract creation: 42 wei + 60000 gas × 91635544 wei"
        );
    }

    #[test]
    fn addresses_are_strict_hex() {
        assert!(parse_address(Some(Value::String(format!("0x{}", "00".repeat(20))))).is_ok());
        for bad in [
            Value::String("00".repeat(20)),
            Value::String(format!("0x{}", "00".repeat(19))),
            serde_json::json!(1),
            Value::Null,
        ] {
            assert_eq!(parse_address(Some(bad)).unwrap_err().code(), -32602);
        }
    }

    #[test]
    fn shapes_are_geths() {
        let a = Address::repeat_byte(0xab);
        let mut content = Content::default();
        content
            .pending
            .insert(a.to_checksum(None), rpc_txs(vec![tx(a, 10), tx(a, 2)]));
        let v = serde_json::to_value(&content).unwrap();
        let by_nonce = &v["pending"][a.to_checksum(None)];
        assert_eq!(by_nonce["2"]["nonce"], "0x2");
        assert_eq!(by_nonce["10"]["blockHash"], Value::Null);
        assert_eq!(by_nonce["10"]["blockTimestamp"], Value::Null);
        assert_eq!(by_nonce["10"]["gasPrice"], "0xa");
        assert_eq!(v["queued"], serde_json::json!({}));
        let status = serde_json::to_value(Status {
            pending: U64::from(6),
            queued: U64::ZERO,
        })
        .unwrap();
        assert_eq!(
            status,
            serde_json::json!({"pending": "0x6", "queued": "0x0"})
        );
    }
}
