//! `saplang._native`: the compiler and runtime in a Python extension, a thin adapter over
//! `session` like `sapc` itself. Python's keyword options become `session::Options`; a
//! program is loaded with every function compiled (`session::load_all`), its host made
//! once, and each call runs with the GIL released, so calls from several Python threads
//! (and from asyncio, through the package's `acall`) run at once. Values cross as JSON:
//! Python's side (`python/saplang/__init__.py`) turns Pydantic models and enums into it
//! and validates results into the generated models.

#![deny(unsafe_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Instant;

use codegen_jit::{BigStacks, ExecError, Host, Tokio};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use runtime::ErrorKind;
use runtime::observe::Cancel;
use serde_json::{Map, Value as JsonValue};
use session::{CallError, Failure, Function, JournalPolicy, Loaded, Options};

/// What every call of a program shares: the program, its host and the tokio runtime its
/// model and tool calls wait on.
struct Shared {
    loaded: Loaded,
    host: Host,
    /// The threads calls run on (a thread per call would cost more than a short call).
    threads: BigStacks,
    _tokio: tokio::runtime::Runtime,
}

/// Threads of ours inside Python right now, and whether the interpreter is closing: a
/// thread that attaches as the interpreter finalizes, or is still attached then, aborts
/// the process (CPython's "PyGILState_Release: thread state must be current"). So
/// `saplang` registers [`close`] with `atexit`: it stops new attaches and waits for those
/// in progress to leave.
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);
static CLOSING: AtomicBool = AtomicBool::new(false);

/// Runs `f` with the GIL from one of our threads, unless the interpreter is closing.
fn attached<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    IN_PYTHON.fetch_add(1, Ordering::SeqCst);
    let outcome = if CLOSING.load(Ordering::SeqCst) {
        None
    } else {
        Python::try_attach(f)
    };
    IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    outcome
}

/// The runtime OpenTelemetry's exporter sends on, for the whole process (programs come
/// and go; the export stays).
static EXPORTING: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();

/// Starts exporting spans over OTLP when `otlp=` (or the `OTEL_EXPORTER_OTLP_*`
/// environment variables) asks for it, once per process: the first program loaded so
/// names the resource.
fn export_spans(py: Python<'_>, options: &Options, path: &std::path::Path) -> PyResult<()> {
    if EXPORTING.get().is_some() || !runtime::telemetry::wanted(options.otlp.as_deref()) {
        return Ok(());
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| raise(py, "SapError", &format!("cannot start the runtime: {e}")))?;
    let handle = tokio.handle().clone();
    let _ = EXPORTING.set(tokio);
    let _entered = handle.enter();
    runtime::telemetry::install(runtime::telemetry::OtlpConfig {
        endpoint: options.otlp.clone(),
        program: path.display().to_string(),
        tokio: handle.clone(),
    })
    .map_err(|e| raise(py, "SapError", &e))
}

/// Called at exit (`atexit`): no thread of ours enters Python from now on, and those
/// inside have left when it returns (or after five seconds); spans left are exported.
#[pyfunction]
fn close(py: Python<'_>) {
    py.detach(|| {
        runtime::telemetry::shutdown(None);
        CLOSING.store(true, Ordering::SeqCst);
        let started = Instant::now();
        while IN_PYTHON.load(Ordering::SeqCst) > 0 && started.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// Waits for a call's outcome with the GIL released, looking at Python's signals every
/// 50 ms: Ctrl-C raises `KeyboardInterrupt` here at once and cancels the call, which
/// stops at the model or tool call it waits for.
fn wait_for(py: Python<'_>, call: Started) -> PyResult<Outcome> {
    use std::sync::mpsc::RecvTimeoutError;
    let Started { mut rx, cancel } = call;
    loop {
        let (got, back) = py.detach(move || {
            let got = rx.recv_timeout(std::time::Duration::from_millis(50));
            (got, rx)
        });
        rx = back;
        match got {
            Ok(outcome) => return Ok(outcome),
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupted) = py.check_signals() {
                    cancel.cancel();
                    return Err(interrupted);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(raise(
                    py,
                    "SapError",
                    "the call ended without an outcome (a panic)",
                ));
            }
        }
    }
}

/// A call started on one of the program's threads: its outcome to come, and its cancel.
struct Started {
    rx: Receiver<Outcome>,
    cancel: Cancel,
}

/// What a call gives back before Python sees it.
type Outcome = Result<JsonValue, CallError>;

impl Shared {
    /// The outcome as Python's result or exception.
    fn to_python(&self, py: Python<'_>, outcome: Outcome) -> PyResult<Py<PyAny>> {
        match outcome {
            Ok(json) => json_to_python(py, &json),
            Err(CallError::Arguments(message)) => Err(raise(py, "SapArgumentError", &message)),
            Err(CallError::Run(e)) => Err(run_error(py, &self.loaded, &e)),
        }
    }
}

/// A context a Python caller keeps between calls and hands to the functions that take
/// one: what it holds (instructions, data) is what the model sees above the callee's
/// own frame.
#[pyclass(frozen, name = "Context", module = "saplang._native")]
struct PyContext {
    inner: runtime::Context,
}

#[pymethods]
impl PyContext {
    #[new]
    fn new() -> PyContext {
        PyContext {
            inner: runtime::Context::new(),
        }
    }

    /// Adds an instruction, as a sap program's `"text"!` does.
    fn instruct(&self, text: &str) {
        self.inner.instruct(text);
    }

    /// Adds data, labelled (`<data from="python" name=LABEL>`), as `value!` does.
    fn add_data(&self, label: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let json = python_to_json(value)?;
        self.inner
            .inject_value(runtime::Value::Json(json.into()), "python", label);
        Ok(())
    }

    /// What the model sees of this context, as sap renders it.
    fn render(&self) -> String {
        self.inner.render()
    }
}

/// A call started by `Program.submit`.
#[pyclass(frozen, name = "Pending", module = "saplang._native")]
struct Pending {
    shared: Arc<Shared>,
    outcome: std::sync::Mutex<Option<Receiver<Outcome>>>,
    cancel: Cancel,
}

#[pymethods]
impl Pending {
    /// Waits (the GIL released) for the call's result, or raises its error.
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let rx = self
            .outcome
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| raise(py, "SapError", "the call's outcome was already taken"))?;
        match py.detach(move || rx.recv()) {
            Ok(outcome) => self.shared.to_python(py, outcome),
            Err(_) => Err(raise(
                py,
                "SapError",
                "the call ended without an outcome (a panic)",
            )),
        }
    }

    /// Cancels the call: it stops at the model or tool call it waits for, and `wait`
    /// raises `SapRuntimeError` (asyncio's `acall` does this when its task is cancelled).
    fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// A loaded program. Its methods are called by `saplang.Program`.
#[pyclass(frozen, name = "Program", module = "saplang._native")]
struct Program {
    shared: Arc<Shared>,
    functions: HashMap<String, Function>,
}

#[pymethods]
impl Program {
    /// Calls `name` with arguments by name (JSON-like values: dicts, lists, strings,
    /// numbers, booleans, None) and returns its result as JSON-like values.
    #[pyo3(signature = (name, arguments, context=None))]
    fn call_json(
        &self,
        py: Python<'_>,
        name: &str,
        arguments: &Bound<'_, PyDict>,
        context: Option<&Bound<'_, PyContext>>,
    ) -> PyResult<Py<PyAny>> {
        let outcome = wait_for(py, self.start(py, name, arguments, context)?)?;
        self.shared.to_python(py, outcome)
    }

    /// Starts `name` on one of the program's threads and returns at once; the call's
    /// outcome is `Pending.wait()`'s. (asyncio's `acall` waits in an executor thread:
    /// sap's own threads never enter Python to hand it over, so none can be inside
    /// Python when the interpreter finalizes.)
    #[pyo3(signature = (name, arguments, context=None))]
    fn submit(
        &self,
        py: Python<'_>,
        name: &str,
        arguments: &Bound<'_, PyDict>,
        context: Option<&Bound<'_, PyContext>>,
    ) -> PyResult<Pending> {
        let started = self.start(py, name, arguments, context)?;
        Ok(Pending {
            shared: self.shared.clone(),
            outcome: std::sync::Mutex::new(Some(started.rx)),
            cancel: started.cancel,
        })
    }

    /// The names of the functions a caller can name, in the program's order.
    fn function_names(&self) -> Vec<String> {
        let mut names: Vec<(&u32, &String)> =
            self.functions.values().map(|f| (&f.id, &f.name)).collect();
        names.sort();
        names.into_iter().map(|(_, n)| n.clone()).collect()
    }

    /// `name`'s parameters (other than its `Context`) by name, each with its JSON
    /// Schema, and its result's schema.
    fn signature(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        let f = self.function(py, name)?;
        let params: Map<String, JsonValue> = f
            .params
            .iter()
            .map(|p| (p.name.clone(), llm::schema::schema_of(&p.ty)))
            .collect();
        let json = serde_json::json!({
            "name": f.name,
            "doc": f.doc,
            "params": params,
            "returns": llm::schema::schema_of(&f.ret),
        });
        json_to_python(py, &json)
    }
}

impl Program {
    /// Starts a call on one of the program's threads; its outcome comes on the channel.
    fn start(
        &self,
        py: Python<'_>,
        name: &str,
        arguments: &Bound<'_, PyDict>,
        context: Option<&Bound<'_, PyContext>>,
    ) -> PyResult<Started> {
        let function = self.function(py, name)?.clone();
        let arguments = match python_to_json(arguments.as_any())? {
            JsonValue::Object(map) => map,
            _ => Map::new(),
        };
        let context = context.map(|c| c.get().inner.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let shared = self.shared.clone();
        let cancel = Cancel::new();
        let own = cancel.clone();
        self.shared.threads.run(Box::new(move || {
            let outcome = runtime::observe::with_call_cancel(Some(own), || {
                shared.loaded.call_on_this_thread(
                    &shared.host,
                    &function,
                    &arguments,
                    context.as_ref(),
                )
            })
            .map(|value| value.to_json());
            let _ = tx.send(outcome);
        }));
        Ok(Started { rx, cancel })
    }

    fn function(&self, py: Python<'_>, name: &str) -> PyResult<&Function> {
        self.functions.get(name).ok_or_else(|| {
            raise(
                py,
                "SapArgumentError",
                &format!("the program has no function `{name}`"),
            )
        })
    }
}

/// Checks and compiles `path` with every function callable, and makes its host from
/// `options` (the keywords of `saplang.load`), with `externs` (name → Python callable)
/// serving the program's `extern fn` declarations of those names.
#[pyfunction]
fn load(
    py: Python<'_>,
    path: PathBuf,
    options: &Bound<'_, PyDict>,
    externs: &Bound<'_, PyDict>,
) -> PyResult<Program> {
    let options = run_options(options)?;
    export_spans(py, &options, &path)?;
    let mut callables: Vec<(String, Arc<Py<PyAny>>)> = Vec::new();
    for (name, callable) in externs.iter() {
        if !callable.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "externs: `{name}` is not callable"
            )));
        }
        callables.push((name.extract()?, Arc::new(callable.unbind())));
    }
    let started = Instant::now();
    let made = py.detach(
        move || -> Result<(Shared, HashMap<String, Function>), Failure> {
            let loaded = session::load_all(&path)?;
            let mut bound = Vec::new();
            for (name, callable) in callables {
                let declared = loaded
                    .module
                    .externs
                    .iter()
                    .find(|e| {
                        e.name == name
                            && matches!(e.binding, None | Some(ir::Binding::Python { .. }))
                    })
                    .ok_or_else(|| {
                        Failure::Error(format!(
                            "externs: the program declares no `extern fn {name}` for a Python \
                         function to serve"
                        ))
                    })?;
                let ret = codegen_jit::type_desc(&loaded.module, &declared.ret);
                bound.push((name, extern_fn(callable, ret)));
            }
            let tokio = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Failure::Error(format!("cannot start the runtime: {e}")))?;
            let handle: Tokio = tokio.handle().clone().into();
            let served: Vec<String> = bound.iter().map(|(name, _)| name.clone()).collect();
            let add = |externs: &mut codegen_jit::Externs| {
                for (name, f) in bound {
                    // The declaration is the signature: the function is Python's to honour,
                    // and its result is decoded as the declared type.
                    externs.register_with(&name, "a Python function", Arc::new(|_, _| true), f);
                }
            };
            let (mut host, _) = loaded.host_with(&options, add, &handle, started)?;
            // What a Python function returns comes from outside the program: labelled
            // like a tool's result, untrusted unless declared `trusted extern fn`.
            for name in &served {
                host.mark_untrusted_results(name, &format!("python:{name}"));
            }
            let functions = loaded
                .module
                .functions
                .iter()
                .filter_map(|f| loaded.function(&host, &f.name))
                .map(|f| (f.name.clone(), f))
                .collect();
            Ok((
                Shared {
                    loaded,
                    host,
                    threads: BigStacks::default(),
                    _tokio: tokio,
                },
                functions,
            ))
        },
    );
    match made {
        Ok((shared, functions)) => Ok(Program {
            shared: Arc::new(shared),
            functions,
        }),
        Err(Failure::Diagnostics(d)) => Err(raise(py, "SapCheckError", d.text().trim_end())),
        Err(Failure::Located(text)) => Err(raise(py, "SapCheckError", text.trim_end())),
        Err(Failure::Error(message)) => Err(raise(py, "SapError", &message)),
    }
}

/// A Python callable as an extern: called (with the GIL) with the arguments as Python
/// values, awaited if it is a coroutine, and its result decoded as the declared type; an
/// exception it raises is the call's error.
fn extern_fn(callable: Arc<Py<PyAny>>, ret: llm::types::TypeDesc) -> codegen_jit::ExternFn {
    Arc::new(move |args: &[runtime::Value]| {
        attached(|py| -> Result<runtime::Value, String> {
            let shown = |e: PyErr| {
                let name = e
                    .get_type(py)
                    .name()
                    .map_or("Exception".into(), |n| n.to_string());
                format!("the Python function raised {name}: {}", e.value(py))
            };
            let values = args
                .iter()
                .map(|v| json_to_python(py, &v.to_json()))
                .collect::<PyResult<Vec<_>>>()
                .map_err(shown)?;
            let result = py
                .import("saplang")
                .and_then(|m| m.getattr("_call_extern"))
                .and_then(|call| call.call1((callable.bind(py), PyTuple::new(py, values)?)))
                .map_err(shown)?;
            let json = python_to_json(&result).map_err(shown)?;
            runtime::value::decode(&ret, &json)
                .map_err(|e| format!("the Python function's result does not fit: {e}"))
        })
        .unwrap_or_else(|| Err("the Python interpreter is shutting down".to_owned()))
    })
}

/// `saplang.load`'s keywords as run options; an unknown one is a `TypeError`.
fn run_options(given: &Bound<'_, PyDict>) -> PyResult<Options> {
    let mut o = Options::default();
    for (key, value) in given.iter() {
        let key: String = key.extract()?;
        if value.is_none() {
            continue;
        }
        let text = || value.extract::<String>();
        let path = || value.extract::<PathBuf>();
        let list = || value.extract::<Vec<String>>();
        match key.as_str() {
            "provider" => o.provider = Some(text()?),
            "model" => o.model = Some(text()?),
            "base_url" => o.base_url = Some(text()?),
            "structured" => o.structured = Some(text()?),
            "replay" => o.replay = Some(path()?),
            "record" => o.record = Some(path()?),
            "trace" => o.trace = Some(path()?),
            "journal" => o.journal = Some(path()?),
            "otlp" => o.otlp = Some(text()?),
            "stream" => o.stream = value.extract()?,
            "temperature" => o.temperature = Some(value.extract()?),
            "seed" => o.seed = Some(value.extract()?),
            "max_calls" => o.max_calls = Some(value.extract()?),
            "max_tokens" => o.max_tokens = Some(value.extract()?),
            "max_time" => o.max_time = Some(value.extract()?),
            "max_depth" => o.max_depth = Some(value.extract()?),
            "max_iterations" => o.max_iterations = Some(value.extract()?),
            "max_model_iterations" => o.max_model_iterations = Some(value.extract()?),
            "context_tokens" => o.context_tokens = Some(value.extract()?),
            "concurrency" => o.concurrency = Some(value.extract()?),
            "allow_read" => o.allow_read = list()?,
            "allow_write" => o.allow_write = list()?,
            "allow_net" => o.allow_net = list()?,
            "allow_run" => o.allow_run = list()?,
            "journal_policy" => {
                o.journal_policy = match text()?.as_str() {
                    "stop" => JournalPolicy::Stop,
                    "rerun-changed" | "rerun_changed" => JournalPolicy::RerunChanged,
                    other => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "journal_policy: `{other}` is neither \"stop\" nor \"rerun-changed\""
                        )));
                    }
                }
            }
            other => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "load() got an unexpected keyword argument '{other}'"
                )));
            }
        }
    }
    Ok(o)
}

/// An instance of `saplang`'s exception class `class`, with `message`.
fn raise(py: Python<'_>, class: &str, message: &str) -> PyErr {
    match py
        .import("saplang._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message,)))
    {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// A run's error as the exception of its kind, with `.location` (`file:line:column`)
/// and `.stack` (the sap call stack, innermost first) set.
fn run_error(py: Python<'_>, loaded: &Loaded, e: &ExecError) -> PyErr {
    let class = match e.kind {
        Some(ErrorKind::Budget) => "SapBudgetError",
        Some(ErrorKind::Cancelled) => "SapCancelledError",
        Some(
            ErrorKind::Provider
            | ErrorKind::InvalidAnswer
            | ErrorKind::Refusal
            | ErrorKind::Truncated
            | ErrorKind::NotRecorded,
        ) => "SapModelError",
        _ if e.message.contains("budget") || e.message.contains("--max-") => "SapBudgetError",
        _ => "SapRuntimeError",
    };
    let text = loaded.located(e, false).to_string();
    let err = raise(py, class, &text);
    let place = |span: ir::SrcSpan| -> Option<String> {
        let (name, text) = loaded.texts.get(span.file as usize)?.as_ref()?;
        let lc = syntax::LineIndex::new(text).line_col(text, span.start);
        Some(format!("{name}:{}:{}", lc.line + 1, lc.col + 1))
    };
    let value = err.value(py);
    let _ = value.setattr("message", &e.message);
    let _ = value.setattr("location", e.span.and_then(place));
    let stack: Vec<(String, Option<String>)> = e
        .stack
        .iter()
        .map(|f| (f.function.clone(), f.span.and_then(place)))
        .collect();
    let _ = value.setattr("stack", stack);
    err
}

fn python_to_json(value: &Bound<'_, PyAny>) -> PyResult<JsonValue> {
    if value.is_none() {
        return Ok(JsonValue::Null);
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(JsonValue::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(n) = value.extract::<i64>() {
            return Ok(n.into());
        }
        return Err(pyo3::exceptions::PyOverflowError::new_err(
            "an integer past 64 bits cannot be a sap value",
        ));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(
            serde_json::Number::from_f64(f.value()).map_or(JsonValue::Null, JsonValue::Number)
        );
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(JsonValue::String(s.to_str()?.to_owned()));
    }
    if let Ok(d) = value.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key: String = k.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err("a mapping's keys must be strings")
            })?;
            map.insert(key, python_to_json(&v)?);
        }
        return Ok(JsonValue::Object(map));
    }
    if let Ok(l) = value.cast::<PyList>() {
        return l.iter().map(|v| python_to_json(&v)).collect();
    }
    if let Ok(t) = value.cast::<PyTuple>() {
        return t.iter().map(|v| python_to_json(&v)).collect();
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "a {} cannot be a sap value (give dicts, lists, strings, numbers, booleans or None)",
        value.get_type().name()?
    )))
}

fn json_to_python(py: Python<'_>, value: &JsonValue) -> PyResult<Py<PyAny>> {
    Ok(match value {
        JsonValue::Null => py.None(),
        JsonValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        JsonValue::Number(n) => match n.as_i64() {
            Some(i) => i.into_pyobject(py)?.into_any().unbind(),
            None => n
                .as_f64()
                .unwrap_or(f64::NAN)
                .into_pyobject(py)?
                .into_any()
                .unbind(),
        },
        JsonValue::String(s) => PyString::new(py, s).into_any().unbind(),
        JsonValue::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_python(py, item)?)?;
            }
            list.into_any().unbind()
        }
        JsonValue::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_python(py, v)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// The program's types and functions as a typed Python module: what `sapc gen python`
/// writes.
#[pyfunction]
fn python_types(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let shown = path.display().to_string();
    let made = py.detach(move || -> Result<String, Failure> {
        let inputs = session::cache::Inputs::read(&path)?;
        let module = session::compile(&session::load_program(&inputs)?)?;
        Ok(session::python::python_module(&module, &shown))
    });
    made.map_err(|failure| match failure {
        Failure::Diagnostics(d) => raise(py, "SapCheckError", d.text().trim_end()),
        other => raise(py, "SapError", &other.to_string()),
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Program>()?;
    m.add_class::<Pending>()?;
    m.add_class::<PyContext>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(python_types, m)?)?;
    m.add_function(wrap_pyfunction!(close, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
