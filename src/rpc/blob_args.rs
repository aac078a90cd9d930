//! The blob fields of the transactions the node's accounts methods fill in and sign
//! (`eth_sendTransaction`, `eth_signTransaction`, `eth_fillTransaction`), as geth takes them:
//! `blobs`, and optionally their `commitments` and `proofs` (alloy's clients name cell proofs
//! `cellProofs`).
//!
//! alloy's `TransactionRequest` reads these fields into a flattened sidecar that is simply left
//! out when one of them is missing, so a request with blobs alone would become a transaction
//! without them. [`TxArgs`] takes them out first and makes the sidecar itself: with blobs alone
//! the commitments and proofs are computed, in the form the next block's fork publishes (a
//! proof per blob before Osaka, per cell from it on); given, they must belong to the blobs.

use alloy::{
    eips::{
        eip4844::{BlobTransactionSidecar, Bytes48, BYTES_PER_BLOB},
        eip7594::{
            BlobTransactionSidecarEip7594, BlobTransactionSidecarVariant, CELLS_PER_EXT_BLOB,
        },
    },
    primitives::{Bytes, B256},
    rpc::types::TransactionRequest,
};
use revm::primitives::hardfork::SpecId;
use serde::{de::Error as _, Deserialize, Deserializer};
use serde_json::{Map, Value};
use simnode_api::{pool::kzg_settings, RpcError, RpcResult};

/// A transaction request as the accounts methods take it: alloy's request, and the blob
/// fields apart.
#[derive(Debug, Clone)]
pub struct TxArgs {
    pub request: TransactionRequest,
    pub blobs: Option<BlobArgs>,
}

/// The blob fields of a request, as sent.
#[derive(Debug, Clone)]
pub struct BlobArgs {
    blobs: Vec<Bytes>,
    commitments: Option<Vec<Bytes48>>,
    /// A proof per blob (`proofs`) or per cell (`proofs` or `cellProofs`).
    proofs: Option<Vec<Bytes48>>,
}

/// The fields [`BlobArgs`] takes out of a request object.
const BLOB_FIELDS: [&str; 4] = ["blobs", "commitments", "proofs", "cellProofs"];

/// [`BLOB_FIELDS`] as sent.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SentBlobFields {
    blobs: Option<Vec<Bytes>>,
    commitments: Option<Vec<Bytes48>>,
    proofs: Option<Vec<Bytes48>>,
    cell_proofs: Option<Vec<Bytes48>>,
}

impl<'de> Deserialize<'de> for TxArgs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let blob_fields: Map<String, Value> = BLOB_FIELDS
            .iter()
            .filter_map(|name| fields.remove_entry(*name))
            .filter(|(_, value)| !value.is_null())
            .collect();
        let request = TransactionRequest::deserialize(Value::Object(fields.clone()))
            .map_err(|e| D::Error::custom(name_bad_field(&fields, e)))?;
        let blobs = if blob_fields.is_empty() {
            None
        } else {
            let sent = SentBlobFields::deserialize(Value::Object(blob_fields))
                .map_err(|e| D::Error::custom(format!("invalid blob fields: {e}")))?;
            Some(BlobArgs::from_sent(sent).map_err(D::Error::custom)?)
        };
        Ok(Self { request, blobs })
    }
}

/// The request's refusal with the field that caused it named, as the other methods' parameter
/// errors name theirs (`invalid argument 0 (value): ...`). Decoding from a `Value` leaves serde
/// no position to trace back, so each field is tried alone; the request is argument 0 of
/// every method that takes one, and the front door passes a message naming its argument
/// through as it is.
fn name_bad_field(fields: &Map<String, Value>, error: serde_json::Error) -> String {
    let culprit = fields.iter().find_map(|(name, value)| {
        let alone = Map::from_iter([(name.clone(), value.clone())]);
        TransactionRequest::deserialize(Value::Object(alone))
            .err()
            .map(|e| (name, e))
    });
    match culprit {
        Some((name, e)) => format!("invalid argument 0 ({name}): {e}"),
        None => format!("invalid argument 0: {error}"),
    }
}

impl BlobArgs {
    fn from_sent(sent: SentBlobFields) -> Result<Self, String> {
        let Some(blobs) = sent.blobs else {
            return Err(
                "\"commitments\" and \"proofs\" were given without the \"blobs\" they belong to"
                    .into(),
            );
        };
        if let Some(at) = blobs.iter().position(|blob| blob.len() != BYTES_PER_BLOB) {
            return Err(format!(
                "blob {at} is {} bytes, want {BYTES_PER_BLOB}",
                blobs[at].len()
            ));
        }
        let proofs = match (sent.proofs, sent.cell_proofs) {
            (Some(_), Some(_)) => {
                return Err("both \"proofs\" and \"cellProofs\" were given".into())
            }
            (proofs, cell_proofs) => proofs.or(cell_proofs),
        };
        Ok(Self {
            blobs,
            commitments: sent.commitments,
            proofs,
        })
    }

    /// How many blobs were sent.
    pub fn count(&self) -> usize {
        self.blobs.len()
    }

    /// The sidecar the blobs make for a block of fork `spec`, its proofs verified, and its
    /// versioned hashes checked against `hashes` when the request named them; geth's words
    /// where it refuses the same.
    pub fn into_sidecar(
        self,
        hashes: Option<&[B256]>,
        spec: SpecId,
    ) -> RpcResult<BlobTransactionSidecarVariant> {
        let n = self.blobs.len();
        if n == 0 {
            return Err(server("need at least 1 blob for a blob transaction"));
        }
        if let Some(hashes) = hashes {
            if hashes.len() != n {
                return Err(server(format!(
                    "number of blobs and hashes mismatch (have={}, want={n})",
                    hashes.len()
                )));
            }
        }
        let mut blobs = vec![alloy::eips::eip4844::Blob::ZERO; n];
        for (blob, bytes) in blobs.iter_mut().zip(&self.blobs) {
            blob.copy_from_slice(bytes);
        }
        let sidecar = match (self.commitments, self.proofs) {
            (None, None) => computed(blobs, spec)?,
            (None, Some(_)) => {
                return Err(server("blob proofs provided while commitments were not"))
            }
            (Some(_), None) => {
                return Err(server("blob commitments provided while proofs were not"))
            }
            (Some(commitments), Some(proofs)) => {
                if commitments.len() != n {
                    return Err(server(format!(
                        "number of blobs and commitments mismatch (have={}, want={n})",
                        commitments.len()
                    )));
                }
                let sidecar: BlobTransactionSidecarVariant = if proofs.len() == n {
                    BlobTransactionSidecar::new(blobs, commitments, proofs).into()
                } else if proofs.len() == n * CELLS_PER_EXT_BLOB {
                    BlobTransactionSidecarEip7594::new(blobs, commitments, proofs).into()
                } else {
                    return Err(server(format!(
                        "number of blobs and proofs mismatch (have={}, want={n} or {})",
                        proofs.len(),
                        n * CELLS_PER_EXT_BLOB
                    )));
                };
                let own: Vec<B256> = sidecar.versioned_hashes().collect();
                simnode_eth::send::publishable_sidecar(&own, sidecar, spec)?
            }
        };
        if let Some(hashes) = hashes {
            for (have, want) in hashes.iter().zip(sidecar.versioned_hashes()) {
                if *have != want {
                    return Err(server(format!(
                        "blob hash verification failed (have={have}, want={want})"
                    )));
                }
            }
        }
        Ok(sidecar)
    }
}

/// The commitments and proofs of `blobs`, of the form a block of fork `spec` publishes.
fn computed(
    blobs: Vec<alloy::eips::eip4844::Blob>,
    spec: SpecId,
) -> RpcResult<BlobTransactionSidecarVariant> {
    let not_field_elements =
        |err: alloy::eips::eip4844::c_kzg::Error| server(format!("invalid blob: {err:?}"));
    if spec >= SpecId::OSAKA {
        BlobTransactionSidecarEip7594::try_from_blobs_with_settings(blobs, kzg_settings())
            .map(Into::into)
            .map_err(not_field_elements)
    } else {
        BlobTransactionSidecar::try_from_blobs_with_settings(blobs, kzg_settings())
            .map(Into::into)
            .map_err(not_field_elements)
    }
}

fn server(message: impl Into<String>) -> RpcError {
    RpcError::Server(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Result<TxArgs, serde_json::Error> {
        serde_json::from_value(value)
    }

    fn blob_hex(last: u8) -> String {
        format!("0x{}{last:02x}", "00".repeat(BYTES_PER_BLOB - 1))
    }

    fn refused(result: RpcResult<BlobTransactionSidecarVariant>, words: &str) {
        match result {
            Err(RpcError::Server(message)) => assert!(message.contains(words), "{message}"),
            other => panic!("not refused with {words:?}: {other:?}"),
        }
    }

    #[test]
    fn a_bad_field_is_named() {
        let refusal = |value: Value| args(value).expect_err("refused").to_string();
        let m = refusal(
            serde_json::json!({"to": "0x000000000000000000000000000000000000beef", "value": "zz"}),
        );
        assert!(m.starts_with("invalid argument 0 (value): "), "{m}");
        let m = refusal(serde_json::json!({"from": "0xzz"}));
        assert!(m.starts_with("invalid argument 0 (from): "), "{m}");
    }

    #[test]
    fn blob_fields_are_taken_apart_from_the_request() {
        let plain =
            args(serde_json::json!({"to": "0x000000000000000000000000000000000000beef"})).unwrap();
        assert!(plain.blobs.is_none());
        let with_blobs = args(serde_json::json!({
            "to": "0x000000000000000000000000000000000000beef",
            "blobs": [blob_hex(1)],
        }))
        .unwrap();
        assert!(with_blobs.request.sidecar.is_none());
        assert_eq!(with_blobs.blobs.expect("blobs").blobs.len(), 1);

        let err = |value| args(value).unwrap_err().to_string();
        assert!(err(serde_json::json!({"commitments": []})).contains("without the \"blobs\""));
        assert!(err(serde_json::json!({"blobs": ["0x00"]})).contains("blob 0 is 1 bytes"));
        assert!(
            err(serde_json::json!({"blobs": [], "proofs": [], "cellProofs": []}))
                .contains("both \"proofs\" and \"cellProofs\"")
        );
    }

    #[test]
    fn blobs_alone_get_the_forks_commitments_and_proofs() {
        let alone = |spec| {
            args(serde_json::json!({"blobs": [blob_hex(1), blob_hex(2)]}))
                .unwrap()
                .blobs
                .unwrap()
                .into_sidecar(None, spec)
                .expect("blobs of field elements")
        };
        let osaka = alone(SpecId::OSAKA);
        let BlobTransactionSidecarVariant::Eip7594(cells) = &osaka else {
            panic!("cell proofs from Osaka on: {osaka:?}")
        };
        assert_eq!(cells.cell_proofs.len(), 2 * CELLS_PER_EXT_BLOB);
        let prague = alone(SpecId::PRAGUE);
        let BlobTransactionSidecarVariant::Eip4844(per_blob) = &prague else {
            panic!("a proof per blob before Osaka: {prague:?}")
        };
        assert_eq!(per_blob.proofs.len(), 2);
        assert_eq!(per_blob.commitments, cells.commitments);

        // Given back with their commitments and proofs, they are taken as they are.
        let again = |proofs_field: &str, proofs: &[Bytes48], spec| {
            let mut fields = serde_json::json!({
                "blobs": [blob_hex(1), blob_hex(2)],
                "commitments": per_blob.commitments,
            });
            fields[proofs_field] = serde_json::json!(proofs);
            args(fields)
                .unwrap()
                .blobs
                .unwrap()
                .into_sidecar(None, spec)
        };
        assert_eq!(
            again("proofs", &per_blob.proofs, SpecId::PRAGUE).unwrap(),
            prague
        );
        assert_eq!(
            again("cellProofs", &cells.cell_proofs, SpecId::OSAKA).unwrap(),
            osaka
        );
        // A proof per blob on an Osaka chain is converted, as eth_sendRawTransaction does.
        assert_eq!(
            again("proofs", &per_blob.proofs, SpecId::OSAKA).unwrap(),
            osaka
        );
        let swapped = [per_blob.proofs[1], per_blob.proofs[0]];
        refused(
            again("proofs", &swapped, SpecId::PRAGUE),
            "KZG verification error",
        );
        refused(
            again("proofs", &per_blob.proofs[..1], SpecId::PRAGUE),
            "number of blobs and proofs mismatch",
        );
    }

    #[test]
    fn refusals_in_geths_words() {
        let sidecar = |fields: Value, hashes: Option<&[B256]>| {
            args(fields)
                .unwrap()
                .blobs
                .unwrap()
                .into_sidecar(hashes, SpecId::OSAKA)
        };
        refused(
            sidecar(serde_json::json!({"blobs": []}), None),
            "need at least 1 blob",
        );
        let one = serde_json::json!({"blobs": [blob_hex(1)]});
        refused(
            sidecar(one.clone(), Some(&[B256::ZERO, B256::ZERO])),
            "number of blobs and hashes mismatch (have=2, want=1)",
        );
        refused(
            sidecar(one.clone(), Some(&[B256::ZERO])),
            "blob hash verification failed",
        );
        refused(
            sidecar(
                serde_json::json!({"blobs": [blob_hex(1)], "proofs": []}),
                None,
            ),
            "blob proofs provided while commitments were not",
        );
        refused(
            sidecar(
                serde_json::json!({"blobs": [blob_hex(1)], "commitments": []}),
                None,
            ),
            "blob commitments provided while proofs were not",
        );
        // A 32-byte element at or above the field's modulus.
        refused(
            sidecar(
                serde_json::json!({"blobs": [format!("0x{}", "ff".repeat(BYTES_PER_BLOB))]}),
                None,
            ),
            "invalid blob",
        );
    }
}
