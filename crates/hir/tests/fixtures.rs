//! Data-driven checker tests: every `.sap` file under `tests/fixtures/hir` is checked on
//! its own, except that the files of a directory named `*.workspace` are checked
//! together (each is a module the others can `use`). A file whose first line is
//! `// with the prelude` is checked with the prelude's modules (`aot`, `fs`, …) beside
//! it. Expectations are inline
//! (`//~ error[E0103]: …`); a file without any must check clean. Every diagnostic code
//! `hir` has must appear in some fixture.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use test_support::fixtures::{Reported, Severity};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hir")
}

/// The fixture files grouped into workspaces.
fn workspaces() -> Vec<Vec<PathBuf>> {
    let mut groups: Vec<(Option<PathBuf>, Vec<PathBuf>)> = Vec::new();
    for file in test_support::fixtures::sap_files(&fixtures_dir()) {
        let workspace = file
            .ancestors()
            .find(|a| a.extension().is_some_and(|e| e == "workspace"))
            .map(Path::to_path_buf);
        match (&workspace, groups.last_mut()) {
            (Some(w), Some((Some(last), files))) if last == w => files.push(file),
            _ => groups.push((workspace, vec![file])),
        }
    }
    groups.into_iter().map(|(_, files)| files).collect()
}

#[test]
fn fixtures() {
    let mut failures = Vec::new();
    let mut codes_seen = BTreeSet::new();
    let mut cases = 0;
    for files in workspaces() {
        let mut db = hir::Database::default();
        let mut handles = Vec::new();
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            if text.starts_with("// with the prelude\n") {
                db.add_prelude();
            }
            handles.push((
                path.clone(),
                text.clone(),
                db.add_file(path.display().to_string(), text),
            ));
        }
        for (path, text, file) in handles {
            cases += 1;
            let diagnostics = hir::check_file(&db, file);
            codes_seen.extend(diagnostics.iter().map(|d| d.code));
            let name = path
                .strip_prefix(fixtures_dir())
                .unwrap_or(&path)
                .display()
                .to_string();
            let reported: Vec<Reported> = diagnostics
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
        }
    }
    assert!(cases >= 120, "at least 120 fixture cases, found {cases}");
    let missing: Vec<&&str> = hir::diagnostics::ALL_CODES
        .iter()
        .filter(|c| !codes_seen.contains(**c))
        .collect();
    assert!(
        missing.is_empty(),
        "codes no fixture exercises: {missing:?}"
    );
    assert!(
        failures.is_empty(),
        "{} fixture failure(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The programs in `examples/` check without errors (warnings the reference describes,
/// such as a loop the model controls, are allowed).
#[test]
fn examples_have_no_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut db = hir::Database::default();
    db.add_prelude();
    let files: Vec<_> = test_support::fixtures::sap_files(&dir)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.clone(), db.add_file(p.display().to_string(), text))
        })
        .collect();
    assert!(files.len() >= 10);
    for (path, file) in files {
        let errors: Vec<_> = hir::check_file(&db, file)
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
}

/// The prelude modules check with no diagnostics at all, and each is usable.
#[test]
fn the_prelude_checks_cleanly() {
    let mut db = hir::Database::default();
    let files = db.add_prelude();
    assert_eq!(files.len(), hir::PRELUDE.len());
    for file in files {
        let diagnostics = hir::check_file(&db, file);
        assert!(
            diagnostics.is_empty(),
            "{}: {diagnostics:#?}",
            file.path(&db)
        );
    }
}
