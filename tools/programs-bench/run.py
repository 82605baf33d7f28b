#!/usr/bin/env python3
"""Whole processes, side by side in one run: `sapc run` from the build cache against the
same program written in Rust (`rustc -O`, overflow checks on, as sap's arithmetic is
checked), in turn round after round; medians and best of --runs.

The programs are the gate's (tools/gate/programs) plus the issue's loop of 5*10^7
additions. With --baseline OTHER_SAPC another build runs in the same rounds.

    cargo build --release -p sapc
    tools/programs-bench/run.py [--runs 21] [--baseline /path/to/old/sapc]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
PROGRAMS = os.path.join(ROOT, "tools/gate/programs")
sys.path.insert(0, os.path.join(ROOT, "tools/compile-bench"))
from run import timed  # noqa: E402

SUM_LOOP = """fn main() -> () {
    let acc: i64 = 0
    let i: i64 = 0
    while i < 50000000 {
        acc = acc + i
        i += 1
    }
    print(to_string(acc))
}
"""

RUST = {
    "fib": """fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }
fn main() { println!("{}", fib(std::hint::black_box(30))); }""",
    "loop": """fn main() {
    let (mut acc, mut i): (i64, i64) = (0, 0);
    while i < std::hint::black_box(25_000_000) { acc = (acc * 31 + i) % 1_000_003; i += 1; }
    println!("{acc}");
}""",
    "sum_loop": """fn main() {
    let (mut acc, mut i): (i64, i64) = (0, 0);
    while i < std::hint::black_box(50_000_000) { acc = acc + i; i += 1; }
    println!("{acc}");
}""",
    "list": """fn main() {
    let mut xs: Vec<i64> = Vec::new();
    let mut i: i64 = 0;
    while i < std::hint::black_box(4_000_000) { xs.push(i % 1000); i += 1; }
    let mut total: i64 = 0;
    for x in &xs { total += *x; }
    println!("{total}");
}""",
    "dp": """fn main() {
    let n = std::hint::black_box(1_000_000usize);
    let mut dp: Vec<i64> = Vec::new();
    let mut i = 0;
    while i < n { dp.push(0); i += 1; }
    dp[1] = 1;
    let mut i = 2;
    while i < n { dp[i] = (dp[i - 1] + dp[i - 2]) % 1_000_000_007; i += 1; }
    println!("{}", dp[n - 1]);
}""",
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sapc", default=os.path.join(ROOT, "target/release/sapc"))
    parser.add_argument("--baseline")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="sap-programs-bench-")
    env = dict(os.environ, SAP_CACHE_DIR=os.path.join(scratch, "cache"))
    try:
        builds = [("sapc", os.path.abspath(args.sapc))]
        if args.baseline:
            builds.append(("baseline", os.path.abspath(args.baseline)))
        rows = []
        for name in RUST:
            sap = os.path.join(scratch, f"{name}.sap")
            if name == "sum_loop":
                with open(sap, "w") as f:
                    f.write(SUM_LOOP)
            else:
                shutil.copy(os.path.join(PROGRAMS, f"{name}.sap"), sap)
            rs = os.path.join(scratch, f"{name}.rs")
            with open(rs, "w") as f:
                f.write(RUST[name])
            exe = os.path.join(scratch, name)
            subprocess.run(["rustc", "-O", "-C", "overflow-checks=on", rs, "-o", exe], check=True)
            cmds = [("rustc -O", [exe])]
            for label, sapc in builds:
                subprocess.run([sapc, "build", sap], env=env, check=True, stdout=subprocess.DEVNULL)
                cmds.append((label, [sapc, "run", sap]))
            times = {label: [] for label, _ in cmds}
            outputs = set()
            for _ in range(args.runs):
                for label, cmd in cmds:
                    ms, out = timed(cmd, env)
                    times[label].append(ms)
                    outputs.add(out)
            if len(outputs) != 1:
                sys.exit(f"{name}: the programs printed different results: {outputs}")
            rows.append((name, {k: sorted(v) for k, v in times.items()}))
        labels = [label for label, _ in builds]
        print(f"median (best) of {args.runs} runs, milliseconds, whole processes\n")
        print("| program | rustc -O | " + " | ".join(f"{l} | {l} / rustc" for l in labels) + " |")
        print("|---|---|" + "---|---|" * len(labels))
        for name, t in rows:
            med = lambda k: t[k][len(t[k]) // 2]  # noqa: E731
            cells = [f"{med('rustc -O'):.1f} ({t['rustc -O'][0]:.1f})"]
            for l in labels:
                cells.append(f"{med(l):.1f} ({t[l][0]:.1f})")
                cells.append(f"{med(l) / med('rustc -O'):.2f}×")
            print(f"| {name} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
