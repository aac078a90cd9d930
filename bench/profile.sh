#!/usr/bin/env bash
# Profiles a running node under load from one of the kit's payloads (perf, DWARF call graphs).
#   bash bench/profile.sh PID URL PAYLOAD.json [CONNS=16] [SECONDS=6] [ANCHOR...]
# Prints the top self-time functions, then for each ANCHOR (a substring of a function name) the share
# of samples under it and the functions directly below it. Leaves perf.data and the folded script in
# target/bench-profile/. Needs perf (apt-get install linux-perf) and wrk; the release binary keeps its
# symbols (profile.release has no strip), so names resolve without debug info.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PID=$1 URL=$2 PAYLOAD=$3 CONNS=${4:-16} SECS=${5:-6}; shift $(( $# < 5 ? $# : 5 ))
KIT="${BENCH_KIT:-${SIMNODE_SHARED:-$ROOT/../shared}/bench}"
OUT="$ROOT/target/bench-profile"; mkdir -p "$OUT"
BODY_FILE="$PAYLOAD" wrk -t1 -c"$CONNS" -d"$((SECS + 3))s" --latency -s "$KIT/post.lua" "$URL" > "$OUT/wrk.txt" 2>&1 &
WRK=$!
sleep 1
perf record -F 499 --call-graph dwarf,16384 -p "$PID" -o "$OUT/perf.data" -- sleep "$SECS" 2> "$OUT/perf-record.log"
wait "$WRK" || true
grep RESULT "$OUT/wrk.txt" || true
perf script -i "$OUT/perf.data" -F comm,tid,ip,sym 2>/dev/null > "$OUT/perf-script.txt"
perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | cut -c1-150 | head -25
for a in "$@"; do python3 "$ROOT/bench/perf_fold.py" "$OUT/perf-script.txt" "$a" 1 2>/dev/null | head -22 || true; done
