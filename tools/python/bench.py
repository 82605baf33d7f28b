#!/usr/bin/env python3
"""The Python package's figures (#41), in a fresh virtual environment with the release
wheel installed:

1. What one call from Python costs above the same call made inside sap: a function
   with one model call, answered from a transcript (replay), called N times from Python
   (`Program.call`), against one call of a sap function that makes the same N calls in
   a loop. Target: ≤ 50 µs per call.
2. 1,000 concurrent calls from asyncio (`acall`) against a server that answers in
   100 ms (tools/fanout-bench's Node server): the wall time, against 100 ms for all of
   them at once.

    tools/python/bench.py [--python VENV/bin/python] [--calls 2000] [--concurrent 1000]

Without `--python` it builds the release wheel (maturin, on the workspace's target
directory) and installs it into a fresh environment from tools/python/setup.sh's cache.
Prints a Markdown table.
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROGRAM = """\
enum Verdict { Match, NoMatch }

/// Judge one item.
fn judge(ctx: Context, item: String) -> Verdict {
    "Judge whether this item fits."!
    item!
}

fn many(ctx: Context, item: String, n: i64) -> i64 {
    let i = 0
    let matched = 0
    while i < n {
        if judge(Context::new(), item) == Verdict::Match {
            matched = matched + 1
        }
        i = i + 1
    }
    matched
}

fn main() {
}
"""

MEASURE = r"""
import asyncio, subprocess, sys, time
import saplang

server_js, folder, calls, concurrent = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
program = folder + "/bench.sap"
transcript = folder + "/bench.transcript.jsonl"

def server(port, latency):
    # tools/fanout-bench's server: Node, a fixed latency, a verdict for every request.
    proc = subprocess.Popen(["node", server_js, str(port), str(latency)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc, f"http://127.0.0.1:{port}/v1"

# Record `calls` answers once, then replay them.
quick, url = server(8791, 0)
recorder = saplang.load(program, provider="openai", base_url=url, model="m",
                        record=transcript)
recorder.call("many", item="x", n=calls)
del recorder
quick.kill()

def best(f, rounds=5):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)

def from_python():
    p = saplang.load(program, replay=transcript)
    start = time.perf_counter()
    for _ in range(calls):
        p.call("judge", item="x")
    return time.perf_counter() - start

def inside_sap():
    p = saplang.load(program, replay=transcript)
    start = time.perf_counter()
    p.call("many", item="x", n=calls)
    return time.perf_counter() - start

py = min(from_python() for _ in range(5))
sap = min(inside_sap() for _ in range(5))
print(f"python {py / calls * 1e6:.1f} sap {sap / calls * 1e6:.1f} over {(py - sap) / calls * 1e6:.1f}")

slow, url = server(8792, 100)
p = saplang.load(program, provider="openai", base_url=url, model="m",
                 concurrency=concurrent)

async def gather():
    start = time.perf_counter()
    results = await asyncio.gather(*(p.acall("judge", item=f"x{i}") for i in range(concurrent)))
    assert len(results) == concurrent
    return time.perf_counter() - start

walls = [asyncio.run(gather()) for _ in range(3)]
print(f"concurrent {sorted(walls)[1] * 1000:.0f}")
slow.kill()
"""


def fresh_python(scratch):
    cache = subprocess.run([os.path.join(HERE, "setup.sh")], check=True,
                           capture_output=True, text=True).stdout.strip()
    wheels = os.path.join(scratch, "wheels")
    subprocess.run([os.path.join(cache, "venv/bin/maturin"), "build", "--release", "--quiet",
                    "-m", os.path.join(ROOT, "crates/python/Cargo.toml"), "-o", wheels],
                   check=True, cwd=ROOT)
    venv = os.path.join(scratch, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    wheel = [os.path.join(wheels, w) for w in os.listdir(wheels) if w.endswith(".whl")][0]
    subprocess.run([os.path.join(venv, "bin/pip"), "install", "--quiet", "--no-index",
                    "--find-links", os.path.join(cache, "wheelhouse"), wheel], check=True)
    return os.path.join(venv, "bin/python")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", help="a Python with saplang installed")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrent", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        python = args.python or fresh_python(scratch)
        with open(os.path.join(scratch, "bench.sap"), "w") as f:
            f.write(PROGRAM)
        run = subprocess.run(
            [python, "-c", MEASURE, os.path.join(ROOT, "tools/fanout-bench/server.js"), scratch,
             str(args.calls), str(args.concurrent)],
            capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"the measurement failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
        out = run.stdout.split("\n")
    call = dict(zip(out[0].split()[0::2], map(float, out[0].split()[1::2])))
    wall = float(out[1].split()[1])
    print("| figure | today | target |")
    print("|---|---|---|")
    print(f"| one call from Python (`Program.call`), replayed, best of 5 × {args.calls} "
          f"| {call['python']:.1f} µs | |")
    print(f"| the same call inside sap (a sap loop), best of 5 × {args.calls} "
          f"| {call['sap']:.1f} µs | |")
    print(f"| Python's cost above sap's, per call | **{call['over']:.1f} µs** | ≤ 50 µs |")
    print(f"| {args.concurrent:,} concurrent `acall`s, server answering in 100 ms, median of 3 "
          f"| **{wall:,.0f} ms** | (100 ms if all at once) |")


if __name__ == "__main__":
    main()
