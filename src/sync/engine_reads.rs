//! What a consensus client reads from the node over the Engine API without changing the chain:
//! the bodies of execution payloads (`engine_getPayloadBodiesByHashV1` / `ByRangeV1`, which a
//! beacon node that stores blinded blocks uses to serve full ones to its peers) and the
//! client's identity (`engine_getClientVersionV1`, for graffiti and client-diversity counts).

use alloy::{primitives::B256, rpc::types::engine::ExecutionPayloadBodyV1};
use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

/// The most payload bodies one request may ask for (geth's limit; the spec asks for at least
/// 32). More is -38004.
pub const MAX_PAYLOAD_BODIES: u64 = 1024;

/// Two letters no client in the spec's list uses (`_spec/src/engine/identification.md`).
pub const CLIENT_CODE: &str = "SN";

fn too_large(asked: u64) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(
        -38004,
        format!(
            "Too large request: {asked} payload bodies asked for, at most {MAX_PAYLOAD_BODIES}"
        ),
        None::<()>,
    )
}

fn internal(err: StoreError) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32603, err.to_string(), None::<()>)
}

/// The bodies of the blocks `hashes` name, in their order: canonical blocks and the side
/// blocks kept from earlier payloads; `None` for a block the node does not have.
pub fn bodies_by_hash(
    store: &Store,
    hashes: &[B256],
) -> Result<Vec<Option<ExecutionPayloadBodyV1>>, ErrorObjectOwned> {
    if hashes.len() as u64 > MAX_PAYLOAD_BODIES {
        return Err(too_large(hashes.len() as u64));
    }
    hashes
        .iter()
        .map(|hash| {
            let body = match store.number_of(hash).map_err(internal)? {
                Some(number) => store.body(number).map_err(internal)?,
                None => store.side_block(hash).map_err(internal)?.map(|(_, b)| b),
            };
            Ok(body.map(|b| ExecutionPayloadBodyV1::new(b.withdrawals, &b.transactions)))
        })
        .collect()
}

/// The bodies of canonical blocks `start .. start + count`, ending at the head: a range past
/// the head is cut there rather than padded with nulls, as the spec asks.
pub fn bodies_by_range(
    store: &Store,
    start: u64,
    count: u64,
) -> Result<Vec<Option<ExecutionPayloadBodyV1>>, ErrorObjectOwned> {
    if start == 0 || count == 0 {
        return Err(ErrorObjectOwned::owned(
            -32602,
            format!("Invalid params: start ({start}) and count ({count}) must be at least 1"),
            None::<()>,
        ));
    }
    if count > MAX_PAYLOAD_BODIES {
        return Err(too_large(count));
    }
    // The canonical chain as the consensus client named it: a payload still waiting for its
    // forkchoice is found by hash only.
    let last = start.saturating_add(count - 1).min(store.served_head());
    (start..=last)
        .map(|number| {
            let body = store.body(number).map_err(internal)?;
            Ok(body.map(|b| ExecutionPayloadBodyV1::new(b.withdrawals, &b.transactions)))
        })
        .collect()
}

/// `ClientVersionV1`. alloy's type holds only the client codes it knows, and the spec asks
/// every client to accept any two letters, so the node reads and writes its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientVersion {
    pub code: String,
    pub name: String,
    pub version: String,
    pub commit: String,
}

impl ClientVersion {
    /// This build of simnode: the commit is the first four bytes of the git commit it was built
    /// from (zeros when it was built outside a git checkout).
    pub fn this_node() -> Self {
        Self {
            code: CLIENT_CODE.into(),
            name: "simnode".into(),
            version: format!("v{}", env!("CARGO_PKG_VERSION")),
            commit: format!("0x{}", env!("SIMNODE_GIT_COMMIT")),
        }
    }
}

#[cfg(test)]
mod tests {
    use alloy::{consensus::BlockBody, eips::eip2718::Encodable2718};

    use super::*;
    use crate::store::scratch::ScratchStore;

    fn open(tag: &str) -> ScratchStore {
        ScratchStore::open(tag, &crate::chain::dev_genesis())
    }

    fn expected(body: &BlockBody<alloy::consensus::TxEnvelope>) -> ExecutionPayloadBodyV1 {
        ExecutionPayloadBodyV1 {
            transactions: body
                .transactions
                .iter()
                .map(|t| t.encoded_2718().into())
                .collect(),
            withdrawals: body.withdrawals.clone().map(|w| w.into_inner()),
        }
    }

    #[test]
    fn bodies_by_range_stop_at_the_head_and_refuse_empty_or_huge_ranges() {
        let store = open("bodies-range");
        let t0 = store.head_header().unwrap().timestamp;
        let mut blocks = Vec::new();
        for i in 1..=3 {
            blocks.push(crate::sync::dev::build_block(&store, &[], t0 + 12 * i).unwrap());
        }
        let all = bodies_by_range(&store, 1, 10).unwrap();
        assert_eq!(all.len(), 3, "no trailing nulls past the head");
        for (got, block) in all.iter().zip(&blocks) {
            assert_eq!(got.as_ref(), Some(&expected(&block.body)));
        }
        assert_eq!(bodies_by_range(&store, 2, 1).unwrap().len(), 1);
        assert!(bodies_by_range(&store, 4, 5).unwrap().is_empty());
        // The end of a range near u64::MAX must not overflow.
        assert!(bodies_by_range(&store, u64::MAX, 1).unwrap().is_empty());
        assert_eq!(bodies_by_range(&store, 0, 1).unwrap_err().code(), -32602);
        assert_eq!(bodies_by_range(&store, 1, 0).unwrap_err().code(), -32602);
        assert_eq!(
            bodies_by_range(&store, 1, MAX_PAYLOAD_BODIES + 1)
                .unwrap_err()
                .code(),
            -38004
        );
        assert_eq!(
            bodies_by_range(&store, 1, MAX_PAYLOAD_BODIES)
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn bodies_by_hash_include_side_blocks_and_null_unknown_ones() {
        let store = open("bodies-hash");
        let other = open("bodies-hash-side");
        let t0 = store.head_header().unwrap().timestamp;
        let canonical = crate::sync::dev::build_block(&store, &[], t0 + 12).unwrap();
        // A competing block 1, known to the node only as a side block.
        let side = crate::sync::dev::build_block(&other, &[], t0 + 13).unwrap();
        store.put_side_block(&side.header, &side.body).unwrap();
        assert_ne!(canonical.header.hash(), side.header.hash());

        let got = bodies_by_hash(
            &store,
            &[
                side.header.hash(),
                B256::repeat_byte(7),
                canonical.header.hash(),
            ],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                Some(expected(&side.body)),
                None,
                Some(expected(&canonical.body))
            ]
        );
        let too_many = vec![B256::ZERO; MAX_PAYLOAD_BODIES as usize + 1];
        assert_eq!(
            bodies_by_hash(&store, &too_many).unwrap_err().code(),
            -38004
        );
    }

    #[test]
    fn the_client_version_is_two_letters_and_a_four_byte_commit() {
        let v = ClientVersion::this_node();
        assert_eq!(v.code.len(), 2);
        assert_eq!(v.name, "simnode");
        let commit = v.commit.strip_prefix("0x").expect("hex");
        assert_eq!(commit.len(), 8, "{}", v.commit);
        assert!(commit.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
