//! `engine_getBlobsV1..V3`: a consensus client fetches from the pool the blobs of the blob
//! transactions it saw in gossip, so that it need not wait for them from its peers. The pool
//! holds the sidecars that came with transactions sent to `eth_sendRawTransaction`.
//!
//! V1 serves sidecars with a proof per blob (before Osaka), V2 and V3 those with a proof per
//! cell (EIP-7594, from Osaka on). V2 answers all or nothing; V1 and V3 put `null` where a blob
//! is missing.

use alloy::{
    eips::eip7594::{BlobTransactionSidecarVariant, CELLS_PER_EXT_BLOB},
    primitives::B256,
};
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{json, Value};

use alloy_hardforks::EthereumHardforks;

use crate::{pool::Pool, store::Store};

/// The most blobs one request may ask for: the spec's minimum, as geth serves it. More is
/// -38004.
pub const MAX_BLOBS_ASKED: usize = 128;

/// What the node is when asked: whether Osaka is active at its head, and whether it is
/// syncing (then it cannot tell which blobs the chain still needs).
#[derive(Debug, Clone, Copy)]
pub struct NodeState {
    pub osaka: bool,
    pub syncing: bool,
}

impl NodeState {
    pub fn of(store: &Store) -> Result<Self, ErrorObjectOwned> {
        let head = store
            .head_header()
            .map_err(|e| ErrorObjectOwned::owned(-32603, e.to_string(), None::<()>))?;
        Ok(Self {
            osaka: store.spec().is_osaka_active_at_timestamp(head.timestamp),
            syncing: store.sync_target().borrow().is_some(),
        })
    }
}

use super::payload_jobs::unsupported_fork;

/// The answer of `engine_getBlobsV{version}` for `hashes`, in their order.
pub fn blobs(
    pool: &Pool,
    version: u8,
    node: NodeState,
    hashes: &[B256],
) -> Result<Value, ErrorObjectOwned> {
    if hashes.len() > MAX_BLOBS_ASKED {
        return Err(ErrorObjectOwned::owned(
            -38004,
            format!(
                "Too large request: {} blobs asked for, at most {MAX_BLOBS_ASKED}",
                hashes.len()
            ),
            None::<()>,
        ));
    }
    match version {
        1 => {
            if node.osaka {
                return Err(unsupported_fork(
                    "engine_getBlobsV1 serves blobs with a proof per blob, before Osaka; use engine_getBlobsV2",
                ));
            }
            let found: Vec<Option<Value>> = hashes
                .iter()
                .map(|h| (!node.syncing).then(|| blob_v1(pool, h)).flatten())
                .collect();
            Ok(json!(found))
        }
        _ => {
            if !node.osaka {
                return Err(unsupported_fork(format!(
                    "engine_getBlobsV{version} serves blobs with cell proofs, from Osaka on"
                )));
            }
            if node.syncing {
                return Ok(Value::Null);
            }
            let found: Vec<Option<Value>> = hashes.iter().map(|h| blob_v2(pool, h)).collect();
            if version == 2 && found.iter().any(Option::is_none) {
                return Ok(Value::Null);
            }
            Ok(json!(found))
        }
    }
}

// The answers are written from the pool's sidecars by reference, not through alloy's
// `BlobAndProofV1/V2`: each of those owns a copy of its 128 KiB blob, made on the stack.

/// `BlobAndProofV1`: blob `versioned` with its proof, from a sidecar with a proof per blob.
fn blob_v1(pool: &Pool, versioned: &B256) -> Option<Value> {
    let (sidecar, index) = pool.blob(versioned)?;
    let BlobTransactionSidecarVariant::Eip4844(sidecar) = &*sidecar else {
        return None;
    };
    Some(json!({"blob": sidecar.blobs.get(index)?, "proof": sidecar.proofs.get(index)?}))
}

/// `BlobAndProofV2`: blob `versioned` with its cell proofs, from a sidecar with a proof per
/// cell.
fn blob_v2(pool: &Pool, versioned: &B256) -> Option<Value> {
    let (sidecar, index) = pool.blob(versioned)?;
    let BlobTransactionSidecarVariant::Eip7594(sidecar) = &*sidecar else {
        return None;
    };
    let cells = index * CELLS_PER_EXT_BLOB..(index + 1) * CELLS_PER_EXT_BLOB;
    Some(json!({"blob": sidecar.blobs.get(index)?, "proofs": sidecar.cell_proofs.get(cells)?}))
}

#[cfg(test)]
mod tests {
    use alloy::{
        consensus::{transaction::Recovered, Signed, TxEip4844, TxEip4844Variant, TxEnvelope},
        eips::{
            eip4844::{Blob, BlobTransactionSidecar, Bytes48},
            eip7594::BlobTransactionSidecarEip7594,
        },
        primitives::{Address, Signature},
    };
    use simnode_api::TxPool as _;

    use super::*;

    /// A blob transaction from `sender` whose blobs are filled with `fills`; the versioned
    /// hashes are stand-ins (the pool does not check them against the sidecar: the RPC does).
    fn blob_tx(sender: u8, fills: &[u8]) -> (Recovered<TxEnvelope>, Vec<B256>) {
        let hashes: Vec<B256> = fills
            .iter()
            .map(|f| {
                let mut h = B256::repeat_byte(*f);
                h.0[0] = 1;
                h
            })
            .collect();
        let tx = TxEip4844 {
            // Each sender's own recipient: the transactions hash apart.
            to: Address::repeat_byte(sender),
            blob_versioned_hashes: hashes.clone(),
            max_fee_per_gas: 1,
            ..Default::default()
        };
        let signed =
            Signed::new_unhashed(TxEip4844Variant::TxEip4844(tx), Signature::test_signature());
        let sender = Address::repeat_byte(sender);
        (
            Recovered::new_unchecked(TxEnvelope::Eip4844(signed), sender),
            hashes,
        )
    }

    /// Blobs filled with `fills`, made on the heap (a blob is 128 KiB).
    fn blobs_of(fills: &[u8]) -> Vec<Blob> {
        let mut blobs = vec![Blob::ZERO; fills.len()];
        for (blob, fill) in blobs.iter_mut().zip(fills) {
            blob.0.fill(*fill);
        }
        blobs
    }

    /// A blob filled with `fill`, as JSON writes it.
    fn blob_hex(fill: u8) -> Value {
        json!(format!("0x{}", format!("{fill:02x}").repeat(131_072)))
    }

    fn eip4844(fills: &[u8]) -> BlobTransactionSidecarVariant {
        BlobTransactionSidecarVariant::Eip4844(BlobTransactionSidecar {
            blobs: blobs_of(fills),
            commitments: fills.iter().map(|f| Bytes48::repeat_byte(*f)).collect(),
            proofs: fills
                .iter()
                .map(|f| Bytes48::repeat_byte(f + 100))
                .collect(),
        })
    }

    fn eip7594(fills: &[u8]) -> BlobTransactionSidecarVariant {
        BlobTransactionSidecarVariant::Eip7594(BlobTransactionSidecarEip7594 {
            blobs: blobs_of(fills),
            commitments: fills.iter().map(|f| Bytes48::repeat_byte(*f)).collect(),
            // Each blob's cell proofs name their blob and cell.
            cell_proofs: fills
                .iter()
                .flat_map(|f| {
                    (0..CELLS_PER_EXT_BLOB).map(move |cell| {
                        let mut p = Bytes48::repeat_byte(*f);
                        p.0[47] = cell as u8;
                        p
                    })
                })
                .collect(),
        })
    }

    const BEFORE_OSAKA: NodeState = NodeState {
        osaka: false,
        syncing: false,
    };
    const OSAKA: NodeState = NodeState {
        osaka: true,
        syncing: false,
    };

    #[test]
    fn v1_gives_proofs_per_blob_in_the_order_asked_with_null_for_the_rest() {
        let pool = Pool::default();
        let (tx, hashes) = blob_tx(1, &[7, 8]);
        pool.insert_with_sidecar(tx, eip4844(&[7, 8])).unwrap();
        let unknown = B256::repeat_byte(0x99);
        let got = blobs(&pool, 1, BEFORE_OSAKA, &[hashes[1], unknown, hashes[0]]).unwrap();
        assert_eq!(got.as_array().unwrap().len(), 3);
        assert_eq!(got[0]["blob"], blob_hex(8));
        assert_eq!(got[0]["proof"], json!(Bytes48::repeat_byte(108)));
        assert!(got[1].is_null());
        assert_eq!(got[2]["blob"], blob_hex(7));
        assert_eq!(got[2]["proof"], json!(Bytes48::repeat_byte(107)));

        // Syncing: all null. Osaka: refused. Too many: refused.
        let syncing = NodeState {
            syncing: true,
            ..BEFORE_OSAKA
        };
        assert_eq!(
            blobs(&pool, 1, syncing, &hashes).unwrap(),
            json!([null, null])
        );
        assert_eq!(blobs(&pool, 1, OSAKA, &hashes).unwrap_err().code(), -38005);
        let many = vec![hashes[0]; MAX_BLOBS_ASKED + 1];
        assert_eq!(
            blobs(&pool, 1, BEFORE_OSAKA, &many).unwrap_err().code(),
            -38004
        );
        assert!(blobs(&pool, 1, BEFORE_OSAKA, &many[1..]).is_ok());
    }

    #[test]
    fn v2_is_all_or_nothing_and_v3_fills_gaps_with_null() {
        let pool = Pool::default();
        let (tx, hashes) = blob_tx(1, &[7, 8]);
        pool.insert_with_sidecar(tx, eip7594(&[7, 8])).unwrap();
        // A sidecar with a proof per blob does not serve V2 or V3.
        let (old, old_hashes) = blob_tx(2, &[9]);
        pool.insert_with_sidecar(old, eip4844(&[9])).unwrap();

        let got = blobs(&pool, 2, OSAKA, &[hashes[1], hashes[0]]).unwrap();
        assert_eq!(got[0]["blob"], blob_hex(8));
        let proofs = got[0]["proofs"].as_array().unwrap();
        assert_eq!(proofs.len(), CELLS_PER_EXT_BLOB);
        let mut fifth = Bytes48::repeat_byte(8);
        fifth.0[47] = 5;
        assert_eq!(proofs[5], json!(fifth), "blob 8's proof of cell 5");
        assert_eq!(got[1]["blob"], blob_hex(7));

        assert_eq!(
            blobs(&pool, 2, OSAKA, &[hashes[0], old_hashes[0]]).unwrap(),
            Value::Null
        );
        let got = blobs(&pool, 3, OSAKA, &[hashes[0], old_hashes[0]]).unwrap();
        assert_eq!(got.as_array().unwrap().len(), 2);
        assert!(got[0].is_object() && got[1].is_null(), "{got}");

        let syncing = NodeState {
            syncing: true,
            ..OSAKA
        };
        assert_eq!(blobs(&pool, 3, syncing, &hashes).unwrap(), Value::Null);
        assert_eq!(
            blobs(&pool, 2, BEFORE_OSAKA, &hashes).unwrap_err().code(),
            -38005
        );
    }

    /// The pool keeps the sidecars of at most MAX_POOL_BLOBS blobs: past it a blob
    /// transaction is refused, while a replacement counts without the blobs it replaces.
    #[test]
    fn the_pool_keeps_a_bounded_number_of_blobs() {
        use crate::pool::MAX_POOL_BLOBS;
        let pool = Pool::default();
        let six = [1, 2, 3, 4, 5, 6];
        let senders = MAX_POOL_BLOBS / six.len();
        for sender in 0..senders {
            let (tx, _) = blob_tx(sender as u8, &six);
            pool.insert_with_sidecar(tx, eip7594(&six)).unwrap();
        }
        let left = MAX_POOL_BLOBS - senders * six.len();
        let (tx, _) = blob_tx(250, &six[..left + 1]);
        let refused = pool
            .insert_with_sidecar(tx, eip7594(&six[..left + 1]))
            .unwrap_err();
        assert!(refused.to_string().contains("txpool is full"), "{refused}");
        // Sender 0's transaction replaced by one paying more, with as many blobs.
        let (tx, _) = blob_tx(0, &six);
        let tx = {
            let TxEnvelope::Eip4844(signed) = tx.inner() else {
                unreachable!()
            };
            let mut inner = signed.tx().tx().clone();
            inner.max_fee_per_gas = 2;
            inner.max_priority_fee_per_gas = 1;
            let signed = Signed::new_unhashed(
                TxEip4844Variant::TxEip4844(inner),
                Signature::test_signature(),
            );
            Recovered::new_unchecked(TxEnvelope::Eip4844(signed), tx.signer())
        };
        pool.insert_with_sidecar(tx, eip7594(&six)).unwrap();
        // A transaction without a sidecar takes no blob room.
        let (bare, _) = blob_tx(251, &six);
        pool.insert(bare).unwrap();
    }

    #[test]
    fn blobs_leave_with_their_transaction() {
        let pool = Pool::default();
        let (tx, hashes) = blob_tx(1, &[7]);
        let hash = *tx.tx_hash();
        pool.insert_with_sidecar(tx, eip7594(&[7])).unwrap();
        assert!(pool.sidecar(&hash).is_some());
        pool.on_block(&[hash], |_| None);
        assert!(pool.sidecar(&hash).is_none());
        assert_eq!(blobs(&pool, 2, OSAKA, &hashes).unwrap(), Value::Null);
    }
}
