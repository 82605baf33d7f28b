//! What a front end is told while a run goes on, and how it stops one.
//!
//! An editor's agent (`sapc acp`) shows each tool call with its arguments and result,
//! each model call as a short status, and an Atom-of-Thought plan whose entries move as
//! its atoms run — while the run goes on, not at its end. The host calls an
//! [`Observer`] at each of those points; a run without one pays a branch.
//!
//! A call run under a [`Cancel`] ([`with_call_cancel`]) stops, once it is cancelled, at
//! the model or tool call it waits for (the call in flight is dropped: its HTTP request
//! closed, its process killed, its MCP server told), with an error of kind `Cancelled`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as JsonValue;

pub use tokio_util::sync::CancellationToken as Cancel;

/// What a tool call does, as an editor groups them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    /// Reads files or lists folders (`fs::read`, `fs::list`).
    Read,
    /// Changes files (`fs::write`).
    Edit,
    /// Runs a program (`process::run`).
    Execute,
    /// Reaches the network (`http::get`, `http::post`).
    Fetch,
    /// Anything else: an MCP server's tool, a function of the host.
    Other,
}

/// Where in the program something happens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    pub file: String,
    /// One-based; 0 when unknown.
    pub line: u32,
    /// The sap function it is in.
    pub function: String,
}

/// A tool call that starts.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// Unique in the process.
    pub id: u64,
    /// The extern's name in the program (`read_file`, `fs::read`).
    pub name: String,
    /// What it is bound to (`mcp:files/read`, `std:fs/read`), or `host`.
    pub source: String,
    pub kind: ToolKind,
    /// The arguments by parameter name.
    pub arguments: JsonValue,
    /// The files it touches, when it is a standard file tool.
    pub paths: Vec<String>,
    pub place: Option<Place>,
}

/// A model call that starts: what is being decided, and where.
#[derive(Clone, Debug)]
pub struct ModelCall {
    pub id: u64,
    /// `produce`, `fill_args`, `choose` or `decide`.
    pub kind: &'static str,
    /// What is asked: the function whose result is produced, the condition decided.
    pub subject: String,
    pub place: Place,
}

/// How far an atom of a plan is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomStatus {
    Pending,
    Running,
    Done,
    Failed,
}

/// What a front end is told during a run. Every method has an empty default.
pub trait Observer: Send + Sync {
    fn tool_started(&self, _call: &ToolCall) {}
    /// The call `id` ended: its result as JSON, or why it failed.
    fn tool_finished(&self, _id: u64, _outcome: Result<&JsonValue, &str>) {}
    fn model_started(&self, _call: &ModelCall) {}
    fn model_finished(&self, _id: u64, _outcome: Result<&JsonValue, &str>) {}
    /// A checked plan about to run: each atom's id and a one-line description.
    fn plan(&self, _atoms: &[(i64, String)]) {}
    fn atom(&self, _id: i64, _status: AtomStatus) {}
}

thread_local! {
    /// The cancel of the call this thread of control runs, when its caller gave one
    /// ([`with_call_cancel`]); a fan-out's tasks carry their caller's (`tasks`).
    static CALL_CANCEL: RefCell<Option<Cancel>> = const { RefCell::new(None) };
}

/// Runs `f` (a call of a program's function) with `cancel` as the call's own: the host
/// stops the call when it is cancelled, whichever thread its iterations run on — one
/// call among several a host runs at once (a Python program's).
pub fn with_call_cancel<T>(cancel: Option<Cancel>, f: impl FnOnce() -> T) -> T {
    let before = CALL_CANCEL.with(|c| c.replace(cancel));
    let out = f();
    CALL_CANCEL.with(|c| *c.borrow_mut() = before);
    out
}

/// The cancel of the call this thread of control runs, if it has one.
pub fn call_cancel() -> Option<Cancel> {
    CALL_CANCEL.with(|c| c.borrow().clone())
}

/// Exchanges this thread's call cancel with `saved` (a suspended task's, kept aside).
pub fn swap_call_cancel(saved: &mut Option<Cancel>) {
    CALL_CANCEL.with(|c| std::mem::swap(&mut *c.borrow_mut(), saved));
}

/// A new id for a tool or model call.
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
