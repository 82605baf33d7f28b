#!/usr/bin/env bash
# The in-process model against llama.cpp's own server, side by side in one run (issue
# #19): the same GGUF (SmolLM2-135M-Instruct, from setup.sh), the same examples, this
# machine's cores. For each example and each way of running it: exit status, model
# calls, prompt tokens sent, prompt tokens *evaluated* (for `--provider local`, those
# not reused from the KV cache, from `--stats`; for llama-server, its own counter
# `llamacpp:prompt_tokens_total` from `/metrics`, read before and after the run, which
# excludes what its slots' prompt caches reused), answer tokens, the model's loading,
# wall time and time per answer.
#
# "Load" is the time until the model could answer: for `--provider local` the loading
# in the sapc process (`--stats`), part of its wall time; for a cold server, from its
# start until it answers, which its run's wall time does not include (a warm server's
# was paid before). "Per answer" is the wall time less the load the wall time
# includes, over the calls: the time spent answering, compared on equal terms.
#
# Each runs two ways. llama-server *cold* is a server started for this example alone (no
# cache from before); *warm* is the example's second run on a server that has served
# every example before it and this one once (its slots and its RAM prompt cache keep
# their prompts). The local model *cold* keeps nothing from before (an empty
# `SAP_LOCAL_KV_CACHE`); *warm* is the same example run again, restoring the first
# call's prompt the cold run kept.
#
#     tools/local-model/setup.sh && tools/local-model/vs-server.sh
#
# EXAMPLES="a b" runs only those (default: got_day_plan anot_cafes code_analysis react
# inbox_triage). llama-server is built on the first run (see tools/real-models/install.sh)
# and serves with `--ctx-size 8192 --parallel 2`, as tools/real-models/run.sh does.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/local-model/common.sh
port=8777
server() { # PORT: starts llama-server there, returns when it answers
    "$llama_server" --model "$model" --host 127.0.0.1 --port "$1" --ctx-size 8192 \
        --parallel 2 --metrics >> "$root/vs-server.log" 2>&1 &
    echo $! > "$root/vs-server-$1.pid"
    wait_for_server "$1" "$root/vs-server.log"
}
stop() { # PORT: stops the server started there, returns when it is gone
    local pid
    pid=$(cat "$root/vs-server-$1.pid" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
server "$port"
trap 'stop $port; stop $((port + 1))' EXIT
export -f server stop wait_for_server
export llama_server model root
EXAMPLES="${EXAMPLES:-got_day_plan anot_cafes code_analysis react inbox_triage}" \
    SAPC="${SAPC:-target/release/sapc}" MODEL="$model" PORT="$port" python3 - <<'PY'
import os, re, subprocess, tempfile, time, urllib.request

sapc, model, warm = os.environ["SAPC"], os.environ["MODEL"], int(os.environ["PORT"])
cold = warm + 1

def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    m = re.search(rf"^llamacpp:{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0

def run(example, args, env=None):
    start = time.perf_counter()
    p = subprocess.run([sapc, "run", f"examples/{example}.sap", "--stats", *args],
                       capture_output=True, text=True, timeout=1800,
                       env={**os.environ, **(env or {})})
    wall = time.perf_counter() - start
    line = next((l for l in p.stderr.splitlines() if "LLM calls" in l), "")
    calls = int(re.match(r"(\d+) LLM calls", line).group(1)) if line else 0
    m = re.search(r"model: loaded in this process in ([0-9.]+) s", p.stderr)
    load = float(m.group(1)) if m else 0.0
    m = re.search(r"tokens: (\d+) in(?: \((\d+) cached\))?, (\d+) out", line)
    sent, cached, out = (int(m.group(1)), int(m.group(2) or 0), int(m.group(3))) if m else (0, 0, 0)
    return p.returncode, calls, sent, cached, out, load, wall

print("| example | run | exit | calls | prompt tokens | evaluated | answer tokens | load | wall time | per answer |")
print("|---|---|---|---|---|---|---|---|---|---|")
for example in os.environ["EXAMPLES"].split():
    rows = []
    with tempfile.TemporaryDirectory() as kept:
        for name in ["local, cold", "local, warm"]:
            code, calls, sent, cached, out, load, wall = run(
                example, ["--provider", "local", "--model", model], {"SAP_LOCAL_KV_CACHE": kept})
            rows.append((name, code, calls, sent, sent - cached, out, f"{load:.2f} s", wall - load, wall))
    start = time.perf_counter()
    subprocess.run(["bash", "-c", f"server {cold}"], check=True)
    started = f"{time.perf_counter() - start:.2f} s"
    for name, port in [("llama-server, cold", cold), ("llama-server, warm", warm)]:
        args = ["--provider", "llamacpp", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "smollm2"]
        if port == warm:
            run(example, args)  # served once before the run measured
        before = metric(port, "prompt_tokens_total")
        code, calls, sent, _, out, _, wall = run(example, args)
        rows.append((name, code, calls, sent, int(metric(port, "prompt_tokens_total") - before), out,
                     started if port == cold else "-", wall, wall))
        if port == cold:
            subprocess.run(["bash", "-c", f"stop {cold}"], check=True)
    for name, code, calls, sent, evaluated, out, load, answering, wall in rows:
        per = f"{answering / calls:.2f} s" if calls else "-"
        print(f"| {example} | {name} | {code} | {calls} | {sent:,} | {evaluated:,} | {out:,} | {load} | {wall:.1f} s | {per} |")
PY
