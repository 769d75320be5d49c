#!/usr/bin/env bash
# CPU profile of the beacon edge under load, pinned as `PIN=1 benches/edge.sh` pins:
# `retail-media ingest` on its defaults (embedded log in a fresh RM_DATA_DIR) on CPU
# SERVER_CPU (0), `loadgen` (64 connections, distinct valid beacons) on LOADGEN_CPU
# (1); after WARMUP seconds, `perf record` samples the edge for SECONDS seconds.
# Prints the flat profile (self time by symbol) and the profile by component
# (benches/profile_components.py), and keeps perf.data in OUT.
#
# Usage: benches/profile_edge.sh [RM_BIN]     (default target/release/retail-media)
# Settings: SECONDS_=8 WARMUP=3 CONNECTIONS=64 FREQ=1999 OUT=/tmp/edge-profile PORT=18190
#           CALL_GRAPH=dwarf (or fp, or none) and any RM_* variable for the edge;
#           KAFKA=127.0.0.1:9092 profiles the edge on Kafka (a fresh topic) instead.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RM_BIN=${1:-$ROOT/target/release/retail-media}
LOADGEN=${LOADGEN:-$ROOT/target/release/loadgen}
SECS=${SECONDS_:-8}
WARMUP=${WARMUP:-3}
CONNECTIONS=${CONNECTIONS:-64}
FREQ=${FREQ:-1999}
OUT=${OUT:-/tmp/edge-profile}
PORT=${PORT:-18190}
SERVER_CPU=${SERVER_CPU:-0}
LOADGEN_CPU=${LOADGEN_CPU:-1}
CALL_GRAPH=${CALL_GRAPH:-dwarf}

mkdir -p "$OUT"
DATA=$(mktemp -d "${TMPDIR:-/tmp}/rm-edge-prof.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$DATA"
}
trap cleanup EXIT

if [ -n "${KAFKA:-}" ]; then
    LOG_ENV=(RM_KAFKA_BROKERS="$KAFKA" RM_INGEST_TOPIC="prof-$(date +%s)")
else
    LOG_ENV=(-u RM_KAFKA_BROKERS)
fi
taskset -c "$SERVER_CPU" env -u RM_CONFIG "${LOG_ENV[@]}" RM_DATA_DIR="$DATA" \
    RM_INGEST_ADDR="127.0.0.1:$PORT" RM_LOG="${RM_LOG:-warn}" NO_COLOR=1 \
    "$RM_BIN" ingest >"$OUT/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break
    sleep 0.1
done

taskset -c "$LOADGEN_CPU" "$LOADGEN" --name edge --url "http://127.0.0.1:$PORT" \
    --connections "$CONNECTIONS" --warmup "$WARMUP" --duration "$((SECS + 2))" \
    --server-pid "$PID" --json "$OUT/load.json" >"$OUT/load.txt" 2>&1 &
LG=$!
sleep "$((WARMUP + 1))"
case "$CALL_GRAPH" in
none) CG=() ;;
fp) CG=(-g) ;;
*) CG=(--call-graph "$CALL_GRAPH") ;;
esac
perf record -q -F "$FREQ" "${CG[@]}" -p "$PID" -o "$OUT/perf.data" -- sleep "$SECS" 2>/dev/null
wait "$LG"
cat "$OUT/load.txt" | tail -3
perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | grep '%' | sed "s/  *-  *-  *$//" | head -60 >"$OUT/flat.txt" || true
head -40 "$OUT/flat.txt" | cut -c1-120
if [ "$CALL_GRAPH" != none ]; then
    perf script -i "$OUT/perf.data" 2>/dev/null | python3 "$ROOT/benches/profile_components.py"
fi
