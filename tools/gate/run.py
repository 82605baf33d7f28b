#!/usr/bin/env python3
"""The benchmark gate: instruction counts of whole `sapc` processes, compared with the
figures committed in `figures.json` beside this file. CI runs it on the release build.

Time on a shared two-core machine is noise; the instructions a process executes are not
(callgrind counts them, whatever else the machine is doing). A workload whose count
rises more than 10% above its committed figure fails the gate. A change that must cost
more updates the figure in the same commit and says why:

    tools/gate/run.py                       # measure and compare (exit 1 on a rise)
    tools/gate/run.py --update --why "…"    # write today's counts as the figures
    tools/gate/run.py --only list,fib       # some workloads

The workloads: the programs benchmark (fib, loop, list, toposort, DP), each run from the
build cache so its count is the program's run and the cached start; `sapc check` of a
16k-line program; a cold `sapc run` (compiling to native code) of both compile-bench
shapes at 4k lines (16k lines take minutes under callgrind; the wall-clock benchmark,
tools/compile-bench, times 16k); and a run of both at 16k lines from the build cache
(the cached start).

Under valgrind the CPU looks different (fewer features), and the build cache keys on
them: each cache entry a workload runs from is built under valgrind too (its `none`
tool, uncounted), so the measured run finds it.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
FIGURES = os.path.join(HERE, "figures.json")
sys.path.insert(0, os.path.join(ROOT, "tools/compile-bench"))
from gen import program  # noqa: E402

# A rise above this fraction of the committed figure fails the gate.
TOLERANCE = 0.10
# 2,000 functions of the compile benchmark: 16k lines; 500: 4k lines.
FUNCTIONS = 2000
COLD_FUNCTIONS = 500
PROGRAMS = ["fib", "loop", "list", "toposort", "dp"]


def callgrind(cmd, env):
    """The instructions `cmd` executes, all threads, and what it printed."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    err = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        sys.exit(f"gate: {' '.join(cmd)} failed under valgrind (exit {done.returncode}):\n{err[-4000:]}")
    found = re.search(r"Collected\s*:\s*(\d+)", err)
    if not found:
        sys.exit(f"gate: callgrind printed no count for {' '.join(cmd)}:\n{err[-4000:]}")
    return int(found.group(1)), done.stdout


def uncounted(cmd, env):
    """Runs `cmd` under valgrind without counting (it sees the CPU the counted runs see)."""
    done = subprocess.run(
        ["valgrind", "--tool=none", *cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    if done.returncode != 0:
        sys.exit(f"gate: {' '.join(cmd)} failed:\n{done.stderr.decode(errors='replace')[-4000:]}")


def workloads(sapc, scratch):
    """(name, what, a function measuring it) for every workload, in order."""
    cache = os.path.join(scratch, "cache")
    # One environment for every process: the same variables make the same counts.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": scratch,
        "SAP_CACHE_DIR": cache,
        "LC_ALL": "C",
    }

    def from_cache(path):
        def measure():
            uncounted([sapc, "build", path], env)
            return callgrind([sapc, "run", path], env)

        return measure

    def cold(path):
        def measure():
            shutil.rmtree(cache, ignore_errors=True)
            return callgrind([sapc, "run", path], env)

        return measure

    def check(path):
        return lambda: callgrind([sapc, "check", path], env)

    out = []
    for name in PROGRAMS:
        path = os.path.join(HERE, "programs", f"{name}.sap")
        out.append((name, f"`{name}.sap` run from the build cache", from_cache(path)))
    def generated(shape, n):
        folder = os.path.join(scratch, f"{shape}-{n}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "program.sap")
        with open(path, "w") as f:
            f.write(program(n, shape))
        return path

    out.append(("check-16k", "`sapc check`, 16k lines (tree shape)", check(generated("tree", FUNCTIONS))))
    for shape in ("tree", "wide"):
        path = generated(shape, COLD_FUNCTIONS)
        out.append((f"cold-{shape}", f"`sapc run` cold, 4k lines ({shape} shape)", cold(path)))
    for shape in ("tree", "wide"):
        path = generated(shape, FUNCTIONS)
        out.append((f"cached-{shape}", f"`sapc run` from the cache, 16k lines ({shape} shape)", from_cache(path)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sapc", default=os.path.join(ROOT, "target/release/sapc"))
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--update", action="store_true", help="write the counts as the figures")
    parser.add_argument("--why", help="with --update: why the figures change (kept in the file)")
    args = parser.parse_args()
    if args.update and not args.why:
        sys.exit("gate: --update needs --why: say why the figures change")
    if shutil.which("valgrind") is None:
        sys.exit("gate: valgrind is not installed (apt-get install valgrind)")
    sapc = os.path.abspath(args.sapc)
    if not os.access(sapc, os.X_OK):
        sys.exit(f"gate: no sapc at {sapc} (cargo build --release -p sapc)")
    with open(FIGURES) as f:
        figures = json.load(f)
    only = set(args.only.split(",")) if args.only else None
    scratch = tempfile.mkdtemp(prefix="sap-gate-")
    failed = []
    try:
        print("| workload | what | committed | today | change |")
        print("|---|---|---|---|---|")
        for name, what, measure in workloads(sapc, scratch):
            if only and name not in only:
                continue
            count, output = measure()
            figure = figures.get(name, {}).get("instructions")
            if figure:
                change = count / figure - 1
                mark = ""
                if change > TOLERANCE:
                    mark = " **over**"
                    failed.append(name)
                print(f"| {name} | {what} | {figure:,} | {count:,} | {change:+.1%}{mark} |", flush=True)
            else:
                print(f"| {name} | {what} | none | {count:,} | new |", flush=True)
                if not args.update:
                    failed.append(name)
            if args.update:
                figures[name] = {"instructions": count, "why": args.why}
        if args.update:
            with open(FIGURES, "w") as f:
                json.dump(figures, f, indent=2)
                f.write("\n")
            print(f"\ngate: wrote {os.path.relpath(FIGURES, ROOT)}")
            return
        if failed:
            print(
                f"\ngate: {', '.join(failed)} rose more than {TOLERANCE:.0%} above the committed figure "
                "(or has none). Fix the slowdown, or update the figures with "
                "`tools/gate/run.py --update --why \"…\"` in the commit that explains it."
            )
            sys.exit(1)
        print(f"\ngate: every workload within {TOLERANCE:.0%} of its committed figure")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
