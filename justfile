# simnode tasks. `cargo install just` if you don't have it.

# Run the node on the built-in dev chain (prints an API key and the HTTP/WS URLs).
run *ARGS:
    cargo run --release -- node --dev {{ARGS}}

# Every test: unit, end-to-end, conformance fixtures (what CI runs).
test:
    cargo test --workspace

# Every `.io` fixture under DIR (default ../shared/conformance/execution-apis; relative paths
# from the repository root; any folder of fixtures recorded on that chain works) replayed
# against a node on the imported chain, with a per-method table (served or not) and a short
# diff per failing file; then the reth trace_callMany fixtures. Fails if a fixture of a method
# simnode serves fails.
conformance DIR="":
    SIMNODE_CONFORMANCE_DIR="{{DIR}}" cargo test --test conformance every_fixture -- --nocapture
    cargo test --test trace_conformance -- --nocapture

fmt:
    cargo fmt --all

lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets

# The generator (src/bin/gen-testdata.rs) is deterministic: same bytes on every run, so a diff
# in testdata/ means the chain changed.
# Regenerate testdata/devchain.rlp and testdata/devchain.json.
testdata:
    cargo run --bin gen-testdata -- --out testdata

# Benchmarks; each part is its own recipe (bench-import, ...).
bench: bench-import bench-compare

# Generates 1 setup block + N full 60M-gas blocks (storage-writing calls and transfers to new
# accounts) on the bench genesis, then times `simnode import` of them into a fresh datadir.
# The chain goes to target/ (large; never commit it).
# Import throughput (Mgas/s) on a generated chain of N full blocks.
bench-import N="200":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build --release --bin simnode --bin gen-testdata
    # The chain is deterministic: regenerate it only when missing, of another length, or older
    # than the generator (generating costs about as much as importing).
    if [ ! -f target/bench-chain.json ] || [ target/release/gen-testdata -nt target/bench-chain.rlp ] \
        || [ "$(jq .blocks target/bench-chain.json)" != "$(( {{N}} + 1 ))" ]; then
        ./target/release/gen-testdata --bench {{N}} --out target/bench-chain.rlp
    fi
    datadir=$(mktemp -d -p target bench-datadir.XXXXXX)
    trap 'rm -rf "$datadir"' EXIT
    start=$(date +%s.%N)
    ./target/release/simnode import --chain target/bench-genesis.json --datadir "$datadir" target/bench-chain.rlp
    end=$(date +%s.%N)
    blocks=$(jq .blocks target/bench-chain.json)
    txs=$(jq .transactions target/bench-chain.json)
    gas=$(jq .gasUsed target/bench-chain.json)
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    awk -v b="$blocks" -v x="$txs" -v g="$gas" -v s="$start" -v e="$end" 'BEGIN { t = e - s;
        printf "import bench: %d blocks, %d transactions, %.1f Mgas in %.2f s: %.1f Mgas/s\n", b, x, g / 1e6, t, g / 1e6 / t }'

# simnode against anvil, same machine, same run, with the shared load kit (../shared/bench):
# eth_blockNumber, eth_simulateV1 (transfer; traceTransfers over 3 blocks; 16 blocks of 50 transfers), eth_getBlockReceipts
# (50-tx block), trace_callMany (simnode only). Prints a markdown table and peak RSS; see bench/run.sh
# for the environment knobs (BENCH_DURATION, BENCH_CONNS, SIMNODE_SHARED, BENCH_RESULTS, ...).
bench-compare:
    bash bench/run.sh
