//! State roots of blocks built on top of the head, without rebuilding the head's tries.
//!
//! `eth_simulateV1` computes the state root of every simulated block: the head state plus a
//! handful of changes. [`super::trie::state_root`] rebuilds the whole account trie from every
//! stored account and the whole storage trie of every changed account (the EIP-4788 and EIP-2935
//! system contracts change in every block and their storage only grows), which made the root the
//! largest cost of a simulation.
//!
//! Here the head state's account trie (and, lazily, the storage trie of each account a
//! simulation changes) is built once, keeping the reference (hash or inline RLP) of the node at
//! every path. A root with changes then walks only the paths the changes touch; every subtree
//! without a change is answered from the cache. The roots are the real ones: the node at a path is
//! a function of the keys under that path alone, so an unchanged subtree has the same node.
//!
//! The cache is keyed by the head block's hash (a reorg to another block of the same number gets
//! its own entry) and holds the last few heads. Bases below the head take the uncached path.

use std::{
    cell::OnceCell,
    collections::{btree_map::Entry, BTreeMap},
    ops::Range,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex, RwLock,
    },
};

use alloy::rlp::Decodable;
use alloy::{
    eips::{eip2935, eip4788, eip7002, eip7251},
    primitives::{keccak256, map::HashMap, Address, B256, U256},
};
use alloy_trie::{
    nodes::{BranchNodeRef, ExtensionNodeRef, LeafNodeRef, RlpNode},
    Nibbles, TrieAccount, TrieMask, EMPTY_ROOT_HASH,
};
use simnode_api::{AccountChange, RootCarry, StateChanges};

#[cfg(doc)]
use super::hashed_overlay;
use super::{
    codec::{hash_address, hash_slot, StoredAccount},
    trie::{self, EmptySource, HashedOverlay, RootOutput, StateSource, StorageOverlay},
    Store, StoreError, TableSource, ACCOUNTS, STORAGE,
};

/// A stored state the tries are built from (a read or a write transaction's tables).
pub(crate) trait Source: StateSource<Error = StoreError> {}
impl<S: StateSource<Error = StoreError>> Source for S {}

/// Heads kept (the current one and a few before it, for requests still running on them).
const HEADS_KEPT: usize = 3;
/// Storage tries larger than this are not kept (built for the request and dropped).
const MAX_CACHED_SLOTS: usize = 200_000;

/// Storage slots the kept storage tries of a head may hold together, by default. A kept slot
/// costs about 120 bytes (its key, its value and its share of the nodes above it; measured on
/// tries of 400,000 slots), so about 120 MB.
pub const DEFAULT_STORAGE_SLOTS_KEPT: usize = 1_000_000;

static STORAGE_SLOTS_KEPT: AtomicUsize = AtomicUsize::new(DEFAULT_STORAGE_SLOTS_KEPT);

/// Sets how many storage slots the kept storage tries of a head may hold together
/// (`--cache.storage-slots`); past it the least recently used tries are dropped, to be built
/// again from the tables when a root needs them. Heads cached from then on take it.
pub fn set_storage_slots_kept(slots: usize) {
    STORAGE_SLOTS_KEPT.store(slots, Ordering::Relaxed);
}

/// Orders the uses of kept storage tries (a clock that only counts).
static STORAGE_USES: AtomicU64 = AtomicU64::new(0);

/// (path bits, path length in nibbles): the nibbles of the path, the rest zero.
type PathKey = (B256, u8);
type NodeMap = HashMap<PathKey, RlpNode>;

/// A trie over sorted leaves, with the node reference at every path the build produced.
#[derive(Debug, Default, Clone)]
pub(crate) struct CachedTrie {
    keys: Vec<B256>,
    /// RLP of each leaf's value.
    values: Vec<Vec<u8>>,
    nodes: NodeMap,
    /// No node of `nodes` starts deeper than this (in nibbles): how far down a changed key's
    /// path [`CachedTrie::apply`] has to drop nodes.
    deepest: u8,
    root: B256,
}

/// A change of one leaf: `None` removes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeafChange<'a> {
    pub key: B256,
    pub value: Option<&'a [u8]>,
    /// Whether subtrees holding no other kind of change go into the [`SubtreeMemo`].
    pub memoizable: bool,
}

/// A change with whether its key is a leaf of the base trie.
#[derive(Clone, Copy)]
struct Change<'a> {
    key: B256,
    value: Option<&'a [u8]>,
    in_base: bool,
    memoizable: bool,
}

/// The changes a memoized subtree was computed with (key, new leaf value).
type MemoChanges = Vec<(B256, Option<Vec<u8>>)>;
/// The node computed for those changes (`None`: nothing left under the path).
type Variants = Vec<(MemoChanges, Option<RlpNode>)>;

/// Variants kept per path (a request overriding the block number or time gives the system
/// contracts other writes).
const VARIANTS_PER_PATH: usize = 8;
/// Paths kept per head.
const MEMO_PATHS: usize = 4096;

/// Nodes of subtrees whose only changes are memoizable ones, for the exact changes each was
/// computed with. The system contracts (EIP-2935, 4788, 7002, 7251) get the same writes in
/// every simulated block on a head that keeps the default number and time, so the subtrees
/// holding only their leaves are the same in every such simulation; only the paths of the
/// request's own changes need hashing again. A node is a function of the base trie and the
/// changes below its path, so an entry is reused only for equal changes.
#[derive(Debug, Default)]
pub(crate) struct SubtreeMemo {
    nodes: RwLock<HashMap<PathKey, Variants>>,
}

impl SubtreeMemo {
    fn get(&self, path: &PathKey, changes: &[Change<'_>]) -> Option<Option<RlpNode>> {
        let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        nodes
            .get(path)?
            .iter()
            .find(|(known, _)| same_changes(known, changes))
            .map(|(_, node)| node.clone())
    }

    fn insert(&self, path: PathKey, changes: &[Change<'_>], node: Option<RlpNode>) {
        let mut nodes = self.nodes.write().unwrap_or_else(|e| e.into_inner());
        if nodes.len() >= MEMO_PATHS && !nodes.contains_key(&path) {
            return;
        }
        let variants = nodes.entry(path).or_default();
        if variants
            .iter()
            .any(|(known, _)| same_changes(known, changes))
        {
            return;
        }
        if variants.len() >= VARIANTS_PER_PATH {
            variants.remove(0);
        }
        variants.push((owned_changes(changes), node));
    }
}

/// A leaf one carried trie changes against its base trie.
#[derive(Debug)]
struct CarriedLeaf {
    /// RLP of the new value (`None`: deleted).
    value: Option<Vec<u8>>,
    in_base: bool,
    memoizable: bool,
}

/// Nodes computed by earlier roots of a run, by path. Every one kept still holds: changing a
/// leaf drops the nodes on its path.
#[derive(Debug, Default)]
struct CarriedNodes {
    nodes: HashMap<PathKey, Option<RlpNode>>,
    /// No kept node starts deeper than this (in nibbles).
    deepest: u8,
}

impl CarriedNodes {
    fn insert(&mut self, path: PathKey, node: Option<RlpNode>) {
        self.deepest = self.deepest.max(path.1);
        self.nodes.insert(path, node);
    }

    /// Drops every node whose subtree holds `key`.
    fn drop_path(&mut self, key: &B256) {
        for depth in 0..=usize::from(self.deepest) {
            self.nodes.remove(&path_key(key, depth));
        }
    }
}

/// The changes of one trie across a run of roots on the same base trie (a simulation's blocks,
/// a pre-Byzantium block's transactions), with the nodes computed for them. A node is a
/// function of the base trie and the changes under its path, so when a root follows a few moved
/// leaves, only the paths of those are hashed again, however many leaves the run changed.
#[derive(Debug, Default)]
pub(crate) struct TrieCarry {
    /// Every leaf that differs from the base trie.
    leaves: BTreeMap<B256, CarriedLeaf>,
    nodes: CarriedNodes,
}

impl TrieCarry {
    /// Makes leaf `key` hold `value` (`None`: absent) on top of `base`.
    fn set(&mut self, base: &CachedTrie, key: B256, value: Option<Vec<u8>>, memoizable: bool) {
        let base_value = base.value(&key);
        let moved = if value.as_deref() == base_value {
            self.leaves.remove(&key).is_some()
        } else {
            match self.leaves.entry(key) {
                Entry::Vacant(entry) => {
                    entry.insert(CarriedLeaf {
                        value,
                        in_base: base_value.is_some(),
                        memoizable,
                    });
                    true
                }
                Entry::Occupied(mut entry) if entry.get().value != value => {
                    entry.get_mut().value = value;
                    true
                }
                Entry::Occupied(_) => false,
            }
        };
        if moved {
            self.nodes.drop_path(&key);
        }
    }

    /// Makes the changed leaves exactly `values` (ascending keys): the others return to `base`.
    fn set_all(&mut self, base: &CachedTrie, values: &[(B256, Option<Vec<u8>>)]) {
        let back: Vec<B256> = self
            .leaves
            .keys()
            .filter(|k| values.binary_search_by(|(key, _)| key.cmp(k)).is_err())
            .copied()
            .collect();
        for key in back {
            self.leaves.remove(&key);
            self.nodes.drop_path(&key);
        }
        for (key, value) in values {
            self.set(base, *key, value.clone(), false);
        }
    }
}

/// What [`Store::state_root_carried`] keeps in a [`RootCarry`]: the carried account trie and
/// storage tries, for the head they were computed on.
#[derive(Debug, Default)]
struct SimulationCarry {
    head: B256,
    accounts: TrieCarry,
    storage: HashMap<B256, TrieCarry>,
}

fn owned_changes(changes: &[Change<'_>]) -> MemoChanges {
    changes
        .iter()
        .map(|c| (c.key, c.value.map(<[u8]>::to_vec)))
        .collect()
}

fn same_changes(known: &MemoChanges, changes: &[Change<'_>]) -> bool {
    known.len() == changes.len()
        && known
            .iter()
            .zip(changes)
            .all(|((key, value), c)| *key == c.key && value.as_deref() == c.value)
}

impl CachedTrie {
    /// Builds the trie of `leaves` (ascending keys, unique).
    pub(crate) fn build(leaves: Vec<(B256, Vec<u8>)>) -> Self {
        let (keys, values): (Vec<_>, Vec<_>) = leaves.into_iter().unzip();
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let mut walk = Walk {
            keys: &keys,
            values: &values,
            changes: &[],
            cache: None,
            memo: None,
            carry: None,
            record: Some(NodeMap::default()),
            buf: Vec::with_capacity(600),
        };
        let root = walk.node(0, 0..keys.len(), 0..0);
        let nodes = walk.record.take().unwrap_or_default();
        let root = root_hash(root);
        Self {
            keys,
            values,
            deepest: deepest(&nodes),
            nodes,
            root,
        }
    }

    pub(crate) fn root(&self) -> B256 {
        self.root
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The RLP value of leaf `key`, if there is one.
    fn value(&self, key: &B256) -> Option<&[u8]> {
        self.position(key).map(|i| self.values[i].as_slice())
    }

    /// Index of `key` among the leaves.
    fn position(&self, key: &B256) -> Option<usize> {
        self.keys.binary_search(key).ok()
    }

    /// The root with `changes` (ascending keys, unique) applied; subtrees with only
    /// memoizable changes come from and go to `memo` when there is one.
    pub(crate) fn root_with(&self, changes: &[LeafChange<'_>], memo: Option<&SubtreeMemo>) -> B256 {
        if changes.is_empty() {
            return self.root;
        }
        debug_assert!(changes.windows(2).all(|w| w[0].key < w[1].key));
        let changes: Vec<Change<'_>> = changes
            .iter()
            .map(|c| Change {
                key: c.key,
                value: c.value,
                in_base: self.position(&c.key).is_some(),
                memoizable: c.memoizable,
            })
            .collect();
        self.walk_root(&changes, memo, None)
    }

    /// The root with `carry`'s changes applied, reusing and keeping its nodes.
    fn root_carried(&self, carry: &mut TrieCarry, memo: Option<&SubtreeMemo>) -> B256 {
        if carry.leaves.is_empty() {
            return self.root;
        }
        let changes: Vec<Change<'_>> = carry
            .leaves
            .iter()
            .map(|(key, leaf)| Change {
                key: *key,
                value: leaf.value.as_deref(),
                in_base: leaf.in_base,
                memoizable: leaf.memoizable,
            })
            .collect();
        self.walk_root(&changes, memo, Some(&mut carry.nodes))
    }

    fn walk_root(
        &self,
        changes: &[Change<'_>],
        memo: Option<&SubtreeMemo>,
        carry: Option<&mut CarriedNodes>,
    ) -> B256 {
        let mut walk = Walk {
            keys: &self.keys,
            values: &self.values,
            changes,
            cache: Some(&self.nodes),
            memo,
            carry,
            record: None,
            buf: Vec::with_capacity(600),
        };
        root_hash(walk.node(0, 0..self.keys.len(), 0..changes.len()))
    }

    /// Applies `changes` (ascending keys, unique), keeping every cached node whose subtree the
    /// changes leave alone: a node is a function of the keys under its path, so only the nodes
    /// on the paths of changed keys are dropped and hashed again.
    pub(crate) fn apply(&mut self, changes: &[LeafChange<'_>]) {
        debug_assert!(changes.windows(2).all(|w| w[0].key < w[1].key));
        merge_leaves(
            &mut self.keys,
            &mut self.values,
            changes.iter().map(|c| (c.key, c.value.map(<[u8]>::to_vec))),
        );
        for change in changes {
            for depth in 0..=usize::from(self.deepest) {
                self.nodes.remove(&path_key(&change.key, depth));
            }
        }
        let mut walk = Walk {
            keys: &self.keys,
            values: &self.values,
            changes: &[],
            cache: Some(&self.nodes),
            memo: None,
            carry: None,
            record: Some(NodeMap::default()),
            buf: Vec::with_capacity(600),
        };
        let root = root_hash(walk.node(0, 0..self.keys.len(), 0..0));
        let fresh = walk.record.take().unwrap_or_default();
        self.deepest = self.deepest.max(deepest(&fresh));
        self.nodes.extend(fresh);
        self.root = root;
    }
}

fn deepest(nodes: &NodeMap) -> u8 {
    nodes.keys().map(|(_, depth)| *depth).max().unwrap_or(0)
}

fn root_hash(node: Option<RlpNode>) -> B256 {
    match node {
        None => EMPTY_ROOT_HASH,
        Some(n) => n.as_hash().unwrap_or_else(|| keccak256(n.as_slice())),
    }
}

fn nibble(key: &B256, i: usize) -> u8 {
    let byte = key[i / 2];
    if i.is_multiple_of(2) {
        byte >> 4
    } else {
        byte & 0x0f
    }
}

fn path_key(key: &B256, depth: usize) -> PathKey {
    let mut p = *key;
    let full = depth / 2;
    if depth % 2 == 1 {
        p[full] &= 0xf0;
        p[full + 1..].fill(0);
    } else {
        p[full..].fill(0);
    }
    (p, depth as u8)
}

/// Number of equal nibbles of `a` and `b` from `depth` on.
fn common_nibbles(a: &B256, b: &B256, depth: usize) -> usize {
    let mut n = 0;
    while depth + n < 64 && nibble(a, depth + n) == nibble(b, depth + n) {
        n += 1;
    }
    n
}

/// The sub-range of `range` where `cmp` is `Equal` (`cmp` is ascending over the range).
fn narrow(range: Range<usize>, cmp: impl Fn(usize) -> std::cmp::Ordering) -> Range<usize> {
    use std::cmp::Ordering;
    let (start, end) = (range.start, range.end);
    let lo = start + partition(end - start, |i| cmp(start + i) == Ordering::Less);
    let hi = start + partition(end - start, |i| cmp(start + i) != Ordering::Greater);
    lo..hi
}

/// The first `i` in `0..len` where `pred` is false (`pred` is true then false).
fn partition(len: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

struct Walk<'a> {
    keys: &'a [B256],
    values: &'a [Vec<u8>],
    changes: &'a [Change<'a>],
    /// Nodes of the base trie (when computing with changes).
    cache: Option<&'a NodeMap>,
    memo: Option<&'a SubtreeMemo>,
    /// Nodes of the same run's earlier roots.
    carry: Option<&'a mut CarriedNodes>,
    /// Collects every node (when building the base trie).
    record: Option<NodeMap>,
    buf: Vec<u8>,
}

impl<'a> Walk<'a> {
    /// Whether the change list deletes base leaf `i` (within the change range `c`).
    fn deleted(&self, i: usize, c: &Range<usize>) -> bool {
        let key = self.keys[i];
        let changes = &self.changes[c.clone()];
        match changes.binary_search_by(|ch| ch.key.cmp(&key)) {
            Ok(j) => changes[j].value.is_none(),
            Err(_) => false,
        }
    }

    /// The value of a key present after the changes (base leaf or change).
    fn first_leaf(&self, b: &Range<usize>, c: &Range<usize>) -> Option<(B256, &'a [u8])> {
        let base = b
            .clone()
            .find(|&i| !self.deleted(i, c))
            .map(|i| (self.keys[i], self.values[i].as_slice()));
        let change = self.changes[c.clone()]
            .iter()
            .find_map(|ch| ch.value.map(|v| (ch.key, v)));
        match (base, change) {
            (Some(x), Some(y)) => Some(if y.0 <= x.0 { y } else { x }),
            (x, y) => x.or(y),
        }
    }

    fn last_key(&self, b: &Range<usize>, c: &Range<usize>) -> Option<B256> {
        let base = b
            .clone()
            .rev()
            .find(|&i| !self.deleted(i, c))
            .map(|i| self.keys[i]);
        let change = self.changes[c.clone()]
            .iter()
            .rev()
            .find_map(|ch| ch.value.map(|_| ch.key));
        match (base, change) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        }
    }

    /// The node holding every key (base leaves `b`, changes `c`) under the path of length
    /// `depth` they share; `None` when no key is left.
    fn node(&mut self, depth: usize, b: Range<usize>, c: Range<usize>) -> Option<RlpNode> {
        if c.is_empty() {
            if b.is_empty() {
                return None;
            }
            if let Some(cache) = self.cache {
                if let Some(n) = cache.get(&path_key(&self.keys[b.start], depth)) {
                    return Some(n.clone());
                }
            }
        }
        if self.carry.is_none() || c.is_empty() {
            return self.node_uncarried(depth, b, c);
        }
        let path = path_key(&self.changes[c.start].key, depth);
        if let Some(known) = self
            .carry
            .as_deref()
            .and_then(|carry| carry.nodes.get(&path))
        {
            return known.clone();
        }
        let node = self.node_uncarried(depth, b, c);
        if let Some(carry) = self.carry.as_deref_mut() {
            carry.insert(path, node.clone());
        }
        node
    }

    /// [`Walk::node`] past the base cache, without the carry.
    fn node_uncarried(
        &mut self,
        depth: usize,
        b: Range<usize>,
        c: Range<usize>,
    ) -> Option<RlpNode> {
        let memo = self
            .memo
            .filter(|_| !c.is_empty() && self.changes[c.clone()].iter().all(|ch| ch.memoizable));
        let Some(memo) = memo else {
            return self.compute(depth, b, c);
        };
        let path = path_key(&self.changes[c.start].key, depth);
        if let Some(known) = memo.get(&path, &self.changes[c.clone()]) {
            return known;
        }
        let node = self.compute(depth, b, c.clone());
        memo.insert(path, &self.changes[c], node.clone());
        node
    }

    /// [`Walk::node`] without the lookups.
    fn compute(&mut self, depth: usize, b: Range<usize>, c: Range<usize>) -> Option<RlpNode> {
        let mut count = b.len() as isize;
        for ch in &self.changes[c.clone()] {
            match (ch.value.is_some(), ch.in_base) {
                (true, false) => count += 1,
                (false, true) => count -= 1,
                _ => {}
            }
        }
        if count <= 0 {
            return None;
        }
        let (first, first_value) = self.first_leaf(&b, &c)?;
        let node = if count == 1 {
            let rest = Nibbles::unpack(first).slice(depth..);
            self.buf.clear();
            LeafNodeRef::new(&rest, first_value).rlp(&mut self.buf)
        } else {
            let last = self.last_key(&b, &c)?;
            let shared = common_nibbles(&first, &last, depth);
            if shared > 0 {
                // Keys outside the shared path can only be deleted ones; leave them out so
                // that the ranges below stay sorted by their next nibble.
                let path = path_key(&first, depth + shared);
                let len = depth + shared;
                let b2 = narrow(b.clone(), |i| path_key(&self.keys[i], len).cmp(&path));
                let c2 = narrow(c.clone(), |i| {
                    path_key(&self.changes[i].key, len).cmp(&path)
                });
                let child = self.node(depth + shared, b2, c2)?;
                let ext = Nibbles::unpack(first).slice(depth..depth + shared);
                self.buf.clear();
                ExtensionNodeRef::new(&ext, &child).rlp(&mut self.buf)
            } else {
                let mut stack: Vec<RlpNode> = Vec::with_capacity(16);
                let mut mask = TrieMask::default();
                let (mut bi, mut ci) = (b.start, c.start);
                for n in 0..16u8 {
                    let bj = bi + self.keys[bi..b.end].partition_point(|k| nibble(k, depth) <= n);
                    let cj = ci
                        + self.changes[ci..c.end].partition_point(|ch| nibble(&ch.key, depth) <= n);
                    if bi < bj || ci < cj {
                        if let Some(child) = self.node(depth + 1, bi..bj, ci..cj) {
                            stack.push(child);
                            mask.set_bit(n);
                        }
                    }
                    bi = bj;
                    ci = cj;
                }
                self.buf.clear();
                BranchNodeRef::new(&stack, mask).rlp(&mut self.buf)
            }
        };
        if let Some(record) = &mut self.record {
            if !b.is_empty() {
                record.insert(path_key(&self.keys[b.start], depth), node.clone());
            }
        }
        Some(node)
    }
}

/// What every simulation on one head shares.
#[derive(Debug)]
struct HeadTries {
    hash: B256,
    accounts: CachedTrie,
    /// Storage tries by hashed address, built when a block or a simulation first changes the
    /// account.
    storage: RwLock<StorageTries>,
    /// Recent storage roots by account and exact slot changes: the system contracts get the
    /// same writes in every simulation on this head that keeps the default block fields.
    storage_roots: Mutex<HashMap<B256, Vec<(SlotChanges, B256)>>>,
    /// Account subtrees changed only by the system contracts.
    system_subtrees: SubtreeMemo,
}

/// The storage tries a head keeps, at most `budget` slots in all: every block and every
/// simulation that writes an account's storage would otherwise leave its trie here for good,
/// and the next head inherits them, so a long-running node (or requests simulating writes to
/// many contracts) would grow without limit.
#[derive(Debug, Clone)]
struct StorageTries {
    tries: HashMap<B256, KeptTrie>,
    /// [`weight`]s of all of `tries`.
    slots: usize,
    budget: usize,
    /// Tries dropped for the budget so far (on this head and the heads it came from).
    dropped: u64,
}

#[derive(Debug)]
struct KeptTrie {
    trie: Arc<CachedTrie>,
    /// [`STORAGE_USES`] at its last use.
    last_used: AtomicU64,
}

impl Clone for KeptTrie {
    fn clone(&self) -> Self {
        Self {
            trie: self.trie.clone(),
            last_used: AtomicU64::new(self.last_used.load(Ordering::Relaxed)),
        }
    }
}

fn next_use() -> u64 {
    STORAGE_USES.fetch_add(1, Ordering::Relaxed)
}

/// The slots a kept trie counts for: its leaves, and one for an empty trie (an account without
/// storage that a simulation writes to), so that empty tries cannot pile up outside the budget.
fn weight(trie: &CachedTrie) -> usize {
    trie.len().max(1)
}

impl StorageTries {
    fn new(budget: usize) -> Self {
        Self {
            tries: HashMap::default(),
            slots: 0,
            budget,
            dropped: 0,
        }
    }

    /// The trie of account `hashed`, if kept (which counts as a use).
    fn get(&self, hashed: &B256) -> Option<Arc<CachedTrie>> {
        let kept = self.tries.get(hashed)?;
        kept.last_used.store(next_use(), Ordering::Relaxed);
        Some(kept.trie.clone())
    }

    /// The root of account `hashed`'s trie, if kept (not a use: advancing a head checks it).
    fn root_of(&self, hashed: &B256) -> Option<B256> {
        self.tries.get(hashed).map(|kept| kept.trie.root())
    }

    /// Keeps `trie` as account `hashed`'s, unless it is too large to keep. Past the budget the
    /// least recently used tries are dropped down to nine tenths of it, so that a run of
    /// inserts at the limit (a block's) does not sort the tries for each one.
    fn insert(&mut self, hashed: B256, trie: Arc<CachedTrie>) {
        self.remove(&hashed);
        if weight(&trie) > MAX_CACHED_SLOTS.min(self.budget) {
            return;
        }
        self.slots += weight(&trie);
        self.tries.insert(
            hashed,
            KeptTrie {
                trie,
                last_used: AtomicU64::new(next_use()),
            },
        );
        if self.slots > self.budget {
            self.trim_to(self.budget - self.budget / 10);
        }
    }

    fn remove(&mut self, hashed: &B256) -> Option<Arc<CachedTrie>> {
        let kept = self.tries.remove(hashed)?;
        self.slots -= weight(&kept.trie);
        Some(kept.trie)
    }

    /// Drops the least recently used tries until at most `slots` are left.
    fn trim_to(&mut self, slots: usize) {
        let mut by_age: Vec<(u64, B256)> = self
            .tries
            .iter()
            .map(|(hashed, kept)| (kept.last_used.load(Ordering::Relaxed), *hashed))
            .collect();
        by_age.sort_unstable();
        for (_, hashed) in by_age {
            if self.slots <= slots {
                break;
            }
            self.remove(&hashed);
            self.dropped += 1;
        }
    }
}

/// Hashed slot -> RLP of the new value (`None`: deleted), ascending.
type SlotChanges = Vec<(B256, Option<Vec<u8>>)>;

/// Roots remembered per account.
const ROOTS_PER_ACCOUNT: usize = 8;

impl HeadTries {
    fn account(&self, hashed: &B256) -> Option<StoredAccount> {
        let leaf = self.accounts.value(hashed)?;
        let acc = TrieAccount::decode(&mut &leaf[..]).ok()?;
        Some(StoredAccount {
            nonce: acc.nonce,
            balance: acc.balance,
            code_hash: acc.code_hash,
            storage_root: acc.storage_root,
        })
    }
}

static HEADS: Mutex<Vec<Arc<HeadTries>>> = Mutex::new(Vec::new());

fn cached_head(hash: &B256) -> Option<Arc<HeadTries>> {
    let heads = HEADS.lock().unwrap_or_else(|e| e.into_inner());
    heads.iter().find(|h| h.hash == *hash).cloned()
}

fn keep_head(head: Arc<HeadTries>) -> Arc<HeadTries> {
    let mut heads = HEADS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = heads.iter().find(|h| h.hash == head.hash) {
        return existing.clone();
    }
    if heads.len() >= HEADS_KEPT {
        heads.remove(0);
    }
    heads.push(head.clone());
    head
}

fn account_leaf(acc: &StoredAccount) -> Vec<u8> {
    alloy::rlp::encode(acc.trie_account())
}

fn storage_leaf(value: &U256) -> Vec<u8> {
    alloy::rlp::encode(value)
}

/// What the storage tries kept for one head hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageTriesKept {
    /// Slots of all the kept tries.
    pub slots: usize,
    /// Tries dropped for the budget since the head's tries were first built (a restart or a
    /// reorg past the cached heads builds them again, from zero).
    pub dropped: u64,
}

impl Store {
    /// The storage tries kept for the head `hash`, if its tries are cached.
    pub fn storage_tries_kept(&self, hash: &B256) -> Option<StorageTriesKept> {
        let head = cached_head(hash)?;
        let kept = head.storage.read().unwrap_or_else(|e| e.into_inner());
        Some(StorageTriesKept {
            slots: kept.slots,
            dropped: kept.dropped,
        })
    }

    /// The state root of the state after block `base` with `changes` on top; the same as
    /// [`Store::state_root_with`], answered from the cached tries of the head when `base` is
    /// the head.
    pub fn state_root_on(&self, base: u64, changes: &StateChanges) -> Result<B256, StoreError> {
        let Some((source, tries)) = self.head_source(base)? else {
            return self.state_root_with(base, changes);
        };
        root_with_changes(&source, &tries, changes)
    }

    /// [`Store::state_root_on`] with `carry`'s changes, for one of a run of roots on `base`:
    /// the nodes of the earlier roots that the accounts moved since leave alone come from
    /// `carry`, and this root's go there for the next one.
    pub fn state_root_carried(&self, base: u64, carry: &mut RootCarry) -> Result<B256, StoreError> {
        let Some((source, tries)) = self.head_source(base)? else {
            carry.forget();
            return self.state_root_with(base, carry.changes());
        };
        let (changes, moved, kept) = carry.take_moves::<SimulationCarry>();
        let moved = if kept.head == tries.hash {
            moved
        } else {
            *kept = SimulationCarry {
                head: tries.hash,
                ..SimulationCarry::default()
            };
            changes.keys().copied().collect()
        };
        let root = root_carried(&source, &tries, changes, &moved, kept);
        if root.is_err() {
            // What was taken in is not all applied: the next root starts over.
            carry.forget();
        }
        root
    }

    /// The current-state tables and the cached tries of the head, when `base` is the head.
    fn head_source(&self, base: u64) -> Result<Option<(HeadSource, Arc<HeadTries>)>, StoreError> {
        let snapshot = self.snapshot()?;
        if snapshot.head != base {
            return Ok(None);
        }
        let Some(hash) = snapshot
            .canonical
            .get(base)?
            .map(|v| B256::from_slice(v.value()))
        else {
            return Ok(None);
        };
        let source = HeadSource {
            snapshot,
            tables: OnceCell::new(),
        };
        let tries = head_tries(&source, hash)?;
        Ok(Some((source, tries)))
    }
}

type HeadTable = redb::ReadOnlyTable<super::Bytes<'static>, super::Bytes<'static>>;

/// The head's current-state tables, opened on first use: a root whose tries are all cached
/// (most simulations on the head) reads none, and opening them was 2-3% of a one-transfer
/// simulation's request.
struct HeadSource {
    snapshot: Arc<super::snapshot::Snapshot>,
    tables: OnceCell<TableSource<HeadTable, HeadTable>>,
}

impl HeadSource {
    fn tables(&self) -> Result<&TableSource<HeadTable, HeadTable>, StoreError> {
        if let Some(tables) = self.tables.get() {
            return Ok(tables);
        }
        let opened = TableSource::from_tables(
            self.snapshot.tx.open_table(ACCOUNTS)?,
            self.snapshot.tx.open_table(STORAGE)?,
        );
        Ok(self.tables.get_or_init(|| opened))
    }
}

impl StateSource for HeadSource {
    type Error = StoreError;

    fn account(&self, hashed: &B256) -> Result<Option<StoredAccount>, StoreError> {
        self.tables()?.account(hashed)
    }

    fn for_each_account(&self, f: &mut dyn FnMut(B256, StoredAccount)) -> Result<(), StoreError> {
        self.tables()?.for_each_account(f)
    }

    fn for_each_slot(
        &self,
        hashed: &B256,
        f: &mut dyn FnMut(B256, U256),
    ) -> Result<(), StoreError> {
        self.tables()?.for_each_slot(hashed, f)
    }
}

/// The cached tries of the head `hash`, built from `source` (the state after that block) when
/// they are not cached yet.
fn head_tries(source: &impl Source, hash: B256) -> Result<Arc<HeadTries>, StoreError> {
    Ok(match cached_head(&hash) {
        Some(t) => t,
        None => keep_head(Arc::new(build_head(source, hash)?)),
    })
}

/// The tries of the block just committed on a head: the head's, advanced by the block's
/// changes (see [`advance_head`]), waiting for the block's hash.
pub(crate) struct AdvancedTries(HeadTries);

impl AdvancedTries {
    /// Keeps them as the cached tries of block `hash`, for the next block and for simulations.
    pub(crate) fn keep(mut self, hash: B256) {
        self.0.hash = hash;
        keep_head(Arc::new(self.0));
    }
}

/// The roots of the state after the head `head` (read from `source`) with `overlay` on top,
/// and the head's tries advanced by it, so that the next block's roots only hash the paths its
/// own changes touch. The head's tries are built (a scan of every account) only when no block
/// or simulation on this head built them already; they are advanced in place unless a
/// simulation still holds them.
pub(crate) fn advance_head(
    source: &impl Source,
    head: B256,
    overlay: &HashedOverlay,
) -> Result<(RootOutput, AdvancedTries), StoreError> {
    let mut tries = owned_head(head_tries(source, head)?);
    let mut storage_roots: BTreeMap<B256, B256> = BTreeMap::new();
    let mut advanced_storage = Vec::with_capacity(overlay.storage.len());
    for (hashed, slots) in &overlay.storage {
        let trie = if slots.wiped || tries.account(hashed).is_none() {
            CachedTrie::build(
                slots
                    .slots
                    .iter()
                    .filter(|(_, v)| !v.is_zero())
                    .map(|(k, v)| (*k, storage_leaf(v)))
                    .collect(),
            )
        } else {
            let base = storage_trie(source, &tries, hashed)?;
            let values = slot_values(&base, slots);
            tries
                .storage
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .remove(hashed);
            let mut trie = Arc::try_unwrap(base).unwrap_or_else(|shared| (*shared).clone());
            if !values.is_empty() {
                trie.apply(&as_leaf_changes(&values, |_| false));
            }
            trie
        };
        storage_roots.insert(*hashed, trie.root());
        advanced_storage.push((*hashed, trie));
    }
    let resolved = resolve_accounts(&tries, overlay, &storage_roots);
    let values = account_values(&tries, &resolved);

    let storage = tries.storage.get_mut().unwrap_or_else(|e| e.into_inner());
    for (hashed, trie) in advanced_storage {
        storage.insert(hashed, Arc::new(trie));
    }
    for (hashed, account) in &resolved {
        // A removed account takes its storage with it; a root the trie does not give (an
        // overlay carrying a whole account) leaves the trie to be built again when needed.
        let stale = match (account, storage.root_of(hashed)) {
            (None, _) => true,
            (Some(acc), Some(root)) => root != acc.storage_root,
            (Some(_), None) => false,
        };
        if stale {
            storage.remove(hashed);
        }
    }
    tries.accounts.apply(&as_leaf_changes(&values, |_| false));
    // The memos hold results for the old head's state.
    tries.storage_roots = Mutex::default();
    tries.system_subtrees = SubtreeMemo::default();
    let roots = RootOutput {
        state_root: tries.accounts.root(),
        storage_roots: resolved
            .iter()
            .filter_map(|(k, v)| v.map(|acc| (*k, acc.storage_root)))
            .collect(),
    };
    Ok((roots, AdvancedTries(tries)))
}

/// The head's tries to advance: taken out of the cache when nothing else holds them (the usual
/// case while blocks are imported), else a copy that shares the unchanged storage tries. A
/// simulation on the head that starts while the block commits finds no tries and builds its
/// own, as the first simulation on every head did before blocks advanced them.
fn owned_head(tries: Arc<HeadTries>) -> HeadTries {
    HEADS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|h| !Arc::ptr_eq(h, &tries));
    match Arc::try_unwrap(tries) {
        Ok(owned) => owned,
        Err(shared) => {
            let copy = HeadTries {
                hash: shared.hash,
                accounts: shared.accounts.clone(),
                storage: RwLock::new(
                    shared
                        .storage
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone(),
                ),
                storage_roots: Mutex::default(),
                system_subtrees: SubtreeMemo::default(),
            };
            keep_head(shared);
            copy
        }
    }
}

/// Merges `changes` (ascending keys, unique; `None` removes the key) into the sorted `keys`
/// and their `items`, in place: values are replaced where they are, removals close up and
/// insertions open up in one pass each, so a block's merge allocates nothing new (new vectors
/// of a large trie every block cost page faults).
fn merge_leaves<T: Default>(
    keys: &mut Vec<B256>,
    items: &mut Vec<T>,
    changes: impl Iterator<Item = (B256, Option<T>)>,
) {
    let mut removed = Vec::new();
    let mut inserted = Vec::new();
    for (key, item) in changes {
        match (keys.binary_search(&key), item) {
            (Ok(i), Some(item)) => items[i] = item,
            (Ok(i), None) => removed.push(i),
            (Err(_), Some(item)) => inserted.push((key, item)),
            (Err(_), None) => {}
        }
    }
    if let Some(&first) = removed.first() {
        let mut write = first;
        let mut next = removed.iter().peekable();
        for read in first..keys.len() {
            if next.next_if(|&&r| r == read).is_some() {
                continue;
            }
            keys[write] = keys[read];
            items.swap(write, read);
            write += 1;
        }
        keys.truncate(write);
        items.truncate(write);
    }
    if !inserted.is_empty() {
        let old = keys.len();
        keys.resize(old + inserted.len(), B256::ZERO);
        items.resize_with(old + inserted.len(), T::default);
        // From the back: each new key lands after the old keys above it have moved up.
        let (mut read, mut write) = (old, old + inserted.len());
        for (key, item) in inserted.into_iter().rev() {
            while read > 0 && keys[read - 1] > key {
                read -= 1;
                write -= 1;
                keys[write] = keys[read];
                items.swap(write, read);
            }
            write -= 1;
            keys[write] = key;
            items[write] = item;
        }
    }
}

fn build_head(source: &impl Source, hash: B256) -> Result<HeadTries, StoreError> {
    let mut leaves = Vec::new();
    source.for_each_account(&mut |key, acc| leaves.push((key, account_leaf(&acc))))?;
    Ok(HeadTries {
        hash,
        accounts: CachedTrie::build(leaves),
        storage: RwLock::new(StorageTries::new(
            STORAGE_SLOTS_KEPT.load(Ordering::Relaxed),
        )),
        storage_roots: Mutex::new(HashMap::default()),
        system_subtrees: SubtreeMemo::default(),
    })
}

fn build_storage(source: &impl Source, hashed: &B256) -> Result<CachedTrie, StoreError> {
    let mut leaves = Vec::new();
    source.for_each_slot(hashed, &mut |slot, value| {
        leaves.push((slot, storage_leaf(&value)))
    })?;
    Ok(CachedTrie::build(leaves))
}

fn storage_trie(
    source: &impl Source,
    tries: &HeadTries,
    hashed: &B256,
) -> Result<Arc<CachedTrie>, StoreError> {
    if let Some(trie) = tries
        .storage
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(hashed)
    {
        return Ok(trie);
    }
    let built = Arc::new(build_storage(source, hashed)?);
    let mut kept = tries.storage.write().unwrap_or_else(|e| e.into_inner());
    // Another root may have built it meanwhile.
    if let Some(trie) = kept.get(hashed) {
        return Ok(trie);
    }
    kept.insert(*hashed, built.clone());
    Ok(built)
}

fn storage_root_on(
    source: &impl Source,
    tries: &HeadTries,
    hashed: &B256,
    overlay: &StorageOverlay,
    carry: Option<&mut TrieCarry>,
) -> Result<B256, StoreError> {
    if overlay.wiped {
        return Ok(match trie::storage_root(&EmptySource, hashed, overlay) {
            Ok(root) => root,
            Err(never) => match never {},
        });
    }
    // An account that does not exist at the head has no storage there.
    if tries.account(hashed).is_none() {
        return Ok(match trie::storage_root(&EmptySource, hashed, overlay) {
            Ok(root) => root,
            Err(never) => match never {},
        });
    }
    let trie = storage_trie(source, tries, hashed)?;
    let values = slot_values(&trie, overlay);
    if let Some(root) = tries
        .storage_roots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(hashed)
        .and_then(|seen| seen.iter().find(|(c, _)| *c == values).map(|(_, r)| *r))
    {
        return Ok(root);
    }
    let root = match carry {
        Some(carry) => {
            carry.set_all(&trie, &values);
            trie.root_carried(carry, None)
        }
        None => trie.root_with(&as_leaf_changes(&values, |_| false), None),
    };
    let mut memo = tries
        .storage_roots
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if memo.len() < MEMO_LIMIT && values.len() <= 16 {
        let seen = memo.entry(*hashed).or_default();
        if seen.len() >= ROOTS_PER_ACCOUNT {
            seen.remove(0);
        }
        seen.push((values, root));
    }
    Ok(root)
}

/// Remembered keccak hashes of addresses and slots: simulations on one head keep changing the
/// same few (senders, system contracts and their ring-buffer slots).
#[derive(Default)]
struct HashMemo {
    addresses: HashMap<Address, B256>,
    slots: HashMap<U256, B256>,
}

/// The hash of `key` from `known`, computed and remembered on first use.
fn remembered<K: std::hash::Hash + Eq + Copy>(
    known: &mut HashMap<K, B256>,
    key: &K,
    hash: impl FnOnce(&K) -> B256,
) -> B256 {
    *known.entry(*key).or_insert_with(|| hash(key))
}

const MEMO_LIMIT: usize = 65_536;

static MEMO: Mutex<Option<HashMemo>> = Mutex::new(None);

/// Runs `f` with the hash memo (emptied first when it has grown past its limit).
fn with_hash_memo<R>(f: impl FnOnce(&mut HashMemo) -> R) -> R {
    let mut guard = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    let memo = guard.get_or_insert_with(HashMemo::default);
    if memo.addresses.len() > MEMO_LIMIT {
        memo.addresses.clear();
    }
    if memo.slots.len() > MEMO_LIMIT {
        memo.slots.clear();
    }
    f(memo)
}

/// [`hashed_overlay`] of `changes`, with the hashes from `memo`.
fn hashed_overlay_memo<'c>(
    memo: &mut HashMemo,
    changes: impl IntoIterator<Item = (&'c Address, &'c AccountChange)>,
) -> HashedOverlay {
    let HashMemo { addresses, slots } = memo;
    super::hashed_overlay_with(
        changes,
        |address| remembered(addresses, address, hash_address),
        |slot| remembered(slots, slot, hash_slot),
    )
}

/// The storage root of every account of `overlay` with storage changes, with the carried
/// storage tries of `carry` when there is one.
fn storage_roots(
    source: &impl Source,
    tries: &HeadTries,
    overlay: &HashedOverlay,
    mut carry: Option<&mut SimulationCarry>,
) -> Result<BTreeMap<B256, B256>, StoreError> {
    let mut roots = BTreeMap::new();
    for (hashed, slots) in &overlay.storage {
        let slot_carry = carry
            .as_deref_mut()
            .map(|c| c.storage.entry(*hashed).or_default());
        roots.insert(
            *hashed,
            storage_root_on(source, tries, hashed, slots, slot_carry)?,
        );
    }
    Ok(roots)
}

/// The root of the head's state with `changes` on top.
fn root_with_changes(
    source: &impl Source,
    tries: &HeadTries,
    changes: &StateChanges,
) -> Result<B256, StoreError> {
    let overlay = with_hash_memo(|memo| hashed_overlay_memo(memo, changes));
    let storage_roots = storage_roots(source, tries, &overlay, None)?;
    let resolved = resolve_accounts(tries, &overlay, &storage_roots);
    let values = account_values(tries, &resolved);
    Ok(tries.accounts.root_with(
        &as_leaf_changes(&values, |k| system_accounts().contains(k)),
        Some(&tries.system_subtrees),
    ))
}

/// The root of the head's state with `changes` on top, where only the accounts of `moved`
/// changed since the root `carry` was last used for.
fn root_carried(
    source: &impl Source,
    tries: &HeadTries,
    changes: &StateChanges,
    moved: &[Address],
    carry: &mut SimulationCarry,
) -> Result<B256, StoreError> {
    // The hashes of every moved account (those no longer changed too), and the overlay of the
    // ones still changed, under one lock of the memo.
    let (hashed, overlay) = with_hash_memo(|memo| {
        let hashed: Vec<B256> = moved
            .iter()
            .map(|a| remembered(&mut memo.addresses, a, hash_address))
            .collect();
        let still_changed = moved.iter().filter_map(|a| Some((a, changes.get(a)?)));
        (hashed, hashed_overlay_memo(memo, still_changed))
    });
    let storage_roots = storage_roots(source, tries, &overlay, Some(carry))?;
    let resolved = resolve_accounts(tries, &overlay, &storage_roots);
    for key in hashed {
        // An account no longer changed is back to the head's leaf.
        let value = match resolved.get(&key) {
            Some(account) => account.as_ref().map(account_leaf),
            None => tries.accounts.value(&key).map(<[u8]>::to_vec),
        };
        let memoizable = system_accounts().contains(&key);
        carry.accounts.set(&tries.accounts, key, value, memoizable);
    }
    Ok(tries
        .accounts
        .root_carried(&mut carry.accounts, Some(&tries.system_subtrees)))
}

/// Hashed slot -> RLP of the new value (`None`: deleted), for the slots whose value differs from
/// `trie`'s: simulations report every slot they read.
fn slot_values(trie: &CachedTrie, overlay: &StorageOverlay) -> SlotChanges {
    overlay
        .slots
        .iter()
        .map(|(k, v)| (*k, (!v.is_zero()).then(|| storage_leaf(v))))
        .filter(|(k, v)| trie.value(k) != v.as_deref())
        .collect()
}

fn as_leaf_changes(
    values: &[(B256, Option<Vec<u8>>)],
    memoizable: impl Fn(&B256) -> bool,
) -> Vec<LeafChange<'_>> {
    values
        .iter()
        .map(|(k, v)| LeafChange {
            key: *k,
            value: v.as_deref(),
            memoizable: memoizable(k),
        })
        .collect()
}

/// Every account the overlay changes, as it is afterwards (`None`: removed), with its storage
/// root: the same resolution as `trie::state_root`, with the head's accounts from the cache.
fn resolve_accounts(
    tries: &HeadTries,
    overlay: &HashedOverlay,
    storage_roots: &BTreeMap<B256, B256>,
) -> BTreeMap<B256, Option<StoredAccount>> {
    let mut resolved: BTreeMap<B256, Option<StoredAccount>> = BTreeMap::new();
    for (hashed, account) in &overlay.accounts {
        let value = account.map(|a| {
            let root = match (storage_roots.get(hashed), a.storage_root) {
                (Some(root), _) => *root,
                (None, Some(root)) => root,
                (None, None) => tries
                    .account(hashed)
                    .map_or(EMPTY_ROOT_HASH, |s| s.storage_root),
            };
            StoredAccount {
                nonce: a.nonce,
                balance: a.balance,
                code_hash: a.code_hash,
                storage_root: root,
            }
        });
        resolved.insert(*hashed, value);
    }
    for (hashed, root) in storage_roots {
        if !resolved.contains_key(hashed) {
            if let Some(mut acc) = tries.account(hashed) {
                acc.storage_root = *root;
                resolved.insert(*hashed, Some(acc));
            }
        }
    }
    resolved
}

/// The account leaves `resolved` changes; accounts only touched (system calls, reads) keep
/// their leaf.
fn account_values(
    tries: &HeadTries,
    resolved: &BTreeMap<B256, Option<StoredAccount>>,
) -> Vec<(B256, Option<Vec<u8>>)> {
    resolved
        .iter()
        .filter(|(k, v)| tries.account(k) != **v)
        .map(|(k, v)| (*k, v.as_ref().map(account_leaf)))
        .collect()
}

/// Hashed addresses of the contracts every block's system calls write to.
fn system_accounts() -> &'static [B256; 4] {
    static HASHED: std::sync::LazyLock<[B256; 4]> = std::sync::LazyLock::new(|| {
        [
            eip2935::HISTORY_STORAGE_ADDRESS,
            eip4788::BEACON_ROOTS_ADDRESS,
            eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS,
            eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
        ]
        .map(|a| hash_address(&a))
    });
    &HASHED
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_trie::HashBuilder;

    fn trie_of(leaves: &BTreeMap<B256, Vec<u8>>) -> CachedTrie {
        CachedTrie::build(leaves.iter().map(|(k, v)| (*k, v.clone())).collect())
    }

    fn reference_root(leaves: &BTreeMap<B256, Vec<u8>>) -> B256 {
        let mut hb = HashBuilder::default();
        for (k, v) in leaves {
            hb.add_leaf(Nibbles::unpack(k), v);
        }
        hb.root()
    }

    /// `base` with `changes` applied (`None` removes the key).
    fn applied(
        base: &BTreeMap<B256, Vec<u8>>,
        changes: &BTreeMap<B256, Option<Vec<u8>>>,
    ) -> BTreeMap<B256, Vec<u8>> {
        let mut after = base.clone();
        for (k, v) in changes {
            match v {
                Some(v) => after.insert(*k, v.clone()),
                None => after.remove(k),
            };
        }
        after
    }

    fn leaf_changes<'a>(
        changes: &'a BTreeMap<B256, Option<Vec<u8>>>,
        memoizable: impl Fn(&B256) -> bool,
    ) -> Vec<LeafChange<'a>> {
        changes
            .iter()
            .map(|(k, v)| LeafChange {
                key: *k,
                value: v.as_deref(),
                memoizable: memoizable(k),
            })
            .collect()
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn key(&mut self, shared_prefix: &[u8]) -> B256 {
            let mut k = keccak256(self.next().to_be_bytes());
            // Some keys share long prefixes, to exercise extensions.
            if self.next().is_multiple_of(3) {
                let n = shared_prefix.len().min((self.next() % 32) as usize);
                k[..n].copy_from_slice(&shared_prefix[..n]);
            }
            k
        }
        /// Fewer than `max` changes to `base`: new values of existing keys, their removal,
        /// new keys and removals of keys that are not there (which change nothing); one time in
        /// `clear_one_in`, also the removal of every key but the first.
        fn leaf_changes(
            &mut self,
            base: &BTreeMap<B256, Vec<u8>>,
            prefix: &[u8],
            max: u64,
            clear_one_in: u64,
        ) -> BTreeMap<B256, Option<Vec<u8>>> {
            let mut changes = BTreeMap::new();
            let existing: Vec<B256> = base.keys().copied().collect();
            for _ in 0..(self.next() % max) {
                let pick = self.next() % 4;
                if pick < 2 && !existing.is_empty() {
                    let k = existing[(self.next() as usize) % existing.len()];
                    changes.insert(k, (pick == 0).then(|| self.value()));
                } else if pick == 2 {
                    changes.insert(self.key(prefix), Some(self.value()));
                } else {
                    changes.insert(self.key(prefix), None);
                }
            }
            if self.next().is_multiple_of(clear_one_in) {
                for k in existing.iter().skip(1) {
                    changes.insert(*k, None);
                }
            }
            changes
        }
        /// `size` leaves with random values, keys sharing parts of `prefix`.
        fn leaves(&mut self, prefix: &[u8], size: usize) -> BTreeMap<B256, Vec<u8>> {
            let mut leaves = BTreeMap::new();
            while leaves.len() < size {
                leaves.insert(self.key(prefix), self.value());
            }
            leaves
        }

        fn value(&mut self) -> Vec<u8> {
            // Short values make small (inline) nodes possible.
            let len = 1 + (self.next() % 70) as usize;
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    /// The dev genesis plus six contracts with storage (1, 2 and up to 210 slots), and those
    /// contracts with their slot counts.
    fn genesis_with_storage(rng: &mut Rng) -> (alloy::genesis::Genesis, Vec<(Address, u64)>) {
        use alloy::genesis::GenesisAccount;

        let mut genesis = crate::chain::dev_genesis();
        let mut with_storage = Vec::new();
        for i in 0..6u64 {
            let address = Address::from_word(keccak256(i.to_be_bytes()));
            let slots = match i {
                0 => 1,
                1 => 2,
                _ => 10 + (rng.next() % 200),
            };
            let storage = (0..slots)
                .map(|s| {
                    (
                        B256::from(U256::from(s * 7 + i)),
                        B256::from(U256::from(rng.next() % 1000 + 1)),
                    )
                })
                .collect();
            genesis.alloc.insert(
                address,
                GenesisAccount {
                    balance: U256::from(i + 1),
                    code: Some(vec![0x60, 0x00, 0x56, i as u8].into()),
                    storage: Some(storage),
                    ..Default::default()
                },
            );
            with_storage.push((address, slots));
        }
        (genesis, with_storage)
    }

    /// Up to six account changes on the state after block `base`: removals, re-creations with
    /// wiped storage, balance changes with slots changed, zeroed or rewritten with their own
    /// value, and new accounts.
    fn random_changes(
        rng: &mut Rng,
        store: &Store,
        base: u64,
        existing: &[Address],
        with_storage: &[(Address, u64)],
    ) -> StateChanges {
        use revm::state::AccountInfo;
        use simnode_api::AccountChange;

        let mut changes = StateChanges::default();
        let n = 1 + rng.next() % 6;
        for _ in 0..n {
            let pick = rng.next() % 6;
            let address = if pick < 4 {
                existing[(rng.next() as usize) % existing.len()]
            } else {
                Address::from_word(keccak256(rng.next().to_be_bytes()))
            };
            let mut storage = BTreeMap::new();
            if let Some(i) = with_storage.iter().position(|(a, _)| *a == address) {
                let slots = with_storage[i].1;
                for _ in 0..(rng.next() % 4) {
                    let s = rng.next() % (slots + 5);
                    let value = match rng.next() % 3 {
                        0 => U256::ZERO,
                        _ => U256::from(rng.next() % 1000),
                    };
                    storage.insert(U256::from(s * 7 + i as u64), value);
                }
            }
            let change = match pick {
                0 => AccountChange {
                    info: None,
                    wipe_storage: true,
                    storage: BTreeMap::new(),
                },
                1 => AccountChange {
                    info: Some(AccountInfo {
                        balance: U256::from(rng.next()),
                        nonce: 1,
                        code_hash: revm::primitives::KECCAK_EMPTY,
                        ..Default::default()
                    }),
                    wipe_storage: true,
                    storage: BTreeMap::from([(U256::from(1), U256::from(2))]),
                },
                _ => {
                    let info = store
                        .state_after(base)
                        .expect("state")
                        .account(&address)
                        .expect("read")
                        .map(|a| a.info())
                        .unwrap_or_default();
                    AccountChange {
                        info: Some(AccountInfo {
                            balance: info.balance + U256::from(rng.next() % 3),
                            ..info
                        }),
                        wipe_storage: false,
                        storage,
                    }
                }
            };
            changes.insert(address, change);
        }
        changes
    }

    /// A scratch store `tag` whose genesis holds contracts with storage (see
    /// `genesis_with_storage`): the store, the genesis accounts, the contracts and their slots.
    fn store_with_storage(
        rng: &mut Rng,
        tag: &str,
    ) -> (
        crate::store::scratch::ScratchStore,
        Vec<Address>,
        Vec<(Address, u64)>,
    ) {
        let (genesis, with_storage) = genesis_with_storage(rng);
        let store = crate::store::scratch::ScratchStore::open(tag, &genesis);
        let existing = genesis.alloc.keys().copied().collect();
        (store, existing, with_storage)
    }

    /// `Store::state_root_on` (cached tries) against `Store::state_root_with` (the full
    /// rebuild) on a store whose genesis holds contracts with storage.
    #[test]
    fn store_roots_match_the_uncached_path() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let (store, existing, with_storage) = store_with_storage(&mut rng, "root-cache");
        for round in 0..60 {
            let changes = random_changes(&mut rng, &store, 0, &existing, &with_storage);
            let cached = store.state_root_on(0, &changes).expect("cached root");
            let full = store.state_root_with(0, &changes).expect("full root");
            assert_eq!(cached, full, "round {round}: {changes:?}");
        }
    }

    /// `Store::state_root_carried` over runs of roots against the full rebuild of each: every
    /// root sets a few accounts (storage written, replaced, accounts removed, created) and puts
    /// some earlier ones back as the base has them.
    #[test]
    fn carried_store_roots_match_the_uncached_path() {
        let mut rng = Rng(0x5eed_cafe_f00d_b0a7);
        let (store, existing, with_storage) = store_with_storage(&mut rng, "root-carry");
        for run in 0..8 {
            let mut carry = RootCarry::default();
            for root in 0..12 {
                for (address, change) in
                    random_changes(&mut rng, &store, 0, &existing, &with_storage)
                {
                    carry.set(address, Some(change));
                }
                if rng.next().is_multiple_of(3) && !carry.changes().is_empty() {
                    let n = carry.changes().len();
                    let back = *carry
                        .changes()
                        .keys()
                        .nth((rng.next() as usize) % n)
                        .expect("an account");
                    carry.set(back, None);
                }
                let carried = store
                    .state_root_carried(0, &mut carry)
                    .expect("carried root");
                let full = store
                    .state_root_with(0, carry.changes())
                    .expect("full root");
                assert_eq!(carried, full, "run {run} root {root}");
            }
        }
    }

    /// Commits block `number` with random changes on top of the head (its state root from
    /// the full rebuild; the commit checks the advanced tries' root against it) and returns
    /// its hash; `existing` gains the accounts it created.
    fn commit_random_block(
        rng: &mut Rng,
        store: &Store,
        number: u64,
        existing: &mut Vec<Address>,
        with_storage: &[(Address, u64)],
    ) -> B256 {
        use alloy::{consensus::Header, primitives::Sealable};

        let parent = store.head_header().expect("parent");
        let changes = random_changes(rng, store, number - 1, existing, with_storage);
        existing.extend(changes.keys().copied());
        existing.sort_unstable();
        existing.dedup();
        let state_root = store
            .state_root_with(number - 1, &changes)
            .expect("full root");
        let header = Header {
            parent_hash: parent.hash(),
            number,
            state_root,
            ..Default::default()
        }
        .seal_slow();
        let hash = header.hash();
        let block = crate::store::NewBlock {
            header,
            body: Default::default(),
            senders: vec![],
            receipts: vec![],
            requests: vec![],
        };
        store.commit_block(&block, &changes).expect("block commits");
        hash
    }

    /// Blocks committed one after another advance the head's cached tries instead of
    /// rebuilding them: each block's root comes from the advanced tries (they stay cached, so
    /// no block fell back to the tables), and roots with changes on every new head still
    /// match the full rebuild.
    #[test]
    fn committed_blocks_advance_the_cached_tries() {
        let mut rng = Rng(0x0f1e_2d3c_4b5a_6978);
        let (store, mut existing, with_storage) = store_with_storage(&mut rng, "root-advance");
        for number in 1..=40u64 {
            let hash = commit_random_block(&mut rng, &store, number, &mut existing, &with_storage);
            assert!(
                cached_head(&hash).is_some(),
                "block {number}: tries advanced"
            );
            for probe in 0..3 {
                let changes = random_changes(&mut rng, &store, number, &existing, &with_storage);
                assert_eq!(
                    store.state_root_on(number, &changes).expect("cached root"),
                    store.state_root_with(number, &changes).expect("full root"),
                    "block {number} probe {probe}: {changes:?}"
                );
            }
        }
    }

    /// The kept storage tries stay within their slot budget, the least recently used dropped
    /// first (down to nine tenths of the budget); a trie larger than the whole budget is not
    /// kept.
    #[test]
    fn storage_tries_keep_to_their_budget() {
        let trie = |leaves: usize, seed: u64| {
            let mut rng = Rng(seed);
            Arc::new(CachedTrie::build(
                rng.leaves(&[0u8; 32], leaves).into_iter().collect(),
            ))
        };
        let account = B256::repeat_byte;
        let mut kept = StorageTries::new(10);
        kept.insert(account(1), trie(4, 1));
        kept.insert(account(2), trie(4, 2));
        assert_eq!(kept.slots, 8);
        // A use makes the first the most recent: going past the budget drops the second.
        assert!(kept.get(&account(1)).is_some());
        kept.insert(account(3), trie(3, 3));
        assert!(
            kept.root_of(&account(2)).is_none(),
            "least recently used dropped"
        );
        assert!(kept.root_of(&account(1)).is_some());
        assert!(kept.root_of(&account(3)).is_some());
        assert_eq!(kept.slots, 7);
        // A trie kept again counts with its new size only.
        let smaller = trie(2, 4);
        kept.insert(account(1), smaller.clone());
        assert_eq!(kept.root_of(&account(1)), Some(smaller.root()));
        assert_eq!(kept.slots, 5);
        // Larger than the whole budget: not kept, and nothing else dropped for it.
        kept.insert(account(4), trie(11, 5));
        assert!(kept.root_of(&account(4)).is_none());
        assert_eq!(kept.slots, 5);
        assert_eq!(kept.remove(&account(3)).map(|t| t.len()), Some(3));
        assert_eq!(kept.slots, 2);
        assert_eq!(kept.tries.len(), 1);
        // Empty tries count as one slot each: no more than the budget of them are kept.
        for i in 10..30 {
            kept.insert(account(i), trie(0, 6));
        }
        assert!(kept.slots <= 10, "{} slots", kept.slots);
        assert!(kept.tries.len() <= 10, "{} tries", kept.tries.len());
    }

    /// With a slot budget far below what the blocks write, blocks still advance the head's
    /// tries with the right roots (checked against the full rebuild), the tries dropped
    /// along the way are built again when needed, and no head keeps more than the budget.
    #[test]
    fn blocks_within_a_small_storage_budget_keep_their_roots() {
        let mut rng = Rng(0x7a11_b0d6_e7c4_2b19);
        let (store, mut existing, with_storage) = store_with_storage(&mut rng, "root-budget");
        // Room for the 65-slot contract's trie and a few small ones (these blocks write
        // tries of 1, 2, 54, 65, 110 and 202 slots, and wipe most soon). Heads cached while
        // this runs (other tests' too) keep to it; that changes how much is rebuilt, never a
        // root.
        let budget = 70;
        set_storage_slots_kept(budget);
        let mut most_kept = 0;
        let mut dropped = 0;
        for number in 1..=30u64 {
            let hash = commit_random_block(&mut rng, &store, number, &mut existing, &with_storage);
            let head = cached_head(&hash).expect("tries advanced");
            let within_budget = |after: &str| {
                let kept = head.storage.read().expect("storage tries");
                assert!(
                    kept.slots <= budget,
                    "block {number}, after {after}: {} slots kept",
                    kept.slots
                );
                assert_eq!(
                    kept.slots,
                    kept.tries.values().map(|t| weight(&t.trie)).sum::<usize>()
                );
                (kept.slots, kept.dropped)
            };
            most_kept = most_kept.max(within_budget("the commit").0);
            // A root on the new head builds (and keeps) the tries it lacks.
            let probe = random_changes(&mut rng, &store, number, &existing, &with_storage);
            assert_eq!(
                store.state_root_on(number, &probe).expect("cached root"),
                store.state_root_with(number, &probe).expect("full root"),
                "block {number}: {probe:?}"
            );
            let (kept, dropped_so_far) = within_budget("a root with changes");
            assert_eq!(
                store.storage_tries_kept(&hash),
                Some(StorageTriesKept {
                    slots: kept,
                    dropped: dropped_so_far
                })
            );
            most_kept = most_kept.max(kept);
            dropped = dropped_so_far;
        }
        set_storage_slots_kept(DEFAULT_STORAGE_SLOTS_KEPT);
        assert!(most_kept > 0, "storage tries were kept at all");
        assert!(dropped > 0, "the budget dropped tries");
    }

    #[test]
    fn roots_with_changes_match_a_full_rebuild() {
        let prefix = [0xabu8; 32];
        let mut rng = Rng(0x9e3779b97f4a7c15);
        for round in 0..300 {
            let size = match round % 5 {
                0 => 0,
                1 => 1,
                2 => 2 + (rng.next() % 5) as usize,
                _ => (rng.next() % 300) as usize,
            };
            let base = rng.leaves(&prefix, size);
            let trie = trie_of(&base);
            assert_eq!(trie.root(), reference_root(&base), "round {round}: base");
            for _ in 0..5 {
                let changes = rng.leaf_changes(&base, &prefix, 12, 10);
                let after = applied(&base, &changes);
                let list = leaf_changes(&changes, |_| false);
                assert_eq!(
                    trie.root_with(&list, None),
                    reference_root(&after),
                    "round {round}: {} base leaves, {} changes",
                    base.len(),
                    list.len()
                );
            }
        }
    }

    /// The in-place merge gives the sorted union with removals, whatever mix of updates,
    /// removals (of present and absent keys) and insertions a change list holds.
    #[test]
    fn leaves_merge_in_place_like_a_map() {
        let mut rng = Rng(0x6a09_e667_f3bc_c908);
        for round in 0..300 {
            let mut reference: BTreeMap<B256, u64> = BTreeMap::new();
            while reference.len() < (rng.next() % 40) as usize {
                reference.insert(rng.key(&[0x11; 32]), rng.next());
            }
            let mut keys: Vec<B256> = reference.keys().copied().collect();
            let mut items: Vec<u64> = reference.values().copied().collect();
            let mut changes: BTreeMap<B256, Option<u64>> = BTreeMap::new();
            let existing = keys.clone();
            for _ in 0..(rng.next() % 12) {
                let key = match rng.next() % 3 {
                    0 if !existing.is_empty() => existing[(rng.next() as usize) % existing.len()],
                    _ => rng.key(&[0x11; 32]),
                };
                changes.insert(key, (!rng.next().is_multiple_of(3)).then(|| rng.next()));
            }
            for (k, v) in &changes {
                match v {
                    Some(v) => reference.insert(*k, *v),
                    None => reference.remove(k),
                };
            }
            merge_leaves(&mut keys, &mut items, changes.into_iter());
            assert_eq!(
                keys,
                reference.keys().copied().collect::<Vec<_>>(),
                "round {round}"
            );
            assert_eq!(
                items,
                reference.values().copied().collect::<Vec<_>>(),
                "round {round}"
            );
        }
    }

    /// A trie advanced block after block by `apply` keeps giving the full roots, itself and
    /// with further changes on top (a stale node left in its cache would show in either).
    #[test]
    fn applied_tries_match_a_full_rebuild() {
        let prefix = [0x3cu8; 32];
        let mut rng = Rng(0x853c49e6748fea9b);
        for round in 0..40 {
            let mut leaves: BTreeMap<B256, Vec<u8>> = BTreeMap::new();
            while leaves.len() < (rng.next() % 200) as usize {
                leaves.insert(rng.key(&prefix), rng.value());
            }
            let mut trie = trie_of(&leaves);
            for step in 0..25 {
                let changes = rng.leaf_changes(&leaves, &prefix, 10, 12);
                leaves = applied(&leaves, &changes);
                trie.apply(&leaf_changes(&changes, |_| false));
                let context = format!("round {round} step {step}: {} leaves", leaves.len());
                assert_eq!(trie.root(), reference_root(&leaves), "{context}");
                assert_eq!(trie.len(), leaves.len(), "{context}");
                let mut probe: BTreeMap<B256, Option<Vec<u8>>> = BTreeMap::new();
                for k in leaves.keys().step_by(7) {
                    probe.insert(*k, Some(rng.value()));
                }
                probe.insert(rng.key(&prefix), Some(rng.value()));
                assert_eq!(
                    trie.root_with(&leaf_changes(&probe, |_| false), None),
                    reference_root(&applied(&leaves, &probe)),
                    "{context}: changes on top"
                );
            }
        }
    }

    /// Roots with a memo of the subtrees holding only memoizable changes: the same few
    /// memoizable changes (a pool of variants, as the system contracts' writes on one head)
    /// come back with other changes beside them, and every root must still be the full one.
    #[test]
    fn memoized_subtrees_give_the_full_roots() {
        let prefix = [0x5au8; 32];
        let mut rng = Rng(0x2545f4914f6cdd1d);
        for round in 0..40 {
            let size = (rng.next() % 200) as usize + (round % 3);
            let base = rng.leaves(&prefix, size);
            let trie = trie_of(&base);
            let memo = SubtreeMemo::default();
            let existing: Vec<B256> = base.keys().copied().collect();
            // Memoizable keys: some in the base, some new.
            let mut system: Vec<B256> = (0..3)
                .filter(|_| !existing.is_empty())
                .map(|_| existing[(rng.next() as usize) % existing.len()])
                .collect();
            system.push(rng.key(&prefix));
            system.sort();
            system.dedup();
            let variants: Vec<BTreeMap<B256, Option<Vec<u8>>>> = (0..3)
                .map(|_| {
                    system
                        .iter()
                        .map(|k| (*k, (!rng.next().is_multiple_of(5)).then(|| rng.value())))
                        .collect()
                })
                .collect();
            for _ in 0..12 {
                let mut changes = variants[(rng.next() as usize) % variants.len()].clone();
                for _ in 0..(rng.next() % 4) {
                    let key = match rng.next() % 3 {
                        0 if !existing.is_empty() => {
                            existing[(rng.next() as usize) % existing.len()]
                        }
                        _ => rng.key(&prefix),
                    };
                    if !system.contains(&key) {
                        changes.insert(key, (!rng.next().is_multiple_of(4)).then(|| rng.value()));
                    }
                }
                let after = applied(&base, &changes);
                let list = leaf_changes(&changes, |k| system.contains(k));
                assert_eq!(
                    trie.root_with(&list, Some(&memo)),
                    reference_root(&after),
                    "round {round}: {} base leaves, {} changes",
                    base.len(),
                    list.len()
                );
            }
            let remembered = memo.nodes.read().map(|n| n.len()).unwrap_or_default();
            assert!(remembered > 0, "round {round}: nothing was memoized");
        }
    }

    /// Roots of a simulation's blocks with a carry: each block moves some leaves of the list
    /// before it (values changed, keys added, removed, put back, changed back to an earlier
    /// value or to the base's), with a memo of memoizable changes beside it as for the system
    /// contracts; every root must be the full one. Half the rounds hand the carry each moved
    /// leaf, half the whole list (as storage tries do).
    #[test]
    fn carried_roots_of_moving_change_lists_give_the_full_roots() {
        let prefix = [0x77u8; 32];
        let mut rng = Rng(0xd1b5_4a32_d192_ed03);
        for round in 0..40 {
            let size = match round % 4 {
                0 => 0,
                1 => 1 + (rng.next() % 3) as usize,
                _ => (rng.next() % 400) as usize,
            };
            let whole_lists = round % 8 >= 4;
            let base = rng.leaves(&prefix, size);
            let trie = trie_of(&base);
            let existing: Vec<B256> = base.keys().copied().collect();
            let system: Vec<B256> = vec![rng.key(&prefix)];
            let memo = SubtreeMemo::default();
            let mut carry = TrieCarry::default();
            let mut changes: BTreeMap<B256, Option<Vec<u8>>> = BTreeMap::new();
            let mut earlier: Vec<(B256, Option<Vec<u8>>)> = Vec::new();
            for block in 0..16 {
                let mut moved: Vec<B256> = vec![system[0]];
                changes.insert(system[0], Some(rng.value()));
                for _ in 0..(1 + rng.next() % 40) {
                    let key = match rng.next() % 8 {
                        0 if !existing.is_empty() => {
                            existing[(rng.next() as usize) % existing.len()]
                        }
                        1 if !earlier.is_empty() => {
                            // Back to a key and value an earlier block had.
                            let (k, v) = earlier[(rng.next() as usize) % earlier.len()].clone();
                            changes.insert(k, v);
                            moved.push(k);
                            continue;
                        }
                        2 if !changes.is_empty() => {
                            // A key of an earlier block's changes is back to the base's.
                            let k = *changes
                                .keys()
                                .nth((rng.next() as usize) % changes.len())
                                .unwrap();
                            if k != system[0] {
                                changes.remove(&k);
                                moved.push(k);
                            }
                            continue;
                        }
                        _ => rng.key(&prefix),
                    };
                    let value = (!rng.next().is_multiple_of(4)).then(|| rng.value());
                    earlier.push((key, value.clone()));
                    changes.insert(key, value);
                    moved.push(key);
                }
                if whole_lists {
                    let list: Vec<(B256, Option<Vec<u8>>)> =
                        changes.iter().map(|(k, v)| (*k, v.clone())).collect();
                    carry.set_all(&trie, &list);
                } else {
                    for key in &moved {
                        let value = match changes.get(key) {
                            Some(v) => v.clone(),
                            None => base.get(key).cloned(),
                        };
                        carry.set(&trie, *key, value, system.contains(key));
                    }
                }
                let expected = reference_root(&applied(&base, &changes));
                let memo = (!whole_lists).then_some(&memo);
                assert_eq!(
                    trie.root_carried(&mut carry, memo),
                    expected,
                    "round {round} block {block}: {} base leaves, {} changes",
                    base.len(),
                    changes.len()
                );
                let list = leaf_changes(&changes, |k| system.contains(k));
                assert_eq!(trie.root_with(&list, None), expected);
            }
            if !changes.is_empty() {
                assert!(
                    !carry.nodes.nodes.is_empty(),
                    "round {round}: nothing was carried"
                );
            }
        }
    }
}
