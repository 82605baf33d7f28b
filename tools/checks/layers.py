#!/usr/bin/env python3
"""The crates' layering, as ARCHITECTURE.md states it ("Invariants"), checked against
`cargo metadata`: each crate may depend (normal dependencies) only on the sap crates
listed for it here, and dev-dependencies only add `test-support` and, for
`codegen-jit`'s tests, the compiler front end. A new edge fails (exit 1) until this
table and ARCHITECTURE.md say why it is right.

    tools/checks/layers.py
"""
import json
import subprocess
import sys

# Who may use whom. The compiler crates form a pipeline; `runtime` knows nothing of
# the compiler but the source positions of `syntax`; `journal` stands alone; only
# `sapc` sees everything.
MAY_USE = {
    "syntax": set(),
    "builtins": set(),
    "test-support": set(),
    "journal": set(),
    "hir": {"syntax", "builtins"},
    "ir": {"builtins"},
    "lower": {"hir", "ir", "syntax", "builtins"},
    "runtime": {"syntax", "journal"},
    "codegen-jit": {"ir", "builtins", "syntax", "runtime", "journal"},
    "lsp": {"hir", "syntax", "builtins"},
    "sapc": {"syntax", "builtins", "hir", "ir", "lower", "runtime", "journal", "codegen-jit", "lsp"},
}
# Tests may also use these.
TESTS_MAY_USE = {"test-support"}
CODEGEN_TESTS_MAY_USE = {"hir", "lower"}


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
                allowed |= TESTS_MAY_USE | (CODEGEN_TESTS_MAY_USE if name == "codegen-jit" else set())
            if dep not in allowed:
                kind = "dev-dependency" if d["kind"] == "dev" else "dependency"
                problems.append(f"{name} has the {kind} {dep}, which the layering does not allow")
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        sys.exit(1)
    print("layers: every crate uses only the crates below it")


if __name__ == "__main__":
    main()
