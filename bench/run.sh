#!/usr/bin/env bash
# Side-by-side benchmark: simnode against anvil, same machine, same run, with the shared load kit.
#
#   bash bench/run.sh            (what `just bench-compare` and so `just bench` run)
#
# 1. builds the release binary; installs wrk (apt) and the pinned npm tools of bench/tools (anvil 1.7.1,
#    viem) into target/bench-tools if missing;
# 2. starts on loopback: simnode --dev, anvil, and a second simnode on the imported execution-apis chain;
# 3. prepares the same state on simnode --dev and anvil (bench/setup.js: the kit's Test.json contracts and
#    one block of 50 transactions), generates each node's payloads with the kit's gen_payloads.js;
#    adds this project's own payloads (bench/payloads: the same request for both nodes);
# 4. runs the kit's bench.sh case by case and connection count by connection count, alternating the nodes,
#    and prints a markdown table (req/s, ratio, p50/p99, errors) plus the peak RSS (VmHWM) of each process.
#
# Environment (all optional):
#   SIMNODE_SHARED      the shared folder                      (default: ../shared beside the repo)
#   BENCH_KIT           the load kit                            (default: $SIMNODE_SHARED/bench)
#   BENCH_EXECUTION_APIS  genesis.json, chain.rlp, headfcu.json (default: $SIMNODE_SHARED/conformance/execution-apis)
#   BENCH_TRACE_PAYLOADS  trace_callMany payloads               (default: modules/trace/bench)
#   BENCH_DURATION      seconds per wrk run                     (default: 8)
#   BENCH_CONNS         connection counts                       (default: "1 16")
#   BENCH_DEV_CASES     cases on simnode --dev and anvil        (default: see below)
#   BENCH_HIVE_CASES    cases on the execution-apis chain, simnode only (default: see below; set but
#                       empty: none, and the execution-apis node is not started)
#   BENCH_TOOLS         npm tools cache                         (default: target/bench-tools)
#   BENCH_OUT           where logs, payloads and wrk outputs go (default: target/bench-out/<date>)
#   BENCH_RESULTS       also write the markdown report to this file
#   BENCH_ROUNDS        rounds of every case (default: 1); with more, each row is the round with the median
#                       ratio (median req/s for the execution-apis cases) and shows the range over the rounds
#   BENCH_SKIP_BUILD=1  use target/release/simnode as it is
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${SIMNODE_SHARED:-$ROOT/../shared}"
KIT="${BENCH_KIT:-$SHARED/bench}"
EAPIS="${BENCH_EXECUTION_APIS:-$SHARED/conformance/execution-apis}"
TRACE_PAYLOADS="${BENCH_TRACE_PAYLOADS:-$ROOT/modules/trace/bench}"
DUR="${BENCH_DURATION:-8}"
ROUNDS="${BENCH_ROUNDS:-1}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "[bench] error: BENCH_ROUNDS must be a positive integer" >&2; exit 1; }
read -r -a CONNS <<< "${BENCH_CONNS:-1 16}"
DEV_CASES="${BENCH_DEV_CASES-e_blockNumber a_simulate_transfer b_simulate_trace3 f_simulate_16x50 d_getBlockReceipts50 c_trace_callMany2}"
HIVE_CASES="${BENCH_HIVE_CASES-hive_trace_callMany2_statediff hive_trace_callMany10_statediff hive_trace_callMany_nested3 hive_getBlockReceipts_block2}"
TOOLS="${BENCH_TOOLS:-$ROOT/target/bench-tools}"
OUT="${BENCH_OUT:-$ROOT/target/bench-out/$(date +%Y%m%d-%H%M%S)}"
SIMNODE="$ROOT/target/release/simnode"
API_KEY="bench0123456789abcdef0123456789ab"

log() { echo "[bench] $*" >&2; }
die() { echo "[bench] error: $*" >&2; exit 1; }

for f in "$KIT/bench.sh" "$KIT/post.lua" "$KIT/gen_payloads.js" "$KIT/contracts/Test.json"; do
  [ -f "$f" ] || die "load kit file $f missing (set SIMNODE_SHARED or BENCH_KIT)"
done
for f in genesis.json chain.rlp headfcu.json; do
  [ -f "$EAPIS/$f" ] || die "$EAPIS/$f missing (set BENCH_EXECUTION_APIS)"
done

# ---------------------------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------------------------
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  log "installing $* with apt-get"
  as_root apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}
command -v wrk >/dev/null || apt_install wrk
command -v curl >/dev/null || apt_install curl
command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
command -v jq >/dev/null || apt_install jq

ANVIL="$TOOLS/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
if ! cmp -s "$ROOT/bench/tools/package-lock.json" "$TOOLS/package-lock.json" || [ ! -x "$ANVIL" ] \
   || [ ! -d "$TOOLS/node_modules/viem" ]; then
  log "installing anvil and viem into $TOOLS (npm ci)"
  mkdir -p "$TOOLS"
  cp "$ROOT/bench/tools/package.json" "$ROOT/bench/tools/package-lock.json" "$TOOLS/"
  (cd "$TOOLS" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
export NODE_PATH="$TOOLS/node_modules"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  log "cargo build --release --bin simnode"
  (cd "$ROOT" && cargo build --release --bin simnode)
fi
[ -x "$SIMNODE" ] || die "$SIMNODE not built"

# ---------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
log "output in $OUT"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# wait_rpc NAME PID URL: until eth_chainId answers
wait_rpc() {
  local i
  for i in $(seq 1 600); do
    kill -0 "$2" 2>/dev/null || die "$1 exited early; see its log in $OUT"
    if curl -s -m 2 -X POST -H 'content-type: application/json' \
        --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$3" 2>/dev/null | grep -q '"result"'; then
      return 0
    fi
    sleep 0.1
  done
  die "$1 did not answer at $3 within 60 s"
}

SN_PORT=$(free_port); SN_AUTH=$(free_port); AV_PORT=$(free_port); HV_PORT=$(free_port); HV_AUTH=$(free_port)
SN_URL="http://127.0.0.1:$SN_PORT/v3/$API_KEY"
AV_URL="http://127.0.0.1:$AV_PORT"
HV_URL="http://127.0.0.1:$HV_PORT/v3/$API_KEY"
SN_ARGS=(--http.addr 127.0.0.1 --http.port "$SN_PORT" --authrpc.addr 127.0.0.1 --authrpc.port "$SN_AUTH"
         --datadir "$OUT/simnode-dev-datadir" --api-key "$API_KEY" --rpc.rate-limit 0 --rpc.rate-burst 1000000000)

# simnode --dev: interval mining while the state is prepared (so that 50 transactions share a block),
# then restarted on the same datadir in the default mode (a block per transaction: idle during the runs,
# as anvil's automine is).
log "simnode --dev on $SN_URL (setup run, --dev.block-time 2)"
"$SIMNODE" node --dev --dev.block-time 2 "${SN_ARGS[@]}" > "$OUT/simnode-dev-setup.log" 2>&1 &
SN_PID=$!; PIDS+=("$SN_PID")
log "anvil on $AV_URL"
"$ANVIL" --host 127.0.0.1 --port "$AV_PORT" --chain-id 1337 --silent > "$OUT/anvil.log" 2>&1 &
AV_PID=$!; PIDS+=("$AV_PID")

HV_PID=""
if [ -n "$HIVE_CASES" ]; then
log "importing the execution-apis chain for the hive_* cases"
rm -rf "$OUT/simnode-hive-datadir"
"$SIMNODE" import --chain "$EAPIS/genesis.json" --datadir "$OUT/simnode-hive-datadir" "$EAPIS/chain.rlp" \
  > "$OUT/simnode-hive-import.log" 2>&1 || { tail -20 "$OUT/simnode-hive-import.log" >&2; die "import failed"; }
node -e "console.log(require('crypto').randomBytes(32).toString('hex'))" > "$OUT/jwt.hex"
"$SIMNODE" node --chain "$EAPIS/genesis.json" --datadir "$OUT/simnode-hive-datadir" \
  --http.addr 127.0.0.1 --http.port "$HV_PORT" --authrpc.addr 127.0.0.1 --authrpc.port "$HV_AUTH" \
  --authrpc.jwtsecret "$OUT/jwt.hex" --api-key "$API_KEY" --rpc.rate-limit 0 --rpc.rate-burst 1000000000 \
  > "$OUT/simnode-hive.log" 2>&1 &
HV_PID=$!; PIDS+=("$HV_PID")
fi

wait_rpc "simnode --dev" "$SN_PID" "$SN_URL"
wait_rpc anvil "$AV_PID" "$AV_URL"
if [ -n "$HIVE_CASES" ]; then
  wait_rpc "simnode (execution-apis chain)" "$HV_PID" "$HV_URL"
  node "$ROOT/bench/setup.js" fcu "http://127.0.0.1:$HV_AUTH" "$OUT/jwt.hex" "$EAPIS/headfcu.json" >&2
fi

log "preparing state on anvil and simnode"
node "$ROOT/bench/setup.js" state "$AV_URL" "$KIT" "$OUT/state-anvil.json" anvil >&2
node "$ROOT/bench/setup.js" state "$SN_URL" "$KIT" "$OUT/state-simnode.json" interval >&2

kill "$SN_PID"; wait "$SN_PID" 2>/dev/null || true
"$SIMNODE" node --dev "${SN_ARGS[@]}" > "$OUT/simnode-dev.log" 2>&1 &
SN_PID=$!; PIDS+=("$SN_PID")
wait_rpc "simnode --dev" "$SN_PID" "$SN_URL"

# one copy of the kit per node: gen_payloads.js writes into the kit's own payloads/ folder
make_kit() { # DIR
  rm -rf "$1"; mkdir -p "$1/payloads"
  cp "$KIT/bench.sh" "$KIT/post.lua" "$KIT/gen_payloads.js" "$1/"
  cp -r "$KIT/contracts" "$1/"
  cp "$KIT"/payloads/*.json "$1/payloads/"
}
gen_payloads() { # KITDIR STATEJSON
  FROM=$(jq -r .from "$2") CALLER=$(jq -r .caller "$2") RECEIPTS_BLOCK=$(jq -r .block50 "$2") \
    node "$1/gen_payloads.js" >&2
}
make_kit "$OUT/kit-simnode"; gen_payloads "$OUT/kit-simnode" "$OUT/state-simnode.json"
make_kit "$OUT/kit-anvil";   gen_payloads "$OUT/kit-anvil" "$OUT/state-anvil.json"
# This project's own cases beside the kit's (bench/payloads: the same request for both nodes; the
# sender is the first dev account, which both fund).
cp "$ROOT"/bench/payloads/*.json "$OUT/kit-simnode/payloads/"
cp "$ROOT"/bench/payloads/*.json "$OUT/kit-anvil/payloads/"
make_kit "$OUT/kit-hive"
cp "$TRACE_PAYLOADS"/*.json "$OUT/kit-hive/payloads/" 2>/dev/null || log "no trace payloads in $TRACE_PAYLOADS"

# ---------------------------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------------------------
# node case conns rps p50 p99 rpc_errors socket_errors avg_bytes round node_cpu_us other_cpu_us idle_us
# (the last three: CPU time per answered request, of the node's process, of everything else on the
# machine (wrk, the kernel's work outside the node's threads), and idle CPU time)
RESULTS="$OUT/results.tsv"
: > "$RESULTS"

CLK_TCK=$(getconf CLK_TCK)
node_pid() { case "$1" in simnode) echo "$SN_PID" ;; anvil) echo "$AV_PID" ;; simnode-hive) echo "$HV_PID" ;; esac; }
# CPU ticks of a process, all its threads, user and system (fields 14 and 15 of /proc/PID/stat;
# counted after the command name, which may hold spaces)
proc_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# "busy idle" ticks of the whole machine (/proc/stat: user, nice, system, irq and softirq are busy,
# idle and iowait idle)
# (steal, time the hypervisor gave to other guests, is neither)
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6; exit }' /proc/stat; }

# run_one NODE URL KITDIR CASE CONNS
run_one() {
  local line rps p50 p99 rerr serr bytes reqs pid p0 p1 b0 i0 b1 i1 cpu
  if [ ! -f "$3/payloads/$4.json" ]; then log "no payload $4 for $1"; return 0; fi
  pid=$(node_pid "$1")
  p0=$(proc_ticks "$pid"); read -r b0 i0 <<< "$(machine_ticks)"
  line=$(CASES="$4" bash "$3/bench.sh" "$2" "$DUR" "$5" 2>&1 | grep -E "^$4 +c=" || true)
  p1=$(proc_ticks "$pid"); read -r b1 i1 <<< "$(machine_ticks)"
  reqs=$(sed -n 's/.*reqs=\([0-9]*\).*/\1/p' <<< "$line")
  # microseconds per request: the node, the rest of the machine, idle
  cpu=$(awk -v r="${reqs:-0}" -v t="$CLK_TCK" -v p=$((p1 - p0)) -v b=$((b1 - b0)) -v i=$((i1 - i0)) \
    'BEGIN { if (r > 0) printf "%.1f\t%.1f\t%.1f", p / t * 1e6 / r, (b - p) / t * 1e6 / r, i / t * 1e6 / r; else printf "-\t-\t-" }')
  rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<< "$line")
  p50=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<< "$line")
  p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<< "$line")
  rerr=$(sed -n 's/.*rpc_errors=\([0-9]*\).*/\1/p' <<< "$line")
  serr=$(sed -n 's/.*socket_errors=\([0-9]*\).*/\1/p' <<< "$line")
  bytes=$(sed -n 's/.*avg_resp_bytes=\([0-9]*\).*/\1/p' <<< "$line")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$4" "$5" "${rps:-0}" "${p50:--}" "${p99:--}" \
    "${rerr:--}" "${serr:--}" "${bytes:--}" "$ROUND" "$cpu" >> "$RESULTS"
  log "$(printf 'round %s %-8s %-34s c=%-3s %s' "$ROUND" "$1" "$4" "$5" "${line:-FAILED}" | cut -c1-200)"
}

# the anvil stand-in for a case simnode serves and anvil does not
anvil_case() { case "$1" in c_trace_callMany2) echo c2_batch_debug_traceCall2 ;; *) echo "$1" ;; esac; }

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)
flip=0
for ROUND in $(seq 1 "$ROUNDS"); do
  for c in $DEV_CASES; do
    for n in "${CONNS[@]}"; do
      if [ $flip = 0 ]; then
        run_one simnode "$SN_URL" "$OUT/kit-simnode" "$c" "$n"
        run_one anvil "$AV_URL" "$OUT/kit-anvil" "$(anvil_case "$c")" "$n"
      else
        run_one anvil "$AV_URL" "$OUT/kit-anvil" "$(anvil_case "$c")" "$n"
        run_one simnode "$SN_URL" "$OUT/kit-simnode" "$c" "$n"
      fi
      flip=$((1 - flip))
    done
  done
  for c in $HIVE_CASES; do
    for n in "${CONNS[@]}"; do run_one simnode-hive "$HV_URL" "$OUT/kit-hive" "$c" "$n"; done
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$(( $(date +%s) - START ))

hwm() { awk '/^VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
RSS_SN=$(hwm "$SN_PID"); RSS_AV=$(hwm "$AV_PID"); RSS_HV=$([ -n "$HV_PID" ] && hwm "$HV_PID" || echo -)

# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
get() { # NODE CASE CONNS FIELD(4..9, 11..13) [ROUND, default 1]
  awk -F'\t' -v n="$1" -v c="$2" -v k="$3" -v f="$4" -v r="${5:-1}" \
    '$1 == n && $2 == c && $3 == k && $10 == r { print $f; exit }' "$RESULTS"
}
# The round to report for a row, and the range over all rounds: "ROUND LOW HIGH". With two
# nodes (NODE2 set) the value is NODE's req/s over NODE2's, else NODE's req/s; the reported
# round is the one with the median value (the lower middle one for an even count).
pick_round() { # NODE CASE CONNS [NODE2 CASE2]
  awk -F'\t' -v n="$1" -v c="$2" -v k="$3" -v n2="${4:-}" -v c2="${5:-}" '
    $1 == n && $2 == c && $3 == k { mine[$10] = $4 }
    n2 != "" && $1 == n2 && $2 == c2 && $3 == k { theirs[$10] = $4 }
    END {
      m = 0
      for (r in mine) {
        if (n2 != "") { if (!(r in theirs) || theirs[r] <= 0) continue; v = mine[r] / theirs[r] } else v = mine[r]
        m++; val[m] = v; rnd[m] = r
      }
      if (m == 0) { print "1 - -"; exit }
      for (i = 2; i <= m; i++) for (j = i; j > 1 && val[j] < val[j-1]; j--) {
        t = val[j]; val[j] = val[j-1]; val[j-1] = t; t = rnd[j]; rnd[j] = rnd[j-1]; rnd[j-1] = t
      }
      print rnd[int((m + 1) / 2)], val[1], val[m]
    }' "$RESULTS"
}
fmt_rps() { [ -n "$1" ] && awk -v x="$1" 'BEGIN { if (x == 0) printf "failed"; else if (x >= 100) printf "%.0f", x; else printf "%.1f", x }' || echo "-"; }
label() {
  case "$1" in
    e_blockNumber) echo "eth_blockNumber" ;;
    a_simulate_transfer) echo "eth_simulateV1, one transfer" ;;
    b_simulate_trace3) echo "eth_simulateV1, traceTransfers, 3 blocks" ;;
    f_simulate_16x50) echo "eth_simulateV1, 16 blocks of 50 transfers (bench/payloads)" ;;
    d_getBlockReceipts50) echo "eth_getBlockReceipts, 50-tx block" ;;
    c_trace_callMany2) echo "trace_callMany, 2 calls (anvil: batch of 2 debug_traceCall)" ;;
    hive_trace_callMany2_statediff) echo "trace_callMany, 2 calls, trace+stateDiff (execution-apis chain)" ;;
    hive_trace_callMany10_statediff) echo "trace_callMany, 10 calls, trace+stateDiff (execution-apis chain)" ;;
    hive_trace_callMany_nested3) echo "trace_callMany, 3 nested calls (execution-apis chain)" ;;
    hive_getBlockReceipts_block2) echo "eth_getBlockReceipts, block 2, 59 txs (execution-apis chain)" ;;
    *) echo "$1" ;;
  esac
}
target() { # CASE CONNS -> "ratio:X" | "rps:X" | ""
  case "$1" in
    d_getBlockReceipts50) echo "ratio:3" ;;
    a_simulate_transfer|b_simulate_trace3) echo "ratio:2" ;;
    hive_trace_callMany_nested3) [ "$2" = 1 ] && echo "rps:2900" || { [ "$2" = 16 ] && echo "rps:6700"; } ;;
    *) echo "" ;;
  esac
}
errs() { # NODE CASE CONNS ROUND
  local r s; r=$(get "$1" "$2" "$3" 7 "$4"); s=$(get "$1" "$2" "$3" 8 "$4")
  [ -z "$r" ] && { echo "-"; return; }
  if [ "$s" = 0 ] || [ -z "$s" ]; then echo "$r"; else echo "$r (+$s socket)"; fi
}

# Where the machine's CPU went per answered request, in the rounds the first table reports. With
# the machine saturated (idle near zero) a node's rate is 1 / (its CPU + the rest's CPU) per
# request and CPU core, so twice anvil's rate leaves simnode (anvil's total) / 2 - (the rest's
# share with simnode) of CPU per request; at 1 connection the client waits on each answer and
# idle time is part of every request, so that budget does not apply.
cpu_table() {
  echo "CPU time per answered request, in µs (from /proc over each wrk run; \"rest\": wrk and the kernel's work"
  echo "outside the node's threads; the last column: the node CPU per request at which simnode would answer twice"
  echo "anvil's rate on a saturated machine, i.e. (anvil + its rest) / 2 - simnode's rest):"
  echo
  echo "| case | conns | simnode: node / rest / idle | anvil: node / rest / idle | simnode node CPU for 2x anvil |"
  echo "| --- | ---: | --- | --- | ---: |"
  local c n r a sn so si an ao ai need
  for c in $DEV_CASES; do
    a=$(anvil_case "$c")
    for n in "${CONNS[@]}"; do
      read -r r _ <<< "$(pick_round simnode "$c" "$n" anvil "$a")"
      sn=$(get simnode "$c" "$n" 11 "$r"); so=$(get simnode "$c" "$n" 12 "$r"); si=$(get simnode "$c" "$n" 13 "$r")
      an=$(get anvil "$a" "$n" 11 "$r"); ao=$(get anvil "$a" "$n" 12 "$r"); ai=$(get anvil "$a" "$n" 13 "$r")
      need=$(awk -v sn="$sn" -v so="$so" -v an="$an" -v ao="$ao" -v n="$n" 'BEGIN {
        if (sn == "" || an == "" || sn == "-" || an == "-") { print "-"; exit }
        if (n == 1) { print "(latency-bound)"; exit }
        v = (an + ao) / 2 - so; if (v <= 0) printf "none (rest alone is %.1f)", so; else printf "%.1f (now %.1f)", v, sn }')
      [ "$c" = c_trace_callMany2 ] && need="(not the same method)"
      echo "| $(label "$c") | $n | ${sn:--} / ${so:--} / ${si:--} | ${an:--} / ${ao:--} / ${ai:--} | $need |"
    done
  done
  for c in $HIVE_CASES; do
    for n in "${CONNS[@]}"; do
      read -r r _ <<< "$(pick_round simnode-hive "$c" "$n")"
      echo "| $(label "$c") | $n | $(get simnode-hive "$c" "$n" 11 "$r") / $(get simnode-hive "$c" "$n" 12 "$r") / $(get simnode-hive "$c" "$n" 13 "$r") | - | - |"
    done
  done
}

report() {
  echo "### simnode vs anvil (same machine, same run)"
  echo
  echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average before/after the runs: $LOAD_BEFORE / $LOAD_AFTER."
  echo "simnode release binary of $(date -u -r "$SIMNODE" '+%Y-%m-%d %H:%M UTC') (tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ', with uncommitted changes')), anvil $("$ANVIL" --version | head -1 | awk '{print $3}'); wrk -t1, ${DUR} s per run, kit: \`bench.sh\` of the shared load kit; nodes alternate run by run; ${ELAPSED} s of runs."
  echo
  if [ "$ROUNDS" -gt 1 ]; then
    echo "$ROUNDS rounds of every case; each row is the round with the median ratio (for the execution-apis cases the"
    echo "median req/s), and the range is over all rounds."
    echo
  fi
  echo "| case | conns | simnode req/s | anvil req/s | ratio | target | simnode p50 / p99 ms | anvil p50 / p99 ms | errors simnode / anvil |"
  echo "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |"
  local c n s a ratio t tgt met r lo hi range
  for c in $DEV_CASES; do
    for n in "${CONNS[@]}"; do
      read -r r lo hi <<< "$(pick_round simnode "$c" "$n" anvil "$(anvil_case "$c")")"
      s=$(get simnode "$c" "$n" 4 "$r"); a=$(get anvil "$(anvil_case "$c")" "$n" 4 "$r")
      ratio=$(awk -v s="$s" -v a="$a" 'BEGIN { if (s != "" && a != "" && a > 0) printf "%.2fx", s / a; else print "-" }')
      range=""
      [ "$ROUNDS" -gt 1 ] && [ "$lo" != - ] && range=$(awk -v l="$lo" -v h="$hi" 'BEGIN { printf " (%.2f-%.2fx)", l, h }')
      t=$(target "$c" "$n"); tgt="-"
      if [ "${t%%:*}" = ratio ]; then
        met=$(awk -v s="$s" -v a="$a" -v k="${t#*:}" 'BEGIN { print (a > 0 && s / a >= k) ? "met" : "MISSED" }')
        tgt=">= ${t#*:}x anvil: $met"
      fi
      ratio="$ratio$range"
      [ "$c" = c_trace_callMany2 ] && ratio="(not the same method)"
      echo "| $(label "$c") | $n | $(fmt_rps "$s") | $(fmt_rps "$a") | $ratio | $tgt | $(get simnode "$c" "$n" 5 "$r") / $(get simnode "$c" "$n" 6 "$r") | $(get anvil "$(anvil_case "$c")" "$n" 5 "$r") / $(get anvil "$(anvil_case "$c")" "$n" 6 "$r") | $(errs simnode "$c" "$n" "$r") / $(errs anvil "$(anvil_case "$c")" "$n" "$r") |"
    done
  done
  for c in $HIVE_CASES; do
    for n in "${CONNS[@]}"; do
      read -r r lo hi <<< "$(pick_round simnode-hive "$c" "$n")"
      s=$(get simnode-hive "$c" "$n" 4 "$r"); t=$(target "$c" "$n"); tgt="-"
      if [ "${t%%:*}" = rps ]; then
        met=$(awk -v s="$s" -v k="${t#*:}" 'BEGIN { print (s > k) ? "met" : "MISSED" }')
        tgt="> ${t#*:} (reth, kit README): $met"
      fi
      case "$c" in *trace*) a="(no trace_callMany)" ;; *) a="(not run: other chain)" ;; esac
      range="-"
      [ "$ROUNDS" -gt 1 ] && [ "$lo" != - ] && range=$(awk -v l="$lo" -v h="$hi" 'BEGIN { printf "(%.0f-%.0f req/s)", l, h }')
      echo "| $(label "$c") | $n | $(fmt_rps "$s") | $a | $range | $tgt | $(get simnode-hive "$c" "$n" 5 "$r") / $(get simnode-hive "$c" "$n" 6 "$r") | - | $(errs simnode-hive "$c" "$n" "$r") / - |"
    done
  done
  echo
  cpu_table
  echo
  echo "Peak RSS (VmHWM at the end of the run): simnode --dev $RSS_SN, anvil $RSS_AV, simnode on the execution-apis chain $RSS_HV."
  echo
  echo "Errors count responses with a non-200 status or an \`\"error\"\` member (the kit's post.lua). The reth figures are the"
  echo "kit README's (same kit, these machines), not measured in this run; anvil has no trace_callMany, so its row for"
  echo "the 2-call case is the kit's stand-in (a JSON-RPC batch of two debug_traceCall with callTracer on the same calls)."
  echo "States: $(jq -c '{block50, block50Txs, caller}' "$OUT/state-simnode.json") on simnode, $(jq -c '{block50, block50Txs, caller}' "$OUT/state-anvil.json") on anvil."
}
report > "$OUT/RESULTS.md"
cat "$OUT/RESULTS.md"
if [ -n "${BENCH_RESULTS:-}" ]; then cp "$OUT/RESULTS.md" "$BENCH_RESULTS"; log "report written to $BENCH_RESULTS"; fi
log "raw wrk outputs under $OUT/kit-*/results"
