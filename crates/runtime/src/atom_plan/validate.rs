//! Validation of a plan against the offered tools: every defect, with the atom it is in
//! — unknown tools, wrong argument types, references to missing atoms or outside
//! `dependsOn`, duplicate ids, cycles.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::value;
use llm::types::TypeDesc;

/// Every defect of `plan` against the offered tools, sorted by atom.
pub fn validate(plan: &Plan, tools: &[ToolSig]) -> Vec<PlanError> {
    let mut errors = Vec::new();
    let mut by_id: BTreeMap<i64, &Atom> = BTreeMap::new();
    for atom in &plan.atoms {
        if by_id.insert(atom.id, atom).is_some() {
            errors.push(defect(Some(atom.id), "duplicate atom id"));
        }
    }
    if plan.atoms.is_empty() {
        errors.push(defect(None, "the plan has no atoms"));
    }
    let finals: Vec<i64> = plan
        .atoms
        .iter()
        .filter(|a| a.kind == AtomKind::Final)
        .map(|a| a.id)
        .collect();
    if finals.len() > 1 {
        errors.push(defect(
            None,
            format!(
                "the plan has {} final atoms ({}); it may have one",
                finals.len(),
                ids(&finals)
            ),
        ));
    }
    let tool = |name: &str| tools.iter().find(|t| t.name == name);
    for atom in &plan.atoms {
        let here = Some(atom.id);
        for &d in &atom.depends_on {
            match by_id.get(&d) {
                None => errors.push(defect(
                    here,
                    format!("depends on atom {d}, which is not in the plan"),
                )),
                Some(dep) if dep.kind == AtomKind::Final => errors.push(defect(
                    here,
                    format!("depends on the final atom {d}; nothing may follow the final atom"),
                )),
                Some(_) => {}
            }
        }
        let refs = atom.references();
        for &r in &refs {
            if atom.depends_written && !atom.depends_on.contains(&r) && by_id.contains_key(&r) {
                errors.push(defect(
                    here,
                    format!("uses `<result_of_{r}>` but atom {r} is not in its `dependsOn`"),
                ));
            }
            if !by_id.contains_key(&r) && !atom.depends_on.contains(&r) {
                errors.push(defect(
                    here,
                    format!("refers to `<result_of_{r}>`, but there is no atom {r}"),
                ));
            }
        }
        match atom.kind {
            AtomKind::Final => {
                if !atom.input.is_empty() && atom.depends_on.is_empty() {
                    errors.push(defect(
                        here,
                        "the final atom names no atom whose result it reports",
                    ));
                }
            }
            AtomKind::Tool => {
                let Some(sig) = tool(&atom.name) else {
                    let offered: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                    errors.push(defect(
                        here,
                        format!(
                            "unknown tool `{}` (the tools are: {})",
                            atom.name,
                            offered.join(", ")
                        ),
                    ));
                    continue;
                };
                check_arguments(atom, sig, &by_id, &tool, &mut errors);
            }
        }
    }
    errors.extend(untrusted_flows(plan, &by_id, &tool));
    errors.extend(cycles(plan, &by_id));
    errors.sort();
    errors.dedup();
    errors
}

fn check_arguments<'a>(
    atom: &Atom,
    sig: &ToolSig,
    by_id: &BTreeMap<i64, &Atom>,
    tool: &dyn Fn(&str) -> Option<&'a ToolSig>,
    errors: &mut Vec<PlanError>,
) {
    let here = Some(atom.id);
    for key in atom.input.keys() {
        if !sig.params.iter().any(|p| &p.name == key) {
            let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
            errors.push(defect(
                here,
                format!(
                    "`{}` has no parameter `{key}` (its parameters are: {})",
                    sig.name,
                    names.join(", ")
                ),
            ));
        }
    }
    for p in &sig.params {
        let Some(arg) = atom.input.get(&p.name) else {
            if !matches!(p.ty, TypeDesc::Option(_)) {
                errors.push(defect(
                    here,
                    format!("`{}` needs its argument `{}: {}`", sig.name, p.name, p.ty),
                ));
            }
            continue;
        };
        if let Some(r) = arg.as_str().and_then(reference) {
            // A whole-argument reference: the referenced tool's result type must fit.
            let produced = by_id
                .get(&r)
                .filter(|a| a.kind == AtomKind::Tool)
                .and_then(|a| tool(&a.name))
                .map(|t| &t.ret);
            if let Some(produced) = produced
                && !fits(produced, &p.ty)
            {
                errors.push(defect(
                    here,
                    format!(
                        "argument `{}` of `{}` is a {}, but atom {r} produces a {produced}",
                        p.name, sig.name, p.ty
                    ),
                ));
            }
            continue;
        }
        let mut inner = Vec::new();
        references(arg, &mut inner);
        if !inner.is_empty() {
            // References inside a larger literal are checked when they are substituted.
            continue;
        }
        if let Err(e) = value::decode(&p.ty, arg) {
            errors.push(defect(
                here,
                format!(
                    "argument `{}` of `{}` must be a {}: {e}",
                    p.name, sig.name, p.ty
                ),
            ));
        }
    }
}

/// A `<result_of_N>` carrying untrusted data into a `trusted` parameter: the flow the
/// checker's E0134 cannot see, because the plan is written at run time. An atom's result
/// is untrusted when its tool yields untrusted data, or when its tool passes on its
/// arguments' provenance (a pure sap function) and one of them is.
fn untrusted_flows<'a>(
    plan: &Plan,
    by_id: &BTreeMap<i64, &Atom>,
    tool: &dyn Fn(&str) -> Option<&'a ToolSig>,
) -> Vec<PlanError> {
    // Where each atom's untrusted data comes from (the tool first yielding it), found
    // by going over the atoms until nothing changes: a cycle is reported elsewhere.
    let mut source: BTreeMap<i64, String> = BTreeMap::new();
    loop {
        let mut changed = false;
        for atom in &plan.atoms {
            if atom.kind != AtomKind::Tool || source.contains_key(&atom.id) {
                continue;
            }
            let Some(sig) = tool(&atom.name) else {
                continue;
            };
            let from = match sig.yields {
                Yields::Trusted => None,
                Yields::Untrusted => Some(format!("`{}`", sig.name)),
                Yields::FromArguments => atom
                    .references()
                    .into_iter()
                    .find_map(|r| source.get(&r).cloned()),
            };
            if let Some(from) = from {
                source.insert(atom.id, from);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut errors = Vec::new();
    for atom in &plan.atoms {
        let Some(sig) = tool(&atom.name).filter(|_| atom.kind == AtomKind::Tool) else {
            continue;
        };
        for name in &sig.trusted {
            let Some(arg) = atom.input.get(name) else {
                continue;
            };
            let mut refs = Vec::new();
            references(arg, &mut refs);
            for r in refs {
                if let Some(from) = source.get(&r).filter(|_| by_id.contains_key(&r)) {
                    errors.push(defect(
                        Some(atom.id),
                        format!(
                            "`{}({name}:)` is a `trusted` parameter, and `<result_of_{r}>` carries untrusted data (from {from}); only the request's own values may fill it",
                            sig.name
                        ),
                    ));
                }
            }
        }
    }
    errors
}

/// Whether a value of type `produced` can be passed where `wanted` is expected.
fn fits(produced: &TypeDesc, wanted: &TypeDesc) -> bool {
    match (produced, wanted) {
        (_, TypeDesc::Json) => true,
        (TypeDesc::I32, TypeDesc::I64) | (TypeDesc::I32 | TypeDesc::I64, TypeDesc::F64) => true,
        (p, TypeDesc::Option(w)) => fits(p, w) || p == wanted,
        (p, w) => p == w,
    }
}

/// Atoms on a dependency cycle, each reported once with the cycle it is on.
fn cycles(plan: &Plan, by_id: &BTreeMap<i64, &Atom>) -> Vec<PlanError> {
    // Iterative colouring DFS over the known dependency edges.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark: BTreeMap<i64, Mark> = by_id.keys().map(|&id| (id, Mark::New)).collect();
    let mut errors = Vec::new();
    let mut reported = BTreeSet::new();
    for atom in &plan.atoms {
        if mark[&atom.id] != Mark::New {
            continue;
        }
        let mut path: Vec<(i64, usize)> = vec![(atom.id, 0)];
        mark.insert(atom.id, Mark::Open);
        while let Some(&mut (id, ref mut next)) = path.last_mut() {
            let deps = &by_id[&id].depends_on;
            if *next == deps.len() {
                mark.insert(id, Mark::Done);
                path.pop();
                continue;
            }
            let d = deps[*next];
            *next += 1;
            match mark.get(&d).copied() {
                Some(Mark::New) => {
                    mark.insert(d, Mark::Open);
                    path.push((d, 0));
                }
                Some(Mark::Open) => {
                    let start = path.iter().position(|&(p, _)| p == d).unwrap_or(0);
                    let cycle: Vec<i64> = path[start..].iter().map(|&(p, _)| p).collect();
                    let mut key = cycle.clone();
                    key.sort();
                    if reported.insert(key) {
                        let shown: Vec<String> = cycle
                            .iter()
                            .chain(std::iter::once(&d))
                            .map(|i| i.to_string())
                            .collect();
                        errors.push(defect(
                            Some(d),
                            format!("is on a dependency cycle: {}", shown.join(" -> ")),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    errors
}
