//! `sapc check`: find the files, parse and check each, print every diagnostic.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use llm::schema::target::{self, Target};

use crate::{Format, exit};
use session::render::{self, SourceText};

pub fn run(paths: Vec<PathBuf>, format: Format, target: Option<&str>) -> u8 {
    let target = match target.map(|name| (name, Target::parse(name))) {
        None => None,
        Some((_, Some(t))) => Some(t),
        Some((name, None)) => {
            let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
            eprintln!("error: unknown target `{name}`: use {}", names.join(", "));
            return exit::USAGE;
        }
    };
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
    let mut handles: Vec<Option<hir::SourceFile>> = sources
        .iter()
        .map(|s| {
            s.invalid_utf8_at
                .is_none()
                .then(|| db.add_file(s.name.clone(), s.text.clone()))
        })
        .collect();
    // A file named on the command line brings the modules beside it that it uses
    // (`use notes` → `notes.sap`), as `sapc run` does; they are checked with it.
    let mut scanned = 0;
    while scanned < sources.len() {
        let (Some(file), Some(folder)) =
            (handles[scanned], Path::new(&sources[scanned].name).parent())
        else {
            scanned += 1;
            continue;
        };
        let folder = folder.to_owned();
        let named = hir::items::named_modules(&db, file).clone();
        for name in named {
            let path = folder.join(format!("{name}.sap"));
            let shown = path.display().to_string();
            if !path.is_file() || sources.iter().any(|s| same_file(&s.name, &shown)) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(&path) {
                let source = SourceText::new(shown, bytes);
                handles.push(
                    source
                        .invalid_utf8_at
                        .is_none()
                        .then(|| db.add_file(source.name.clone(), source.text.clone())),
                );
                sources.push(source);
            }
        }
        scanned += 1;
    }

    // The target's warnings need the lowered program, so only a workspace that checks
    // gets them.
    let mut unenforced = match target {
        Some(target) => target_warnings(&db, target),
        None => Default::default(),
    };
    let mut errors = 0;
    let mut warnings = 0;
    let mut out = render::Printer::new(format.into());
    for (source, handle) in sources.iter().zip(handles) {
        let mut diagnostics = match handle {
            Some(file) => hir::check_file(&db, file).clone(),
            None => source.utf8_diagnostics(),
        };
        diagnostics.extend(unenforced.remove(&source.name).unwrap_or_default());
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

/// W0301 at every LLM call site whose answer has constraints `target` does not enforce,
/// by file name.
fn target_warnings(db: &hir::Database, target: Target) -> HashMap<String, Vec<syntax::Diagnostic>> {
    let mut by_file: HashMap<String, Vec<syntax::Diagnostic>> = HashMap::new();
    let Some(module) = lower::lower_workspace(db) else {
        return by_file;
    };
    let schemas = codegen_jit::host::site_schemas(&module);
    for (site, schema) in module.sites.iter().zip(schemas) {
        let Some(schema) = schema else { continue };
        let gaps = target::emit(&schema, target).gaps;
        if gaps.is_empty() {
            continue;
        }
        let Some(file) = module.files.get(site.span.file as usize) else {
            continue;
        };
        let listed: Vec<String> = gaps
            .iter()
            .map(|g| {
                if g.path.is_empty() {
                    g.what.clone()
                } else {
                    format!("{} of `{}`", g.what, g.path)
                }
            })
            .collect();
        let span = syntax::Span::new(site.span.start as usize, site.span.end as usize);
        by_file.entry(file.clone()).or_default().push(
            syntax::Diagnostic::warning(
                "W0301",
                span,
                format!(
                    "{} does not enforce {} in the answer to `{}`",
                    target.name(),
                    listed.join(", "),
                    site.subject
                ),
            )
            .with_label("the model answers here")
            .with_help(
                "the answer is still checked when it arrives, and re-asked when it does not fit",
            ),
        );
    }
    by_file
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
pub(crate) fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
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

/// Whether two displayed paths name one file (`./notes.sap` and `notes.sap` do).
fn same_file(a: &str, b: &str) -> bool {
    let clean = |p: &str| p.strip_prefix("./").unwrap_or(p).to_owned();
    clean(a) == clean(b)
        || matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
}
