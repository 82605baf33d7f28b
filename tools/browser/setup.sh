#!/usr/bin/env bash
# Installs the headless browser the tests render pages in: Debian's `chromium` package
# (idempotent). Prints its path.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "chromium is not installed; run: sudo apt-get install chromium" >&2
        exit 1
    fi
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
fi
command -v chromium
