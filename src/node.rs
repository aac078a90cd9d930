//! Node start-up: wires chain spec, store, sync and the RPC server together.

use std::{path::PathBuf, sync::Arc};

use anyhow::Context;

use crate::{
    chain::{self, NodeChain},
    cli::{ChainArgs, NodeArgs},
    store::Store,
};

pub fn init_logging(_format: &str) {}

/// The datadir for `args`: the given one, or a per-chain folder.
pub fn datadir(args: &ChainArgs) -> PathBuf {
    if let Some(dir) = &args.datadir {
        return dir.clone();
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    let name = Path::new(&args.chain)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    base.join("simnode").join(name)
}

use std::path::Path;

pub fn open_store(args: &ChainArgs) -> anyhow::Result<(Arc<Store>, NodeChain)> {
    let chain = chain::load(&args.chain)?;
    let dir = datadir(args);
    let store = Store::open(&dir, Arc::new(chain.spec.clone()), chain.alloc.as_ref())
        .with_context(|| format!("opening the database in {}", dir.display()))?;
    Ok((Arc::new(store), chain))
}

pub fn run(_args: NodeArgs) -> anyhow::Result<()> {
    anyhow::bail!("node: not built yet")
}
