#!/usr/bin/env python3
"""The quality benchmark of #39: runs variants of the Philadelphia cafes benchmark, each
a sap program beside this file, over a fixed range of the 100 requests, on one model and
provider, and prints Hits@1, Hits@5, model calls, tokens, time per request and, for the
variants that score every cafe, how many requests the tie-break decided, as a Markdown
table.

    tools/quality-bench/run.py --variants first_five,direct,cot,anot_prelude --first 0 --count 10 \\
        --seeds 0,1 -- --provider local --model ~/.cache/sap-local-model/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf

Variants: `first_five` (the cafes in file order: the floor, no model), `direct` (one
call per request with all 50 cafes), `cot` (the same with a reasoning field first) and
`anot_prelude` (`anot::scores` from the prelude, ties broken by a shuffle drawn from the
seed; one row per seed).
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


# The variants whose `main` takes a seed for breaking ties.
SEEDED = {"anot_prelude", "anot_gold_plan"}


def run(sapc: str, variant: str, first: int, count: int, seed: int, flags: list[str]) -> dict:
    started = time.monotonic()
    args = [str(first), str(count)] + ([str(seed)] if variant in SEEDED else [])
    out = subprocess.run(
        [sapc, "run", str(HERE / f"{variant}.sap"), "--stats", *flags, "--", *args],
        capture_output=True, text=True, cwd=ROOT,
    )
    wall = time.monotonic() - started
    if out.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{out.stderr}")
    results = []
    ties = {"top": 0, "five": 0}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            _, rid, gold, ranked = line.split(" ", 3)
            results.append((rid, int(gold), json.loads(ranked)))
        elif line.startswith("TIES "):
            kind = line.split(" ")[2]
            if kind in ties:
                ties[kind] += 1
    stats = re.search(r"(\d+) LLM calls.*?tokens: (\d+) in.*?, (\d+) out", out.stderr)
    calls, tokens_in, tokens_out = (int(g) for g in stats.groups()) if stats else (0, 0, 0)
    n = len(results)
    return {
        "variant": variant + (f" (seed {seed})" if variant in SEEDED else ""),
        "ties": f"{ties['top']} / {ties['five']}" if variant in SEEDED else "—",
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
    parser.add_argument("--seeds", default="0", help="seeds for the tie-break, comma-separated")
    parser.add_argument("flags", nargs="*", help="sapc run's flags, after --")
    args = parser.parse_args()
    print(f"requests {args.first + 1}–{args.first + args.count}; flags: {' '.join(args.flags) or '(none)'}\n")
    print(
        "| variant | requests | Hits@1 | Hits@5 | drawn: first place / fifth | model calls "
        "| prompt tokens | output tokens | s per request |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for variant in args.variants.split(","):
        # The floor and the gold plan make no model call: an empty transcript answers
        # none, so a call would fail rather than reach a model.
        flags = ["--replay", "/dev/null"] if variant in ("first_five", "anot_gold_plan") else args.flags
        seeds = [int(s) for s in args.seeds.split(",")] if variant in SEEDED else [0]
        for seed in seeds:
            r = run(args.sapc, variant, args.first, args.count, seed, flags)
            n = max(r["requests"], 1)
            print(
                f"| {r['variant']} | {r['requests']} | {100 * r['hits1'] / n:.0f}% | {100 * r['hits5'] / n:.0f}% "
                f"| {r['ties']} | {r['calls']} | {r['tokens_in']} | {r['tokens_out']} "
                f"| {r['seconds_per_request']:.1f} |",
                flush=True,
            )

if __name__ == "__main__":
    main()
