//! eth_sendRawTransaction: decode, recover, validate against the latest state with geth's
//! messages, and hand the transaction to the pool.

use alloy::{
    consensus::{transaction::SignerRecoverable, Transaction as _, TxEnvelope},
    eips::eip2718::Decodable2718,
    primitives::{B256, U256},
};
use revm::DatabaseRef;
use simnode_api::{ModuleContext, RpcError, RpcResult};

/// geth's limit on a transaction's encoded size (blob transactions: without blobs).
pub const TX_MAX_SIZE: usize = 128 * 1024;
/// Encoded size limit of a blob transaction with its sidecar.
pub const BLOB_TX_MAX_SIZE: usize = 2 * 1024 * 1024;

pub fn send_raw_transaction(ctx: &ModuleContext, raw: &[u8]) -> RpcResult<B256> {
    if raw.is_empty() {
        return Err(RpcError::invalid_params("empty transaction data"));
    }
    let mut buf = raw;
    let tx = TxEnvelope::decode_2718(&mut buf)
        .map_err(|e| RpcError::invalid_params(format!("invalid transaction: {e}")))?;
    if !buf.is_empty() {
        return Err(RpcError::invalid_params(
            "invalid transaction: trailing bytes",
        ));
    }
    let limit = if tx.is_eip4844() {
        BLOB_TX_MAX_SIZE
    } else {
        TX_MAX_SIZE
    };
    if raw.len() > limit {
        return Err(RpcError::Server("oversized data".into()));
    }
    if let Some(chain_id) = tx.chain_id() {
        if chain_id != ctx.spec.chain_id {
            return Err(RpcError::Server(format!(
                "invalid chain id for signer: have {chain_id} want {}",
                ctx.spec.chain_id
            )));
        }
    }
    let sender = tx
        .recover_signer()
        .map_err(|_| RpcError::Server("invalid sender".into()))?;
    if let Some(tip) = tx.max_priority_fee_per_gas() {
        if tip > tx.max_fee_per_gas() {
            return Err(RpcError::Server(
                "max priority fee per gas higher than max fee per gas".into(),
            ));
        }
    }
    let head = ctx.chain.head().latest;
    let header = ctx.chain.header(head)?.ok_or(RpcError::HeaderNotFound)?;
    if tx.gas_limit() > header.gas_limit {
        return Err(RpcError::Server("exceeds block gas limit".into()));
    }
    let spec_id = ctx.spec.spec_id(head + 1, header.timestamp);
    if spec_id >= revm::primitives::hardfork::SpecId::OSAKA && tx.gas_limit() > (1 << 24) {
        return Err(RpcError::Server("transaction gas limit too high".into()));
    }
    let intrinsic = intrinsic_gas(&tx, spec_id);
    if tx.gas_limit() < intrinsic {
        return Err(RpcError::Server(format!(
            "intrinsic gas too low: gas {}, minimum needed {intrinsic}",
            tx.gas_limit()
        )));
    }
    let state = ctx.chain.state_at(head)?;
    let account = state.basic_ref(sender)?.unwrap_or_default();
    if tx.nonce() < account.nonce {
        return Err(RpcError::Server(format!(
            "nonce too low: next nonce {}, tx nonce {}",
            account.nonce,
            tx.nonce()
        )));
    }
    let mut cost = U256::from(tx.gas_limit()) * U256::from(tx.max_fee_per_gas()) + tx.value();
    if let Some(blob_gas) = tx.blob_gas_used() {
        cost += U256::from(blob_gas) * U256::from(tx.max_fee_per_blob_gas().unwrap_or(0));
    }
    if account.balance < cost {
        return Err(RpcError::Server(format!(
            "insufficient funds for gas * price + value: balance {}, tx cost {cost}, overshot {}",
            account.balance,
            cost - account.balance
        )));
    }
    ctx.pool
        .insert(alloy::consensus::transaction::Recovered::new_unchecked(
            tx, sender,
        ))
}

/// Intrinsic gas: base cost, calldata, creation, access list and authorizations.
fn intrinsic_gas(tx: &TxEnvelope, spec: revm::primitives::hardfork::SpecId) -> u64 {
    use revm::primitives::hardfork::SpecId;
    let input = tx.input();
    let zeros = input.iter().filter(|b| **b == 0).count() as u64;
    let nonzeros = input.len() as u64 - zeros;
    let nonzero_cost = if spec >= SpecId::ISTANBUL { 16 } else { 68 };
    let mut gas = 21_000 + zeros * 4 + nonzeros * nonzero_cost;
    if tx.is_create() {
        if spec >= SpecId::HOMESTEAD {
            gas += 32_000;
        }
        if spec >= SpecId::SHANGHAI {
            gas += input.len().div_ceil(32) as u64 * 2;
        }
    }
    if let Some(list) = tx.access_list() {
        gas += list.0.len() as u64 * 2400
            + list
                .0
                .iter()
                .map(|i| i.storage_keys.len() as u64)
                .sum::<u64>()
                * 1900;
    }
    if let Some(auths) = tx.authorization_list() {
        gas += auths.len() as u64 * 25_000;
    }
    if spec >= SpecId::PRAGUE {
        // EIP-7623 floor: 10 per token, tokens = zeros + 4 * nonzeros.
        let floor = 21_000 + (zeros + 4 * nonzeros) * 10;
        gas = gas.max(floor);
    }
    gas
}
