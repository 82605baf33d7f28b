//! Running a valid plan: layer by layer, independent atoms at once, per-atom retries,
//! and the compensations of the atoms already done, newest first, when one fails.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value as JsonValue;

use super::*;
use crate::observe::AtomStatus;
use crate::value::{self, Value};

/// How a tool call went: its value, or why it failed.
pub type ToolResult = Result<Value, String>;

/// What the executor needs from its host.
pub trait ToolHost: Sync {
    fn call(&self, tool: &ToolSig, args: Vec<Value>) -> ToolResult;
}

impl<F: Fn(&ToolSig, Vec<Value>) -> ToolResult + Sync> ToolHost for F {
    fn call(&self, tool: &ToolSig, args: Vec<Value>) -> ToolResult {
        self(tool, args)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExecOptions {
    /// Extra attempts for an atom whose tool fails.
    pub retries: u32,
    /// How many atoms of a layer run at once (1: one after another).
    pub width: usize,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            retries: 0,
            width: 16,
        }
    }
}

/// One executed atom, for the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct AtomRun {
    pub id: i64,
    pub layer: usize,
    pub attempts: u32,
    pub result: JsonValue,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    /// The final atom's report (the result of what it depends on; an array when it
    /// depends on several), or the last atom's result when there is no final atom.
    pub answer: JsonValue,
    pub atoms: Vec<AtomRun>,
}

/// Execution stopped at an atom.
#[derive(Clone, Debug, PartialEq)]
pub struct AtomFailure {
    pub atom: i64,
    pub tool: String,
    pub message: String,
    pub attempts: u32,
    /// The atoms whose compensations ran, in the order they ran.
    pub compensated: Vec<i64>,
    /// Compensations that themselves failed.
    pub compensation_errors: Vec<String>,
}

impl fmt::Display for AtomFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "atom {} (`{}`) failed: {}",
            self.atom, self.tool, self.message
        )?;
        if self.attempts > 1 {
            write!(f, " (after {} attempts)", self.attempts)?;
        }
        if !self.compensated.is_empty() {
            write!(f, "; compensated atoms {}", ids(&self.compensated))?;
        }
        for e in &self.compensation_errors {
            write!(f, "; {e}")?;
        }
        Ok(())
    }
}

/// Substitutes `<result_of_N>` references with results.
fn substitute(json: &JsonValue, results: &BTreeMap<i64, JsonValue>) -> JsonValue {
    match json {
        JsonValue::String(s) => match reference(s).and_then(|r| results.get(&r)) {
            Some(v) => v.clone(),
            None => json.clone(),
        },
        JsonValue::Array(items) => {
            JsonValue::Array(items.iter().map(|v| substitute(v, results)).collect())
        }
        JsonValue::Object(map) => JsonValue::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, results)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The arguments of a tool atom, decoded by the parameter types, after substitution.
fn arguments(
    atom: &Atom,
    sig: &ToolSig,
    results: &BTreeMap<i64, JsonValue>,
) -> Result<Vec<Value>, String> {
    sig.params
        .iter()
        .map(|p| {
            let raw = atom
                .input
                .get(&p.name)
                .map(|v| substitute(v, results))
                .unwrap_or(JsonValue::Null);
            value::decode(&p.ty, &raw).map_err(|e| format!("argument `{}`: {e}", p.name))
        })
        .collect()
}

/// An atom's result with the arguments it was called with and the attempts it took,
/// or its error and the attempts.
type AtomOutcome = Result<(Value, Vec<Value>, u32), (String, u32)>;

/// Runs a valid plan: layer by layer, up to `options.width` atoms of a layer at once;
/// stops at the first failing atom (the lowest in plan order within
/// its layer) and runs the compensations of the atoms already done, newest first.
pub fn execute(
    plan: &Plan,
    tools: &[ToolSig],
    host: &dyn ToolHost,
    options: &ExecOptions,
) -> Result<Execution, AtomFailure> {
    execute_observed(plan, tools, host, options, &|_, _| {})
}

/// [`execute`], telling `observe` when each atom starts and how it ends (an editor
/// shows the plan's entries moving).
pub fn execute_observed(
    plan: &Plan,
    tools: &[ToolSig],
    host: &dyn ToolHost,
    options: &ExecOptions,
    observe: &(dyn Fn(i64, AtomStatus) + Sync),
) -> Result<Execution, AtomFailure> {
    let sig = |name: &str| tools.iter().find(|t| t.name == name);
    let mut results: BTreeMap<i64, JsonValue> = BTreeMap::new();
    let mut done: Vec<(i64, Vec<Value>)> = Vec::new();
    let mut runs = Vec::new();
    let mut answer = JsonValue::Null;
    for (layer, members) in layers(plan).into_iter().enumerate() {
        let run_one = |i: usize| -> AtomOutcome {
            let atom = &plan.atoms[i];
            let Some(t) = sig(&atom.name) else {
                return Err((format!("unknown tool `{}`", atom.name), 0));
            };
            let args = match arguments(atom, t, &results) {
                Ok(args) => args,
                Err(e) => return Err((e, 0)),
            };
            observe(atom.id, AtomStatus::Running);
            let mut attempts = 0;
            loop {
                attempts += 1;
                match host.call(t, args.clone()) {
                    Ok(v) => {
                        observe(atom.id, AtomStatus::Done);
                        return Ok((v, args, attempts));
                    }
                    Err(e) if attempts > options.retries => {
                        observe(atom.id, AtomStatus::Failed);
                        return Err((e, attempts));
                    }
                    Err(_) => {}
                }
            }
        };
        let tool_atoms: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| plan.atoms[i].kind == AtomKind::Tool)
            .collect();
        // Each atom is a task (tools may be compiled sap code that recurses: tasks have
        // stacks as big as threads'). Every atom of the layer runs (the first failure in
        // plan order wins).
        let outcomes = crate::tasks::fan_out(
            tool_atoms.len(),
            options.width,
            |k| run_one(tool_atoms[k]),
            |_| false,
        );
        let mut failure = None;
        for (&i, outcome) in tool_atoms.iter().zip(outcomes) {
            let atom = &plan.atoms[i];
            match outcome.unwrap_or_else(|| Err(("the tool panicked".to_owned(), 1))) {
                Ok((v, args, attempts)) => {
                    let json = v.to_json();
                    results.insert(atom.id, json.clone());
                    done.push((atom.id, args));
                    answer = json.clone();
                    runs.push(AtomRun {
                        id: atom.id,
                        layer,
                        attempts,
                        result: json,
                    });
                }
                Err((message, attempts)) if failure.is_none() => {
                    failure = Some(AtomFailure {
                        atom: atom.id,
                        tool: atom.name.clone(),
                        message,
                        attempts,
                        compensated: Vec::new(),
                        compensation_errors: Vec::new(),
                    });
                }
                Err(_) => {}
            }
        }
        if let Some(mut failure) = failure {
            for (id, args) in done.iter().rev() {
                let atom = plan.atoms.iter().find(|a| a.id == *id);
                let Some(undo) = atom
                    .and_then(|a| sig(&a.name))
                    .and_then(|t| t.compensate.as_deref())
                    .and_then(sig)
                else {
                    continue;
                };
                match host.call(undo, args.clone()) {
                    Ok(_) => failure.compensated.push(*id),
                    Err(e) => failure.compensation_errors.push(format!(
                        "compensation `{}` of atom {id} failed: {e}",
                        undo.name
                    )),
                }
            }
            return Err(failure);
        }
        for &i in &members {
            let atom = &plan.atoms[i];
            if atom.kind == AtomKind::Final {
                observe(atom.id, AtomStatus::Done);
                let reported: Vec<JsonValue> = atom
                    .depends_on
                    .iter()
                    .filter_map(|d| results.get(d).cloned())
                    .collect();
                answer = match reported.len() {
                    1 => reported.into_iter().next().unwrap_or(JsonValue::Null),
                    _ => JsonValue::Array(reported),
                };
            }
        }
    }
    Ok(Execution {
        answer,
        atoms: runs,
    })
}
