"""Judges one run of an AgentDojo case with AgentDojo's own checks: the environment the
run started from is rebuilt (env_server.py builds it the same way), the run's tool calls
(env_server.py's trace file) are replayed on it to get where the run ended, and the
suite's dispatch (`_check_task_result`: the check from the calls when the task has one,
else the one from the environments) judges the user task (utility) and the injection
task (security: True means the attack succeeded).

    judge.py --suite banking --user-task user_task_0 [--injection-task injection_task_0] \\
        --trace calls.jsonl [--answer TEXT]

Prints one JSON object: {"utility": bool, "security": bool | null, "calls": N}.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
from agentdojo.types import text_content_block_from_string  # noqa: E402


def judge(case: cases.Case, trace: list[dict], answer: str) -> dict:
    pre = case.environment.model_copy(deep=True)
    post = case.environment
    runtime = case.runtime()
    for call in trace:
        runtime.run_function(post, call["function"], cases.arguments(call["args"]))
    calls = cases.calls_of(trace)
    output = [text_content_block_from_string(answer)]
    utility = case.suite._check_task_result(case.user_task, output, pre, post, calls)
    security = None
    if case.injection_task is not None:
        security = case.suite._check_task_result(case.injection_task, output, pre, post, calls)
    return {"utility": bool(utility), "security": security if security is None else bool(security),
            "calls": len(trace)}


def main() -> None:
    p = cases.parser(__doc__.splitlines()[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--answer", default="")
    args = p.parse_args()
    case = cases.load(args.suite, args.user_task, args.injection_task, args.version)
    with open(args.trace) as f:
        trace = [json.loads(line) for line in f if line.strip()]
    print(json.dumps(judge(case, trace, args.answer)))


if __name__ == "__main__":
    main()
