#!/usr/bin/env python3
"""The crates' layering, as ARCHITECTURE.md states it ("Invariants"), checked against
`cargo metadata`: each crate may depend (normal dependencies) only on the sap crates
listed for it here, and dev-dependencies only add `test-support` and what TESTS_ALSO
names. A new edge fails (exit 1) until this
table and ARCHITECTURE.md say why it is right. A crate over a quarter of all the
crates' code fails too.

    tools/checks/layers.py
"""
import json
import os
import subprocess
import sys

# Who may use whom. The compiler crates form a pipeline. At run time, `llm` (what a
# model is asked and answers) is the floor: the providers and the HTTP transport see
# requests and answers only, never a `Context` or a `Value`, because they cannot reach
# `runtime`; `runtime` knows no provider, tool or transport; `tools` sees values but no
# provider; `journal` stands alone; `session` wires a run together for the front ends,
# and `sapc` is one of them.
MAY_USE = {
    # No code: the union of the builds' features in shared crates (its Cargo.toml).
    "workspace-hack": set(),
    "syntax": set(),
    "builtins": set(),
    "test-support": set(),
    "journal": set(),
    "llm": {"workspace-hack"},
    "http-transport": {"llm"},
    "providers": {"llm", "http-transport"},
    "provider-local": {"llm"},
    "hir": {"syntax", "builtins"},
    "ir": {"builtins"},
    "lower": {"hir", "ir", "syntax", "builtins"},
    "runtime": {"llm", "journal"},
    "tools": {"runtime", "llm", "http-transport", "syntax"},
    "codegen-jit": {"ir", "builtins", "syntax", "runtime", "llm", "tools", "journal"},
    "lsp": {"hir", "syntax", "builtins"},
    # The one way in for front ends: everything a run needs, nothing of the terminal.
    "session": {
        "syntax", "hir", "lower", "ir", "codegen-jit", "runtime", "llm", "providers",
        "provider-local", "http-transport", "tools", "journal",
    },
    # The Python package `saplang`: another front end over `session`.
    "python": {"session", "codegen-jit", "runtime", "llm", "ir", "syntax"},
    # The editor's agent (`sapc acp`): another front end over `session`; it shows the
    # run's calls (`runtime::observe`) and is the standard tools' client (`tools`).
    "acp": {"session", "codegen-jit", "runtime", "tools", "ir"},
    # Procedures on Restate (`sapc serve --restate`): another front end over `session`;
    # each invocation's journal (`journal`'s logic) is kept in Restate's.
    "restate": {"session", "codegen-jit", "runtime", "journal", "llm"},
    "sapc": {
        "syntax", "builtins", "hir", "ir", "lower", "llm", "runtime", "tools", "journal",
        "codegen-jit", "lsp", "session", "acp", "restate",
    },
}
# Tests may also use these: `runtime`'s and `codegen-jit`'s tests drive real providers
# against a mock server, and `codegen-jit`'s compile sap source.
TESTS_MAY_USE = {"test-support"}
TESTS_ALSO = {
    "runtime": {"providers", "http-transport"},
    "codegen-jit": {"hir", "lower", "providers", "http-transport"},
}


# No crate holds more than this share of the crates' code (lines of `src/**.rs`): one
# that does is holding more than one thing.
MOST_SHARE = 0.25


def too_big():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../crates")
    lines = {}
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        n = 0
        for folder, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    with open(os.path.join(folder, f), encoding="utf-8") as fh:
                        n += sum(1 for _ in fh)
        lines[crate] = n
    total = sum(lines.values())
    return [
        f"{crate} holds {n} of the crates' {total} lines ({n / total:.0%}), more than "
        f"{MOST_SHARE:.0%}: split it along its seams"
        for crate, n in lines.items()
        if n > MOST_SHARE * total
    ]


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            check=True,
            capture_output=True,
        ).stdout
    )
    ours = {p["name"] for p in meta["packages"]}
    problems = []
    for p in meta["packages"]:
        name = p["name"]
        if name not in MAY_USE:
            problems.append(f"{name}: a crate tools/checks/layers.py does not place")
            continue
        for d in p["dependencies"]:
            dep = d["name"]
            if dep not in ours:
                continue
            allowed = set(MAY_USE[name])
            if d["kind"] == "dev":
                allowed |= TESTS_MAY_USE | TESTS_ALSO.get(name, set())
            if dep not in allowed:
                kind = "dev-dependency" if d["kind"] == "dev" else "dependency"
                problems.append(f"{name} has the {kind} {dep}, which the layering does not allow")
    problems += too_big()
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        sys.exit(1)
    print("layers: every crate uses only the crates below it, and none is over a quarter of the code")


if __name__ == "__main__":
    main()
