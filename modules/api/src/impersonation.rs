//! Transactions a dev node sends for an account it has no key of (`anvil_impersonateAccount`).
//!
//! Such a transaction carries a stand-in signature that names its sender: `r` is the sender's
//! address, `s` is 1. Its hash is then the ordinary hash of its encoding, different for every
//! sender, so blocks, the hash index and lookups treat it like any other; only the sender
//! cannot be recovered from it (the store keeps every block's senders, and every replay reads
//! them from there). A real signature with `s` = 1 and the signer's own address as `r` would
//! need a discrete logarithm, so the pattern marks impersonated transactions only.
//!
//! A block with impersonated transactions carries [`IMPERSONATION_EXTRA_DATA`] and runs with
//! EIP-3607 off (see [`crate::ChainSpec::evm_env`]), so that a contract can send one, as on
//! anvil, when the block is mined and whenever it is replayed.

use alloy::{
    consensus::{transaction::Recovered, TxEnvelope},
    primitives::{Address, Signature, U256},
};

/// The `extraData` of a dev block that holds impersonated transactions.
pub const IMPERSONATION_EXTRA_DATA: &[u8] = b"simnode impersonation";

/// The stand-in signature of a transaction impersonating `sender`.
pub fn signature(sender: Address) -> Signature {
    Signature::new(U256::from_be_slice(sender.as_slice()), U256::from(1), false)
}

/// The account `tx`'s signature names, if it is a stand-in signature.
pub fn named_sender(tx: &TxEnvelope) -> Option<Address> {
    let signature = tx.signature();
    let r = signature.r().to_be_bytes::<32>();
    let named = Address::from_slice(&r[12..]);
    (*signature == self::signature(named)).then_some(named)
}

/// Whether `tx` carries the stand-in signature of its sender.
pub fn is_impersonated(tx: &Recovered<TxEnvelope>) -> bool {
    named_sender(tx.inner()) == Some(tx.signer())
}

#[cfg(test)]
mod tests {
    use alloy::{
        consensus::{SignableTransaction, TxEip1559},
        primitives::address,
    };

    use super::*;

    #[test]
    fn the_signature_names_the_sender_and_only_that_sender_matches() {
        let sender = address!("0x1111111111111111111111111111111111111111");
        let signed = TxEnvelope::from(TxEip1559::default().into_signed(signature(sender)));
        assert!(is_impersonated(&Recovered::new_unchecked(
            signed.clone(),
            sender
        )));
        let other = address!("0x2222222222222222222222222222222222222222");
        assert!(!is_impersonated(&Recovered::new_unchecked(
            signed.clone(),
            other
        )));
        assert_eq!(named_sender(&signed), Some(sender));
        // The same transaction for another sender is another transaction.
        let for_other = TxEnvelope::from(TxEip1559::default().into_signed(signature(other)));
        assert_ne!(signed.tx_hash(), for_other.tx_hash());
    }
}
