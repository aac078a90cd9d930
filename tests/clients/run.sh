#!/usr/bin/env bash
# Real-client end-to-end tests: viem (tests/clients/js) and web3.py (tests/clients/python)
# against a dev node (the release binary, or $SIMNODE_BIN), over HTTP and WebSocket; tests/clients.rs
# runs it and selftest.sh in `cargo test --workspace`.
#
#   bash tests/clients/run.sh            build release if needed, install both projects
#                                        (skipped when their lock files did not change),
#                                        start the node, run both suites, stop the node
#   bash tests/clients/run.sh js|python  one suite only
#
# Environment:
#   SIMNODE_BIN                use this binary instead of building target/release/simnode
#   SIMNODE_CLIENTS_UPSTREAM   (self-test) proxy the suites' HTTP traffic through this command,
#                              see tests/clients/selftest.sh
# Exits non-zero when a suite fails or the node cannot be started.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
suites=${1:-all}
case "$suites" in all | js | python) ;; *) echo "usage: $0 [all|js|python]" >&2; exit 2 ;; esac

t0=$(date +%s)
log() { printf '[clients %3ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- the binary ---------------------------------------------------------------------------
if [[ -n "${SIMNODE_BIN:-}" ]]; then
    bin=$SIMNODE_BIN
else
    log "cargo build --release --bin simnode (a no-op when up to date)"
    cargo build --release --bin simnode
    bin=$root/target/release/simnode
fi
[[ -x "$bin" ]] || { echo "no simnode binary at $bin" >&2; exit 1; }

# Installs are serialised: two runs at once must not rebuild the same venv under each other.
mkdir -p "$root/target"
exec 9>"$root/target/clients-install.lock"
flock 9

# --- the JS project: npm ci only when package-lock.json changed -----------------------------
if [[ $suites != python ]]; then
    js=$root/tests/clients/js
    want=$(hash_of "$js/package-lock.json"; node --version)
    if [[ "$(cat "$js/node_modules/.simnode-lock-hash" 2>/dev/null)" != "$want" ]]; then
        log "npm ci (tests/clients/js)"
        (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
        echo "$want" >"$js/node_modules/.simnode-lock-hash"
    fi
fi

# --- the Python venv under target/: pip install only when requirements.txt changed ----------
if [[ $suites != js ]]; then
    py=$root/tests/clients/python
    venv=$root/target/clients-venv
    python=$(command -v python3.11 || command -v python3)
    want=$(hash_of "$py/requirements.txt"; "$python" --version)
    if [[ "$(cat "$venv/.simnode-lock-hash" 2>/dev/null)" != "$want" ]]; then
        log "creating $venv and installing tests/clients/python/requirements.txt"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            --require-hashes --no-deps -r "$py/requirements.txt"
        echo "$want" >"$venv/.simnode-lock-hash"
    fi
fi

flock -u 9

# --- the node ----------------------------------------------------------------------------
key=clientse2e0123456789abcdef0123456
scratch=$(mktemp -d "$root/target/clients-run.XXXXXX")
node_pid=
proxy_pid=
cleanup() {
    set +e
    if [[ -n "$proxy_pid" ]]; then
        kill "$proxy_pid" 2>/dev/null
        wait "$proxy_pid" 2>/dev/null
    fi
    if [[ -n "$node_pid" ]]; then
        kill "$node_pid" 2>/dev/null || true
        wait "$node_pid" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

started=
for attempt in 1 2 3; do
    port=$(free_port)
    auth_port=$(free_port)
    rm -rf "$scratch/datadir"
    "$bin" node --dev --datadir "$scratch/datadir" --http.port "$port" --authrpc.port "$auth_port" \
        --api-key "$key" --rpc.rate-limit 1000 --rpc.rate-burst 1000 >"$scratch/node.log" 2>&1 &
    node_pid=$!
    for _ in $(seq 1 150); do
        if ! kill -0 "$node_pid" 2>/dev/null; then break; fi
        if curl -sf -m 2 -H 'Content-Type: application/json' \
            -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' \
            "http://127.0.0.1:$port/v3/$key" 2>/dev/null | grep -q '"result":"0x539"'; then
            started=1
            break
        fi
        sleep 0.1
    done
    [[ -n "$started" ]] && break
    log "node did not come up (attempt $attempt); log:"
    tail -n 20 "$scratch/node.log" >&2 || true
    kill "$node_pid" 2>/dev/null || true
    wait "$node_pid" 2>/dev/null || true
    node_pid=
done
[[ -n "$started" ]] || { echo "could not start simnode node" >&2; exit 1; }
export SIMNODE_HTTP_URL="http://127.0.0.1:$port/v3/$key"
export SIMNODE_WS_URL="ws://127.0.0.1:$port/ws/v3/$key"
log "simnode dev node (pid $node_pid) on $SIMNODE_HTTP_URL and $SIMNODE_WS_URL"

if [[ -n "${SIMNODE_CLIENTS_UPSTREAM:-}" ]]; then
    # Self-test hook: a fault-injecting proxy in front of the node's HTTP endpoint.
    proxy_port=$(free_port)
    SIMNODE_UPSTREAM="http://127.0.0.1:$port" PROXY_PORT=$proxy_port \
        node "$SIMNODE_CLIENTS_UPSTREAM" >"$scratch/proxy.log" 2>&1 &
    proxy_pid=$!
    for _ in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$proxy_port/" && break
        sleep 0.1
    done
    export SIMNODE_HTTP_URL="http://127.0.0.1:$proxy_port/v3/$key"
    log "HTTP traffic goes through $SIMNODE_CLIENTS_UPSTREAM on port $proxy_port"
fi

# --- the suites ----------------------------------------------------------------------------
failed=()
if [[ $suites != python ]]; then
    log "viem suite (node --test)"
    if ! (cd "$root/tests/clients/js" && node --test --test-concurrency=1 --test-reporter=spec test/); then
        failed+=(js)
    fi
fi
if [[ $suites != js ]]; then
    log "web3.py suite (pytest)"
    if ! (cd "$root/tests/clients/python" && "$venv/bin/python" -m pytest -v -p no:cacheprovider); then
        failed+=(python)
    fi
fi

if ((${#failed[@]})); then
    log "FAILED: ${failed[*]}; last lines of the node log:"
    tail -n 40 "$scratch/node.log" >&2 || true
    exit 1
fi
log "both client suites passed"
