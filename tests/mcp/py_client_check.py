"""Drive py_server.py with the `mcp` 2.x SDK's own Client, over stdio and over streamable HTTP.

Usage: python py_client_check.py [PORT]     (PORT for the HTTP leg, default 38765)
Prints "N passed, N failed" at the end and exits non-zero on any failure.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio

from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "py_server.py")
passed = failed = 0


def check(label: str, cond: bool, detail: object = "") -> None:
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {label}: {detail}")


async def exercise(client: Client, leg: str) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check(f"{leg} tools", sorted(tools) == ["add", "describe", "fail", "shout", "slow"], sorted(tools))
    check(f"{leg} add outputSchema", tools["add"].output_schema is not None)
    check(f"{leg} shout no outputSchema", tools["shout"].output_schema is None)

    r = await client.call_tool("add", {"a": 2, "b": 3.5})
    check(f"{leg} add", not r.is_error and r.structured_content == {"result": 5.5}, r)

    r = await client.call_tool("describe", {"name": "x", "tags": ["a", "b"], "level": "high"})
    check(f"{leg} describe", not r.is_error and (r.structured_content or {}).get("tag_count") == 2, r)

    r = await client.call_tool("fail", {"msg": "boom"})
    check(f"{leg} fail", r.is_error and "boom" in r.content[0].text, r)

    r = await client.call_tool("shout", {"text": "hi"})
    check(f"{leg} shout", not r.is_error and r.content[0].text == "HI", r)

    r = await client.call_tool("slow", {"seconds": 0.1})
    check(f"{leg} slow", not r.is_error and r.structured_content == {"result": "slept 0.1"}, r)


async def stdio_leg() -> None:
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    async with Client(params, mode="legacy") as client:
        check("stdio protocol", client.protocol_version == "2025-11-25", client.protocol_version)
        await exercise(client, "stdio")


async def http_leg(port: int) -> None:
    proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            await exercise(client, "http")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 38765
    with anyio.fail_after(60):
        await stdio_leg()
        await http_leg(port)


if __name__ == "__main__":
    anyio.run(main)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
