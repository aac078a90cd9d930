//! The trie nodes of an execution witness (see `exec::witness`).
//!
//! Like a proof (`proof.rs`), the tries of the parent state are rebuilt from the hashed state
//! tables, retaining nodes on the way to targets. A read walks from the root to the key's leaf,
//! or to where the key is shown absent; geth's witness holds exactly those nodes. A deletion
//! also reads one more node when it leaves a branch with a single child: that child is loaded
//! to be merged into its parent. Nodes whose encoding is shorter than a hash live inside their
//! parent and are never loaded on their own, so they are not listed (the root always is).

use std::collections::{BTreeMap, BTreeSet};

use alloy::primitives::{keccak256, Bytes, B256, U256};
use alloy_trie::{proof::ProofRetainer, HashBuilder, Nibbles, EMPTY_ROOT_HASH};
use simnode_api::StateChanges;

use super::{codec::hash_address, proof::check_storage_root, Store, StoreError};
use crate::exec::witness::Reads;

impl Store {
    /// The nodes of the state after block `number` that `reads`, and then `changes` on top of
    /// that state, make a trie walk through; sorted by their bytes.
    pub fn witness_nodes(
        &self,
        number: u64,
        reads: &Reads,
        changes: &StateChanges,
    ) -> Result<Vec<Bytes>, StoreError> {
        let tables = self.state_tables(number)?;
        let (header, accounts) = (&tables.header, &tables.accounts);

        let mut nodes = BTreeSet::new();
        let read: BTreeSet<B256> = reads.accounts.iter().map(hash_address).collect();
        let deleted: Vec<B256> = changes
            .iter()
            .filter(|(_, change)| change.info.is_none())
            .map(|(address, _)| hash_address(address))
            .collect();
        let created = changes
            .iter()
            .filter(|(_, change)| change.info.is_some())
            .map(|(address, _)| hash_address(address));
        let leaves = accounts
            .iter()
            .map(|(k, a)| (*k, alloy::rlp::encode(a.trie_account())));
        let root = walked_nodes(leaves, &read, &deleted, created, &mut nodes);
        if root != header.state_root {
            return Err(StoreError::StateRoot {
                number,
                expected: header.state_root,
                got: root,
            });
        }

        for (address, slots) in &reads.slots {
            let hashed = hash_address(address);
            let Some(account) = accounts.get(&hashed) else {
                continue;
            };
            if account.storage_root == EMPTY_ROOT_HASH {
                continue;
            }
            let change = changes.get(address);
            // A wiped storage trie is dropped whole, without walking it.
            let written: BTreeMap<B256, U256> = match change {
                Some(c) if !c.wipe_storage && c.info.is_some() => c
                    .storage
                    .iter()
                    .map(|(slot, value)| (slot_key(slot), *value))
                    .collect(),
                _ => BTreeMap::new(),
            };
            let stored = tables.slots(&hashed)?;
            let read: BTreeSet<B256> = slots.iter().map(slot_key).collect();
            let deleted: Vec<B256> = written
                .iter()
                .filter(|(_, v)| v.is_zero())
                .map(|(k, _)| *k)
                .collect();
            let created = written
                .iter()
                .filter(|(_, v)| !v.is_zero())
                .map(|(k, _)| *k);
            let leaves = stored.iter().map(|(k, v)| (*k, alloy::rlp::encode(v)));
            let root = walked_nodes(leaves, &read, &deleted, created, &mut nodes);
            check_storage_root(*address, number, root, account.storage_root)?;
        }
        Ok(nodes.into_iter().collect())
    }
}

fn slot_key(slot: &U256) -> B256 {
    keccak256(slot.to_be_bytes::<32>())
}

/// Builds the trie of `leaves` (ascending keys; the state before the block) and adds to `out`
/// the nodes that reading `read` and then deleting `deleted` (with `created` inserted) walk
/// through. Returns the trie's root.
fn walked_nodes(
    leaves: impl Iterator<Item = (B256, Vec<u8>)>,
    read: &BTreeSet<B256>,
    deleted: &[B256],
    created: impl Iterator<Item = B256>,
    out: &mut BTreeSet<Bytes>,
) -> B256 {
    let leaves: Vec<(B256, Vec<u8>)> = leaves.collect();
    if leaves.is_empty() {
        return EMPTY_ROOT_HASH;
    }
    let before: BTreeSet<B256> = leaves.iter().map(|(k, _)| *k).collect();
    let mut after = before.clone();
    for key in deleted {
        after.remove(key);
    }
    after.extend(created);
    let merged = merged_children(&before, &after, deleted);

    let mut targets: Vec<Nibbles> = read.iter().map(|k| Nibbles::unpack(k)).collect();
    // Any key below a merged child leads the retainer to it.
    targets.extend(
        merged
            .iter()
            .filter_map(|path| first_with_prefix(&before, path).map(|k| Nibbles::unpack(k))),
    );
    let mut hb = HashBuilder::default().with_proof_retainer(ProofRetainer::new(targets));
    for (key, value) in &leaves {
        hb.add_leaf(Nibbles::unpack(key), value);
    }
    let root = hb.root();
    let read_paths: Vec<Nibbles> = read.iter().map(|k| Nibbles::unpack(k)).collect();
    for (path, node) in hb.take_proof_nodes().into_inner() {
        let walked = read_paths.iter().any(|k| k.starts_with(&path)) || merged.contains(&path);
        // Nodes shorter than a hash are part of their parent, never loaded by themselves.
        if walked && (path.is_empty() || node.len() >= 32) {
            out.insert(node);
        }
    }
    root
}

/// The paths of the children that deleting `deleted` leaves alone in their branch: the trie
/// loads each to merge it into the branch's place.
fn merged_children(
    before: &BTreeSet<B256>,
    after: &BTreeSet<B256>,
    deleted: &[B256],
) -> BTreeSet<Nibbles> {
    let mut merged = BTreeSet::new();
    for key in deleted {
        if !before.contains(key) {
            continue;
        }
        // The key's leaf hangs off the deepest branch it shares with a neighbour.
        let shared = |other: Option<&B256>| other.map_or(0, |o| common_nibbles(key, o));
        let below = before.range::<B256, _>(..*key).next_back();
        let above = before.range::<B256, _>(*key..).nth(1);
        let depth = shared(below).max(shared(above));
        if below.is_none() && above.is_none() {
            continue;
        }
        let branch = Nibbles::unpack(key).slice(..depth);
        let mut children = BTreeSet::new();
        for k in keys_with_prefix(after, &branch) {
            children.insert(Nibbles::unpack(k).get_unchecked(depth));
            if children.len() > 1 {
                break;
            }
        }
        if let (1, Some(&only)) = (children.len(), children.first()) {
            let mut child = branch;
            child.push(only);
            merged.insert(child);
        }
    }
    merged
}

fn common_nibbles(a: &B256, b: &B256) -> usize {
    Nibbles::unpack(a).common_prefix_length(&Nibbles::unpack(b))
}

/// The keys of `set` under the nibble path `prefix`, ascending.
fn keys_with_prefix<'a>(
    set: &'a BTreeSet<B256>,
    prefix: &Nibbles,
) -> impl Iterator<Item = &'a B256> + 'a {
    let mut low = [0u8; 32];
    for (i, nibble) in prefix.to_vec().into_iter().enumerate() {
        low[i / 2] |= if i % 2 == 0 { nibble << 4 } else { nibble };
    }
    let prefix = *prefix;
    set.range(B256::from(low)..)
        .take_while(move |k| Nibbles::unpack(k).starts_with(&prefix))
}

fn first_with_prefix<'a>(set: &'a BTreeSet<B256>, prefix: &Nibbles) -> Option<&'a B256> {
    keys_with_prefix(set, prefix).next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(hex_prefix: &str) -> B256 {
        let mut bytes = [0u8; 32];
        let raw = alloy::primitives::hex::decode(hex_prefix).unwrap();
        bytes[..raw.len()].copy_from_slice(&raw);
        B256::from(bytes)
    }

    #[test]
    fn deleting_one_of_two_children_merges_the_other() {
        let before: BTreeSet<B256> = [key("10"), key("1f"), key("20")].into();
        let mut after = before.clone();
        after.remove(&key("1f"));
        let merged = merged_children(&before, &after, &[key("1f")]);
        assert_eq!(merged, [Nibbles::from_nibbles([1, 0])].into());
        // Two children left: nothing to merge.
        let before: BTreeSet<B256> = [key("10"), key("15"), key("1f")].into();
        let mut after = before.clone();
        after.remove(&key("1f"));
        assert!(merged_children(&before, &after, &[key("1f")]).is_empty());
        // The last key of a trie: the trie is empty after.
        let only: BTreeSet<B256> = [key("10")].into();
        assert!(merged_children(&only, &BTreeSet::new(), &[key("10")]).is_empty());
    }

    #[test]
    fn a_read_walks_the_nodes_of_its_proof() {
        let leaves: Vec<(B256, Vec<u8>)> = (0u8..40)
            .map(|i| (keccak256([i]), alloy::rlp::encode(U256::from(i) << 200)))
            .collect();
        let mut sorted = leaves.clone();
        sorted.sort();
        let target = keccak256([7u8]);
        let mut out = BTreeSet::new();
        let root = walked_nodes(
            sorted.clone().into_iter(),
            &[target].into(),
            &[],
            std::iter::empty(),
            &mut out,
        );
        let mut hb = HashBuilder::default()
            .with_proof_retainer(ProofRetainer::new(vec![Nibbles::unpack(target)]));
        for (k, v) in &sorted {
            hb.add_leaf(Nibbles::unpack(k), v);
        }
        assert_eq!(hb.root(), root);
        let proof: BTreeSet<Bytes> = hb
            .take_proof_nodes()
            .matching_nodes(&Nibbles::unpack(target))
            .into_iter()
            .map(|(_, n)| n)
            .filter(|n| n.len() >= 32)
            .collect();
        assert!(!proof.is_empty());
        assert_eq!(out, proof);
    }
}
