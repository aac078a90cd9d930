//! Request types of `eth_simulateV1`.
//!
//! alloy's `SimulatePayload` does not know the provider's `returnFullTransactionObjects` name,
//! its `BlockOverrides` has no `withdrawals`, and a missing `calls` must read as an empty list,
//! so the request shapes are spelled out here. Calls become alloy's `TransactionRequest`, read
//! through [`CallFields`].

use alloy::{
    eips::{eip2930::AccessList, eip4895::Withdrawal, eip7702::SignedAuthorization},
    primitives::{Address, Bytes, TxKind, B256, U256, U64},
    rpc::types::{TransactionInput, TransactionRequest},
};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// The first parameter of `eth_simulateV1`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulatePayload {
    /// Missing or null reads as empty, which the simulation refuses as geth does ("empty
    /// input", -32602).
    #[serde(default, deserialize_with = "null_as_default")]
    pub block_state_calls: Vec<SimBlock>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub trace_transfers: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    pub validation: bool,
    #[serde(
        default,
        alias = "returnFullTransactionObjects",
        deserialize_with = "null_as_default"
    )]
    pub return_full_transactions: bool,
}

/// One block of calls with the overrides that apply before it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimBlock {
    #[serde(default)]
    pub block_overrides: Option<BlockOverrides>,
    #[serde(default)]
    pub state_overrides: Option<StateOverride>,
    #[serde(default, deserialize_with = "calls")]
    pub calls: Vec<TransactionRequest>,
}

/// The fields of a call, as `TransactionRequest` reads them. `TransactionRequest` flattens
/// `input`/`data` and the blob sidecar into itself, which makes serde buffer every call object
/// before reading it: a fifth of the node's time on a request of 800 transfers. Read directly
/// here instead. The sidecar is left out: the simulation does not use it, and alloy reads a
/// malformed one as none.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallFields {
    #[serde(default)]
    from: Option<Address>,
    #[serde(default)]
    to: Option<TxKind>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    gas_price: Option<u128>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    max_fee_per_gas: Option<u128>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    max_priority_fee_per_gas: Option<u128>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    max_fee_per_blob_gas: Option<u128>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    gas: Option<u64>,
    #[serde(default)]
    value: Option<U256>,
    #[serde(default)]
    input: Option<Bytes>,
    #[serde(default)]
    data: Option<Bytes>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    nonce: Option<u64>,
    #[serde(default, with = "alloy::serde::quantity::opt")]
    chain_id: Option<u64>,
    #[serde(default)]
    access_list: Option<AccessList>,
    #[serde(default, rename = "type", with = "alloy::serde::quantity::opt")]
    transaction_type: Option<u8>,
    #[serde(default)]
    blob_versioned_hashes: Option<Vec<B256>>,
    #[serde(default)]
    authorization_list: Option<Vec<SignedAuthorization>>,
}

impl From<CallFields> for TransactionRequest {
    fn from(c: CallFields) -> Self {
        Self {
            from: c.from,
            to: c.to,
            gas_price: c.gas_price,
            max_fee_per_gas: c.max_fee_per_gas,
            max_priority_fee_per_gas: c.max_priority_fee_per_gas,
            max_fee_per_blob_gas: c.max_fee_per_blob_gas,
            gas: c.gas,
            value: c.value,
            input: TransactionInput {
                input: c.input,
                data: c.data,
            },
            nonce: c.nonce,
            chain_id: c.chain_id,
            access_list: c.access_list,
            transaction_type: c.transaction_type,
            blob_versioned_hashes: c.blob_versioned_hashes,
            sidecar: None,
            authorization_list: c.authorization_list,
        }
    }
}

/// A block's calls; missing or null is none.
fn calls<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<TransactionRequest>, D::Error> {
    let calls: Option<Vec<CallFields>> = Option::deserialize(deserializer)?;
    Ok(calls
        .unwrap_or_default()
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Header fields a simulated block may set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockOverrides {
    #[serde(default)]
    pub number: Option<U64>,
    /// The block's difficulty (what DIFFICULTY reads before the merge); a block given one is
    /// a proof-of-work block and pays its miner, as geth's engine makes it.
    #[serde(default)]
    pub difficulty: Option<U256>,
    #[serde(default)]
    pub time: Option<U64>,
    #[serde(default)]
    pub gas_limit: Option<U64>,
    #[serde(default, alias = "coinbase")]
    pub fee_recipient: Option<Address>,
    #[serde(default, alias = "random")]
    pub prev_randao: Option<B256>,
    #[serde(default, alias = "baseFee")]
    pub base_fee_per_gas: Option<U256>,
    #[serde(default)]
    pub blob_base_fee: Option<U256>,
    #[serde(default, alias = "parentBeaconBlockRoot")]
    pub beacon_root: Option<B256>,
    #[serde(default)]
    pub withdrawals: Option<Vec<Withdrawal>>,
}

/// State overrides of one block, in the order they were given.
pub type StateOverride = BTreeMap<Address, AccountOverride>;

/// How one account is changed before a block runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountOverride {
    #[serde(default)]
    pub balance: Option<U256>,
    #[serde(default)]
    pub nonce: Option<U64>,
    #[serde(default)]
    pub code: Option<Bytes>,
    /// Replaces all storage of the account.
    #[serde(default)]
    pub state: Option<BTreeMap<B256, B256>>,
    /// Patches single slots.
    #[serde(default)]
    pub state_diff: Option<BTreeMap<B256, B256>>,
    /// Moves the precompile at this account's address to another address. Also read under the
    /// spec's title for the field, `MovePrecompileToAddress`, which geth (matching field names
    /// without regard to case) accepts.
    #[serde(default, alias = "movePrecompileTo", alias = "MovePrecompileToAddress")]
    pub move_precompile_to_address: Option<Address>,
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn full_transactions_alias_and_null_calls() {
        let p: SimulatePayload = serde_json::from_value(json!({
            "blockStateCalls": [{"calls": null}, {}],
            "returnFullTransactionObjects": true
        }))
        .unwrap();
        assert!(p.return_full_transactions);
        assert!(p.block_state_calls[0].calls.is_empty());
        assert!(p.block_state_calls[1].calls.is_empty());
        let p: SimulatePayload = serde_json::from_value(json!({
            "blockStateCalls": [], "returnFullTransactions": true, "traceTransfers": null
        }))
        .unwrap();
        assert!(p.return_full_transactions);
        assert!(!p.trace_transfers);
        for empty in [json!({}), json!({"blockStateCalls": null})] {
            let p: SimulatePayload = serde_json::from_value(empty).unwrap();
            assert!(p.block_state_calls.is_empty());
        }
    }

    /// Calls read through [`CallFields`] are the `TransactionRequest`s alloy reads (less the
    /// blob sidecar, which the simulation does not use).
    #[test]
    fn calls_read_as_alloy_reads_them() {
        let calls = json!([
            {},
            {"from": "0xc000000000000000000000000000000000000001", "to": null, "input": "0x6000"},
            {"to": "0xc000000000000000000000000000000000000002", "data": "0x01", "input": "0x01",
             "gas": "0x5208", "gasPrice": "0x3", "value": "0x10", "nonce": "0x7", "chainId": "0x1",
             "type": "0x1", "accessList": [{"address": "0xc000000000000000000000000000000000000003",
             "storageKeys": ["0x0000000000000000000000000000000000000000000000000000000000000001"]}]},
            {"maxFeePerGas": "0x10", "maxPriorityFeePerGas": "0x1", "maxFeePerBlobGas": "0x2",
             "blobVersionedHashes": ["0x0100000000000000000000000000000000000000000000000000000000000001"],
             "authorizationList": [{"chainId": "0x1", "address": "0xc000000000000000000000000000000000000004",
             "nonce": "0x0", "yParity": "0x1", "r": "0x1", "s": "0x2"}], "unknownField": 5, "blobs": ["0x12"]},
            {"to": "0xc000000000000000000000000000000000000005", "value": null, "gas": null}
        ]);
        let b: SimBlock = serde_json::from_value(json!({ "calls": calls.clone() })).unwrap();
        let alloy: Vec<TransactionRequest> = serde_json::from_value(calls).unwrap();
        assert_eq!(b.calls, alloy);
        for bad in [
            json!({"gas": "0xzz"}),
            json!({"from": "0x12"}),
            json!({"value": []}),
        ] {
            assert!(serde_json::from_value::<SimBlock>(json!({ "calls": [bad.clone()] })).is_err());
            assert!(serde_json::from_value::<TransactionRequest>(bad).is_err());
        }
    }

    #[test]
    fn overrides_parse() {
        let b: SimBlock = serde_json::from_value(json!({
            "blockOverrides": {"number": "0x9", "withdrawals": [{"index": "0x0", "validatorIndex": "0x1", "address": "0xc000000000000000000000000000000000000000", "amount": "0x10"}]},
            "stateOverrides": {"0x0000000000000000000000000000000000000001": {"movePrecompileToAddress": "0x0000000000000000000000000000000000123456"}},
        }))
        .unwrap();
        let o = b.block_overrides.unwrap();
        assert_eq!(o.number, Some(U64::from(9)));
        assert_eq!(o.withdrawals.unwrap()[0].amount, 16);
        let s = b.state_overrides.unwrap();
        assert!(s
            .values()
            .next()
            .unwrap()
            .move_precompile_to_address
            .is_some());
        for name in ["MovePrecompileToAddress", "movePrecompileTo"] {
            let o: AccountOverride = serde_json::from_value(
                json!({ name: "0x0000000000000000000000000000000000123456" }),
            )
            .unwrap();
            assert!(o.move_precompile_to_address.is_some(), "{name}");
        }
    }
}
