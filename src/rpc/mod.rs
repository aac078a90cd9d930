//! The RPC front door: one port serving JSON-RPC over HTTP (`POST /v3/<key>`) and WebSocket
//! (`GET /ws/v3/<key>`, upgrade), the way a hosted provider does.
//!
//! Everything that is not a method's own logic lives here, once:
//! - [`http_layer`]: path routing, API-key authentication, content type and body size checks,
//!   the 429 status for rate-limited answers, the WebSocket connection limit, and browsers'
//!   origins ([`cors`]);
//! - [`middleware`]: per-key rate limit and daily quota per call / batch item / WS message, the
//!   per-network method [`policy`], the [`max_params`] check, metrics and request logs;
//! - [`keys`]: the key file (`<datadir>/keys.redb`) and `simnode keys`;
//! - [`redis_keys`]: the same (plus usage counters) in Redis, shared by replicas, chosen with
//!   `--keys-backend redis`; [`backend`] is what the layers above talk to either way;
//! - [`metrics`], [`logging`] and [`health`] (`GET /health`, no key): the operator's view.
//!
//! The statuses and codes the front door answers with are tabled in [`error`].
//!
//! Start-up, as the node does it:
//! ```ignore
//! let mut config = rpc::RpcConfig::from_args(&args.rpc, Some(&datadir), &spec.name, args.metrics);
//! if args.dev { if let Some(key) = rpc::keys::ensure_dev_key(&datadir)? { /* print URLs */ } }
//! let methods = rpc::modules::all_modules(&ctx)?;
//! config.max_params = MaxParams::from_tables(rpc::modules::MODULE_METHOD_PARAMS)?;
//! config.max_params.verify_covers(&methods)?;
//! let server = rpc::start(config, methods).await?;
//! rpc::shutdown_signal().await;
//! server.stop();
//! server.stopped().await;
//! ```

pub mod accounts;
pub mod backend;
pub mod blob_args;
pub mod compression;
pub mod cors;
pub mod dev_controls;
pub mod error;
pub mod health;
pub mod http_layer;
pub mod idle;
pub mod ids;
pub mod keys;
pub mod limiter;
pub mod logging;
pub mod max_params;
pub mod metrics;
pub mod middleware;
pub mod modules;
pub mod param_errors;
pub mod policy;
pub mod raw_result;
pub mod redis_keys;
pub mod workers;

use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use clap::Args;
use jsonrpsee::server::{
    middleware::rpc::RpcServiceBuilder, BatchRequestConfig, Methods, PingConfig, ServerBuilder,
    ServerConfig, StopHandle,
};

pub use backend::{KeyBackend, KeysBackendKind};
pub use error::FrontDoorError;
pub use keys::{KeyRegistry, KeyStore};
pub use limiter::{EffectiveLimits, KeyLimits};
pub use logging::init_logging;
pub use policy::MethodPolicy;

const MIB: u32 = 1024 * 1024;

#[derive(Debug, Clone, Args)]
pub struct RpcArgs {
    #[arg(long = "http.addr", default_value = "127.0.0.1")]
    pub http_addr: IpAddr,
    #[arg(long = "http.port", default_value_t = 8545)]
    pub http_port: u16,
    /// Adds an API key for this run on top of the stored ones.
    #[arg(long = "api-key", value_parser = api_key_arg)]
    pub api_keys: Vec<String>,
    #[arg(long = "rpc.max-simulate-blocks", default_value_t = 16)]
    pub max_simulate_blocks: u64,
    /// Gas cap of calls (and the gas of a call that names none), and eth_simulateV1's
    /// request-wide budget; 0: no cap.
    #[arg(long = "rpc.gascap", default_value_t = 50_000_000)]
    pub gas_cap: u64,
    /// How long eth_sendRawTransactionSync waits for the receipt when the request names no
    /// wait, in milliseconds.
    #[arg(long = "rpc.tx-sync-timeout", default_value_t = 20_000)]
    pub tx_sync_timeout_ms: u64,
    /// The longest wait eth_sendRawTransactionSync grants a request, in milliseconds.
    #[arg(long = "rpc.tx-sync-max-timeout", default_value_t = 60_000)]
    pub tx_sync_max_timeout_ms: u64,
    /// Take legacy transactions signed without a chain id (pre-EIP-155) over
    /// eth_sendRawTransaction; refused by default (geth's flag), always taken with --dev.
    #[arg(long = "rpc.allow-unprotected-txs")]
    pub allow_unprotected_txs: bool,
    /// Most a transaction sent over RPC may pay for its gas at its fee cap, in ether (geth's
    /// flag); 0: no cap. Default 1, none with --dev.
    #[arg(long = "rpc.txfeecap")]
    pub tx_fee_cap_ether: Option<f64>,
    /// Least tip per gas (wei) the pool takes (geth's flag). Default 1, 0 with --dev.
    #[arg(long = "txpool.pricelimit")]
    pub min_tip: Option<u128>,

    /// Largest HTTP request body, and largest WebSocket message, in bytes.
    #[arg(long = "rpc.max-request-size", default_value_t = 5 * MIB, value_parser = at_least_one_u32())]
    pub max_request_size: u32,
    /// Largest response (a whole batch counts as one), in bytes.
    #[arg(long = "rpc.max-response-size", default_value_t = 50 * MIB, value_parser = at_least_one_u32())]
    pub max_response_size: u32,
    /// Most requests in one batch; a larger batch is answered with one error.
    #[arg(long = "rpc.max-batch-size", default_value_t = 100, value_parser = at_least_one_u32())]
    pub max_batch_size: u32,
    /// Most HTTP requests being served and WebSocket connections open, together; past it a
    /// request or upgrade is answered with HTTP 503 (-32005 "too many connections").
    #[arg(long = "rpc.max-connections", default_value_t = 500, value_parser = at_least_one_u32())]
    pub max_connections: u32,
    /// Seconds a request's body may take to arrive after its headers; past it the request is
    /// answered with HTTP 408 and its connection slot freed.
    #[arg(long = "http.read-timeout", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub read_timeout_secs: u64,
    /// Seconds a connection may carry nothing before it is closed (an HTTP keep-alive
    /// connection between requests; a WebSocket the server pings is never that quiet). At
    /// least twice --rpc.evm-timeout, so that no call is cut; 0: never.
    #[arg(long = "http.idle-timeout", default_value_t = 120)]
    pub idle_timeout_secs: u64,
    /// Most open WebSocket connections; more are refused with HTTP 503.
    #[arg(long = "ws.max-connections", default_value_t = 100, value_parser = at_least_one_u32())]
    pub max_ws_connections: u32,
    /// Threads serving RPC connections (each connection stays on one); 0: one per CPU core.
    #[arg(long = "rpc.threads", default_value_t = 0, value_parser = threads_arg)]
    pub threads: usize,
    /// Microseconds an RPC thread with a single connection stays awake after an answer,
    /// waiting for that client's next request, before it sleeps; 0: never spin.
    #[arg(long = "rpc.spin-us", default_value_t = 200)]
    pub spin_us: u64,
    /// Seconds between the server's WebSocket pings; a connection that misses three is closed.
    /// 0 turns pings off (clients' pings are still answered). At most a day.
    #[arg(long = "ws.ping-interval", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(..=MAX_PING_INTERVAL_SECS))]
    pub ws_ping_interval: u64,
    /// Browser origins allowed to call the HTTP endpoint (CORS), comma-separated, e.g.
    /// `https://app.example.com`; `*` any (the key in the path authenticates), `none` no CORS
    /// answers (browsers then refuse cross-origin calls).
    #[arg(long = "http.corsdomain", value_delimiter = ',', default_value = "*",
          value_parser = cors::parse_origin_flag)]
    pub cors_domains: Vec<String>,
    /// Browser origins allowed to open a WebSocket (the upgrade's Origin header), as
    /// --http.corsdomain; others get 403. Clients that send no Origin are not affected.
    #[arg(long = "ws.origins", value_delimiter = ',', default_value = "*",
          value_parser = cors::parse_origin_flag)]
    pub ws_origins: Vec<String>,
    /// Send answers as they are even to clients that accept gzip (by default answers of 1 KiB
    /// or more are gzipped for them).
    #[arg(long = "http.disable-compression")]
    pub disable_compression: bool,

    /// Default requests per second per API key (0 = unlimited); a key's own limit wins.
    /// Default 100, unlimited with --dev (a local test suite's bursts are not abuse).
    #[arg(long = "rpc.rate-limit")]
    pub rate_limit: Option<u32>,
    /// Default burst per API key (requests allowed at once after an idle period).
    #[arg(long = "rpc.rate-burst", default_value_t = 200)]
    pub rate_burst: u32,
    /// Default requests per UTC day per API key (0 = unlimited).
    #[arg(long = "rpc.daily-quota", default_value_t = 0)]
    pub daily_quota: u64,

    /// Serve this method even where the network policy switches it off (repeatable).
    #[arg(long = "rpc.allow-method", value_delimiter = ',')]
    pub allow_methods: Vec<String>,
    /// Do not serve this method on this run (repeatable): it answers -32601.
    #[arg(long = "rpc.deny-method", value_delimiter = ',')]
    pub deny_methods: Vec<String>,

    /// Where API keys, limits, quotas and usage live: this node's `keys.redb` (embedded), or
    /// Redis shared by several replicas (redis, needs --redis-url).
    #[arg(long = "keys-backend", value_enum, default_value_t = KeysBackendKind::Embedded)]
    pub keys_backend: KeysBackendKind,
    /// Redis for `--keys-backend redis`, e.g. redis://127.0.0.1:6379/0.
    #[arg(long = "redis-url", env = "SIMNODE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// While Redis is unreachable, keep serving keys this replica has already seen (unrevoked
    /// when last seen), limited by this replica alone. Default: refuse with 503 (fail closed).
    #[arg(long = "redis.fail-open")]
    pub redis_fail_open: bool,
}

impl Default for RpcArgs {
    fn default() -> Self {
        Self {
            http_addr: IpAddr::from([127, 0, 0, 1]),
            http_port: 8545,
            api_keys: Vec::new(),
            max_simulate_blocks: 16,
            gas_cap: 50_000_000,
            tx_sync_timeout_ms: 20_000,
            tx_sync_max_timeout_ms: 60_000,
            allow_unprotected_txs: false,
            tx_fee_cap_ether: None,
            min_tip: None,
            max_request_size: 5 * MIB,
            max_response_size: 50 * MIB,
            max_batch_size: 100,
            max_connections: 500,
            read_timeout_secs: 30,
            idle_timeout_secs: 120,
            max_ws_connections: 100,
            threads: 0,
            spin_us: 200,
            ws_ping_interval: 30,
            cors_domains: vec!["*".into()],
            ws_origins: vec!["*".into()],
            disable_compression: false,
            rate_limit: None,
            rate_burst: 200,
            daily_quota: 0,
            allow_methods: Vec::new(),
            deny_methods: Vec::new(),
            keys_backend: KeysBackendKind::Embedded,
            redis_url: None,
            redis_fail_open: false,
        }
    }
}

/// How many answers one WebSocket connection may have waiting to be read (see [`start`]).
pub const WS_UNREAD_ANSWERS: u32 = 32;

/// Everything [`start`] needs.
#[derive(Debug, Clone)]
pub struct RpcConfig {
    pub listen: SocketAddr,
    /// Where `keys.redb` lives; `None` serves only `cli_keys`.
    pub datadir: Option<PathBuf>,
    /// `ChainSpec::name`: picks the method policy.
    pub network: String,
    pub cli_keys: Vec<String>,
    pub default_limits: EffectiveLimits,
    pub max_request_size: u32,
    pub max_response_size: u32,
    pub max_batch_size: u32,
    pub max_connections: u32,
    pub read_timeout: Duration,
    /// How long a connection may carry nothing (see [`idle`]); `None`: for ever.
    pub idle_timeout: Option<Duration>,
    pub max_ws_connections: u32,
    /// RPC worker threads (see [`workers`]); at least one.
    pub threads: usize,
    /// How long a worker with one connection spins after an answer; zero: never.
    pub spin: Duration,
    pub ws_ping_interval: Option<Duration>,
    pub cors: cors::Origins,
    pub ws_origins: cors::Origins,
    pub compression: bool,
    pub policy: MethodPolicy,
    /// How many positional params each method takes; more are refused. Empty checks nothing
    /// (the node fills it from the modules' tables, see [`modules::all_modules`]).
    pub max_params: max_params::MaxParams,
    /// Serve Prometheus metrics here (the node's `--metrics`).
    pub metrics: Option<SocketAddr>,
    /// How often the key file is re-read.
    pub key_refresh: Duration,
    pub keys_backend: KeysBackendKind,
    pub redis_url: Option<String>,
    pub redis_fail_open: bool,
    /// The chain `GET /health` reports on (the node sets it); `None`: no `/health`.
    pub health: Option<health::HealthSource>,
    /// How long a batch's calls may run together (the node's `--rpc.evm-timeout`): a call
    /// past it is answered -32016 without running, so a batch is bounded like one call.
    /// `None`: each call has only its own limits.
    pub batch_timeout: Option<Duration>,
}

/// Requests per second per API key when neither the key nor `--rpc.rate-limit` says.
pub const DEFAULT_RATE_LIMIT: u32 = 100;

impl RpcConfig {
    pub fn from_args(
        args: &RpcArgs,
        datadir: Option<&std::path::Path>,
        network: &str,
        metrics: Option<SocketAddr>,
    ) -> Self {
        Self {
            listen: SocketAddr::new(args.http_addr, args.http_port),
            datadir: datadir.map(|d| d.to_path_buf()),
            network: network.to_string(),
            cli_keys: args.api_keys.clone(),
            default_limits: EffectiveLimits {
                rps: args.rate_limit.unwrap_or(DEFAULT_RATE_LIMIT),
                burst: args.rate_burst.max(1),
                daily_quota: args.daily_quota,
            },
            max_request_size: args.max_request_size,
            max_response_size: args.max_response_size,
            max_batch_size: args.max_batch_size,
            max_connections: args.max_connections,
            read_timeout: Duration::from_secs(args.read_timeout_secs),
            idle_timeout: (args.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(args.idle_timeout_secs)),
            max_ws_connections: args.max_ws_connections,
            threads: match args.threads {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            },
            spin: Duration::from_micros(args.spin_us),
            ws_ping_interval: (args.ws_ping_interval > 0)
                .then(|| Duration::from_secs(args.ws_ping_interval)),
            cors: cors::Origins::from_flag(&args.cors_domains),
            ws_origins: cors::Origins::from_flag(&args.ws_origins),
            compression: !args.disable_compression,
            policy: MethodPolicy::for_network(network, &args.allow_methods, &args.deny_methods),
            max_params: max_params::MaxParams::default(),
            metrics,
            key_refresh: Duration::from_secs(1),
            keys_backend: args.keys_backend,
            redis_url: args.redis_url.clone(),
            redis_fail_open: args.redis_fail_open,
            health: None,
            batch_timeout: None,
        }
    }
}

/// A running server. Dropping it stops the server as [`RpcServerHandle::stop`] does.
#[derive(Debug)]
pub struct RpcServerHandle {
    local_addr: SocketAddr,
    server: jsonrpsee::server::ServerHandle,
    keys: KeyBackend,
    refresh: Option<tokio::task::JoinHandle<()>>,
    /// Held until every connection has ended; dropping the last holder ends the threads.
    workers: Arc<workers::Workers>,
}

impl RpcServerHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn http_url(&self, key: &str) -> String {
        format!("http://{}/v3/{key}", self.local_addr)
    }

    pub fn ws_url(&self, key: &str) -> String {
        format!("ws://{}/ws/v3/{key}", self.local_addr)
    }

    pub fn keys(&self) -> &KeyBackend {
        &self.keys
    }

    /// Open connections of each RPC thread (HTTP and WebSocket).
    pub fn thread_connections(&self) -> Vec<usize> {
        self.workers.connections()
    }

    /// Stops accepting connections; requests in flight are finished ([`Self::stopped`] waits
    /// for them). Calling it twice is harmless.
    pub fn stop(&self) {
        if let Some(refresh) = &self.refresh {
            refresh.abort();
        }
        let _already_stopped = self.server.stop();
    }

    /// Resolves when the server has stopped and every connection has finished.
    pub async fn stopped(self) {
        // Every connection's service holds a stop handle: the channel closes when the accept
        // loop and the last connection are gone.
        self.server.stopped().await;
        drop(self.workers);
    }
}

/// Starts the server on `config.listen` with `methods` (the merged module methods). Also starts
/// the key-file refresh and, with `config.metrics`, the Prometheus endpoint.
pub async fn start(
    config: RpcConfig,
    methods: impl Into<Methods>,
) -> anyhow::Result<RpcServerHandle> {
    let methods: Methods = methods.into();

    if let Some(addr) = config.metrics {
        metrics::install(addr)?;
        tracing::info!(target: "simnode::rpc", %addr, "metrics at http://{addr}/metrics");
    }

    let keys = match config.keys_backend {
        KeysBackendKind::Embedded => {
            let datadir = config.datadir.clone();
            let cli_keys = config.cli_keys.clone();
            let defaults = config.default_limits;
            let registry = tokio::task::spawn_blocking(move || {
                KeyRegistry::new(datadir.as_deref(), &cli_keys, defaults)
            })
            .await
            .context("loading API keys")??;
            if registry.is_empty() {
                tracing::warn!(target: "simnode::rpc", "no API keys: every request will be refused (add one with `simnode keys add`)");
            }
            KeyBackend::Embedded(registry)
        }
        KeysBackendKind::Redis => {
            let url = config
                .redis_url
                .as_deref()
                .context("--keys-backend redis needs --redis-url")?;
            if !config.cli_keys.is_empty() {
                anyhow::bail!("--api-key works with the embedded key backend only; add keys to Redis with `simnode keys add NAME --keys-backend redis --redis-url URL`");
            }
            let redis =
                redis_keys::RedisKeys::new(url, config.default_limits, config.redis_fail_open)
                    .context("--redis-url")?;
            tracing::info!(target: "simnode::rpc", fail_open = config.redis_fail_open, "API keys, limits and usage in redis (keys in the datadir are not used)");
            let redis = Arc::new(redis);
            // Said at start, not at the first refused request.
            let probe = redis.clone();
            tokio::spawn(async move {
                if let Some(why) = probe.refusing_requests().await {
                    tracing::warn!(target: "simnode::rpc", %why, "redis does not answer: keyed requests get 503 and /health says error until it does");
                }
            });
            KeyBackend::Redis(redis)
        }
    };

    let mut server_config = ServerConfig::builder()
        .max_request_body_size(config.max_request_size)
        .max_response_body_size(config.max_response_size)
        // The front door counts requests and sockets itself and answers in JSON (jsonrpsee's
        // own refusal is a plain-text 429, which reads as a rate limit).
        .max_connections(u32::MAX)
        .set_id_provider(HexSubscriptionIds)
        // The front door answers an oversized batch as geth does (see `middleware`).
        .set_batch_request_config(BatchRequestConfig::Unlimited)
        // Answers a WebSocket client has not read yet: past these the connection's requests
        // wait. (jsonrpsee's 1,024 let one client that never reads hold gigabytes.)
        .set_message_buffer_capacity(WS_UNREAD_ANSWERS);
    server_config = match config.ws_ping_interval {
        Some(every) => server_config.enable_ws_ping(
            PingConfig::new()
                .ping_interval(every)
                .inactive_limit(every * 3)
                .max_failures(3),
        ),
        None => server_config.disable_ws_ping(),
    };

    let http = tower::ServiceBuilder::new().layer(http_layer::FrontDoorLayer::new(
        http_layer::FrontDoorConfig {
            keys: keys.clone(),
            health: config.health.clone(),
            cors: config.cors.clone(),
            ws_origins: config.ws_origins.clone(),
            compression: config.compression,
            max_request_body_size: config.max_request_size,
            max_response_body_size: config.max_response_size as usize,
            max_ws_connections: config.max_ws_connections as usize,
            max_connections: config.max_connections as usize,
            body_read_timeout: config.read_timeout,
        },
    ));
    let rpc = RpcServiceBuilder::new().layer(middleware::FrontDoorRpcLayer::new(
        keys.clone(),
        config.policy.clone(),
        config.max_params.clone(),
        methods.clone(),
        config.max_response_size,
        config.max_batch_size,
        config.batch_timeout,
    ));

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (choose another with --http.addr / --http.port)",
                config.listen
            )
        })?;
    let local_addr = listener.local_addr().context("reading the bound address")?;
    let services = ServerBuilder::default()
        .set_config(server_config.build())
        .set_http_middleware(http)
        .set_rpc_middleware(rpc)
        .to_service_builder();
    let workers = Arc::new(
        workers::Workers::start(config.threads, config.spin).context("starting RPC threads")?,
    );
    let (stop_handle, handle) = jsonrpsee::server::stop_channel();
    // No call may be cut for want of bytes on its connection while it runs.
    let idle = config
        .idle_timeout
        .map(|idle| idle.max(2 * config.batch_timeout.unwrap_or_default()));
    tokio::spawn(accept_connections(
        listener,
        workers.clone(),
        stop_handle,
        services,
        methods,
        idle,
    ));
    let refresh = keys
        .embedded()
        .map(|registry| registry.spawn_refresh(config.key_refresh));

    let denied: Vec<&str> = config.policy.denied().collect();
    tracing::info!(
        target: "simnode::rpc",
        addr = %local_addr,
        network = %config.network,
        keys = keys.embedded().map_or(0, |registry| registry.len()),
        threads = workers.len(),
        not_served = ?denied,
        "JSON-RPC on http://{local_addr}/v3/<key> and ws://{local_addr}/ws/v3/<key>"
    );
    Ok(RpcServerHandle {
        local_addr,
        server: handle,
        keys,
        refresh,
        workers,
    })
}

/// A size or count limit of 0 would refuse every request (0 means "no limit" nowhere here).
fn at_least_one_u32() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..)
}

/// Most `--rpc.threads`: far more than any machine has cores, and far fewer than the threads
/// a process may start.
const MAX_RPC_THREADS: usize = 1024;

fn threads_arg(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n <= MAX_RPC_THREADS => Ok(n),
        Ok(_) => Err(format!(
            "at most {MAX_RPC_THREADS} threads (0: one per CPU core)"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Most seconds between WebSocket pings: a day (three missed pings close a connection).
const MAX_PING_INTERVAL_SECS: u64 = 86_400;

/// An `--api-key` a URL can carry as its last path segment (`/v3/<KEY>`, not percent-decoded):
/// one that cannot would be a key no request can use.
fn api_key_arg(key: &str) -> Result<String, String> {
    // RFC 3986's unreserved characters: the ones every client sends as they are. Others are
    // percent-encoded by some clients and not by others, and the path is matched undecoded.
    let usable = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    // `.` and `..` are path segments clients resolve away (RFC 3986 §5.2.4) before sending.
    let dot_segment = key == "." || key == "..";
    if key.is_empty() || dot_segment || !key.chars().all(usable) {
        return Err(format!(
            "{key:?} cannot be sent in a URL path as /v3/<KEY>: use ASCII letters, digits, '-', '_', '.' or '~'"
        ));
    }
    Ok(key.to_string())
}

/// Subscription ids as geth makes them: `0x` and up to 32 random hex digits, a quantity.
#[derive(Debug)]
struct HexSubscriptionIds;

impl jsonrpsee::server::IdProvider for HexSubscriptionIds {
    fn next_id(&self) -> jsonrpsee::types::SubscriptionId<'static> {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            // No randomness from the OS (never seen): the clock's nanoseconds are unique enough
            // for ids that need only differ between one connection's subscriptions.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            bytes = nanos.to_be_bytes();
        }
        // A quantity, as geth makes them: no leading zero digits.
        let hex = alloy::primitives::hex::encode(bytes);
        let digits = match hex.trim_start_matches('0') {
            "" => "0",
            digits => digits,
        };
        jsonrpsee::types::SubscriptionId::Str(format!("0x{digits}").into())
    }
}

/// The front door's layers around jsonrpsee's services (see [`start`]).
type Services = jsonrpsee::server::TowerServiceBuilder<
    tower::layer::util::Stack<middleware::FrontDoorRpcLayer, tower::layer::util::Identity>,
    tower::layer::util::Stack<http_layer::FrontDoorLayer, tower::layer::util::Identity>,
>;

/// Accepts connections until the server is stopped and deals each to an RPC worker thread
/// (see [`workers`]). jsonrpsee's own accept loop would serve every connection on the runtime
/// it runs on; this is that loop with the dealing added.
async fn accept_connections(
    listener: tokio::net::TcpListener,
    workers: Arc<workers::Workers>,
    stop: StopHandle,
    services: Services,
    methods: Methods,
    idle: Option<Duration>,
) {
    let stopped = stop.clone().shutdown();
    tokio::pin!(stopped);
    loop {
        let (stream, _peer) = tokio::select! {
            () = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: pause instead of spinning on it.
                    tracing::debug!(target: "simnode::rpc", %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(target: "simnode::rpc", %err, "cannot set TCP_NODELAY");
        }
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(err) => {
                tracing::debug!(target: "simnode::rpc", %err, "cannot hand a connection over");
                continue;
            }
        };
        let service = services.clone().build(methods.clone(), stop.clone());
        let stop = stop.clone();
        workers.deal(stream, move |stream| async move {
            let (stream, activity) = idle::watched(stream);
            let serving =
                jsonrpsee::server::serve_with_graceful_shutdown(stream, service, stop.shutdown());
            let quiet = async {
                match idle {
                    Some(limit) => activity.idle_for(limit).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                served = serving => if let Err(err) = served {
                    tracing::debug!(target: "simnode::rpc", %err, "connection ended with an error");
                },
                () = quiet => tracing::debug!(target: "simnode::rpc", "closing an idle connection"),
            }
        });
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM; the node then stops the server and closes the store.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(target: "simnode::rpc", %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(target: "simnode::rpc", %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!(target: "simnode::rpc", "SIGINT: shutting down"),
        () = term => tracing::info!(target: "simnode::rpc", "SIGTERM: shutting down"),
    }
}

#[cfg(test)]
mod api_key_arg_tests {
    #[test]
    fn keys_a_url_cannot_carry_are_refused() {
        for bad in [
            "", "a/b", "a b", "x?y", "x#y", "50%", "tab\t", ".", "..", "ÄÖ", "a<b", "a{b", "a`b",
        ] {
            assert!(super::api_key_arg(bad).is_err(), "{bad:?}");
        }
        for good in ["mykey", "f7caa248-1b2c", "a_b.c", "...", "a~b"] {
            assert_eq!(super::api_key_arg(good).as_deref(), Ok(good));
        }
    }
}

#[cfg(test)]
mod subscription_id_tests {
    use jsonrpsee::server::IdProvider;

    /// Ids are quantities, as geth's: `0x` and no leading zero digit (a random 128-bit id
    /// starts with a zero nibble one time in sixteen).
    #[test]
    fn subscription_ids_have_no_leading_zeros() {
        for _ in 0..500 {
            let jsonrpsee::types::SubscriptionId::Str(id) = super::HexSubscriptionIds.next_id()
            else {
                panic!("a string id");
            };
            assert!(id.starts_with("0x") && !id.starts_with("0x0"), "{id}");
            assert!(id.len() <= 34, "{id}");
        }
    }
}
