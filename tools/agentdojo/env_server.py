"""An AgentDojo environment as an MCP server (stdio, the `mcp` SDK's low-level server):
one case (a suite's environment for a user task, with an injection task's injections
placed by AgentDojo's own attack) and the suite's tools, with AgentDojo's own schemas
and descriptions. Each call runs on the environment as AgentDojo's runtime runs it, and
is appended to the trace file (one JSON object per line: `function`, `args`), from which
judge.py rebuilds the run's end state and judges it with AgentDojo's own checks.

    env_server.py --suite banking --user-task user_task_0 \\
        [--injection-task injection_task_0] --trace calls.jsonl

What the command line leaves out comes from the environment (AGENTDOJO_SUITE,
AGENTDOJO_USER_TASK, AGENTDOJO_INJECTION_TASK, AGENTDOJO_TRACE): an agent's sap.toml
names the suite, and the harness (run.py) picks the case. When AGENTDOJO_CASE_HOST names
a URL, the case lives in the harness's process, which has AgentDojo loaded, and this
server only carries the calls there: it then starts in a second rather than five.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from typing import Any, Callable

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

HERE = os.path.dirname(os.path.abspath(__file__))


def local(argv: list[str]) -> tuple[str, list[dict[str, Any]], Callable[[str, dict], tuple[str, bool]]]:
    """The case, loaded here."""
    sys.path.insert(0, HERE)
    import cases

    p = cases.parser(__doc__.splitlines()[0])
    p.add_argument("--trace")
    args = p.parse_args(argv)
    case = cases.load(args.suite, args.user_task, args.injection_task, args.version)
    runtime = case.runtime()
    trace = open(args.trace, "a") if args.trace else None

    def call(name: str, given: dict) -> tuple[str, bool]:
        given = cases.arguments(given)
        if trace is not None:
            trace.write(json.dumps({"function": name, "args": given}) + "\n")
            trace.flush()
        return cases.call(case, runtime, name, given)

    return args.suite, cases.tool_list(case), call


def remote(url: str) -> tuple[str, list[dict[str, Any]], Callable[[str, dict], tuple[str, bool]]]:
    """The case, held by the harness at `url` (which traces the calls)."""

    def post(path: str, body: dict) -> Any:
        request = urllib.request.Request(f"{url}/{path}", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    listed = post("tools", {})

    def call(name: str, given: dict) -> tuple[str, bool]:
        done = post("call", {"name": name, "arguments": given})
        return done["text"], done["is_error"]

    return listed["suite"], listed["tools"], call


def main() -> None:
    env = os.environ
    argv = sys.argv[1:]
    if env.get("AGENTDOJO_CASE_HOST"):
        suite, listed, call = remote(env["AGENTDOJO_CASE_HOST"])
        if "--suite" in argv and argv[argv.index("--suite") + 1:][:1] != [suite]:
            sys.exit(f"this server is for the `{argv[argv.index('--suite') + 1]}` suite, "
                     f"and the harness's case is in `{suite}`")
    else:
        for flag, var in [("--suite", "AGENTDOJO_SUITE"), ("--user-task", "AGENTDOJO_USER_TASK"),
                          ("--injection-task", "AGENTDOJO_INJECTION_TASK"),
                          ("--trace", "AGENTDOJO_TRACE")]:
            if flag not in argv and env.get(var):
                argv += [flag, env[var]]
        suite, listed, call = local(argv)
    tools = [types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])
             for t in listed]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        text, is_error = await anyio.to_thread.run_sync(call, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    server = Server(f"agentdojo-{suite}", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
