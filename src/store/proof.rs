//! EIP-1186 proofs (`eth_getProof`): the account-trie path to one account and the storage-trie
//! paths to some of its slots, in the state after any stored block.
//!
//! Like the state root (see `trie.rs`), a proof rebuilds the tries from the hashed state tables,
//! retaining the nodes on the way to each target: the account trie from the accounts turned back
//! to the wanted block with the history of the accounts changed since, a storage trie from its
//! account's slots as they stood then (only the slots of the accounts proved are read). The rebuilt root is checked against the block's header, so a proof that
//! would not verify is an error rather than an answer.

use std::collections::BTreeMap;

use alloy::consensus::{Header, Sealed};
use alloy::{
    primitives::{keccak256, Address, Bytes, B256, U256},
    rpc::types::{EIP1186AccountProofResponse, EIP1186StorageProof},
    serde::JsonStorageKey,
};
use alloy_trie::{proof::ProofRetainer, HashBuilder, Nibbles, EMPTY_ROOT_HASH};
use redb::{ReadOnlyTable, ReadableDatabase};

use super::{
    codec::{hash_address, StoredAccount},
    state,
    state::HistoricalState,
    trie::{HashedOverlay, StateSource},
    Store, StoreError, TableSource, ACCOUNTS, STORAGE,
};

/// The hashed account and storage tables of one read snapshot.
pub(super) type StateTablesSource = TableSource<RawTable, RawTable>;
type RawTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The state after a canonical block as the trie builders read it.
pub(super) struct StateTables {
    pub header: Sealed<Header>,
    /// Every account of the block's state, by hashed address.
    pub accounts: BTreeMap<B256, StoredAccount>,
    /// The block's state on the same snapshot, for the slots of the accounts a trie is built
    /// for (read on demand: a block's accounts need no one else's storage).
    state: HistoricalState,
}

impl StateTables {
    /// Every non-zero slot of the account with hashed address `hashed`, by hashed slot.
    pub fn slots(&self, hashed: &B256) -> Result<BTreeMap<B256, U256>, StoreError> {
        Ok(self
            .state
            .storage_page_of(*hashed, &B256::ZERO, usize::MAX)?
            .into_iter()
            .collect())
    }
}

impl Store {
    /// The state after canonical block `number`, read from one snapshot of the database.
    pub(super) fn state_tables(&self, number: u64) -> Result<StateTables, StoreError> {
        let header = self
            .header_raw(number)?
            .ok_or_else(|| StoreError::Corrupt(format!("no header for block {number}")))?;
        // One snapshot: the accounts (the stored ones under what later blocks changed) and
        // the state their storage is read from must agree.
        let tx = self.db().begin_read()?;
        let latest = super::view::snapshot_head(&tx)?.max(number);
        let overlay = if number < latest {
            state::revert_accounts(&tx, number)?
        } else {
            HashedOverlay::default()
        };
        let source: StateTablesSource =
            TableSource::from_tables(tx.open_table(ACCOUNTS)?, tx.open_table(STORAGE)?);
        let accounts = accounts_at(&source, &overlay)?;
        let state = HistoricalState::new(
            std::sync::Arc::new(state::StateTables::open(&tx)?),
            number,
            latest,
        );
        Ok(StateTables {
            header,
            accounts,
            state,
        })
    }

    /// The proof of `address` and `keys` in the state after canonical block `number`.
    pub fn proof(
        &self,
        number: u64,
        address: Address,
        keys: &[JsonStorageKey],
    ) -> Result<EIP1186AccountProofResponse, StoreError> {
        let tables = self.state_tables(number)?;
        let (header, accounts) = (&tables.header, &tables.accounts);

        let hashed = hash_address(&address);
        let (state_root, mut account_proofs) = prove(
            accounts
                .iter()
                .map(|(k, a)| (*k, alloy::rlp::encode(a.trie_account()))),
            &[hashed],
        );
        if state_root != header.state_root {
            return Err(StoreError::StateRoot {
                number,
                expected: header.state_root,
                got: state_root,
            });
        }
        let account_proof = account_proofs.pop().unwrap_or_default();

        let account = accounts.get(&hashed).copied();
        let storage_proof = match account {
            Some(account) if account.storage_root != EMPTY_ROOT_HASH && !keys.is_empty() => {
                let slots = tables.slots(&hashed)?;
                let targets: Vec<B256> = keys.iter().map(|key| keccak256(key.as_b256())).collect();
                // One build of the storage trie retains the paths to every requested slot.
                let (root, proofs) = prove(
                    slots.iter().map(|(k, v)| (*k, alloy::rlp::encode(v))),
                    &targets,
                );
                check_storage_root(address, number, root, account.storage_root)?;
                keys.iter()
                    .zip(&targets)
                    .zip(proofs)
                    .map(|((key, slot), proof)| EIP1186StorageProof {
                        key: *key,
                        value: slots.get(slot).copied().unwrap_or_default(),
                        proof,
                    })
                    .collect()
            }
            // No storage: every value is zero and the proof is empty, as geth answers.
            _ => keys
                .iter()
                .map(|key| EIP1186StorageProof {
                    key: *key,
                    value: U256::ZERO,
                    proof: Vec::new(),
                })
                .collect(),
        };
        // An account that does not exist has zero hashes, as geth answers (its state gives
        // zero for an account with no object); the proof shows it absent.
        let account = account.unwrap_or(StoredAccount {
            nonce: 0,
            balance: U256::ZERO,
            code_hash: B256::ZERO,
            storage_root: B256::ZERO,
        });
        Ok(EIP1186AccountProofResponse {
            address,
            balance: account.balance,
            code_hash: account.code_hash,
            nonce: account.nonce,
            storage_hash: account.storage_root,
            account_proof,
            storage_proof,
        })
    }
}

/// Every account of the state `overlay` turns the stored state into, by hashed address.
fn accounts_at<S: StateSource<Error = StoreError>>(
    source: &S,
    overlay: &HashedOverlay,
) -> Result<BTreeMap<B256, StoredAccount>, StoreError> {
    let mut accounts = BTreeMap::new();
    source.for_each_account(&mut |k, v| {
        accounts.insert(k, v);
    })?;
    for (hashed, account) in &overlay.accounts {
        match account {
            None => {
                accounts.remove(hashed);
            }
            Some(a) => {
                let storage_root = match a.storage_root {
                    Some(root) => root,
                    None => accounts
                        .get(hashed)
                        .map_or(EMPTY_ROOT_HASH, |s| s.storage_root),
                };
                accounts.insert(
                    *hashed,
                    StoredAccount {
                        nonce: a.nonce,
                        balance: a.balance,
                        code_hash: a.code_hash,
                        storage_root,
                    },
                );
            }
        }
    }
    Ok(accounts)
}

/// The root of the trie of `leaves` (ascending keys) and, for each of `targets`, the nodes on
/// the path to it, root first.
fn prove(
    leaves: impl Iterator<Item = (B256, Vec<u8>)>,
    targets: &[B256],
) -> (B256, Vec<Vec<Bytes>>) {
    let paths: Vec<Nibbles> = targets.iter().map(|t| Nibbles::unpack(t)).collect();
    let mut hb = HashBuilder::default().with_proof_retainer(ProofRetainer::new(paths.clone()));
    let mut any = false;
    for (key, value) in leaves {
        any = true;
        hb.add_leaf(Nibbles::unpack(key), &value);
    }
    if !any {
        return (EMPTY_ROOT_HASH, vec![Vec::new(); targets.len()]);
    }
    let root = hb.root();
    let nodes = hb.take_proof_nodes();
    let proofs = paths
        .iter()
        .map(|path| {
            nodes
                .matching_nodes_sorted(path)
                .into_iter()
                .map(|(_, node)| node)
                .collect()
        })
        .collect();
    (root, proofs)
}

/// A storage trie rebuilt from the tables must have the root its account stores; anything else
/// means the database is damaged, and an answer built from it would not verify.
pub(super) fn check_storage_root(
    address: Address,
    number: u64,
    rebuilt: B256,
    stored: B256,
) -> Result<(), StoreError> {
    if rebuilt == stored {
        return Ok(());
    }
    Err(StoreError::Corrupt(format!(
        "storage root of {address} at block {number}: rebuilt {rebuilt}, stored {stored}"
    )))
}
