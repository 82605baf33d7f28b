#!/usr/bin/env python3
"""Generates the compile-time benchmark's programs: `n` small functions of 7 lines each,
doing the arithmetic, branching and looping a real helper does, in two shapes:

- `tree`: function i calls 2i+1 and 2i+2 (a binary tree, so the call depth stays small);
- `wide`: no function calls another, and `main` calls each in turn
  (`t = (t + f17(t)) % 1000003`, n such lines): one very large caller.

    gen.py N [tree|wide] > program.sap
"""
import sys

SHAPES = ("tree", "wide")


def program(n: int, shape: str = "tree") -> str:
    if shape == "wide":
        return wide(n)
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


def wide(n: int) -> str:
    out = []
    for i in range(n):
        out.append(
            f"fn f{i}(x: i64) -> i64 {{\n"
            f"    let a = x % {i % 89 + 11} * {i % 13 + 2} + {i}\n"
            f"    if a > {i % 50 + 20} {{ return a % 1000 }}\n"
            f"    let s = 0\n"
            f"    for v in [a, {i % 7}, {i % 11}] {{ s += v }}\n"
            f"    s + 1\n"
            f"}}\n"
        )
    calls = "".join(f"    t = (t + f{i}(t)) % 1000003\n" for i in range(n))
    out.append(f"fn main() -> () {{\n    let t: i64 = 1\n{calls}    print(to_string(t))\n}}\n")
    return "\n".join(out)


if __name__ == "__main__":
    shape = sys.argv[2] if len(sys.argv) > 2 else "tree"
    if shape not in SHAPES:
        sys.exit(f"gen.py: the shape is one of {', '.join(SHAPES)}, not {shape!r}")
    sys.stdout.write(program(int(sys.argv[1]), shape))
