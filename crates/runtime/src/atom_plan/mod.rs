//! Atom of Thought plans: the deterministic half of the `aot` prelude.
//!
//! A plan is the JSON of the Atom-of-Thought paper's agent (REFERENCE.md, "The prelude"):
//!
//! ```json
//! {"atoms": [
//!   {"id": 1, "kind": "tool", "name": "add", "input": {"a": 15, "b": 7}},
//!   {"id": 2, "kind": "tool", "name": "multiply", "input": {"a": "<result_of_1>", "b": 3}},
//!   {"id": 3, "kind": "final", "name": "report", "dependsOn": [2]}
//! ]}
//! ```
//!
//! This module parses such a plan, validates it against the offered tools and reports
//! every defect with the atom it is in, derives the JSON Schema the model writes plans
//! against, orders the atoms in parallel layers, executes them (independent atoms
//! concurrently, per-atom retries, compensations on failure), and draws the plan as DOT
//! or Mermaid. Nothing here calls the model; the tool calls go through a closure, so
//! the same executor serves the JIT, the evaluator and tests.

mod draw;
mod execute;
mod plan_schema;
mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value as JsonValue};

use llm::types::{ParamDesc, TypeDesc};

pub use draw::{to_dot, to_mermaid};
pub use execute::{
    AtomFailure, AtomRun, ExecOptions, Execution, ToolHost, ToolResult, execute, execute_observed,
};
pub use plan_schema::plan_schema;
pub use validate::validate;

/// A tool the plan may use: a sap function or extern with JSON-schema-able parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSig {
    pub name: String,
    pub doc: Option<String>,
    pub params: Vec<ParamDesc>,
    pub ret: TypeDesc,
    /// The tool that undoes this one, called with the same arguments when a later atom
    /// fails.
    pub compensate: Option<String>,
    /// Its `trusted` parameters: a plan may not fill them with a result that carries
    /// untrusted data (REFERENCE.md, "Provenance").
    pub trusted: Vec<String>,
    /// Whether its result carries untrusted data into the atoms that use it.
    pub yields: Yields,
}

/// Whether a tool's result, used by a later atom, counts as untrusted data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Yields {
    /// A `trusted extern fn`, or a host extern: its result is trusted.
    #[default]
    Trusted,
    /// A tool outside the program (MCP, Python), or a sap function whose result the
    /// checker finds untrusted whatever its arguments (it reads such a tool, or asks the
    /// model with such data in context).
    Untrusted,
    /// Any other sap function: its result is as trusted as its arguments.
    FromArguments,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomKind {
    Tool,
    Final,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    pub id: i64,
    pub kind: AtomKind,
    pub name: String,
    pub input: Map<String, JsonValue>,
    /// As written, or inferred from the `<result_of_N>` references when absent.
    pub depends_on: Vec<i64>,
    /// Whether `dependsOn` was written in the plan.
    pub depends_written: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub atoms: Vec<Atom>,
}

/// One defect of a plan, in the atom it is in when it is in one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanError {
    pub atom: Option<i64>,
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.atom {
            Some(id) => write!(f, "atom {id}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

fn defect(atom: Option<i64>, message: impl Into<String>) -> PlanError {
    PlanError {
        atom,
        message: message.into(),
    }
}

/// The atom id in a `<result_of_N>` reference, if `s` is one.
pub fn reference(s: &str) -> Option<i64> {
    s.strip_prefix("<result_of_")?
        .strip_suffix('>')?
        .parse()
        .ok()
}

/// Every `<result_of_N>` in a JSON value, nested anywhere, in order of appearance.
fn references(json: &JsonValue, out: &mut Vec<i64>) {
    match json {
        JsonValue::String(s) => out.extend(reference(s)),
        JsonValue::Array(items) => items.iter().for_each(|v| references(v, out)),
        JsonValue::Object(map) => map.values().for_each(|v| references(v, out)),
        _ => {}
    }
}

impl Atom {
    /// The atoms this one's input refers to, each once, in order of appearance.
    pub fn references(&self) -> Vec<i64> {
        let mut out = Vec::new();
        self.input.values().for_each(|v| references(v, &mut out));
        let mut seen = BTreeSet::new();
        out.retain(|id| seen.insert(*id));
        out
    }
}

/// Reads a plan in the seed's format. Structural problems (not an object, an atom
/// without an id, a `kind` that is neither `tool` nor `final`) are reported for every
/// atom at once.
pub fn parse(json: &JsonValue) -> Result<Plan, Vec<PlanError>> {
    let atoms = match json.get("atoms") {
        Some(JsonValue::Array(atoms)) => atoms,
        Some(_) => return Err(vec![defect(None, "`atoms` must be an array")]),
        None => {
            return Err(vec![defect(
                None,
                "a plan is an object with an `atoms` array",
            )]);
        }
    };
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for (index, raw) in atoms.iter().enumerate() {
        let Some(obj) = raw.as_object() else {
            errors.push(defect(None, format!("atoms[{index}] is not an object")));
            continue;
        };
        let Some(id) = obj.get("id").and_then(JsonValue::as_i64) else {
            errors.push(defect(None, format!("atoms[{index}] has no integer `id`")));
            continue;
        };
        let here = Some(id);
        let kind = match obj.get("kind").and_then(JsonValue::as_str) {
            Some("tool") => AtomKind::Tool,
            Some("final") => AtomKind::Final,
            Some(other) => {
                errors.push(defect(
                    here,
                    format!("`kind` is `{other}`; it must be `tool` or `final`"),
                ));
                continue;
            }
            None => {
                errors.push(defect(here, "has no `kind` (`tool` or `final`)"));
                continue;
            }
        };
        let name = match obj.get("name") {
            Some(JsonValue::String(s)) => s.clone(),
            None if kind == AtomKind::Final => "report".to_owned(),
            _ => {
                errors.push(defect(here, "has no `name` string"));
                continue;
            }
        };
        let input = match obj.get("input") {
            Some(JsonValue::Object(map)) => map.clone(),
            None | Some(JsonValue::Null) => Map::new(),
            Some(_) => {
                errors.push(defect(here, "`input` must be an object"));
                continue;
            }
        };
        let mut atom = Atom {
            id,
            kind,
            name,
            input,
            depends_on: Vec::new(),
            depends_written: false,
        };
        match obj.get("dependsOn") {
            None | Some(JsonValue::Null) => atom.depends_on = atom.references(),
            Some(JsonValue::Array(ids)) => {
                atom.depends_written = true;
                for d in ids {
                    match d.as_i64() {
                        Some(d) => atom.depends_on.push(d),
                        None => errors.push(defect(
                            here,
                            format!("`dependsOn` holds {d}, which is not an atom id"),
                        )),
                    }
                }
            }
            Some(_) => errors.push(defect(here, "`dependsOn` must be an array of atom ids")),
        }
        out.push(atom);
    }
    if errors.is_empty() {
        Ok(Plan { atoms: out })
    } else {
        Err(errors)
    }
}

/// Parses and validates: the plan, or every defect found.
pub fn check(json: &JsonValue, tools: &[ToolSig]) -> Result<Plan, Vec<PlanError>> {
    let plan = parse(json)?;
    let errors = validate(&plan, tools);
    if errors.is_empty() {
        Ok(plan)
    } else {
        Err(errors)
    }
}

/// The atoms in layers that can run together (indices into `plan.atoms`, in plan order
/// within a layer). The plan must be valid (no cycles, no missing atoms).
pub fn layers(plan: &Plan) -> Vec<Vec<usize>> {
    let index: BTreeMap<i64, usize> = plan
        .atoms
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id, i))
        .collect();
    let mut level = vec![usize::MAX; plan.atoms.len()];
    fn level_of(
        i: usize,
        plan: &Plan,
        index: &BTreeMap<i64, usize>,
        level: &mut [usize],
        depth: usize,
    ) -> usize {
        if level[i] != usize::MAX {
            return level[i];
        }
        // A valid plan is acyclic; the depth guard only keeps an invalid one finite.
        if depth > plan.atoms.len() {
            return 0;
        }
        let l = plan.atoms[i]
            .depends_on
            .iter()
            .filter_map(|d| index.get(d))
            .map(|&d| level_of(d, plan, index, level, depth + 1) + 1)
            .max()
            .unwrap_or(0);
        level[i] = l;
        l
    }
    for i in 0..plan.atoms.len() {
        level_of(i, plan, &index, &mut level, 0);
    }
    let count = level.iter().map(|l| l + 1).max().unwrap_or(0);
    let mut out = vec![Vec::new(); count];
    for (i, &l) in level.iter().enumerate() {
        out[l].push(i);
    }
    out
}

/// Atom ids as a list for a message: `1, 2, 3`.
fn ids(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
