#!/usr/bin/env bash
# Stop the local services started by deploy/local/up.sh (the three Kafka nodes, ClickHouse,
# PostgreSQL and the chDB shim).
#   deploy/local/down.sh            stop all; their data stays in $RM_LOCAL_DIR
#   deploy/local/down.sh --purge    stop all and delete their data (logs are kept)
# Safe to run when nothing is running. Honours the same RM_* variables as up.sh.
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/up.sh" down "$@"
