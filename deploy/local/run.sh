#!/usr/bin/env bash
# Quick start: installs the build prerequisites that are missing (Debian: a C
# toolchain, cmake and the curl headers for rdkafka's vendored librdkafka), then runs
# the whole pipeline on its embedded defaults: `cargo run --release -- "$@"`, i.e.
# `retail-media all` with the edge on 127.0.0.1:8080, the api on 127.0.0.1:8081, the
# aggregator's health port on 127.0.0.1:8082 and state under ./data.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

need=()
for pkg in build-essential pkg-config cmake libcurl4-openssl-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
    echo "installing build prerequisites: ${need[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
exec cargo run --release -- "$@"
