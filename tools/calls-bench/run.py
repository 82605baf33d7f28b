#!/usr/bin/env python3
"""Call-heavy code, whole process (issue #20, part 4): recursive fib(35) as a sap program
run by `sapc run` (from the build cache) against the same function compiled by
`rustc -O`, with wrapping arithmetic (rustc's default in release) and with checked
arithmetic (`-C overflow-checks=on`, what sap's `+` does), side by side in one run.

    python3 tools/calls-bench/run.py [--sapc [LABEL=]PATH ...] [--repeat 11]

Prints a Markdown table of median and best wall times, and each sap's ratio to both. The
commands run in turn, round after round (a shared machine's slow stretches fall on all).
"""

import argparse
import os
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

RUST = """fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }
fn main() {
    let n: i64 = std::env::args().nth(1).map_or(35, |a| a.parse().unwrap());
    println!("{}", fib(n));
}
"""

SAP = """fn fib(n: i64) -> i64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

fn main() {
    print(to_string(fib(35)))
}
"""


def timed(cmds, repeat):
    """Median and best wall time of each command, run in turn round after round, so a
    slow stretch of a shared machine falls on all of them alike."""
    times = [[] for _ in cmds]
    for _ in range(repeat):
        for i, cmd in enumerate(cmds):
            start = time.perf_counter()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True)
            times[i].append((time.perf_counter() - start) * 1000)
            assert out.stdout.strip() == "9227465", out.stdout
    return [(sorted(t)[len(t) // 2], min(t)) for t in times]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sapc", action="append", default=None)
    ap.add_argument("--repeat", type=int, default=11)
    args = ap.parse_args()
    binaries = []
    for spec in args.sapc or [os.path.join(ROOT, "target", "release", "sapc")]:
        label, _, path = spec.rpartition("=")
        binaries.append((label or "sap", os.path.abspath(path)))
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "fib.rs"), "w") as f:
            f.write(RUST)
        with open(os.path.join(d, "fib.sap"), "w") as f:
            f.write(SAP)
        wrapping = os.path.join(d, "fib_wrapping")
        checked = os.path.join(d, "fib_checked")
        subprocess.run(["rustc", "-O", "fib.rs", "-o", wrapping], cwd=d, check=True)
        subprocess.run(["rustc", "-O", "-C", "overflow-checks=on", "fib.rs", "-o", checked],
                       cwd=d, check=True)
        names = ["`rustc -O`", "`rustc -O -C overflow-checks=on`"]
        cmds = [[wrapping], [checked]]
        program = os.path.join(d, "fib.sap")
        for label, path in binaries:
            subprocess.run([path, "build", "fib.sap"], cwd=d, check=True, capture_output=True)
            names.append(f"`sapc run` ({label})")
            cmds.append([path, "run", program])
        rows = list(zip(names, timed(cmds, args.repeat)))
    plain, checked_t = rows[0][1][0], rows[1][1][0]
    print("| fib(35), whole process | median | best | / rustc -O | / checked rustc -O |")
    print("|---|---|---|---|---|")
    for name, (median, best) in rows:
        print(f"| {name} | {median:.1f} ms | {best:.1f} ms | {median / plain:.2f}× | {median / checked_t:.2f}× |")


if __name__ == "__main__":
    main()
