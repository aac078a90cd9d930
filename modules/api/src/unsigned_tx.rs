//! Transactions without a signature, as geth makes them where it has none to give
//! (eth_simulateV1's transactions, eth_fillTransaction's answer): `v`, `r` and `s` all zero.
//! For a legacy transaction that means no EIP-155 chain id (it lives in `v`), and the zeros
//! are part of its encoding and hash; alloy would write `v` as 27 (or from the chain id).

use alloy::{
    consensus::{transaction::RlpEcdsaEncodableTx, Signed, TxEnvelope, TxLegacy},
    eips::Encodable2718,
    primitives::{Signature, U256},
};

/// A legacy transaction with a zero signature, hashed as geth hashes it (its chain id, which an
/// unsigned legacy transaction cannot carry, is dropped).
pub fn legacy(mut tx: TxLegacy) -> TxEnvelope {
    tx.chain_id = None;
    let mut encoded = Vec::with_capacity(tx.rlp_encoded_fields_length() + 8);
    encode_legacy(&tx, &mut encoded);
    let hash = alloy::primitives::keccak256(&encoded);
    TxEnvelope::Legacy(Signed::new_unchecked(tx, zero_signature(), hash))
}

/// The all-zero signature of an unsigned transaction.
pub fn zero_signature() -> Signature {
    Signature::new(U256::ZERO, U256::ZERO, false)
}

fn encode_legacy(tx: &TxLegacy, out: &mut dyn alloy::rlp::BufMut) {
    use alloy::rlp::Encodable;
    // v, r and s: three zeros of one byte each.
    let payload_length = tx.rlp_encoded_fields_length() + 3;
    alloy::rlp::Header {
        list: true,
        payload_length,
    }
    .encode(out);
    tx.rlp_encode_fields(out);
    for _ in 0..3 {
        0u8.encode(out);
    }
}

/// `tx`'s EIP-2718 encoding where every legacy transaction is an unsigned one ([`legacy`]).
pub fn encode(tx: &TxEnvelope, out: &mut Vec<u8>) {
    match tx {
        TxEnvelope::Legacy(signed) => encode_legacy(signed.tx(), out),
        other => other.encode_2718(out),
    }
}

/// `tx` as JSON, `v` written as geth writes an unsigned legacy transaction's: zero.
pub fn legacy_json_v(tx: &mut serde_json::Value) {
    tx["v"] = serde_json::Value::from("0x0");
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::{Address, TxKind};

    #[test]
    fn an_unsigned_legacy_transaction_ends_in_three_zeros_and_hashes_so() {
        let tx = legacy(TxLegacy {
            chain_id: Some(1337),
            nonce: 0,
            gas_price: 1_000_000_000,
            gas_limit: 21_000,
            to: TxKind::Call(Address::repeat_byte(0x14)),
            ..Default::default()
        });
        let mut raw = Vec::new();
        encode(&tx, &mut raw);
        assert!(raw.ends_with(&[0x80, 0x80, 0x80]), "{raw:?}");
        assert_eq!(*tx.tx_hash(), alloy::primitives::keccak256(&raw));
        assert_eq!(alloy::consensus::Transaction::chain_id(&tx), None);
    }
}
