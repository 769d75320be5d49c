#!/usr/bin/env bash
# The edge's throughput and CPU per beacon before and after invalid-traffic
# classification (issue 15's benchmark), in one run: two prebuilt `retail-media`
# binaries (BEFORE: a build of the commit before classification, AFTER: one with it)
# and bare hyper, each pinned to CPU SERVER_CPU, the load generator on LOADGEN_CPU,
# alternating BEFORE, AFTER, bare hyper for ROUNDS rounds; closed loop, CONNECTIONS
# keep-alive connections, every request a distinct beacon carrying a desktop Chrome
# `User-Agent` (the agent most beacons carry, and the classifier's costliest common
# path: the whole agent is scanned by the bot patterns). Prints the medians.
#
# Usage: BEFORE=path/retail-media AFTER=path/retail-media benches/ivt-edge.sh
# Settings: ROUNDS=5 DURATION=8 WARMUP=2 CONNECTIONS=64 SERVER_CPU=0 LOADGEN_CPU=1
#           LOADGEN=target/release/loadgen BARE=target/release/bare-hyper PORT=18090
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${BEFORE:?BEFORE=path to the retail-media binary without classification}"
: "${AFTER:?AFTER=path to the retail-media binary with classification}"
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-8} WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-64} SERVER_CPU=${SERVER_CPU:-0} LOADGEN_CPU=${LOADGEN_CPU:-1}
LOADGEN=${LOADGEN:-$ROOT/target/release/loadgen}
BARE=${BARE:-$ROOT/target/release/bare-hyper}
PORT=${PORT:-18090}
UA='Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "ivt-edge.sh: nothing listening on $PORT" >&2
    return 1
}

run() { # name server-command...
    local name=$1
    shift
    rm -rf "$WORK/data"
    taskset -c "$SERVER_CPU" env -u RM_KAFKA_BROKERS -u RM_CONFIG RM_DATA_DIR="$WORK/data" RM_INGEST_ADDR="127.0.0.1:$PORT" \
        RM_OPS_ADDR="127.0.0.1:$((PORT + 1))" RM_LOG=warn "$@" > "$WORK/$name.log" 2>&1 &
    local pid=$!
    wait_port
    taskset -c "$LOADGEN_CPU" "$LOADGEN" --url "http://127.0.0.1:$PORT" --name "$name" \
        --connections "$CONNECTIONS" --duration "$DURATION" --warmup "$WARMUP" \
        --user-agent "$UA" --server-pid "$pid" --quiet --json "$WORK/$name-$round.json" > /dev/null
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

for round in $(seq "$ROUNDS"); do
    run before "$BEFORE" ingest
    run after "$AFTER" ingest
    run bare "$BARE" --addr "127.0.0.1:$PORT"
done

python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
CACHE = {}
def runs(name):
    if name not in CACHE:
        CACHE[name] = [json.load(open(f"{work}/{name}-{r}.json")) for r in range(1, rounds + 1)]
    return CACHE[name]
def med(name, key):
    return statistics.median(r[key] for r in runs(name) if r.get(key) is not None)
for n in ("before", "after", "bare"):
    for r in runs(n):
        r["cpu_us"] = r["server_cpu_s"] / max(r["ok"], 1) * 1e6
rps, cpu = "throughput_rps", "cpu_us"
rows = [(n, med(n, rps), med(n, cpu)) for n in ("before", "after", "bare")]
print(f"{'target':8} {'req/s (median)':>15} {'server CPU us/req':>18}")
for n, r, c in rows:
    print(f"{n:8} {r:15,.0f} {c:18.2f}")
b, a = rows[0], rows[1]
print(f"after/before: throughput {a[1] / b[1]:.3f}x, CPU per beacon {a[2] - b[2]:+.2f} us ({a[2] / b[2]:.3f}x)")
print("per round (req/s): " + "; ".join(
    f"{n}: " + ", ".join(f"{r[rps]:,.0f}" for r in runs(n)) for n in ("before", "after", "bare")))
PY
