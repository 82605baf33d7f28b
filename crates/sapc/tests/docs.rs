//! Every command the README and GETTING_STARTED show is run: here, when it runs offline
//! (as the docs write it, with the built `sapc` for `cargo run -p sapc --`, and a
//! folder the docs leave to the reader replaced by one of ours), or by the CI step or
//! test named for it below. A command added to either doc fails this test until it is
//! placed, so what a newcomer copies cannot go stale.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How a command is covered when this test does not run it: the file that runs it, and
/// a piece of that file's text that shows it does.
const ELSEWHERE: &[(&str, &str, &str)] = &[
    (
        "cargo test --workspace",
        ".ci/run",
        "cargo test --workspace",
    ),
    (
        "cargo build --release -p sapc",
        ".ci/run",
        "cargo build --release -p sapc",
    ),
    (
        // A program of the reader's, against OpenAI: the same flags against a real
        // OpenAI-compatible server.
        "cargo run -p sapc -- run my_agent.sap --provider openai --model gpt-4o-mini",
        "crates/sapc/tests/http_servers.rs",
        "\"--provider\"",
    ),
    (
        "sapc run agent.sap --provider openai --journal run.db --max-calls 50",
        "crates/sapc/tests/journal.rs",
        "\"--max-calls\"",
    ),
    (
        "sapc run agent.sap --provider openai --journal run.db --max-calls 500",
        "crates/sapc/tests/journal.rs",
        "\"--max-calls\"",
    ),
    (
        "sapc journal show run.db",
        "crates/sapc/tests/journal.rs",
        "\"journal\", \"show\"",
    ),
    (
        "cat > sap.toml <<'TOML'",
        "crates/sapc/tests/common/mcp.rs",
        "[mcp.everything]",
    ),
    (
        "sapc mcp list everything",
        "crates/sapc/tests/mcp.rs",
        "[\"mcp\", \"list\", \"everything\"]",
    ),
    (
        "sapc mcp import everything",
        "crates/sapc/tests/mcp.rs",
        "[\"mcp\", \"import\", \"everything\"]",
    ),
    (
        "cargo install --path crates/sapc",
        ".ci/run",
        "cargo install --path crates/sapc",
    ),
    (
        "cd tools/vscode && npm install && npm run package",
        ".ci/run",
        "npm run package",
    ),
    ("tools/python/setup.sh", ".ci/run", "tools/python/setup.sh"),
    (
        "~/.cache/sap-python/venv/bin/maturin build --release -m crates/python/Cargo.toml -o target/wheels",
        ".ci/run",
        "maturin build --release -m crates/python/Cargo.toml -o target/wheels",
    ),
    (
        "python3 -m venv .venv && .venv/bin/pip install target/wheels/saplang-*.whl",
        ".ci/run",
        "python3 -m venv .venv && .venv/bin/pip install target/wheels/saplang-*.whl",
    ),
    (
        ".venv/bin/python examples/python/analyze.py",
        ".ci/run",
        ".venv/bin/python examples/python/analyze.py",
    ),
    (
        // Needs VS Code itself; the package it installs is built by the line above.
        "code --install-extension sap-language-0.1.0.vsix",
        "tools/vscode/package.json",
        "\"version\": \"0.1.0\"",
    ),
];

/// Folders the docs leave to the reader, and ours that stand in for them.
const PLACEHOLDERS: &[(&str, &str)] = &[("src/agents/", "examples/")];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The commands of a Markdown file's `sh` blocks, with their line numbers; a here-
/// document's body is not a command.
fn commands(doc: &str) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let mut out = Vec::new();
    let mut language: Option<String> = None;
    let mut heredoc: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("```") {
            language = match language {
                None => Some(rest.trim().to_owned()),
                Some(_) => None,
            };
            continue;
        }
        if !matches!(language.as_deref(), Some("sh" | "bash")) || line.trim().is_empty() {
            continue;
        }
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let command = line.split(" # ").next().unwrap().trim().to_owned();
        if let Some((_, tag)) = command.split_once("<<") {
            heredoc = Some(tag.trim().trim_matches('\'').trim_matches('"').to_owned());
        }
        out.push((i + 1, command));
    }
    out
}

/// The arguments of `sapc` in a command this test runs, if it is one.
fn sapc_arguments(command: &str) -> Option<Vec<String>> {
    let rest = command
        .strip_prefix("cargo run -p sapc -- ")
        .or_else(|| command.strip_prefix("./target/release/sapc "))
        .or_else(|| command.strip_prefix("sapc "))?;
    let mut rest = rest.to_owned();
    for (theirs, ours) in PLACEHOLDERS {
        rest = rest.replace(theirs, ours);
    }
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Flags whose value is a file the command writes: sent to the test's own folder, so the
/// command, run from the repository's root as the docs have it, leaves nothing there
/// (and `--coverage`'s `lcov.info` goes there too).
const WRITES: &[&str] = &["--trace", "--record", "--journal", "-o"];

#[test]
fn every_command_of_the_readme_and_getting_started_runs() {
    let scratch = test_support::Scratch::new("docs-commands");
    let cache = scratch.join("cache");
    let mut ran = 0;
    let mut problems = Vec::new();
    for doc in ["README.md", "docs/GETTING_STARTED.md"] {
        for (line, command) in commands(doc) {
            if let Some((_, file, shows)) = ELSEWHERE.iter().find(|(c, _, _)| *c == command) {
                let text = std::fs::read_to_string(root().join(file)).unwrap_or_default();
                if !text.contains(shows) {
                    problems.push(format!(
                        "{doc}:{line}: `{command}` is said to be run by {file}, which does not \
                         contain {shows:?}"
                    ));
                }
                continue;
            }
            let Some(arguments) = sapc_arguments(&command) else {
                problems.push(format!(
                    "{doc}:{line}: `{command}` is neither run here nor placed in ELSEWHERE"
                ));
                continue;
            };
            let mut arguments = arguments;
            for i in 1..arguments.len() {
                if WRITES.contains(&arguments[i - 1].as_str()) {
                    arguments[i] = scratch.join(&arguments[i]).display().to_string();
                }
            }
            if arguments.iter().any(|a| a == "--coverage") {
                arguments.extend([
                    "--lcov".to_owned(),
                    scratch.join("lcov.info").display().to_string(),
                ]);
            }
            // From the repository's root, where the docs' commands are typed.
            let out = Command::new(env!("CARGO_BIN_EXE_sapc"))
                .current_dir(root())
                .args(&arguments)
                .env("NO_COLOR", "1")
                .env("SAP_CACHE_DIR", &cache)
                .output()
                .unwrap();
            ran += 1;
            if !out.status.success() {
                problems.push(format!(
                    "{doc}:{line}: `{command}` exited with {}:\n{}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(
        ran >= 10,
        "only {ran} commands ran: is the parsing of the docs broken?"
    );
    // No entry of ELSEWHERE is left over from a command the docs no longer show.
    let shown: Vec<String> = ["README.md", "docs/GETTING_STARTED.md"]
        .iter()
        .flat_map(|doc| commands(doc).into_iter().map(|(_, c)| c))
        .collect();
    for (command, _, _) in ELSEWHERE {
        assert!(
            shown.iter().any(|c| c == command),
            "ELSEWHERE names `{command}`, which the docs no longer show"
        );
    }
}
