#!/usr/bin/env python3
"""Generates the compile-time benchmark's programs: `n` small functions of 7 lines each,
all reachable from `main` (function i calls 2i+1 and 2i+2, a binary tree, so the call
depth stays small), doing the arithmetic, branching and looping a real helper does.

    gen.py N > program.sap
"""
import sys


def program(n: int) -> str:
    out = []
    for i in range(n):
        left, right = 2 * i + 1, 2 * i + 2
        calls = " + ".join(f"f{c}(x + {i % 7})" for c in (left, right) if c < n) or "0"
        out.append(
            f"fn f{i}(x: i64) -> i64 {{\n"
            f"    let a = x * {i % 13 + 2} + {i}\n"
            f"    let b = a % {i % 97 + 3}\n"
            f"    if b > {i % 5} {{ return b + {calls} }}\n"
            f"    let c = [a, b, {i}]\n"
            f"    len(c) + a - b\n"
            f"}}\n"
        )
    out.append("fn main() -> () {\n    print(to_string(f0(1)))\n}\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(program(int(sys.argv[1])))
