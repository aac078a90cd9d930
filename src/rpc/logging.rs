//! Structured logs through `tracing`: `--log.format text` for people, `json` for log pipelines.
//! The level comes from `RUST_LOG` (default `info`).

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber. Safe to call more than once (later calls do nothing), so
/// tests and embedders need not care who initialised logging first.
pub fn init_logging(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _already_set = if format.eq_ignore_ascii_case("json") {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init()
    } else {
        builder.try_init()
    };
}
