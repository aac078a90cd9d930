//! The transaction pool as modules see it.

use alloy::{
    consensus::{transaction::Recovered, TxEnvelope},
    eips::{
        eip4844::{c_kzg, env_settings::KzgSettings},
        eip7594::BlobTransactionSidecarVariant,
    },
    primitives::{Address, B256, U256},
};

use crate::RpcResult;

/// The most `tx` can spend: its gas at its fee cap, its blob gas at its blob fee cap, and its
/// value (geth's `tx.Cost()`), which its sender's balance must cover in the pool.
pub fn max_cost(tx: &TxEnvelope) -> U256 {
    use alloy::consensus::Transaction;
    let mut cost = U256::from(tx.gas_limit()) * U256::from(tx.max_fee_per_gas()) + tx.value();
    if let Some(blob_gas) = tx.blob_gas_used() {
        cost += U256::from(blob_gas) * U256::from(tx.max_fee_per_blob_gas().unwrap_or(0));
    }
    cost
}

/// The mainnet KZG trusted setup the node verifies blob sidecars' proofs and computes cell
/// proofs with, loaded on first use (about two seconds of one core). Without c-kzg's
/// precomputed tables (`precompute` 0): they would hold 96 MiB to make computing a blob's cell
/// proofs, which only a sidecar converted across Osaka needs, about a third faster.
pub fn kzg_settings() -> &'static KzgSettings {
    c_kzg::ethereum_kzg_settings(0)
}

/// What the latest state says of a transaction's sender, for the pool rules that depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderState {
    /// The sender's nonce.
    pub nonce: u64,
    /// Whether the sender has code: under EIP-3607 only an EIP-7702 delegation lets an
    /// account with code send.
    pub delegated: bool,
}

pub trait TxPool: Send + Sync {
    /// Adds a transaction sent over RPC, checked by the caller against the latest state, where
    /// `sender` stands: [`Self::insert`] or [`Self::insert_with_sidecar`] and the rules that
    /// depend on that state (geth's EIP-7702 in-flight limits), in a pool that applies them.
    fn admit(
        &self,
        tx: Recovered<TxEnvelope>,
        sidecar: Option<BlobTransactionSidecarVariant>,
        sender: SenderState,
    ) -> RpcResult<B256> {
        let _ = sender;
        match sidecar {
            Some(sidecar) => self.insert_with_sidecar(tx, sidecar),
            None => self.insert(tx),
        }
    }

    /// Adds a transaction the caller has decoded, recovered and validated against the latest
    /// state. Rejects duplicates ("already known") and replacements without a fee bump.
    fn insert(&self, tx: Recovered<TxEnvelope>) -> RpcResult<B256>;
    /// [`Self::insert`] for a blob transaction that came with its sidecar (checked by the
    /// caller to belong to it), which a proposer must publish with a block carrying it. A pool
    /// that builds no blocks for proposers may drop the sidecar, as this default does.
    fn insert_with_sidecar(
        &self,
        tx: Recovered<TxEnvelope>,
        sidecar: BlobTransactionSidecarVariant,
    ) -> RpcResult<B256> {
        let _ = sidecar;
        self.insert(tx)
    }
    /// Transactions waiting for a block, each sender's in nonce order.
    fn pending(&self) -> Vec<Recovered<TxEnvelope>>;
    /// A pending transaction by hash.
    fn get(&self, hash: &B256) -> Option<Recovered<TxEnvelope>>;
    /// The next nonce of `sender` counting its pending transactions, if it has any.
    fn pending_nonce(&self, sender: &Address) -> Option<u64>;

    /// `sender`'s pending transactions: the gapless run of nonces from `state_nonce` (its
    /// nonce in the latest state), in nonce order.
    fn pending_run(&self, _sender: &Address, _state_nonce: u64) -> Vec<TxEnvelope> {
        Vec::new()
    }

    /// Announces (see [`TxPool::pool_events`]) `sender`'s transactions that can now run, the
    /// gapless run from `state_nonce` (the sender's nonce in the latest state), each once: a
    /// transaction behind a nonce gap is announced when the gap fills, as geth announces a
    /// transaction when its pool promotes it. Called after an insert.
    fn promote(&self, _sender: &Address, _state_nonce: u64) {}

    /// Whether a block is mined as soon as a transaction arrives (a dev node's automine): the
    /// send methods then answer once that block is stored, as hardhat's do, so that a receipt
    /// asked for right after the answer is there (clients that poll once and then wait for a
    /// next block would otherwise wait for one automine never makes).
    fn mines_on_arrival(&self) -> bool {
        false
    }

    /// Whether the waiting transaction `hash` can run now, being in its sender's gapless run
    /// (announced by [`Self::promote`]); one behind a nonce gap waits for the gap.
    fn can_run_now(&self, hash: &B256) -> bool {
        let _ = hash;
        true
    }

    /// Transactions entering the pool from now on (see [`crate::events`]). Pools that do not
    /// announce them have none: the receiver reports the channel closed.
    fn pool_events(&self) -> tokio::sync::broadcast::Receiver<crate::PoolEvent> {
        tokio::sync::broadcast::channel(1).1
    }

    /// The nonce `sender`'s next transaction should use, given its nonce in the latest state:
    /// past the pending transactions that follow on from it without a gap (a transaction behind a
    /// gap cannot be mined yet, so it does not count).
    fn next_nonce(&self, sender: &Address, state_nonce: u64) -> u64 {
        let nonces: std::collections::BTreeSet<u64> = self
            .pending()
            .iter()
            .filter(|tx| tx.signer() == *sender)
            .map(|tx| alloy::consensus::Transaction::nonce(tx.inner()))
            .collect();
        let mut next = state_nonce;
        while nonces.contains(&next) {
            next += 1;
        }
        next
    }
}
