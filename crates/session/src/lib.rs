//! The one way in for every front end (`sapc run`, `sapc test`, `sapc mcp serve`, and
//! those to come: an editor's agent, a durable service, a Python module): typed
//! [`Options`] in, a program loaded from its files, checked, lowered and compiled out
//! ([`load`] to run `main`, [`load_all`] to call any function, [`load_exports`] to serve
//! the `export fn`s; [`Loaded`]), and the host it runs in — externs, budgets, the trace, MCP
//! tools, grants and the model's runtime — from the options and `sap.toml`
//! ([`Loaded::host`]); any of its functions called with JSON arguments by name
//! ([`Loaded::call`]).
//!
//! A front end is a thin adapter: it turns its own input (flags, a request, keyword
//! arguments) into [`Options`] and arguments, and the outcome into its own output.
//! Nothing here prints: diagnostics and errors come back as values ([`Failure`]) whose
//! text is what `sapc` prints.

#![forbid(unsafe_code)]

pub mod cache;
pub mod config;
mod loaded;
mod options;
mod providers;
pub mod python;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::journal::{self, Journal};
use codegen_jit::{ExecError, Externs, Host, Limits, Tokio};
use ir::{Binding, Module};
use runtime::trace::TraceSink;
use runtime::{Budgets, Runtime, RuntimeConfig};
use tools::Tools;
use tools::lock::ToolLock;
use tools::mcp::McpServer;
use tools::standard::Grants;

pub use config::{Config, load_config, read_config};
pub use loaded::{
    CallError, Engine, Function, Loaded, Timings, arguments_of, load, load_all, load_exports,
    load_ignoring_provenance,
};
pub use options::{JournalPolicy, Options};
pub use providers::transcript_beside;
use render::{Printer, SourceText};

/// Why a program could not be loaded or run.
#[derive(Debug)]
pub enum Failure {
    /// The program does not check: its diagnostics, file by file.
    Diagnostics(Diagnostics),
    /// An error located in the program (a declaration the host cannot serve, a runtime
    /// error), rendered with its place and the sap call stack.
    Located(String),
    /// Anything else: a file that cannot be read, a bad option, a server that cannot be
    /// reached.
    Error(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Diagnostics(d) => f.write_str(d.text().trim_end()),
            Failure::Located(text) | Failure::Error(text) => f.write_str(text.trim_end()),
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Error(message)
    }
}

/// A program's diagnostics (errors and the warnings beside them), as `sapc check`
/// prints them.
#[derive(Debug)]
pub struct Diagnostics {
    files: Vec<(SourceText, Vec<syntax::Diagnostic>)>,
}

impl Diagnostics {
    /// Printed to standard error, coloured where it is a terminal.
    pub fn print(&self) {
        let mut printer = Printer::new(render::Format::Human);
        for (source, diagnostics) in &self.files {
            printer.print(source, diagnostics);
        }
    }

    /// The same text, without colour: each diagnostic with its file, line and column.
    pub fn text(&self) -> String {
        let printer = Printer::plain();
        let mut out = String::new();
        for (source, diagnostics) in &self.files {
            for d in diagnostics {
                out.push_str(&printer.human(source, d));
                out.push('\n');
            }
        }
        out
    }
}

/// What the standard tools may touch: the flags' grants (relative to the current
/// directory) and sap.toml's (relative to its folder).
fn grants(args: &Options, config: &Config) -> Result<Grants, String> {
    let mut g = Grants::default();
    let here = Path::new(".");
    let p = &config.permissions;
    for (list, flags, configured) in [
        (&mut g.read, &args.allow_read, &p.read),
        (&mut g.write, &args.allow_write, &p.write),
    ] {
        for dir in flags {
            Grants::add_dir(list, dir, here)?;
        }
        for dir in configured {
            Grants::add_dir(list, dir, &config.dir)?;
        }
    }
    for host in args.allow_net.iter().chain(&p.net) {
        g.add_net(host)?;
    }
    g.run.extend(args.allow_run.iter().chain(&p.run).cloned());
    Ok(g)
}

/// The externs `sapc` gives a program (the calculator's), checked against its
/// declarations: a declaration the host cannot serve is an error at it.
pub fn checked_externs(module: &ir::Module) -> Result<Externs, ExecError> {
    checked_externs_with(module, |_| {})
}

/// [`checked_externs`] with a front end's own externs (a Python callable, say),
/// registered by `add` after the calculator's, so one of the same name wins.
pub fn checked_externs_with(
    module: &ir::Module,
    add: impl FnOnce(&mut Externs),
) -> Result<Externs, ExecError> {
    let mut externs = Externs::default().with_calculator();
    add(&mut externs);
    externs.check(module)?;
    Ok(externs)
}

/// The host a program runs in: externs, limits and budgets, the trace, the MCP servers
/// and grants of its tools, and the LLM runtime when it calls the model.
// What a host is made of is this many things; a struct of them would only be unpacked.
#[allow(clippy::too_many_arguments)]
pub fn host_for(
    file: &Path,
    args: &Options,
    config: &Config,
    module: Arc<ir::Module>,
    externs: Externs,
    client: Option<Arc<dyn tools::client::Client>>,
    calls_model: bool,
    started: Instant,
    tokio: &Tokio,
) -> Result<(Host, Option<Arc<Runtime>>), String> {
    let budgets = Budgets {
        max_calls: args.max_calls.or(config.budgets.max_calls),
        max_tokens: args.max_tokens.or(config.budgets.max_tokens),
        max_wall_time: args
            .max_time
            .or(config.budgets.max_time_seconds)
            .map(|s| Duration::from_secs_f64(s.max(0.0))),
    };
    let trace = match &args.trace {
        Some(path) => Some(TraceSink::new(Box::new(
            std::fs::File::create(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?,
        ))),
        None => None,
    };
    let journal = match &args.journal {
        Some(path) => {
            let program = std::fs::canonicalize(file)
                .unwrap_or_else(|_| file.to_owned())
                .display()
                .to_string();
            let policy = match args.journal_policy {
                JournalPolicy::Stop => journal::Policy::Stop,
                JournalPolicy::RerunChanged => journal::Policy::RerunChanged,
            };
            Some(Arc::new(
                Journal::open(path, &program, policy).map_err(|e| e.to_string())?,
            ))
        }
        None => None,
    };
    let deadline = budgets.max_wall_time.map(|d| started + d);
    let mut tools =
        tools_for(&module, config, trace.clone(), deadline)?.with_grants(grants(args, config)?);
    if let Some(client) = client {
        tools = tools.with_client(client);
    }
    let runtime = if calls_model {
        let provider = {
            let _guard = tokio.handle()?.enter();
            crate::providers::provider(file, args, config)?
        };
        let mut rt = Runtime::new(
            provider,
            RuntimeConfig {
                budgets,
                max_reasks: 2,
            },
        );
        if let Some(trace) = &trace {
            rt = rt.with_trace(trace.clone());
        }
        if let Some(journal) = &journal {
            rt = rt.with_journal(journal.clone());
        }
        Some(Arc::new(rt))
    } else {
        None
    };
    let defaults = Limits::default();
    let limits = Limits {
        max_depth: args
            .max_depth
            .or(config.budgets.max_depth)
            .unwrap_or(defaults.max_depth),
        max_loop_iterations: args
            .max_iterations
            .or(config.budgets.max_iterations)
            .unwrap_or(defaults.max_loop_iterations),
        max_model_iterations: args
            .max_model_iterations
            .or(config.budgets.max_model_iterations)
            .unwrap_or(defaults.max_model_iterations),
        concurrency: args
            .concurrency
            .or(config.provider.concurrency)
            .unwrap_or(match &runtime {
                // Iterations one after another, so the calls come in program order.
                Some(rt) if rt.in_order() => 1,
                _ => defaults.concurrency,
            })
            .max(1),
    };
    let mut host = Host::new(module, runtime.clone(), tokio.clone(), externs, limits)
        .with_tools(Arc::new(tools));
    if let Some(journal) = journal {
        host = host.with_journal(journal);
    }
    Ok((host, runtime))
}

/// A program: its main file and the modules beside it that it uses (`use m` or `m::`
/// names `m.sap` in the same directory), transitively; a module there shadows a prelude
/// module of the same name.
pub struct Program {
    pub main: SourceText,
    pub modules: Vec<SourceText>,
    /// The database the files were loaded into (with the prelude), and each file's
    /// handle in the order of [`Program::files`].
    db: hir::Database,
    handles: Vec<hir::SourceFile>,
}

impl Program {
    /// The main file first: its `main` is the one that runs.
    fn files(&self) -> impl Iterator<Item = &SourceText> {
        std::iter::once(&self.main).chain(&self.modules)
    }
}

/// Reads the program and the modules beside it that it names, directly or through
/// another of them (`hir::items::named_modules`, the checker's own rule), from the files
/// `inputs` read; a module beside it that nothing names stays out, even a broken one.
pub fn load_program(inputs: &cache::Inputs) -> Result<Program, Failure> {
    let (path, bytes) = inputs.program();
    let main = SourceText::new(path.display().to_string(), bytes.to_vec());
    // Each sibling `m.sap` once, by module name; taken out of the map when used.
    let mut siblings: BTreeMap<String, &(PathBuf, Result<Vec<u8>, String>)> = inputs.files[1..]
        .iter()
        .filter_map(|file| Some((file.0.file_stem()?.to_str()?.to_owned(), file)))
        .collect();
    let mut db = hir::Database::default();
    db.add_prelude();
    let handles = vec![db.add_file(main.name.clone(), main.text.clone())];
    let mut program = Program {
        main,
        modules: Vec::new(),
        db,
        handles,
    };
    // The main file, then each module as it is brought in, names further modules.
    let mut scanned = 0;
    while scanned < program.handles.len() {
        let named = hir::items::named_modules(&program.db, program.handles[scanned]).clone();
        scanned += 1;
        for name in named {
            if let Some((path, bytes)) = siblings.remove(&name) {
                let source = SourceText::new(path.display().to_string(), bytes.clone()?);
                let handle = program
                    .db
                    .add_file(source.name.clone(), source.text.clone());
                program.handles.push(handle);
                program.modules.push(source);
            }
        }
    }
    for source in program.files() {
        if source.invalid_utf8_at.is_some() {
            return Err(Failure::Diagnostics(Diagnostics {
                files: vec![(source.clone(), source.utf8_diagnostics())],
            }));
        }
    }
    Ok(program)
}

/// Checks and lowers a program; a program with errors gives its diagnostics (the
/// warnings of its files with errors among them) instead of a module.
pub fn compile(program: &Program) -> Result<ir::Module, Failure> {
    compile_with(program, lower::lower_workspace)
}

/// [`compile`] for `sapc test`: the tests lowered too (`lower::lower_tests`).
pub fn compile_tests(program: &Program) -> Result<ir::Module, Failure> {
    compile_with(program, lower::lower_tests)
}

/// [`compile`] for `sapc run --unsafe-ignore-provenance`: the checker's E0134 does
/// not stop the program, and every `trusted` mark is forgotten, so the run refuses
/// nothing on provenance either. Gives the module and the errors ignored, as warnings.
pub fn compile_ignoring_provenance(
    program: &Program,
) -> Result<(ir::Module, Diagnostics), Failure> {
    const IGNORED: &[&str] = &[hir::diagnostics::UNTRUSTED_ARGUMENT];
    let db = &program.db;
    let (mut files, mut ignored) = (Vec::new(), Vec::new());
    for (source, &file) in program.files().zip(&program.handles) {
        let diagnostics = hir::check_file(db, file).clone();
        if diagnostics
            .iter()
            .any(|d| d.is_error() && !IGNORED.contains(&d.code))
        {
            files.push((source.clone(), diagnostics));
            continue;
        }
        let mut warned: Vec<syntax::Diagnostic> = diagnostics
            .into_iter()
            .filter(|d| IGNORED.contains(&d.code))
            .collect();
        for d in &mut warned {
            d.severity = syntax::Severity::Warning;
        }
        if !warned.is_empty() {
            ignored.push((source.clone(), warned));
        }
    }
    if !files.is_empty() {
        return Err(Failure::Diagnostics(Diagnostics { files }));
    }
    let mut module = lower::lower_workspace_ignoring(db, IGNORED)
        .ok_or_else(|| Failure::Error("the program does not check".to_owned()))?;
    module.strip_trust();
    Ok((module, Diagnostics { files: ignored }))
}

fn compile_with(
    program: &Program,
    lower: fn(&hir::Database) -> Option<ir::Module>,
) -> Result<ir::Module, Failure> {
    let db = &program.db;
    let mut files = Vec::new();
    for (source, &file) in program.files().zip(&program.handles) {
        let diagnostics = hir::check_file(db, file).clone();
        if diagnostics.iter().any(|d| d.is_error()) {
            files.push((source.clone(), diagnostics));
        }
    }
    if !files.is_empty() {
        return Err(Failure::Diagnostics(Diagnostics { files }));
    }
    lower(db).ok_or_else(|| Failure::Error("the program does not check".to_owned()))
}

/// The name and text of each file of the module, by its index: the program's own files
/// and the prelude modules it uses.
pub fn file_texts(module: &ir::Module, inputs: &cache::Inputs) -> Vec<Option<(String, String)>> {
    module
        .files
        .iter()
        .map(|name| {
            if let Some((_, Ok(bytes))) = inputs
                .files
                .iter()
                .find(|(path, _)| path.display().to_string() == *name)
            {
                // Checked as UTF-8 first: much faster than the lossy conversion,
                // which only a file that is not UTF-8 needs.
                let text = match std::str::from_utf8(bytes) {
                    Ok(text) => text.to_owned(),
                    Err(_) => String::from_utf8_lossy(bytes).into_owned(),
                };
                return Some((name.clone(), text));
            }
            hir::prelude_source(name).map(|text| (name.clone(), text.to_owned()))
        })
        .collect()
}

/// The MCP servers `module`'s bound externs call, from sap.toml, each expecting the tools
/// the program uses (compared with sap.lock when it connects).
pub fn tools_for(
    module: &Module,
    config: &Config,
    trace: Option<TraceSink>,
    deadline: Option<Instant>,
) -> Result<Tools, String> {
    // Only the tools the code uses are looked for on their servers.
    let used = module.used_externs();
    let mut wanted: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for e in module
        .externs
        .iter()
        .filter(|e| used.contains(e.name.as_str()))
    {
        if let Some(Binding::Mcp { server, tool }) = &e.binding {
            if !config.mcp.contains_key(server) {
                return Err(format!(
                    "`{}` is bound to MCP server `{server}`, but {} has no [mcp.{server}] table",
                    e.name,
                    config.dir.join("sap.toml").display()
                ));
            }
            wanted
                .entry(server.as_str())
                .or_default()
                .insert(tool.clone());
        }
    }
    let mut tools = Tools::default()
        .with_deadline(deadline)
        .with_trace(trace.clone());
    if wanted.is_empty() {
        return Ok(tools);
    }
    let lock = ToolLock::read(&config.dir.join("sap.lock"))?;
    for (server, declared) in wanted {
        let s = McpServer::new(server, config.mcp[server].clone(), &config.dir)
            .expecting(declared, &lock)
            .with_trace(trace.clone());
        tools.add_server(s);
    }
    Ok(tools)
}
