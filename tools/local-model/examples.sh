#!/usr/bin/env bash
# Every example program on the in-process model (after setup.sh): exit status, model
# calls, tokens (and how many were reused from the KV cache) and wall time, as a table.
# SAPC overrides the sapc binary (default: the release build). First prompts are kept in
# a folder of this run's own, which starts empty (SAP_LOCAL_KV_CACHE overrides it), so
# what an example reuses from another run is what an earlier example in this one kept.
set -uo pipefail
cd "$(dirname "$0")/../.."
kept=$(mktemp -d)
trap 'rm -rf "$kept"' EXIT
export SAP_LOCAL_KV_CACHE="${SAP_LOCAL_KV_CACHE:-$kept}"
MODEL="${SAP_LOCAL_MODEL_CACHE:-$HOME/.cache/sap-local-model}/SmolLM2-135M-Instruct.gguf"
SAPC="${SAPC:-target/release/sapc}"
printf "| example | exit | LLM calls | re-asks | tokens in (reused) | tokens out | wall time |\n|---|---|---|---|---|---|---|\n"
for file in examples/*.sap; do
    grep -q "^fn main" "$file" || continue
    name=$(basename "$file" .sap)
    start=$(date +%s.%N)
    err=$(timeout 900 "$SAPC" run "$file" --provider local --model "$MODEL" --stats 2>&1 >/dev/null)
    code=$?
    end=$(date +%s.%N)
    line=$(echo "$err" | grep "LLM calls" || true)
    calls=$(echo "$line" | sed -nE 's/^([0-9]+) LLM calls.*/\1/p')
    reasks=$(echo "$line" | sed -nE 's/.*\(([0-9]+) re-asks.*/\1/p')
    tin=$(echo "$line" | sed -nE 's/.*tokens: ([0-9]+) in \(([0-9]+) cached\), ([0-9]+) out.*/\1 (\2)/p')
    tout=$(echo "$line" | sed -nE 's/.*cached\), ([0-9]+) out.*/\1/p')
    printf "| %s | %s | %s | %s | %s | %s | %.1f s |\n" "$name" "$code" "${calls:-0}" "${reasks:-0}" "${tin:--}" "${tout:--}" "$(echo "$end - $start" | bc)"
done
