#!/usr/bin/env bash
# Test of the client runner itself: with a proxy that flips `status` in eth_getBlockReceipts
# answers over HTTP (tests/clients/selftest-proxy.mjs), run.sh must exit non-zero, and the
# failures must be exactly the receipt checks over HTTP (WebSocket bypasses the proxy and
# every other check passes), so a broken receipt field cannot slip through CI.
set -uo pipefail
cd "$(dirname "$0")/../.."

out=$(mktemp)
trap 'rm -f "$out"' EXIT
SIMNODE_CLIENTS_UPSTREAM=tests/clients/selftest-proxy.mjs bash tests/clients/run.sh >"$out" 2>&1
rc=$?

problems=()
((rc != 0)) || problems+=("run.sh exited 0 with broken receipts")
expect() { grep -Eq -- "$1" "$out" || problems+=("missing in the output: $1"); }
# viem (spec reporter): each getBlockReceipts test fails over HTTP, pass over WebSocket.
for t in 'the transfer block' 'the deployment block, by block hash' 'the event block has the Stored log' \
    'a block with three transactions'; do
    expect "✖ getBlockReceipts: $t"
    expect "✔ getBlockReceipts: $t"
done
expect '✔ simulateBlocks'
expect 'ℹ pass 16$'
expect 'ℹ fail 4$'
# web3.py: the receipt tests fail over HTTP only; everything else passes.
expect 'test_block_receipts_transfer\[http\] FAILED'
expect 'test_block_receipts_deployment_by_hash\[http\] FAILED'
expect 'test_block_receipts_event\[http\] FAILED'
expect 'test_block_receipts_three_transactions\[http\] FAILED'
expect 'test_block_receipts_transfer\[ws\] PASSED'
expect 'test_simulate_v1\[http\] PASSED'
expect '4 failed, 15 passed'

if ((${#problems[@]})); then
    cat "$out"
    printf 'client runner self-test FAILED:\n' >&2
    printf '  %s\n' "${problems[@]}" >&2
    exit 1
fi
echo "client runner self-test passed: a flipped receipt status fails both suites (the 4 viem + 4 web3.py receipt tests over HTTP), nothing else does"
