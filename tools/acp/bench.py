#!/usr/bin/env python3
"""How long `sapc acp` takes to answer a prompt whose program makes no model call, over
standard input and output: `session/prompt` sent to its answer received, with the
`session/update`s between read, the client a plain JSON-RPC loop on pipes (no SDK in the
way). Also the start: the process spawned to `initialize` answered. Release build.

    python3 tools/acp/bench.py [--sapc target/release/sapc] [--prompts 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sapc", default=str(ROOT / "target/release/sapc"))
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    program = str(ROOT / "tools/acp/echo.sap")

    def spawn() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [args.sapc, "acp", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def send(agent: subprocess.Popen[str], message: dict) -> None:
        assert agent.stdin
        agent.stdin.write(json.dumps(message) + "\n")
        agent.stdin.flush()

    def answer(agent: subprocess.Popen[str], id_: int) -> dict:
        assert agent.stdout
        while True:
            m = json.loads(agent.stdout.readline())
            if m.get("id") == id_ and "method" not in m:
                return m

    starts = []
    for _ in range(args.starts):
        t = time.perf_counter()
        agent = spawn()
        send(agent, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        answer(agent, 0)
        starts.append((time.perf_counter() - t) * 1000)
        agent.stdin.close()  # type: ignore[union-attr]
        agent.wait()

    agent = spawn()
    send(agent, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    answer(agent, 0)
    send(agent, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(ROOT), "mcpServers": []}})
    sid = answer(agent, 1)["result"]["sessionId"]
    turns = []
    for i in range(args.prompts):
        t = time.perf_counter()
        send(agent, {"jsonrpc": "2.0", "id": 2 + i, "method": "session/prompt",
                     "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"hello {i}"}]}})
        got = answer(agent, 2 + i)
        turns.append((time.perf_counter() - t) * 1000)
        assert got["result"]["stopReason"] == "end_turn", got
    agent.stdin.close()  # type: ignore[union-attr]
    agent.wait()
    turns.sort()
    p95 = turns[int(len(turns) * 0.95)]
    print(f"start to `initialize` answered: median {statistics.median(starts):.1f} ms ({args.starts} starts)")
    print(f"a prompt with no model call: median {statistics.median(turns):.2f} ms, p95 {p95:.2f} ms, "
          f"max {turns[-1]:.2f} ms ({args.prompts} prompts, one session)")


if __name__ == "__main__":
    main()
