"""Drives `sapc mcp serve FILE` with the Python `mcp` SDK's own client, over stdio.

Usage: python py_client.py SAPC FILE TOOL JSON_ARGS [TOOL JSON_ARGS ...]
(SAPC_SERVE_ARGS, a JSON list, adds options to `sapc mcp serve`, e.g. a provider.)
Prints one JSON object: the tools listed (name, inputSchema, outputSchema) and, per
call, isError, the text content and the structured content.
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(argv: list[str]) -> None:
    sapc, program, *calls = argv
    import os

    extra = json.loads(os.environ.get("SAPC_SERVE_ARGS", "[]"))
    params = StdioServerParameters(command=sapc, args=["mcp", "serve", program, *extra])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            out = {
                "protocol": str(init.protocol_version),
                "tools": [
                    {"name": t.name, "description": t.description, "input": t.input_schema, "output": t.output_schema}
                    for t in tools.tools
                ],
                "calls": [],
            }
            for name, args in zip(calls[::2], calls[1::2]):
                result = await session.call_tool(name, json.loads(args))
                out["calls"].append(
                    {
                        "tool": name,
                        "isError": bool(result.is_error),
                        "text": "\n".join(c.text for c in result.content if c.type == "text"),
                        "structured": result.structured_content,
                    }
                )
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
