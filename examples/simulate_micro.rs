//! Times one `eth_simulateV1` request in-process, without the network: how long the simulation
//! itself takes (planning, EVM, roots, block JSON), averaged over many runs one after another.
//! Each run goes where the node would send it: on this thread when it fits the inline budget,
//! else on the module's EVM threads (where large blocks hand their body roots to an idle one).
//!
//!   cargo run --release --example simulate_micro -- DATADIR PAYLOAD.json [RUNS=20000] [CHAIN=dev]
//!
//! DATADIR is a node's datadir (copy it if the node is running: redb locks the file); PAYLOAD is
//! a JSON-RPC request of the load kit (its `params`) or the bare params array.

use std::{sync::Arc, time::Instant};

use anyhow::Context;
use simnode::{cli::ChainArgs, node, pool::Pool};
use simnode_api::{BlockParam, ModuleContext, RpcLimits};
use simnode_simulate::{types::SimulatePayload, Simulate};

// The node's allocator (src/main.rs), so the figure is the node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (datadir, payload) = match (args.get(1), args.get(2)) {
        (Some(d), Some(p)) => (d, p),
        _ => anyhow::bail!("usage: simulate_micro DATADIR PAYLOAD.json [RUNS] [CHAIN]"),
    };
    let runs: u32 = args.get(3).map_or(Ok(20_000), |r| r.parse())?;
    let chain = args.get(4).cloned().unwrap_or_else(|| "dev".into());
    let request: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(payload).context("reading the payload")?)?;
    let params = request.get("params").cloned().unwrap_or(request);
    let simulate_payload: SimulatePayload = serde_json::from_value(params[0].clone())?;
    let block: BlockParam = match params.get(1) {
        Some(b) => serde_json::from_value(b.clone())?,
        None => BlockParam::default(),
    };

    let (store, chain) = node::open_store(&ChainArgs {
        chain,
        datadir: Some(datadir.into()),
    })?;
    let ctx = ModuleContext {
        spec: Arc::new(chain.spec.clone()),
        chain: store,
        pool: Arc::new(Pool::default()),
        limits: Arc::new(RpcLimits::default()),
    };
    let simulate = Simulate::new(ctx);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let once = || runtime.block_on(simulate.simulate(simulate_payload.clone(), block));
    let first = once().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let bytes: usize = first.iter().map(|b| b.get().len()).sum();
    // Warm-up: caches of the head's tries, the system-call memo, the allocator.
    for _ in 0..runs / 10 {
        once().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    let start = Instant::now();
    for _ in 0..runs {
        once().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(runs);
    println!("{runs} runs: {per:.2} us per simulation ({bytes} bytes of blocks)");
    Ok(())
}
