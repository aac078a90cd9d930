# simnode tasks. `cargo install just` if you don't have it.

# Run the node on the built-in dev chain (prints an API key and the HTTP/WS URLs).
run *ARGS:
    cargo run --release -- node --dev {{ARGS}}

# Every test: unit, end-to-end, conformance fixtures (what CI runs).
test:
    cargo test --workspace

# Conformance fixtures only (execution-apis, reth trace_callMany), with a per-method table.
conformance DIR="":
    SIMNODE_CONFORMANCE_DIR={{DIR}} cargo test --test conformance --test simulate_conformance --test trace_conformance -- --nocapture

fmt:
    cargo fmt --all

lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets
