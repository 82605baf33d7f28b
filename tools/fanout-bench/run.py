#!/usr/bin/env python3
"""Fan-out at the physical limit (issue #20): a fixed-latency OpenAI-compatible server on
Node's event loop, the floor being N raw concurrent HTTP calls from a Node client, against
`parallel for item in items { judge(Context::new(), item) }` run by `sapc run`.

Every row is measured side by side in one run: floor, then sap, on the same server.
Peak RSS is the sap process's own (wait4); "per call in flight" is the peak RSS above a
one-item run of the same program, divided by the calls in flight at once (the server's
own count). Peak RSS counts the pages of `sapc`'s own code that the run mapped, which
are shared and shift by a megabyte or two with the code's layout; "anonymous" is the
same figure for the process's anonymous memory alone (its peak `RssAnon`, sampled every
2 ms), what the calls themselves hold.

    python3 tools/fanout-bench/run.py [--sapc [LABEL=]PATH ...] [--rows 200,200:1000,...]
                                      [--http1 ours,hyper]

A row is ITEMS or ITEMS:CONCURRENCY. Several `--sapc` (say `before=/tmp/sapc-old
after=target/release/sapc`) are measured side by side, each row against the same floor
run. Rows above 20,000 items have no floor (the Node client cannot open that many
sockets at once). `--http1 ours,hyper` runs each sapc with our HTTP/1.1 client and with
hyper's (`SAP_HTTP1_CLIENT=hyper`), side by side. Prints a Markdown table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROGRAM = """\
enum Verdict { Match, NoMatch }

/// Judge one item.
fn judge(ctx: Context, item: String) -> Verdict {
    "Judge whether this item fits."!
    item!
}

fn main() {
    let items: List<String> = []
    let i = 0
    while i < ITEMS {
        items = push(items, "item " + to_string(i))
        i = i + 1
    }
    let verdicts = parallel for item in items {
        judge(Context::new(), item)
    }
    print(to_string(len(verdicts)) + " verdicts")
}
"""

DEFAULT_ROWS = "200,200:1000,1000:1000,10000:1000"


def server_stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats") as r:
        return json.load(r)


def floor(port, n):
    out = subprocess.run(
        ["node", os.path.join(HERE, "floor.js"), str(port), str(n)],
        check=True, capture_output=True, text=True,
    )
    return float(out.stdout.strip())


def sap(sapc, folder, port, n, concurrency, extra, env=None):
    path = os.path.join(folder, f"fanout_{n}.sap")
    with open(path, "w") as f:
        f.write(PROGRAM.replace("ITEMS", str(n)))
    # Compile once outside the timing (the build cache), as a deployed program would be.
    base = [sapc, "run", path, "--provider", "openai", "--model", "bench",
            "--base-url", f"http://127.0.0.1:{port}/v1"] + extra
    if concurrency:
        base += ["--concurrency", str(concurrency)]
    subprocess.run([sapc, "build", path], check=True, capture_output=True)
    server_stats(port)
    start = time.perf_counter()
    proc = subprocess.Popen(base, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    anon = [0]
    sampler = threading.Thread(target=sample_anon, args=(proc.pid, anon))
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    sampler.join()
    wall = (time.perf_counter() - start) * 1000
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    if status != 0 or f"{n} verdicts" not in out:
        sys.exit(f"sapc failed on {n} items (status {status}):\n{out}\n{err[-3000:]}")
    stats = server_stats(port)
    return wall, usage.ru_maxrss / 1024, stats["peak"], err, anon[0] / 1024


def sample_anon(pid, peak):
    """The peak of `pid`'s anonymous resident memory (KB) into `peak[0]`, until it ends."""
    while True:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
                    elif line.startswith("State:") and "Z" in line.split()[1]:
                        return
        except (FileNotFoundError, ProcessLookupError, ValueError):
            return
        time.sleep(0.002)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sapc", action="append", default=None,
                    help="[LABEL=]PATH of a sapc binary (repeatable)")
    ap.add_argument("--rows", default=DEFAULT_ROWS)
    ap.add_argument("--latency", type=int, default=100)
    ap.add_argument("--port", type=int, default=8787)
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the median is shown")
    ap.add_argument("--stats", action="store_true", help="print sapc --stats of each run")
    ap.add_argument("--http1", default="ours",
                    help="HTTP/1.1 clients to run each sapc with: ours, hyper or ours,hyper "
                         "(hyper's is chosen by SAP_HTTP1_CLIENT=hyper)")
    args = ap.parse_args()
    binaries = []
    clients = args.http1.split(",")
    for spec in args.sapc or [os.path.join(ROOT, "target", "release", "sapc")]:
        label, _, path = spec.rpartition("=")
        for client in clients:
            env = dict(os.environ)
            env.pop("SAP_HTTP1_CLIENT", None)
            if client == "hyper":
                env["SAP_HTTP1_CLIENT"] = "hyper"
            elif client != "ours":
                sys.exit(f"--http1: `{client}` is neither ours nor hyper")
            name = label or "sap"
            if len(clients) > 1:
                name = f"{name} ({client})"
            binaries.append((name, os.path.abspath(path), env))
    server = subprocess.Popen(
        ["node", os.path.join(HERE, "server.js"), str(args.port), str(args.latency)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout.readline().strip() == "ready"
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "sap.toml"), "w") as f:
                # The floor does not stream; neither does sap here.
                f.write("[provider]\nstream = false\n")
            extra = ["--stats"] if args.stats else []
            base_rss, base_anon = {}, {}
            for label, path, env in binaries:
                _, base_rss[label], _, _, base_anon[label] = sap(path, folder, args.port, 1,
                                                                  None, [], env)
            print(f"server latency {args.latency} ms; one-item run peak RSS "
                  + ", ".join(f"{label} {rss:.0f} MB" for label, rss in base_rss.items()) + "\n")
            print("| items | flags | floor | sapc | wall | / floor | peak RSS | in flight "
                  "| per call in flight | anonymous |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            for row in args.rows.split(","):
                n, _, c = row.partition(":")
                n, c = int(n), (int(c) if c else None)
                with_floor = n <= 20_000
                floors = []
                runs = {label: [] for label, _, _ in binaries}
                for _ in range(args.repeat):
                    if with_floor:
                        floors.append(floor(args.port, n))
                    for label, path, env in binaries:
                        runs[label].append(sap(path, folder, args.port, n, c, extra, env))
                f = sorted(floors)[len(floors) // 2] if floors else None
                flags = f"`--concurrency {c}`" if c else "none"
                for label, _, _ in binaries:
                    wall, rss, peak, err, anon = sorted(runs[label])[len(runs[label]) // 2]
                    per = (rss - base_rss[label]) * 1024 / max(peak, 1)
                    per_anon = (anon - base_anon[label]) * 1024 / max(peak, 1)
                    ratio = f"{wall / f:.2f}×" if f else "—"
                    shown_floor = f"{f:,.0f} ms" if f else "—"
                    print(f"| {n:,} | {flags} | {shown_floor} | {label} | {wall:,.0f} ms | {ratio} "
                          f"| {rss:,.0f} MB | {peak:,} | {per:,.0f} KB | {per_anon:,.0f} KB |",
                          flush=True)
                    if args.stats:
                        print(err, file=sys.stderr)
    finally:
        server.kill()


if __name__ == "__main__":
    main()
