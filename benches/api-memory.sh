#!/usr/bin/env bash
# The api's peak memory and the bytes each report moves (issue 26's benchmark), on two
# ClickHouse stores reportbench fills as the aggregator fills them (SESSIONS and ten
# times SESSIONS shopper sessions over the same 21 campaigns, 200 products and 30
# days). For each store: a fresh `retail-media api` on it (an operator client, so every
# namespace is read), pinned to SERVER_CPU; every report of the 30-day range asked
# ROUNDS times through HTTP (curl on CLIENT_CPU): the JSON first page and the whole
# CSV download, timing each and counting its bytes; then the process's VmHWM (peak
# resident memory) and VmRSS. Prints a markdown table.
#
# Usage: cargo build --release -p retail-media -p rm-benches && \
#        RM_CLICKHOUSE_URL=http://127.0.0.1:8123 benches/api-memory.sh
# Settings: SESSIONS=5000 ROUNDS=3 SERVER_CPU=0 CLIENT_CPU=1 PORT=18181
#           REPORTS="campaigns products ..." (the reports asked, by path under /v1/reports)
#           BIN=target/release/retail-media REPORTBENCH=target/release/reportbench
#           REUSE=<pid>: read the databases a `reportbench --keep` run of that process id
#           kept (`rm_reportbench_small_<pid>`, `..._large_<pid>`; SESSIONS and SCALE, 10,
#           as that run's `--sessions` and `--scale`, for the labels) instead of filling
#           new ones, and keep them
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SESSIONS=${SESSIONS:-5000} ROUNDS=${ROUNDS:-3} SCALE=${SCALE:-10}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1} PORT=${PORT:-18181}
BIN=${BIN:-$ROOT/target/release/retail-media}
REPORTBENCH=${REPORTBENCH:-$ROOT/target/release/reportbench}
CH=${RM_CLICKHOUSE_URL:?set RM_CLICKHOUSE_URL (deploy/local/up.sh env)}
# The api's own state embedded under its data dir, its orders log embedded: only the
# report store is the server's.
unset RM_API_DATABASE_URL RM_KAFKA_BROKERS
WORK=$(mktemp -d)
API_PID=
cleanup() {
    [[ -n $API_PID ]] && kill "$API_PID" 2>/dev/null || true
    for db in "${DATABASES[@]:-}"; do
        [[ -n $db && -z ${REUSE:-} ]] && curl -s "$CH/" --data-binary "DROP DATABASE IF EXISTS $db" >/dev/null || true
    done
    rm -rf "$WORK"
}
DATABASES=()
trap cleanup EXIT

if [[ -n ${REUSE:-} ]]; then
    FILL=$REUSE
else
    echo "filling the stores (reportbench --sessions $SESSIONS --no-reports --keep)..." >&2
    "$REPORTBENCH" --sessions "$SESSIONS" --scale "$SCALE" --no-reports --keep --clickhouse-url "$CH" \
        >"$WORK/fill.out" 2>"$WORK/fill.err" &
    FILL=$!
    wait "$FILL"
    cat "$WORK/fill.err" >&2
fi
DATABASES=("rm_reportbench_small_$FILL" "rm_reportbench_large_$FILL")

TO=$(date -u +%Y-%m-%d)
FROM=$(date -u -d "$TO - 30 days" +%Y-%m-%d)
read -r -a REPORTS <<<"${REPORTS:-campaigns products ads video-funnel carts carts/campaigns sales}"

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
status() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$API_PID/status"; }

echo "| store | report (30 days) | JSON first page, ms | bytes | CSV, every row, ms | bytes |"
echo "|---|---|---:|---:|---:|---:|"
MEM=()
for i in 0 1; do
    db=${DATABASES[$i]}
    size=$([[ $i == 0 ]] && echo "$((SESSIONS * 20)) records" || echo "$((SESSIONS * 20 * SCALE)) records")
    dir=$WORK/api-$i
    mkdir -p "$dir"
    secret=$("$BIN" clients --data-dir "$dir" add bench-operator --scopes reports,admin 2>/dev/null |
        sed -n 's/^client_secret=//p')
    RM_API_DEMO=false taskset -c "$SERVER_CPU" "$BIN" api --data-dir "$dir" \
        --api-addr "127.0.0.1:$PORT" --clickhouse-url "$CH" --clickhouse-database "$db" \
        >"$dir/api.log" 2>&1 &
    API_PID=$!
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    start_rss=$(status VmRSS)
    token=$(curl -s -u "bench-operator:$secret" -d grant_type=client_credentials \
        "http://127.0.0.1:$PORT/v1/oauth2/token" | sed 's/.*"access_token":"\([^"]*\)".*/\1/')
    for r in "${REPORTS[@]}"; do
        for fmt in json csv; do
            : >"$WORK/t"
            bytes=0
            for _ in $(seq 1 "$ROUNDS"); do
                accept=$([[ $fmt == csv ]] && echo "text/csv" || echo "application/json")
                out=$(taskset -c "$CLIENT_CPU" curl -s -o /dev/null -w '%{http_code} %{size_download} %{time_total}' \
                    -H "Authorization: Bearer $token" -H "Accept: $accept" \
                    "http://127.0.0.1:$PORT/v1/reports/$r?from=$FROM&to=$TO")
                read -r code b t <<<"$out"
                [[ $code == 200 ]] || { echo "$r ($fmt): HTTP $code" >&2; tail -5 "$dir/api.log" >&2; exit 1; }
                bytes=$b
                awk -v t="$t" 'BEGIN {printf "%.1f\n", t * 1000}' >>"$WORK/t"
            done
            eval "${fmt}_ms=\$(median <\"\$WORK/t\")"
            eval "${fmt}_bytes=\$bytes"
        done
        echo "| $size | $r | $json_ms | $json_bytes | $csv_ms | $csv_bytes |"
    done
    MEM+=("| $size | $(($(status VmHWM | tr -d ' ') / 1024)) MiB | $((start_rss / 1024)) MiB | $(($(status VmRSS) / 1024)) MiB |")
    kill "$API_PID"
    wait "$API_PID" 2>/dev/null || true
    API_PID=
done
echo
echo "| store | api peak resident memory (VmHWM) | resident at start | resident after the reports |"
echo "|---|---:|---:|---:|"
printf '%s\n' "${MEM[@]}"
