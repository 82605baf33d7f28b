#!/usr/bin/env python3
"""The builds CI makes enable the same features in every crate they share, so each
crate is compiled once for all of them (crates/workspace-hack; ARCHITECTURE.md,
"workspace-hack"). Compares `cargo tree`'s features of every third-party crate across
the builds below; a difference fails (exit 1), naming the crate, the build and the
features to add to crates/workspace-hack/Cargo.toml.

    tools/checks/features.py
"""
import collections
import subprocess
import sys

# The builds CI makes (.ci/run), as `cargo tree` selects them. Dev-dependencies count
# for the test builds; proc-macros, built for the host, do not.
BUILDS = {
    "sapc": ["-p", "sapc", "-e", "normal,no-proc-macro"],
    "sapc --features local": ["-p", "sapc", "--features", "local", "-e", "normal,no-proc-macro"],
    "sapc's tests, --features local": ["-p", "sapc", "--features", "local", "-e", "normal,dev,no-proc-macro"],
    "the wheel (python --features extension-module)": ["-p", "python", "--features", "extension-module", "-e", "normal,no-proc-macro"],
    "provider-local's tests, --features llama": ["-p", "provider-local", "--features", "llama", "-e", "normal,dev,no-proc-macro"],
    "the workspace's tests": ["--workspace", "-e", "normal,dev,no-proc-macro"],
}
# Only in one build, by design: the Python binding's own.
OWN = ("pyo3",)


def features(args):
    out = subprocess.run(
        ["cargo", "tree", "--locked", "--prefix", "none", "--no-dedupe", "-f", "{p}|{f}", *args],
        capture_output=True, text=True, check=True,
    ).stdout
    found = collections.defaultdict(set)
    for line in out.splitlines():
        package, _, feats = line.partition("|")
        if "(" in package or not package.strip():  # a workspace member: `name v0.0.0 (/path)`
            continue
        found[package.strip()] |= {f for f in feats.split(",") if f}
    return found


def main():
    seen = {name: features(args) for name, args in BUILDS.items()}
    union = collections.defaultdict(set)
    for found in seen.values():
        for package, feats in found.items():
            union[package] |= feats
    bad = []
    for name, found in seen.items():
        for package, feats in sorted(found.items()):
            if feats != union[package] and not package.startswith(OWN):
                bad.append(f"  {package} in {name}: lacks {sorted(union[package] - feats)}")
    if bad:
        print("features: builds differ; add these to crates/workspace-hack/Cargo.toml:")
        print("\n".join(bad))
        return 1
    print(f"features: the same in every shared crate of {len(BUILDS)} builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
