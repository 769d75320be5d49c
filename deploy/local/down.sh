#!/usr/bin/env bash
# Stop the local services started by deploy/local/up.sh (Tansu broker and ClickHouse).
#   deploy/local/down.sh            stop both; ClickHouse data stays in $RM_LOCAL_DIR
#   deploy/local/down.sh --purge    stop both and delete their data (logs are kept)
# Safe to run when nothing is running. Honours the same RM_* variables as up.sh.
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/up.sh" down "$@"
