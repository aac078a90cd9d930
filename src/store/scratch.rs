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
