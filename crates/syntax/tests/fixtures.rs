//! Data-driven parser tests. Every `.sap` file under `tests/fixtures/syntax` is parsed:
//!
//! - inline expectations `//~ error[E0001]: expected …` (or `//~^` for the line above,
//!   `//~^^` two above) must each match a diagnostic on that line whose message contains
//!   the text, and every diagnostic must be expected;
//! - a sibling `.ast` file, when present, must equal the S-expression dump of the tree.
//!   Run with `UPDATE_SNAPSHOTS=1` to write or refresh them.

use std::path::{Path, PathBuf};

use syntax::{Diagnostic, LineIndex, Severity};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/syntax")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "sap") {
            out.push(path);
        }
    }
}

#[derive(Debug)]
struct Expectation {
    line: u32,
    severity: Severity,
    code: Option<String>,
    message: String,
}

fn expectations(text: &str) -> Vec<Expectation> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(at) = line.find("//~") else { continue };
        let rest = &line[at + 3..];
        let carets = rest.chars().take_while(|&c| c == '^').count();
        let rest = rest[carets..].trim_start();
        let (severity, rest) = if let Some(r) = rest.strip_prefix("error") {
            (Severity::Error, r)
        } else if let Some(r) = rest.strip_prefix("warning") {
            (Severity::Warning, r)
        } else {
            panic!(
                "line {}: `//~` must be followed by `error` or `warning`",
                i + 1
            );
        };
        let (code, rest) = match rest.strip_prefix('[') {
            Some(r) => {
                let end = r.find(']').expect("unclosed `[` in expectation");
                (Some(r[..end].to_owned()), &r[end + 1..])
            }
            None => (None, rest),
        };
        let message = rest.trim_start_matches(':').trim().to_owned();
        out.push(Expectation {
            line: (i - carets) as u32,
            severity,
            code,
            message,
        });
    }
    out
}

fn check_file(path: &Path, failures: &mut Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let parse = syntax::parse(&text);
    let index = LineIndex::new(&text);
    let name = path
        .strip_prefix(fixtures_dir())
        .unwrap_or(path)
        .display()
        .to_string();

    let mut unmatched: Vec<&Diagnostic> = parse.diagnostics.iter().collect();
    for exp in expectations(&text) {
        let found = unmatched.iter().position(|d| {
            index.line_col(&text, d.span.start).line == exp.line
                && d.severity == exp.severity
                && exp.code.as_deref().is_none_or(|c| c == d.code)
                && d.message.contains(&exp.message)
        });
        match found {
            Some(i) => {
                unmatched.remove(i);
            }
            None => failures.push(format!(
                "{name}:{}: expected {:?}[{}]: {}\n  got: {:#?}",
                exp.line + 1,
                exp.severity,
                exp.code.as_deref().unwrap_or("*"),
                exp.message,
                parse
                    .diagnostics
                    .iter()
                    .map(|d| describe(&text, &index, d))
                    .collect::<Vec<_>>()
            )),
        }
    }
    for d in unmatched {
        failures.push(format!("{name}: unexpected {}", describe(&text, &index, d)));
    }

    let snapshot = path.with_extension("ast");
    let dump = syntax::sexpr::file(&parse.file);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        if snapshot.exists() || !parse.has_errors() {
            std::fs::write(&snapshot, &dump).unwrap();
        }
    } else if snapshot.exists() {
        let expected = std::fs::read_to_string(&snapshot).unwrap();
        if expected != dump {
            failures.push(format!(
                "{name}: AST differs from {}\n--- expected\n{expected}\n--- actual\n{dump}",
                snapshot.display()
            ));
        }
    }
}

fn describe(text: &str, index: &LineIndex, d: &Diagnostic) -> String {
    let lc = index.line_col(text, d.span.start);
    format!(
        "{}:{}: {:?}[{}]: {}",
        lc.line + 1,
        lc.col + 1,
        d.severity,
        d.code,
        d.message
    )
}

#[test]
fn fixtures() {
    let mut files = Vec::new();
    collect(&fixtures_dir(), &mut files);
    assert!(
        files.len() >= 60,
        "expected the fixture directory to hold at least 60 files"
    );
    let mut failures = Vec::new();
    for file in &files {
        check_file(file, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} fixture failure(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_malformed_fixture_reports_an_error() {
    let mut files = Vec::new();
    collect(&fixtures_dir().join("errors"), &mut files);
    assert!(
        files.len() >= 40,
        "at least 40 malformed-input cases, found {}",
        files.len()
    );
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(
            syntax::parse(&text).has_errors(),
            "{} parses without error",
            file.display()
        );
    }
}
