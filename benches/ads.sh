#!/usr/bin/env bash
# Benchmark of POST /v1/ads/generate (issue 5): 1M products, 10k campaigns; target
# p99 < 5 ms at 1,000 req/s.
#
# 1. builds `retail-media` and `adsbench` (release);
# 2. generates the data once into $DATA (`adsbench gen`; kept between runs, out of
#    git; delete $DATA to regenerate);
# 3. starts `retail-media api --data-dir $DATA` on 127.0.0.1:$PORT and waits until
#    /readyz answers and the ads index serves the generated catalog;
# 4. runs, each $DURATION s after $WARMUP s: GET /healthz at $RATE req/s (the
#    same-session baseline), generate at $RATE req/s, then both closed loop
#    ($MAX_CONNECTIONS connections, max throughput);
# 5. `adsbench micro`: the phases of a request timed in process;
# 6. prints the table and writes benches/results/ads-<date>[-n].md (+ the run JSONs).
#
# Settings (environment): RATE=1000 DURATION=30 WARMUP=5 CONNECTIONS=32
#   MAX_CONNECTIONS=8 PORT=18181 DATA=/var/tmp/rm-adsbench/data SKIP_BUILD=1
#   SKIP_MICRO=1 MICRO_REQUESTS=5000 RESULTS_DIR=benches/results
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RATE=${RATE:-1000}
DURATION=${DURATION:-30}
WARMUP=${WARMUP:-5}
CONNECTIONS=${CONNECTIONS:-32}
MAX_CONNECTIONS=${MAX_CONNECTIONS:-8}
PORT=${PORT:-18181}
DATA=${DATA:-/var/tmp/rm-adsbench/data}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/benches/results}
BIN=$TARGET_DIR/release

log() { printf '\n=== %s\n' "$*" >&2; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "cargo build --release -p retail-media --bin retail-media -p rm-benches --bin adsbench"
    cargo build --release -p retail-media --bin retail-media -p rm-benches --bin adsbench
fi
if [ ! -f "$DATA/adsbench-shape.txt" ]; then
    log "adsbench gen --data-dir $DATA"
    mkdir -p "$DATA"
    "$BIN/adsbench" gen --data-dir "$DATA"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rm-ads-bench.XXXXXX")
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill "$PID"
        wait "$PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

log "retail-media api --data-dir $DATA on 127.0.0.1:$PORT (log: $WORK/api.log)"
# The demo data (client demo-client, campaigns) is what the load generator asks for.
RM_API_ADDR=127.0.0.1:$PORT RM_API_DEMO=true RM_LOG=${RM_LOG:-warn} "$BIN/retail-media" api --data-dir "$DATA" >"$WORK/api.log" 2>&1 &
PID=$!
API=http://127.0.0.1:$PORT
"$BIN/adsbench" wait --api "$API"

run() { # name route rate connections
    sleep 5 # let the previous run's backlog drain
    log "$1: $2 at rate $3 ($4 connections)"
    "$BIN/adsbench" run --api "$API" --name "$1" --route "$2" --rate "$3" \
        --connections "$4" --duration "$DURATION" --warmup "$WARMUP" \
        --server-pid "$PID" --quiet --json "$WORK/$1.json"
}
run healthz-rate healthz "$RATE" "$CONNECTIONS"
run generate-rate generate "$RATE" "$CONNECTIONS"
run healthz-max healthz 0 "$MAX_CONNECTIONS"
run generate-max generate 0 "$MAX_CONNECTIONS"
cleanup
PID=""

DATE=$(date -u +%Y-%m-%d)
OUT=$RESULTS_DIR/ads-$DATE.md
n=2
while [ -e "$OUT" ]; do OUT=$RESULTS_DIR/ads-$DATE-$n.md; n=$((n + 1)); done
{
    echo "# ads/generate benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "Command: \`RATE=$RATE DURATION=$DURATION WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS MAX_CONNECTIONS=$MAX_CONNECTIONS benches/ads.sh\` at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- api || echo ' (api with uncommitted changes)')"
    echo
    echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), shared; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "Data: $(cat "$DATA/adsbench-shape.txt")"
    echo
    "$BIN/adsbench" report "$WORK"/healthz-rate.json "$WORK"/generate-rate.json "$WORK"/healthz-max.json "$WORK"/generate-max.json
    if [ "${SKIP_MICRO:-0}" != 1 ]; then
        echo "In process (\`adsbench micro\`, one thread, no HTTP):"
        echo
        "$BIN/adsbench" micro --requests "${MICRO_REQUESTS:-5000}"
    fi
} | tee "$OUT"
for f in "$WORK"/*.json; do cp "$f" "${OUT%.md}-$(basename "$f")"; done
log "written $OUT"
