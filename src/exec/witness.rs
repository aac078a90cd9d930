//! `debug_executionWitness`: the part of a block's pre-state a stateless client needs to
//! re-execute it, as geth builds it.
//!
//! The block is run again on its parent's state (the same [`run_block_on`] that imported it)
//! through a database that notes every account, slot, code and block hash the run reads. The
//! store then gives the trie nodes on the paths to those accounts and slots in the parent's
//! state, plus the nodes deletions make the trie read (see `store::witness`). Codes are the ones
//! the EVM loaded (revm asks for code only when it runs it or needs its size), and headers go from
//! the parent back to the oldest block `BLOCKHASH` read.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, PoisonError},
};

use alloy::primitives::{Address, Bytes, B256, U256};
use revm::{bytecode::Bytecode, state::AccountInfo, DatabaseRef};
use simnode_api::{ExecutionWitness, StateError, StateReader};

use super::{run_block_on, BlockError};
use crate::store::{Store, StoreError};

/// What one run read from the parent's state.
#[derive(Debug, Default)]
pub struct Reads {
    pub accounts: BTreeSet<Address>,
    pub slots: BTreeMap<Address, BTreeSet<U256>>,
    pub codes: BTreeSet<B256>,
    /// The oldest block whose hash `BLOCKHASH` asked for.
    pub oldest_block_hash: Option<u64>,
}

/// A parent state that notes what is read from it.
#[derive(Debug)]
struct Recording<D> {
    inner: D,
    reads: Arc<Mutex<Reads>>,
}

impl<D> Recording<D> {
    fn note(&self, f: impl FnOnce(&mut Reads)) {
        // A panic elsewhere while holding the lock leaves the sets usable: they only grow.
        f(&mut self.reads.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

impl<D: StateReader> DatabaseRef for Recording<D> {
    type Error = StateError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, StateError> {
        self.note(|r| {
            r.accounts.insert(address);
        });
        self.inner.basic_ref(address)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, StateError> {
        self.note(|r| {
            r.codes.insert(code_hash);
        });
        self.inner.code_by_hash_ref(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, StateError> {
        self.note(|r| {
            r.slots.entry(address).or_default().insert(index);
        });
        self.inner.storage_ref(address, index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, StateError> {
        self.note(|r| {
            r.oldest_block_hash = Some(r.oldest_block_hash.map_or(number, |o| o.min(number)));
        });
        self.inner.block_hash_ref(number)
    }
}

/// The witness of canonical block `number`, which must not be genesis.
pub fn execution_witness(store: &Store, number: u64) -> Result<ExecutionWitness, BlockError> {
    let missing = |what: &str| StoreError::Corrupt(format!("block {number}: no stored {what}"));
    let parent_number = number
        .checked_sub(1)
        .ok_or_else(|| missing("parent of genesis"))?;
    let block = store.block(number)?.ok_or_else(|| missing("body"))?;
    let parent = store
        .header_raw(parent_number)?
        .ok_or_else(|| missing("parent header"))?;
    if block.senders.len() != block.body.transactions.len() {
        return Err(missing("sender for every transaction").into());
    }

    let reads = Arc::new(Mutex::new(Reads::default()));
    let recording = Recording {
        inner: store.state_after(parent_number)?,
        reads: reads.clone(),
    };
    let txs = super::with_senders(&block);
    let run = run_block_on(
        store,
        recording,
        &parent,
        &block.header,
        &block.body.ommers,
        block.body.withdrawals.as_ref().map(|w| w.as_slice()),
        &txs,
        false,
        None,
    )?;
    let reads = std::mem::take(&mut *reads.lock().unwrap_or_else(PoisonError::into_inner));
    // Only a dev chain's edit blocks carry the marker, and only those can disagree with their
    // execution; checking the marker first keeps the root computation off every other block.
    if block.header.extra_data.as_ref() == crate::sync::dev::STATE_EDIT_EXTRA_DATA
        && store.state_root_on(parent_number, &run.changes)? != block.header.state_root
    {
        return Err(BlockError::StateEdit {
            number,
            what: "no witness proves its state",
        });
    }

    let state = store.witness_nodes(parent_number, &reads, &run.changes)?;
    let parent_state = store.state_after(parent_number)?;
    let mut codes = Vec::with_capacity(reads.codes.len());
    for hash in &reads.codes {
        let code = parent_state
            .code_by_hash_ref(*hash)
            .map_err(|e| StoreError::Corrupt(format!("code {hash}: {}", e.0)))?;
        codes.push(code.original_bytes());
    }
    codes.sort_unstable();

    let oldest = reads
        .oldest_block_hash
        .unwrap_or(parent_number)
        .min(parent_number);
    let mut headers = Vec::new();
    for n in (oldest..=parent_number).rev() {
        let header = store
            .header_raw(n)?
            .ok_or_else(|| missing("ancestor header"))?;
        headers.push(Bytes::from(alloy::rlp::encode(header.inner())));
    }
    Ok(ExecutionWitness {
        state,
        codes,
        headers,
    })
}
