//! `sapc check`: find the files, parse and check each, print every diagnostic.

use std::path::{Path, PathBuf};

use crate::render::{self, SourceText};
use crate::{Format, exit};

pub fn run(paths: Vec<PathBuf>, format: Format) -> u8 {
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths
    };
    let mut files = Vec::new();
    for path in &paths {
        if let Err(message) = collect(path, &mut files) {
            eprintln!("error: {message}");
            return exit::USAGE;
        }
    }
    if files.is_empty() {
        eprintln!("error: no `.sap` files found in {}", show_paths(&paths));
        return exit::USAGE;
    }

    // Every file is read first: the files checked together form one workspace, in which
    // each is a module the others can `use`.
    let mut sources = Vec::new();
    for file in &files {
        match std::fs::read(file) {
            Ok(bytes) => sources.push(SourceText::new(file.display().to_string(), bytes)),
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", file.display());
                return exit::USAGE;
            }
        }
    }
    let mut db = hir::Database::default();
    db.add_prelude();
    let handles: Vec<Option<hir::SourceFile>> = sources
        .iter()
        .map(|s| {
            s.invalid_utf8_at
                .is_none()
                .then(|| db.add_file(s.name.clone(), s.text.clone()))
        })
        .collect();

    let mut errors = 0;
    let mut warnings = 0;
    let mut out = render::Printer::new(format);
    for (source, handle) in sources.iter().zip(handles) {
        let diagnostics = match handle {
            Some(file) => hir::check_file(&db, file).clone(),
            None => source.utf8_diagnostics(),
        };
        for d in &diagnostics {
            if d.is_error() {
                errors += 1;
            } else {
                warnings += 1;
            }
        }
        out.print(source, &diagnostics);
    }
    if format == Format::Human {
        eprintln!("{}", summary(files.len(), errors, warnings));
    }
    if errors > 0 { exit::ERRORS } else { exit::OK }
}

fn summary(files: usize, errors: usize, warnings: usize) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let checked = plural(files, "file");
    match (errors, warnings) {
        (0, 0) => format!("checked {checked}: no problems"),
        (0, w) => format!("checked {checked}: {}", plural(w, "warning")),
        (e, 0) => format!("checked {checked}: {}", plural(e, "error")),
        (e, w) => format!(
            "checked {checked}: {} and {}",
            plural(e, "error"),
            plural(w, "warning")
        ),
    }
}

fn show_paths(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| format!("`{}`", p.display())).collect();
    shown.join(", ")
}

/// Adds `path` (a file) or every `*.sap` file under it (a directory), sorted.
fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    if meta.is_file() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read directory `{}`: {e}", path.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if entry.is_dir() {
            collect(&entry, files)?;
        } else if entry.extension().is_some_and(|e| e == "sap") {
            files.push(entry);
        }
    }
    Ok(())
}
