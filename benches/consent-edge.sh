#!/usr/bin/env bash
# The edge's throughput and CPU per beacon with consent strings decided and without
# (issue 25's benchmark), in one run of one binary: `off` (RM_TCF_VENDOR_ID unset:
# strings not evaluated, as before), `allowed` and `refused` (RM_TCF_VENDOR_ID=1234,
# every beacon that carries a string, half of them, carrying a real TC string made by
# the IAB's @iabtechlabtcf/core that allows our vendor, or that refuses it: decoded,
# then the tracking ids replaced by their daily keyed hashes), and bare hyper. Each
# server pinned to SERVER_CPU, the load generator to LOADGEN_CPU, alternating the
# targets for ROUNDS rounds; closed loop, CONNECTIONS keep-alive connections, every
# request a distinct beacon. Prints the medians.
#
# Usage: cargo build --release -p retail-media -p rm-benches && benches/consent-edge.sh
# Settings: ROUNDS=5 DURATION=8 WARMUP=2 CONNECTIONS=64 SERVER_CPU=0 LOADGEN_CPU=1
#           BIN=target/release/retail-media LOADGEN=target/release/loadgen
#           BARE=target/release/bare-hyper PORT=18090
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-8} WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-64} SERVER_CPU=${SERVER_CPU:-0} LOADGEN_CPU=${LOADGEN_CPU:-1}
BIN=${BIN:-$ROOT/target/release/retail-media}
LOADGEN=${LOADGEN:-$ROOT/target/release/loadgen}
BARE=${BARE:-$ROOT/target/release/bare-hyper}
PORT=${PORT:-18090}
VENDOR=1234
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

# Real strings, from the IAB's library (tests/js/tcf_strings.mjs).
[[ -d $ROOT/tests/js/node_modules/@iabtechlabtcf/core ]] ||
    npm ci --no-audit --no-fund --prefix "$ROOT/tests/js" >&2
(cd "$ROOT/tests/js" && node tcf_strings.mjs "$VENDOR") > "$WORK/strings.json"
string() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(c["tc"] for c in d["made"] if c["name"] == sys.argv[2]))' \
        "$WORK/strings.json" "$1"
}
ALLOWED=$(string "consented")
REFUSED=$(string "another vendor only")

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "consent-edge.sh: nothing listening on $PORT" >&2
    return 1
}

run() { # name consent-string vendor-env... -- server-command...
    local name=$1 consent=$2
    shift 2
    rm -rf "$WORK/data"
    taskset -c "$SERVER_CPU" env -u RM_KAFKA_BROKERS -u RM_CONFIG -u RM_TCF_VENDOR_ID \
        RM_DATA_DIR="$WORK/data" RM_INGEST_ADDR="127.0.0.1:$PORT" \
        RM_OPS_ADDR="127.0.0.1:$((PORT + 1))" RM_LOG=warn "$@" > "$WORK/$name.log" 2>&1 &
    local pid=$!
    wait_port
    local extra=()
    [[ -n $consent ]] && extra=(--consent-string "$consent")
    taskset -c "$LOADGEN_CPU" "$LOADGEN" --url "http://127.0.0.1:$PORT" --name "$name" \
        --connections "$CONNECTIONS" --duration "$DURATION" --warmup "$WARMUP" \
        --server-pid "$pid" --quiet --json "$WORK/$name-$round.json" "${extra[@]}" > /dev/null
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

for round in $(seq "$ROUNDS"); do
    run off "$ALLOWED" "$BIN" ingest
    run allowed "$ALLOWED" env RM_TCF_VENDOR_ID=$VENDOR "$BIN" ingest
    run refused "$REFUSED" env RM_TCF_VENDOR_ID=$VENDOR "$BIN" ingest
    run bare "" "$BARE" --addr "127.0.0.1:$PORT"
done

python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
NAMES = ("off", "allowed", "refused", "bare")
CACHE = {}
def runs(name):
    if name not in CACHE:
        CACHE[name] = [json.load(open(f"{work}/{name}-{r}.json")) for r in range(1, rounds + 1)]
    return CACHE[name]
def med(name, key):
    return statistics.median(r[key] for r in runs(name) if r.get(key) is not None)
for n in NAMES:
    for r in runs(n):
        r["cpu_us"] = r["server_cpu_s"] / max(r["ok"], 1) * 1e6
rps, cpu = "throughput_rps", "cpu_us"
rows = {n: (med(n, rps), med(n, cpu)) for n in NAMES}
print(f"{'target':8} {'req/s (median)':>15} {'server CPU us/req':>18}")
for n in NAMES:
    print(f"{n:8} {rows[n][0]:15,.0f} {rows[n][1]:18.2f}")
off = rows["off"]
for n in ("allowed", "refused"):
    r = rows[n]
    print(f"{n}/off: throughput {r[0] / off[0]:.3f}x, CPU per beacon {r[1] - off[1]:+.2f} us ({r[1] / off[1]:.3f}x)")
print("per round (req/s): " + "; ".join(
    f"{n}: " + ", ".join(f"{r[rps]:,.0f}" for r in runs(n)) for n in NAMES))
PY
