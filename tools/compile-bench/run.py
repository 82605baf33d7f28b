#!/usr/bin/env python3
"""The compile-time benchmark: whole `sapc` processes on generated programs of n small
functions in two shapes (see gen.py: `tree`, functions calling each other; `wide`, one
`main` calling each in turn), side by side in one run.

For each size it times, best of --runs: `sapc check`; `sapc run` cold (an empty build
cache); `sapc build`; `sapc run` from the build cache. With --baseline OTHER_SAPC the
same commands of another build of sapc run in the same loop, for a before/after table.

    cargo build --release -p sapc
    tools/compile-bench/run.py [--runs 7] [--baseline /path/to/old/sapc] [--shapes tree,wide]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen import SHAPES, program  # noqa: E402

SIZES = [500, 1000, 2000]


def timed(cmd, env):
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr.decode()}")
    return elapsed, done.stdout


def measure(sapc, path, runs, scratch):
    cache = os.path.join(scratch, "cache")
    env = dict(os.environ, SAP_CACHE_DIR=cache)
    best = {}

    def keep(name, ms):
        best[name] = min(best.get(name, float("inf")), ms)

    outputs = set()
    for _ in range(runs):
        keep("check", timed([sapc, "check", path], env)[0])
        shutil.rmtree(cache, ignore_errors=True)
        ms, out = timed([sapc, "run", path], env)
        keep("cold", ms)
        outputs.add(out)
        keep("build", timed([sapc, "build", path], env)[0])
        ms, out = timed([sapc, "run", path], env)
        keep("cached", ms)
        outputs.add(out)
    if len(outputs) != 1:
        sys.exit(f"{sapc} printed different outputs for {path}: {outputs}")
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sapc", default=os.path.join(HERE, "../../target/release/sapc"))
    parser.add_argument("--baseline")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    builds = [("sapc", os.path.abspath(args.sapc))]
    if args.baseline:
        builds.insert(0, ("baseline", os.path.abspath(args.baseline)))
    scratch = tempfile.mkdtemp(prefix="sap-compile-bench-")
    try:
        rows = []
        for shape in shapes:
            for n in SIZES:
                directory = os.path.join(scratch, f"{shape}-n{n}")
                os.makedirs(directory)
                path = os.path.join(directory, "program.sap")
                text = program(n, shape)
                with open(path, "w") as f:
                    f.write(text)
                lines = text.count("\n")
                for name, sapc in builds:
                    cache = os.path.join(scratch, f"{name}-{shape}-{n}")
                    best = measure(sapc, path, args.runs, cache)
                    rows.append((name, shape, n, lines, best))
        print(f"best of {args.runs} runs, milliseconds, whole processes\n")
        print("| build | shape | n (lines) | `sapc check` | `sapc run` cold | `sapc build` | `sapc run` from the cache |")
        print("|---|---|---|---|---|---|---|")
        for name, shape, n, lines, b in rows:
            print(
                f"| {name} | {shape} | {n} ({lines // 1000}k) | {b['check']:.0f} | {b['cold']:.0f} "
                f"| {b['build']:.0f} | {b['cached']:.0f} |"
            )
        for name, _ in builds:
            for shape in shapes:
                cold = {n: b["cold"] for (bn, sh, n, _, b) in rows if bn == name and sh == shape}
                print(f"\n{name}, {shape}: cold growth from 4k to 16k lines {cold[2000] / cold[500]:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
