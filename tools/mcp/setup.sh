#!/usr/bin/env bash
# Installs the real MCP servers the tests talk to, from the registries, into a cache
# outside the repository (idempotent: a second run installs nothing):
#   - @modelcontextprotocol/server-everything and server-filesystem (npm);
#   - the Python `mcp` SDK (PyPI), for tests/mcp/py_server.py and its client;
#   - `mcp-server-time` (PyPI), the reference time server on that SDK;
#   - OpenTelemetry's protobuf definitions (`opentelemetry-proto`, PyPI), with which
#     tests/otlp/receiver.py decodes the spans `sapc run --otlp` exports.
# Prints the cache folder. SAP_MCP_CACHE overrides ~/.cache/sap-mcp.
set -euo pipefail
CACHE="${SAP_MCP_CACHE:-$HOME/.cache/sap-mcp}"
NPM_VERSION=2026.8.31
MCP_PY_VERSION=2.3.0
OTLP_PROTO_VERSION=1.45.2
TIME_SERVER_VERSION=2026.10.19
mkdir -p "$CACHE/npm"
modules="$CACHE/npm/node_modules/@modelcontextprotocol"
if [ ! -f "$modules/server-everything/dist/index.js" ] || [ ! -f "$modules/server-filesystem/dist/index.js" ]; then
    npm install --prefix "$CACHE/npm" --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/server-everything@$NPM_VERSION" \
        "@modelcontextprotocol/server-filesystem@$NPM_VERSION" >&2
fi
if ! "$CACHE/venv/bin/python" -c "import mcp, mcp_server_time, opentelemetry.proto.collector.trace.v1.trace_service_pb2" >/dev/null 2>&1; then
    [ -x "$CACHE/venv/bin/python" ] || python3 -m venv "$CACHE/venv" >&2
    "$CACHE/venv/bin/pip" install --quiet --disable-pip-version-check \
        "mcp==$MCP_PY_VERSION" "mcp-server-time==$TIME_SERVER_VERSION" \
        "opentelemetry-proto==$OTLP_PROTO_VERSION" >&2
fi
echo "$CACHE"
