//! A least-recently-used cache of serialized responses, bounded by the bytes it holds.
//!
//! Keyed by block hash: a hash fixes a block's content, so an entry never goes stale; a
//! reorg only changes which hash a number resolves to, which is looked up on every request.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use alloy::primitives::B256;
use simnode_api::raw_answer::SharedJson;

struct Entry {
    /// Cloning it is a reference count, not a copy of the text.
    value: SharedJson,
    tick: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<B256, Entry>,
    /// tick -> key, oldest first.
    order: BTreeMap<u64, B256>,
    bytes: usize,
    next_tick: u64,
}

pub struct ResponseCache {
    inner: Mutex<Inner>,
    max_bytes: usize,
}

impl ResponseCache {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_bytes,
        }
    }

    pub fn get(&self, key: &B256) -> Option<SharedJson> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *guard;
        let tick = inner.next_tick;
        let entry = inner.entries.get_mut(key)?;
        inner.order.remove(&entry.tick);
        entry.tick = tick;
        inner.order.insert(tick, *key);
        inner.next_tick += 1;
        Some(entry.value.clone())
    }

    pub fn insert(&self, key: B256, value: SharedJson) {
        let size = value.get().len();
        if size > self.max_bytes {
            return;
        }
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *guard;
        if let Some(old) = inner.entries.remove(&key) {
            inner.order.remove(&old.tick);
            inner.bytes -= old.value.get().len();
        }
        while inner.bytes + size > self.max_bytes {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some(old) = inner.entries.remove(&oldest) {
                inner.bytes -= old.value.get().len();
            }
        }
        let tick = inner.next_tick;
        inner.next_tick += 1;
        inner.order.insert(tick, key);
        inner.entries.insert(key, Entry { value, tick });
        inner.bytes += size;
    }

    /// Bytes currently held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> SharedJson {
        SharedJson::new(serde_json::value::RawValue::from_string(s.to_owned()).unwrap())
    }

    #[test]
    fn evicts_least_recently_used_within_bound() {
        let cache = ResponseCache::new(20);
        let (a, b, c) = (
            B256::with_last_byte(1),
            B256::with_last_byte(2),
            B256::with_last_byte(3),
        );
        cache.insert(a, raw("\"aaaaaaa\"")); // 9 bytes
        cache.insert(b, raw("\"bbbbbbb\""));
        assert_eq!(cache.bytes(), 18);
        assert!(cache.get(&a).is_some()); // a is now most recent
        cache.insert(c, raw("\"ccccccc\""));
        assert!(cache.get(&b).is_none(), "b was least recently used");
        assert_eq!(cache.get(&a).unwrap().get(), "\"aaaaaaa\"");
        assert!(cache.get(&c).is_some());
        assert_eq!(cache.bytes(), 18);
        cache.insert(B256::ZERO, raw(&format!("\"{}\"", "x".repeat(40))));
        assert_eq!(cache.len(), 2, "an entry over the bound is not cached");
    }
}
