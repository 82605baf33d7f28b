//! The fixture harness shared by the crates' data-driven tests: `.sap` files whose
//! expected diagnostics are written inline, `//~ error[E0001]: message text` on the line
//! the diagnostic points at (`//~^` for the line above, `//~^^` two above). Each
//! expectation must match a diagnostic on its line with that severity, code and a
//! message containing the text; every diagnostic must be expected.

use std::path::{Path, PathBuf};

/// Every `.sap` file under `dir`, sorted.
pub fn sap_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, &mut out);
    out
}

/// The example programs in `examples/`: its `.sap` files that have a `main` (the others
/// are modules the programs use, such as an imported MCP server's `notes.sap`), sorted.
pub fn example_programs(examples: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(examples)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "sap") && is_program(p))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Whether the file at `path` is a program (it has a `main`) rather than a module.
pub fn is_program(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.contains("fn main("))
}

/// The modules beside `path` that its text `use`s (`use notes` → `notes.sap`).
pub fn used_modules(path: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    sap_files(dir)
        .into_iter()
        .filter(|m| m.parent() == Some(dir) && !is_program(m))
        .filter(|m| {
            let stem = m.file_stem().unwrap_or_default().to_string_lossy();
            text.lines().any(|l| {
                let l = l.trim();
                l == format!("use {stem}")
                    || l.starts_with(&format!("use {stem}::"))
                    || l == format!("use {stem};")
            })
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "sap") {
            out.push(path);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// A diagnostic as the harness compares it (each compiler layer has its own type).
#[derive(Debug)]
pub struct Reported<'a> {
    /// Byte offset of its primary span in the file.
    pub offset: u32,
    pub severity: Severity,
    pub code: &'a str,
    pub message: &'a str,
}

#[derive(Debug)]
pub struct Expectation {
    /// Zero-based line.
    pub line: u32,
    pub severity: Severity,
    pub code: Option<String>,
    pub message: String,
}

pub fn expectations(text: &str) -> Vec<Expectation> {
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

/// Compares the diagnostics reported for `text` with its inline expectations; one
/// string per problem.
pub fn check(name: &str, text: &str, diagnostics: &[Reported]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut unmatched: Vec<&Reported> = diagnostics.iter().collect();
    for exp in expectations(text) {
        let found = unmatched.iter().position(|d| {
            line_col(text, d.offset).0 == exp.line
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
                diagnostics
                    .iter()
                    .map(|d| describe(text, d))
                    .collect::<Vec<_>>()
            )),
        }
    }
    for d in unmatched {
        failures.push(format!("{name}: unexpected {}", describe(text, d)));
    }
    failures
}

/// Zero-based line and character column of a byte offset.
fn line_col(text: &str, offset: u32) -> (u32, u32) {
    let mut end = (offset as usize).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() as u32;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() as u32)
}

fn describe(text: &str, d: &Reported) -> String {
    let (line, col) = line_col(text, d.offset);
    format!(
        "{}:{}: {:?}[{}]: {}",
        line + 1,
        col + 1,
        d.severity,
        d.code,
        d.message
    )
}
