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
names the suite, and the harness (run.py) picks the case.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str  # noqa: E402


def main() -> None:
    p = cases.parser(__doc__.splitlines()[0])
    p.add_argument("--trace")
    # What the command line leaves out comes from the environment (a program's sap.toml
    # names the suite; the harness picks the case).
    env = os.environ
    argv = sys.argv[1:]
    for flag, var in [("--suite", "AGENTDOJO_SUITE"), ("--user-task", "AGENTDOJO_USER_TASK"),
                      ("--injection-task", "AGENTDOJO_INJECTION_TASK"), ("--trace", "AGENTDOJO_TRACE")]:
        if flag not in argv and env.get(var):
            argv += [flag, env[var]]
    args = p.parse_args(argv)
    case = cases.load(args.suite, args.user_task, args.injection_task, args.version)
    runtime = case.runtime()
    functions = {f.name: f for f in case.suite.tools}
    trace = open(args.trace, "a") if args.trace else None

    tools = [
        types.Tool(
            name=f.name,
            description=f.description,
            input_schema=f.parameters.model_json_schema(),
        )
        for f in case.suite.tools
    ]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        name = params.name
        given = cases.arguments(dict(params.arguments or {}))
        if trace is not None:
            trace.write(json.dumps({"function": name, "args": given}) + "\n")
            trace.flush()
        if name not in functions:
            text = f"ToolNotFound: there is no tool `{name}`"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        result, error = runtime.run_function(case.environment, name, given)
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=error)], is_error=True)
        text = tool_result_to_str(result)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server(f"agentdojo-{args.suite}", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
