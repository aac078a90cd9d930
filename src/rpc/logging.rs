//! Structured logs through `tracing`: `--log.format text` for people, `json` for log pipelines.
//! The level comes from `RUST_LOG` (default `info`). A dev node's `anvil_setLoggingEnabled`
//! turns them off and on again ([`set_enabled`]).

use std::sync::OnceLock;

use tracing_subscriber::{fmt, layer::SubscriberExt, reload, util::SubscriberInitExt, EnvFilter};

type FilterHandle = reload::Handle<EnvFilter, tracing_subscriber::Registry>;

/// The installed filter's handle and the directives it was built from.
static FILTER: OnceLock<(FilterHandle, String)> = OnceLock::new();

/// Installs the global subscriber. Safe to call more than once (later calls do nothing), so
/// tests and embedders need not care who initialised logging first.
pub fn init_logging(format: &str) {
    let directives = std::env::var("RUST_LOG")
        .ok()
        .filter(|d| EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| "info".to_string());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&directives));
    let registry = tracing_subscriber::registry().with(filter);
    let installed = if format.eq_ignore_ascii_case("json") {
        registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_writer(std::io::stderr),
            )
            .try_init()
    } else {
        // Colours only for a terminal: escape codes in a log file break grep and log shippers.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        registry
            .with(fmt::layer().with_ansi(ansi).with_writer(std::io::stderr))
            .try_init()
    };
    if installed.is_ok() {
        let _first = FILTER.set((handle, directives));
    }
}

/// Turns the node's logs off, or back on at the level they started with. Without a subscriber
/// of ours (another one was installed first) there is nothing to turn, and nothing happens.
pub fn set_enabled(enabled: bool) -> Result<(), String> {
    let Some((handle, directives)) = FILTER.get() else {
        return Ok(());
    };
    let filter = if enabled {
        EnvFilter::new(directives)
    } else {
        EnvFilter::new("off")
    };
    handle.reload(filter).map_err(|e| e.to_string())
}
