//! eth_sendRawTransaction: decode, recover, validate against the latest state with geth's
//! messages, and hand the transaction to the pool.

use alloy::{
    consensus::{
        transaction::{Recovered, SignerRecoverable},
        Signed, Transaction as _, TxEip4844Variant, TxEnvelope,
    },
    eips::eip7594::{BlobTransactionSidecarVariant, CELLS_PER_EXT_BLOB},
    primitives::{Address, B256, U256},
};
use revm::DatabaseRef;
use simnode_api::{
    pool::{kzg_settings, max_cost, SenderState},
    vm_messages, ModuleContext, RpcError, RpcResult,
};

/// The execution-apis error code (`_spec/src/error-groups`, referenced by `eth/submit.yaml`)
/// of a pool rejection, as geth answers eth_sendRawTransaction; other errors keep theirs.
pub fn submit_error(err: RpcError) -> jsonrpsee::types::ErrorObjectOwned {
    if let RpcError::Server(message) = &err {
        const CODES: &[(&str, i32)] = &[
            ("nonce too low", 1),
            ("nonce too high", 2),
            ("intrinsic gas too low", 800),
            ("transaction gas price below minimum", 802),
            ("exceeds block gas limit", 803),
            ("max priority fee per gas higher than max fee per gas", 804),
            ("insufficient funds for gas * price + value", 809),
            ("already known", 1000),
            ("invalid sender", 1001),
            ("replacement transaction underpriced", 1002),
        ];
        if let Some((_, code)) = CODES.iter().find(|(prefix, _)| message.starts_with(prefix)) {
            return jsonrpsee::types::ErrorObjectOwned::owned(*code, message.clone(), None::<()>);
        }
    }
    err.into()
}

/// geth's `--rpc.txfeecap`: a transaction whose gas at its fee cap costs more than `cap` wei
/// (0: no cap) is refused before the pool sees it, a guard against a mistyped fee.
fn check_fee_cap(tx: &TxEnvelope, cap: u128) -> RpcResult<()> {
    if cap == 0 {
        return Ok(());
    }
    let fee = U256::from(tx.gas_limit()) * U256::from(tx.max_fee_per_gas());
    if fee > U256::from(cap) {
        let ether = |wei: U256| f64::from(wei) / 1e18;
        return Err(RpcError::Server(format!(
            "tx fee ({:.2} ether) exceeds the configured cap ({:.2} ether)",
            ether(fee),
            ether(U256::from(cap))
        )));
    }
    Ok(())
}

/// A signed transaction's bytes decoded, refused as geth's `UnmarshalBinary` refuses them
/// (-32000, its words where alloy's differ).
fn decode_as_geth(raw: &[u8]) -> RpcResult<TxEnvelope> {
    use alloy::eips::Decodable2718;
    let refused = |words: &str| RpcError::Server(words.into());
    // A first byte under 0x80 is a type, not the start of a legacy transaction's list.
    let kind = raw.first().copied().unwrap_or_default();
    if kind < 0x80 {
        if raw.len() <= 1 {
            return Err(refused("typed transaction too short"));
        }
        if alloy::consensus::TxType::try_from(kind).map_or(true, |t| t.is_legacy()) {
            return Err(refused("transaction type not supported"));
        }
    }
    let mut buf = raw;
    let tx = TxEnvelope::decode_2718(&mut buf).map_err(|e| refused(&format!("rlp: {e}")))?;
    if !buf.is_empty() {
        return Err(refused("rlp: input contains more than one value"));
    }
    Ok(tx)
}

/// geth's limit on a transaction's encoded size (blob transactions: without blobs).
pub const TX_MAX_SIZE: usize = 128 * 1024;
/// Encoded size limit of a blob transaction with its sidecar.
pub const BLOB_TX_MAX_SIZE: usize = 2 * 1024 * 1024;

/// [`send_raw_transaction`] as the RPC methods run it, with eth_sendRawTransaction's error
/// codes. A blob transaction (type 3, the only kind that carries a sidecar) goes to the
/// blocking pool: checking a sidecar's KZG proofs takes milliseconds of CPU, which must not hold
/// up the runtime's other requests. Any other is answered in place, as cheaply as before.
pub async fn send_raw_transaction_async(
    ctx: &ModuleContext,
    raw: Vec<u8>,
) -> Result<B256, jsonrpsee::types::ErrorObjectOwned> {
    if raw.first() != Some(&alloy::consensus::TxType::Eip4844.into()) {
        return send_raw_transaction(ctx, &raw).map_err(submit_error);
    }
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || send_raw_transaction(&ctx, &raw))
        .await
        .map_err(RpcError::internal)?
        .map_err(submit_error)
}

pub fn send_raw_transaction(ctx: &ModuleContext, raw: &[u8]) -> RpcResult<B256> {
    let tx = decode_as_geth(raw)?;
    let limit = if tx.is_eip4844() {
        BLOB_TX_MAX_SIZE
    } else {
        TX_MAX_SIZE
    };
    if raw.len() > limit {
        return Err(RpcError::Server(format!(
            "oversized data: transaction size {}, limit {limit}",
            raw.len()
        )));
    }
    let (tx, sidecar) = split_sidecar(tx)?;
    match tx.chain_id() {
        Some(chain_id) if chain_id != ctx.spec.chain_id => {
            return Err(RpcError::Server(format!(
                "invalid sender: invalid chain id for signer: have {chain_id} want {}",
                ctx.spec.chain_id
            )));
        }
        None if !ctx.limits.allow_unprotected_txs => {
            return Err(RpcError::Server(
                "only replay-protected (EIP-155) transactions allowed over RPC (start the node with --rpc.allow-unprotected-txs to take them)".into(),
            ));
        }
        _ => {}
    }
    let sender = tx
        .recover_signer()
        .map_err(|_| RpcError::Server("invalid sender".into()))?;
    checked_into_pool(ctx, tx, sender, sidecar)
}

/// Checks `tx` from `sender` (and the sidecar a blob transaction may carry) against the latest
/// state as geth's pool does and hands it to the pool: eth_sendRawTransaction's checks after
/// recovery. A dev node sends its impersonated transactions through it (their sender cannot be
/// recovered).
pub fn submit(ctx: &ModuleContext, tx: TxEnvelope, sender: Address) -> RpcResult<B256> {
    let (tx, sidecar) = split_sidecar(tx)?;
    checked_into_pool(ctx, tx, sender, sidecar)
}

fn checked_into_pool(
    ctx: &ModuleContext,
    tx: TxEnvelope,
    sender: Address,
    sidecar: Option<BlobTransactionSidecarVariant>,
) -> RpcResult<B256> {
    let (sidecar, state) = check(ctx, &tx, sender, sidecar)?;
    let hash = ctx
        .pool
        .admit(Recovered::new_unchecked(tx, sender), sidecar, state)?;
    ctx.pool.promote(&sender, state.nonce);
    Ok(hash)
}

/// eth_sendRawTransaction's checks of `tx` from `sender` against the latest state, as geth's
/// pool makes them, and of the sidecar it came with, if any: that sidecar as the pool is to
/// keep it (see [`publishable_sidecar`]), and the sender as the latest state has it.
fn check(
    ctx: &ModuleContext,
    tx: &TxEnvelope,
    sender: Address,
    sidecar: Option<BlobTransactionSidecarVariant>,
) -> RpcResult<(Option<BlobTransactionSidecarVariant>, SenderState)> {
    check_fee_cap(tx, ctx.limits.tx_fee_cap)?;
    // In the order of geth's pool (`ValidateTransaction`): the type, the EIP-7825 cap, the
    // block's gas limit, the tip against the fee cap.
    let head = ctx.chain.head().latest;
    let header = ctx.chain.header(head)?.ok_or(RpcError::HeaderNotFound)?;
    let spec_id = ctx.spec.spec_id(head + 1, header.timestamp);
    check_kind(ctx, tx, spec_id, header.timestamp)?;
    let cap = revm::primitives::eip7825::TX_GAS_LIMIT_CAP;
    if spec_id >= revm::primitives::hardfork::SpecId::OSAKA && tx.gas_limit() > cap {
        return Err(RpcError::Server(vm_messages::gas_limit_over_cap(
            tx.gas_limit(),
            cap,
        )));
    }
    if tx.gas_limit() > header.gas_limit {
        return Err(RpcError::Server("exceeds block gas limit".into()));
    }
    if let Some(tip) = tx.max_priority_fee_per_gas() {
        if tip > tx.max_fee_per_gas() {
            return Err(RpcError::Server(
                "max priority fee per gas higher than max fee per gas".into(),
            ));
        }
    }
    let intrinsic = intrinsic_gas(tx, spec_id);
    if tx.gas_limit() < intrinsic {
        return Err(RpcError::Server(format!(
            "intrinsic gas too low: gas {}, minimum needed {intrinsic}",
            tx.gas_limit()
        )));
    }
    if let Some(floor) = floor_data_gas(tx, spec_id).filter(|floor| tx.gas_limit() < *floor) {
        return Err(RpcError::Server(format!(
            "insufficient gas for floor data gas cost: gas {}, minimum needed {floor}",
            tx.gas_limit()
        )));
    }
    if tx.nonce() == u64::MAX {
        return Err(RpcError::Server("nonce has max value".into()));
    }
    let tip = tx
        .max_priority_fee_per_gas()
        .unwrap_or(tx.max_fee_per_gas());
    if tip < ctx.limits.min_tip {
        return Err(RpcError::Server(format!(
            "transaction gas price below minimum: gas tip cap {tip}, minimum needed {}",
            ctx.limits.min_tip
        )));
    }
    // A node that mines each transaction as it arrives (a dev node's automine) makes no empty
    // blocks for the base fee to fall in: a fee cap under the next block's would wait forever,
    // and anvil refuses it. Other pools keep it until the base fee comes down, as geth's.
    if ctx.pool.mines_on_arrival() {
        let base_fee = ctx.spec.next_base_fee(&header).unwrap_or(0);
        if tx.max_fee_per_gas() < u128::from(base_fee) {
            return Err(RpcError::Server(vm_messages::fee_cap_below_base_fee(
                sender,
                tx.max_fee_per_gas(),
                base_fee,
            )));
        }
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
    // A blob transaction may not wait behind a gap, as geth's blob pool and reth refuse it:
    // its sidecar would hold pool room for a transaction that may never be minable.
    if tx.is_eip4844() {
        let next = ctx.pool.next_nonce(&sender, account.nonce);
        if tx.nonce() > next {
            return Err(RpcError::Server(format!(
                "nonce too high: tx nonce {}, gapped nonce {next}",
                tx.nonce()
            )));
        }
    }
    let cost = max_cost(tx);
    if account.balance < cost {
        return Err(RpcError::Server(format!(
            "insufficient funds for gas * price + value: balance {}, tx cost {cost}, overshot {}",
            account.balance,
            cost - account.balance
        )));
    }
    // What the sender's other pending transactions (the gapless run from its nonce, geth's
    // pending list) may spend counts too, as in geth's pool; a replacement counts for what it
    // adds to the one it replaces.
    let pooled = ctx.pool.pending_run(&sender, account.nonce);
    if !pooled.is_empty() {
        let queued: U256 = pooled.iter().map(max_cost).sum();
        let nonce = tx.nonce();
        let replaced = pooled
            .iter()
            .find(|t| alloy::consensus::Transaction::nonce(*t) == nonce);
        let (need, detail) = match replaced {
            Some(old) => {
                let bump = cost.saturating_sub(max_cost(old));
                (queued + bump, format!("tx bumped {bump}"))
            }
            None => (queued + cost, format!("tx cost {cost}")),
        };
        if account.balance < need {
            return Err(RpcError::Server(format!(
                "insufficient funds for gas * price + value: balance {}, queued cost {queued}, {detail}, overshot {}",
                account.balance,
                need - account.balance
            )));
        }
    }
    // Last, being the costly check (milliseconds per blob).
    let hashes = tx.blob_versioned_hashes().unwrap_or_default();
    let sidecar = sidecar
        .map(|sidecar| publishable_sidecar(hashes, sidecar, spec_id))
        .transpose()?;
    let state = SenderState {
        nonce: account.nonce,
        delegated: !account.is_empty_code_hash() && !account.code_hash.is_zero(),
    };
    Ok((sidecar, state))
}

/// `sidecar` in the version the next block's fork publishes, its KZG proofs verified against
/// its blobs and commitments, as geth's and reth's pools verify them: the pool hands the blobs to
/// a proposer, whose block's blobs would not be available if a proof were false.
///
/// The version is a proof per blob before Osaka and a proof per cell (EIP-7594) from it on. A
/// sidecar with a proof per blob, which wallets and libraries made before Osaka, is converted
/// from then on (its cells' proofs computed from the blobs), as geth and erigon convert it; one
/// with cell proofs before Osaka is refused, as the pool could not publish it.
pub fn publishable_sidecar(
    hashes: &[B256],
    sidecar: BlobTransactionSidecarVariant,
    spec: revm::primitives::hardfork::SpecId,
) -> RpcResult<BlobTransactionSidecarVariant> {
    let osaka = spec >= revm::primitives::hardfork::SpecId::OSAKA;
    if !osaka && matches!(sidecar, BlobTransactionSidecarVariant::Eip7594(_)) {
        return Err(RpcError::Server(
            "unexpected blob sidecar with a proof per cell (EIP-7594) before Osaka: send one with a proof per blob".into(),
        ));
    }
    let settings = kzg_settings();
    sidecar
        .validate(hashes, settings)
        .map_err(|err| RpcError::Server(format!("KZG verification error: {err}")))?;
    match sidecar {
        BlobTransactionSidecarVariant::Eip4844(legacy) if osaka => legacy
            .try_into_7594(settings)
            .map(BlobTransactionSidecarVariant::Eip7594)
            .map_err(|err| RpcError::Server(format!("blob sidecar conversion failed: {err:?}"))),
        sidecar => Ok(sidecar),
    }
}

/// The transaction a block carries for `tx`, without the sidecar a blob transaction sent in
/// its network form brings (see [`split_sidecar`]).
pub(crate) fn without_sidecar(tx: TxEnvelope) -> RpcResult<TxEnvelope> {
    split_sidecar(tx).map(|(tx, _)| tx)
}

/// The transaction a block carries for `tx`, and the sidecar (blobs, commitments, proofs) a
/// blob transaction sent in its network form brings. The transaction's hash is that of the
/// transaction alone, and so are its encoding in a block and the block's transactions root;
/// the pool keeps the sidecar beside it, for a proposer to publish.
/// The sidecar must belong to the transaction, as geth checks: one blob and commitment per
/// versioned hash, each commitment hashing to its versioned hash, and as many proofs as the
/// sidecar's version asks (one per blob, or one per cell since EIP-7594). The KZG proofs
/// themselves are verified later, after the cheaper checks (see [`publishable_sidecar`]).
pub(crate) fn split_sidecar(
    tx: TxEnvelope,
) -> RpcResult<(TxEnvelope, Option<BlobTransactionSidecarVariant>)> {
    let TxEnvelope::Eip4844(signed) = tx else {
        return Ok((tx, None));
    };
    let (variant, signature, hash) = signed.into_parts();
    let (tx, sidecar) = match variant {
        TxEip4844Variant::TxEip4844(tx) => (tx, None),
        TxEip4844Variant::TxEip4844WithSidecar(with) => {
            let (tx, sidecar) = (with.tx, with.sidecar);
            let hashes = &tx.blob_versioned_hashes;
            let commitments = sidecar.commitments();
            if sidecar.blobs().len() != hashes.len() || commitments.len() != hashes.len() {
                return Err(RpcError::Server(format!(
                    "invalid number of {} blobs and {} commitments compared to {} blob hashes",
                    sidecar.blobs().len(),
                    commitments.len(),
                    hashes.len()
                )));
            }
            let (proofs, per_blob) = match &sidecar {
                BlobTransactionSidecarVariant::Eip4844(s) => (s.proofs.len(), 1),
                BlobTransactionSidecarVariant::Eip7594(s) => {
                    (s.cell_proofs.len(), CELLS_PER_EXT_BLOB)
                }
            };
            if proofs != hashes.len() * per_blob {
                return Err(RpcError::Server(format!(
                    "invalid number of {proofs} blob proofs for {} blobs",
                    hashes.len()
                )));
            }
            for (index, (computed, want)) in sidecar.versioned_hashes().zip(hashes).enumerate() {
                if computed != *want {
                    return Err(RpcError::Server(format!(
                        "blob {index}: computed hash {computed} mismatches transaction one {want}"
                    )));
                }
            }
            (tx, Some(sidecar))
        }
    };
    let tx = TxEnvelope::Eip4844(Signed::new_unchecked(
        TxEip4844Variant::TxEip4844(tx),
        signature,
        hash,
    ));
    Ok((tx, sidecar))
}

/// Refuses a transaction of `count` blobs past the executor's limit at `timestamp` (EIP-7594's
/// six per transaction from Osaka on), in geth's pool's words.
pub fn check_blob_count(
    spec: &simnode_api::ChainSpec,
    count: usize,
    timestamp: u64,
) -> RpcResult<()> {
    let permitted = spec
        .blob_params_at(timestamp)
        .map_or(0, |params| params.max_blobs_per_tx);
    if count as u64 > permitted {
        return Err(RpcError::Server(format!(
            "too many blobs in transaction: have {count}, permitted {permitted}"
        )));
    }
    Ok(())
}

/// Refuses what no block of the fork `spec` could take, with geth's pool's words, rather than
/// letting it wait in the pool for ever: a type the fork does not have, a blob transaction
/// without blobs, with more than the fork lets one carry or with a hash of a version other than
/// KZG's, and a set-code transaction without authorizations.
fn check_kind(
    ctx: &ModuleContext,
    tx: &TxEnvelope,
    spec: revm::primitives::hardfork::SpecId,
    timestamp: u64,
) -> RpcResult<()> {
    use alloy::consensus::TxType;
    use revm::primitives::hardfork::SpecId;
    let needs = match tx.tx_type() {
        TxType::Legacy => SpecId::FRONTIER,
        TxType::Eip2930 => SpecId::BERLIN,
        TxType::Eip1559 => SpecId::LONDON,
        TxType::Eip4844 => SpecId::CANCUN,
        TxType::Eip7702 => SpecId::PRAGUE,
    };
    if !spec.is_enabled_in(needs) {
        return Err(RpcError::Server("transaction type not supported".into()));
    }
    if let Some(hashes) = tx.blob_versioned_hashes() {
        if hashes.is_empty() {
            return Err(RpcError::Server("blobless blob transaction".into()));
        }
        check_blob_count(&ctx.spec, hashes.len(), timestamp)?;
        let kzg = alloy::eips::eip4844::VERSIONED_HASH_VERSION_KZG;
        if let Some((index, hash)) = hashes.iter().enumerate().find(|(_, h)| h[0] != kzg) {
            return Err(RpcError::Server(format!(
                "blob {index} hash version mismatch (have {}, supported {kzg})",
                hash[0]
            )));
        }
    }
    if tx.authorization_list().is_some_and(|list| list.is_empty()) {
        return Err(RpcError::Server(
            "EIP-7702 transaction with empty auth list".into(),
        ));
    }
    Ok(())
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
    gas
}

/// EIP-7623's floor on the gas of a transaction with calldata (from Prague): 10 per token,
/// tokens = zero bytes + 4 * non-zero bytes.
fn floor_data_gas(tx: &TxEnvelope, spec: revm::primitives::hardfork::SpecId) -> Option<u64> {
    if spec < revm::primitives::hardfork::SpecId::PRAGUE {
        return None;
    }
    let input = tx.input();
    let zeros = input.iter().filter(|b| **b == 0).count() as u64;
    let nonzeros = input.len() as u64 - zeros;
    Some(21_000 + (zeros + 4 * nonzeros) * 10)
}

#[cfg(test)]
mod submit_error_tests {
    use super::*;

    /// Pool rejections carry the execution-apis codes (upstream eth_sendRawTransaction
    /// send-nonce-too-low / send-tip-above-fee-cap / send-insufficient-funds /
    /// send-intrinsic-gas-too-low / send-already-known); other errors keep their own.
    #[test]
    fn pool_rejections_carry_spec_codes() {
        let code = |e: RpcError| submit_error(e).code();
        let server = |m: &str| RpcError::Server(m.into());
        assert_eq!(code(server("nonce too low: next nonce 160, tx nonce 0")), 1);
        assert_eq!(
            code(server(
                "max priority fee per gas higher than max fee per gas"
            )),
            804
        );
        assert_eq!(
            code(server(
                "insufficient funds for gas * price + value: balance 1, tx cost 2, overshot 1"
            )),
            809
        );
        assert_eq!(
            code(server("intrinsic gas too low: gas 1, minimum needed 21000")),
            800
        );
        assert_eq!(code(server("exceeds block gas limit")), 803);
        assert_eq!(code(server("already known")), 1000);
        assert_eq!(code(server("replacement transaction underpriced")), 1002);
        assert_eq!(code(server("oversized data")), -32000);
        let refused = |raw: &[u8]| decode_as_geth(raw).unwrap_err();
        for (raw, words) in [
            (&[][..], "typed transaction too short"),
            (&[0x02], "typed transaction too short"),
            (&[0x12, 0x34], "transaction type not supported"),
            (&[0x00, 0xc0], "transaction type not supported"),
            (&[0x02, 0xc0], "rlp: "),
            (&[0xf8, 0x01], "rlp: "),
        ] {
            let err = refused(raw);
            assert_eq!(err.code(), -32000, "{raw:?}: {err}");
            assert!(err.to_string().starts_with(words), "{raw:?}: {err}");
        }
        let e = submit_error(server("nonce too low: next nonce 1, tx nonce 0"));
        assert_eq!(e.message(), "nonce too low: next nonce 1, tx nonce 0");
    }
}

#[cfg(test)]
mod blob_proof_tests {
    use alloy::eips::{
        eip4844::{Blob, BlobTransactionSidecar},
        eip7594::BlobTransactionSidecarEip7594,
    };
    use revm::primitives::hardfork::SpecId;

    use super::*;

    /// Two blobs with data in them (each 32-byte element stays below the field's modulus).
    fn blobs() -> Vec<Blob> {
        let mut blobs = vec![Blob::ZERO; 2];
        blobs[0][31] = 1;
        blobs[0][40] = 0x5a;
        blobs[1][63] = 7;
        blobs
    }

    fn per_blob() -> BlobTransactionSidecar {
        BlobTransactionSidecar::try_from_blobs_with_settings(blobs(), kzg_settings())
            .expect("valid blobs")
    }

    fn per_cell() -> BlobTransactionSidecarEip7594 {
        BlobTransactionSidecarEip7594::try_from_blobs_with_settings(blobs(), kzg_settings())
            .expect("valid blobs")
    }

    /// `sidecar` as the pool keeps it for a block of fork `spec`.
    fn published(
        sidecar: impl Into<BlobTransactionSidecarVariant>,
        spec: SpecId,
    ) -> RpcResult<BlobTransactionSidecarVariant> {
        let sidecar = sidecar.into();
        let hashes: Vec<B256> = sidecar.versioned_hashes().collect();
        publishable_sidecar(&hashes, sidecar, spec)
    }

    fn refused(result: RpcResult<BlobTransactionSidecarVariant>, words: &str) {
        match result {
            Err(RpcError::Server(message)) => assert!(message.contains(words), "{message}"),
            other => panic!("not refused with {words:?}: {other:?}"),
        }
    }

    #[test]
    fn a_proof_per_blob_must_prove_its_blob() {
        let sidecar = per_blob();
        let kept = published(sidecar.clone(), SpecId::PRAGUE).expect("true proofs");
        assert_eq!(kept, sidecar.clone().into(), "kept as sent before Osaka");

        let mut swapped = sidecar.clone();
        swapped.proofs.swap(0, 1);
        refused(published(swapped, SpecId::PRAGUE), "KZG verification error");

        // A blob changed after its commitment and proof were made.
        let mut changed = sidecar;
        changed.blobs[1][95] = 1;
        refused(published(changed, SpecId::PRAGUE), "KZG verification error");
    }

    #[test]
    fn a_proof_per_cell_must_prove_its_cell() {
        let sidecar = per_cell();
        let kept = published(sidecar.clone(), SpecId::OSAKA).expect("true proofs");
        assert_eq!(kept, sidecar.clone().into());

        let mut swapped = sidecar.clone();
        swapped.cell_proofs.swap(3, 4);
        refused(published(swapped, SpecId::OSAKA), "KZG verification error");

        let mut changed = sidecar.clone();
        changed.blobs[0][40] = 0x5b;
        refused(published(changed, SpecId::OSAKA), "KZG verification error");

        // Not a point of the curve at all.
        let mut garbage = sidecar.clone();
        garbage.cell_proofs[0] = alloy::primitives::FixedBytes::repeat_byte(0x11);
        refused(published(garbage, SpecId::OSAKA), "KZG verification error");

        // Before Osaka no proposer could publish cell proofs.
        refused(published(sidecar, SpecId::PRAGUE), "before Osaka");
    }

    /// From Osaka on a sidecar with a proof per blob is taken with the proofs of its cells
    /// computed, the ones a sidecar made for Osaka has; a false one is still refused.
    #[test]
    fn from_osaka_a_proof_per_blob_becomes_a_proof_per_cell() {
        let converted = published(per_blob(), SpecId::OSAKA).expect("true proofs");
        assert_eq!(converted, per_cell().into());

        let mut swapped = per_blob();
        swapped.proofs.swap(0, 1);
        refused(published(swapped, SpecId::OSAKA), "KZG verification error");
    }
}
