#!/usr/bin/env bash
# Install (if missing) and start (if not running) the local services the tests need:
# a three-node Apache Kafka 4 cluster (KRaft, jars from Maven Central), ClickHouse 18.16
# and PostgreSQL (Debian's), and the newest ClickHouse (26.9, chDB behind an HTTP
# shim), on loopback.
# Idempotent and fast when everything is already there. See deploy/local/README.md.
#
#   deploy/local/up.sh [COMMAND]
#
#   up (default)        apt packages, kafka jars and chdb, then start kafka, clickhouse,
#                       postgres and chdb; prints RM_KAFKA_BROKERS=..., RM_CLICKHOUSE_URL=...,
#                       RM_API_DATABASE_URL=... and RM_CLICKHOUSE_NEWEST_URL=... on stdout
#     --fresh-kafka     when no Kafka node runs, start the cluster on empty storage (what
#                       test.sh does: the tests' topics are throwaway, and a cluster killed
#                       with hundreds of them, by a reboot or a machine image, can take
#                       minutes to recover them)
#   install             apt packages, kafka jars and chdb only, start nothing
#   kafka-start [N]     start the Kafka nodes, or only node N (1-3)
#                       (kafka-stop [N], kafka-restart [N]: SIGTERM, a clean shutdown)
#   kafka-kill N        SIGKILL node N (a crash: tests of failover)
#   kafka-pids          print RM_KAFKA_PID_<N>=<pid> for each running node
#   clickhouse-start    start only ClickHouse      (clickhouse-stop, clickhouse-restart)
#   postgres-start      start only PostgreSQL, with its role and database
#                       (postgres-stop, postgres-restart)
#   chdb-start          start only the chDB shim (ClickHouse 26.9 over HTTP, see
#                       deploy/local/chdb/shim.py)    (chdb-stop, chdb-restart)
#   down [--purge]      stop all four (what down.sh runs); --purge also deletes their data
#   status              show what runs; exit 0 only if all four answer
#   env                 print the RM_* lines only
#
# Progress goes to stderr; stdout carries only KEY=VALUE lines, so
#   out=$(deploy/local/up.sh) && export $out
# works. Environment: RM_LOCAL_DIR (state dir, default /var/tmp/retail-media-local),
# RM_KAFKA_PORT (9092: node N listens on 9092 + 100*(N-1), its controller one above),
# RM_KAFKA_NODES (3), RM_KAFKA_HEAP (512m per node),
# RM_CLICKHOUSE_HTTP_PORT (8123), RM_CLICKHOUSE_TCP_PORT (9000), RM_POSTGRES_PORT (5433),
# RM_CHDB_PORT (8124), RM_PYTHON (python3, for the chdb venv),
# RM_CLICKHOUSE_LOG_QUERIES=1 (log every query in system.query_log, for profiles:
# RM_CLICKHOUSE_LOG_QUERIES=1 deploy/local/up.sh clickhouse-restart).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/../.." && pwd)
# Machine-wide, like the ports the services listen on: every checkout on this machine
# (a CI clone beside a working copy) then stops and restarts the same servers with the
# same data.
STATE_DIR=${RM_LOCAL_DIR:-/var/tmp/retail-media-local}

HOST=127.0.0.1
KAFKA_PORT=${RM_KAFKA_PORT:-9092}
CH_HTTP_PORT=${RM_CLICKHOUSE_HTTP_PORT:-8123}
CH_TCP_PORT=${RM_CLICKHOUSE_TCP_PORT:-9000}
KAFKA_NODES=${RM_KAFKA_NODES:-3}
KAFKA_HEAP=${RM_KAFKA_HEAP:-512m}
PG_PORT=${RM_POSTGRES_PORT:-5433}
CHDB_PORT=${RM_CHDB_PORT:-8124}
PYTHON=${RM_PYTHON:-python3}
FRESH_KAFKA=0
# The api's role and database (a local test cluster: the password is no secret).
PG_ROLE=retail_media
PG_PASSWORD=retail_media
PG_DB=retail_media

# build-essential pkg-config cmake libcurl4-openssl-dev: rdkafka's vendored librdkafka
# build (cmake only recommends gcc/make, and we skip recommends).
# prometheus: for promtool. libxml2-utils: xmllint. python3-venv: the chdb venv.
# openjdk-17-jre-headless maven: the Kafka nodes (jars from Maven Central).
APT_PACKAGES=(build-essential pkg-config cmake libcurl4-openssl-dev clickhouse-server
    clickhouse-client nginx wrk libxml2-utils curl prometheus chromium postgresql
    python3-venv openjdk-17-jre-headless maven)

CARGO_BIN_DIR=${CARGO_HOME:-${HOME:-/root}/.cargo}/bin
export PATH="$PATH:$CARGO_BIN_DIR:/usr/sbin:/sbin"
export DEBIAN_FRONTEND=noninteractive

T0=$(date +%s.%N)
log() { printf '[up.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install packages"
    SUDO=(sudo -E)
fi

# ---------------------------------------------------------------------------------
# helpers

# True if something accepts TCP connections on $1:$2.
# shellcheck disable=SC2016 # $0/$1 expand in the inner bash
port_open() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null; }

ch_ping() { curl -sf --max-time 2 "http://$HOST:$CH_HTTP_PORT/ping" >/dev/null 2>&1; }

# PID of the process listening on TCP port $1 (any local address), from /proc, so
# it needs neither ss nor lsof. Finds services started from another checkout too.
listener_pid() {
    local hex inodes inode hit
    local match=()
    hex=$(printf ':%04X' "$1")
    inodes=$(awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
    [[ -n $inodes ]] || return 1
    for inode in $inodes; do
        match+=(-o -lname "socket:\\[$inode\\]")
    done
    hit=$(find /proc/[0-9]*/fd -maxdepth 1 \( "${match[@]:1}" \) -print -quit 2>/dev/null) || true
    [[ -n $hit ]] || return 1
    hit=${hit#/proc/}
    echo "${hit%%/*}"
}

# True if PID $1 exists and is not a zombie (our detached services are reaped by
# PID 1, which may take a while: a zombie has already closed its sockets).
alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

proc_name() { cat "/proc/$1/comm" 2>/dev/null || echo '?'; }

# The live PID from pid file $1 if its process name matches $2, else from the
# listener on port $3 if that name matches $2.
service_pid() {
    local pidfile=$1 pattern=$2 port=$3 pid=''
    if [[ -s $pidfile ]]; then
        pid=$(<"$pidfile")
        if alive "$pid" && [[ $(proc_name "$pid") =~ $pattern ]]; then
            echo "$pid"
            return 0
        fi
    fi
    pid=$(listener_pid "$port") || return 1
    [[ $(proc_name "$pid") =~ $pattern ]] || return 1
    echo "$pid"
}

# launch PIDFILE LOGFILE WORKDIR CMD...: run CMD detached (own session, no stdin, output
# appended to LOGFILE, no inherited lock fd) and record its PID.
launch() {
    local pidfile=$1 logfile=$2 workdir=$3
    shift 3
    rm -f "$pidfile"
    (
        cd "$workdir"
        # shellcheck disable=SC2016 # $$, $0 and $@ belong to the inner bash
        exec setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" \
            </dev/null >>"$logfile" 2>&1 9>&-
    ) &
    for _ in $(seq 50); do
        [[ -s $pidfile ]] && return 0
        sleep 0.05
    done
    die "could not start $* (see $logfile)"
}

# wait_ready NAME SECONDS PIDFILE LOGFILE CHECK...: poll CHECK until it succeeds.
wait_ready() {
    local name=$1 secs=$2 pidfile=$3 logfile=$4 deadline pid
    shift 4
    pid=$(<"$pidfile")
    deadline=$((SECONDS + secs))
    until "$@"; do
        if ! alive "$pid"; then
            log "$name exited during startup; last lines of $logfile:"
            tail -n 30 "$logfile" >&2 || true
            return 1
        fi
        if ((SECONDS >= deadline)); then
            log "$name not ready after ${secs}s; last lines of $logfile:"
            tail -n 30 "$logfile" >&2 || true
            return 1
        fi
        sleep 0.1
    done
}

# stop_service NAME PIDFILE PATTERN PORT
stop_service() {
    local name=$1 pidfile=$2 pattern=$3 port=$4 pid
    if ! pid=$(service_pid "$pidfile" "$pattern" "$port"); then
        rm -f "$pidfile"
        if port_open "$HOST" "$port"; then
            pid=$(listener_pid "$port") || pid='?'
            die "$name: port $port is held by pid $pid ($(proc_name "$pid")), not by $pattern; not touching it"
        fi
        log "$name: not running"
        return 0
    fi
    log "$name: stopping pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do
        alive "$pid" || break
        sleep 0.05
    done
    if alive "$pid"; then
        log "$name: still alive after 15s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    for _ in $(seq 100); do
        port_open "$HOST" "$port" || break
        sleep 0.1
    done
    port_open "$HOST" "$port" && die "$name: port $port still open after stopping pid $pid"
    rm -f "$pidfile"
    log "$name: stopped"
}

state_dirs() {
    mkdir -p "$STATE_DIR"
    STATE_DIR=$(cd "$STATE_DIR" && pwd)
    LOG_DIR=$STATE_DIR/log
    RUN_DIR=$STATE_DIR/run
    mkdir -p "$LOG_DIR" "$RUN_DIR"
}

# ---------------------------------------------------------------------------------
# installation

PACKAGES_OK=0
ensure_packages() {
    ((PACKAGES_OK)) && return 0
    local p missing=()
    for p in "${APT_PACKAGES[@]}"; do
        if [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) != installed ]]; then
            missing+=("$p")
        fi
    done
    if ((${#missing[@]} == 0)); then
        log "apt: all ${#APT_PACKAGES[@]} packages present"
        PACKAGES_OK=1
        return 0
    fi
    log "apt: installing ${missing[*]}"
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q >&2
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends \
        "${missing[@]}" >&2
    PACKAGES_OK=1
    log "apt: done"
}

# Apache Kafka's jars (kafka/pom.xml: the broker with its storage formatter, and Log4j
# 2) from Maven Central into $STATE_DIR/kafka-dist/libs, once: the folder keeps a copy
# of the pom it was made from, and when the copy matches nothing is downloaded. Maven's
# own cache (~/.m2) makes a rebuild of the folder quick too.
KAFKA_POM=$SCRIPT_DIR/kafka/pom.xml
kafka_libs() { echo "$STATE_DIR/kafka-dist/libs"; }

KAFKA_OK=0
ensure_kafka() {
    ((KAFKA_OK)) && return 0
    state_dirs
    local dist=$STATE_DIR/kafka-dist t0
    if cmp -s "$KAFKA_POM" "$dist/pom.xml" && [[ -d $dist/libs ]]; then
        log "kafka: found $(ls "$dist/libs" | grep -m1 '^kafka_2') and its libraries in $dist/libs"
        KAFKA_OK=1
        return 0
    fi
    if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
        ensure_packages
    fi
    t0=$SECONDS
    log "kafka: fetching Apache Kafka $(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM") from Maven Central into $dist/libs"
    rm -rf "$dist/libs" "$dist/libs.tmp" "$dist/pom.xml"
    mkdir -p "$dist/build"
    cp "$KAFKA_POM" "$dist/build/pom.xml"
    (cd "$dist/build" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$dist/libs.tmp") >&2 || die "kafka: mvn dependency:copy-dependencies failed"
    ls "$dist/libs.tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "kafka: no kafka_2.13 jar in $dist/libs.tmp"
    mv "$dist/libs.tmp" "$dist/libs"
    cp "$KAFKA_POM" "$dist/pom.xml"
    log "kafka: $(ls "$dist/libs" | wc -l) jars fetched in $((SECONDS - t0))s"
    KAFKA_OK=1
}

# chDB (ClickHouse 26.9 as a Python extension) and the shim's other packages, pinned in
# chdb/requirements.txt, in a venv of their own. The venv keeps a copy of the file it
# was installed from: when the copy matches, nothing is installed.
CHDB_REQUIREMENTS=$SCRIPT_DIR/chdb/requirements.txt
chdb_venv() { echo "$STATE_DIR/chdb/venv"; }

CHDB_OK=0
ensure_chdb() {
    ((CHDB_OK)) && return 0
    state_dirs
    local venv t0
    venv=$(chdb_venv)
    if cmp -s "$CHDB_REQUIREMENTS" "$venv/requirements.txt" && "$venv/bin/python" -c '' 2>/dev/null; then
        log "chdb: found $venv"
        CHDB_OK=1
        return 0
    fi
    t0=$SECONDS
    if ! "$venv/bin/python" -c '' 2>/dev/null; then
        command -v "$PYTHON" >/dev/null 2>&1 || ensure_packages
        log "chdb: creating venv $venv ($PYTHON)"
        rm -rf "$venv"
        if ! "$PYTHON" -m venv "$venv" >&2; then
            rm -rf "$venv"
            ensure_packages # python3-venv: Debian's python3 needs it for ensurepip
            "$PYTHON" -m venv "$venv" >&2 || die "chdb: $PYTHON -m venv $venv failed"
        fi
    fi
    log "chdb: installing $(grep -v '^#' "$CHDB_REQUIREMENTS" | xargs) (a 180 MB wheel)"
    rm -f "$venv/requirements.txt"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        -r "$CHDB_REQUIREMENTS" >&2 || die "chdb: pip install failed"
    "$venv/bin/python" -c 'import chdb, lz4.block, lz4.frame, clickhouse_cityhash.cityhash' ||
        die "chdb: the installed packages do not import"
    cp "$CHDB_REQUIREMENTS" "$venv/requirements.txt"
    log "chdb: installed in $((SECONDS - t0))s"
    CHDB_OK=1
}

# ---------------------------------------------------------------------------------
# services

KAFKA_PATTERN='^java$'
CH_PATTERN='^clickhouse'

kafka_port() { echo $((KAFKA_PORT + 100 * ($1 - 1))); }
kafka_controller_port() { echo $((KAFKA_PORT + 100 * ($1 - 1) + 1)); }
kafka_nodes() { seq 1 "$KAFKA_NODES"; }
kafka_brokers() {
    local n out=()
    for n in $(kafka_nodes); do out+=("$HOST:$(kafka_port "$n")"); done
    (IFS=,; echo "${out[*]}")
}
kafka_node_ok() {
    [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= KAFKA_NODES)) ||
        die "kafka: no node '$1' (nodes are 1 to $KAFKA_NODES)"
}

# Renders node N's server.properties and formats its storage once, all nodes with
# one cluster id (kept in $STATE_DIR/kafka/cluster.id).
kafka_prepare() {
    local n=$1 dir=$STATE_DIR/kafka/$1 voters='' m rf min_isr id
    mkdir -p "$dir/data"
    for m in $(kafka_nodes); do voters+="${voters:+,}$m@$HOST:$(kafka_controller_port "$m")"; done
    rf=$((KAFKA_NODES < 3 ? KAFKA_NODES : 3))
    min_isr=$((rf < 2 ? rf : 2))
    sed -e "s|@NODE_ID@|$n|g" -e "s|@PORT@|$(kafka_port "$n")|g" \
        -e "s|@CONTROLLER_PORT@|$(kafka_controller_port "$n")|g" -e "s|@VOTERS@|$voters|g" \
        -e "s|@DATA_DIR@|$(sed_repl "$dir/data")|g" -e "s|@RF@|$rf|g" -e "s|@MIN_ISR@|$min_isr|g" \
        "$SCRIPT_DIR/kafka/server.properties" >"$dir/server.properties"
    [[ -s $dir/data/meta.properties ]] && return 0
    id=$(<"$STATE_DIR/kafka/cluster.id")
    log "kafka: formatting node $n storage (cluster $id)"
    java -Xmx256m -cp "$(kafka_libs)/*" -Dlog4j2.configurationFile="$SCRIPT_DIR/kafka/log4j2.properties" \
        kafka.tools.StorageTool format --cluster-id "$id" --config "$dir/server.properties" \
        --ignore-formatted >&2 9>&- || die "kafka: formatting node $n failed"
}

# Byte offset of each node's log at its launch: readiness is the start line after it.
declare -A KAFKA_LOG_AT=()
kafka_started() {
    local logfile=$LOG_DIR/kafka-$1.log
    tail -c "+$((${KAFKA_LOG_AT[$1]:-0} + 1))" "$logfile" 2>/dev/null | grep -q 'Kafka Server started' &&
        port_open "$HOST" "$(kafka_port "$1")"
}

# kafka_start [N]: starts node N, or every node; waits until each started one serves
# (a node finishes starting only once a majority of controllers runs, so all are
# launched before any is waited for).
kafka_start() {
    state_dirs
    local n pid port logfile launched=()
    local nodes=("$@")
    [[ $# -gt 0 ]] || mapfile -t nodes < <(kafka_nodes)
    for n in "${nodes[@]}"; do
        kafka_node_ok "$n"
        port=$(kafka_port "$n")
        if port_open "$HOST" "$port"; then
            pid=$(listener_pid "$port") || pid='?'
            if [[ $(proc_name "$pid") =~ ^tansu ]]; then
                # The test broker of earlier versions, on the same port: replace it.
                stop_service tansu "$RUN_DIR/tansu.pid" '^tansu' "$port"
            else
                log "kafka: node $n on $HOST:$port already accepts connections (pid $pid, $(proc_name "$pid")); leaving it"
                continue
            fi
        fi
        launched+=("$n")
    done
    if ((${#launched[@]})); then
        ensure_kafka
        if ((FRESH_KAFKA)) && ((${#launched[@]} == ${#nodes[@]})) && [[ $# -eq 0 ]]; then
            log "kafka: no node runs; starting on empty storage (--fresh-kafka)"
            for n in "${launched[@]}"; do rm -rf "${STATE_DIR:?}/kafka/$n"; done
            rm -f "$STATE_DIR/kafka/cluster.id"
        fi
        mkdir -p "$STATE_DIR/kafka"
        if [[ ! -s $STATE_DIR/kafka/cluster.id || $(<"$STATE_DIR/kafka/cluster.id") == -* ]]; then
            # A Kafka Uuid: 16 random bytes, URL-safe base64 without padding, drawn
            # again when it starts with '-' (as Kafka's Uuid.randomUuid does): the
            # storage tool would take it for an option (1 draw in 64 failed so).
            cid=-
            while [[ $cid == -* ]]; do
                cid=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
            done
            printf '%s' "$cid" >"$STATE_DIR/kafka/cluster.id"
        fi
        # Formatting starts a JVM per node: in parallel.
        for n in "${launched[@]}"; do kafka_prepare "$n" & done
        for n in "${launched[@]}"; do wait -n || die "kafka: preparing a node failed"; done
    fi
    for n in "${launched[@]}"; do
        port=$(kafka_port "$n")
        logfile=$LOG_DIR/kafka-$n.log
        printf '\n==== %s kafka node %s\n' "$(date '+%F %T')" "$n" >>"$logfile"
        KAFKA_LOG_AT[$n]=$(stat -c %s "$logfile")
        log "kafka: starting node $n on $HOST:$port (controller $(kafka_controller_port "$n"), log $logfile)"
        launch "$RUN_DIR/kafka-$n.pid" "$logfile" "$STATE_DIR/kafka/$n" java \
            "-Xms128m" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
            -Dlog4j2.configurationFile="$SCRIPT_DIR/kafka/log4j2.properties" \
            -cp "$(kafka_libs)/*" kafka.Kafka "$STATE_DIR/kafka/$n/server.properties"
    done
    for n in "${launched[@]}"; do
        wait_ready "kafka node $n" 300 "$RUN_DIR/kafka-$n.pid" "$LOG_DIR/kafka-$n.log" \
            kafka_started "$n" || die "kafka: node $n did not start"
        log "kafka: node $n ready (pid $(<"$RUN_DIR/kafka-$n.pid"))"
    done
}

# kafka_stop [N]: SIGTERM (a controlled shutdown: leadership moves first) of node N or
# of every node.
kafka_stop() {
    state_dirs
    local n nodes=("$@")
    [[ $# -gt 0 ]] || mapfile -t nodes < <(kafka_nodes)
    # Every node at once: each one's controlled shutdown takes seconds.
    for n in "${nodes[@]}"; do kafka_node_ok "$n"; done
    for n in "${nodes[@]}"; do
        if [[ $n == 1 ]] && pid=$(service_pid "$RUN_DIR/tansu.pid" '^tansu' "$(kafka_port 1)"); then
            stop_service tansu "$RUN_DIR/tansu.pid" '^tansu' "$(kafka_port 1)"
        fi
        stop_service "kafka node $n" "$RUN_DIR/kafka-$n.pid" "$KAFKA_PATTERN" "$(kafka_port "$n")" &
    done
    for n in "${nodes[@]}"; do wait -n || die "kafka: stopping a node failed"; done
}

# kafka_kill N: SIGKILL of node N, as a crash; returns once its port is closed.
kafka_kill() {
    state_dirs
    local n=$1 pid port
    kafka_node_ok "$n"
    port=$(kafka_port "$n")
    pid=$(service_pid "$RUN_DIR/kafka-$n.pid" "$KAFKA_PATTERN" "$port") ||
        die "kafka: node $n is not running"
    log "kafka: kill -9 node $n (pid $pid)"
    kill -KILL "$pid"
    for _ in $(seq 100); do
        alive "$pid" || port_open "$HOST" "$port" || break
        sleep 0.05
    done
    rm -f "$RUN_DIR/kafka-$n.pid"
}

kafka_pids() {
    state_dirs
    local n pid
    for n in $(kafka_nodes); do
        if pid=$(service_pid "$RUN_DIR/kafka-$n.pid" "$KAFKA_PATTERN" "$(kafka_port "$n")"); then
            echo "RM_KAFKA_PID_$n=$pid"
        fi
    done
}

# Escape a string for use as a sed replacement with | as the delimiter.
sed_repl() { printf '%s' "$1" | sed -e 's/[&|\\]/\\&/g'; }

clickhouse_start() {
    state_dirs
    local ch_dir=$STATE_DIR/clickhouse pidfile=$RUN_DIR/clickhouse.pid
    local logfile=$LOG_DIR/clickhouse.stdout.log pid
    if ch_ping; then
        pid=$(listener_pid "$CH_HTTP_PORT") || pid='?'
        log "clickhouse: http://$HOST:$CH_HTTP_PORT already answers (pid $pid, $(proc_name "$pid")); leaving it"
        return 0
    fi
    if port_open "$HOST" "$CH_HTTP_PORT"; then
        die "clickhouse: port $CH_HTTP_PORT is taken but /ping does not answer"
    fi
    if ! command -v clickhouse-server >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
        ensure_packages
    fi
    mkdir -p "$ch_dir"/{etc,data,tmp,user_files,format_schemas,log}
    sed -e "s|@CH_DIR@|$(sed_repl "$ch_dir")|g" \
        -e "s|@HTTP_PORT@|$CH_HTTP_PORT|g" -e "s|@TCP_PORT@|$CH_TCP_PORT|g" \
        "$SCRIPT_DIR/clickhouse/config.xml" >"$ch_dir/etc/config.xml"
    cp "$SCRIPT_DIR/clickhouse/users.xml" "$ch_dir/etc/users.xml"
    if [ "${RM_CLICKHOUSE_LOG_QUERIES:-0}" = 1 ]; then
        # Every query in system.query_log (rows read, CPU per query: how the profiles
        # in BENCHMARKS.md were taken).
        sed -i 's|<max_memory_usage>|<log_queries>1</log_queries>\n            <max_memory_usage>|' \
            "$ch_dir/etc/users.xml"
    fi
    if command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$ch_dir/etc/config.xml" "$ch_dir/etc/users.xml" ||
            die "clickhouse: invalid XML in the config"
    fi
    log "clickhouse: starting on $HOST:$CH_HTTP_PORT (http) and $HOST:$CH_TCP_PORT (tcp), data in $ch_dir"
    printf '\n==== %s clickhouse-server\n' "$(date '+%F %T')" >>"$logfile"
    launch "$pidfile" "$logfile" "$ch_dir" clickhouse-server --config-file="$ch_dir/etc/config.xml"
    if ! wait_ready clickhouse 60 "$pidfile" "$logfile" ch_ping; then
        tail -n 30 "$ch_dir/log/clickhouse-server.err.log" >&2 2>/dev/null || true
        die "clickhouse: server did not start (logs in $ch_dir/log)"
    fi
    log "clickhouse: ready (pid $(<"$pidfile"))"
}

clickhouse_stop() {
    state_dirs
    stop_service clickhouse "$RUN_DIR/clickhouse.pid" "$CH_PATTERN" "$CH_HTTP_PORT"
}

# PostgreSQL: a cluster of its own under the state dir (not Debian's main cluster),
# run by the postgres user when we are root (the server refuses to run as root).

PG_BIN=''
find_pg() {
    local d
    PG_BIN=''
    for d in $(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V); do
        [[ -x $d/pg_ctl && -x $d/initdb ]] && PG_BIN=$d
    done
    [[ -n $PG_BIN ]]
}

# as_pg CMD...: run CMD as the cluster's owner, without the lock fd (a server started
# through it must not hold the lock).
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@" 9>&-
    else
        "$@" 9>&-
    fi
}

pg_ready() { [[ -n $PG_BIN ]] && "$PG_BIN/pg_isready" -q -h "$HOST" -p "$PG_PORT" -t 2 >/dev/null 2>&1; }

# psql as the superuser over the cluster's own socket.
pg_psql() {
    as_pg "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$STATE_DIR/postgres/socket" \
        -p "$PG_PORT" -U postgres -d postgres "$@"
}

pg_dirs() {
    local pg_dir=$STATE_DIR/postgres
    mkdir -p "$pg_dir/socket"
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || die "postgres: no postgres user (is the postgresql package installed?)"
        chown postgres:postgres "$pg_dir" "$pg_dir/socket"
    fi
    chmod 700 "$pg_dir" "$pg_dir/socket"
}

# The api's role (may create databases: tests make one each) and database.
pg_database() {
    local has
    pg_psql <<SQL >&2 || die "postgres: could not create role $PG_ROLE"
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_ROLE') THEN
        CREATE ROLE $PG_ROLE LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
    END IF;
END \$\$;
SQL
    has=$(pg_psql -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'") ||
        die "postgres: could not list databases"
    if [[ $has != 1 ]]; then
        log "postgres: creating database $PG_DB"
        pg_psql -c "CREATE DATABASE $PG_DB OWNER $PG_ROLE" >&2 ||
            die "postgres: could not create database $PG_DB"
    fi
}

postgres_start() {
    state_dirs
    local pg_dir=$STATE_DIR/postgres pid
    local data=$pg_dir/data logfile=$pg_dir/postgres.log
    find_pg || ensure_packages
    find_pg || die "postgres: no pg_ctl under /usr/lib/postgresql/*/bin"
    if pg_ready; then
        pid=$(listener_pid "$PG_PORT") || pid='?'
        log "postgres: $HOST:$PG_PORT already answers (pid $pid, $(proc_name "$pid")); leaving it"
        [[ -d $data ]] && pg_database
        return 0
    fi
    if port_open "$HOST" "$PG_PORT"; then
        die "postgres: port $PG_PORT is taken but does not answer as PostgreSQL"
    fi
    pg_dirs
    if [[ ! -s $data/PG_VERSION ]]; then
        log "postgres: initdb $data ($PG_BIN)"
        as_pg "$PG_BIN/initdb" -D "$data" -U postgres -E UTF8 --locale=C \
            --auth-local=trust --auth-host=scram-sha-256 >&2 ||
            die "postgres: initdb failed"
    fi
    log "postgres: starting on $HOST:$PG_PORT, data in $data (log $logfile)"
    # pg_ctl detaches the server into its own session; -w waits until it accepts.
    if ! as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$logfile" -w -t 60 -o \
        "-p $PG_PORT -c listen_addresses=$HOST -c max_connections=300 -k '$pg_dir/socket'" \
        start >&2 </dev/null; then
        tail -n 30 "$logfile" >&2 2>/dev/null || true
        die "postgres: server did not start"
    fi
    pg_database
    log "postgres: ready (pid $(head -n 1 "$data/postmaster.pid" 2>/dev/null || echo '?'))"
}

postgres_stop() {
    state_dirs
    local data=$STATE_DIR/postgres/data pid
    find_pg || true
    if [[ -z $PG_BIN || ! -s $data/postmaster.pid ]] ||
        ! as_pg "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        if port_open "$HOST" "$PG_PORT"; then
            pid=$(listener_pid "$PG_PORT") || pid='?'
            die "postgres: port $PG_PORT is held by pid $pid ($(proc_name "$pid")), not by the cluster in $data; not touching it"
        fi
        log "postgres: not running"
        return 0
    fi
    # Fast shutdown: clients are disconnected (a smart one would wait for the api).
    log "postgres: stopping"
    as_pg "$PG_BIN/pg_ctl" -D "$data" -m fast -w -t 60 stop >&2 ||
        die "postgres: pg_ctl stop failed"
    for _ in $(seq 100); do
        port_open "$HOST" "$PG_PORT" || break
        sleep 0.1
    done
    port_open "$HOST" "$PG_PORT" && die "postgres: port $PG_PORT still open after stopping"
    log "postgres: stopped"
}

# The chDB shim: ClickHouse 26.9 (in-process in a Python program) answering ClickHouse's
# HTTP protocol, data under $STATE_DIR/chdb/data.

CHDB_PATTERN='^chdb-shim' # the shim names its process so (python otherwise)

chdb_ping() { curl -sf --max-time 2 "http://$HOST:$CHDB_PORT/ping" >/dev/null 2>&1; }

chdb_start() {
    state_dirs
    local data=$STATE_DIR/chdb/data pidfile=$RUN_DIR/chdb.pid logfile=$LOG_DIR/chdb.log pid
    if chdb_ping; then
        pid=$(listener_pid "$CHDB_PORT") || pid='?'
        log "chdb: http://$HOST:$CHDB_PORT already answers (pid $pid, $(proc_name "$pid")); leaving it"
        return 0
    fi
    if port_open "$HOST" "$CHDB_PORT"; then
        die "chdb: port $CHDB_PORT is taken but /ping does not answer"
    fi
    command -v curl >/dev/null 2>&1 || ensure_packages
    ensure_chdb
    mkdir -p "$data"
    log "chdb: starting the shim on $HOST:$CHDB_PORT, data in $data (log $logfile)"
    printf '\n==== %s chdb shim\n' "$(date '+%F %T')" >>"$logfile"
    # TZ=UTC: the time zone of the ClickHouse server above (chDB takes the process's).
    launch "$pidfile" "$logfile" "$STATE_DIR/chdb" env TZ=UTC "$(chdb_venv)/bin/python" \
        "$SCRIPT_DIR/chdb/shim.py" --data "$data" --host "$HOST" --port "$CHDB_PORT"
    wait_ready chdb 60 "$pidfile" "$logfile" chdb_ping || die "chdb: the shim did not start"
    log "chdb: ready (pid $(<"$pidfile"))"
}

chdb_stop() {
    state_dirs
    stop_service chdb "$RUN_DIR/chdb.pid" "$CHDB_PATTERN" "$CHDB_PORT"
}

print_env() {
    case ${1:-all} in
        kafka) echo "RM_KAFKA_BROKERS=$(kafka_brokers)" ;;
        clickhouse) echo "RM_CLICKHOUSE_URL=http://$HOST:$CH_HTTP_PORT" ;;
        postgres) echo "RM_API_DATABASE_URL=postgres://$PG_ROLE:$PG_PASSWORD@$HOST:$PG_PORT/$PG_DB" ;;
        chdb) echo "RM_CLICKHOUSE_NEWEST_URL=http://$HOST:$CHDB_PORT" ;;
        *)
            echo "RM_KAFKA_BROKERS=$(kafka_brokers)"
            echo "RM_CLICKHOUSE_URL=http://$HOST:$CH_HTTP_PORT"
            echo "RM_API_DATABASE_URL=postgres://$PG_ROLE:$PG_PASSWORD@$HOST:$PG_PORT/$PG_DB"
            echo "RM_CLICKHOUSE_NEWEST_URL=http://$HOST:$CHDB_PORT"
            ;;
    esac
}

status() {
    local rc=0 pid
    local n port
    for n in $(kafka_nodes); do
        port=$(kafka_port "$n")
        if port_open "$HOST" "$port"; then
            pid=$(listener_pid "$port") || pid='?'
            log "kafka: node $n up on $HOST:$port (pid $pid, $(proc_name "$pid"))"
        else
            log "kafka: node $n down"
            rc=3
        fi
    done
    if ch_ping; then
        pid=$(listener_pid "$CH_HTTP_PORT") || pid='?'
        log "clickhouse: up on http://$HOST:$CH_HTTP_PORT (pid $pid, $(proc_name "$pid"))"
    else
        log "clickhouse: down"
        rc=3
    fi
    find_pg || true
    if pg_ready; then
        pid=$(listener_pid "$PG_PORT") || pid='?'
        log "postgres: up on $HOST:$PG_PORT (pid $pid, $(proc_name "$pid"))"
    else
        log "postgres: down"
        rc=3
    fi
    if chdb_ping; then
        pid=$(listener_pid "$CHDB_PORT") || pid='?'
        log "chdb: up on http://$HOST:$CHDB_PORT (pid $pid, $(proc_name "$pid"))"
    else
        log "chdb: down"
        rc=3
    fi
    return $rc
}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---------------------------------------------------------------------------------

cmd=${1:-up}
[[ $# -gt 0 ]] && shift

case $cmd in
    -h | --help | help)
        usage
        exit 0
        ;;
    env)
        print_env
        exit 0
        ;;
    status)
        status
        exit $?
        ;;
    kafka-pids)
        kafka_pids
        exit 0
        ;;
esac

# One machine-wide lock: the ports and the apt/cargo installs are shared by every
# checkout on this machine, and tests may call this script concurrently.
LOCK_FILE=${TMPDIR:-/tmp}/rm-deploy-local.lock
exec 9>>"$LOCK_FILE"
if ! flock -n 9; then
    log "waiting for another deploy/local/up.sh (lock $LOCK_FILE)"
    flock 9
fi

case $cmd in
    up | start)
        for arg in "$@"; do
            case $arg in
                --fresh-kafka) FRESH_KAFKA=1 ;;
                *) die "up: unknown option $arg" ;;
            esac
        done
        log "state dir: $STATE_DIR"
        ensure_packages
        ensure_kafka
        ensure_chdb
        kafka_start
        clickhouse_start
        postgres_start
        chdb_start
        log "all services up in $(elapsed)s"
        print_env
        ;;
    install)
        ensure_packages
        ensure_kafka
        ensure_chdb
        log "installed in $(elapsed)s"
        ;;
    kafka-start)
        kafka_start "$@"
        print_env kafka
        ;;
    kafka-stop) kafka_stop "$@" ;;
    kafka-restart)
        kafka_stop "$@"
        kafka_start "$@"
        print_env kafka
        ;;
    kafka-kill)
        [[ $# -eq 1 ]] || die "kafka-kill takes one node number"
        kafka_kill "$1"
        ;;
    clickhouse-start)
        clickhouse_start
        print_env clickhouse
        ;;
    clickhouse-stop) clickhouse_stop ;;
    clickhouse-restart)
        clickhouse_stop
        clickhouse_start
        print_env clickhouse
        ;;
    postgres-start)
        postgres_start
        print_env postgres
        ;;
    postgres-stop) postgres_stop ;;
    postgres-restart)
        postgres_stop
        postgres_start
        print_env postgres
        ;;
    chdb-start)
        chdb_start
        print_env chdb
        ;;
    chdb-stop) chdb_stop ;;
    chdb-restart)
        chdb_stop
        chdb_start
        print_env chdb
        ;;
    down | stop)
        purge=0
        for arg in "$@"; do
            case $arg in
                --purge) purge=1 ;;
                *) die "down: unknown option $arg" ;;
            esac
        done
        kafka_stop
        clickhouse_stop
        postgres_stop
        chdb_stop
        if ((purge)); then
            # The chdb venv and the Kafka jars are installations, not data: they stay.
            log "purging $STATE_DIR/clickhouse, $STATE_DIR/kafka, $STATE_DIR/postgres and $STATE_DIR/chdb/data"
            rm -rf "${STATE_DIR:?}/clickhouse" "${STATE_DIR:?}/kafka" "${STATE_DIR:?}/postgres" \
                "${STATE_DIR:?}/chdb/data"
        fi
        log "all services stopped in $(elapsed)s"
        ;;
    *)
        usage >&2
        die "unknown command: $cmd"
        ;;
esac
