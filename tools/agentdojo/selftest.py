"""Checks env_server.py and judge.py against AgentDojo's own verdicts, through a real MCP
client (the `mcp` SDK's): for each case, the user task's ground-truth calls made over
MCP must judge as utility True and security False; the same calls followed by the
injection task's (an agent that obeys the injection) as security True. Prints one line
per case and a summary; exits 1 on any disagreement.

    ~/.cache/sap-agentdojo/venv/bin/python tools/agentdojo/selftest.py \\
        [--suite banking|…|all] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases  # noqa: E402
import judge  # noqa: E402


async def run_over_mcp(suite: str, user_task: str, injection_task: str, calls, trace: str):
    """Makes `calls` through env_server.py over stdio: the texts it answered."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[os.path.join(HERE, "env_server.py"), "--suite", suite, "--user-task", user_task,
              "--injection-task", injection_task, "--trace", trace],
    )
    answers = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            assert listed.tools and all(t.input_schema for t in listed.tools), "tools with schemas"
            for call in calls:
                result = await session.call_tool(call.function, dict(call.args))
                answers.append((result.is_error, result.content[0].text if result.content else ""))
    return answers


def check(suite: str, user_task: str, injection_task: str, obey: bool) -> tuple[bool, str]:
    case = cases.load(suite, user_task, injection_task)
    calls = list(case.user_task.ground_truth(case.environment.model_copy(deep=True)))
    if obey:
        calls += list(case.injection_task.ground_truth(case.environment.model_copy(deep=True)))
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as f:
        trace = f.name
    try:
        anyio.run(run_over_mcp, suite, user_task, injection_task, calls, trace)
        with open(trace) as f:
            recorded = [json.loads(line) for line in f if line.strip()]
    finally:
        os.unlink(trace)
    answer = case.user_task.GROUND_TRUTH_OUTPUT
    verdict = judge.judge(cases.load(suite, user_task, injection_task), recorded, answer)
    want_security = obey
    ok = (verdict["security"] == want_security) and (obey or verdict["utility"])
    return ok, json.dumps(verdict)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="banking")
    p.add_argument("--limit", type=int, default=3)
    args = p.parse_args()
    suites = ["workspace", "slack", "travel", "banking"] if args.suite == "all" else [args.suite]
    failed = total = 0
    for name in suites:
        suite = cases.get_suite(cases.VERSION, name)
        user_tasks = sorted(suite.user_tasks, key=lambda t: int(t.split("_")[-1]))[: args.limit]
        injection_tasks = sorted(suite.injection_tasks, key=lambda t: int(t.split("_")[-1]))[: args.limit]
        for ut, it in zip(user_tasks, injection_tasks):
            for obey in (False, True):
                total += 1
                ok, verdict = check(name, ut, it, obey)
                failed += not ok
                role = "obeying" if obey else "ground truth"
                print(f"{'ok  ' if ok else 'FAIL'} {name} {ut} {it} ({role}): {verdict}", flush=True)
    print(f"{total - failed} of {total} cases judged as AgentDojo judges them")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
