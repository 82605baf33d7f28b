#!/usr/bin/env bash
# The in-process llama.cpp against llama-server, per token, side by side in one run
# (issue #19): the same GGUF, the same prompt of 431 tokens evaluated in one batch and
# 20 greedy answer tokens, several rounds each, in turn. The local figures come from
# `crates/provider-local/examples/local_speed.rs` (a context made as the local provider makes
# it); the server's are its own `timings` from `/completion` (prompt cache off).
#
#     tools/local-model/setup.sh && tools/local-model/speed.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/local-model/common.sh
rounds="${1:-5}"
port=8778
cargo build --release -q -p provider-local --features llama --example local_speed
"$llama_server" --model "$model" --host 127.0.0.1 --port "$port" --ctx-size 8192 \
    --parallel 2 > "$root/speed-server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_for_server "$port" "$root/speed-server.log"
for n in $(seq 0 $((rounds - 1))); do
    echo -n "local         "
    target/release/examples/local_speed "$model" 1 | tail -1
    echo -n "llama-server  "
    PORT="$port" N="$n" python3 - <<'PY'
import json, os, urllib.request
words = " ".join(f"word{i} is a test of the prompt speed." for i in range(40))
body = {"prompt": words + os.environ["N"], "n_predict": 20, "cache_prompt": False,
        "temperature": 0, "ignore_eos": True}
req = urllib.request.Request(f"http://127.0.0.1:{os.environ['PORT']}/completion",
                             data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
t = json.loads(urllib.request.urlopen(req).read())["timings"]
print(f"{t['prompt_n']} {t['prompt_per_token_ms']:.2f} ms/token prompt; "
      f"{t['predicted_n']} {t['predicted_per_token_ms']:.2f} ms/token answer")
PY
done
