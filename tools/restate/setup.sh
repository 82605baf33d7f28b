#!/usr/bin/env bash
# Restate's server and its CLI, from npm at pinned versions, cached outside the
# repository (SAP_RESTATE_CACHE, default ~/.cache/sap-restate). Idempotent; prints the
# cache's path. The binaries, after it:
#   $cache/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server
#   $cache/node_modules/@restatedev/restate-linux-x64/bin/restate
set -euo pipefail

cache="${SAP_RESTATE_CACHE:-$HOME/.cache/sap-restate}"
pins=(@restatedev/restate-server@1.7.12 @restatedev/restate@1.7.12)
stamp="$cache/.pins"
want="${pins[*]}"
arch=linux-x64
case "$(uname -m)" in
    aarch64 | arm64) arch=linux-arm64 ;;
esac
server="$cache/node_modules/@restatedev/restate-server-$arch/bin/restate-server"
cli="$cache/node_modules/@restatedev/restate-$arch/bin/restate"
if [ -x "$server" ] && [ -x "$cli" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$cache"
    exit 0
fi
mkdir -p "$cache"
rm -rf "$cache/node_modules"
(cd "$cache" && { [ -f package.json ] || npm init -y >/dev/null; } && \
    npm install --no-audit --no-fund --loglevel=error "${pins[@]}" >&2)
if [ ! -x "$server" ] || [ ! -x "$cli" ]; then
    echo "setup.sh: npm installed no restate-server binary for $arch" >&2
    exit 1
fi
echo "$want" > "$stamp"
echo "$cache"
