#!/usr/bin/env bash
# The ACP clients the `sapc acp` tests drive, from the registries at pinned versions,
# cached outside the repository (SAP_ACP_CACHE, default ~/.cache/sap-acp): the client side
# of the Python SDK (PyPI `agent-client-protocol`) with pytest in a virtual environment,
# and the headless CLI client `acpx` (npm). Idempotent; prints the cache's path.
set -euo pipefail

cache="${SAP_ACP_CACHE:-$HOME/.cache/sap-acp}"
pins=(agent-client-protocol==0.12.1 pytest==9.2.0)
acpx=acpx@0.19.1
stamp="$cache/.pins"
want="${pins[*]} $acpx"
if [ -x "$cache/venv/bin/pytest" ] && [ -x "$cache/node/node_modules/.bin/acpx" ] \
    && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$cache"
    exit 0
fi
python="${PYTHON:-python3}"
mkdir -p "$cache"
rm -rf "$cache/venv" "$cache/node"
"$python" -m venv "$cache/venv"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
mkdir -p "$cache/node"
(cd "$cache/node" && npm init -y >/dev/null && \
    npm install --no-audit --no-fund --loglevel=error "$acpx" >&2)
echo "$want" > "$stamp"
echo "$cache"
