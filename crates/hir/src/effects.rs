//! Every function classified by what it may do (REFERENCE.md, "Context rules", rule 5),
//! transitively over the call graph: `lower` compiles pure functions entirely to native
//! code.

use std::collections::HashMap;

use crate::Db;
use crate::body::Callee;
use crate::defs::fn_signature;
use crate::infer::check_body;
use crate::items::{Item, ItemKind, Workspace, file_items, program_files};

/// Ordered: a function is as effectful as the most effectful thing it may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, salsa::SalsaValue)]
pub enum FnKind {
    /// No context, no extern calls, transitively: deterministic native code.
    Pure,
    /// Calls externs (host functions) but never the model.
    ExternCalling,
    /// Takes or creates a context, or calls something that does: may call the model.
    Contextual,
}

#[salsa::tracked(returns(ref))]
pub fn function_kinds<'db>(db: &'db dyn Db, workspace: Workspace) -> HashMap<Item<'db>, FnKind> {
    let mut kinds: HashMap<Item<'db>, FnKind> = HashMap::new();
    let mut callees: Vec<(Item<'db>, Vec<Item<'db>>)> = Vec::new();
    for &file in program_files(db, workspace) {
        for &item in &file_items(db, file).items {
            match item.kind(db) {
                ItemKind::ExternFn => {
                    kinds.insert(item, FnKind::ExternCalling);
                }
                ItemKind::Fn => {
                    let facts = &check_body(db, item).facts;
                    let mut kind = FnKind::Pure;
                    if fn_signature(db, item).context_param.is_some() || facts.creates_context {
                        kind = FnKind::Contextual;
                    } else if facts.calls.iter().any(|c| matches!(c, Callee::Builtin(_))) {
                        kind = FnKind::ExternCalling;
                    }
                    kinds.insert(item, kind);
                    let items = facts
                        .calls
                        .iter()
                        .filter_map(|c| match c {
                            Callee::Item(i) => Some(*i),
                            Callee::Builtin(_) => None,
                        })
                        .collect();
                    callees.push((item, items));
                }
                _ => {}
            }
        }
    }
    // Propagate along calls until nothing changes; recursion converges because kinds
    // only grow and there are three.
    let mut changed = true;
    while changed {
        changed = false;
        for (item, calls) in &callees {
            let current = kinds[item];
            let joined = calls
                .iter()
                .filter_map(|c| kinds.get(c))
                .copied()
                .fold(current, FnKind::max);
            if joined != current {
                kinds.insert(*item, joined);
                changed = true;
            }
        }
    }
    kinds
}

/// The kind of one function or extern; `None` for other items.
pub fn fn_kind<'db>(db: &'db dyn Db, item: Item<'db>) -> Option<FnKind> {
    function_kinds(db, db.workspace()).get(&item).copied()
}
