//! What a running sap program is given by its host: the module, the LLM runtime, the
//! extern functions, the limits (recursion depth, loop iterations), and where `print`
//! writes. Shared by every execution engine; all the operations that are not arithmetic
//! or control flow live here, once: the LLM call sites in `model_calls`, the standard
//! externs in `standard` (with the tools a plan runs), the host's own externs in
//! `externs`.

mod arguments;
mod externs;
mod model_calls;
mod script;
mod standard;
mod tools;
mod types;

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex, OnceLock};

use std::collections::HashMap;

use ::tools::Tools;
use ir::{self, FuncId, Module, SrcSpan, Type};
use journal::{self, Found, Journal};
use llm::types::TypeDesc;
use runtime::observe::Observer;
use runtime::{ErrorKind, Runtime, RuntimeError, Value};
use syntax::LineIndex;

use self::tools::BoundExtern;
pub use arguments::main_arguments;
pub use externs::{ExternFn, Externs, SignatureCheck, show_type, standard_extern};
pub use script::Coverage;
use script::{Script, Scripted, outcome};
use types::{desc_of, params_of, type_descs};
pub use types::{site_schemas, type_desc};

/// How a builtin calls back into the engine running the program: the `aot` executor
/// runs sap functions offered as tools. Context parameters get a new, empty context.
pub trait Engine: Sync {
    fn call_function(&self, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError>;
}

#[derive(Clone, Debug)]
pub struct Limits {
    /// Nested calls at once; deeper recursion is an error, not a stack overflow.
    pub max_depth: u32,
    /// Loop iterations over the whole run (`while` and `for`).
    pub max_loop_iterations: u64,
    /// Iterations of any one run of a `while` whose condition the model decides.
    pub max_model_iterations: u64,
    /// `parallel for` iterations in flight at once (each a task: see
    /// `runtime::tasks`); model requests are limited apart, adaptively, per provider.
    pub concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 10_000,
            max_loop_iterations: 1_000_000_000,
            max_model_iterations: 100,
            concurrency: llm::limit::DEFAULT_CAP,
        }
    }
}

/// One frame of the sap call stack, for errors.
#[derive(Clone, Debug, PartialEq)]
pub struct StackFrame {
    pub function: String,
    /// Where the call to the next frame is (or the error, for the innermost).
    pub span: Option<SrcSpan>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExecError {
    pub message: String,
    /// Where it happened.
    pub span: Option<SrcSpan>,
    /// Innermost first.
    pub stack: Vec<StackFrame>,
    /// The model's last answer, for LLM failures.
    pub raw_answer: Option<String>,
    /// What kind of model-call failure it is, when it is one (a budget, the provider, an
    /// answer that never fitted, …): what a front end maps to its own error types.
    pub kind: Option<runtime::ErrorKind>,
}

impl ExecError {
    pub fn new(message: impl Into<String>, span: Option<SrcSpan>) -> ExecError {
        ExecError {
            message: message.into(),
            span,
            stack: Vec::new(),
            raw_answer: None,
            kind: None,
        }
    }

    fn from_runtime(e: RuntimeError, span: SrcSpan) -> ExecError {
        ExecError {
            message: e.message,
            span: Some(span),
            stack: Vec::new(),
            raw_answer: e.raw_answer,
            kind: Some(e.kind),
        }
    }
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The tokio runtime model and tool calls wait on: one already running, or one started
/// the first time something waits on it, so a program that calls no model and no tool
/// starts no threads for it (half a millisecond of `sapc run`).
#[derive(Clone)]
pub enum Tokio {
    Running(tokio::runtime::Handle),
    Lazy(Arc<LazyTokio>),
}

/// A tokio runtime built on first use.
pub struct LazyTokio {
    runtime: OnceLock<Result<tokio::runtime::Runtime, String>>,
    build: fn() -> std::io::Result<tokio::runtime::Runtime>,
}

impl Tokio {
    /// A runtime `build` makes the first time it is needed.
    pub fn lazy(build: fn() -> std::io::Result<tokio::runtime::Runtime>) -> Tokio {
        Tokio::Lazy(Arc::new(LazyTokio {
            runtime: OnceLock::new(),
            build,
        }))
    }

    /// The runtime's handle, starting it if it has not started.
    pub fn handle(&self) -> Result<&tokio::runtime::Handle, String> {
        match self {
            Tokio::Running(handle) => Ok(handle),
            Tokio::Lazy(lazy) => lazy
                .runtime
                .get_or_init(|| {
                    (lazy.build)().map_err(|e| format!("cannot start the async runtime: {e}"))
                })
                .as_ref()
                .map(|rt| rt.handle())
                .map_err(Clone::clone),
        }
    }
}

impl From<tokio::runtime::Handle> for Tokio {
    fn from(handle: tokio::runtime::Handle) -> Tokio {
        Tokio::Running(handle)
    }
}

pub struct Host {
    pub module: Arc<Module>,
    /// MCP servers (and standard tools) that bound externs call.
    pub tools: Arc<Tools>,
    /// The bound externs by name, with what their calls convert.
    bound: HashMap<String, BoundExtern>,
    pub runtime: Option<Arc<Runtime>>,
    pub tokio: Tokio,
    pub externs: Externs,
    pub limits: Limits,
    /// The command line's arguments for the program (`sapc run FILE -- ARGS`), which
    /// `main` takes as a `List<String>`.
    pub args: Vec<String>,
    /// Runtime descriptions of the module's types, by `TypeId`.
    pub types: Vec<TypeDesc>,
    output: Mutex<Box<dyn Write + Send>>,
    input: Mutex<Box<dyn BufRead + Send>>,
    /// When the host was made: `clock_ms` counts from here.
    started: std::time::Instant,
    /// Source texts by file, for line and column in LLM call sites.
    /// Each file's text, and its line index once a location in it is asked for.
    lines: Vec<Option<(String, std::sync::OnceLock<LineIndex>)>>,
    /// A durable run's journal (`--journal`): extern calls, `input` and `print` go
    /// through it (model calls go through the runtime's).
    journal: Option<Arc<Journal>>,
    /// Each declared extern's result type, and whether it is `idempotent`.
    declared: HashMap<String, (TypeDesc, bool)>,
    /// Provenance at run time (docs/SECURITY.md): the origin (`heap::origin_id` of its
    /// label) each untrusted extern's results are marked with, and the `trusted`
    /// parameters of each extern that has some (index, name).
    untrusted_results: HashMap<String, u32>,
    trusted_params: HashMap<String, Vec<(usize, String)>>,
    /// Running a test (`sapc test`): the scripted answers its `given`s handed over, and
    /// the outcome of every decision.
    testing: bool,
    script: Mutex<Script>,
    coverage: Mutex<Coverage>,
    /// Told of tool and model calls and plans as they happen (an editor's agent).
    observer: Option<Arc<dyn Observer>>,
}

impl Host {
    pub fn new(
        module: Arc<Module>,
        runtime: Option<Arc<Runtime>>,
        tokio: impl Into<Tokio>,
        externs: Externs,
        limits: Limits,
    ) -> Host {
        let types = type_descs(&module);
        let bound = module
            .externs
            .iter()
            .filter_map(|e| {
                // A Python function is the host's to serve, like any host extern.
                let binding = e
                    .binding
                    .clone()
                    .filter(|b| !matches!(b, ir::Binding::Python { .. }))?;
                Some((
                    e.name.clone(),
                    BoundExtern {
                        binding,
                        params: params_of(&types, &e.params),
                        ret: desc_of(&types, &e.ret),
                    },
                ))
            })
            .collect();
        let declared = module
            .externs
            .iter()
            .map(|e| (e.name.clone(), (desc_of(&types, &e.ret), e.idempotent)))
            .collect();
        let untrusted_results = module
            .externs
            .iter()
            .filter(|e| e.untrusted)
            .filter_map(|e| {
                let label = e.binding.as_ref()?.origin();
                Some((e.name.clone(), crate::heap::origin_id(&label)))
            })
            .collect();
        let trusted_params = module
            .externs
            .iter()
            .filter_map(|e| {
                let trusted: Vec<(usize, String)> = e
                    .params
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.trusted)
                    .map(|(i, p)| (i, p.name.clone()))
                    .collect();
                (!trusted.is_empty()).then(|| (e.name.clone(), trusted))
            })
            .collect();
        Host {
            module,
            tools: Arc::new(Tools::default()),
            bound,
            runtime,
            tokio: tokio.into(),
            externs,
            limits,
            args: Vec::new(),
            types,
            output: Mutex::new(Box::new(std::io::stdout())),
            input: Mutex::new(Box::new(std::io::BufReader::new(std::io::stdin()))),
            started: std::time::Instant::now(),
            lines: Vec::new(),
            journal: None,
            declared,
            untrusted_results,
            trusted_params,
            testing: false,
            script: Mutex::default(),
            coverage: Mutex::default(),
            observer: None,
        }
    }

    /// Tells `observer` of tool and model calls and plans while the run goes on.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Host {
        self.observer = Some(observer);
        self
    }

    pub(crate) fn observer(&self) -> Option<&dyn Observer> {
        self.observer.as_deref()
    }

    /// A host for one test: its `given`s script the model, and a call they do not
    /// answer fails the test unless a provider (or a transcript) is configured.
    pub fn for_test(mut self) -> Host {
        self.testing = true;
        self
    }

    /// The outcomes each decision point had so far (tests record them).
    pub fn coverage(
        &self,
    ) -> std::collections::BTreeMap<ir::SiteId, std::collections::BTreeMap<String, u64>> {
        self.coverage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outcomes
            .clone()
    }

    fn record(&self, site: u32, outcome: String) {
        if self.testing {
            self.coverage
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(site, outcome);
        }
    }

    fn lock_script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The name of a function by id, for messages.
    fn function_name(&self, f: FuncId) -> String {
        self.module
            .functions
            .get(f as usize)
            .map_or_else(|| "?".to_owned(), |f| f.name.clone())
    }

    /// Journals the run's extern calls, `input` and `print` (see the `journal` crate).
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Host {
        self.journal = Some(journal);
        self
    }

    /// Marks what extern `name` returns as untrusted data from `label` (`python:get_mail`):
    /// a front end that serves an extern from outside the program (a Python function)
    /// labels it like a tool's, unless it is declared `trusted extern fn`.
    pub fn mark_untrusted_results(&mut self, name: &str, label: &str) {
        let trusted = self
            .module
            .externs
            .iter()
            .any(|e| e.name == name && e.trusted);
        if !trusted {
            self.untrusted_results
                .insert(name.to_owned(), crate::heap::origin_id(label));
        }
    }

    /// The origin an extern's results are marked with when they are untrusted (that of
    /// `mcp:inbox/read_mail`, say).
    pub fn untrusted_result(&self, name: &str) -> Option<u32> {
        self.untrusted_results.get(name).copied()
    }

    /// The `trusted` parameters of extern `name`, by index, with their names.
    pub fn trusted_params(&self, name: &str) -> &[(usize, String)] {
        self.trusted_params.get(name).map_or(&[], Vec::as_slice)
    }

    /// Records a line in the trace (when there is one).
    pub fn trace(&self, event: &serde_json::Value) {
        self.tools.record(event);
    }

    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref()
    }

    pub fn with_tools(mut self, tools: Arc<Tools>) -> Host {
        self.tools = tools;
        self
    }

    pub fn with_output(mut self, out: Box<dyn Write + Send>) -> Host {
        self.output = Mutex::new(out);
        self
    }

    pub fn with_input(mut self, input: Box<dyn BufRead + Send>) -> Host {
        self.input = Mutex::new(input);
        self
    }

    /// The source texts, by the module's file index, for line and column numbers.
    pub fn with_sources(mut self, sources: Vec<Option<String>>) -> Host {
        self.lines = sources
            .into_iter()
            .map(|s| s.map(|t| (t, std::sync::OnceLock::new())))
            .collect();
        self
    }

    pub fn desc(&self, t: &Type) -> TypeDesc {
        desc_of(&self.types, t)
    }

    /// The file, line and column (1-based; 0 when the source is not known) of `span`.
    pub fn location(&self, span: SrcSpan) -> (String, u32, u32) {
        let file = self
            .module
            .files
            .get(span.file as usize)
            .cloned()
            .unwrap_or_default();
        let (line, column) = match self.lines.get(span.file as usize).and_then(Option::as_ref) {
            Some((text, idx)) => {
                let lc = idx
                    .get_or_init(|| LineIndex::new(text))
                    .line_col(text, span.start);
                (lc.line + 1, lc.col + 1)
            }
            None => (0, 0),
        };
        (file, line, column)
    }

    /// Waits for a model's or a tool's answer: a `parallel for` iteration suspends (its
    /// thread runs the others meanwhile), other code blocks its thread. Engines run on
    /// plain threads, never on a tokio worker. The future is boxed: unboxed,
    /// `block_on` kept an LLM call's kilobyte and a half on a task's stack, twice, and a
    /// suspended iteration touched 8.6 KB of its stack (three pages), not 5 KB (two).
    pub(crate) fn wait<F: std::future::Future + Send>(
        &self,
        f: F,
        span: Option<SrcSpan>,
    ) -> Result<F::Output, ExecError> {
        let tokio = self.tokio.handle().map_err(|e| ExecError::new(e, span))?;
        // The cancel of the call this runs in (`runtime::observe::with_call_cancel`: an
        // editor's turn, a Python call), which stops it here.
        let Some(cancel) = runtime::observe::call_cancel() else {
            return Ok(runtime::tasks::block_on(tokio, Box::pin(f)));
        };
        if cancel.is_cancelled() {
            return Err(cancelled(span));
        }
        let raced = async move {
            tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                out = f => Some(out),
            }
        };
        runtime::tasks::block_on(tokio, Box::pin(raced)).ok_or_else(|| cancelled(span))
    }

    /// The journal a call made now goes through: the run's (`--journal`), else the
    /// journal of the call this thread of control runs (a served invocation's).
    fn call_journal(&self) -> Option<Arc<Journal>> {
        self.journal.clone().or_else(runtime::durable::call_journal)
    }

    /// `file:line:column` of a span, for the journal.
    fn site_text(&self, span: Option<SrcSpan>) -> String {
        span.map(|s| {
            let (file, line, column) = self.location(s);
            format!("{file}:{line}:{column}")
        })
        .unwrap_or_default()
    }

    /// An extern call through the journal, when the run has one: answered from it when
    /// an earlier run journaled the call; otherwise journaled as started (unless the
    /// extern is `idempotent`), called, and its result committed before it is used.
    fn journaled(
        &self,
        name: &str,
        args: &[Value],
        span: Option<SrcSpan>,
        call: impl FnOnce() -> Result<Value, ExecError>,
    ) -> Result<Value, ExecError> {
        let Some(j) = self.call_journal() else {
            return call();
        };
        let (ret, idempotent) = match self.declared.get(name) {
            Some((ret, idempotent)) => (ret.clone(), *idempotent),
            None => (TypeDesc::Json, false),
        };
        let position = runtime::order::next_call();
        let site = self.site_text(span);
        let arguments: Vec<serde_json::Value> = args.iter().map(Value::to_json).collect();
        let request = format!("{name}{}", serde_json::Value::Array(arguments));
        let entry = journal::Call {
            kind: journal::Kind::Extern,
            position: &position,
            name,
            site: &site,
            path: "",
            request: &request,
        };
        let err = |e: journal::JournalError| ExecError::new(e.to_string(), span);
        if let Found::Answer(text) = j.lookup(&entry, idempotent).map_err(err)? {
            let decoded = serde_json::from_str(&text)
                .map_err(|e| e.to_string())
                .and_then(|json| runtime::value::decode(&ret, &json).map_err(|e| e.to_string()));
            return decoded.map_err(|e| {
                ExecError::new(
                    format!("the journaled result of `{name}` no longer reads as its type: {e}"),
                    span,
                )
            });
        }
        if !idempotent {
            j.begin(&entry).map_err(err)?;
        }
        match call() {
            Ok(v) => {
                j.finish(&entry, &v.to_json_string()).map_err(err)?;
                Ok(v)
            }
            Err(e) => {
                // It failed, and the run stops here: the next run calls it again.
                let _ = j.failed(&entry);
                Err(e)
            }
        }
    }

    /// `print` through the journal: a line an earlier run of the journal wrote is not
    /// written again.
    fn print_line(&self, text: &str, span: Option<SrcSpan>) -> Result<(), ExecError> {
        self.journaled_io(journal::Kind::Print, span, || {
            let mut out = self.output.lock().unwrap_or_else(|e| e.into_inner());
            writeln!(out, "{text}")
                .and_then(|_| out.flush())
                .map_err(|e| ExecError::new(format!("cannot print: {e}"), span))?;
            Ok(text.to_owned())
        })
        .map(drop)
    }

    /// `input` through the journal: a line read in an earlier run is not asked again.
    fn input_line(&self, span: Option<SrcSpan>) -> Result<String, ExecError> {
        self.journaled_io(journal::Kind::Input, span, || {
            let mut line = String::new();
            self.input
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .read_line(&mut line)
                .map_err(|e| ExecError::new(format!("cannot read input: {e}"), span))?;
            Ok(line.trim_end_matches(['\n', '\r']).to_owned())
        })
    }

    /// The program's own I/O through the journal, when the run has one: what an earlier
    /// run journaled at this place is given back instead of doing it again; otherwise
    /// `act` runs and what it did is journaled (a printed line without an fsync, an
    /// input line with one).
    fn journaled_io(
        &self,
        kind: journal::Kind,
        span: Option<SrcSpan>,
        act: impl FnOnce() -> Result<String, ExecError>,
    ) -> Result<String, ExecError> {
        let Some(j) = self.call_journal() else {
            return act();
        };
        let position = runtime::order::next_call();
        let site = self.site_text(span);
        let entry = journal::Call {
            kind,
            position: &position,
            name: kind.as_str(),
            site: &site,
            path: "",
            request: "",
        };
        let err = |e: journal::JournalError| ExecError::new(e.to_string(), span);
        if let Found::Answer(done) = j.lookup(&entry, true).map_err(err)? {
            return Ok(done);
        }
        let done = act()?;
        match kind {
            journal::Kind::Print => j.printed(&entry, &done),
            _ => j.finish(&entry, &done),
        }
        .map_err(err)?;
        Ok(done)
    }
}

/// The error of a call stopped by its cancel.
fn cancelled(span: Option<SrcSpan>) -> ExecError {
    ExecError {
        kind: Some(ErrorKind::Cancelled),
        ..ExecError::new("the run was cancelled", span)
    }
}

/// A JSON value for an error message, shortened.
fn truncated(j: &serde_json::Value) -> String {
    let text = j.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// How `print` and `to_string` show a value: strings as they are, the rest as JSON.
pub fn display(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        // A `Json` string is a string too.
        Value::Json(j) if j.is_string() => j.as_str().unwrap_or_default().to_owned(),
        Value::Unit => "()".to_owned(),
        Value::Float(x) => {
            if x.fract() == 0.0 && x.is_finite() && x.abs() < 1e15 {
                format!("{x:.1}")
            } else {
                format!("{x}")
            }
        }
        other => other.to_json_string(),
    }
}

/// The error of an index outside a list, for every engine and path.
pub(crate) fn out_of_range(index: i64, len: usize) -> String {
    format!("index {index} is out of range for a list of {len} elements")
}
