//! Counted shares of a limit, held per owner (an API key, a connection) and given back when
//! dropped: what one customer holds of something every customer needs.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, Mutex},
};

/// How much of a limit each owner holds.
#[derive(Debug)]
pub struct Shares<K: Eq + Hash> {
    held: Arc<Mutex<HashMap<K, usize>>>,
}

impl<K: Eq + Hash> Default for Shares<K> {
    fn default() -> Self {
        Self {
            held: Arc::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> Shares<K> {
    /// `amount` more for `owner` if it then holds at most `limit`; else `Err` with what it
    /// would have held.
    pub fn take(&self, owner: &K, amount: usize, limit: usize) -> Result<Share<K>, usize> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let would = held.get(owner).copied().unwrap_or(0).saturating_add(amount);
        if would > limit {
            return Err(would);
        }
        held.insert(owner.clone(), would);
        Ok(Share {
            held: self.held.clone(),
            owner: owner.clone(),
            amount,
        })
    }
}

/// One owner's share, given back when dropped.
#[derive(Debug)]
pub struct Share<K: Eq + Hash> {
    held: Arc<Mutex<HashMap<K, usize>>>,
    owner: K,
    amount: usize,
}

impl<K: Eq + Hash> Drop for Share<K> {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.owner) {
            *count = count.saturating_sub(self.amount);
            if *count == 0 {
                held.remove(&self.owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_bounded_per_owner_and_come_back() {
        let shares = Shares::default();
        let first = shares.take(&"a", 3, 4).unwrap();
        assert_eq!(shares.take(&"a", 2, 4).err(), Some(5));
        let _b = shares.take(&"b", 4, 4).unwrap();
        drop(first);
        let _again = shares.take(&"a", 4, 4).unwrap();
    }
}
