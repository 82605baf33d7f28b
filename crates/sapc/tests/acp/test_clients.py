"""`sapc acp` driven by ACP clients no one here wrote: the client side of the Python SDK
(PyPI `agent-client-protocol`, `spawn_agent_process`) and the headless CLI `acpx` (npm).
The model is a scripted OpenAI-compatible server on loopback whose answers depend on
what the prompt holds, so no network is needed and a lost context shows.

Run by crates/sapc/tests/acp.rs with SAPC (the binary), ACPX (the CLI) and
MODEL_SERVER_DIR (where model_server.py is) in the environment."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

sys.path.insert(0, os.environ["MODEL_SERVER_DIR"])
from model_server import ModelServer  # noqa: E402

SAPC = os.environ["SAPC"]
ACPX = os.environ.get("ACPX", "")
HERE = Path(__file__).parent
SLOW = 30.0


def scripted(body: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The model: it knows the user's name when the prompt holds it, and takes its time
    when asked to."""
    text = json.dumps(body.get("messages", []))
    if "take your time" in text:
        time.sleep(SLOW)
    if "atoms" in schema.get("properties", {}):
        return {"atoms": [
            {"id": 1, "kind": "tool", "name": "add", "input": {"a": 15, "b": 7}, "dependsOn": []},
            {"id": 2, "kind": "tool", "name": "multiply", "input": {"a": "<result_of_1>", "b": 3},
             "dependsOn": [1]},
            {"id": 3, "kind": "final", "name": "report", "dependsOn": [2]},
        ]}
    names = re.findall(r"my name is (\w+)", text)
    answer = f"Your name is {names[-1]}." if names else "I do not know your name."
    props = schema.get("properties", {})
    return {"value": answer} if "value" in props else answer


@pytest.fixture
def model() -> Iterator[ModelServer]:
    server = ModelServer(answer=scripted)
    yield server
    server.close()


class Client:
    """An editor: it keeps every update, answers permission requests as told, and serves
    files from its own buffers when it has one for the path."""

    def __init__(self, allow: str | None = "allow-once") -> None:
        self.updates: list[Any] = []
        self.allow = allow
        self.asked: list[Any] = []
        self.buffers: dict[str, str] = {}
        self.writes: dict[str, str] = {}

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kw: Any
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        chosen = next((o for o in options if o.option_id == self.allow), None)
        if chosen is None:
            reject = next(o for o in options if o.kind == "reject_once")
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=reject.option_id)
            )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def read_text_file(
        self, session_id: str, path: str, line: Any = None, limit: Any = None, **kw: Any
    ) -> ReadTextFileResponse:
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=Path(path).read_text())

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kw: Any
    ) -> WriteTextFileResponse:
        self.writes[path] = content
        Path(path).write_text(content)
        return WriteTextFileResponse()

    def messages(self) -> str:
        return "".join(
            u.content.text for u in self.updates if u.session_update == "agent_message_chunk"
        )

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]


def flags(model: ModelServer, *more: str) -> list[str]:
    return ["--provider", "openai", "--base-url", model.url, "--model", "test", *more]


class Agent:
    def __init__(self, conn: Any, client: Client, process: Any) -> None:
        self.conn, self.client, self.process = conn, client, process

    async def session(self) -> str:
        return (await self.conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id

    async def prompt(self, sid: str, text: str) -> str:
        answer = await self.conn.prompt(session_id=sid, prompt=[text_block(text)])
        return answer.stop_reason


async def start(
    program: Path, client: Client, *args: str, fs: bool = True
) -> Any:
    manager = spawn_agent_process(
        client,
        SAPC,
        "acp",
        str(program),
        *args,
        env=dict(os.environ),
        transport_kwargs={"stderr": None},
    )
    conn, process = await manager.__aenter__()
    await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs)
        ),
        client_info=Implementation(name="sap-tests", version="0"),
    )
    return manager, Agent(conn, client, process)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_a_second_answer_depends_on_the_first(model: ModelServer) -> None:
    async def go() -> None:
        client = Client()
        manager, agent = await start(HERE / "chat.sap", client, *flags(model))
        sid = await agent.session()
        assert await agent.prompt(sid, "my name is Ada") == "end_turn"
        assert "Your name is Ada." in client.messages()
        client.updates.clear()
        assert await agent.prompt(sid, "what is my name?") == "end_turn"
        # The first turn is in the session's context, so the model sees it.
        assert "Your name is Ada." in client.messages()
        # The model call was shown while it ran, with its place.
        thoughts = [u.content.text for u in client.updates if u.session_update == "agent_thought_chunk"]
        assert any("`reply`" in t and "chat.sap:" in t for t in thoughts), thoughts
        # A second session starts from nothing.
        other = await agent.session()
        client.updates.clear()
        await agent.prompt(other, "what is my name?")
        assert "I do not know your name." in client.messages()
        await manager.__aexit__(None, None, None)

    run(go())


def test_a_plan_is_shown_and_its_entries_move_as_atoms_run(model: ModelServer) -> None:
    async def go() -> None:
        client = Client()
        manager, agent = await start(HERE / "planner.sap", client, *flags(model))
        sid = await agent.session()
        assert await agent.prompt(sid, "Add 15 and 7, then multiply by 3.") == "end_turn"
        assert "answer: 66" in client.messages()
        plans = [u.entries for u in client.updates if u.session_update == "plan"]
        first, last = plans[0], plans[-1]
        assert [e.status for e in first] == ["pending"] * 3
        assert "add" in first[0].content and "multiply" in first[1].content
        assert [e.status for e in last] == ["completed"] * 3
        assert any(e.status == "in_progress" for plan in plans for e in plan)
        tools = [u.title for u in client.updates if u.session_update == "tool_call"]
        assert len(tools) == 2 and tools[0].startswith("add") and tools[1].startswith("multiply")
        await manager.__aexit__(None, None, None)

    run(go())


def test_tool_calls_are_shown_with_their_results(model: ModelServer, tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("on disk")

    async def go() -> None:
        client = Client()
        manager, agent = await start(
            HERE / "chat.sap", client, *flags(model, f"--allow-read={tmp_path}")
        )
        sid = await agent.session()
        # The editor's unsaved buffer is what the program reads.
        client.buffers[str(note)] = "unsaved text"
        assert await agent.prompt(sid, f"read {note}") == "end_turn"
        assert "read: unsaved text" in client.messages()
        calls = [u for u in client.updates if u.session_update == "tool_call"]
        assert len(calls) == 1 and calls[0].kind == "read" and calls[0].status == "in_progress"
        assert calls[0].raw_input == {"path": str(note)}
        done = [u for u in client.updates if u.session_update == "tool_call_update"]
        assert done[0].tool_call_id == calls[0].tool_call_id and done[0].status == "completed"
        assert done[0].content[0].content.text == "unsaved text"
        # Inside the grants: nobody is asked.
        assert client.asked == []
        await manager.__aexit__(None, None, None)

    run(go())


def test_a_permission_granted_and_one_rejected(model: ModelServer, tmp_path: Path) -> None:
    granted, refused = tmp_path / "granted.txt", tmp_path / "refused.txt"

    async def go() -> None:
        client = Client(allow="allow-once")
        manager, agent = await start(HERE / "chat.sap", client, *flags(model))
        sid = await agent.session()
        assert await agent.prompt(sid, f"write {granted} hello") == "end_turn"
        assert granted.read_text() == "hello" and client.writes == {str(granted): "hello"}
        tool_call, options = client.asked[0]
        assert "fs::write" in tool_call.title and str(granted) in tool_call.title
        assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once"}
        update = [u for u in client.updates if u.session_update == "tool_call_update"][-1]
        assert update.status == "completed"
        # Rejected: the same located error as without a client, and nothing written.
        client.allow = None
        with pytest.raises(Exception) as refusal:
            await agent.prompt(sid, f"write {refused} nope")
        text = str(refusal.value.data if hasattr(refusal.value, "data") else refusal.value)
        assert "may not write" in text and "refused" in text and "chat.sap:" in text, text
        assert not refused.exists()
        update = [u for u in client.updates if u.session_update == "tool_call_update"][-1]
        assert update.status == "failed"
        # "Always" covers the folder for the rest of the session: asked once.
        client.allow = "allow-always"
        client.asked.clear()
        await agent.prompt(sid, f"write {tmp_path / 'a.txt'} 1")
        await agent.prompt(sid, f"write {tmp_path / 'b.txt'} 2")
        assert len(client.asked) == 1 and (tmp_path / "b.txt").read_text() == "2"
        await manager.__aexit__(None, None, None)

    run(go())


def test_cancel_stops_a_model_call_and_a_process_and_the_session_goes_on(
    model: ModelServer,
) -> None:
    async def go() -> None:
        client = Client()
        manager, agent = await start(
            HERE / "chat.sap", client, *flags(model, "--allow-run=sleep")
        )
        sid = await agent.session()
        assert await agent.prompt(sid, "my name is Ada") == "end_turn"
        for slow in ("take your time, my name is Bob", "wait 30"):
            started = time.monotonic()
            turn = asyncio.create_task(agent.prompt(sid, slow))
            await asyncio.sleep(1.0)
            await agent.conn.cancel(session_id=sid)
            assert await turn == "cancelled"
            assert time.monotonic() - started < 5, "the cancel was not prompt"
        # The session is usable, and the cancelled turns added nothing to its context.
        client.updates.clear()
        assert await agent.prompt(sid, "what is my name?") == "end_turn"
        assert "Your name is Ada." in client.messages()
        await manager.__aexit__(None, None, None)

    run(go())


def test_a_cancelled_prompt_sent_again_resumes_from_its_journal(
    model: ModelServer, tmp_path: Path
) -> None:
    async def go() -> None:
        client = Client()
        manager, agent = await start(
            HERE / "chat.sap", client,
            *flags(model, "--allow-run=sleep", "--journal", str(tmp_path / "sessions")),
        )
        sid = await agent.session()
        turn = asyncio.create_task(agent.prompt(sid, "reply then wait 2"))
        await asyncio.sleep(1.0)
        await agent.conn.cancel(session_id=sid)
        assert await turn == "cancelled"
        asked = model.requests
        assert asked == 1
        # The same prompt again: the model call that completed before the cancel is
        # answered from the turn's journal, and the rest runs.
        assert await agent.prompt(sid, "reply then wait 2") == "end_turn"
        assert model.requests == asked
        await manager.__aexit__(None, None, None)

    run(go())


def test_a_budget_that_runs_out_ends_the_prompt_with_its_stop_reason(model: ModelServer) -> None:
    async def go() -> None:
        for budget, stop in (("--max-calls=0", "max_turn_requests"), ("--max-tokens=1", "max_tokens")):
            client = Client()
            manager, agent = await start(HERE / "chat.sap", client, *flags(model, budget))
            sid = await agent.session()
            assert await agent.prompt(sid, "my name is Ada") == stop
            assert "budget" in client.messages()
            await manager.__aexit__(None, None, None)

    run(go())


def test_a_second_prompt_while_one_runs_is_refused(model: ModelServer) -> None:
    async def go() -> None:
        client = Client()
        manager, agent = await start(HERE / "chat.sap", client, *flags(model))
        sid = await agent.session()
        turn = asyncio.create_task(agent.prompt(sid, "take your time"))
        await asyncio.sleep(0.5)
        with pytest.raises(Exception) as busy:
            await agent.prompt(sid, "hello")
        assert "already running" in str(getattr(busy.value, "data", busy.value))
        await agent.conn.cancel(session_id=sid)
        assert await turn == "cancelled"
        with pytest.raises(Exception):
            await agent.prompt("no-such-session", "hello")
        await manager.__aexit__(None, None, None)

    run(go())


def test_reload_keeps_the_session_through_a_broken_edit(
    model: ModelServer, tmp_path: Path
) -> None:
    program = tmp_path / "chat.sap"
    shutil.copy(HERE / "chat.sap", program)
    source = program.read_text()

    async def wait_for(client: Client, text: str) -> None:
        for _ in range(100):
            if text in client.messages():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"never told {text!r}: {client.messages()!r}")

    async def go() -> None:
        client = Client()
        manager, agent = await start(program, client, *flags(model))
        sid = await agent.session()
        assert await agent.prompt(sid, "my name is Ada") == "end_turn"
        # A broken edit: the client is told where, and the old program serves on.
        program.write_text(source.replace("let answer = ctx.reply(prompt)", "let answer = ctx.reply(prompt"))
        await wait_for(client, "was not reloaded")
        assert re.search(r"chat\.sap:\d+:\d+|chat\.sap:\d+", client.messages()), client.messages()
        client.updates.clear()
        assert await agent.prompt(sid, "what is my name?") == "end_turn"
        assert "Your name is Ada." in client.messages()
        # A good edit: the next prompt runs it, in the same context.
        program.write_text(source.replace("    answer\n}", '    "v2: " + answer\n}'))
        await wait_for(client, "reloaded")
        client.updates.clear()
        assert await agent.prompt(sid, "what is my name?") == "end_turn"
        assert "v2: Your name is Ada." in client.messages()
        # `/reload` is advertised, and does it on demand.
        commands = [u for u in client.updates if u.session_update == "available_commands_update"]
        client.updates.clear()
        assert await agent.prompt(sid, "/reload") == "end_turn"
        assert "reloaded" in client.messages()
        await manager.__aexit__(None, None, None)

    run(go())


def test_a_session_is_loaded_after_a_restart(model: ModelServer, tmp_path: Path) -> None:
    journal = tmp_path / "sessions"

    async def go() -> None:
        client = Client()
        manager, agent = await start(
            HERE / "chat.sap", client, *flags(model, "--journal", str(journal))
        )
        sid = await agent.session()
        assert await agent.prompt(sid, "my name is Ada") == "end_turn"
        await manager.__aexit__(None, None, None)
        asked = model.requests

        client = Client()
        manager, agent = await start(
            HERE / "chat.sap", client, *flags(model, "--journal", str(journal))
        )
        await agent.conn.load_session(cwd=os.getcwd(), session_id=sid, mcp_servers=[])
        # The history comes back as updates, and rebuilding the context asked the
        # model nothing: the journal answered.
        users = [u.content.text for u in client.updates if u.session_update == "user_message_chunk"]
        assert users == ["my name is Ada"]
        assert "Your name is Ada." in client.messages()
        assert model.requests == asked
        client.updates.clear()
        assert await agent.prompt(sid, "what is my name?") == "end_turn"
        assert "Your name is Ada." in client.messages()
        with pytest.raises(Exception):
            await agent.conn.load_session(cwd=os.getcwd(), session_id="sap-unknown", mcp_servers=[])
        await manager.__aexit__(None, None, None)

    run(go())


def test_a_program_of_another_shape_or_without_a_provider_is_refused_before_serving(
    tmp_path: Path,
) -> None:
    out = subprocess.run([SAPC, "acp", str(HERE / "chat.sap")], capture_output=True, text=True, input="", timeout=30)
    assert out.returncode == 1 and "no LLM provider" in out.stderr and out.stdout == ""
    wrong = tmp_path / "wrong.sap"
    wrong.write_text('fn main() -> () { print("hi") }\n')
    out = subprocess.run([SAPC, "acp", str(wrong)], capture_output=True, text=True, input="", timeout=30)
    assert out.returncode == 2 and "fn main(ctx: Context, prompt: String)" in out.stderr
    assert out.stdout == ""
    broken = tmp_path / "broken.sap"
    broken.write_text("fn main(ctx: Context, prompt: String) -> String { nope }\n")
    out = subprocess.run([SAPC, "acp", str(broken)], capture_output=True, text=True, input="", timeout=30)
    assert out.returncode == 1 and "broken.sap" in out.stderr and out.stdout == ""


class Raw:
    """`sapc acp` on pipes, driven by a JSON-RPC client of a few lines: for what an SDK
    would not send (bad input) or would tidy up (leaving mid-turn)."""

    def __init__(self, model: ModelServer) -> None:
        self.process = subprocess.Popen(
            [SAPC, "acp", str(HERE / "chat.sap"), *flags(model)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def write(self, line: str) -> None:
        assert self.process.stdin
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def send(self, id_: int, method: str, params: dict[str, Any]) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))

    def answer(self, id_: int | None) -> dict[str, Any]:
        """The answer to request `id_`, the notifications before it skipped."""
        assert self.process.stdout
        while True:
            m = json.loads(self.process.stdout.readline())
            if m.get("id") == id_ and "method" not in m:
                return m

    def leave(self) -> int:
        """Closes the agent's input, as a client that goes away: its exit status."""
        assert self.process.stdin
        self.process.stdin.close()
        return self.process.wait(timeout=10)


def test_malformed_input_and_a_second_initialize_are_errors_and_eof_ends_it(
    model: ModelServer,
) -> None:
    agent = Raw(model)

    def ask(id_: int, method: str) -> dict[str, Any]:
        agent.send(id_, method, {"protocolVersion": 1})
        return agent.answer(id_)

    assert ask(0, "initialize")["result"]["protocolVersion"] == 1
    agent.write("this is not json")
    assert agent.answer(None)["error"]["code"] == -32700
    assert ask(1, "initialize")["error"]["code"] == -32600
    assert ask(2, "no/such")["error"]["code"] == -32601
    assert ask(3, "session/prompt")["error"]["code"] == -32602
    # The client closes its input: the agent exits, having written nothing more.
    assert agent.leave() == 0
    assert agent.process.stdout and agent.process.stdout.read() == ""


def test_a_client_that_leaves_mid_turn_ends_the_agent(model: ModelServer) -> None:
    agent = Raw(model)
    agent.send(0, "initialize", {"protocolVersion": 1})
    agent.answer(0)
    agent.send(1, "session/new", {"cwd": "/", "mcpServers": []})
    sid = agent.answer(1)["result"]["sessionId"]
    agent.send(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "take your time"}]})
    time.sleep(0.5)
    started = time.monotonic()
    assert agent.leave() == 0
    assert time.monotonic() - started < 5


@pytest.mark.skipif(not ACPX, reason="acpx is not installed (tools/acp/setup.sh)")
def test_acpx_drives_a_session_across_restarts(model: ModelServer, tmp_path: Path) -> None:
    journal = tmp_path / "sessions"
    home = tmp_path / "home"
    home.mkdir()
    agent = " ".join([SAPC, "acp", str(HERE / "chat.sap"), *flags(model, "--journal", str(journal))])
    env = {**os.environ, "HOME": str(home)}

    def acpx(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ACPX, "--agent", agent, "--cwd", str(tmp_path), *args],
            capture_output=True, text=True, timeout=120, env=env,
        )

    once = acpx("--approve-all", "--format", "quiet", "exec", "my name is Ada")
    assert once.returncode == 0 and "Your name is Ada." in once.stdout, once.stderr
    made = acpx("sessions", "new", "--name", "t")
    assert made.returncode == 0, made.stderr
    first = acpx("--ttl", "1", "--format", "quiet", "prompt", "-s", "t", "my name is Grace")
    assert first.returncode == 0 and "Your name is Grace." in first.stdout, first.stderr
    # The agent process is gone after a second: the next prompt starts a new one, which
    # loads the session from the journal.
    time.sleep(2.5)
    second = acpx("--ttl", "1", "--format", "quiet", "prompt", "-s", "t", "what is my name?")
    assert second.returncode == 0 and "Your name is Grace." in second.stdout, second.stderr
    # A write outside the grants, denied by acpx's policy: the turn fails, nothing written.
    target = tmp_path / "x.txt"
    denied = acpx("--deny-all", "--format", "quiet", "exec", f"write {target} no")
    assert denied.returncode != 0 and not target.exists()
    allowed = acpx("--approve-all", "--format", "quiet", "exec", f"write {target} yes")
    assert allowed.returncode == 0 and target.read_text() == "yes", allowed.stderr


@pytest.mark.skipif(not ACPX, reason="acpx is not installed (tools/acp/setup.sh)")
def test_the_reviewer_example_answers_acpx_from_its_transcript(tmp_path: Path) -> None:
    # The command docs/ACP.md shows, from the repository's root, offline.
    root = HERE.parents[3]
    agent = (
        f"{SAPC} acp examples/acp/reviewer.sap --replay examples/acp/reviewer.transcript.jsonl"
        " --allow-read=examples"
    )
    out = subprocess.run(
        [ACPX, "--agent", agent, "--format", "quiet", "exec", "review examples/code_analysis.sap"],
        capture_output=True, text=True, timeout=120, cwd=root,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    assert "Verdict: " in out.stdout and "code_analysis" in out.stdout, out.stdout
