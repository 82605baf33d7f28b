#!/usr/bin/env python3
"""No import circles between a crate's modules.

A module may use its ancestors (a child takes its parent's shared items) and its
descendants; between any other two modules — siblings, cousins — the references
(`crate::a::…`, `super::a::…`, `use crate::{a, b}`) must go one way: this fails
(exit 1) on every circle they form, naming the modules and a file that makes each step.

    tools/checks/circles.py
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
PATH = re.compile(r"\b(crate|super(?:::super)*)::((?:\w+::)*)(\w+|\{)")


def modules_of(src):
    """Module path (a tuple) → file, for a crate's `src`."""
    out = {}
    for base, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(base, name), src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            out[tuple(rel)] = os.path.join(base, name)
    return out


def code(text):
    """`text` with comments and string literals blanked (roughly)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = []
    for line in text.splitlines():
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        lines.append(line.split("//", 1)[0])
    return "\n".join(lines)


def group(text, start):
    """The names at the top level of the `{…}` opening at `start`."""
    depth, names, word, expecting = 0, [], "", True
    for c in text[start:]:
        if c == "{":
            depth += 1
            expecting = depth == 1
            continue
        if c == "}":
            depth -= 1
            if depth == 0:
                break
            continue
        if depth == 1:
            if c.isalnum() or c == "_":
                word += c
                continue
            if word and expecting:
                names.append(word)
            if c == ",":
                expecting = True
            elif not c.isspace():
                expecting = False
            word = ""
    return names


def references(module, text, known):
    """The modules `text` (the file of `module`) refers to."""
    out = set()
    for m in PATH.finditer(text):
        head, middle, last = m.group(1), m.group(2), m.group(3)
        if head == "crate":
            base = ()
        else:
            ups = head.count("super")
            base = module[: max(len(module) - ups, 0)]
        segments = [s for s in middle.split("::") if s]
        tails = [segments + [last]] if last != "{" else [segments + [n] for n in group(text, m.end() - 1)]
        for tail in tails:
            path = base + tuple(tail)
            while path and path not in known:
                path = path[:-1]
            out.add(path)
    return out


def related(a, b):
    return a[: len(b)] == b or b[: len(a)] == a


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def main():
    failed = False
    crates = os.path.join(ROOT, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        known = modules_of(src)
        edges = {}
        for module, path in known.items():
            with open(path, encoding="utf-8") as f:
                text = code(f.read())
            for target in references(module, text, known):
                if target != module and not related(module, target):
                    edges.setdefault(module, set()).add(target)
        for component in circles(edges):
            failed = True
            names = ", ".join("::".join(("crate",) + m) for m in component)
            print(f"{crate}: an import circle between {names}", file=sys.stderr)
            for m in component:
                for t in sorted(edges.get(m, ())):
                    if t in component:
                        print(f"    {os.path.relpath(known[m], ROOT)} uses crate::{'::'.join(t)}", file=sys.stderr)
    if failed:
        sys.exit(1)
    print("circles: none between any crate's modules")


if __name__ == "__main__":
    main()
