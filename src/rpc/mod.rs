//! The RPC front door. (Being written: see issue 3.)

pub mod keys;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RpcArgs {
    #[arg(long = "http.addr", default_value = "127.0.0.1")]
    pub http_addr: std::net::IpAddr,
    #[arg(long = "http.port", default_value_t = 8545)]
    pub http_port: u16,
    /// Adds an API key for this run on top of the stored ones.
    #[arg(long = "api-key")]
    pub api_keys: Vec<String>,
    #[arg(long = "rpc.max-simulate-blocks", default_value_t = 16)]
    pub max_simulate_blocks: u64,
    #[arg(long = "rpc.gascap", default_value_t = 50_000_000)]
    pub gas_cap: u64,
}
