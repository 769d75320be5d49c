#!/usr/bin/env bash
# Refreshes the known-bot list the edge classifies with (schemas/data/): the
# patterns and example agents of the maintained `crawler-user-agents` data set
# (github.com/monperrus/crawler-user-agents, MIT), taken from its npm package.
#
# Usage: deploy/scripts/update-bot-list.sh [VERSION]   (default: latest)
# Then: cargo test -p rm-schemas agent   (every listed example must still classify
# as a bot), and commit schemas/data/ with the version in the message.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VERSION=${1:-latest}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm pack --silent "crawler-user-agents@$VERSION" >/dev/null
tar xzf crawler-user-agents-*.tgz
python3 - "$ROOT/schemas/data" <<'PY'
import json, sys
out = sys.argv[1]
entries = json.load(open("package/crawler-user-agents.json"))
version = json.load(open("package/package.json"))["version"]
with open(f"{out}/crawler-user-agents.txt", "w") as f:
    f.write("".join(e["pattern"] + "\n" for e in entries))
with open(f"{out}/crawler-user-agents-instances.txt", "w") as f:
    f.write("".join(i + "\n" for e in entries for i in e.get("instances", []) if "\n" not in i))
print(f"crawler-user-agents {version}: {len(entries)} patterns")
PY
cp package/LICENSE "$ROOT/schemas/data/crawler-user-agents.LICENSE"
