#!/usr/bin/env bash
# The call stack as a KV cache, measured: prompt tokens evaluated by the in-process model
# with and without reusing the prefix the previous call left in the cache, on the
# Graph-of-Thought and Adaptive-Network-of-Thought examples, within one run (no system
# turn kept from an earlier run: SAP_LOCAL_KV_CACHE=0). Run after setup.sh.
# SAPC overrides the sapc binary (default: the release build).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL="${SAP_LOCAL_MODEL_CACHE:-$HOME/.cache/sap-local-model}/SmolLM2-135M-Instruct.gguf"
SAPC="${SAPC:-target/release/sapc}"
printf "| example | reuse | prompt tokens | evaluated | reused | wall time |\n|---|---|---|---|---|---|\n"
for example in got_day_plan anot_cafes; do
    for reuse in 0 1; do
        start=$(date +%s.%N)
        stats=$(LOCAL_REUSE=$reuse SAP_LOCAL_KV_CACHE=0 "$SAPC" run "examples/$example.sap" --provider local --model "$MODEL" --stats 2>&1 >/dev/null | grep "LLM calls" || true)
        end=$(date +%s.%N)
        input=$(echo "$stats" | sed -E 's/.*tokens: ([0-9]+) in \(([0-9]+) cached\).*/\1/')
        cached=$(echo "$stats" | sed -E 's/.*tokens: ([0-9]+) in \(([0-9]+) cached\).*/\2/')
        printf "| %s | %s | %s | %s | %s | %.1f s |\n" "$example" "$([ $reuse = 1 ] && echo on || echo off)" \
            "$input" "$((input - cached))" "$cached" "$(echo "$end - $start" | bc)"
    done
done
