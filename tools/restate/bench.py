#!/usr/bin/env python3
"""What Restate costs a sap procedure, side by side in one run (release build):

1. A journaled step: a procedure of N model calls in a row, against a model double that
   answers at once (tools/fanout-bench/server.js, on Node's event loop), invoked through Restate (`sapc serve --restate`), against the same
   calls in `sapc run` with `--journal` and with no journal. The cost per step is the
   slope between N = 1 and N = STEPS, per call, above the run with no journal.
2. Throughput: INVOCATIONS invocations of a two-call procedure, CLIENTS at a time,
   against the same double answering in LATENCY ms, with one worker and with three
   sharing the address.

    tools/restate/bench.py --sapc target/release/sapc [--steps 101] [--invocations 1000]

It uses Restate's server from tools/restate/setup.sh and the harness of
crates/sapc/tests/restate/test_restate.py.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))

PROGRAM = """// tools/restate/bench.py's procedures.

enum Verdict { Match, NoMatch }

/// Step `i`.
fn step(ctx: Context, i: i64) -> Verdict {
    "Does this match?"!
    i!
}

fn count(v: Verdict) -> i64 {
    if v == Verdict::Match { 1 } else { 0 }
}

/// `n` model calls in a row.
export fn steps(ctx: Context, n: i64) -> i64 {
    let i = 0
    let total = 0
    while i < n {
        total += count(step(ctx, i))
        i += 1
    }
    total
}

/// One model call per item, all at once.
export fn fan(ctx: Context, n: i64) -> i64 {
    let items: List<i64> = []
    let i = 0
    while i < n {
        items = push(items, i)
        i += 1
    }
    let verdicts = parallel for x in items { count(step(ctx, x)) }
    let total = 0
    for v in verdicts { total += v }
    total
}

/// Two model calls: the procedure of the throughput figure.
export fn two(ctx: Context, ticket: String) -> i64 {
    count(step(ctx, 1)) + count(step(ctx, len(ticket)))
}

fn main(ctx: Context, n: i64, fanned: bool) -> () {
    if fanned { print(to_string(fan(ctx, n))) } else { print(to_string(steps(ctx, n))) }
}
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sapc", default=os.path.join(ROOT, "target/release/sapc"))
    parser.add_argument("--steps", type=int, default=101)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--invocations", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--latency", type=float, default=50.0, help="ms")
    parser.add_argument("--workers", default="1,3")
    parser.add_argument("--fan", type=int, default=100)
    args = parser.parse_args()

    cache = subprocess.run([os.path.join(HERE, "setup.sh")], check=True,
                           capture_output=True, text=True).stdout.strip()
    arch = "linux-arm64" if os.uname().machine in ("aarch64", "arm64") else "linux-x64"
    os.environ["SAPC"] = os.path.abspath(args.sapc)
    os.environ["RESTATE_SERVER"] = os.path.join(
        cache, f"node_modules/@restatedev/restate-server-{arch}/bin/restate-server")
    os.environ["MODEL_SERVER_DIR"] = os.path.join(ROOT, "crates/python/tests")
    sys.path.insert(0, os.path.join(ROOT, "crates/sapc/tests/restate"))
    import test_restate as t  # noqa: E402

    scratch = tempfile.mkdtemp(prefix="sap-restate-bench-")
    program = os.path.join(scratch, "bench.sap")
    with open(program, "w") as f:
        f.write(PROGRAM)
    restate = t.Restate(scratch)
    try:
        step_costs(t, restate, scratch, program, args)
        fan_out(t, restate, scratch, program, args)
        throughput(t, restate, scratch, program, args)
    finally:
        for worker in t.Worker.started:
            worker.close()
        restate.close()


class NodeModel:
    """tools/fanout-bench/server.js: answers every request after `latency` ms."""

    def __init__(self, latency_ms: float):
        port = free_port()
        self.process = subprocess.Popen(
            ["node", os.path.join(ROOT, "tools/fanout-bench/server.js"), str(port),
             str(int(latency_ms))], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"

        class Server:
            url = f"http://127.0.0.1:{port}/v1"

        self.server = Server

    def served(self) -> int:
        import json
        import urllib.request
        with urllib.request.urlopen(self.server.url.replace("/v1", "/stats")) as r:
            return json.load(r)["served"]

    def close(self):
        self.process.terminate()
        self.process.wait()


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step_costs(t, restate, scratch, program, args):
    model = NodeModel(0)
    worker = t.Worker(scratch, t.free_port(), model, program)
    restate.register(worker.uri)
    env = dict(os.environ, SAP_CACHE_DIR=os.path.join(scratch, "cache"))
    flags = ["--provider", "openai", "--base-url", model.server.url, "--model", "test"]

    def restate_ms(n):
        started = time.perf_counter()
        status, body = t.http("POST", f"{restate.ingress}/bench/steps", {"n": n})
        assert status == 200, (status, body)
        return (time.perf_counter() - started) * 1000

    def run_ms(n, journal):
        cmd = [os.environ["SAPC"], "run", *flags, program]
        if journal:
            path = os.path.join(scratch, f"j{time.monotonic_ns()}.db")
            cmd[2:2] = ["--journal", path]
        started = time.perf_counter()
        subprocess.run([*cmd, "--", str(n), "false"], check=True, env=env,
                       capture_output=True)
        return (time.perf_counter() - started) * 1000

    ways = {"Restate": restate_ms, "--journal": lambda n: run_ms(n, True),
            "no journal": lambda n: run_ms(n, False)}
    for way in ways.values():  # warm: the build cache, the connections
        way(1)
    samples = {name: {1: [], args.steps: []} for name in ways}
    for _ in range(args.repeat):
        for name, way in ways.items():
            for n in (1, args.steps):
                samples[name][n].append(way(n))
    slope = {
        name: (statistics.median(s[args.steps]) - statistics.median(s[1])) / (args.steps - 1)
        for name, s in samples.items()
    }
    print(f"## A journaled step (median of {args.repeat}, {args.steps} model calls "
          f"against 1, model double answering at once)\n")
    print("| way | 1 call | %d calls | per call | above no journal |" % args.steps)
    print("|---|---|---|---|---|")
    for name, s in samples.items():
        print(f"| {name} | {statistics.median(s[1]):.1f} ms | "
              f"{statistics.median(s[args.steps]):.1f} ms | {slope[name]:.3f} ms | "
              f"{slope[name] - slope['no journal']:+.3f} ms |")
    print()
    worker.close()
    model.close()


def fan_out(t, restate, scratch, program, args):
    """One invocation whose `parallel for` makes FAN model calls at once: its wall time
    through Restate against `sapc run` with and without `--journal`."""
    model = NodeModel(args.latency)
    worker = t.Worker(scratch, t.free_port(), model, program)
    restate.register(worker.uri)
    env = dict(os.environ, SAP_CACHE_DIR=os.path.join(scratch, "cache"))
    flags = ["--provider", "openai", "--base-url", model.server.url, "--model", "test"]

    def via_restate():
        started = time.perf_counter()
        status, body = t.http("POST", f"{restate.ingress}/bench/fan", {"n": args.fan})
        assert (status, body) == (200, args.fan), (status, body)
        return (time.perf_counter() - started) * 1000

    def via_run(journal):
        cmd = [os.environ["SAPC"], "run", *flags, program, "--", str(args.fan), "true"]
        if journal:
            cmd[2:2] = ["--journal", os.path.join(scratch, f"f{time.monotonic_ns()}.db")]
        started = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        return (time.perf_counter() - started) * 1000

    ways = {"Restate": via_restate, "--journal": lambda: via_run(True),
            "no journal": lambda: via_run(False)}
    for way in ways.values():
        way()
    times = {name: statistics.median(way() for _ in range(args.repeat))
             for name, way in ways.items()}
    print(f"## A fan-out: one invocation, `parallel for` over {args.fan} items, model "
          f"answering in {args.latency:.0f} ms (median of {args.repeat})\n")
    print("| way | wall | above no journal |")
    print("|---|---|---|")
    for name, ms in times.items():
        print(f"| {name} | {ms:.0f} ms | {ms - times['no journal']:+.0f} ms |")
    print()
    worker.close()
    model.close()


def cpu_seconds(pid: int) -> float:
    """User and system time a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(t, restate, scratch, program, args):
    print(f"## Throughput: {args.invocations} invocations of a two-call procedure, "
          f"{args.clients} at a time, model answering in {args.latency:.0f} ms\n")
    print("| workers | wall | invocations/s | median latency | p95 | model calls | "
          "CPU: Restate's server | workers | model double | client |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(w) for w in args.workers.split(",")]:
        model = NodeModel(args.latency)
        port = t.free_port()
        workers = [t.Worker(scratch, port, model, program) for _ in range(n)]
        restate.register(workers[0].uri)
        t.http("POST", f"{restate.ingress}/bench/two", {"ticket": "warm"})
        model.served()  # from zero
        latencies = []

        def one(i):
            started = time.perf_counter()
            status, body = t.http("POST", f"{restate.ingress}/bench/two", {"ticket": f"ticket {i}"})
            assert status == 200, (status, body)
            latencies.append((time.perf_counter() - started) * 1000)

        pids = {"server": [restate.process.pid], "workers": [w.process.pid for w in workers],
                "model": [model.process.pid]}
        before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
        client_before = sum(os.times()[:2])
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            list(pool.map(one, range(args.invocations)))
        wall = time.perf_counter() - started
        cpu = {k: sum(cpu_seconds(p) for p in v) - before[k] for k, v in pids.items()}
        cpu["client"] = sum(os.times()[:2]) - client_before
        latencies.sort()
        p95 = latencies[int(len(latencies) * 0.95) - 1]
        print(f"| {n} | {wall:.2f} s | {args.invocations / wall:.0f} | "
              f"{statistics.median(latencies):.0f} ms | {p95:.0f} ms | "
              f"{model.served()} | {cpu['server']:.2f} s | {cpu['workers']:.2f} s | "
              f"{cpu['model']:.2f} s | {cpu['client']:.2f} s |")
        for w in workers:
            w.close()
        model.close()
    print()


if __name__ == "__main__":
    main()
