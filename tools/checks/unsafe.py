#!/usr/bin/env python3
"""`unsafe` only where docs/ARCHITECTURE.md lists it (its "Invariants").

Fails (exit 1, naming each place) on:
- `unsafe` code (`unsafe {`, `unsafe fn`, `unsafe impl`, `unsafe extern`) in a file
  outside ALLOWED;
- `allow(unsafe_code)` outside ALLOWED;
- a crate root (`src/lib.rs`, `src/main.rs`) that neither forbids nor denies
  `unsafe_code`.

    tools/checks/unsafe.py
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))

# Each with its contract at its top; ARCHITECTURE.md names the same list.
ALLOWED = [
    "crates/codegen-jit/src/raw/",  # heap objects, calling and mapping code, the allocator
    "crates/codegen-jit/src/lib.rs",  # only `#[allow(unsafe_code)] mod raw;`
    "crates/runtime/src/tasks.rs",  # coroutines reaching their yielder
    "crates/provider-local/src/kept.rs",  # llama.cpp's KV state as bytes
]
UNSAFE = re.compile(r"\bunsafe\s*(\{|fn\b|impl\b|extern\b)")
ALLOW = re.compile(r"allow\(\s*unsafe_code\s*\)")
ROOT_ATTR = re.compile(r"#!\[(forbid|deny)\(\s*unsafe_code\s*\)\]")


def code_lines(text):
    """The lines of `text` with `//` comments and string literals blanked (roughly:
    enough that a comment or a message mentioning `unsafe {` does not count)."""
    for line in text.splitlines():
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        yield line.split("//", 1)[0]


def main():
    problems = []
    for base, dirs, files in os.walk(os.path.join(ROOT, "crates")):
        dirs[:] = [d for d in dirs if d != "target"]
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, ROOT)
            allowed = any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for n, line in enumerate(code_lines(text), 1):
                if not allowed and (UNSAFE.search(line) or ALLOW.search(line)):
                    problems.append(f"{rel}:{n}: `unsafe` outside the places ARCHITECTURE.md lists")
            parts = rel.split("/")
            if len(parts) == 4 and parts[2] == "src" and name in ("lib.rs", "main.rs"):
                if not ROOT_ATTR.search(text):
                    problems.append(f"{rel}: a crate root that neither forbids nor denies `unsafe_code`")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print("unsafe: only where ARCHITECTURE.md lists it")


if __name__ == "__main__":
    main()
