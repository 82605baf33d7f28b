//! Semantic analysis of sap on salsa: name resolution, types, and the context rules
//! (REFERENCE.md, "Context rules"). Diagnostics are data; nothing here touches the file
//! system or the terminal.
//!
//! The layers, each a set of tracked queries:
//! - [`items`]: files → chunks (parsed once per distinct text) → [`Item`]s;
//! - [`defs`]: per item, signatures, struct fields, enum variants, alias targets;
//! - [`infer`]: per function body, types and the context rules, indexed by the ids of
//!   [`body`] (expressions and locals);
//! - [`effects`]: every function classified pure, extern-calling or contextual;
//! - [`check_file`]: all diagnostics of one file, with file offsets.

#![forbid(unsafe_code)]

pub mod body;
pub mod builtins;
mod db;
pub mod defs;
pub mod diagnostics;
pub mod effects;
pub mod infer;
pub mod items;
pub mod provenance;
mod resolve;
mod ty;
mod type_lowering;

pub use builtins::Builtin;
pub use db::Database;
pub use effects::{FnKind, fn_kind, function_kinds};
pub use items::{Item, ItemKind, SourceFile, Workspace, file_items};
pub use ty::Ty;

/// The prelude modules, by name, as sap source: they ship inside the compiler.
pub const PRELUDE: &[(&str, &str)] = &[
    ("aot", include_str!("../prelude/aot.sap")),
    ("anot", include_str!("../prelude/anot.sap")),
    ("got", include_str!("../prelude/got.sap")),
    ("fs", include_str!("../prelude/fs.sap")),
    ("http", include_str!("../prelude/http.sap")),
    ("process", include_str!("../prelude/process.sap")),
];

/// A digest of the prelude's files (names and text), computed when the compiler is
/// built (`build.rs`): what the build cache keys on for the prelude.
pub const PRELUDE_DIGEST: &str = env!("SAP_PRELUDE_DIGEST");

/// The path a prelude module's file has in a workspace: `<prelude>/aot.sap`.
pub fn prelude_path(module: &str) -> String {
    format!("<prelude>/{module}.sap")
}

/// The source of the prelude file at `path`, if it is one.
pub fn prelude_source(path: &str) -> Option<&'static str> {
    let module = path.strip_prefix("<prelude>/")?.strip_suffix(".sap")?;
    PRELUDE
        .iter()
        .find(|(n, _)| *n == module)
        .map(|(_, text)| *text)
}

use syntax::Diagnostic;

/// What the analyses need from a database. Tracked functions take `&dyn Db`.
#[salsa::db]
pub trait Db: salsa::Database {
    /// The files checked together; each is a module the others can `use`.
    fn workspace(&self) -> Workspace;
}

/// Every diagnostic of `file`, with spans in the file, sorted by position.
#[salsa::tracked(returns(ref))]
pub fn check_file(db: &dyn Db, file: SourceFile) -> Vec<Diagnostic> {
    let items = file_items(db, file);
    let mut out: Vec<Diagnostic> = items.syntax_diagnostics.clone();
    let mut add =
        |ds: &[diagnostics::HirDiagnostic<'_>]| out.extend(ds.iter().map(|d| d.absolute(db)));
    add(defs::module_diagnostics(db, file));
    for &item in &items.items {
        match item.kind(db) {
            ItemKind::Fn => {
                add(&defs::fn_signature(db, item).diagnostics);
                add(&infer::check_body(db, item).diagnostics);
                add(provenance::provenance_diagnostics(db, item));
            }
            ItemKind::ExternFn => add(&defs::fn_signature(db, item).diagnostics),
            ItemKind::Struct => add(&defs::struct_def(db, item).diagnostics),
            ItemKind::Enum => add(&defs::enum_def(db, item).diagnostics),
            ItemKind::TypeAlias => add(&defs::alias_def(db, item).1),
            ItemKind::Use => {}
            ItemKind::Test => add(&infer::check_body(db, item).diagnostics),
        }
    }
    out.sort_by_key(|d| (d.span.start, d.span.end));
    out
}
