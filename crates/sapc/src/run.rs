//! `sapc run`: check, lower and execute a program's `main`, with the provider
//! (`providers.rs`), budgets, trace and transcripts chosen by flags, environment and
//! `sap.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use codegen_jit::{Evaluator, ExecError, Externs, Host, Limits, Tokio, on_big_stack};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, SourceSpan};
use runtime::journal::{self, Journal};
use runtime::trace::TraceSink;
use runtime::{Budgets, Runtime, RuntimeConfig, Value};

use crate::config::{Config, load_config};
use crate::render::{Printer, SourceText};
use crate::{cache, exit};
use runtime::tools::standard::Grants;

#[derive(clap::Args, Debug, Default)]
pub struct RunArgs {
    /// The program; its `main` runs.
    pub file: PathBuf,
    /// Arguments for the program, after `--`, for `main`'s parameters other than its
    /// `Context`, in order: a `String` as it is, other types as JSON, a last
    /// `List<String>` all that are left.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
    /// `openai` (any OpenAI-compatible server), `ollama`, `llamacpp`, `vllm`,
    /// `lmstudio` (OpenAI-compatible at their usual local address), `anthropic`,
    /// `gemini`, `local` (a GGUF model in this process: `--model PATH.gguf`, built with
    /// the feature `local`; a run's first prompt is kept for the next run in
    /// `SAP_LOCAL_KV_CACHE`, default `~/.cache/sap/local-kv`, `0` for none), `replay` or
    /// `interactive`.
    #[arg(long)]
    pub provider: Option<String>,
    /// How to ask an OpenAI-compatible server for the answer's shape: `json_schema`,
    /// `json_object`, `tools` or `prompt` (default: the best the server accepts, found
    /// by stepping down and remembered per server in the build cache's directory).
    #[arg(long, value_name = "RUNG")]
    pub structured: Option<String>,
    /// The model name sent to the provider.
    #[arg(long)]
    pub model: Option<String>,
    /// The provider's base URL (default: `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` /
    /// `GEMINI_BASE_URL`, else the vendor's API).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Answer from this transcript, with no network.
    #[arg(long, value_name = "TRANSCRIPT")]
    pub replay: Option<PathBuf>,
    /// Record every request and answer of the run to this transcript.
    #[arg(long, value_name = "TRANSCRIPT")]
    pub record: Option<PathBuf>,
    /// Write one JSON line per LLM call to this file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Stream answers (OpenAI-compatible servers; the default for every server but
    /// OpenAI's API, `stream = false` in sap.toml turns it off).
    #[arg(long)]
    pub stream: bool,
    /// The most model calls the run may make, re-asks included [default: no limit]
    /// (also `max_calls` under [budgets] in sap.toml).
    #[arg(long, value_name = "N")]
    pub max_calls: Option<u64>,
    /// The most tokens, prompt and answer together, the run's model calls may use
    /// [default: no limit] (also `max_tokens` under [budgets]).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Wall-time budget in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub max_time: Option<f64>,
    /// The deepest the program's calls may nest; deeper recursion is a located error,
    /// never a stack overflow [default: 10000] (also `max_depth` under [budgets]).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<u32>,
    /// The most loop iterations (`while` and `for`) over the whole run
    /// [default: 1000000000] (also `max_iterations` under [budgets]).
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u64>,
    /// Iterations of one run of a `while` whose condition the model decides [default: 100].
    #[arg(long, value_name = "N")]
    pub max_model_iterations: Option<u64>,
    /// Let the standard tools (`fs::read`, `fs::list`) read inside DIR (repeatable).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub allow_read: Vec<String>,
    /// Let `fs::write` write inside DIR (repeatable).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub allow_write: Vec<String>,
    /// Let `http::get` and `http::post` reach HOST, or only HOST:PORT (repeatable).
    #[arg(long, value_name = "HOST[:PORT]", value_delimiter = ',')]
    pub allow_net: Vec<String>,
    /// Let `process::run` run PROGRAM, named as the program names it (repeatable).
    #[arg(long, value_name = "PROGRAM", value_delimiter = ',')]
    pub allow_run: Vec<String>,
    /// The most LLM calls and `parallel for` iterations in flight at once [default:
    /// adaptive — model calls start at 256 at once per provider, grow while answers come
    /// back at the usual latency, back off on 429/503, time-outs and a queue at the
    /// server (streamed answers starting later and later), up to 1024; iterations:
    /// 1024; with `--provider local` or `interactive`, 1: iterations run in order, so the
    /// in-process model's run repeats exactly and a person is asked in the program's
    /// order]. Setting it starts model calls at N and caps both at N (also
    /// `concurrency` under [provider] in sap.toml).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Print the run's counters (calls, tokens, time) to standard error.
    #[arg(long)]
    pub stats: bool,
    /// `jit` (native code, the default) or `eval` (the reference evaluator).
    #[arg(long, default_value = "jit")]
    pub engine: String,
    /// Make the run durable: journal each model call, extern call, `input` and `print`
    /// to this SQLite file, committed before it is used. The same command after a crash
    /// resumes: journaled calls are answered from the journal, printed lines are not
    /// printed again.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// When a resumed run's program no longer matches its journal: `stop` and name the
    /// first call that diverges, or `rerun-changed` to call again from there.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = JournalPolicy::Stop, requires = "journal")]
    pub journal_policy: JournalPolicy,
    /// Export OpenTelemetry spans over OTLP/HTTP to this collector (e.g.
    /// `http://localhost:4318`): one per call of a function with a context, per model
    /// call (GenAI conventions) and per extern call. Without it,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns
    /// export on.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JournalPolicy {
    #[default]
    Stop,
    RerunChanged,
}

/// What the standard tools may touch: the flags' grants (relative to the current
/// directory) and sap.toml's (relative to its folder).
fn grants(args: &RunArgs, config: &Config) -> Result<Grants, String> {
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

pub fn run(args: RunArgs) -> u8 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}

fn run_inner(args: &RunArgs) -> Result<u8, String> {
    let started = Instant::now();
    let config = load_config(&args.file)?;
    let inputs = cache::Inputs::read(&args.file)?;
    // Compiled code from the build cache, when there is a fresh entry (the evaluator
    // needs the functions' bodies, which the cache does not keep).
    let mut cache_note = String::new();
    let mut cached = None;
    let mut link = Duration::ZERO;
    if args.engine == "jit" {
        let target = codegen_jit::target()?;
        let key = cache::key(&inputs, &target);
        match cache::load(&key) {
            Ok(Some(entry)) => {
                let at = Instant::now();
                let mut module = entry.ir;
                inputs.name_files(&mut module);
                let module = Arc::new(module);
                // Loaded here, so that an entry the loader refuses is one more reason
                // to compile from source rather than an error.
                match codegen_jit::load_mapped(entry.program, module.clone()) {
                    Ok(program) => cached = Some((module, entry.calls_model, program)),
                    Err(why) => cache_note = format!(" (the cache entry was not used: {why})"),
                }
                link = at.elapsed();
            }
            Ok(None) => {}
            Err(why) => cache_note = format!(" (the cache entry was not used: {why})"),
        }
    }
    let (module, calls_model, mut linked) = match cached {
        Some((module, calls_model, program)) => (module, calls_model, Some(program)),
        None => {
            let program = match load_program(&inputs)? {
                Ok(program) => program,
                Err(code) => return Ok(code),
            };
            match compile(&program)? {
                Ok(module) => {
                    let calls_model = module.calls_model();
                    (Arc::new(module), calls_model, None)
                }
                Err(code) => return Ok(code),
            }
        }
    };
    let from_cache = linked.is_some();
    let front_end = started.elapsed().saturating_sub(link);
    if module.main.is_none() {
        return Err(format!(
            "`{}` has no `main` function to run",
            args.file.display()
        ));
    }
    // Started when a model, a tool or the exporter first needs it.
    let tokio = Tokio::lazy(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    });
    let exporting = args.otlp.is_some()
        || [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|u| !u.is_empty()));
    if exporting {
        let handle = tokio.handle()?;
        let _guard = handle.enter();
        runtime::telemetry::install(runtime::telemetry::OtlpConfig {
            endpoint: args.otlp.clone(),
            program: args.file.display().to_string(),
            tokio: handle.clone(),
        })?;
    }
    let texts = file_texts(&module, &inputs);
    // A declaration this host cannot serve is reported at the declaration.
    let externs = match checked_externs(&module) {
        Ok(externs) => externs,
        Err(e) => {
            eprintln!("{}", render_error(&texts, &e));
            return Ok(exit::ERRORS);
        }
    };
    let (host, runtime) = host_for(args, &config, module, externs, calls_model, started, &tokio)?;
    let host = host.with_sources(
        texts
            .iter()
            .map(|t| t.as_ref().map(|(_, text)| text.clone()))
            .collect(),
    );
    let mut code_generation = Duration::ZERO;
    let ran = Instant::now();
    let result = match args.engine.as_str() {
        "eval" => on_big_stack(|| Evaluator::new(&host).run_main()),
        "jit" => {
            let program = match linked.take() {
                Some(program) => program,
                None => {
                    let at = Instant::now();
                    let native = codegen_jit::compile_native(&host.module)?;
                    code_generation = at.elapsed();
                    let at = Instant::now();
                    let program = codegen_jit::load(&native, host.module.clone())?;
                    link = at.elapsed();
                    program
                }
            };
            on_big_stack(|| program.run_main(&host))
        }
        other => return Err(format!("unknown engine `{other}`: use jit or eval")),
    };
    if args.stats {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let running = if from_cache {
            ran.elapsed()
        } else {
            ran.elapsed().saturating_sub(code_generation + link)
        };
        eprintln!(
            "module: {}{cache_note}",
            if from_cache {
                "loaded from the build cache"
            } else {
                "compiled from source"
            }
        );
        eprintln!(
            "time: {:.1} ms to {}, {:.1} ms compiling to native code, {:.1} ms linking, {:.1} ms running",
            ms(front_end),
            if from_cache {
                "read the cache entry"
            } else {
                "parse, check and lower"
            },
            ms(code_generation),
            ms(link),
            ms(running)
        );
    }
    if args.stats
        && let Some(rt) = &runtime
    {
        let s = rt.stats();
        eprintln!(
            "{} LLM calls ({} re-asks, {} retries); tokens: {} in ({} cached), {} out; time: {:.2} s waiting for the model, {:.2} s in all",
            s.calls,
            s.reasks,
            s.retries,
            s.input_tokens,
            s.cached_tokens,
            s.output_tokens,
            s.model_time.as_secs_f64(),
            s.wall_time.as_secs_f64()
        );
        if let Some(load) = rt.load_time() {
            eprintln!(
                "model: loaded in this process in {:.2} s, before the run",
                load.as_secs_f64()
            );
        }
        if let Some(c) = rt.concurrency() {
            eprintln!(
                "concurrency: {} model calls in flight at most; limit {} (started at {}, cap {}, {} back-offs)",
                c.peak, c.limit, c.start, c.cap, c.cuts
            );
        }
    }
    runtime::telemetry::shutdown(result.as_ref().err().map(|e| e.message.as_str()));
    if let Some(journal) = host.journal() {
        if args.stats {
            let r = journal.resumed();
            eprintln!(
                "journal {}: {} model calls, {} extern calls, {} inputs and {} printed lines taken from earlier runs",
                journal.path().display(),
                r.llm_calls,
                r.extern_calls,
                r.inputs,
                r.prints
            );
        }
        if result.is_ok() {
            journal.finish_run().map_err(|e| e.to_string())?;
        }
    }
    match result {
        Ok(Value::Unit) => Ok(exit::OK),
        Ok(value) => {
            println!("{}", value.to_json_string());
            Ok(exit::OK)
        }
        Err(e) => {
            eprintln!("{}", render_error(&texts, &e));
            Ok(exit::ERRORS)
        }
    }
}

/// The externs `sapc` gives a program (the calculator's), checked against its
/// declarations: a declaration the host cannot serve is an error at it.
pub fn checked_externs(module: &ir::Module) -> Result<Externs, ExecError> {
    let externs = Externs::default().with_calculator();
    externs.check(module)?;
    Ok(externs)
}

/// The host a program runs in: externs, limits and budgets, the trace, the MCP servers
/// and grants of its tools, and the LLM runtime when it calls the model.
pub fn host_for(
    args: &RunArgs,
    config: &Config,
    module: Arc<ir::Module>,
    externs: Externs,
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
            let program = std::fs::canonicalize(&args.file)
                .unwrap_or_else(|_| args.file.clone())
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
    let tools = crate::mcp::tools_for(&module, config, trace.clone(), deadline)?
        .with_grants(grants(args, config)?);
    let runtime = if calls_model {
        let provider = {
            let _guard = tokio.handle()?.enter();
            crate::providers::provider(args, config)?
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
    host.args = args.args.clone();
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
pub fn load_program(inputs: &cache::Inputs) -> Result<Result<Program, u8>, String> {
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
            Printer::new(crate::Format::Human).print(source, &source.utf8_diagnostics());
            return Ok(Err(exit::ERRORS));
        }
    }
    Ok(Ok(program))
}

/// Checks and lowers a program; its diagnostics are printed, and a program with errors
/// gives the exit status instead of a module.
pub fn compile(program: &Program) -> Result<Result<ir::Module, u8>, String> {
    compile_with(program, lower::lower_workspace)
}

/// [`compile`] for `sapc test`: the tests lowered too (`lower::lower_tests`).
pub fn compile_tests(program: &Program) -> Result<Result<ir::Module, u8>, String> {
    compile_with(program, lower::lower_tests)
}

fn compile_with(
    program: &Program,
    lower: fn(&hir::Database) -> Option<ir::Module>,
) -> Result<Result<ir::Module, u8>, String> {
    let db = &program.db;
    let mut errors = false;
    for (source, &file) in program.files().zip(&program.handles) {
        let diagnostics = hir::check_file(db, file).clone();
        if diagnostics.iter().any(|d| d.is_error()) {
            Printer::new(crate::Format::Human).print(source, &diagnostics);
            errors = true;
        }
    }
    if errors {
        return Ok(Err(exit::ERRORS));
    }
    lower(db)
        .map(Ok)
        .ok_or_else(|| "the program does not check".to_owned())
}

/// `sapc build`: check, lower, compile to native code, and store it in the build cache.
pub fn build(file: &Path, emit_ir: bool) -> u8 {
    let result = (|| -> Result<u8, String> {
        let inputs = cache::Inputs::read(file)?;
        let target = codegen_jit::target()?;
        let key = cache::key(&inputs, &target);
        let fresh = match cache::load(&key) {
            Ok(entry) => entry.is_some(),
            Err(why) => {
                eprintln!("rebuilding: {why}");
                false
            }
        };
        if fresh && !emit_ir {
            eprintln!(
                "{} is up to date in the build cache ({key})",
                file.display()
            );
            return Ok(exit::OK);
        }
        let program = match load_program(&inputs)? {
            Ok(program) => program,
            Err(code) => return Ok(code),
        };
        let module = match compile(&program)? {
            Ok(module) => module,
            Err(code) => return Ok(code),
        };
        if emit_ir {
            print!("{}", ir::print::module(&module));
        }
        if fresh {
            eprintln!(
                "{} is up to date in the build cache ({key})",
                file.display()
            );
            return Ok(exit::OK);
        }
        let native = codegen_jit::compile_native(&module)?;
        let mut module = module;
        inputs.locate_files(&mut module);
        let path = cache::store(&key, &module, &native)?;
        eprintln!("built {} → {}", file.display(), path.display());
        Ok(exit::OK)
    })();
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}

/// The name and text of each file of the module, by its index: the program's own files
/// and the prelude modules it uses.
pub(crate) fn file_texts(
    module: &ir::Module,
    inputs: &cache::Inputs,
) -> Vec<Option<(String, String)>> {
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

/// `9990` → `9,990`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A runtime error as a diagnostic at its span, with the sap call stack.
pub(crate) fn render_error(files: &[Option<(String, String)>], e: &ExecError) -> String {
    let file = |i: u32| files.get(i as usize).and_then(Option::as_ref);
    let position = |span: ir::SrcSpan| match file(span.file) {
        Some((name, text)) => {
            let lc = syntax::LineIndex::new(text).line_col(text, span.start);
            format!("{name}:{}:{}", lc.line + 1, lc.col + 1)
        }
        None => "an unknown place".to_owned(),
    };
    // Runs of the same frame (deep recursion) are folded, so that a stack overflow
    // prints a screenful: the first two calls, then how many more.
    let mut stack = String::new();
    let frames = &e.stack;
    let mut i = 0;
    while i < frames.len() {
        let same = frames[i..]
            .iter()
            .take_while(|f| f.function == frames[i].function && f.span == frames[i].span)
            .count();
        let shown = if same > 4 { 2 } else { same };
        for frame in &frames[i..i + shown] {
            stack.push_str(&format!("\n    in `{}`", frame.function));
            if let Some(span) = frame.span {
                stack.push_str(&format!(" at {}", position(span)));
            }
        }
        if shown < same {
            let more = same - shown;
            stack.push_str(&format!(
                "\n    … {} more call{} of `{}`",
                thousands(more),
                if more == 1 { "" } else { "s" },
                frames[i].function
            ));
        }
        i += same;
    }
    // An error before the program ran (a declaration the host cannot serve) has no stack.
    let mut help = if stack.is_empty() {
        String::new()
    } else {
        format!("sap call stack (innermost first):{stack}")
    };
    if let Some(answer) = &e.raw_answer {
        let shown: String = answer.chars().take(300).collect();
        help.push_str(&format!("\nthe model's last answer: {shown}"));
    }
    let (name, text) = e
        .span
        .and_then(|s| file(s.file))
        .or_else(|| {
            files
                .iter()
                .flatten()
                .find(|(n, _)| hir::prelude_source(n).is_none())
        })
        .cloned()
        .unwrap_or_default();
    let report = RunReport {
        message: e.message.clone(),
        span: e
            .span
            .filter(|s| file(s.file).is_some())
            .map(|s| (s.start as usize, (s.end - s.start) as usize)),
        help,
        source: crate::render::CharColumns { name, text },
    };
    let theme = if std::env::var_os("NO_COLOR").is_none()
        && std::io::IsTerminal::is_terminal(&std::io::stderr())
    {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    if GraphicalReportHandler::new_themed(theme)
        .render_report(&mut out, &report)
        .is_err()
    {
        out = format!("runtime error: {}\n{}", e.message, report.help);
    }
    out
}

#[derive(Debug)]
struct RunReport {
    message: String,
    span: Option<(usize, usize)>,
    help: String,
    source: crate::render::CharColumns,
}

impl std::fmt::Display for RunReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "runtime error: {}", self.message)
    }
}

impl std::error::Error for RunReport {}

impl miette::Diagnostic for RunReport {
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        (!self.help.is_empty()).then(|| Box::new(&self.help) as Box<dyn std::fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let (start, len) = self.span?;
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(
                Some("here".to_owned()),
                SourceSpan::new(start.into(), len),
            ),
        )))
    }
}
