#!/usr/bin/env bash
# A/B of two edge builds (or settings) in alternating runs, pinned as
# `PIN=1 benches/edge.sh` pins: the edge (`retail-media ingest`, embedded log, fresh
# RM_DATA_DIR each run) on CPU 0, `loadgen` (64 connections, distinct valid beacons)
# on CPU 1; ROUNDS rounds of A then B (B then A every other round). Prints each run
# and the medians of throughput and server CPU per request, with B/A ratios.
#
# Usage: benches/ab.sh A_BIN B_BIN      (A_ENV / B_ENV: extra VAR=value for each side,
#        space-separated; the same binary twice with different settings works too)
# Settings: ROUNDS=5 DURATION=8 WARMUP=2 CONNECTIONS=64 PORT=18191
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
A=$1 B=$2
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-8} WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-64} PORT=${PORT:-18191}
LOADGEN=${LOADGEN:-$ROOT/target/release/loadgen}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rm-ab.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

run() { # side bin env round
    local side=$1 bin=$2 extra=$3 round=$4
    rm -rf "$WORK/data"
    # shellcheck disable=SC2086
    taskset -c 0 env -u RM_KAFKA_BROKERS -u RM_CONFIG $extra RM_DATA_DIR="$WORK/data" \
        RM_INGEST_ADDR="127.0.0.1:$PORT" RM_LOG=warn NO_COLOR=1 "$bin" ingest >"$WORK/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break
        sleep 0.1
    done
    taskset -c 1 "$LOADGEN" --name "$side" --url "http://127.0.0.1:$PORT" --connections "$CONNECTIONS" \
        --warmup "$WARMUP" --duration "$DURATION" --server-pid "$PID" \
        --json "$WORK/$side-$round.json" >/dev/null 2>&1
    local hwm
    hwm=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$PID/status")
    kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""
    echo "$hwm" >"$WORK/$side-$round.hwm"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"{sys.argv[2]} round {sys.argv[3]}: {r['throughput_rps']:.0f} req/s, {1e6*r['server_cpu_s']/max(r['ok'],1):.1f} us CPU/req, VmHWM {sys.argv[4]} MiB\")" \
        "$WORK/$side-$round.json" "$side" "$round" "$hwm"
    sleep 1
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        run A "$A" "${A_ENV:-}" "$r"; run B "$B" "${B_ENV:-}" "$r"
    else
        run B "$B" "${B_ENV:-}" "$r"; run A "$A" "${A_ENV:-}" "$r"
    fi
done
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
m = {}
for side in "AB":
    runs = [json.load(open(f"{work}/{side}-{r}.json")) for r in range(1, rounds + 1)]
    m[side] = (statistics.median(r["throughput_rps"] for r in runs),
               statistics.median(1e6 * r["server_cpu_s"] / max(r["ok"], 1) for r in runs))
for side in "AB":
    print(f"{side}: median {m[side][0]:.0f} req/s, {m[side][1]:.1f} us CPU/req")
print(f"B/A: throughput {m['B'][0] / m['A'][0]:.2f}x, CPU per request {m['B'][1] / m['A'][1]:.2f}x")
PY
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
