//! Request types of `eth_simulateV1`.
//!
//! alloy's `SimulatePayload` does not know the provider's `returnFullTransactionObjects` name,
//! its `BlockOverrides` has no `withdrawals`, and a missing `calls` must read as an empty list,
//! so the request shapes are spelled out here. Calls reuse alloy's `TransactionRequest`.

use alloy::{
    eips::eip4895::Withdrawal,
    primitives::{Address, Bytes, B256, U256, U64},
    rpc::types::TransactionRequest,
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
    #[serde(default, deserialize_with = "null_as_default")]
    pub calls: Vec<TransactionRequest>,
}

/// Header fields a simulated block may set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockOverrides {
    #[serde(default)]
    pub number: Option<U64>,
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
