"""`sapc serve --restate` against Restate's own server (npm `@restatedev/restate-server`,
installed by tools/restate/setup.sh), driven over its admin and ingress APIs as a user
would with curl. The model is a scripted OpenAI-compatible double on loopback
(crates/python/tests/model_server.py) that counts each step's requests.

Run by crates/sapc/tests/restate.rs with SAPC, RESTATE_SERVER and MODEL_SERVER_DIR set:

    python3 crates/sapc/tests/restate/test_restate.py [NAME…]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ["MODEL_SERVER_DIR"])
from model_server import ModelServer, first_value  # noqa: E402

SAPC = os.environ["SAPC"]
SERVER = os.environ["RESTATE_SERVER"]
PROGRAM = os.path.join(HERE, "triage.sap")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body=None, headers=None, timeout=60):
    """(status, parsed JSON or text) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    request.add_header("accept", "application/json")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def wait_until(check, what: str, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Steps:
    """The model: answers each step of `triage.sap` and counts its requests. A step
    named in `hold` waits, on its first request only, until `release` is set."""

    def __init__(self, delay: float = 0.0, port: int = 0):
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.hold: str | None = None
        self.held = threading.Event()
        self.release = threading.Event()
        self.server = ModelServer(delay=delay, answer=self.answer, port=port)
        # A killed worker's request is answered to nobody: not an error of the test.
        self.server.httpd.handle_error = lambda request, address: None

    def answer(self, body, schema):
        text = json.dumps(body.get("messages", []))
        step = next((s for s in ("Step 1", "Step 2", "Step 3") if s in text), "other")
        with self.lock:
            self.counts[step] += 1
            first = self.counts[step] == 1
        if step == self.hold and first:
            self.held.set()
            self.release.wait(60)
        return first_value(schema)


class Restate:
    """One restate-server on free ports, in a scratch folder."""

    def __init__(self, scratch: str):
        self.admin = f"http://127.0.0.1:{free_port()}"
        self.ingress = f"http://127.0.0.1:{free_port()}"
        fabric = free_port()
        env = dict(
            os.environ,
            RESTATE_ADMIN__BIND_ADDRESS=self.admin[7:],
            RESTATE_INGRESS__BIND_ADDRESS=self.ingress[7:],
            RESTATE_BIND_ADDRESS=f"127.0.0.1:{fabric}",
            RESTATE_ADVERTISED_ADDRESS=f"http://127.0.0.1:{fabric}/",
            RESTATE_LISTEN_MODE="tcp",
            RESTATE_DISABLE_TELEMETRY="true",
            # A failed attempt is retried soon: the tests wait on retries.
            RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL="100ms",
            RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL="500ms",
        )
        self.log = open(os.path.join(scratch, "restate-server.log"), "wb")
        self.process = subprocess.Popen(
            [SERVER, "--base-dir", os.path.join(scratch, "restate"), "--no-logo",
             "--node-name", "n1", "--default-num-partitions", "1"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        wait_until(lambda: self.healthy(), "restate-server's admin API", 60)

    def healthy(self) -> bool:
        try:
            return http("GET", f"{self.admin}/health", timeout=2)[0] == 200
        except OSError:
            return False

    def register(self, uri: str) -> dict:
        status, body = http("POST", f"{self.admin}/deployments", {"uri": uri, "force": True})
        assert status in (200, 201), (status, body)
        return body

    def query(self, sql: str) -> list[dict]:
        status, body = http("POST", f"{self.admin}/query", {"query": sql})
        assert status == 200, (status, body)
        return body["rows"]

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


class Worker:
    """`sapc serve --restate` on `port`, its output in files of the scratch folder."""

    count = 0
    # Every worker started, stopped at the end even when a test fails.
    started: list["Worker"] = []

    def __init__(self, scratch: str, port: int, model: Steps, program: str = PROGRAM,
                 flags: tuple[str, ...] = ()):
        Worker.count += 1
        self.name = f"worker{Worker.count}"
        self.out_path = os.path.join(scratch, f"{self.name}.out")
        self.err_path = os.path.join(scratch, f"{self.name}.err")
        self.out = open(self.out_path, "wb")
        self.err = open(self.err_path, "wb")
        env = dict(os.environ, SAP_CACHE_DIR=os.path.join(scratch, "cache"))
        Worker.started.append(self)
        self.process = subprocess.Popen(
            [SAPC, "serve", "--restate", f"127.0.0.1:{port}", "--provider", "openai",
             "--base-url", model.server.url, "--model", "test", *flags, program],
            env=env, stdout=self.out, stderr=self.err,
        )
        self.uri = wait_until(self.registration, f"{self.name} to serve", 60)

    def stderr(self) -> str:
        with open(self.err_path) as f:
            return f.read()

    def stdout(self) -> str:
        with open(self.out_path) as f:
            return f.read()

    def registration(self) -> str | None:
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited: {self.stderr()}")
        for line in self.stderr().splitlines():
            if '"uri": "' in line:
                return line.split('"uri": "')[1].split('"')[0]
        return None

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def close(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.out.close()
        self.err.close()


def invoke(restate: Restate, handler: str, body, headers=None):
    return http("POST", f"{restate.ingress}/triage/{handler}", body, headers)


def send(restate: Restate, handler: str, body, key: str) -> str:
    """Starts an invocation without waiting for it: its id."""
    status, answer = http(
        "POST", f"{restate.ingress}/triage/{handler}/send", body, {"idempotency-key": key}
    )
    assert status in (200, 202), (status, answer)
    return answer["invocationId"]


def attach(restate: Restate, invocation: str):
    return http("GET", f"{restate.ingress}/restate/invocation/{invocation}/attach", timeout=120)


# The tests. Each gets the server, a scratch folder and a fresh model.

def test_a_killed_worker_loses_nothing_and_repeats_no_completed_call(restate, scratch):
    """SIGKILL on the worker holding a run mid-way: another worker on the same address
    finishes it; the caller gets the typed result; the tool call and the model call
    completed before the kill were made once, the one in flight again."""
    model = Steps()
    model.hold = "Step 2"
    port = free_port()
    # The procedure files the ticket with a POST to a tracker (the model's server, which
    # counts it as "other") before its model calls.
    tracker = model.server.url.replace("/v1", "/tickets")
    grant = ("--allow-net", tracker.split("/")[2])
    a = Worker(scratch, port, model, flags=grant)
    restate.register(a.uri)
    body = {"ticket": "The app crashes on login", "tracker": tracker}
    invocation = send(restate, "file", body, "kill-1")
    assert model.held.wait(30), "the run never reached its second model call"
    b = Worker(scratch, port, model, flags=grant)
    a.kill()
    model.release.set()
    status, result = attach(restate, invocation)
    assert status == 200, (status, result)
    assert result == {"severity": "Low", "summary": "xxx"}, result
    assert model.counts["other"] == 1, model.counts  # the tracker's POST
    assert model.counts["Step 1"] == 1, model.counts
    assert model.counts["Step 2"] == 2, model.counts  # the one in flight when killed
    assert model.counts["Step 3"] == 1, model.counts
    assert "replying to: xxx" in b.stdout() and "replying to" not in a.stdout()
    # The journal shows the batches: each step of the program's effects.
    rows = restate.query(
        f"SELECT index, entry_type, name FROM sys_journal WHERE id = '{invocation}' ORDER BY index"
    )
    assert any(r.get("name") == "b0" for r in rows), rows
    b.close()
    a.close()
    model.server.close()


def test_two_workers_share_200_invocations(restate, scratch):
    model = Steps(delay=0.01)
    port = free_port()
    workers = [Worker(scratch, port, model), Worker(scratch, port, model)]
    restate.register(workers[0].uri)

    def one(i):
        return invoke(restate, "triage", {"ticket": f"ticket {i}"})

    # The kernel spreads Restate's connections over the two listeners at random: a
    # round where one worker got every connection (unlikely: a connection carries 16
    # invocations at most) is run again, at most twice.
    for round in range(1, 4):
        with ThreadPoolExecutor(max_workers=100) as pool:
            results = list(pool.map(one, range(200)))
        bad = [r for r in results if r != (200, {"severity": "Low", "summary": "xxx"})]
        assert not bad, bad[:3]
        served = [w.stdout().count("replying to") for w in workers]
        assert sum(served) == 200 * round, served
        # Each invocation made its three calls once: no repeat under load.
        n = 200 * round
        assert model.counts == Counter({"Step 1": n, "Step 2": n, "Step 3": n}), model.counts
        print(f"    invocations per worker after {n}: {served}")
        if all(served):
            break
    assert all(served), f"one worker served every invocation: {served}"
    for w in workers:
        w.close()
    model.server.close()


def test_a_changed_program_refuses_an_old_invocation(restate, scratch):
    """An invocation started on one version is refused, naming both versions, by a
    worker of another at its address; a worker of its own version then finishes it."""
    model = Steps()
    model.hold = "Step 2"
    port = free_port()
    old = Worker(scratch, port, model)
    restate.register(old.uri)
    invocation = send(restate, "triage", {"ticket": "old"}, "versions-1")
    assert model.held.wait(30)
    changed_dir = os.path.join(scratch, "changed")
    os.makedirs(changed_dir, exist_ok=True)
    changed = os.path.join(changed_dir, "triage.sap")
    with open(PROGRAM) as f:
        text = f.read()
    with open(changed, "w") as f:
        f.write(text.replace("Step 3: write the reply.", "Step 3: write a short reply."))
    new = Worker(scratch, port, model, changed)
    old_version = old.uri.rstrip("/").rsplit("/", 1)[1]
    new_version = new.uri.rstrip("/").rsplit("/", 1)[1]
    assert old_version != new_version
    old.kill()
    model.release.set()

    def refused():
        text = new.stderr()
        return "refused" in text and old_version in text and new_version in text

    wait_until(refused, "the changed worker to refuse the old invocation")
    rows = restate.query(
        f"SELECT status, last_failure FROM sys_invocation WHERE id = '{invocation}'"
    )
    assert rows and rows[0]["status"] != "completed", rows
    # The old version comes back: the invocation finishes on it.
    new.close()
    again = Worker(scratch, port, model)
    status, result = attach(restate, invocation)
    assert status == 200 and result["severity"] == "Low", (status, result)
    assert model.counts["Step 1"] == 1, model.counts
    again.close()
    old.close()
    model.server.close()


def test_an_idempotent_call_runs_once(restate, scratch):
    model = Steps()
    w = Worker(scratch, free_port(), model)
    restate.register(w.uri)
    key = {"idempotency-key": "same-ticket"}
    first = invoke(restate, "triage", {"ticket": "once"}, key)
    calls = sum(model.counts.values())
    second = invoke(restate, "triage", {"ticket": "once"}, key)
    assert first == second == (200, {"severity": "Low", "summary": "xxx"}), (first, second)
    assert calls == 3 and sum(model.counts.values()) == 3, model.counts
    w.close()
    model.server.close()


def test_input_that_does_not_fit_is_a_terminal_error(restate, scratch):
    model = Steps()
    w = Worker(scratch, free_port(), model)
    restate.register(w.uri)
    # What Restate shows of a handler: its doc comment, and its body's and result's types.
    status, service = http("GET", f"{restate.admin}/services/triage")
    double = next(h for h in service["handlers"] if h["name"] == "double")
    assert double["documentation"] == "A procedure that takes a number: its input is typed."
    assert double["input_json_schema"]["properties"] == {"n": {"type": "integer"}}, double
    assert double["output_json_schema"]["type"] == "integer", double
    started = time.monotonic()
    status, body = invoke(restate, "double", {"n": "twelve"})
    assert status == 400, (status, body)
    assert "argument `n` of `double`" in body["message"], body
    status, body = invoke(restate, "double", ["not", "an", "object"])
    assert status == 400 and '{"n"}' in body["message"], (status, body)
    assert time.monotonic() - started < 10, "a terminal error was retried"
    assert invoke(restate, "double", {"n": 21}) == (200, 42)
    # A fan-out's calls are journaled too (in batches, by position).
    status, body = invoke(restate, "summaries", {"tickets": ["a", "b", "c"]})
    assert (status, body) == (200, ["xxx", "xxx", "xxx"]), (status, body)
    w.close()
    model.server.close()


def test_budgets_count_per_invocation(restate, scratch):
    """`--max-calls` bounds each invocation, not the worker's life: a procedure of three
    calls runs under a budget of three again and again; under two it ends with a
    terminal error naming the budget, not retried."""
    model = Steps()
    w = Worker(scratch, free_port(), model, flags=("--max-calls", "3"))
    restate.register(w.uri)
    for i in range(3):
        status, body = invoke(restate, "triage", {"ticket": f"budget {i}"})
        assert status == 200, (i, status, body)
    w.close()
    tight = Worker(scratch, free_port(), model, flags=("--max-calls", "2"))
    restate.register(tight.uri)
    status, body = invoke(restate, "triage", {"ticket": "too many"})
    assert status == 500 and "budget of 2 LLM calls" in body["message"], (status, body)
    tight.close()
    model.server.close()


def test_a_model_server_that_is_down_is_retried(restate, scratch):
    """The provider cannot be reached: the attempt fails but the invocation is not
    over; Restate retries it, and once the model server is up the call completes."""
    port = free_port()

    class Later:  # what the worker is given before the model server exists
        class server:
            url = f"http://127.0.0.1:{port}/v1"

    w = Worker(scratch, free_port(), Later, flags=("--max-calls", "10"))
    restate.register(w.uri)
    invocation = send(restate, "summarize", {"ticket": "later"}, "down-1")

    def retried():
        rows = restate.query(
            f"SELECT retry_count FROM sys_invocation WHERE id = '{invocation}'"
        )
        return rows and (rows[0].get("retry_count") or 0) >= 1

    wait_until(retried, "Restate to retry the invocation", 60)
    model = Steps(port=port)
    status, result = attach(restate, invocation)
    assert (status, result) == (200, "xxx"), (status, result)
    assert model.counts["Step 2"] == 1, model.counts
    w.close()
    model.server.close()


def test_spans_are_exported_over_otlp(restate, scratch):
    """`--otlp` works as in `sapc run`: each invocation's function and model-call spans
    reach the collector while the worker serves, and the rest when it stops."""
    spans = os.path.join(scratch, "spans.jsonl")
    receiver = subprocess.Popen(
        [os.environ["OTLP_PYTHON"], os.path.join(HERE, "../../../../tests/otlp/receiver.py"),
         spans], stdout=subprocess.PIPE, text=True)
    try:
        port = receiver.stdout.readline().strip()
        model = Steps()
        w = Worker(scratch, free_port(), model, flags=("--otlp", f"http://127.0.0.1:{port}"))
        restate.register(w.uri)
        assert invoke(restate, "triage", {"ticket": "traced"})[0] == 200

        def names():
            if not os.path.exists(spans):
                return set()
            with open(spans) as f:
                return {json.loads(line)["name"] for line in f if line.strip()}

        # The batch exporter sends every five seconds while the worker serves.
        wait_until(lambda: {"triage", "chat test"} <= names(), "the invocation's spans", 30)
        w.process.send_signal(signal.SIGTERM)
        assert w.process.wait(10) == 0, w.stderr()
        wait_until(lambda: any(n.startswith("sap run") for n in names()), "the worker's span", 10)
        w.close()
        model.server.close()
    finally:
        receiver.kill()
        receiver.wait()


def main(selected: list[str]) -> int:
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_")]
    if selected:
        tests = [(n, f) for n, f in tests if any(s in n for s in selected)]
    scratch = tempfile.mkdtemp(prefix="sap-restate-")
    restate = Restate(scratch)
    failed = 0
    try:
        for name, test in tests:
            started = time.monotonic()
            try:
                test(restate, scratch)
                print(f"ok   {name} ({time.monotonic() - started:.1f} s)", flush=True)
            except Exception:  # noqa: BLE001 — every failure is reported
                failed += 1
                print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    finally:
        for worker in Worker.started:
            worker.close()
        restate.close()
    if failed:
        print(f"{failed} of {len(tests)} failed; logs in {scratch}")
        return 1
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(tests)} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
