//! The command line: `simnode node | import | keys`. The contract is in DESIGN.md section 4.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "simnode",
    version,
    about = "An Ethereum execution node for simulation, tracing and receipts"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log output format.
    #[arg(long = "log.format", global = true, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

// Parsed once at startup: the size of the largest variant costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the node: RPC server, Engine API, and (with --dev) the dev miner.
    Node(NodeArgs),
    /// Import blocks from geth-exported RLP chain files.
    Import(ImportArgs),
    /// Manage the API keys stored in the datadir.
    Keys(crate::rpc::keys::KeysArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ChainArgs {
    /// dev, mainnet, sepolia, hoodi, or the path of a geth genesis.json.
    #[arg(long, default_value = "dev")]
    pub chain: String,
    /// Where the database lives. Defaults to a per-chain folder under the user's data dir
    /// (`node --dev` without --datadir: a temporary folder, removed when the node stops).
    #[arg(long)]
    pub datadir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Mine a block as soon as transactions wait (or every --dev.block-time seconds).
    #[arg(long)]
    pub dev: bool,
    /// Mine on this interval instead of per transaction (with --dev).
    #[arg(long = "dev.block-time", value_parser = clap::value_parser!(u64).range(1..), requires = "dev")]
    pub dev_block_time: Option<u64>,
    #[arg(long = "authrpc.addr", default_value = "127.0.0.1")]
    pub authrpc_addr: std::net::IpAddr,
    /// Engine API port [default: 8551; with --dev, a free port when 8551 is taken].
    #[arg(long = "authrpc.port")]
    pub authrpc_port: Option<u16>,
    /// Hex JWT secret file for the Engine API; created if missing.
    #[arg(long = "authrpc.jwtsecret")]
    pub authrpc_jwtsecret: Option<PathBuf>,
    /// Serve Prometheus metrics on this address.
    #[arg(long)]
    pub metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub rpc: crate::rpc::RpcArgs,
    #[command(flatten)]
    pub evm: EvmLimitArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// Memory the node keeps to compute state roots fast.
#[derive(Debug, Clone, Args)]
pub struct CacheArgs {
    /// Most storage slots kept in memory as tries, for the state roots of new and simulated
    /// blocks (about 120 bytes each); past it the least recently used tries are dropped and
    /// built again from the database when needed.
    #[arg(long = "cache.storage-slots", default_value_t = crate::store::DEFAULT_STORAGE_SLOTS_KEPT)]
    pub storage_slots: usize,
}

impl CacheArgs {
    /// Puts the limits in force (they hold for the whole process).
    pub fn apply(&self) {
        crate::store::set_storage_slots_kept(self.storage_slots);
    }
}

/// Limits of the EVM-running methods (eth_call, eth_simulateV1, trace_callMany, eth_getLogs).
#[derive(Debug, Clone, Args)]
pub struct EvmLimitArgs {
    /// Deadline of one eth_call / eth_simulateV1 / trace_callMany request, in milliseconds.
    #[arg(long = "rpc.evm-timeout", default_value_t = 5000)]
    pub evm_timeout_ms: u64,
    /// How long an eth_call / eth_simulateV1 / trace_callMany request may run on the RPC
    /// thread that received it, in microseconds; past it the request is restarted on the
    /// blocking pool (0: always the pool).
    #[arg(long = "rpc.evm-inline-us", default_value_t = 1000)]
    pub evm_inline_us: u64,
    /// Most calls in one trace_callMany request.
    #[arg(long = "rpc.max-trace-calls", default_value_t = 64)]
    pub max_trace_calls: usize,
    /// Most bytes of trace (call tree, vmTrace) one request may build.
    #[arg(long = "rpc.max-trace-bytes", default_value_t = 64 * 1024 * 1024)]
    pub max_trace_bytes: usize,
    /// Tracing requests running at once; more wait (within their deadline).
    #[arg(long = "rpc.max-concurrent-traces", default_value_t = 2)]
    pub max_concurrent_traces: usize,
    /// Widest block range of one eth_getLogs request. Default 10000, unlimited with --dev.
    #[arg(long = "rpc.max-logs-range")]
    pub max_logs_block_range: Option<u64>,
    /// Most logs one eth_getLogs answer may hold.
    #[arg(long = "rpc.max-logs", default_value_t = 20_000)]
    pub max_logs: usize,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// RLP files of concatenated blocks, as `geth export` writes them.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    crate::node::init_logging(&cli.log_format);
    match cli.command {
        Command::Node(args) => crate::node::run(args),
        Command::Import(args) => crate::sync::import::run(args),
        Command::Keys(args) => crate::rpc::keys::run(args),
    }
}
