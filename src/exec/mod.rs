//! Block execution and validation with alloy-evm's Ethereum block executor.
//!
//! [`execute_block`] checks a block against its parent (the stored head), executes it on the
//! head state and compares every header commitment it can compute; the state root is checked
//! by the store inside the write transaction that stores the block.

mod changes;
pub mod witness;

use std::borrow::Cow;

use alloy::{
    consensus::{
        proofs::{
            calculate_transaction_root, calculate_withdrawals_root, ordered_trie_root_with_encoder,
        },
        transaction::{Recovered, SignerRecoverable},
        BlockBody, Eip658Value, Header, ReceiptEnvelope, Sealed, TxEnvelope, TxReceipt,
    },
    primitives::{Address, Bloom, B256},
};
use alloy_evm::{
    block::{BlockExecutionError, BlockExecutor},
    eth::{receipt_builder::AlloyReceiptBuilder, EthBlockExecutionCtx, EthBlockExecutor},
    EthEvmFactory, Evm, EvmFactory,
};
use alloy_hardforks::EthereumHardforks;
use revm::database::{states::bundle_state::BundleRetention, State};
use simnode_api::{ChainSpec, StateChanges, StateReader};

pub use changes::bundle_to_changes;

use crate::store::{NewBlock, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    #[error("block {number}: {field} mismatch: header has {expected}, computed {got}")]
    Mismatch {
        number: u64,
        field: &'static str,
        expected: String,
        got: String,
    },
    #[error("block {number}: invalid header: {reason}")]
    InvalidHeader { number: u64, reason: String },
    #[error("block {number}: transaction {index}: cannot recover the sender: {reason}")]
    Sender {
        number: u64,
        index: usize,
        reason: String,
    },
    #[error("block {number}: execution failed: {error}")]
    Execution {
        number: u64,
        error: BlockExecutionError,
    },
    #[error("block {number}: unknown parent {parent}")]
    UnknownParent { number: u64, parent: B256 },
    /// Asked for what only executing a block gives, of a dev chain's state-edit block
    /// (`anvil_setBalance` and its kin), whose state no execution makes.
    #[error("block {number} carries a dev chain's state edit (anvil_set* / hardhat_set*), which executing it does not make: {what}")]
    StateEdit { number: u64, what: &'static str },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl BlockError {
    /// Whether the block is kept for `debug_getBadBlocks`: it failed validation, or (as geth
    /// keeps it on import) it does not extend the chain; not when the node failed (a database
    /// error).
    pub fn is_bad_block(&self) -> bool {
        matches!(
            self,
            Self::Mismatch { .. }
                | Self::InvalidHeader { .. }
                | Self::Sender { .. }
                | Self::Execution { .. }
                | Self::UnknownParent { .. }
                | Self::Store(StoreError::StateRoot { .. })
        )
    }

    fn mismatch(
        number: u64,
        field: &'static str,
        expected: impl std::fmt::Debug,
        got: impl std::fmt::Debug,
    ) -> Self {
        Self::Mismatch {
            number,
            field,
            expected: format!("{expected:?}"),
            got: format!("{got:?}"),
        }
    }
}

/// A block after execution, ready for [`Store::commit_block`].
#[derive(Debug)]
pub struct ExecutedBlock {
    pub block: NewBlock,
    pub changes: StateChanges,
}

impl ExecutedBlock {
    pub fn gas_used(&self) -> u64 {
        self.block.header.gas_used
    }
}

/// Keeps a block that failed validation for `debug_getBadBlocks`. Failing to keep it is
/// logged, not returned: the caller's answer is the block's own error.
pub fn keep_bad_block(store: &Store, hash: B256, number: u64, rlp: &[u8]) {
    if let Err(err) = store.record_bad_block(hash, number, rlp) {
        tracing::warn!(target: "simnode::exec", %hash, number, %err, "cannot keep the bad block");
    }
}

/// [`keep_bad_block`] for a block in parts (taken whole: both callers are done with them).
pub fn keep_bad_parts(store: &Store, header: Sealed<Header>, body: BlockBody<TxEnvelope>) {
    let (header, hash) = header.into_parts();
    let (number, block) = (header.number, alloy::consensus::Block { header, body });
    keep_bad_block(store, hash, number, &alloy::rlp::encode(&block));
}

/// Executes and validates `header`/`body` on top of the stored head, then stores it.
pub fn import_block(
    store: &Store,
    header: Sealed<Header>,
    body: BlockBody<TxEnvelope>,
) -> Result<u64, BlockError> {
    let executed = execute_block(store, header, body)?;
    let gas = executed.gas_used();
    store.commit_block(&executed.block, &executed.changes)?;
    Ok(gas)
}

pub fn execute_block(
    store: &Store,
    header: Sealed<Header>,
    body: BlockBody<TxEnvelope>,
) -> Result<ExecutedBlock, BlockError> {
    let spec = store.spec().clone();
    let parent = store.head_header()?;
    let number = header.number;
    if header.parent_hash != parent.hash() || number != parent.number + 1 {
        return Err(BlockError::UnknownParent {
            number,
            parent: header.parent_hash,
        });
    }
    validate_header(&spec, &parent, &header)?;
    validate_body(&spec, &header, &body)?;
    let senders = recover_senders(number, &body)?;
    let txs: Vec<_> = body
        .transactions
        .iter()
        .zip(senders.iter().copied())
        .collect();
    let out = run_block(
        store,
        &parent,
        &header,
        &body.ommers,
        body.withdrawals.as_ref().map(|w| w.as_slice()),
        &txs,
        false,
    )?;

    if out.gas_used != header.gas_used {
        return Err(BlockError::mismatch(
            number,
            "gasUsed",
            header.gas_used,
            out.gas_used,
        ));
    }
    if let Some(expected) = header.blob_gas_used {
        if expected != out.blob_gas_used {
            return Err(BlockError::mismatch(
                number,
                "blobGasUsed",
                expected,
                out.blob_gas_used,
            ));
        }
    }
    let receipts_root = receipts_root(&out.receipts);
    if receipts_root != header.receipts_root {
        return Err(BlockError::mismatch(
            number,
            "receiptsRoot",
            header.receipts_root,
            receipts_root,
        ));
    }
    let bloom = logs_bloom(&out.receipts);
    if bloom != header.logs_bloom {
        return Err(BlockError::mismatch(
            number,
            "logsBloom",
            header.logs_bloom,
            bloom,
        ));
    }
    if spec.is_prague_active_at_timestamp(header.timestamp)
        && header.requests_hash != out.requests_hash
    {
        return Err(BlockError::mismatch(
            number,
            "requestsHash",
            header.requests_hash,
            out.requests_hash,
        ));
    }
    Ok(ExecutedBlock {
        block: NewBlock {
            header,
            body,
            senders,
            receipts: out.receipts,
            requests: out.requests,
        },
        changes: out.changes,
    })
}

/// What running a block's transactions produced.
#[derive(Debug)]
pub struct BlockRun {
    pub receipts: Vec<ReceiptEnvelope>,
    /// `Some` from Prague on.
    pub requests_hash: Option<B256>,
    /// The EIP-7685 requests (empty before Prague).
    pub requests: Vec<alloy::primitives::Bytes>,
    pub gas_used: u64,
    pub blob_gas_used: u64,
    pub changes: StateChanges,
    /// Indices (into the given transactions) that made it into the block; with
    /// `skip_invalid` false, all of them.
    pub included: Vec<usize>,
}

/// Runs `txs` in the environment of `header` on the state after `parent` (which must be the
/// stored head): system calls, transactions, withdrawals, rewards, requests. A block builder
/// passes `skip_invalid` to leave out transactions that cannot be included (bad nonce, no funds,
/// no room) instead of failing.
pub fn run_block(
    store: &Store,
    parent: &Sealed<Header>,
    header: &Header,
    ommers: &[Header],
    withdrawals: Option<&[alloy::eips::eip4895::Withdrawal]>,
    txs: &[(&TxEnvelope, Address)],
    skip_invalid: bool,
) -> Result<BlockRun, BlockError> {
    let parent_state = store.state_after(parent.number)?;
    run_block_on(
        store,
        parent_state,
        parent,
        header,
        ommers,
        withdrawals,
        txs,
        skip_invalid,
        None,
    )
}

/// The state root after each transaction of `block` (a stored block, or one the node refused),
/// run on the state after `parent` once the pre-block system calls are done: geth's
/// `debug_intermediateRoots`. A transaction that fails ends the list there, as in geth (only a
/// refused block has one).
pub fn intermediate_roots(
    store: &Store,
    parent: &Sealed<Header>,
    block: &simnode_api::StoredBlock,
) -> Result<Vec<B256>, BlockError> {
    let txs = with_senders(block);
    let mut roots = Vec::with_capacity(txs.len());
    let run = run_block_on(
        store,
        store.state_after(parent.number)?,
        parent,
        &block.header,
        &block.body.ommers,
        block.body.withdrawals.as_ref().map(|w| w.as_slice()),
        &txs,
        false,
        Some(&mut roots),
    );
    match run {
        Ok(_) | Err(BlockError::Execution { .. }) => Ok(roots),
        Err(err) => Err(err),
    }
}

/// A stored block's transactions with their senders, as [`run_block_on`] takes them.
pub fn with_senders(block: &simnode_api::StoredBlock) -> Vec<(&TxEnvelope, Address)> {
    block
        .body
        .transactions
        .iter()
        .zip(block.senders.iter().copied())
        .collect()
}

/// [`run_block`] reading the parent's state through `parent_state` (which must be that state:
/// the execution witness wraps it to see what the block reads). The parent may be any stored
/// block, not only the head: the witness re-runs old blocks, and the pre-Byzantium intermediate
/// roots are computed against whichever state `parent` names. With `every_root`, the state
/// root after each transaction is recorded there (`debug_intermediateRoots`).
#[allow(clippy::too_many_arguments)]
pub fn run_block_on<D: StateReader>(
    store: &Store,
    parent_state: D,
    parent: &Sealed<Header>,
    header: &Header,
    ommers: &[Header],
    withdrawals: Option<&[alloy::eips::eip4895::Withdrawal]>,
    txs: &[(&TxEnvelope, Address)],
    skip_invalid: bool,
    mut every_root: Option<&mut Vec<B256>>,
) -> Result<BlockRun, BlockError> {
    let spec = store.spec().clone();
    let number = header.number;
    let state = State::builder()
        .with_database_ref(parent_state)
        .with_bundle_update()
        .build();
    let evm = EthEvmFactory::default().create_evm(state, spec.evm_env(header));
    let ctx = EthBlockExecutionCtx {
        parent_hash: parent.hash(),
        parent_beacon_block_root: header.parent_beacon_block_root,
        ommers,
        withdrawals: withdrawals.map(Cow::Borrowed),
        extra_data: header.extra_data.clone(),
        tx_count_hint: Some(txs.len()),
        slot_number: None,
    };
    let mut executor = EthBlockExecutor::new(evm, ctx, &*spec, AlloyReceiptBuilder::default());
    let exec_err = |error| BlockError::Execution { number, error };
    executor.apply_pre_execution_changes().map_err(exec_err)?;
    // Before Byzantium a receipt carries the state root after its transaction.
    let receipt_roots = !spec.is_byzantium_active_at_block(number);
    let intermediate_roots = receipt_roots || every_root.is_some();
    let mut included = Vec::with_capacity(txs.len());
    // Each transaction's root holds the changes of those before it: the carry keeps what the
    // earlier roots hashed (a lone transaction's root has none to share).
    let mut root_carry = (txs.len() > 1).then(simnode_api::RootCarry::default);
    for (i, (tx, sender)) in txs.iter().enumerate() {
        match executor.execute_transaction(Recovered::new_unchecked(*tx, *sender)) {
            Ok(_) => included.push(i),
            Err(BlockExecutionError::Validation(_)) if skip_invalid => continue,
            Err(e) => return Err(exec_err(e)),
        }
        if intermediate_roots {
            let db = executor.evm_mut().db_mut();
            db.merge_transitions(BundleRetention::PlainState);
            let changes = bundle_to_changes(&db.bundle_state);
            let root = match root_carry.as_mut() {
                Some(carry) => {
                    carry.set_all(changes);
                    store.state_root_carried(parent.number, carry)?
                }
                None => store.state_root_on(parent.number, &changes)?,
            };
            if let Some(roots) = every_root.as_deref_mut() {
                roots.push(root);
            }
            if let (true, Some(ReceiptEnvelope::Legacy(r))) =
                (receipt_roots, executor.receipts.last_mut())
            {
                r.receipt.status = Eip658Value::PostState(root);
            }
        }
    }
    let (evm, result) = executor.finish().map_err(exec_err)?;
    let requests_hash = spec
        .is_prague_active_at_timestamp(header.timestamp)
        .then(|| result.requests.requests_hash());
    let mut state = evm.into_db();
    state.merge_transitions(BundleRetention::PlainState);
    let requests = result.requests.take();
    Ok(BlockRun {
        requests,
        receipts: result.receipts,
        requests_hash,
        gas_used: result.gas_used,
        blob_gas_used: result.blob_gas_used,
        changes: bundle_to_changes(&state.take_bundle()),
        included,
    })
}

pub fn logs_bloom(receipts: &[ReceiptEnvelope]) -> Bloom {
    receipts.iter().fold(Bloom::ZERO, |acc, r| acc | r.bloom())
}

/// Transactions per thread below which recovering senders on more threads is not worth it.
const SENDERS_PER_THREAD: usize = 64;

/// The sender of every transaction, in order. Recovery is a fifth of an import's CPU, so a
/// large block's is split over the machine's cores (scoped threads, joined before returning).
fn recover_senders(number: u64, body: &BlockBody<TxEnvelope>) -> Result<Vec<Address>, BlockError> {
    let txs = &body.transactions;
    let recover = |offset: usize, chunk: &[TxEnvelope]| -> Result<Vec<Address>, BlockError> {
        chunk
            .iter()
            .enumerate()
            .map(|(i, tx)| {
                tx.recover_signer().map_err(|e| BlockError::Sender {
                    number,
                    index: offset + i,
                    reason: e.to_string(),
                })
            })
            .collect()
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(txs.len() / SENDERS_PER_THREAD);
    if threads <= 1 {
        return recover(0, txs);
    }
    let chunk = txs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = txs
            .chunks(chunk)
            .enumerate()
            .map(|(i, part)| scope.spawn(move || recover(i * chunk, part)))
            .collect();
        let mut senders = Vec::with_capacity(txs.len());
        for part in parts {
            // A panic inside recovery is a bug; carry it to the caller's thread as it was.
            let part = part.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            senders.extend(part?);
        }
        Ok(senders)
    })
}

/// Checks of a header against its parent that don't need execution.
pub fn validate_header(
    spec: &ChainSpec,
    parent: &Header,
    header: &Header,
) -> Result<(), BlockError> {
    let number = header.number;
    let invalid = |reason: String| BlockError::InvalidHeader { number, reason };
    if header.timestamp <= parent.timestamp {
        return Err(invalid(format!(
            "timestamp {} not after parent's {}",
            header.timestamp, parent.timestamp
        )));
    }
    if header.gas_used > header.gas_limit {
        return Err(invalid(format!(
            "gasUsed {} above gasLimit {}",
            header.gas_used, header.gas_limit
        )));
    }
    if header.extra_data.len() > 32 {
        return Err(invalid(format!(
            "extraData is {} bytes, at most 32 allowed",
            header.extra_data.len()
        )));
    }
    // EIP-1559 bounds the change of the gas limit to 1/1024 of the parent's (the first London
    // block compares with the parent's limit doubled, as its target is half of it).
    let parent_limit = if spec.is_london_active_at_block(number)
        && !spec.is_london_active_at_block(parent.number)
    {
        parent.gas_limit * 2
    } else {
        parent.gas_limit
    };
    if header.gas_limit.abs_diff(parent_limit) >= parent_limit / 1024 || header.gas_limit < 5000 {
        return Err(invalid(format!(
            "gasLimit {} too far from parent's {}",
            header.gas_limit, parent.gas_limit
        )));
    }
    let expected_base_fee = spec.next_base_fee(parent);
    if header.base_fee_per_gas != expected_base_fee {
        return Err(BlockError::mismatch(
            number,
            "baseFeePerGas",
            header.base_fee_per_gas,
            expected_base_fee,
        ));
    }
    let expected_excess = spec.next_excess_blob_gas(parent, header.timestamp);
    if header.excess_blob_gas != expected_excess {
        return Err(BlockError::mismatch(
            number,
            "excessBlobGas",
            header.excess_blob_gas,
            expected_excess,
        ));
    }
    if spec.is_post_merge(number) {
        if !header.difficulty.is_zero() {
            return Err(invalid(format!(
                "difficulty {} after the merge",
                header.difficulty
            )));
        }
        if header.ommers_hash != alloy::consensus::EMPTY_OMMER_ROOT_HASH {
            return Err(invalid("ommers after the merge".into()));
        }
        if !header.nonce.is_zero() {
            return Err(invalid(format!("nonce {} after the merge", header.nonce)));
        }
    } else if header.difficulty.is_zero() {
        // The proof-of-work seal itself (ethash) is not verified.
        return Err(invalid("difficulty 0 before the merge".into()));
    }
    let cancun = spec.is_cancun_active_at_timestamp(header.timestamp);
    if cancun != header.parent_beacon_block_root.is_some() {
        return Err(invalid(
            "parentBeaconBlockRoot presence does not match the fork".into(),
        ));
    }
    let prague = spec.is_prague_active_at_timestamp(header.timestamp);
    if prague != header.requests_hash.is_some() {
        return Err(invalid(
            "requestsHash presence does not match the fork".into(),
        ));
    }
    Ok(())
}

/// Checks of the body against the header's commitments.
pub fn validate_body(
    spec: &ChainSpec,
    header: &Header,
    body: &BlockBody<TxEnvelope>,
) -> Result<(), BlockError> {
    let number = header.number;
    let tx_root = calculate_transaction_root(&body.transactions);
    if tx_root != header.transactions_root {
        return Err(BlockError::mismatch(
            number,
            "transactionsRoot",
            header.transactions_root,
            tx_root,
        ));
    }
    let ommers_hash = body.calculate_ommers_root();
    if ommers_hash != header.ommers_hash {
        return Err(BlockError::mismatch(
            number,
            "ommersHash",
            header.ommers_hash,
            ommers_hash,
        ));
    }
    let shanghai = spec.is_shanghai_active_at_timestamp(header.timestamp);
    match (&body.withdrawals, header.withdrawals_root) {
        (Some(w), Some(expected)) if shanghai => {
            let got = calculate_withdrawals_root(w);
            if got != expected {
                return Err(BlockError::mismatch(
                    number,
                    "withdrawalsRoot",
                    expected,
                    got,
                ));
            }
        }
        (None, None) if !shanghai => {}
        _ => {
            return Err(BlockError::InvalidHeader {
                number,
                reason: "withdrawals presence does not match the fork".into(),
            })
        }
    }
    Ok(())
}

/// The receipts root: the trie of the receipts' EIP-2718 encodings.
pub fn receipts_root(receipts: &[ReceiptEnvelope]) -> B256 {
    use alloy::eips::Encodable2718;
    ordered_trie_root_with_encoder(receipts, |r, buf| r.encode_2718(buf))
}

#[cfg(test)]
mod header_tests {
    use super::*;
    use alloy::primitives::{Bytes, B64, U256};

    fn dev_child() -> (ChainSpec, Header, Header) {
        let spec = crate::chain::load("dev").unwrap().spec;
        let parent = spec.genesis_header.inner().clone();
        let header = Header {
            number: 1,
            timestamp: parent.timestamp + 12,
            gas_limit: parent.gas_limit,
            base_fee_per_gas: spec.next_base_fee(&parent),
            excess_blob_gas: spec.next_excess_blob_gas(&parent, parent.timestamp + 12),
            blob_gas_used: parent.blob_gas_used,
            parent_beacon_block_root: parent.parent_beacon_block_root,
            requests_hash: parent.requests_hash,
            withdrawals_root: parent.withdrawals_root,
            ..Default::default()
        };
        (spec, parent, header)
    }

    fn reason(r: Result<(), BlockError>) -> String {
        match r {
            Err(e @ BlockError::InvalidHeader { number: 1, .. }) => e.to_string(),
            other => panic!("expected an invalid header of block 1, got {other:?}"),
        }
    }

    #[test]
    fn valid_child_passes() {
        let (spec, parent, header) = dev_child();
        validate_header(&spec, &parent, &header).unwrap();
    }

    #[test]
    fn timestamp_must_increase() {
        let (spec, parent, mut header) = dev_child();
        header.timestamp = parent.timestamp;
        header.excess_blob_gas = spec.next_excess_blob_gas(&parent, header.timestamp);
        assert!(reason(validate_header(&spec, &parent, &header)).contains("timestamp"));
    }

    #[test]
    fn gas_limit_bounds() {
        let (spec, parent, mut header) = dev_child();
        let step = parent.gas_limit / 1024;
        header.gas_limit = parent.gas_limit + step - 1;
        validate_header(&spec, &parent, &header).unwrap();
        header.gas_limit = parent.gas_limit + step;
        assert!(reason(validate_header(&spec, &parent, &header)).contains("gasLimit"));
        header.gas_limit = parent.gas_limit - step;
        assert!(reason(validate_header(&spec, &parent, &header)).contains("gasLimit"));
        let mut small = parent.clone();
        small.gas_limit = 5000;
        header.gas_limit = 4999;
        header.base_fee_per_gas = spec.next_base_fee(&small);
        assert!(reason(validate_header(&spec, &small, &header)).contains("gasLimit"));
    }

    #[test]
    fn extra_data_at_most_32_bytes() {
        let (spec, parent, mut header) = dev_child();
        header.extra_data = Bytes::from(vec![0u8; 32]);
        validate_header(&spec, &parent, &header).unwrap();
        header.extra_data = Bytes::from(vec![0u8; 33]);
        assert!(reason(validate_header(&spec, &parent, &header)).contains("extraData"));
    }

    #[test]
    fn post_merge_difficulty_nonce_ommers() {
        let (spec, parent, header) = dev_child();
        let mut h = header.clone();
        h.difficulty = U256::from(1);
        assert!(reason(validate_header(&spec, &parent, &h)).contains("difficulty"));
        let mut h = header.clone();
        h.nonce = B64::from(1u64);
        assert!(reason(validate_header(&spec, &parent, &h)).contains("nonce"));
        let mut h = header;
        h.ommers_hash = B256::ZERO;
        assert!(reason(validate_header(&spec, &parent, &h)).contains("ommers"));
    }

    #[test]
    fn pre_merge_difficulty_nonzero() {
        let spec = crate::chain::load("mainnet").unwrap().spec;
        let parent = spec.genesis_header.inner().clone();
        let mut header = Header {
            number: 1,
            timestamp: parent.timestamp + 13,
            gas_limit: parent.gas_limit,
            difficulty: U256::from(1),
            ommers_hash: alloy::consensus::EMPTY_OMMER_ROOT_HASH,
            ..Default::default()
        };
        validate_header(&spec, &parent, &header).unwrap();
        header.difficulty = U256::ZERO;
        assert!(reason(validate_header(&spec, &parent, &header)).contains("difficulty"));
    }
}

#[cfg(test)]
mod sender_tests {
    use super::*;
    use alloy::{
        consensus::{SignableTransaction, TxEip1559},
        primitives::{Signature, TxKind, U256},
    };
    use k256::ecdsa::SigningKey;

    /// A transfer signed by the key of byte `k`, with its sender.
    fn signed(k: u8, nonce: u64) -> (TxEnvelope, Address) {
        let key = SigningKey::from_slice(&[k; 32]).expect("key");
        let tx = TxEip1559 {
            chain_id: 1,
            nonce,
            gas_limit: 21_000,
            to: TxKind::Call(Address::ZERO),
            value: U256::from(1),
            ..Default::default()
        };
        let (sig, recid) = key
            .sign_prehash_recoverable(tx.signature_hash().as_slice())
            .expect("signs");
        let sender = Address::from_public_key(key.verifying_key());
        (
            TxEnvelope::from(tx.into_signed(Signature::from((sig, recid)))),
            sender,
        )
    }

    /// Large blocks are recovered on several threads: senders come back in transaction order,
    /// and a bad signature is reported at its own index (the first bad one when there are two).
    #[test]
    fn senders_come_back_in_order_and_errors_name_the_first_bad_index() {
        for count in [0, 1, 63, 130, 301] {
            let (txs, expected): (Vec<_>, Vec<_>) = (0..count)
                .map(|i| signed(1 + (i % 7) as u8, i as u64))
                .unzip();
            let body = BlockBody {
                transactions: txs,
                ..Default::default()
            };
            assert_eq!(
                recover_senders(9, &body).expect("recovers"),
                expected,
                "{count}"
            );
        }
        let mut body = BlockBody {
            transactions: (0..300).map(|i| signed(3, i).0).collect(),
            ..Default::default()
        };
        for bad in [250, 170] {
            let TxEnvelope::Eip1559(tx) = &body.transactions[bad] else {
                unreachable!("built as EIP-1559")
            };
            // s above half the curve order: refused by recovery (EIP-2).
            let sig = Signature::new(tx.signature().r(), U256::MAX >> 1, false);
            body.transactions[bad] = TxEnvelope::from(tx.tx().clone().into_signed(sig));
        }
        match recover_senders(9, &body) {
            Err(BlockError::Sender { number, index, .. }) => assert_eq!((number, index), (9, 170)),
            other => panic!("expected a sender error, got {other:?}"),
        }
    }
}
