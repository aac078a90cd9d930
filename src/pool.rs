//! The transaction pool: transactions accepted by `eth_sendRawTransaction` wait here until a
//! block includes them (the dev miner builds from it; a synced node drops them when an
//! imported block carries them). A blob transaction sent with its sidecar keeps it here, for
//! the payloads built for a proposer and for `engine_getBlobsV*`.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use alloy::{
    consensus::{transaction::Recovered, Transaction, TxEnvelope},
    eips::eip7594::BlobTransactionSidecarVariant,
    primitives::{Address, B256, U256},
};
use simnode_api::{events::EventSender, pool::SenderState, PoolEvent, RpcError, RpcResult, TxPool};
use tokio::sync::Notify;

/// Most transactions kept at once; beyond it new ones are refused rather than memory growing.
const MAX_POOL_SIZE: usize = 10_000;
/// Most blobs whose sidecars are kept at once (a blob is 128 KiB, so about 64 MiB); a blob
/// transaction that would take the pool past it is refused.
pub(crate) const MAX_POOL_BLOBS: usize = 512;
/// A replacement must pay at least this much more (percent), as geth requires.
const PRICE_BUMP_PERCENT: u128 = 10;
/// A blob transaction's replacement must pay this much more (percent) in each of its fee cap,
/// tip and blob fee cap, as geth's blob pool and reth require: its blobs cost the network far
/// more to pass on again than a transaction does.
const BLOB_PRICE_BUMP_PERCENT: u128 = 100;

#[derive(Default)]
struct Inner {
    by_hash: HashMap<B256, Recovered<TxEnvelope>>,
    /// sender -> nonce -> hash
    by_sender: HashMap<Address, BTreeMap<u64, B256>>,
    /// Arrival order, for fair block building across senders.
    arrival: BTreeMap<u64, B256>,
    seq: u64,
    seq_of: HashMap<B256, u64>,
    /// The sidecars of blob transactions that came with one, by transaction hash.
    sidecars: HashMap<B256, Arc<BlobTransactionSidecarVariant>>,
    /// How many blobs `sidecars` holds.
    blobs: usize,
    /// Moves on every insert and removal, so that what was built from the pool can tell it is
    /// out of date.
    revision: u64,
    /// Transactions announced to `newPendingTransactions` (see [`TxPool::promote`]).
    announced: std::collections::HashSet<B256>,
    /// The authorities of the EIP-7702 authorizations each waiting transaction carries (those
    /// that recover), and how many waiting authorizations name each authority.
    authorities: HashMap<B256, Vec<Address>>,
    authorizing: HashMap<Address, usize>,
}

#[derive(Default)]
pub struct Pool {
    inner: Mutex<Inner>,
    /// Woken on every insert: the dev miner waits on it.
    pub added: Notify,
    /// Every accepted transaction, for `eth_subscribe("newPendingTransactions")`.
    events: EventSender<PoolEvent>,
    /// Whether sidecars are being converted to cell proofs (see [`Pool::convert_to_cell_proofs`]).
    converting: AtomicBool,
    /// Whether the pool applies the rules of geth's and reth's pools that a dev node's (anvil's)
    /// does not (see [`Pool::strict`]).
    strict: bool,
    /// Whether the dev miner mines a block for each arrival (see [`TxPool::mines_on_arrival`]).
    mines_on_arrival: AtomicBool,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("len", &self.len()).finish()
    }
}

impl Pool {
    /// A pool with the rules of geth's and reth's that a dev node's pool (`default`, as anvil's)
    /// goes without:
    /// - It holds a sender's blob transactions or its other ones, not both (geth's blob pool
    ///   reserves the sender: "address already reserved"): a block builder could otherwise be
    ///   handed a blob transaction stuck behind others of the sender it cannot take.
    /// - EIP-7702's in-flight limits, as geth's legacy pool applies them: an account with a
    ///   delegation, or named by a waiting authorization, has at most one executable
    ///   transaction waiting and none behind a gap (any transaction may drain its balance, so
    ///   the pool could not tell whether the later ones can pay); and an authorization may not
    ///   name an account with more than one transaction waiting.
    pub fn strict() -> Self {
        Self {
            strict: true,
            ..Self::default()
        }
    }

    /// Set by the dev miner as its mining mode changes.
    pub fn set_mines_on_arrival(&self, on: bool) {
        self.mines_on_arrival.store(on, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.lock().by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A number that changes whenever the pool's transactions do.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The waiting transactions in the order a block producer takes them, as geth's miner
    /// and anvil's fee ordering do: each sender's in nonce order, and of the senders' next
    /// ones, the one paying the producer the most per gas at `base_fee` first, the earlier
    /// arrival on a tie. One whose fee cap is under the base fee pays nothing.
    pub fn by_price_and_nonce(&self, base_fee: u64) -> Vec<Recovered<TxEnvelope>> {
        use std::{cmp::Reverse, collections::BinaryHeap};
        let inner = self.lock();
        let tip = |hash: &B256| {
            let tx = &inner.by_hash[hash];
            tx.effective_tip_per_gas(base_fee).unwrap_or(0)
        };
        let mut queues: Vec<_> = inner.by_sender.values().map(|n| n.values()).collect();
        let mut heap = BinaryHeap::with_capacity(queues.len());
        for (queue, nonces) in queues.iter_mut().enumerate() {
            if let Some(hash) = nonces.next() {
                heap.push((tip(hash), Reverse(inner.seq_of[hash]), queue, *hash));
            }
        }
        let mut out = Vec::with_capacity(inner.by_hash.len());
        while let Some((_, _, queue, hash)) = heap.pop() {
            out.push(inner.by_hash[&hash].clone());
            if let Some(next) = queues[queue].next() {
                heap.push((tip(next), Reverse(inner.seq_of[next]), queue, *next));
            }
        }
        out
    }

    /// Adds `tx`, and the sidecar it came with: refuses a transaction already here, a
    /// replacement that does not pay [`PRICE_BUMP_PERCENT`] more ([`BLOB_PRICE_BUMP_PERCENT`]
    /// for a blob transaction's), and one a full pool has no
    /// room for (in transactions, or in blobs when it brings a sidecar).
    /// With `state` (the sender in the latest state, known for transactions sent over RPC), a
    /// strict pool also applies the EIP-7702 limits.
    fn add(
        &self,
        tx: Recovered<TxEnvelope>,
        sidecar: Option<BlobTransactionSidecarVariant>,
        state: Option<SenderState>,
    ) -> RpcResult<B256> {
        let hash = *tx.tx_hash();
        // Recovered before the lock is taken: an ecrecover each.
        let authorities: Vec<Address> = if self.strict {
            tx.authorization_list()
                .unwrap_or_default()
                .iter()
                .filter_map(|auth| auth.recover_authority().ok())
                .collect()
        } else {
            Vec::new()
        };
        {
            let mut inner = self.lock();
            if inner.by_hash.contains_key(&hash) {
                return Err(RpcError::Server("already known".into()));
            }
            let sender = tx.signer();
            let nonce = tx.nonce();
            let other_kind = self.strict
                && inner.by_sender.get(&sender).is_some_and(|nonces| {
                    nonces
                        .values()
                        .any(|h| inner.by_hash[h].is_eip4844() != tx.is_eip4844())
                });
            if other_kind {
                return Err(RpcError::Server("address already reserved".into()));
            }
            if let (true, Some(state)) = (self.strict, state) {
                inner.check_delegation_limits(sender, nonce, state, &authorities)?;
            }
            let replaced = inner
                .by_sender
                .get(&sender)
                .and_then(|m| m.get(&nonce))
                .copied();
            if let Some(old_hash) = replaced {
                let old = &inner.by_hash[&old_hash];
                let bump = if old.is_eip4844() {
                    BLOB_PRICE_BUMP_PERCENT
                } else {
                    PRICE_BUMP_PERCENT
                };
                // geth's legacy pool also wants each fee strictly above the old one (a 10%
                // bump of a tiny fee rounds to nothing); its blob pool the doubling alone.
                let strict = !old.is_eip4844();
                let short = |new: u128, old: u128| {
                    (strict && new <= old) || new < old.saturating_mul(100 + bump) / 100
                };
                // A legacy transaction tips its whole gas price.
                let tip = |tx: &TxEnvelope| {
                    tx.max_priority_fee_per_gas()
                        .unwrap_or(tx.max_fee_per_gas())
                };
                let blob_fee_short = match (tx.max_fee_per_blob_gas(), old.max_fee_per_blob_gas()) {
                    (Some(new), Some(old)) => short(new, old),
                    _ => false,
                };
                if short(tx.max_fee_per_gas(), old.max_fee_per_gas())
                    || short(tip(&tx), tip(old))
                    || blob_fee_short
                {
                    return Err(RpcError::Server(
                        "replacement transaction underpriced".into(),
                    ));
                }
            } else if inner.by_hash.len() >= MAX_POOL_SIZE {
                return Err(RpcError::Server("txpool is full".into()));
            }
            let blobs = sidecar.as_ref().map_or(0, |s| s.blobs().len());
            let freed = replaced
                .and_then(|old| inner.sidecars.get(&old))
                .map_or(0, |s| s.blobs().len());
            if blobs > 0 && inner.blobs - freed + blobs > MAX_POOL_BLOBS {
                return Err(RpcError::Server(format!(
                    "txpool is full: it keeps the sidecars of {MAX_POOL_BLOBS} blobs at most"
                )));
            }
            if let Some(old_hash) = replaced {
                inner.remove(&old_hash);
            }
            inner.seq += 1;
            inner.revision += 1;
            let seq = inner.seq;
            inner.arrival.insert(seq, hash);
            inner.seq_of.insert(hash, seq);
            inner
                .by_sender
                .entry(sender)
                .or_default()
                .insert(nonce, hash);
            inner.by_hash.insert(hash, tx);
            for authority in &authorities {
                *inner.authorizing.entry(*authority).or_default() += 1;
            }
            if !authorities.is_empty() {
                inner.authorities.insert(hash, authorities);
            }
            if let Some(sidecar) = sidecar {
                inner.blobs += blobs;
                inner.sidecars.insert(hash, Arc::new(sidecar));
            }
        }
        self.added.notify_one();
        Ok(hash)
    }

    /// The sidecar blob transaction `hash` came with, if it is waiting and came with one.
    pub fn sidecar(&self, hash: &B256) -> Option<Arc<BlobTransactionSidecarVariant>> {
        self.lock().sidecars.get(hash).cloned()
    }

    /// Converts, on a thread of its own, the sidecars with a proof per blob of the waiting
    /// transactions `hashes` to sidecars with EIP-7594's proof per cell, the only kind a block
    /// publishes from Osaka on, so that blob transactions that waited across the fork are not
    /// stuck (geth's pool converts them too). A blob's cell proofs take a fraction of a second
    /// to compute, so the payload build that finds such sidecars starts this and goes on
    /// without them; a later build takes them. One conversion runs at a time (a call while one
    /// runs does nothing); a transaction that leaves meanwhile is skipped.
    pub fn convert_to_cell_proofs(self: &Arc<Self>, hashes: Vec<B256>) {
        if hashes.is_empty() || self.converting.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("cell-proofs".into())
            .spawn(move || {
                for hash in hashes {
                    pool.convert_one(hash);
                }
                pool.converting.store(false, Ordering::Release);
            });
        if let Err(err) = spawned {
            tracing::warn!(%err, "cannot start converting blob sidecars to cell proofs");
            self.converting.store(false, Ordering::Release);
        }
    }

    fn convert_one(&self, hash: B256) {
        let Some(sidecar) = self.sidecar(&hash) else {
            return;
        };
        let BlobTransactionSidecarVariant::Eip4844(per_blob) = &*sidecar else {
            return;
        };
        match per_blob
            .clone()
            .try_into_7594(simnode_api::pool::kzg_settings())
        {
            Ok(per_cell) => {
                let mut inner = self.lock();
                // Unless the transaction left, or came back with another sidecar, meanwhile.
                if let Some(kept) = inner.sidecars.get_mut(&hash) {
                    if Arc::ptr_eq(kept, &sidecar) {
                        *kept = Arc::new(per_cell.into());
                        inner.revision += 1;
                    }
                }
            }
            Err(err) => {
                tracing::warn!(%hash, ?err, "cannot compute the cell proofs of a blob sidecar")
            }
        }
    }

    /// The sidecar holding the blob with versioned hash `versioned`, and the blob's index in
    /// it, from any waiting transaction that came with one.
    pub fn blob(&self, versioned: &B256) -> Option<(Arc<BlobTransactionSidecarVariant>, usize)> {
        let inner = self.lock();
        // At most MAX_POOL_BLOBS hashes to look through: no index to keep in step.
        inner.sidecars.iter().find_map(|(hash, sidecar)| {
            let index = inner.by_hash[hash]
                .blob_versioned_hashes()?
                .iter()
                .position(|h| h == versioned)?;
            Some((sidecar.clone(), index))
        })
    }

    /// Drops the transaction `hash` (a dev node's `anvil_dropTransaction`); whether it was
    /// waiting. A sender's later transactions stay, behind the gap it leaves.
    pub fn drop_transaction(&self, hash: &B256) -> bool {
        self.lock().remove(hash)
    }

    /// Drops every waiting transaction of `sender`, or of every sender with `None`.
    pub fn drop_all(&self, sender: Option<Address>) {
        let mut inner = self.lock();
        let hashes: Vec<B256> = match sender {
            Some(sender) => inner
                .by_sender
                .get(&sender)
                .map(|m| m.values().copied().collect())
                .unwrap_or_default(),
            None => inner.by_hash.keys().copied().collect(),
        };
        for hash in &hashes {
            inner.remove(hash);
        }
    }

    /// Drops transactions a new block made obsolete: those it included and, per sender (whose
    /// nonce and balance `account_of` gives after the block), those whose nonce is now below
    /// the account's and those the balance no longer covers, as geth's pool drops them (the
    /// sender's later ones then wait behind the gap).
    pub fn on_block(
        &self,
        included: &[B256],
        account_of: impl Fn(&Address) -> Option<(u64, U256)>,
    ) {
        let mut inner = self.lock();
        for hash in included {
            inner.remove(hash);
        }
        let senders: Vec<Address> = inner.by_sender.keys().copied().collect();
        for sender in senders {
            let Some((nonce, balance)) = account_of(&sender) else {
                continue;
            };
            let dropped: Vec<B256> = inner
                .by_sender
                .get(&sender)
                .map(|m| {
                    m.iter()
                        .filter(|(n, h)| {
                            **n < nonce || simnode_api::pool::max_cost(&inner.by_hash[*h]) > balance
                        })
                        .map(|(_, h)| *h)
                        .collect()
                })
                .unwrap_or_default();
            for hash in dropped {
                inner.remove(&hash);
            }
            let promoted = inner.newly_executable(&sender, nonce);
            self.announce(promoted);
        }
    }

    fn announce(&self, txs: Vec<Recovered<TxEnvelope>>) {
        if self.events.has_subscribers() {
            for tx in txs {
                self.events.send(Arc::new(tx));
            }
        }
    }
}

impl Inner {
    /// Whether the transaction was there.
    fn remove(&mut self, hash: &B256) -> bool {
        let Some(tx) = self.by_hash.remove(hash) else {
            return false;
        };
        self.revision += 1;
        if let Some(m) = self.by_sender.get_mut(&tx.signer()) {
            m.remove(&tx.nonce());
            if m.is_empty() {
                self.by_sender.remove(&tx.signer());
            }
        }
        if let Some(seq) = self.seq_of.remove(hash) {
            self.arrival.remove(&seq);
        }
        if let Some(sidecar) = self.sidecars.remove(hash) {
            self.blobs -= sidecar.blobs().len();
        }
        self.announced.remove(hash);
        for authority in self.authorities.remove(hash).unwrap_or_default() {
            if let Some(count) = self.authorizing.get_mut(&authority) {
                *count -= 1;
                if *count == 0 {
                    self.authorizing.remove(&authority);
                }
            }
        }
        true
    }

    /// geth's EIP-7702 limits on a transaction of `sender` with `nonce` (see [`Pool::strict`])
    /// whose authorizations name `authorities`.
    fn check_delegation_limits(
        &self,
        sender: Address,
        nonce: u64,
        state: SenderState,
        authorities: &[Address],
    ) -> RpcResult<()> {
        if state.delegated || self.authorizing.contains_key(&sender) {
            let pending = self.run(&sender, state.nonce);
            if pending.is_empty() {
                if nonce != state.nonce {
                    return Err(RpcError::Server(
                        "gapped-nonce tx from delegated accounts".into(),
                    ));
                }
            } else if nonce >= state.nonce + pending.len() as u64 {
                // Only a replacement of the one waiting goes in.
                return Err(RpcError::Server(
                    "in-flight transaction limit reached for delegated accounts".into(),
                ));
            }
        }
        for authority in authorities {
            let waiting = self.by_sender.get(authority);
            let count = waiting.map_or(0, BTreeMap::len);
            // A sender's blob transactions reserve it, as geth's blob pool does.
            let blobs =
                waiting.is_some_and(|nonces| nonces.values().any(|h| self.by_hash[h].is_eip4844()));
            if count > 1 || blobs {
                return Err(RpcError::Server("authority already reserved".into()));
            }
        }
        Ok(())
    }

    /// The hashes of `sender`'s transactions with nonces `from`, `from + 1`, ... up to the
    /// first gap: those that can run one after the other once the account is at `from`.
    fn run(&self, sender: &Address, from: u64) -> Vec<B256> {
        let Some(nonces) = self.by_sender.get(sender) else {
            return Vec::new();
        };
        (from..)
            .map_while(|nonce| nonces.get(&nonce).copied())
            .collect()
    }

    /// `sender`'s transactions in the gapless run from `nonce` not announced yet, marked so.
    fn newly_executable(&mut self, sender: &Address, nonce: u64) -> Vec<Recovered<TxEnvelope>> {
        let fresh: Vec<B256> = self
            .run(sender, nonce)
            .into_iter()
            .filter(|hash| !self.announced.contains(hash))
            .collect();
        for hash in &fresh {
            self.announced.insert(*hash);
        }
        fresh
            .iter()
            .map(|hash| self.by_hash[hash].clone())
            .collect()
    }
}

impl TxPool for Pool {
    fn admit(
        &self,
        tx: Recovered<TxEnvelope>,
        sidecar: Option<BlobTransactionSidecarVariant>,
        sender: SenderState,
    ) -> RpcResult<B256> {
        self.add(tx, sidecar, Some(sender))
    }

    fn insert(&self, tx: Recovered<TxEnvelope>) -> RpcResult<B256> {
        self.add(tx, None, None)
    }

    fn insert_with_sidecar(
        &self,
        tx: Recovered<TxEnvelope>,
        sidecar: BlobTransactionSidecarVariant,
    ) -> RpcResult<B256> {
        self.add(tx, Some(sidecar), None)
    }

    /// Per sender in nonce order; senders in the order their first transaction arrived.
    fn pending(&self) -> Vec<Recovered<TxEnvelope>> {
        let inner = self.lock();
        let mut out = Vec::with_capacity(inner.by_hash.len());
        let mut seen = std::collections::HashSet::new();
        for hash in inner.arrival.values() {
            let sender = inner.by_hash[hash].signer();
            if seen.insert(sender) {
                for h in inner.by_sender[&sender].values() {
                    out.push(inner.by_hash[h].clone());
                }
            }
        }
        out
    }

    fn get(&self, hash: &B256) -> Option<Recovered<TxEnvelope>> {
        self.lock().by_hash.get(hash).cloned()
    }

    fn pool_events(&self) -> tokio::sync::broadcast::Receiver<PoolEvent> {
        self.events.subscribe()
    }

    fn mines_on_arrival(&self) -> bool {
        self.mines_on_arrival.load(Ordering::Relaxed)
    }

    fn can_run_now(&self, hash: &B256) -> bool {
        self.lock().announced.contains(hash)
    }

    fn next_nonce(&self, sender: &Address, state_nonce: u64) -> u64 {
        state_nonce + self.lock().run(sender, state_nonce).len() as u64
    }

    fn pending_run(&self, sender: &Address, state_nonce: u64) -> Vec<TxEnvelope> {
        let inner = self.lock();
        inner
            .run(sender, state_nonce)
            .iter()
            .map(|hash| inner.by_hash[hash].inner().clone())
            .collect()
    }

    fn promote(&self, sender: &Address, state_nonce: u64) {
        let promoted = self.lock().newly_executable(sender, state_nonce);
        self.announce(promoted);
    }

    fn pending_nonce(&self, sender: &Address) -> Option<u64> {
        let inner = self.lock();
        // The next nonce after the gapless run starting at the lowest pending one.
        let lowest = *inner.by_sender.get(sender)?.keys().next()?;
        Some(lowest + inner.run(sender, lowest).len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::{
        consensus::{SignableTransaction, TxLegacy},
        primitives::Signature,
    };

    fn tx(sender: Address, nonce: u64, price: u128) -> Recovered<TxEnvelope> {
        let t = TxLegacy {
            nonce,
            gas_price: price,
            gas_limit: 21_000,
            ..Default::default()
        };
        let signed = t.into_signed(Signature::test_signature());
        Recovered::new_unchecked(TxEnvelope::Legacy(signed), sender)
    }

    #[test]
    fn next_nonce_stops_at_gaps_and_replacements_need_a_bump() {
        let pool = Pool::default();
        let a = Address::repeat_byte(1);
        for n in [5, 6, 8] {
            pool.insert(tx(a, n, 10)).unwrap();
        }
        assert_eq!(pool.next_nonce(&a, 5), 7, "8 is behind a gap");
        assert_eq!(pool.next_nonce(&a, 3), 3, "nothing pending follows nonce 3");
        assert_eq!(pool.next_nonce(&Address::repeat_byte(2), 4), 4);
        assert!(pool.insert(tx(a, 5, 10)).is_err(), "same transaction again");
        assert!(
            pool.insert(tx(a, 6, 10)).is_err(),
            "replacement without a bump"
        );
        assert!(pool.insert(tx(a, 6, 20)).is_ok(), "replacement with a bump");
        // A 10% bump of 9 wei rounds to 9: the fee must still rise, as in geth.
        pool.insert(tx(a, 9, 9)).unwrap();
        let mut same_price = tx(a, 9, 9);
        if let TxEnvelope::Legacy(signed) = same_price.inner() {
            let mut other = signed.tx().clone();
            other.value = U256::from(1);
            same_price = Recovered::new_unchecked(
                TxEnvelope::Legacy(other.into_signed(Signature::test_signature())),
                a,
            );
        }
        assert!(
            pool.insert(same_price).is_err(),
            "same price, other transaction"
        );
        assert!(pool.insert(tx(a, 9, 10)).is_ok());
        assert_eq!(pool.len(), 4);
        pool.on_block(&[], |_| Some((6, U256::MAX)));
        assert_eq!(pool.len(), 3, "nonce 5 is stale once the account is at 6");
    }

    /// A blob transaction is replaced only by one paying twice as much in its fee cap, tip and
    /// blob fee cap.
    #[test]
    fn a_blob_transactions_replacement_pays_double() {
        let pool = Pool::default();
        let a = Address::repeat_byte(1);
        let blob_tx = |fee: u128, tip: u128, blob_fee: u128| {
            let t = alloy::consensus::TxEip4844 {
                max_fee_per_gas: fee,
                max_priority_fee_per_gas: tip,
                max_fee_per_blob_gas: blob_fee,
                blob_versioned_hashes: vec![B256::repeat_byte(1)],
                ..Default::default()
            };
            let signed = t.into_signed(Signature::test_signature());
            Recovered::new_unchecked(TxEnvelope::Eip4844(signed.into()), a)
        };
        pool.insert(blob_tx(100, 10, 50)).unwrap();
        let underpriced = |tx| {
            let err = pool.insert(tx).unwrap_err().to_string();
            assert!(err.contains("replacement transaction underpriced"), "{err}");
        };
        underpriced(blob_tx(150, 15, 75));
        underpriced(blob_tx(200, 20, 99));
        underpriced(blob_tx(199, 20, 100));
        underpriced(blob_tx(200, 19, 100));
        assert!(pool.insert(blob_tx(200, 20, 100)).is_ok());
        // A plain transaction's replacement pays 10% more.
        pool.insert(tx(a, 1, 100)).unwrap();
        assert!(pool.insert(tx(a, 1, 110)).is_ok());

        // Outside a dev node, a sender's blob and other transactions do not mix.
        let pool = Pool::strict();
        pool.insert(blob_tx(100, 10, 50)).unwrap();
        let refused = pool.insert(tx(a, 1, 100)).unwrap_err().to_string();
        assert!(refused.contains("address already reserved"), "{refused}");
        assert!(
            pool.insert(blob_tx(200, 20, 100)).is_ok(),
            "blob after blob"
        );
        let b = Address::repeat_byte(2);
        pool.insert(tx(b, 0, 100)).unwrap();
        let mut blob_from_b = blob_tx(100, 10, 50);
        blob_from_b = Recovered::new_unchecked(blob_from_b.into_inner(), b);
        let refused = pool.insert(blob_from_b).unwrap_err().to_string();
        assert!(refused.contains("address already reserved"), "{refused}");
    }

    /// After a block, a transaction its sender can no longer pay is dropped, as geth drops
    /// it; the sender's later ones wait behind the gap it leaves.
    #[test]
    fn a_block_drops_what_the_sender_can_no_longer_pay() {
        let pool = Pool::default();
        let a = Address::repeat_byte(1);
        // Each costs 21,000 gas at its price (no value).
        pool.insert(tx(a, 0, 10)).unwrap();
        pool.insert(tx(a, 1, 1_000)).unwrap();
        pool.insert(tx(a, 2, 10)).unwrap();
        pool.on_block(&[], |_| Some((0, U256::from(21_000 * 100))));
        assert_eq!(pool.len(), 2, "nonce 1 costs 21,000,000 wei");
        assert_eq!(pool.next_nonce(&a, 0), 1, "nonce 2 waits behind the gap");
    }

    /// A transaction is announced once it can run: one behind a nonce gap when the gap fills
    /// (after the one filling it), as geth announces what its pool promotes.
    #[test]
    fn transactions_are_announced_when_they_can_run() {
        let pool = Pool::default();
        let mut events = pool.pool_events();
        let a = Address::repeat_byte(1);
        let gapped = pool.insert(tx(a, 1, 10)).unwrap();
        pool.promote(&a, 0);
        assert!(events.try_recv().is_err(), "nonce 1 waits for nonce 0");
        let first = pool.insert(tx(a, 0, 10)).unwrap();
        pool.promote(&a, 0);
        assert_eq!(*events.try_recv().unwrap().tx_hash(), first);
        assert_eq!(*events.try_recv().unwrap().tx_hash(), gapped);
        pool.promote(&a, 0);
        assert!(events.try_recv().is_err(), "each is announced once");
        // A replacement is a new transaction to announce.
        let bumped = pool.insert(tx(a, 1, 20)).unwrap();
        pool.promote(&a, 0);
        assert_eq!(*events.try_recv().unwrap().tx_hash(), bumped);
        // One the chain reaches without the pool's help (another node's block) is announced
        // after that block.
        let b = Address::repeat_byte(2);
        let later = pool.insert(tx(b, 5, 10)).unwrap();
        pool.promote(&b, 3);
        assert!(events.try_recv().is_err());
        pool.on_block(&[], |sender| (*sender == b).then_some((5, U256::MAX)));
        assert_eq!(*events.try_recv().unwrap().tx_hash(), later);
    }

    /// Blocks take the best-paying next transaction first, each sender's in nonce order, the
    /// earlier arrival on a tie (geth's miner, anvil's fee ordering).
    #[test]
    fn blocks_take_transactions_by_price_and_nonce() {
        // Each sender's own transaction (the helper's are alike whoever sends them).
        let tx = |sender: Address, nonce: u64, price: u128| {
            let t = TxLegacy {
                nonce,
                gas_price: price,
                gas_limit: 21_000,
                to: alloy::primitives::TxKind::Call(sender),
                ..Default::default()
            };
            let signed = t.into_signed(Signature::test_signature());
            Recovered::new_unchecked(TxEnvelope::Legacy(signed), sender)
        };
        let pool = Pool::default();
        let (a, b, c) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
        );
        let a0 = pool.insert(tx(a, 0, 10)).unwrap();
        let a1 = pool.insert(tx(a, 1, 50)).unwrap();
        let b0 = pool.insert(tx(b, 0, 30)).unwrap();
        let c0 = pool.insert(tx(c, 0, 10)).unwrap();
        let order = |base_fee| -> Vec<B256> {
            let txs = pool.by_price_and_nonce(base_fee);
            txs.iter().map(|tx| *tx.tx_hash()).collect()
        };
        // At base fee 5 the tips are 5, 45, 25 and 5: a's second waits for its first, which
        // ties with c's and came first.
        assert_eq!(order(5), vec![b0, a0, a1, c0]);
        // A fee cap under the base fee pays nothing: it goes last, still in its sender's order.
        assert_eq!(order(20), vec![b0, a0, a1, c0]);
        assert_eq!(order(40), vec![a0, a1, b0, c0]);

        // On a tie, a sender's later transaction comes after another's that arrived before it.
        let pool = Pool::default();
        let a0 = pool.insert(tx(a, 0, 10)).unwrap();
        let b0 = pool.insert(tx(b, 0, 10)).unwrap();
        let a1 = pool.insert(tx(a, 1, 10)).unwrap();
        let order: Vec<B256> = pool
            .by_price_and_nonce(1)
            .iter()
            .map(|t| *t.tx_hash())
            .collect();
        assert_eq!(order, vec![a0, b0, a1]);
    }

    #[test]
    fn dropped_transactions_leave_every_index() {
        let pool = Pool::default();
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let first = pool.insert(tx(a, 0, 10)).unwrap();
        pool.insert(tx(a, 1, 10)).unwrap();
        pool.insert(tx(b, 0, 11)).unwrap(); // (a different price: the helper signs alike)
        assert!(pool.drop_transaction(&first));
        assert!(!pool.drop_transaction(&first), "already gone");
        assert!(pool.get(&first).is_none());
        assert_eq!(
            pool.pending_nonce(&a),
            Some(2),
            "nonce 1 waits behind the gap"
        );
        // Sent again, it is new to the pool.
        assert_eq!(pool.insert(tx(a, 0, 10)).unwrap(), first);
        pool.drop_all(Some(a));
        assert_eq!(pool.pending_nonce(&a), None);
        assert_eq!(pool.len(), 1);
        pool.drop_all(None);
        assert!(pool.is_empty());
        assert!(pool.pending().is_empty());
    }

    /// A type-4 transaction of `sender` whose authorizations are signed by the dev keys
    /// `authorities` (indices into the dev accounts).
    fn set_code_tx(
        sender: Address,
        nonce: u64,
        price: u128,
        authorities: &[usize],
    ) -> Recovered<TxEnvelope> {
        use alloy::eips::eip7702::Authorization;
        let keys = crate::chain::dev_signing_keys().unwrap();
        let authorization_list = authorities
            .iter()
            .map(|i| {
                let auth = Authorization {
                    chain_id: U256::from(1337),
                    address: Address::repeat_byte(0xde),
                    nonce: 0,
                };
                let signature =
                    crate::chain::sign_hash(&keys[*i].1, auth.signature_hash()).unwrap();
                auth.into_signed(signature)
            })
            .collect();
        let t = alloy::consensus::TxEip7702 {
            chain_id: 1337,
            nonce,
            max_fee_per_gas: price,
            max_priority_fee_per_gas: price,
            gas_limit: 100_000,
            authorization_list,
            ..Default::default()
        };
        let signed = t.into_signed(Signature::test_signature());
        Recovered::new_unchecked(TxEnvelope::Eip7702(signed), sender)
    }

    fn admitted(
        pool: &Pool,
        tx: Recovered<TxEnvelope>,
        nonce: u64,
        delegated: bool,
    ) -> RpcResult<B256> {
        pool.admit(tx, None, SenderState { nonce, delegated })
    }

    fn refused_with(result: RpcResult<B256>, words: &str) {
        let err = result.expect_err(words).to_string();
        assert!(err.contains(words), "{err}");
    }

    /// geth's EIP-7702 pool limits: a delegated account has one executable transaction
    /// waiting at most (replaceable), none gapped.
    #[test]
    fn a_delegated_sender_has_one_transaction_in_flight() {
        let pool = Pool::strict();
        let a = Address::repeat_byte(1);
        refused_with(
            admitted(&pool, tx(a, 4, 10), 3, true),
            "gapped-nonce tx from delegated accounts",
        );
        admitted(&pool, tx(a, 3, 10), 3, true).unwrap();
        refused_with(
            admitted(&pool, tx(a, 4, 10), 3, true),
            "in-flight transaction limit reached for delegated accounts",
        );
        admitted(&pool, tx(a, 3, 20), 3, true).expect("a replacement goes in");
        // An account without code stacks as many as it likes.
        let b = Address::repeat_byte(2);
        for n in 0..3 {
            admitted(&pool, tx(b, n, 10), 0, false).unwrap();
        }
        // A dev node's pool, as anvil's, does not limit them.
        let dev = Pool::default();
        for n in 0..3 {
            admitted(&dev, tx(a, n, 10), 0, true).unwrap();
        }
    }

    /// An account a waiting authorization names is limited as a delegated one until that
    /// transaction leaves the pool; an authorization may not name an account with more than
    /// one transaction waiting.
    #[test]
    fn authorizations_reserve_their_authorities() {
        let keys = crate::chain::dev_signing_keys().unwrap();
        let (first, second) = (keys[1].0, keys[2].0);
        let pool = Pool::strict();
        let sponsor = Address::repeat_byte(9);
        let authorizing = admitted(&pool, set_code_tx(sponsor, 0, 10, &[1]), 0, false).unwrap();
        admitted(&pool, tx(first, 0, 10), 0, false).unwrap();
        refused_with(
            admitted(&pool, tx(first, 1, 10), 0, false),
            "in-flight transaction limit reached for delegated accounts",
        );
        pool.drop_transaction(&authorizing);
        admitted(&pool, tx(first, 1, 10), 0, false).expect("no authorization names it now");

        // An authorization may name an account with one transaction waiting (which then may
        // not stack more), not one with two.
        admitted(&pool, tx(second, 0, 11), 0, false).unwrap();
        admitted(&pool, set_code_tx(sponsor, 0, 10, &[2]), 0, false).expect("one waiting");
        refused_with(
            admitted(&pool, tx(second, 1, 11), 0, false),
            "in-flight transaction limit reached for delegated accounts",
        );
        let third = keys[3].0;
        admitted(&pool, tx(third, 0, 12), 0, false).unwrap();
        admitted(&pool, tx(third, 1, 12), 0, false).unwrap();
        refused_with(
            admitted(&pool, set_code_tx(sponsor, 1, 10, &[1, 3]), 0, false),
            "authority already reserved",
        );
        let dev = Pool::default();
        dev.insert(tx(second, 0, 10)).unwrap();
        dev.insert(tx(second, 1, 10)).unwrap();
        admitted(&dev, set_code_tx(sponsor, 0, 10, &[2]), 0, false).unwrap();
    }
}
