//! Data-driven parser tests. Every `.sap` file under `tests/fixtures/syntax` is parsed:
//!
//! - inline expectations `//~ error[E0001]: expected …` (or `//~^` for the line above,
//!   `//~^^` two above) must each match a diagnostic on that line whose message contains
//!   the text, and every diagnostic must be expected;
//! - a sibling `.ast` file, when present, must equal the S-expression dump of the tree.
//!   Run with `UPDATE_SNAPSHOTS=1` to write or refresh them.

use std::path::{Path, PathBuf};
use test_support::fixtures::{Reported, Severity};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/syntax")
}

fn check_file(path: &Path, failures: &mut Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let parse = syntax::parse(&text);
    let name = path
        .strip_prefix(fixtures_dir())
        .unwrap_or(path)
        .display()
        .to_string();
    let reported: Vec<Reported> = parse
        .diagnostics
        .iter()
        .map(|d| Reported {
            offset: d.span.start,
            severity: if d.is_error() {
                Severity::Error
            } else {
                Severity::Warning
            },
            code: d.code,
            message: &d.message,
        })
        .collect();
    failures.extend(test_support::fixtures::check(&name, &text, &reported));

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

#[test]
fn fixtures() {
    let files = test_support::fixtures::sap_files(&fixtures_dir());
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
    let files = test_support::fixtures::sap_files(&fixtures_dir().join("errors"));
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
