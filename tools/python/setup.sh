#!/usr/bin/env bash
# What the Python package's tests and benchmark need, from PyPI at pinned versions, cached
# outside the repository (SAP_PYTHON_CACHE, default ~/.cache/sap-python): a virtual
# environment with maturin (to build the wheel), and a wheelhouse of what a fresh
# environment installs beside the wheel (pydantic, pytest, mypy), so each test run's
# fresh environment is made offline. Idempotent; prints the cache's path.
set -euo pipefail

cache="${SAP_PYTHON_CACHE:-$HOME/.cache/sap-python}"
pins=(maturin==1.16.0 pydantic==2.14.4 pytest==9.2.0 mypy==2.4.1)
stamp="$cache/.pins"
if [ -x "$cache/venv/bin/maturin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "${pins[*]}" ]; then
    echo "$cache"
    exit 0
fi
python="${PYTHON:-python3}"
mkdir -p "$cache"
rm -rf "$cache/venv" "$cache/wheelhouse"
"$python" -m venv "$cache/venv"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
"$cache/venv/bin/pip" download --quiet --disable-pip-version-check \
    --dest "$cache/wheelhouse" "${pins[@]:1}" >&2
echo "${pins[*]}" > "$stamp"
echo "$cache"
