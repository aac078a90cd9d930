//! Byte layouts of the state tables. Keys are hashed (keccak of address / slot) so that a
//! table scan walks the state trie's leaves in order; block numbers are big-endian so that
//! ranges run in block order.

use alloy::primitives::{keccak256, Address, B256, U256};
use alloy_trie::EMPTY_ROOT_HASH;
use revm::{primitives::KECCAK_EMPTY, state::AccountInfo};

/// An account as stored: what the trie leaf needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredAccount {
    pub nonce: u64,
    pub balance: U256,
    pub code_hash: B256,
    pub storage_root: B256,
}

impl StoredAccount {
    /// The account as its state-trie leaf holds it.
    pub fn trie_account(&self) -> alloy_trie::TrieAccount {
        alloy_trie::TrieAccount {
            nonce: self.nonce,
            balance: self.balance,
            storage_root: self.storage_root,
            code_hash: self.code_hash,
        }
    }
}

const ACCOUNT_LEN: usize = 8 + 32 + 32 + 32;

impl StoredAccount {
    pub fn from_info(info: &AccountInfo, storage_root: B256) -> Self {
        Self {
            nonce: info.nonce,
            balance: info.balance,
            code_hash: info.code_hash,
            storage_root,
        }
    }

    pub fn info(&self) -> AccountInfo {
        AccountInfo {
            nonce: self.nonce,
            balance: self.balance,
            code_hash: self.code_hash,
            code: None,
            ..Default::default()
        }
    }

    pub fn encode(&self) -> [u8; ACCOUNT_LEN] {
        let mut out = [0u8; ACCOUNT_LEN];
        out[..8].copy_from_slice(&self.nonce.to_be_bytes());
        out[8..40].copy_from_slice(&self.balance.to_be_bytes::<32>());
        out[40..72].copy_from_slice(self.code_hash.as_slice());
        out[72..].copy_from_slice(self.storage_root.as_slice());
        out
    }

    /// `None` for the empty value, which history uses for "did not exist".
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != ACCOUNT_LEN {
            return None;
        }
        Some(Self {
            nonce: u64::from_be_bytes(bytes[..8].try_into().ok()?),
            balance: U256::from_be_slice(&bytes[8..40]),
            code_hash: B256::from_slice(&bytes[40..72]),
            storage_root: B256::from_slice(&bytes[72..]),
        })
    }

    pub fn empty() -> Self {
        Self {
            nonce: 0,
            balance: U256::ZERO,
            code_hash: KECCAK_EMPTY,
            storage_root: EMPTY_ROOT_HASH,
        }
    }
}

pub fn hash_address(address: &Address) -> B256 {
    keccak256(address)
}

pub fn hash_slot(slot: &U256) -> B256 {
    keccak256(slot.to_be_bytes::<32>())
}

pub fn storage_key(hashed_address: &B256, hashed_slot: &B256) -> [u8; 64] {
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(hashed_address.as_slice());
    k[32..].copy_from_slice(hashed_slot.as_slice());
    k
}

/// `prefix ++ block` for the history tables.
pub fn history_key<const N: usize>(prefix: &[u8], block: u64) -> [u8; N] {
    let mut k = [0u8; N];
    k[..N - 8].copy_from_slice(prefix);
    k[N - 8..].copy_from_slice(&block.to_be_bytes());
    k
}

/// `block ++ rest` for the per-block changeset tables.
pub fn changeset_key<const N: usize>(block: u64, rest: &[u8]) -> [u8; N] {
    let mut k = [0u8; N];
    k[..8].copy_from_slice(&block.to_be_bytes());
    k[8..].copy_from_slice(rest);
    k
}

/// A block's senders as the senders table holds them: the addresses one after another.
pub fn encode_senders(senders: &[Address]) -> Vec<u8> {
    senders.iter().flat_map(|a| a.0 .0).collect()
}

pub fn decode_senders(bytes: &[u8]) -> Vec<Address> {
    bytes.chunks_exact(20).map(Address::from_slice).collect()
}

pub fn u256_bytes(v: &U256) -> [u8; 32] {
    v.to_be_bytes::<32>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_round_trip() {
        let a = StoredAccount {
            nonce: 7,
            balance: U256::from(12345u64),
            code_hash: B256::repeat_byte(1),
            storage_root: B256::repeat_byte(2),
        };
        assert_eq!(StoredAccount::decode(&a.encode()), Some(a));
        assert_eq!(StoredAccount::decode(&[]), None);
    }
}
