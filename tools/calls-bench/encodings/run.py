#!/usr/bin/env python3
"""Instructions or bytes? The same `fib` as sap's code generator writes it, as it could be
written in fewer instructions, and in the same instructions with shorter encodings, timed
in turn with `rustc -O`'s fib, whole process, fib(35) (docs/notes/performance-history.md, "Calls:
instructions, not bytes").

    python3 tools/calls-bench/encodings/run.py [--repeat 21]

Needs gcc (to assemble), rustc and valgrind (instruction counts, fib(30) less fib(25)).
"""

import argparse
import os
import re
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUST = """fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }
fn main() {
    let n: i64 = std::env::args().nth(1).map_or(35, |a| a.parse().unwrap());
    println!("{}", fib(n));
}
"""
VARIANTS = ["fewer", "cranelift", "cranelift_short"]
# `cranelift.S` spells out Cranelift's encodings (32-bit displacements and immediates);
# `cranelift_short.S` is made from it with the mnemonics, for which the assembler picks
# the shortest: the same instructions, fewer bytes.
SHORTER = [
    (r"\.byte 0x0f,0x84; \.long (\w+)-\.-4", r"je \1"),
    (r"\.byte 0x0f,0x8c; \.long (\w+)-\.-4", r"jl \1"),
    (r"\.byte 0x0f,0x85; \.long (\w+)-\.-4", r"jne \1"),
    (r"\.byte 0xe9; \.long (\w+)-\.-4", r"jmp \1"),
    (r"\.byte 0x48,0x81,0xc7; \.long (-\d+)", r"add $\1,%rdi"),
    (r"\.byte 0x48,0x81,0xc6; \.long (-\d+)", r"add $\1,%rsi"),
    (r"fib_cranelift\b", "fib_cranelift_short"),
]


def shorter(text):
    for pattern, replacement in SHORTER:
        text = re.sub(pattern, replacement, text)
    return text


def instructions(cmd):
    err = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                         capture_output=True, text=True, check=True).stderr
    return int(next(l for l in err.splitlines() if "Collected" in l).split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        fib = os.path.join(d, "fib")
        with open(os.path.join(HERE, "cranelift.S")) as f:
            short = shorter(f.read())
        assert ".byte" not in short, "an encoding cranelift_short does not rewrite"
        with open(os.path.join(d, "cranelift_short.S"), "w") as f:
            f.write(short)
        subprocess.run(["gcc", "-O2", "-o", fib, "main.c", "fewer.S", "cranelift.S",
                        os.path.join(d, "cranelift_short.S")], cwd=HERE, check=True)
        with open(os.path.join(d, "fib.rs"), "w") as f:
            f.write(RUST)
        rust = os.path.join(d, "fib_rs")
        subprocess.run(["rustc", "-O", "fib.rs", "-o", rust], cwd=d, check=True)
        cmds = [("`rustc -O`", [rust])] + [(f"`{v}`", [fib, v]) for v in VARIANTS]
        times = [[] for _ in cmds]
        for _ in range(args.repeat):
            for i, (_, cmd) in enumerate(cmds):
                start = time.perf_counter()
                out = subprocess.run(cmd + ["35"], check=True, capture_output=True, text=True)
                times[i].append((time.perf_counter() - start) * 1000)
                assert out.stdout.strip() == "9227465", out.stdout
        counts = [instructions(cmd + ["30"]) - instructions(cmd + ["25"]) for _, cmd in cmds]
        size = {}
        dis = subprocess.run(["objdump", "-d", fib], capture_output=True, text=True).stdout
        for v in VARIANTS:
            body = dis.split(f"<fib_{v}>:\n", 1)[1].split("\n\n", 1)[0]
            size[v] = sum(len(l.split("\t")[1].split()) for l in body.splitlines()
                          if l.count("\t") >= 2 and "nop" not in l)
    base = sorted(times[1])[len(times[1]) // 2]
    print("| fib(35), whole process | median | best | / `fewer` | fib(30) − fib(25), instructions | code bytes |")
    print("|---|---|---|---|---|---|")
    for (name, _), t, n in zip(cmds, times, counts):
        med = sorted(t)[len(t) // 2]
        b = size.get(name.strip("`"), "")
        print(f"| {name} | {med:.1f} ms | {min(t):.1f} ms | {med / base:.2f}× | {n / 1e6:.1f} M | {b} |")
    print()
    print("Each round, in ms:", " / ".join(name for name, _ in cmds))
    for r in zip(*times):
        print(" ", "  ".join(f"{x:.0f}" for x in r))


if __name__ == "__main__":
    main()
