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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value as JsonValue, json};

use crate::schema;
use crate::types::{ParamDesc, TypeDesc};
use crate::value::{self, Value};

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
    errors.extend(cycles(plan, &by_id));
    errors.sort();
    errors.dedup();
    errors
}

fn ids(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
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

/// The JSON Schema of a plan over `tools`: each tool atom names one of the tools and
/// gives its arguments, each a value of the parameter's type or a `<result_of_N>`
/// reference; one final atom reports.
pub fn plan_schema(tools: &[ToolSig]) -> JsonValue {
    let reference = json!({
        "type": "string",
        "pattern": "^<result_of_[0-9]+>$",
        "description": "The result of an earlier atom, by its id.",
    });
    let id = json!({"type": "integer", "description": "A unique number for this atom."});
    let depends = json!({
        "type": "array",
        "items": {"type": "integer"},
        "description": "The ids of the atoms whose results this atom uses.",
    });
    let mut variants: Vec<JsonValue> = tools
        .iter()
        .map(|t| {
            let args: Vec<(String, JsonValue)> = t
                .params
                .iter()
                .map(|p| {
                    let mut s = schema::schema_of(&p.ty);
                    if let (Some(doc), JsonValue::Object(map)) = (&p.doc, &mut s) {
                        map.insert("description".into(), JsonValue::String(doc.clone()));
                    }
                    (p.name.clone(), json!({"anyOf": [s, reference.clone()]}))
                })
                .collect();
            let mut atom = schema::object(vec![
                ("id".into(), id.clone()),
                ("kind".into(), json!({"type": "string", "enum": ["tool"]})),
                ("name".into(), json!({"type": "string", "enum": [t.name]})),
                ("input".into(), schema::object(args)),
                ("dependsOn".into(), depends.clone()),
            ]);
            if let (Some(doc), JsonValue::Object(map)) = (&t.doc, &mut atom) {
                map.insert("description".into(), JsonValue::String(doc.clone()));
            }
            atom
        })
        .collect();
    let mut report = schema::object(vec![
        ("id".into(), id),
        ("kind".into(), json!({"type": "string", "enum": ["final"]})),
        ("name".into(), json!({"type": "string", "enum": ["report"]})),
        ("dependsOn".into(), depends),
    ]);
    if let JsonValue::Object(map) = &mut report {
        map.insert(
            "description".into(),
            "The last atom: reports the result of the atom it depends on.".into(),
        );
    }
    variants.push(report);
    schema::object(vec![(
        "atoms".into(),
        json!({
            "type": "array",
            "items": {"anyOf": variants},
            "description": "The atoms, each one tool call, ending with the final atom.",
        }),
    )])
}

/// The plan as a Graphviz digraph: an edge from each dependency to its dependent.
pub fn to_dot(plan: &Plan) -> String {
    let mut out = String::from("digraph plan {\n  rankdir=LR;\n");
    for atom in &plan.atoms {
        let shape = if atom.kind == AtomKind::Final {
            "doublecircle"
        } else {
            "box"
        };
        out.push_str(&format!(
            "  a{} [shape={shape}, label=\"{}\"];\n",
            atom.id,
            escape(&label(atom))
        ));
    }
    for atom in &plan.atoms {
        for d in &atom.depends_on {
            out.push_str(&format!("  a{d} -> a{};\n", atom.id));
        }
    }
    out.push_str("}\n");
    out
}

/// The plan as a Mermaid flowchart.
pub fn to_mermaid(plan: &Plan) -> String {
    let mut out = String::from("flowchart LR\n");
    for atom in &plan.atoms {
        // Mermaid has no backslash escapes; a quote is the entity `#quot;`.
        let text = label(atom).replace('"', "#quot;").replace('\n', " ");
        if atom.kind == AtomKind::Final {
            out.push_str(&format!("  a{}((\"{text}\"))\n", atom.id));
        } else {
            out.push_str(&format!("  a{}[\"{text}\"]\n", atom.id));
        }
    }
    for atom in &plan.atoms {
        for d in &atom.depends_on {
            out.push_str(&format!("  a{d} --> a{}\n", atom.id));
        }
    }
    out
}

fn label(atom: &Atom) -> String {
    let args: Vec<String> = atom
        .input
        .iter()
        .map(|(k, v)| format!("{k}={}", short(v)))
        .collect();
    format!("{}: {}({})", atom.id, atom.name, args.join(", "))
}

fn short(v: &JsonValue) -> String {
    match v {
        JsonValue::String(s) => match reference(s) {
            Some(r) => format!("@{r}"),
            None => format!("'{s}'"),
        },
        other => other.to_string(),
    }
}

/// A DOT string body.
fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c == '"' || c == '\\' {
                vec!['\\', c]
            } else if c == '\n' {
                vec!['\\', 'n']
            } else {
                vec![c]
            }
        })
        .collect()
}

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
            let mut attempts = 0;
            loop {
                attempts += 1;
                match host.call(t, args.clone()) {
                    Ok(v) => return Ok((v, args, attempts)),
                    Err(e) if attempts > options.retries => return Err((e, attempts)),
                    Err(_) => {}
                }
            }
        };
        let tool_atoms: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| plan.atoms[i].kind == AtomKind::Tool)
            .collect();
        // Tools may be compiled sap code that recurses: the window's threads have big
        // stacks. Every atom of the layer runs (the first failure in plan order wins).
        let outcomes = crate::window::sliding_window(
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
