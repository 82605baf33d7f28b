#!/usr/bin/env python3
"""The quality benchmark of #39 (first pieces): runs variants of the Philadelphia cafes
benchmark, each a sap program beside this file, over a fixed range of the 100 requests,
on one model and provider, and prints Hits@1, Hits@5, model calls, tokens and time per
request as a Markdown table.

    tools/quality-bench/run.py --variants first_five,direct --first 0 --count 10 \\
        -- --provider local --model ~/.cache/sap-local-model/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf

Variants so far: `first_five` (the cafes in file order: the floor, no model) and
`direct` (one call per request with all 50 cafes). Chain of thought and ANoT are to come.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def run(sapc: str, variant: str, first: int, count: int, flags: list[str]) -> dict:
    started = time.monotonic()
    out = subprocess.run(
        [sapc, "run", str(HERE / f"{variant}.sap"), "--stats", *flags, "--", str(first), str(count)],
        capture_output=True, text=True, cwd=ROOT,
    )
    wall = time.monotonic() - started
    if out.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{out.stderr}")
    results = []
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            _, rid, gold, ranked = line.split(" ", 3)
            results.append((rid, int(gold), json.loads(ranked)))
    stats = re.search(r"(\d+) LLM calls.*?tokens: (\d+) in.*?, (\d+) out", out.stderr)
    calls, tokens_in, tokens_out = (int(g) for g in stats.groups()) if stats else (0, 0, 0)
    n = len(results)
    return {
        "variant": variant,
        "requests": n,
        "hits1": sum(r[2][:1] == [r[1]] for r in results),
        "hits5": sum(r[1] in r[2][:5] for r in results),
        "calls": calls,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "seconds_per_request": wall / max(n, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sapc", default=str(ROOT / "target/release/sapc"))
    parser.add_argument("--variants", default="first_five,direct")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("flags", nargs="*", help="sapc run's flags, after --")
    args = parser.parse_args()
    print(f"requests {args.first + 1}–{args.first + args.count}; flags: {' '.join(args.flags) or '(none)'}\n")
    print("| variant | requests | Hits@1 | Hits@5 | model calls | prompt tokens | output tokens | s per request |")
    print("|---|---|---|---|---|---|---|---|")
    for variant in args.variants.split(","):
        flags = [] if variant == "first_five" else args.flags
        r = run(args.sapc, variant, args.first, args.count, flags)
        n = max(r["requests"], 1)
        print(
            f"| {variant} | {r['requests']} | {100 * r['hits1'] / n:.0f}% | {100 * r['hits5'] / n:.0f}% "
            f"| {r['calls']} | {r['tokens_in']} | {r['tokens_out']} | {r['seconds_per_request']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
