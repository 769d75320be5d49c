#!/usr/bin/env bash
# Beacon edge benchmark: the edge on the embedded log, the edge on Kafka, a bare
# hyper server (the ceiling) and nginx empty_gif with an access log (what a user
# would run instead), measured in one run with the same load generator and the same
# distinct beacon URLs.
#
# For each target: a closed-loop max-throughput run (CONNECTIONS keep-alive
# connections, DURATION seconds after WARMUP seconds), then an open-loop run at
# RATE_FRACTION of that target's measured max for RATE_DURATION seconds (latency
# from the scheduled send time, so no coordinated omission). Prints the comparison
# and writes it to benches/results/edge-<date>.md and .json.
#
# Usage: benches/edge.sh            (from anywhere; builds release binaries first)
#        PIN=1 benches/edge.sh      pinned mode (issue 17's method): each server on CPU
#                                   SERVER_CPU (0), the load generator on LOADGEN_CPU (1),
#                                   ROUNDS (5) closed-loop runs per target alternating
#                                   the targets, the median run kept; the open-loop run at
#                                   RATE_FRACTION x that median
# Settings (environment):
#   CONNECTIONS=64 DURATION=15 WARMUP=3 RATE_DURATION=15 RATE_FRACTION=0.5
#   RATE_CONNECTIONS=$CONNECTIONS   connections of the open-loop run (each holds one
#                               request at a time, so the rate needs
#                               RATE_CONNECTIONS / latency >= rate to keep up)
#   LOADGEN_THREADS=1           load-generator worker threads
#   TARGETS="edge-embedded edge-kafka bare-hyper nginx-empty-gif"
#   RM_KAFKA_BROKERS=127.0.0.1:9092   broker for edge-kafka (fresh topic bench-<time>)
#   KAFKA_WARMUP=30             unmeasured seconds of load on edge-kafka first (warms the
#                               brokers' JVMs; 0 skips it)
#   PORT_BASE=18080             targets listen on PORT_BASE..PORT_BASE+3
#   NGINX=/usr/sbin/nginx
#   RM_BIN=path                 a prebuilt retail-media (skips building it)
#   SKIP_BUILD=1                use the binaries already in the target dir
#   RESULTS_DIR=benches/results KEEP_WORK=1 (keep the temp dir with logs and runs)
# Other RM_* variables (RM_INGEST_MAX_INFLIGHT, RM_KAFKA_LINGER_MS, ...) reach the edge.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-3}
RATE_DURATION=${RATE_DURATION:-15}
RATE_FRACTION=${RATE_FRACTION:-0.5}
RATE_CONNECTIONS=${RATE_CONNECTIONS:-$CONNECTIONS}
LOADGEN_THREADS=${LOADGEN_THREADS:-1}
KAFKA_WARMUP=${KAFKA_WARMUP:-30}
PIN=${PIN:-0}
SERVER_CPU=${SERVER_CPU:-0}
LOADGEN_CPU=${LOADGEN_CPU:-1}
if [ "$PIN" = 1 ]; then ROUNDS=${ROUNDS:-5}; else ROUNDS=${ROUNDS:-1}; fi
PIN_NOTE=""
# The edge as `retail-media ingest` starts it in pinned mode (issue 17 measures the
# defaults, inspector included); otherwise the inspector off unless set.
if [ -n "${RM_INGEST_INSPECTOR:-}" ]; then
    INSPECTOR_ENV=(RM_INGEST_INSPECTOR="$RM_INGEST_INSPECTOR")
elif [ "$PIN" = 1 ]; then
    INSPECTOR_ENV=()
else
    INSPECTOR_ENV=(RM_INGEST_INSPECTOR=off)
fi
[ "$PIN" = 1 ] && PIN_NOTE=" (pinned: server CPU $SERVER_CPU, load generator CPU $LOADGEN_CPU)"
TARGETS=${TARGETS:-"edge-embedded edge-kafka bare-hyper nginx-empty-gif"}
KAFKA_BROKERS=${RM_KAFKA_BROKERS:-127.0.0.1:9092}
PORT_BASE=${PORT_BASE:-18080}
NGINX=${NGINX:-/usr/sbin/nginx}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/benches/results}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
DATE=$(date -u +%Y-%m-%d)
COMMAND="benches/edge.sh${*:+ $*}"
for v in CONNECTIONS DURATION WARMUP RATE_DURATION RATE_FRACTION RATE_CONNECTIONS LOADGEN_THREADS ROUNDS PIN; do
    COMMAND="$v=${!v} $COMMAND"
done
# RM_* settings passed through to the edge belong to the command too.
for v in $(compgen -e | grep '^RM_' | sort -r); do
    COMMAND="$v=${!v} $COMMAND"
done
[ "$TARGETS" = "edge-embedded edge-kafka bare-hyper nginx-empty-gif" ] || COMMAND="TARGETS=\"$TARGETS\" $COMMAND"

log() { printf '\n=== %s\n' "$*" >&2; }
die() { printf 'edge.sh: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- build
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    if [ -z "${RM_BIN:-}" ]; then
        log "cargo build --release --bin retail-media -p retail-media"
        cargo build --release --bin retail-media -p retail-media
    fi
    log "cargo build --release -p rm-benches --bin loadgen --bin bare-hyper"
    cargo build --release -p rm-benches --bin loadgen --bin bare-hyper
fi
RM_BIN=${RM_BIN:-$TARGET_DIR/release/retail-media}
LOADGEN=$TARGET_DIR/release/loadgen
BARE=$TARGET_DIR/release/bare-hyper
for b in "$RM_BIN" "$LOADGEN" "$BARE"; do
    [ -x "$b" ] || die "$b is missing (build it, or unset SKIP_BUILD)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rm-edge-bench.XXXXXX")
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    if [ "${KEEP_WORK:-0}" = 1 ]; then
        echo "work dir kept: $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- machine
machine_info() {
    local cpu mem
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
    mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- CPUs (nproc): $(nproc); model: ${cpu:-unknown}"
    echo "- memory: $mem"
    echo "- kernel: $(uname -sr)"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- rustc: $(rustc -V 2>/dev/null || echo unknown); nginx: $("$NGINX" -v 2>&1 | sed 's/^nginx version: //')"
    echo "- git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- ingest eventlog service schemas src 2>/dev/null || echo ' (edge sources modified)')"
}

# Pids (comma-separated) of the brokers on this machine listening on the ports of
# KAFKA_BROKERS (for their CPU time, summed), empty when remote or not found.
# BROKER_PID overrides.
broker_pid() {
    local b pids=()
    if [ -n "${BROKER_PID:-}" ]; then
        echo "$BROKER_PID"
        return
    fi
    command -v ss >/dev/null || return 0
    for b in ${KAFKA_BROKERS//,/ }; do
        [[ "${b%:*}" =~ ^(127\.0\.0\.1|localhost)$ ]] || continue
        pids+=($(ss -ltnpH "sport = :${b##*:}" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true))
    done
    (IFS=,; echo "${pids[*]}")
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Command prefixes that put a server (or the load generator) on its CPU in pinned
# mode: arrays, not functions, so a backgrounded server's $! is the server itself
# (taskset and env exec it).
ON_SERVER_CPU=()
ON_LOADGEN_CPU=()
if [ "$PIN" = 1 ]; then
    ON_SERVER_CPU=(taskset -c "$SERVER_CPU")
    ON_LOADGEN_CPU=(taskset -c "$LOADGEN_CPU")
fi

# Waits until GET $1 answers 200 while process $PID lives.
wait_http() {
    local url=$1 i code
    for i in $(seq 1 600); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true)
        [ "$code" = 200 ] && return 0
        kill -0 "$PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

stop_target() {
    [ -n "$PID" ] || return 0
    kill -TERM "$PID" 2>/dev/null || true
    local i
    for i in $(seq 1 300); do
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
}

# Starts target $1 on port $2; sets PID and READY_PATH.
start_target() {
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    port_busy "$port" && die "port $port is in use (set PORT_BASE)"
    case "$name" in
    edge-embedded)
        "${ON_SERVER_CPU[@]}" env -u RM_KAFKA_BROKERS -u RM_CONFIG \
            "${INSPECTOR_ENV[@]}" RM_DATA_DIR="$dir/data" RM_INGEST_ADDR="127.0.0.1:$port" RM_LOG="${RM_LOG:-info}" NO_COLOR=1 \
            "$RM_BIN" ingest >"$dir/server.log" 2>&1 &
        PID=$!
        READY_PATH=/readyz
        ;;
    edge-kafka)
        "${ON_SERVER_CPU[@]}" env -u RM_CONFIG \
            RM_KAFKA_BROKERS="$KAFKA_BROKERS" RM_INGEST_TOPIC="bench-$STAMP" \
            "${INSPECTOR_ENV[@]}" RM_DATA_DIR="$dir/data" RM_INGEST_ADDR="127.0.0.1:$port" RM_LOG="${RM_LOG:-info}" NO_COLOR=1 \
            "$RM_BIN" ingest >"$dir/server.log" 2>&1 &
        PID=$!
        READY_PATH=/readyz
        ;;
    bare-hyper)
        "${ON_SERVER_CPU[@]}" "$BARE" --addr "127.0.0.1:$port" >"$dir/server.log" 2>&1 &
        PID=$!
        READY_PATH=/v1/events/ad/interaction
        ;;
    nginx-empty-gif)
        local prefix=$dir/nginx user=""
        mkdir -p "$prefix/logs" "$prefix/tmp"
        # As root, nginx drops workers to `nobody nobody`, and Debian has no group
        # nobody: run workers as the current user instead (ignored when not root).
        [ "$(id -u)" = 0 ] && user="user $(id -un) $(id -gn);"
        sed -e "s|@PREFIX@|$prefix|g" -e "s|@ADDR@|127.0.0.1:$port|g" -e "s|@USER@|$user|g" \
            "$ROOT/benches/nginx/empty_gif.conf.template" >"$prefix/nginx.conf"
        "$NGINX" -t -q -p "$prefix" -c "$prefix/nginx.conf" || die "nginx -t failed"
        "${ON_SERVER_CPU[@]}" "$NGINX" -p "$prefix" -c "$prefix/nginx.conf" >"$dir/server.log" 2>&1 &
        PID=$!
        READY_PATH=/v1/events/ad/interaction
        ;;
    *) die "unknown target $name" ;;
    esac
    if ! wait_http "http://127.0.0.1:$port$READY_PATH"; then
        cat "$dir/server.log" >&2 || true
        die "$name did not become ready on port $port"
    fi
}

# ---------------------------------------------------------------- runs
MACHINE=$(machine_info)
log "machine"
echo "$MACHINE"
echo "$COMMAND"

RUNS=()
NOTES=()
ACTIVE=()
declare -A PORT
i=0
for name in $TARGETS; do
    PORT[$name]=$((PORT_BASE + i))
    i=$((i + 1))
    if [ "$name" = edge-kafka ]; then
        host=${KAFKA_BROKERS%%,*}
        if ! (exec 3<>"/dev/tcp/${host%:*}/${host##*:}") 2>/dev/null; then
            log "$name: broker $host unreachable: SKIPPED"
            NOTES+=("- $name: skipped, broker $host unreachable")
            continue
        fi
    fi
    ACTIVE+=("$name")
done
[ ${#ACTIVE[@]} -gt 0 ] || die "no target to run"

# The load generator's arguments for target $1 (the server is $PID).
loadgen_args() {
    local name=$1
    LG=(--name "$name" --url "http://127.0.0.1:${PORT[$name]}" --warmup "$WARMUP"
        --threads "$LOADGEN_THREADS" --server-pid "$PID")
    if [ "$name" = edge-kafka ]; then
        local broker
        broker=$(broker_pid)
        [ -n "$broker" ] && LG+=(--aux-pid "$broker")
    fi
    return 0
}

# Notes on target $1 after its runs (its log's warnings, its data).
target_notes() {
    local name=$1
    case "$name" in
    nginx-empty-gif)
        NOTES+=("- $name: access log $(wc -l <"$WORK/$name/nginx/logs/access.log") lines, $(du -h "$WORK/$name/nginx/logs/access.log" | cut -f1)")
        ;;
    edge-embedded)
        NOTES+=("- $name: embedded log $(du -sh "$WORK/$name/data" | cut -f1) after its runs")
        ;;
    edge-kafka)
        NOTES+=("- $name: topic bench-$STAMP on $KAFKA_BROKERS")
        ;;
    esac
    sed -i 's/\x1b\[[0-9;]*m//g' "$WORK/$name/server.log"
    local errors
    errors=$(grep -c -E '\b(WARN|ERROR)\b' "$WORK/$name/server.log" || true)
    if [ "${errors:-0}" != 0 ]; then
        NOTES+=("- $name: $errors WARN/ERROR lines in its log, first: $(grep -m1 -E '\b(WARN|ERROR)\b' "$WORK/$name/server.log" | cut -c1-200)")
    fi
    return 0
}

# Phase 0: the brokers' JVMs compile their hot paths under load for minutes after a
# start; measured cold, the edge on Kafka looks many times slower than it is
# (BENCHMARKS.md, issue 24). So edge-kafka first runs KAFKA_WARMUP seconds unmeasured.
if [[ " ${ACTIVE[*]} " == *" edge-kafka "* ]] && [ "$KAFKA_WARMUP" -gt 0 ]; then
    log "edge-kafka: warming the brokers for ${KAFKA_WARMUP}s (not measured)"
    start_target edge-kafka "${PORT[edge-kafka]}"
    loadgen_args edge-kafka
    "${ON_LOADGEN_CPU[@]}" "$LOADGEN" "${LG[@]}" --connections "$CONNECTIONS" --duration "$KAFKA_WARMUP" \
        --json "$WORK/edge-kafka-warmup.json" >/dev/null
    stop_target
    sleep 1
fi

# Phase 1: closed-loop max runs, ROUNDS of them, the targets' order rotated every
# round so no target always runs first (or after the same one).
for round in $(seq 1 "$ROUNDS"); do
    n=${#ACTIVE[@]}
    for k in $(seq 0 $((n - 1))); do
        name=${ACTIVE[$(((k + round - 1) % n))]}
        log "$name: round $round/$ROUNDS, max throughput, $CONNECTIONS connections, ${WARMUP}s warm-up + ${DURATION}s$PIN_NOTE"
        start_target "$name" "${PORT[$name]}"
        loadgen_args "$name"
        "${ON_LOADGEN_CPU[@]}" "$LOADGEN" "${LG[@]}" --connections "$CONNECTIONS" --duration "$DURATION" \
            --json "$WORK/$name-max-$round.json"
        stop_target
        sleep 1
    done
done

# The median run of each target (by throughput), and its spread.
SPREAD=$(python3 - "$WORK" "$ROUNDS" "${ACTIVE[@]}" <<'PY'
import json, statistics, sys
work, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for name in names:
    runs = [json.load(open(f"{work}/{name}-max-{r}.json")) for r in range(1, rounds + 1)]
    runs.sort(key=lambda r: r["throughput_rps"])
    med = runs[len(runs) // 2]
    cpu = [1e6 * r["server_cpu_s"] / max(r["ok"], 1) for r in runs]
    rows[name] = (med, [r["throughput_rps"] for r in runs], statistics.median(cpu))
    json.dump(med, open(f"{work}/{name}-max.json", "w"))
base = rows.get("bare-hyper")
print("| target | median req/s | runs (req/s) | server CPU per request, median (us) | vs bare hyper (req/s) | vs bare hyper (CPU) |")
print("|---|---:|---|---:|---:|---:|")
for name in names:
    med, all_rps, cpu = rows[name]
    ratio = f"{med['throughput_rps'] / base[0]['throughput_rps']:.2f}x" if base else "-"
    cpu_ratio = f"{cpu / base[2]:.2f}x" if base else "-"
    print(f"| {name} | {med['throughput_rps']:.0f} | {', '.join(f'{x:.0f}' for x in all_rps)} | {cpu:.1f} | {ratio} | {cpu_ratio} |")
PY
)

# Phase 2: the open-loop run of each target at RATE_FRACTION x its median max.
for name in "${ACTIVE[@]}"; do
    log "$name: open loop at $RATE_FRACTION x median max, $RATE_CONNECTIONS connections, ${RATE_DURATION}s"
    start_target "$name" "${PORT[$name]}"
    loadgen_args "$name"
    "${ON_LOADGEN_CPU[@]}" "$LOADGEN" "${LG[@]}" --connections "$RATE_CONNECTIONS" --duration "$RATE_DURATION" \
        --rate-from "$WORK/$name-max.json" --rate-fraction "$RATE_FRACTION" \
        --json "$WORK/$name-rate.json"
    stop_target
    RUNS+=("$WORK/$name-max.json" "$WORK/$name-rate.json")
    target_notes "$name"
    sleep 1
done
[ ${#RUNS[@]} -gt 0 ] || die "no target ran"

# ---------------------------------------------------------------- report
mkdir -p "$RESULTS_DIR"
base=$RESULTS_DIR/edge-$DATE
n=2
while [ -e "$base.md" ]; do
    base=$RESULTS_DIR/edge-$DATE-$n
    n=$((n + 1))
done
log "results"
TABLE=$("$LOADGEN" report --json "$base.json" "${RUNS[@]}")
{
    echo "# Beacon edge benchmark, $DATE"
    echo
    echo "Command: \`$COMMAND\`"
    echo
    echo "Machine:"
    echo
    echo "$MACHINE"
    echo
    if [ "$PIN" = 1 ]; then
        echo "Pinned: every server on CPU $SERVER_CPU (\`taskset\`), the load generator on CPU $LOADGEN_CPU;" \
            "$ROUNDS closed-loop runs per target, targets alternating, the median run below."
        echo
    fi
    echo "Medians over $ROUNDS round(s):"
    echo
    echo "$SPREAD"
    echo
    echo "Closed loop: $CONNECTIONS keep-alive connections, ${WARMUP}s warm-up + ${DURATION}s;" \
        "open loop: $RATE_FRACTION x the target's max over $RATE_CONNECTIONS connections for ${RATE_DURATION}s" \
        "(after ${WARMUP}s), latency corrected for coordinated omission (from the scheduled send" \
        "time when the previous answer held a request back). Every request is a distinct beacon; all targets" \
        "get the same URLs. req/s counts 200 answers; srv CPU is the server process tree's" \
        "CPU time per 200 answer in the closed-loop run. Load generator: $LOADGEN_THREADS thread(s)" \
        "on the same machine."
    echo
    echo "$TABLE"
    echo
    printf '%s\n' "${NOTES[@]}"
} >"$base.md"
echo
echo "$MACHINE"
echo
echo "$SPREAD"
echo
echo "$TABLE"
printf '%s\n' "${NOTES[@]}"
echo
echo "written: $base.md $base.json"
