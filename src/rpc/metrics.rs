//! Prometheus metrics (`--metrics ADDR` serves them at `http://ADDR/metrics`).
//!
//! Metric names, so dashboards can rely on them:
//! - `simnode_rpc_requests_total{method,transport,code}`: every JSON-RPC call; `code` is `ok` or
//!   the JSON-RPC error code. Methods the node does not have are counted as `method="unknown"`
//!   so that clients cannot blow up the label set.
//! - `simnode_rpc_errors_total{method,code}`: the error subset of the above.
//! - `simnode_rpc_request_duration_seconds{method}`: latency histogram per method.
//! - `simnode_rpc_key_requests_total{key}`: requests per API key id (never the key itself).
//! - `simnode_http_responses_total{status}`: HTTP statuses the front door answered with.
//! - `simnode_ws_connections`: open WebSocket connections.
//! - `simnode_head_block`, `simnode_import_gas_per_second`, `simnode_import_gas_total`: set by the
//!   node through [`set_head_block`] and [`record_block_gas`].
//! - `simnode_storage_trie_slots`, `simnode_storage_tries_dropped`: the storage tries the newest
//!   head keeps for state roots (`--cache.storage-slots`), set after each block through
//!   [`record_storage_tries`]; slots near the budget and a growing drop count say the budget is
//!   too small for the chain's working set.
//!
//! Without `--metrics` no recorder is installed and all of this costs a few no-op calls.

use std::{net::SocketAddr, time::Duration};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

pub const RPC_REQUESTS: &str = "simnode_rpc_requests_total";
pub const RPC_ERRORS: &str = "simnode_rpc_errors_total";
pub const RPC_DURATION: &str = "simnode_rpc_request_duration_seconds";
pub const KEY_REQUESTS: &str = "simnode_rpc_key_requests_total";
pub const HTTP_RESPONSES: &str = "simnode_http_responses_total";
pub const WS_CONNECTIONS: &str = "simnode_ws_connections";
pub const HEAD_BLOCK: &str = "simnode_head_block";
pub const IMPORT_GAS_RATE: &str = "simnode_import_gas_per_second";
pub const IMPORT_GAS_TOTAL: &str = "simnode_import_gas_total";
pub const STORAGE_TRIE_SLOTS: &str = "simnode_storage_trie_slots";
pub const STORAGE_TRIES_DROPPED: &str = "simnode_storage_tries_dropped";

/// Latency buckets: from a cache hit (100 µs) to a long trace (30 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Starts the Prometheus endpoint on `addr` and installs the global recorder. Call once per
/// process, from inside the tokio runtime.
pub fn install(addr: SocketAddr) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Full(RPC_DURATION.to_string()), LATENCY_BUCKETS)?
        .install()
        .map_err(|err| anyhow::anyhow!("cannot serve metrics on {addr}: {err}"))?;
    describe();
    Ok(())
}

fn describe() {
    metrics::describe_counter!(
        RPC_REQUESTS,
        "JSON-RPC calls by method, transport and result code"
    );
    metrics::describe_counter!(
        RPC_ERRORS,
        "JSON-RPC calls that failed, by method and error code"
    );
    metrics::describe_histogram!(
        RPC_DURATION,
        metrics::Unit::Seconds,
        "JSON-RPC call latency by method"
    );
    metrics::describe_counter!(KEY_REQUESTS, "JSON-RPC calls by API key id");
    metrics::describe_counter!(HTTP_RESPONSES, "HTTP responses of the RPC port by status");
    metrics::describe_gauge!(WS_CONNECTIONS, "Open WebSocket connections");
    metrics::describe_gauge!(HEAD_BLOCK, "Number of the canonical head block");
    metrics::describe_gauge!(
        IMPORT_GAS_RATE,
        "Gas per second of the last imported or executed block"
    );
    metrics::describe_counter!(IMPORT_GAS_TOTAL, "Gas of all imported or executed blocks");
    metrics::describe_gauge!(
        STORAGE_TRIE_SLOTS,
        "Storage slots the newest head keeps in memory as tries"
    );
    metrics::describe_gauge!(
        STORAGE_TRIES_DROPPED,
        "Storage tries dropped for --cache.storage-slots since the head's tries were built"
    );
}

/// The node calls this after each block with what its head's storage tries hold (`None`: the
/// head's tries are not cached, nothing to report).
pub fn record_storage_tries(kept: Option<crate::store::StorageTriesKept>) {
    if let Some(kept) = kept {
        metrics::gauge!(STORAGE_TRIE_SLOTS).set(kept.slots as f64);
        metrics::gauge!(STORAGE_TRIES_DROPPED).set(kept.dropped as f64);
    }
}

/// The node calls this when the canonical head moves.
pub fn set_head_block(number: u64) {
    metrics::gauge!(HEAD_BLOCK).set(number as f64);
}

/// The node calls this after executing a block: `gas` used, in `elapsed` wall time.
pub fn record_block_gas(gas: u64, elapsed: Duration) {
    metrics::counter!(IMPORT_GAS_TOTAL).increment(gas);
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        metrics::gauge!(IMPORT_GAS_RATE).set(gas as f64 / secs);
    }
}

pub(crate) fn http_response(status: u16) {
    metrics::counter!(HTTP_RESPONSES, "status" => status.to_string()).increment(1);
}
