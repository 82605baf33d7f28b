#!/usr/bin/env bash
# AgentDojo (PyPI `agentdojo`, the benchmark) and the Python `mcp` SDK in one virtual
# environment, at pinned versions, cached outside the repository (SAP_AGENTDOJO_CACHE,
# default ~/.cache/sap-agentdojo): what tools/agentdojo/env_server.py serves the suites'
# environments with, and what tools/agentdojo/judge.py judges runs with. Idempotent;
# prints the cache's path. No API key or network is used once installed.
set -euo pipefail

cache="${SAP_AGENTDOJO_CACHE:-$HOME/.cache/sap-agentdojo}"
pins=(agentdojo==0.1.35 mcp==2.3.0)
stamp="$cache/.pins"
want="${pins[*]}"
if [ -x "$cache/venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$cache"
    exit 0
fi
python="${PYTHON:-python3}"
mkdir -p "$cache"
rm -rf "$cache/venv"
"$python" -m venv "$cache/venv"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
echo "$want" > "$stamp"
echo "$cache"
