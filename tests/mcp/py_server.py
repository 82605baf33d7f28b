"""A small MCP test server on the `mcp` 2.x Python SDK (MCPServer, formerly FastMCP).

Run (stdio, the default):      python py_server.py
Run (streamable HTTP):          python py_server.py --http PORT [--json] [--stateless]
  -> serves http://127.0.0.1:PORT/mcp ; --json answers POSTs with application/json
     instead of an SSE stream; --stateless runs without Mcp-Session-Id sessions.

Tools (all with structured output unless noted):
  add(a: float, b: float) -> float                   structuredContent {"result": a+b}
  describe(name, tags, level, note=None) -> Description (object with an outputSchema)
  fail(msg) -> raises ToolError(msg)                 isError: true, text "Error executing tool fail: <msg>"
  slow(seconds: float) -> str                         sleeps (async, cancellable); {"result": "slept S"};
                                                      a cancellation is recorded as an event
  events() -> str                                     the events so far, one per line ("cancelled slow")
  authorization() -> str                              the HTTP request's Authorization header ("" over stdio)
  shout(text: str) -> str                             text.upper(); NO outputSchema (plain text content only)
  crash(code: int)                                    the process exits without answering
  bye() -> str                                        answers, then the process exits
  gather(n: int, wait: float) -> int                  waits (up to `wait` s) until n calls are in flight at once
  (fail has no outputSchema either; bad arguments also give isError: true, not a JSON-RPC error)
"""

from __future__ import annotations

import argparse
import sys
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("sap-test-server", version="0.1.0", log_level="WARNING")


class Description(BaseModel):
    """What `describe` returns."""

    name: str
    tags: list[str]
    level: Literal["low", "high"]
    note: str | None = None
    tag_count: int = Field(description="Number of tags")
    summary: str


@mcp.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@mcp.tool()
def describe(name: str, tags: list[str], level: Literal["low", "high"], note: str | None = None) -> Description:
    """Describe an item: echoes its fields back as a structured object."""
    summary = f"{name} [{level}] {','.join(tags)}" + (f" ({note})" if note is not None else "")
    return Description(name=name, tags=tags, level=level, note=note, tag_count=len(tags), summary=summary)


@mcp.tool(structured_output=False)
def fail(msg: str) -> str:
    """Always fails with the given message (the result has isError: true)."""
    raise ToolError(msg)


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep for `seconds`, then return."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _event("cancelled slow")
        raise
    return f"slept {seconds}"


_events: list[str] = []


def _event(text: str) -> None:
    _events.append(text)


@mcp.tool(structured_output=False)
def events() -> str:
    """What happened to earlier calls (a cancelled `slow`), one line each."""
    return "\n".join(_events)


@mcp.tool(structured_output=False)
def authorization(ctx: Context) -> str:
    """The Authorization header of the HTTP request that called this tool ("" over stdio)."""
    request = ctx.request_context.request
    return request.headers.get("authorization", "") if request is not None else ""


@mcp.tool(structured_output=False)
def shout(text: str) -> str:
    """Return the text upper-cased."""
    return text.upper()


@mcp.tool(structured_output=False)
def crash(code: int) -> str:
    """Exit the server process at once, without answering (to test restarts)."""
    import os

    os._exit(code)


@mcp.tool(structured_output=False)
def bye() -> str:
    """Answer, then exit the server process a moment later (to test restarts)."""
    import os
    import threading

    threading.Timer(0.1, lambda: os._exit(0)).start()
    return "bye"


_gathering = {"count": 0, "event": None}


@mcp.tool()
async def gather(n: int, wait: float) -> int:
    """Wait until `n` calls of `gather` are in flight at once (at most `wait` s); return n.

    Proves a client's calls are concurrent: calls made one after another never meet.
    """
    if _gathering["event"] is None or _gathering["event"].is_set():
        _gathering["count"] = 0
        _gathering["event"] = anyio.Event()
    event = _gathering["event"]
    _gathering["count"] += 1
    if _gathering["count"] >= n:
        event.set()
    with anyio.move_on_after(wait):
        await event.wait()
    if not event.is_set():
        raise ToolError(f"only {_gathering['count']} of {n} calls were in flight together")
    return n


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--json", action="store_true", help="HTTP: reply with application/json, not SSE")
    parser.add_argument("--stateless", action="store_true", help="HTTP: no sessions")
    args = parser.parse_args(argv)
    if args.http is None:
        mcp.run()  # stdio
    else:
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=args.http,
            json_response=args.json,
            stateless_http=args.stateless,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
