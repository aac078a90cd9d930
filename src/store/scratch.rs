//! A store on a directory of its own for unit tests. The directory goes when the value is
//! dropped, so a failing assertion (which unwinds) leaves nothing behind in the temp dir either.

use std::{ops::Deref, path::PathBuf, sync::Arc};

use alloy::genesis::Genesis;

use super::Store;

pub(crate) struct ScratchStore {
    store: Arc<Store>,
    dir: PathBuf,
}

impl ScratchStore {
    /// Opens a fresh store for `genesis`; `tag` names the directory so a leftover one (after a
    /// crash) says which test made it.
    pub(crate) fn open(tag: &str, genesis: &Genesis) -> Self {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("simnode-unit-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let chain = crate::chain::from_genesis(tag, genesis);
        let store = Store::open(&dir, Arc::new(chain.spec), chain.alloc.as_ref())
            .expect("opening a scratch store");
        Self {
            store: Arc::new(store),
            dir,
        }
    }
}

impl Deref for ScratchStore {
    type Target = Arc<Store>;

    fn deref(&self) -> &Arc<Store> {
        &self.store
    }
}

impl Drop for ScratchStore {
    fn drop(&mut self) {
        // Other `Arc`s may still hold the database open; on Unix the open file outlives its
        // directory entry, so removing now is safe and nothing is left once they go.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes (here threads) creating one datadir at once: one builds the database and
    /// the other finds it, locked or ready, but never a half-made file or a missing one.
    #[test]
    fn a_datadir_created_twice_at_once_is_made_once() {
        let chain = crate::chain::from_genesis("race", &crate::chain::dev_genesis());
        let spec = Arc::new(chain.spec);
        for round in 0..8 {
            let dir = std::env::temp_dir().join(format!(
                "simnode-unit-create-race-{}-{round}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let barrier = std::sync::Barrier::new(2);
            let results = std::thread::scope(|scope| {
                let open = || {
                    barrier.wait();
                    Store::open(&dir, spec.clone(), chain.alloc.as_ref()).map(drop)
                };
                let a = scope.spawn(open);
                let b = scope.spawn(open);
                [a.join().unwrap(), b.join().unwrap()]
            });
            assert!(results.iter().any(Result::is_ok), "{results:?}");
            for err in results.iter().filter_map(|r| r.as_ref().err()) {
                assert!(
                    matches!(err, crate::store::StoreError::InUse(_)),
                    "round {round}: {err}"
                );
            }
            // What was built opens, on its genesis.
            let store = Store::open(&dir, spec.clone(), None).expect("reopens");
            assert_eq!(store.head().latest, 0);
            let leftovers = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("chain.redb.new")
                })
                .count();
            assert_eq!(leftovers, 0);
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
