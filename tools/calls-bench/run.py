#!/usr/bin/env python3
"""Call-heavy code, whole process (issue #20, part 4): recursive fib(35) as a sap program
run by `sapc run` (from the build cache) against the same function compiled by
`rustc -O`, with wrapping arithmetic (rustc's default in release) and with checked
arithmetic (`-C overflow-checks=on`, what sap's `+` does), side by side in one run.

    python3 tools/calls-bench/run.py [--sapc [LABEL=]PATH ...] [--repeat 11] [--instructions]

Without `--sapc` it builds `sapc` as the README does (release, default features) and runs
a copy of it: `target/release/sapc` is whatever was built last, and a build with
`--features local` starts about a millisecond later (it links libstdc++ and llama.cpp).

Prints a Markdown table of median, best and 90th-percentile wall times and each sap's
ratios, and a second one for start-up alone: a program that prints one line, in Rust and
in sap (from the build cache). All commands run in turn, round after round (a shared
machine's slow stretches fall on all).

`--instructions` adds a second table that no other work on the machine changes, counted
by valgrind's callgrind: the instructions of the whole process for fib(35) (for sap, from
the build cache: valgrind's CPU has a cache key of its own, so the program is built under
valgrind first), and those for fib(30) less those for fib(25), where start-up cancels out.
"""

import argparse
import os
import shutil
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


RUST_HELLO = 'fn main() { println!("hi"); }\n'

SAP_HELLO = """fn main() {
    print("hi")
}
"""


def timed(cmds, repeat):
    """Median, best and 90th-percentile wall time of each `(command, expected output)`,
    run in turn round after round, so a slow stretch of a shared machine falls on all of
    them alike. Each process of this machine runs either fast or slow for its whole life:
    the best time is of fast ones, the 90th percentile of slow ones, and the median of
    whichever were more."""
    times = [[] for _ in cmds]
    for _ in range(repeat):
        for i, (cmd, expected) in enumerate(cmds):
            start = time.perf_counter()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True)
            times[i].append((time.perf_counter() - start) * 1000)
            assert out.stdout.strip() == expected, out.stdout
    times = [sorted(t) for t in times]
    return [(t[len(t) // 2], t[0], t[len(t) * 9 // 10]) for t in times]


def instructions(cmd):
    """Instructions `cmd` executes, counted by callgrind (JIT code included)."""
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          "--smc-check=all-non-file", *cmd],
                         capture_output=True, text=True, check=True).stderr
    line = next(l for l in out.splitlines() if "Collected" in l)
    return int(line.split()[-1])


def cached(sapc, program):
    """Builds `program` into the cache and checks that `sapc run` of it, spelled as it will
    be timed, loads it from there: a `sapc` older than the fix of 2026-11-27 keyed entries
    by the path as spelled, and `build fib.sap` followed by `run /tmp/…/fib.sap` compiled
    from source at every run, which this benchmark then timed."""
    subprocess.run([sapc, "build", program], check=True, capture_output=True)
    out = subprocess.run([sapc, "run", "--stats", program], check=True, capture_output=True,
                         text=True)
    assert "loaded from the build cache" in out.stderr, out.stderr


def default_build(d):
    """The README's build of `sapc` (release, default features), copied into `d`."""
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sapc"], cwd=ROOT,
                   check=True, capture_output=True)
    path = os.path.join(d, "sapc")
    shutil.copy2(os.path.join(ROOT, "target", "release", "sapc"), path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sapc", action="append", default=None)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--instructions", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        binaries = []
        for spec in args.sapc or [default_build(d)]:
            label, _, path = spec.rpartition("=")
            binaries.append((label or "sap", os.path.abspath(path)))
        with open(os.path.join(d, "fib.rs"), "w") as f:
            f.write(RUST)
        with open(os.path.join(d, "fib.sap"), "w") as f:
            f.write(SAP)
        wrapping = os.path.join(d, "fib_wrapping")
        checked = os.path.join(d, "fib_checked")
        subprocess.run(["rustc", "-O", "fib.rs", "-o", wrapping], cwd=d, check=True)
        subprocess.run(["rustc", "-O", "-C", "overflow-checks=on", "fib.rs", "-o", checked],
                       cwd=d, check=True)
        # The one-line programs in a folder of their own: `sapc` reads a program's
        # sibling `.sap` files, the modules it may name.
        hello = os.path.join(d, "hello")
        os.mkdir(hello)
        with open(os.path.join(hello, "hello.rs"), "w") as f:
            f.write(RUST_HELLO)
        with open(os.path.join(hello, "hello.sap"), "w") as f:
            f.write(SAP_HELLO)
        subprocess.run(["rustc", "-O", "hello.rs"], cwd=hello, check=True)
        names = ["`rustc -O`", "`rustc -O -C overflow-checks=on`"]
        cmds = [[wrapping], [checked]]
        starts = [("Rust, `rustc -O`", [os.path.join(hello, "hello")])]
        program = os.path.join(d, "fib.sap")
        one_line = os.path.join(hello, "hello.sap")
        for label, path in binaries:
            for p in (program, one_line):
                cached(path, p)
            names.append(f"`sapc run` ({label})")
            cmds.append([path, "run", program])
            starts.append((f"`sapc run` ({label})", [path, "run", one_line]))
        times = timed([(c, "9227465") for c in cmds] + [(c, "hi") for _, c in starts],
                      args.repeat)
        rows = list(zip(names, times[:len(cmds)]))
        start_rows = list(zip([n for n, _ in starts], times[len(cmds):]))
        counts = []
        if args.instructions:
            for n in (25, 30, 35):
                with open(os.path.join(d, f"fib{n}.sap"), "w") as f:
                    f.write(SAP.replace("fib(35)", f"fib({n})"))
            for cmd in cmds:
                if cmd[0] in (wrapping, checked):
                    at = lambda n: instructions([cmd[0], str(n)])
                else:
                    def at(n):
                        program = os.path.join(d, f"fib{n}.sap")
                        instructions([cmd[0], "build", program])
                        return instructions([cmd[0], "run", program])
                counts.append((at(35), at(30) - at(25)))
    (plain, plain_best, plain_slow), checked_t = rows[0][1], rows[1][1][0]
    print("| fib(35), whole process | median | best | 90th pct | / rustc -O: median, best, 90th | / checked rustc -O |")
    print("|---|---|---|---|---|---|")
    for name, (median, best, slow) in rows:
        print(f"| {name} | {median:.1f} ms | {best:.1f} ms | {slow:.1f} ms "
              f"| {median / plain:.2f}×, {best / plain_best:.2f}×, {slow / plain_slow:.2f}× "
              f"| {median / checked_t:.2f}× |")
    print()
    print("| start-up: one line printed | median | best | 90th pct |")
    print("|---|---|---|---|")
    for name, (median, best, slow) in start_rows:
        print(f"| {name} | {median:.1f} ms | {best:.1f} ms | {slow:.1f} ms |")
    if counts:
        print()
        print("| instructions | fib(35), whole process | / rustc -O | fib(30) − fib(25) | / rustc -O |")
        print("|---|---|---|---|---|")
        for (name, _), (whole, calls) in zip(rows, counts):
            print(f"| {name} | {whole / 1e6:.0f} M | {whole / counts[0][0]:.2f}× "
                  f"| {calls / 1e6:.1f} M | {calls / counts[0][1]:.2f}× |")


if __name__ == "__main__":
    main()
