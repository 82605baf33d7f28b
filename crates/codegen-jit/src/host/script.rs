//! A test's scripted model (`sapc test`): the answers its `given`s hand over, asked for
//! before the model, and the outcomes of every decision, for coverage.
//!
//! - `given f(…) => answer` registers a stub: every call of `f` is answered by calling
//!   the outlined answer with `f`'s arguments.
//! - `given f { … }` queues answers for the decisions made in `f`'s source, each used
//!   once, in order: a value of `f`'s result, a `select` clause by the function it calls
//!   (with its arguments), or the `_` arguments of a call.

use std::collections::{BTreeMap, HashMap, VecDeque};

use ir::{FuncId, SiteId};
use runtime::Value;

/// A scripted `select` or `fill`: the callee, and each argument by parameter name.
pub(super) type ScriptedCall = (String, Vec<(String, Value)>);

/// One queued answer.
#[derive(Clone, Debug)]
pub(super) enum Scripted {
    Value(Value),
    /// `select g(…)` or `fill g(…)`: the callee's name and each argument by parameter.
    Call {
        select: bool,
        callee: String,
        args: Vec<(String, Value)>,
    },
}

#[derive(Default)]
pub(super) struct Script {
    stubs: HashMap<FuncId, FuncId>,
    queues: HashMap<FuncId, VecDeque<Scripted>>,
    /// How many answers each function's queue has given, for messages.
    used: HashMap<FuncId, usize>,
}

impl Script {
    pub(super) fn stub(&mut self, function: FuncId, stub: FuncId) {
        self.stubs.insert(function, stub);
    }

    pub(super) fn push(&mut self, function: FuncId, answer: Scripted) {
        self.queues.entry(function).or_default().push_back(answer);
    }

    pub(super) fn stub_of(&self, function: FuncId) -> Option<FuncId> {
        self.stubs.get(&function).copied()
    }

    /// The next queued answer of `function` if it is a value.
    pub(super) fn next_value(&mut self, function: FuncId) -> Option<Value> {
        let queue = self.queues.get_mut(&function)?;
        if let Some(Scripted::Value(_)) = queue.front() {
            *self.used.entry(function).or_default() += 1;
            if let Some(Scripted::Value(v)) = queue.pop_front() {
                return Some(v);
            }
        }
        None
    }

    /// The next queued answer of `function` if it is a `select` (or a `fill`) of one of
    /// `callees`; `Err` describes what the queue holds instead.
    pub(super) fn next_call(
        &mut self,
        function: FuncId,
        select: bool,
        callees: &[&str],
    ) -> Result<Option<ScriptedCall>, String> {
        let Some(queue) = self.queues.get_mut(&function) else {
            return Ok(None);
        };
        match queue.front() {
            None => Ok(None),
            Some(Scripted::Call {
                select: s, callee, ..
            }) if *s == select && callees.iter().any(|c| short(c) == callee) => {
                *self.used.entry(function).or_default() += 1;
                match queue.pop_front() {
                    Some(Scripted::Call { callee, args, .. }) => Ok(Some((callee, args))),
                    _ => Ok(None),
                }
            }
            Some(other) => Err(match other {
                Scripted::Value(_) => "a value of the function's result".to_owned(),
                Scripted::Call { select, callee, .. } => {
                    format!("`{} {callee}(…)`", if *select { "select" } else { "fill" })
                }
            }),
        }
    }

    /// How many of `function`'s answers were used.
    pub(super) fn used(&self, function: FuncId) -> usize {
        self.used.get(&function).copied().unwrap_or(0)
    }
}

/// A callee as a script names it: its own name, without a module.
pub(super) fn short(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// Which outcomes each decision point had: `true`/`false`, an enum variant, `some` or
/// `none`, a `select` clause, or `answered`.
#[derive(Default)]
pub struct Coverage {
    /// How often each outcome was seen, by site.
    pub outcomes: BTreeMap<SiteId, BTreeMap<String, u64>>,
}

impl Coverage {
    pub(super) fn record(&mut self, site: SiteId, outcome: String) {
        *self
            .outcomes
            .entry(site)
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }
}

/// The outcome a value of a decision stands for.
pub(super) fn outcome(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Enum { ty, variant } => ty
            .variants
            .get(*variant as usize)
            .map_or_else(|| variant.to_string(), |v| v.name.clone()),
        Value::Option(Some(_)) => "some".to_owned(),
        Value::Option(None) => "none".to_owned(),
        _ => "answered".to_owned(),
    }
}
