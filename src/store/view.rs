//! The store as the modules see it: `simnode_api::ChainView`.

use std::sync::Arc;

use alloy::{
    consensus::{BlockBody, Header, ReceiptEnvelope, Sealed, TxEnvelope},
    primitives::B256,
    rlp::Decodable,
};
use redb::ReadableDatabase;
use simnode_api::{
    ChainHead, ChainView, RpcError, RpcResult, StateChanges, StateRef, StoredBlock, TxLocation,
};

use super::{
    HistoricalState, Store, StoreError, BODIES, META, META_HEAD, RECEIPTS, SENDERS, TX_INDEX,
};

impl From<StoreError> for RpcError {
    fn from(e: StoreError) -> Self {
        RpcError::Internal(e.to_string())
    }
}

fn read_body(
    tx: &redb::ReadTransaction,
    number: u64,
) -> Result<Option<BlockBody<TxEnvelope>>, StoreError> {
    let Some(raw) = tx.open_table(BODIES)?.get(number)? else {
        return Ok(None);
    };
    BlockBody::<TxEnvelope>::decode(&mut raw.value())
        .map(Some)
        .map_err(|e| StoreError::Corrupt(format!("body {number}: {e}")))
}

impl Store {
    pub fn block(&self, number: u64) -> Result<Option<StoredBlock>, StoreError> {
        let Some(header) = self.header_raw(number)? else {
            return Ok(None);
        };
        let tx = self.db().begin_read()?;
        let Some(body) = read_body(&tx, number)? else {
            return Ok(None);
        };
        let senders_table = tx.open_table(SENDERS)?;
        let senders = senders_table
            .get(number)?
            .map(|v| super::codec::decode_senders(v.value()))
            .unwrap_or_default();
        Ok(Some(StoredBlock {
            header,
            body,
            senders,
        }))
    }

    /// The body of canonical block `number`.
    pub fn body(&self, number: u64) -> Result<Option<BlockBody<TxEnvelope>>, StoreError> {
        read_body(&self.db().begin_read()?, number)
    }

    pub fn receipts(&self, number: u64) -> Result<Option<Vec<ReceiptEnvelope>>, StoreError> {
        let tx = self.db().begin_read()?;
        let table = tx.open_table(RECEIPTS)?;
        let Some(raw) = table.get(number)? else {
            return Ok(None);
        };
        let receipts = Vec::<ReceiptEnvelope>::decode(&mut raw.value())
            .map_err(|e| StoreError::Corrupt(format!("receipts {number}: {e}")))?;
        Ok(Some(receipts))
    }

    pub fn state_after(&self, number: u64) -> Result<HistoricalState, StoreError> {
        let snapshot = self.snapshot()?;
        // The head as this snapshot has it: with reorgs the in-memory head can move either way
        // between the snapshot and a read of it, and only the snapshot's own head says which
        // tables hold the current state.
        Ok(HistoricalState::new(
            snapshot.state.clone(),
            number,
            snapshot.head.max(number),
        ))
    }
}

impl Store {
    /// Whether canonical block `number` is served to readers (see [`Store::served_head`]).
    fn serves(&self, number: u64) -> bool {
        number <= self.served_head()
    }
}

/// The head block number as the read transaction `tx` sees it.
pub(crate) fn snapshot_head(tx: &redb::ReadTransaction) -> Result<u64, StoreError> {
    Ok(tx
        .open_table(META)?
        .get(META_HEAD)?
        .map_or(0, |v| v.value()))
}

/// Readers are served the chain up to [`Store::served_head`]: blocks stored above it wait for
/// the consensus client to name them, and until then are found by hash only, as side blocks.
impl ChainView for Store {
    fn head(&self) -> ChainHead {
        ChainHead {
            latest: self.served_head(),
            ..Store::head(self)
        }
    }

    fn write_failure(&self) -> Option<String> {
        Store::write_failure(self).map(str::to_owned)
    }

    fn canonical_hash(&self, number: u64) -> RpcResult<Option<B256>> {
        if !self.serves(number) {
            return Ok(None);
        }
        let snapshot = self.snapshot()?;
        let hash = snapshot
            .canonical
            .get(number)
            .map_err(StoreError::from)?
            .map(|v| B256::from_slice(v.value()));
        Ok(hash)
    }

    fn block_number(&self, hash: &B256) -> RpcResult<Option<u64>> {
        Ok(self.number_of(hash)?.filter(|number| self.serves(*number)))
    }

    fn header(&self, number: u64) -> RpcResult<Option<Arc<Sealed<Header>>>> {
        if !self.serves(number) {
            return Ok(None);
        }
        Ok(self.header_raw(number)?.map(Arc::new))
    }

    fn block(&self, number: u64) -> RpcResult<Option<Arc<StoredBlock>>> {
        if !self.serves(number) {
            return Ok(None);
        }
        Ok(Store::block(self, number)?.map(Arc::new))
    }

    fn side_block(&self, hash: &B256) -> RpcResult<Option<Arc<StoredBlock>>> {
        use alloy::consensus::transaction::SignerRecoverable;
        // A block stored above the served head: served by hash, as geth serves a block it
        // inserted without making it the head.
        if let Some(number) = self.number_of(hash)? {
            if !self.serves(number) {
                return Ok(Store::block(self, number)?.map(Arc::new));
            }
            return Ok(None);
        }
        let Some((header, body)) = Store::side_block(self, hash)? else {
            return Ok(None);
        };
        // Side blocks are kept without their senders; one whose senders do not recover is
        // not one this node would serve.
        let senders: Option<Vec<_>> = body
            .transactions
            .iter()
            .map(|tx| {
                simnode_api::impersonation::named_sender(tx).or_else(|| tx.recover_signer().ok())
            })
            .collect();
        Ok(senders.map(|senders| {
            Arc::new(StoredBlock {
                header,
                body,
                senders,
            })
        }))
    }

    fn chain_events(&self) -> tokio::sync::broadcast::Receiver<simnode_api::ChainEvent> {
        Store::chain_events(self)
    }

    fn sync_target(&self) -> tokio::sync::watch::Receiver<Option<simnode_api::SyncTarget>> {
        Store::sync_target(self)
    }

    fn receipts(&self, number: u64) -> RpcResult<Option<Arc<Vec<ReceiptEnvelope>>>> {
        if !self.serves(number) {
            return Ok(None);
        }
        Ok(Store::receipts(self, number)?.map(Arc::new))
    }

    fn transaction_location(&self, hash: &B256) -> RpcResult<Option<TxLocation>> {
        let tx = self.db().begin_read().map_err(StoreError::from)?;
        let table = tx.open_table(TX_INDEX).map_err(StoreError::from)?;
        let Some(v) = table.get(hash.as_slice()).map_err(StoreError::from)? else {
            return Ok(None);
        };
        let v = v.value();
        if v.len() != 12 {
            return Err(StoreError::Corrupt("tx index entry".into()).into());
        }
        let block_number = u64::from_be_bytes(v[..8].try_into().unwrap_or_default());
        let index = u32::from_be_bytes(v[8..].try_into().unwrap_or_default()) as u64;
        let Some(block_hash) = self.canonical_hash(block_number)? else {
            return Ok(None);
        };
        Ok(Some(TxLocation {
            block_number,
            block_hash,
            index,
        }))
    }

    fn state_at(&self, number: u64) -> RpcResult<StateRef> {
        Ok(Box::new(self.state_after(number)?))
    }

    fn state_root_with(&self, base: u64, changes: &StateChanges) -> RpcResult<B256> {
        Ok(Store::state_root_on(self, base, changes)?)
    }

    fn state_root_carried(&self, base: u64, carry: &mut simnode_api::RootCarry) -> RpcResult<B256> {
        Ok(Store::state_root_carried(self, base, carry)?)
    }

    fn proof(
        &self,
        number: u64,
        address: alloy::primitives::Address,
        keys: &[alloy::serde::JsonStorageKey],
    ) -> RpcResult<alloy::rpc::types::EIP1186AccountProofResponse> {
        Ok(Store::proof(self, number, address, keys)?)
    }

    fn trie_account(
        &self,
        number: u64,
        address: alloy::primitives::Address,
    ) -> RpcResult<Option<alloy::consensus::TrieAccount>> {
        let account = self.state_after(number)?.account(&address)?;
        Ok(account.map(|account| account.trie_account()))
    }

    fn storage_slots(
        &self,
        number: u64,
        address: alloy::primitives::Address,
        start: B256,
        limit: usize,
    ) -> RpcResult<Vec<(B256, alloy::primitives::U256)>> {
        Ok(self
            .state_after(number)?
            .storage_page(&address, &start, limit)?)
    }

    fn execution_witness(&self, number: u64) -> RpcResult<simnode_api::ExecutionWitness> {
        crate::exec::witness::execution_witness(self, number).map_err(|err| match err {
            crate::exec::BlockError::StateEdit { .. } => RpcError::Server(err.to_string()),
            err => RpcError::Internal(err.to_string()),
        })
    }

    fn intermediate_roots(&self, block: &StoredBlock) -> RpcResult<Vec<B256>> {
        let parent = block
            .number()
            .checked_sub(1)
            .and_then(|number| self.header_raw(number).transpose())
            .transpose()?
            .filter(|parent| parent.hash() == block.header.parent_hash)
            .ok_or_else(|| {
                RpcError::Server(format!("parent {} not found", block.header.parent_hash))
            })?;
        crate::exec::intermediate_roots(self, &parent, block)
            .map_err(|err| RpcError::Internal(err.to_string()))
    }

    fn bad_blocks(&self) -> RpcResult<Vec<(B256, alloy::primitives::Bytes)>> {
        Ok(Store::bad_blocks(self)?
            .into_iter()
            .map(|(hash, rlp)| (hash, rlp.into()))
            .collect())
    }
}
