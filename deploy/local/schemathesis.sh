#!/usr/bin/env bash
# Installs schemathesis (PyPI, pinned) into a venv under the machine-wide state dir if
# missing, then prints the path of its `schemathesis` command on stdout. Used by
# tests/it/api_schemathesis.rs. Everything else goes to stderr.
set -euo pipefail
STATE_DIR=${RM_LOCAL_DIR:-/var/tmp/retail-media-local}
VENV=$STATE_DIR/venv-st
VERSION=${RM_SCHEMATHESIS_VERSION:-4.32.5}
mkdir -p "$STATE_DIR"
exec 9>>"${TMPDIR:-/tmp}/rm-schemathesis.lock"
flock 9
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "version $VERSION"; then
    echo "[schemathesis.sh] installing schemathesis $VERSION into $VENV" >&2
    python3 -m venv "$VENV" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$VERSION" >&2
fi
echo "$VENV/bin/schemathesis"
