#!/usr/bin/env bash
# Runs every test: installs and starts the real servers the tests need through
# deploy/local/up.sh (a three-node Apache Kafka cluster, ClickHouse 18.16, PostgreSQL, and
# ClickHouse 26.9 as chDB behind an HTTP shim), exports their RM_* settings with
# RM_REQUIRE_SERVICES=1 (a test whose server is missing fails instead of skipping),
# then `cargo test --workspace --all-targets "$@"`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# --fresh-kafka: a cluster that is not running restarts on empty storage (the tests'
# topics are throwaway; hundreds of them left by earlier runs slow a restart for minutes).
services_env=$(bash deploy/local/up.sh up --fresh-kafka)
while IFS='=' read -r key value; do
    if [[ $key =~ ^RM_[A-Z0-9_]+$ ]]; then
        export "$key=$value"
        echo "$key=$value" >&2
    fi
done <<<"$services_env"
: "${RM_KAFKA_BROKERS:?up.sh did not print RM_KAFKA_BROKERS}"
: "${RM_CLICKHOUSE_URL:?up.sh did not print RM_CLICKHOUSE_URL}"
: "${RM_API_DATABASE_URL:?up.sh did not print RM_API_DATABASE_URL}"
: "${RM_CLICKHOUSE_NEWEST_URL:?up.sh did not print RM_CLICKHOUSE_NEWEST_URL}"
export RM_REQUIRE_SERVICES=1
bash deploy/local/tools.sh # yamllint, kubernetes-validate (tests/it/deploy_artifacts.rs)
exec cargo test --workspace --all-targets "$@"
