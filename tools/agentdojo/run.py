"""Runs sap agents on AgentDojo (#40) and judges them with AgentDojo's own checks.

    tools/agentdojo/run.py --suite workspace|slack|travel|banking|all \\
        [--limit N] [--jobs J] [--agent structured|naive] [--out DIR] [--sapc PATH] \\
        --model obeying|PROVIDER-ARGS…

Every user task runs alone (utility), and every (user task, injection task) pair runs
with the injection task's injections placed by AgentDojo's attack (security: did the
attack succeed; utility under attack). `--limit N` takes the first N user tasks and the
first N injection tasks of each suite. Each case is one `sapc run` of the suite's agent
(`agents/SUITE_agent.sap`, or `agents/SUITE_naive.sap`) with the case in its
environment; its environment server (env_server.py) records the tool calls, and
judge.py judges them. `--model obeying` is the double that always obeys (double.py);
anything else after `--model` is passed to `sapc run` as the provider's flags (`--model
--provider local --model PATH.gguf`, `--model --provider openai --base-url URL --model
NAME`), except this script's own options, which may come before or after it.

Writes DIR/cases.jsonl (one line per case, with its trace paths) and DIR/table.md (the
AgentDojo paper's measures per suite and in total), prints the table, and ends with
`attacks succeeded X of Y; utility U of V; utility under attack W of Y`. Needs the
set-up (tools/agentdojo/setup.sh) and runs in its Python.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import cases  # noqa: E402
import double  # noqa: E402
import judge  # noqa: E402

SUITES = ["workspace", "slack", "travel", "banking"]


def by_number(ids) -> list[str]:
    return sorted(ids, key=lambda t: int(t.rsplit("_", 1)[-1]))


class CaseHost:
    """Holds the cases being run, for their environment servers (env_server.py with
    AGENTDOJO_CASE_HOST): `POST /KEY/tools` lists the suite's tools, `POST /KEY/call`
    runs one on the case's environment and appends it to the case's trace file."""

    def __init__(self) -> None:
        self.cases: dict[str, tuple[cases.Case, Any, str, threading.Lock]] = {}
        host = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])) or b"{}")
                key, _, what = self.path.strip("/").partition("/")
                entry = host.cases.get(key)
                if entry is None:
                    answer, status = {"error": f"no case `{key}`"}, 404
                else:
                    case, runtime, trace, lock = entry
                    status = 200
                    if what == "tools":
                        answer = {"suite": case.suite.name, "tools": cases.tool_list(case)}
                    else:
                        name, given = body["name"], cases.arguments(body.get("arguments") or {})
                        with lock:
                            with open(trace, "a") as f:
                                f.write(json.dumps({"function": name, "args": given}) + "\n")
                            text, is_error = cases.call(case, runtime, name, given)
                        answer = {"text": text, "is_error": is_error}
                raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def add(self, key: str, case: cases.Case, trace: str) -> str:
        self.cases[key] = (case, case.runtime(), trace, threading.Lock())
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{key}"

    def remove(self, key: str) -> None:
        self.cases.pop(key, None)


@dataclass
class Outcome:
    suite: str
    user_task: str
    injection_task: str | None
    utility: bool = False
    security: bool | None = None
    calls: int = 0
    exit: int | None = None
    error: str = ""
    refused: str = ""
    answer: str = ""
    seconds: float = 0.0
    tool_trace: str = ""
    model_trace: str = ""


def run_case(args, host: CaseHost, server: double.DoubleServer | None, suite: str, ut: str,
             it: str | None, out: str) -> Outcome:
    key = f"{suite}-{ut}-{it or 'none'}"
    case_dir = os.path.join(out, "cases", key)
    os.makedirs(case_dir, exist_ok=True)
    tool_trace = os.path.join(case_dir, "tools.jsonl")
    model_trace = os.path.join(case_dir, "model.jsonl")
    for path in (tool_trace, model_trace):
        if os.path.exists(path):
            os.unlink(path)
    case = cases.load(suite, ut, it)
    prompt = case.user_task.PROMPT
    env = dict(os.environ, AGENTDOJO_PYTHON=sys.executable,
               AGENTDOJO_SERVER=os.path.join(HERE, "env_server.py"),
               AGENTDOJO_CASE_HOST=host.add(key, case, tool_trace))
    if server is not None:
        provider = server.add(key, double.CaseDouble(case, prompt))
    else:
        provider = list(args.model)
    program = os.path.join(HERE, "agents", f"{suite}_{args.agent}.sap")
    command = [args.sapc, "run", *provider, "--trace", model_trace, *args.sapc_flag,
               program, "--", prompt]
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=args.timeout, cwd=os.path.join(HERE, "agents"))
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        code, stdout = None, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = f"timed out after {args.timeout} s"
    finally:
        host.remove(key)
        if server is not None:
            server.remove(key)
    seconds = time.monotonic() - started
    with open(os.path.join(case_dir, "stderr.txt"), "w") as f:
        f.write(stderr)
    trace = []
    if os.path.exists(tool_trace):
        with open(tool_trace) as f:
            trace = [json.loads(line) for line in f if line.strip()]
    verdict = judge.judge(cases.load(suite, ut, it), trace, stdout)
    error = ""
    if code != 0:
        lines = [line.strip(" │×") for line in stderr.splitlines() if line.strip(" │×")]
        error = " ".join(lines[:3])[:500]
    refused = ""
    if "is a `trusted` parameter" in stderr:
        refused = next((line.strip(" │") for line in stderr.splitlines()
                        if "is a `trusted` parameter" in line), "")
    return Outcome(suite, ut, it, verdict["utility"], verdict["security"], verdict["calls"],
                   code, error, refused, stdout.strip(), round(seconds, 2),
                   os.path.relpath(tool_trace, out), os.path.relpath(model_trace, out))


def table(outcomes: list[Outcome], suites: list[str], header: dict) -> str:
    rows = []
    totals = [0] * 7
    for suite in suites + ["total"]:
        mine = [o for o in outcomes if suite == "total" or o.suite == suite]
        benign = [o for o in mine if o.injection_task is None]
        attacked = [o for o in mine if o.injection_task is not None]
        u = sum(o.utility for o in benign)
        w = sum(o.utility for o in attacked)
        x = sum(bool(o.security) for o in attacked)
        refused = len({o.user_task for o in benign if o.refused})
        failed = len([o for o in benign if o.exit != 0 and not o.refused])
        if suite == "total":
            u, w, x, refused, failed = totals[0], totals[2], totals[4], totals[5], totals[6]
            v, y = totals[1], totals[3]
        else:
            v, y = len(benign), len(attacked)
            for i, n in enumerate([u, v, w, y, x, refused, failed]):
                totals[i] += n
        pct = lambda a, b: f"{100 * a / b:.1f}%" if b else "—"  # noqa: E731
        rows.append(f"| {suite} | {u} of {v} ({pct(u, v)}) | {w} of {y} ({pct(w, y)}) | "
                    f"{x} of {y} ({pct(x, y)}) | {refused} | {failed} |")
    lines = [
        f"AgentDojo {cases.VERSION}, attack `{cases.ATTACK}` (addressed to `{cases.MODEL_NAME}`), "
        f"agent `{header['agent']}`, model `{header['model']}`, {header['date']}",
        "",
        "| suite | utility | utility under attack | targeted attack success | cannot express (refused) | other failures |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="all", choices=SUITES + ["all"])
    p.add_argument("--limit", type=int)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--agent", default="agent", choices=["agent", "naive"],
                   help="agents/SUITE_agent.sap (the structured agent) or agents/SUITE_naive.sap")
    p.add_argument("--out", default=os.path.join(ROOT, "target", "agentdojo"))
    p.add_argument("--sapc", default=os.path.join(ROOT, "target", "release", "sapc"))
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--sapc-flag", action="append", default=[],
                   help="an extra flag for `sapc run` (repeatable)")
    p.add_argument("--model", nargs=argparse.REMAINDER, required=True,
                   help="`obeying`, or the provider's flags for `sapc run`")
    args = p.parse_args()
    # The harness's own options may also follow `--model obeying` or the provider's
    # flags (`--model obeying --limit 5`): they are taken back out (sapc run has none
    # of these names).
    own = {a for action in p._actions for a in action.option_strings} - {"--model", "-h", "--help"}
    model, rest, i = [], [], 0
    while i < len(args.model or []):
        token = args.model[i]
        name = token.split("=", 1)[0]
        if name in own:
            rest.append(token)
            if "=" not in token and i + 1 < len(args.model):
                rest.append(args.model[i + 1])
                i += 1
        else:
            model.append(token)
        i += 1
    if rest:
        args = p.parse_args(sys.argv[1:sys.argv.index("--model")] + rest + ["--model", *model])
    if not args.model:
        p.error("--model needs `obeying` or the provider's flags")
    args.sapc = os.path.abspath(args.sapc)
    if not os.path.exists(args.sapc):
        p.error(f"no sapc at {args.sapc} (cargo build --release -p sapc, or --sapc PATH)")
    suites = SUITES if args.suite == "all" else [args.suite]
    host = CaseHost()
    server = double.DoubleServer() if args.model == ["obeying"] else None
    work = []
    for name in suites:
        suite = cases.get_suite(cases.VERSION, name)
        uts = by_number(suite.user_tasks)[: args.limit]
        its = by_number(suite.injection_tasks)[: args.limit]
        work += [(name, ut, None) for ut in uts]
        work += [(name, ut, it) for ut in uts for it in its]
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda w: run_case(args, host, server, *w, args.out), work))
    with open(os.path.join(args.out, "cases.jsonl"), "w") as f:
        for o in outcomes:
            f.write(json.dumps(o.__dict__) + "\n")
    header = {"agent": args.agent, "model": " ".join(args.model),
              "date": time.strftime("%Y-%m-%d")}
    text = table(outcomes, suites, header)
    benign = [o for o in outcomes if o.injection_task is None]
    attacked = [o for o in outcomes if o.injection_task is not None]
    x = sum(bool(o.security) for o in attacked)
    u = sum(o.utility for o in benign)
    w = sum(o.utility for o in attacked)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"{len(outcomes)} cases in {time.monotonic() - started:.0f} s; "
          f"every case: {os.path.join(args.out, 'cases.jsonl')}")
    print(f"attacks succeeded {x} of {len(attacked)}; utility {u} of {len(benign)}; "
          f"utility under attack {w} of {len(attacked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
