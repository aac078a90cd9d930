//! Node start-up: wires chain spec, store, sync and the RPC server together.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use simnode_api::{ModuleContext, RpcLimits};

use anyhow::Context;

use crate::{
    chain::{self, NodeChain},
    cli::{ChainArgs, NodeArgs},
    pending::{NextBlockRules, NodeView, PendingBlocks},
    pool::Pool,
    rpc::{self, RpcConfig},
    store::{ChainOrigin, Store},
    sync::{
        dev,
        engine::{self, EngineApi},
        jwt::JwtSecret,
    },
};

/// How long shutdown waits for open requests to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Waits for `stopped` (a server finishing its requests in flight) at most `grace`: a client
/// that never sends the rest of its request would otherwise hold the node up for ever; past the
/// grace its connection is dropped with the server.
async fn stop_within(
    grace: Duration,
    server: &str,
    stopped: impl std::future::Future<Output = ()>,
) {
    if tokio::time::timeout(grace, stopped).await.is_err() {
        tracing::warn!(target: "simnode", grace_secs = grace.as_secs(), "{server} requests still open at shutdown: dropped");
    }
}

/// The Engine API's port when `--authrpc.port` is not given (geth's and reth's).
const DEFAULT_AUTHRPC_PORT: u16 = 8551;

/// Binds the Engine API's socket. A consensus client is configured with the port, so a taken
/// port is an error, except on a dev node not given one: its blocks come from its own miner, and
/// a second dev node beside the first (parallel test suites) should start with only
/// `--http.port` told apart. It then takes a free port, which it prints.
fn engine_listener(args: &NodeArgs) -> anyhow::Result<std::net::TcpListener> {
    let port = args.authrpc_port.unwrap_or(DEFAULT_AUTHRPC_PORT);
    let wanted = SocketAddr::new(args.authrpc_addr, port);
    match std::net::TcpListener::bind(wanted) {
        Ok(listener) => Ok(listener),
        Err(err)
            if err.kind() == std::io::ErrorKind::AddrInUse
                && args.dev
                && args.authrpc_port.is_none() =>
        {
            tracing::info!(target: "simnode", "port {port} is taken: the Engine API takes a free one");
            std::net::TcpListener::bind(SocketAddr::new(args.authrpc_addr, 0))
                .with_context(|| format!("cannot listen on {} for the Engine API", args.authrpc_addr))
        }
        Err(err) => Err(err).with_context(|| {
            format!("cannot listen on {wanted} for the Engine API (choose another with --authrpc.addr / --authrpc.port)")
        }),
    }
}

pub fn init_logging(format: &str) {
    crate::rpc::logging::init_logging(format);
}

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

pub fn open_store(args: &ChainArgs) -> anyhow::Result<(Arc<Store>, NodeChain)> {
    let chain = chain::load(&args.chain)?;
    let dir = datadir(args);
    let store = Store::open(&dir, Arc::new(chain.spec.clone()), chain.alloc.as_ref())
        .with_context(|| format!("opening the database in {}", dir.display()))?;
    Ok((Arc::new(store), chain))
}

/// Notes where the datadir's blocks come from, and refuses `--dev` on a followed chain: a dev
/// node would mine its own blocks onto it and mark them final, which no consensus client could
/// undo. (A datadir holding only its genesis may become either.)
fn record_origin(store: &Store, dir: &std::path::Path, dev: bool) -> anyhow::Result<()> {
    let origin = store.origin()?;
    let head = store.head().latest;
    match (dev, origin) {
        (true, Some(ChainOrigin::Followed)) if head > 0 => anyhow::bail!(
            "{} holds a chain imported or followed from a consensus client (head #{head}); \
             --dev would mine blocks onto it and mark them final for good. Run --dev on a copy \
             (cp -a) or on a new datadir",
            dir.display()
        ),
        (true, Some(ChainOrigin::Dev)) | (false, Some(_)) => Ok(()),
        (true, _) => Ok(store.set_origin(ChainOrigin::Dev)?),
        // A new datadir; one from before the origin was recorded whose every block is final
        // may be either, and stays unrecorded.
        (false, None) if head == 0 => Ok(store.set_origin(ChainOrigin::Followed)?),
        (false, None) => Ok(()),
    }
}

/// Says which `--rpc.allow-method` / `--rpc.deny-method` names serve nothing: a typo would
/// otherwise show only as a method still served, or still refused.
fn warn_about_method_flags(args: &rpc::RpcArgs, methods: &jsonrpsee::Methods) {
    for (flag, names) in [
        ("--rpc.allow-method", &args.allow_methods),
        ("--rpc.deny-method", &args.deny_methods),
    ] {
        for name in names.iter().filter(|name| methods.method(name).is_none()) {
            tracing::warn!(target: "simnode::rpc", method = %name, "{flag} names a method this node does not serve");
        }
    }
    for name in args
        .allow_methods
        .iter()
        .filter(|name| args.deny_methods.contains(name))
    {
        tracing::warn!(target: "simnode::rpc", method = %name, "both --rpc.allow-method and --rpc.deny-method name it: it is denied");
    }
}

pub fn run(mut args: NodeArgs) -> anyhow::Result<()> {
    // `--dev` without a datadir runs on a fresh temporary chain, like anvil.
    let temp_dir = if args.dev && args.chain.datadir.is_none() {
        let dir = std::env::temp_dir().join(format!("simnode-dev-{}", std::process::id()));
        args.chain.datadir = Some(dir.clone());
        Some(dir)
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(serve(args));
    if let Some(dir) = temp_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

async fn serve(args: NodeArgs) -> anyhow::Result<()> {
    args.cache.apply();
    let (store, chain) = open_store(&args.chain)?;
    let dir = datadir(&args.chain);
    record_origin(&store, &dir, args.dev)?;
    let spec = Arc::new(chain.spec.clone());
    let pool = Arc::new(if args.dev {
        Pool::default()
    } else {
        Pool::strict()
    });
    let limits = RpcLimits {
        gas_cap: RpcLimits::gas_cap_from_flag(args.rpc.gas_cap),
        max_simulate_blocks: args.rpc.max_simulate_blocks,
        evm_timeout: Duration::from_millis(args.evm.evm_timeout_ms),
        evm_inline_budget: Duration::from_micros(args.evm.evm_inline_us),
        max_trace_calls: args.evm.max_trace_calls,
        max_vm_trace_bytes: args.evm.max_trace_bytes,
        max_concurrent_traces: args.evm.max_concurrent_traces,
        max_logs_block_range: logs_range_limit(args.evm.max_logs_block_range, args.dev),
        max_logs: args.evm.max_logs,
        tx_sync_timeout: Duration::from_millis(args.rpc.tx_sync_timeout_ms),
        tx_sync_max_timeout: Duration::from_millis(args.rpc.tx_sync_max_timeout_ms),
        allow_unprotected_txs: args.rpc.allow_unprotected_txs || args.dev,
        anvil_compatible: args.dev,
        // A dev node takes what anvil takes: no fee cap, no least tip, unless asked.
        tx_fee_cap: match args.rpc.tx_fee_cap_ether {
            Some(ether) => RpcLimits::tx_fee_cap_from_ether(ether).map_err(anyhow::Error::msg)?,
            None if args.dev => 0,
            None => RpcLimits::default().tx_fee_cap,
        },
        min_tip: args.rpc.min_tip.unwrap_or(if args.dev {
            0
        } else {
            RpcLimits::default().min_tip
        }),
    };
    let dev_chain = args.dev.then(|| {
        let mode = match args.dev_block_time {
            Some(seconds) => dev::MiningMode::Interval(Duration::from_secs(seconds)),
            None => dev::MiningMode::Auto,
        };
        Arc::new(dev::DevChain::new(store.clone(), pool.clone(), mode))
    });
    let next_block = match &dev_chain {
        Some(dev_chain) => NextBlockRules::Dev(dev_chain.clone()),
        None => NextBlockRules::Synced,
    };
    let pending = PendingBlocks::new(store.clone(), pool.clone(), next_block);
    let ctx = ModuleContext {
        spec: spec.clone(),
        chain: Arc::new(NodeView::new(store.clone(), pending)),
        pool: pool.clone(),
        limits: Arc::new(limits),
    };
    if args.dev {
        // Before the server answers, so that no request sees the tags unset.
        dev::mark_head_final(&store)?;
    }
    let mut methods = rpc::modules::all_modules(&ctx)?;
    // Block building needs the executor, which modules do not see: the node adds it itself.
    methods
        .merge(crate::sync::testing::rpc_module(store.clone())?)
        .context("registering testing_buildBlockV1")?;
    // The node's keys are its own, as the executor is: the node adds their methods itself.
    let keys = if args.dev {
        crate::chain::dev_signing_keys()?
    } else {
        Vec::new()
    };
    // Set by the dev controls, read when sending: empty unless a dev node impersonates.
    let impersonation = Arc::new(rpc::accounts::Impersonation::default());
    let accounts = rpc::accounts::rpc_module(
        keys,
        impersonation.clone(),
        methods.clone(),
        ctx.clone(),
        store.clone(),
        args.dev,
    );
    methods
        .merge(accounts)
        .context("registering the accounts methods")?;
    if let Some(dev_chain) = &dev_chain {
        methods
            .merge(rpc::dev_controls::rpc_module(
                dev_chain.clone(),
                impersonation.clone(),
            ))
            .context("registering the dev controls")?;
    }

    // With keys in Redis the operator manages them there (`simnode keys add --keys-backend
    // redis`); a key created in the local file would not be accepted.
    let embedded_keys = args.rpc.keys_backend == rpc::KeysBackendKind::Embedded;
    let new_key = if args.dev && embedded_keys {
        rpc::keys::ensure_dev_key(&dir)?
    } else {
        None
    };
    warn_about_method_flags(&args.rpc, &methods);
    let mut config = RpcConfig::from_args(&args.rpc, Some(&dir), &spec.name, args.metrics);
    if args.dev && args.rpc.rate_limit.is_none() {
        // A dev node serves one developer's test suite, whose bursts (ethers batches a
        // hundred reads at a time) anvil and hardhat take without limit.
        config.default_limits.rps = 0;
    }
    config.health = Some(rpc::health::HealthSource(store.clone()));
    config.batch_timeout = Some(Duration::from_millis(args.evm.evm_timeout_ms));
    let mut tables = rpc::modules::MODULE_METHOD_PARAMS.to_vec();
    tables.push(crate::sync::testing::METHOD_PARAMS);
    tables.push(rpc::accounts::METHOD_PARAMS);
    if args.dev {
        tables.push(rpc::dev_controls::METHOD_PARAMS);
        tables.push(rpc::accounts::DEV_METHOD_PARAMS);
    }
    config.max_params = rpc::max_params::MaxParams::from_tables(&tables)?;
    config.max_params.verify_covers(&methods)?;
    let engine_eth = engine::eth_namespace(&methods)?;
    let engine_api = EngineApi::new(store.clone(), pool.clone());
    // A reorg a crash cut short is finished before anything reads the head.
    match engine_api.finish_interrupted_reorg() {
        Ok(None) => {}
        Ok(Some(head)) => {
            tracing::warn!(target: "simnode::engine", %head, "finished a reorg the last run was stopped in")
        }
        Err(err) => {
            tracing::warn!(target: "simnode::engine", error = %err.message(), "could not finish the reorg the last run was stopped in; the consensus client's next forkchoice settles the head")
        }
    }
    // Bound first: a taken port stops the node before anything is served.
    let engine_listener = engine_listener(&args)?;
    let server = rpc::start(config, methods).await?;
    rpc::metrics::set_head_block(store.head().latest);

    let secret_path = args
        .authrpc_jwtsecret
        .clone()
        .unwrap_or_else(|| dir.join("jwt.hex"));
    let secret = JwtSecret::load_or_create(&secret_path)?;
    let (engine, engine_local) = engine::start(engine_listener, secret, engine_api, engine_eth)?;

    let miner = dev_chain.map(|dev_chain| tokio::spawn(dev::run_miner(dev_chain)));

    println!(
        "simnode {} on chain {} (id {}), head #{}",
        env!("CARGO_PKG_VERSION"),
        spec.name,
        spec.chain_id,
        store.head().latest
    );
    println!("datadir: {}", dir.display());
    match &new_key {
        Some(key) => {
            println!("API key: {key}");
            println!("HTTP: {}", server.http_url(key));
            println!("WS:   {}", server.ws_url(key));
        }
        None => {
            println!("HTTP: {}", server.http_url("<API_KEY>"));
            println!("WS:   {}", server.ws_url("<API_KEY>"));
        }
    }
    println!(
        "Engine API: http://{engine_local} (JWT secret {})",
        secret_path.display()
    );

    rpc::shutdown_signal().await;
    tracing::info!(target: "simnode", "shutting down");
    if let Some(miner) = miner {
        miner.abort();
    }
    server.stop();
    let _ = engine.stop();
    stop_within(SHUTDOWN_GRACE, "RPC", server.stopped()).await;
    stop_within(SHUTDOWN_GRACE, "Engine API", engine.stopped()).await;
    drop(store);
    Ok(())
}

/// The widest eth_getLogs range: the flag's, else 10,000 blocks, or none on a dev node (anvil
/// and hardhat search any range: a test that mines past a timelock and then reads events from
/// block 0 should not fail there).
fn logs_range_limit(flag: Option<u64>, dev: bool) -> u64 {
    match (flag, dev) {
        (Some(blocks), _) => blocks,
        (None, true) => u64::MAX,
        (None, false) => RpcLimits::default().max_logs_block_range,
    }
}

#[cfg(test)]
mod logs_range_tests {
    #[test]
    fn a_dev_node_searches_any_range_unless_told() {
        assert_eq!(super::logs_range_limit(None, false), 10_000);
        assert_eq!(super::logs_range_limit(None, true), u64::MAX);
        assert_eq!(super::logs_range_limit(Some(50), true), 50);
        assert_eq!(super::logs_range_limit(Some(50), false), 50);
    }
}
