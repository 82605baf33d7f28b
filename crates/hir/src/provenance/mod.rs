//! Provenance: which values are untrusted, and whether one can steer a `trusted`
//! parameter (docs/REFERENCE.md, "Provenance").
//!
//! Sources: what MCP tools, `fs::read`/`list`, `http::get`/`post`, `process::run` and
//! `read_file` return (unless declared `trusted extern fn`). A value computed from an
//! untrusted one is untrusted; so is a model's answer — an LLM function's result, a `_`,
//! a `select`'s choice — while its context holds an untrusted value. A call that runs
//! because of an untrusted value (in a branch or loop it decides, in the clause an
//! untrusted `select` chose) counts as receiving untrusted arguments: control
//! dependence, as in information-flow type systems. `trust(value, "why")` declassifies.
//!
//! The analysis is an abstract interpretation of each body over a small lattice — a
//! value is clean, or carries a witness path from a source and/or the function's
//! parameters it depends on — with loops iterated to a fixed point and branches joined.
//! Each function is summarized for its callers (which parameters reach the result,
//! which reach a trusted sink, whether a sink is reachable at all) by a salsa query of
//! its own, so an edit re-analyzes the function and only those callers whose callee's
//! summary changed; recursion is a salsa cycle, iterated from an empty summary until the
//! summaries stop growing. It is conservative: a loop's injections are dropped at the
//! end of each iteration, as the context frame is, but every branch a value may have
//! taken counts. A program without both an untrusted source and a `trusted` parameter
//! cannot have a violation and is not analyzed.

mod analyze;
mod taint;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use syntax::LineIndex;
use syntax::binding::ExternBinding;

use crate::Db;
use crate::body::Callee;
use crate::builtins::Builtin;
use crate::defs::{Signature, fn_signature};
use crate::diagnostics::HirDiagnostic;
use crate::infer::check_body;
use crate::items::{Item, ItemKind, SourceFile, Workspace, file_items, program_files};

use analyze::analyze;
pub use taint::Params;

/// One step of the way an untrusted value went: what happened, and where — in which
/// function, at which offset in it. Offsets are the function's own, so code moving
/// around it changes no summary and analyses nothing again.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct Step {
    pub what: Cow<'static, str>,
    pub file: SourceFile,
    pub item: std::sync::Arc<str>,
    pub offset: u32,
}

type Path = Vec<Step>;

/// What a function does with trust, as its callers see it.
#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct Summary {
    /// The result is untrusted whatever the arguments (the path inside).
    pub ret_source: Option<Path>,
    /// Parameters whose taint reaches the result, with the steps inside.
    pub ret_params: Params,
    /// Parameters whose taint reaches a `trusted` parameter inside: the steps, and the
    /// sink (`` `pay(to:)` ``). No steps: the parameter is `trusted` itself.
    pub sink_params: BTreeMap<u32, (Path, String)>,
    /// A `trusted` parameter the function may reach at all, whatever the arguments (for
    /// control dependence): the steps and the sink.
    pub any_sink: Option<(Path, String)>,
}

impl Summary {
    /// What the fixed point compares: paths are witnesses, not part of the result.
    fn shape(&self) -> (bool, Vec<u32>, Vec<u32>, bool) {
        (
            self.ret_source.is_some(),
            self.ret_params.iter().map(|(i, _)| i).collect(),
            self.sink_params.keys().copied().collect(),
            self.any_sink.is_some(),
        )
    }
}

/// What one function does with trust, and the violations in its body. Recursion is a
/// cycle of these queries, which salsa iterates from an empty summary until the
/// summaries stop growing.
#[salsa::tracked(returns(ref), cycle_fn = analysis_recover, cycle_initial = analysis_initial)]
pub fn fn_analysis<'db>(db: &'db dyn Db, item: Item<'db>) -> (Summary, Vec<HirDiagnostic<'db>>) {
    analyze(db, item)
}

fn analysis_initial<'db>(
    _db: &'db dyn Db,
    _id: salsa::Id,
    _item: Item<'db>,
) -> (Summary, Vec<HirDiagnostic<'db>>) {
    Default::default()
}

/// Converged when nothing but the witness paths changed (a path through recursion would
/// otherwise grow by a step each round).
fn analysis_recover<'db>(
    _db: &'db dyn Db,
    _cycle: &salsa::Cycle,
    last: &(Summary, Vec<HirDiagnostic<'db>>),
    value: (Summary, Vec<HirDiagnostic<'db>>),
    _item: Item<'db>,
) -> (Summary, Vec<HirDiagnostic<'db>>) {
    if last.0.shape() == value.0.shape() {
        last.clone()
    } else {
        value
    }
}

/// What `item` (a function) does with trust, as its callers see it.
pub fn fn_summary<'db>(db: &'db dyn Db, item: Item<'db>) -> &'db Summary {
    &fn_analysis(db, item).0
}

/// The violations found in `item`'s body. A program with no untrusted source or no
/// `trusted` parameter has none, and is not analyzed.
pub fn provenance_diagnostics<'db>(db: &'db dyn Db, item: Item<'db>) -> &'db [HirDiagnostic<'db>] {
    if !has_sources_and_sinks(db, db.workspace()) {
        return &[];
    }
    &fn_analysis(db, item).1
}

/// Whether the program has both an untrusted source (a bound tool, `read_file`) and a
/// `trusted` parameter: only then can untrusted data reach one.
#[salsa::tracked]
pub fn has_sources_and_sinks(db: &dyn Db, workspace: Workspace) -> bool {
    let (mut source, mut sink) = (false, false);
    for &file in program_files(db, workspace) {
        for &item in &file_items(db, file).items {
            match item.kind(db) {
                ItemKind::ExternFn => {
                    let sig = fn_signature(db, item);
                    source |= sig.binding.is_some() && !sig.trusted;
                    sink |= sig.params.iter().any(|p| p.trusted);
                }
                ItemKind::Fn => {
                    sink |= fn_signature(db, item).params.iter().any(|p| p.trusted);
                    source |= check_body(db, item)
                        .facts
                        .calls
                        .contains(&Callee::Builtin(Builtin::ReadFile));
                }
                _ => {}
            }
        }
    }
    source && sink
}

/// What an extern does with trust: a bound tool's result is a source (unless declared
/// `trusted extern fn`); a host extern's result follows its arguments; its `trusted`
/// parameters are sinks.
/// Whether what an extern returns is untrusted: a tool outside the program (an MCP
/// server's, or a standard tool that reads the world), unless declared `trusted extern
/// fn`. The checker's sources, and the ones the run marks.
pub fn returns_untrusted(sig: &Signature<'_>) -> bool {
    let source = match &sig.binding {
        Some(ExternBinding::Mcp { .. } | ExternBinding::Python) => true,
        Some(ExternBinding::Std { module, tool }) => matches!(
            (module.as_str(), tool.as_str()),
            ("fs", "read") | ("fs", "list") | ("http", _) | ("process", "run")
        ),
        None => false,
    };
    source && !sig.trusted
}

fn extern_summary(sig: &Signature<'_>, name: &str) -> Summary {
    let mut s = Summary::default();
    if sig.trusted {
        // Declared trusted: what it returns is the program's own.
    } else if returns_untrusted(sig) {
        s.ret_source = Some(Vec::new());
    } else {
        for i in 0..sig.params.len() {
            s.ret_params.join(&Params::one(i as u32));
        }
    }
    for (i, p) in sig.params.iter().enumerate() {
        if p.trusted {
            let sink = format!("`{name}({}:)`", p.name);
            s.sink_params.insert(i as u32, (Vec::new(), sink.clone()));
            s.any_sink.get_or_insert((Vec::new(), sink));
        }
    }
    s
}

/// "`inbox::read` (line 12) → injected into `triage`'s context (line 20) → …": lines of
/// `home` (the file the violation is reported in) by number, lines of other files with
/// the file's name (`aot.sap` line 31). A stretch that a loop repeated is shown once.
fn show_path(db: &dyn Db, home: SourceFile, path: &[Step]) -> String {
    let mut shortest: Vec<&Step> = Vec::new();
    for step in path {
        let same = |s: &&Step| *s == step;
        match shortest.iter().position(same) {
            Some(at) => shortest.truncate(at + 1),
            None => shortest.push(step),
        }
    }
    let mut indexes: HashMap<SourceFile, LineIndex> = HashMap::new();
    let mut bases: HashMap<(SourceFile, &str), u32> = HashMap::new();
    let parts: Vec<String> = shortest
        .iter()
        .map(|s| {
            let text = s.file.text(db);
            let index = indexes
                .entry(s.file)
                .or_insert_with(|| LineIndex::new(text));
            // Where the step's function starts in its file.
            let base = *bases.entry((s.file, &*s.item)).or_insert_with(|| {
                file_items(db, s.file)
                    .items
                    .iter()
                    .find(|i| {
                        matches!(
                            i.kind(db),
                            ItemKind::Fn | ItemKind::ExternFn | ItemKind::Test
                        ) && i.name(db).as_str() == &*s.item
                    })
                    .map_or(0, |i| i.offset(db))
            });
            let line = index.line_col(text, base + s.offset).line + 1;
            if s.file == home {
                format!("{} (line {line})", s.what)
            } else {
                let path = s.file.path(db);
                let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
                format!("{} ({name} line {line})", s.what)
            }
        })
        .collect();
    parts.join(" → ")
}
