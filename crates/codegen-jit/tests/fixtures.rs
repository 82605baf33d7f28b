//! The engine fixtures: every program in `tests/fixtures/run/` and every example in
//! `examples/` runs on both engines — the Cranelift JIT (compiled in memory, and
//! through the build cache's native module) and the reference evaluator —
//! and must print exactly its `NAME.out` and, when it stops with a runtime error, fail
//! exactly as its `NAME.err` says. A program that asks the model is answered from the
//! `NAME.transcript.jsonl` beside it; the replay only answers a request identical to a
//! recorded one, so the transcript pins every prompt, schema and re-ask, and every
//! recorded answer must be used. A fixture without `NAME.out` fails.
//!
//! Directives, as `//@ key: value` lines at the top of a fixture:
//! - `max-depth`, `max-loop-iterations`, `max-model-iterations`, `concurrency`: the run's limits;
//! - `together: SCHEMA N`: the first `N` model calls asking for `SCHEMA` are held until
//!   all `N` are in flight at once, which proves they run concurrently (a run where they
//!   never meet fails after ten seconds instead of hanging).
//!
//! `UPDATE_SNAPSHOTS=1` rewrites `.out` and `.err` from the JIT's run; `SAP_FIXTURE=text`
//! runs only the fixtures whose name contains `text`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codegen_jit::{Evaluator, ExecError, Externs, Host, Limits, native_module, on_big_stack};
use ir::{Module, SrcSpan};
use llm::{BoxFuture, LlmRequest, LlmResponse, Provider, ProviderError};
use providers::replay::ReplayProvider;
use runtime::{Runtime, RuntimeConfig};
use test_support::fixtures::is_program;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Fixture {
    name: String,
    path: PathBuf,
    source: String,
    limits: Limits,
    together: Option<(String, usize)>,
    /// The working directory relative paths in the program resolve against.
    cwd: PathBuf,
}

impl Fixture {
    fn read(path: &Path, cwd: PathBuf) -> Fixture {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let mut limits = Limits::default();
        let mut together = None;
        for line in source.lines().map_while(|l| l.strip_prefix("//@ ")) {
            let (key, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("{name}: a directive is `//@ key: value`: {line}"));
            let value = value.trim();
            let number = || -> u64 {
                value
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: `{key}` takes a number: {value}"))
            };
            match key.trim() {
                "max-depth" => limits.max_depth = number() as u32,
                "max-loop-iterations" => limits.max_loop_iterations = number(),
                "max-model-iterations" => limits.max_model_iterations = number(),
                "concurrency" => limits.concurrency = number() as usize,
                "together" => {
                    let (schema, n) = value
                        .split_once(' ')
                        .unwrap_or_else(|| panic!("{name}: `together: SCHEMA N`"));
                    together = Some((schema.to_owned(), n.trim().parse().unwrap()));
                }
                other => panic!("{name}: unknown directive `{other}`"),
            }
        }
        Fixture {
            name,
            path: path.to_owned(),
            source,
            limits,
            together,
            cwd,
        }
    }

    fn beside(&self, extension: &str) -> PathBuf {
        self.path.with_extension(extension)
    }
}

/// Whether the program reaches tools outside the host — a module beside it (an MCP
/// server's, imported) or the standard `fs`/`http`/`process` tools, which need grants:
/// sapc's tests run those, with the examples' sap.toml.
fn uses_tools(path: &Path) -> bool {
    let mut db = hir::Database::default();
    let file = db.add_file(
        path.display().to_string(),
        std::fs::read_to_string(path).unwrap_or_default(),
    );
    let dir = path.parent().unwrap_or(Path::new("."));
    hir::items::named_modules(&db, file).iter().any(|m| {
        ["fs", "http", "process"].contains(&m.as_str()) || dir.join(format!("{m}.sap")).is_file()
    })
}

/// Every fixture: the examples (run from the repository root, as the README does) and
/// the engine fixtures (each in a fresh directory of its own).
fn fixtures() -> (test_support::Scratch, Vec<Fixture>) {
    let scratch = test_support::Scratch::new("fixtures");
    let mut all = Vec::new();
    for (dir, own_directory) in [("examples", false), ("tests/fixtures/run", true)] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(repository().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sap"))
            // A module the examples use is not a program; a program that uses tools
            // outside the host runs in sapc's tests, with the examples' sap.toml.
            .filter(|p| own_directory || (is_program(p) && !uses_tools(p)))
            .collect();
        paths.sort();
        for path in paths {
            let cwd = if own_directory {
                scratch.join(path.file_stem().unwrap())
            } else {
                repository()
            };
            all.push(Fixture::read(&path, cwd));
        }
    }
    if let Ok(filter) = std::env::var("SAP_FIXTURE") {
        all.retain(|f| f.name.contains(&filter));
    }
    (scratch, all)
}

#[derive(Clone, Copy, Debug)]
enum Engine {
    Jit,
    /// Compiled, written as the build cache's native module, read back and mapped: the
    /// code `sapc run` loads after `sapc build`, run with the module it stores.
    Cached,
    Evaluator,
}

/// The native module of `module` as the build cache would store and read it back.
fn through_the_cache(module: &Module) -> (Arc<Module>, codegen_jit::MappedProgram) {
    let native = codegen_jit::compile_native(module).expect("the module compiles");
    let bytes = native_module::write("fixtures", module, &native).expect("the module is stored");
    let dir = test_support::Scratch::new("fixture-cache");
    let path = dir.join("entry.sapm");
    std::fs::write(&path, bytes).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let read = native_module::read(&file, "fixtures").expect("the module reads back");
    assert_eq!(read.calls_model, module.calls_model());
    (Arc::new(read.ir), read.program)
}

/// What a run showed: its output, its error rendered, and what went wrong around it.
struct Outcome {
    output: String,
    error: Option<String>,
    /// Problems with the fixture itself (unused answers), not the program's behaviour.
    problems: Vec<String>,
}

fn compile(fixture: &Fixture) -> (Arc<Module>, Vec<String>) {
    let mut db = hir::Database::default();
    db.add_prelude();
    let file_name = format!("{}.sap", fixture.name);
    let file = db.add_file(file_name.clone(), fixture.source.clone());
    let errors: Vec<_> = hir::check_file(&db, file)
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", fixture.name);
    let module = lower::lower_workspace(&db).unwrap();
    let sources = module
        .files
        .iter()
        .map(|f| {
            if *f == file_name {
                fixture.source.clone()
            } else {
                hir::prelude_source(f).unwrap_or_default().to_owned()
            }
        })
        .collect();
    (Arc::new(module), sources)
}

/// Held while a program runs: it runs in its fixture's directory, which is the whole
/// process's, and the tests run on threads of their own.
static WORKING_DIRECTORY: Mutex<()> = Mutex::new(());

fn run(fixture: &Fixture, engine: Engine, tokio: &tokio::runtime::Runtime) -> Outcome {
    let _cwd = WORKING_DIRECTORY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (module, sources) = compile(fixture);
    let (module, cached) = match engine {
        Engine::Cached => {
            let (stored, native) = through_the_cache(&module);
            (stored, Some(native))
        }
        _ => (module, None),
    };
    let transcript = fixture.beside("transcript.jsonl");
    let replay = transcript.is_file().then(|| {
        Arc::new(ReplayProvider::from_file(&transcript).unwrap_or_else(|e| panic!("{e}")))
    });
    let runtime = replay.clone().map(|replay| {
        let provider = Arc::new(Together::new(replay, fixture.together.clone()));
        Arc::new(Runtime::new(provider, RuntimeConfig::default()))
    });
    // The host `sapc run` gives a program: the calculator's externs.
    let externs = Externs::default().with_calculator();
    if let Err(e) = externs.check(&module) {
        return Outcome {
            output: String::new(),
            error: Some(format!("error: {e}\n")),
            problems: Vec::new(),
        };
    }
    let output = Output::default();
    let host = Host::new(
        module.clone(),
        runtime,
        tokio.handle().clone(),
        externs,
        fixture.limits.clone(),
    )
    .with_output(Box::new(output.clone()))
    .with_sources(sources.iter().cloned().map(Some).collect());
    std::fs::create_dir_all(&fixture.cwd).unwrap();
    std::env::set_current_dir(&fixture.cwd).unwrap();
    let result = match engine {
        Engine::Jit => {
            let program = codegen_jit::compile(host.module.clone()).expect("the module compiles");
            on_big_stack(|| program.run_main(&host))
        }
        Engine::Cached => {
            let mapped = cached.expect("read back");
            let program = codegen_jit::load_mapped(mapped, host.module.clone()).expect("it loads");
            on_big_stack(|| program.run_main(&host))
        }
        Engine::Evaluator => on_big_stack(|| Evaluator::new(&host).run_main()),
    };
    let mut problems = Vec::new();
    if let Some(replay) = replay {
        let unused = replay.unanswered();
        if unused > 0 {
            problems.push(format!(
                "{unused} recorded answers were never asked for: the program called the model fewer times than the transcript"
            ));
        }
    }
    let output = String::from_utf8(output.0.lock().unwrap().clone()).unwrap();
    Outcome {
        output,
        error: result
            .err()
            .map(|e| render_error(&e, &module.files, &sources)),
        problems,
    }
}

/// An error as the fixtures spell it: the message, where, the sap call stack, and the
/// model's last answer for a failed LLM call.
fn render_error(e: &ExecError, files: &[String], sources: &[String]) -> String {
    let place = |span: SrcSpan| {
        let file = span.file as usize;
        let text = &sources[file];
        let before = &text[..span.start as usize];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        let snippet: String = text[span.start as usize..span.end as usize]
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        format!("{}:{line}:{column} `{snippet}`", files[file])
    };
    let mut out = format!("error: {}\n", e.message);
    if let Some(span) = e.span {
        out += &format!("  at {}\n", place(span));
    }
    // Deep recursion repeats a frame: consecutive repeats are counted, not listed.
    let frames: Vec<String> = e
        .stack
        .iter()
        .map(|frame| match frame.span {
            Some(span) => format!("  in `{}` at {}\n", frame.function, place(span)),
            None => format!("  in `{}`\n", frame.function),
        })
        .collect();
    for run in frames.chunk_by(|a, b| a == b) {
        out += &run[0];
        if run.len() > 1 {
            out += &format!("  (and {} more times)\n", run.len() - 1);
        }
    }
    if let Some(answer) = &e.raw_answer {
        out += &format!("  the model answered: {answer}\n");
    }
    out
}

#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The replay, with the `together` directive: the first `n` calls for `schema` wait
/// until all of them are in flight.
struct Together {
    replay: Arc<ReplayProvider>,
    group: Option<(String, usize)>,
    arrived: Mutex<usize>,
    all_here: tokio::sync::Notify,
}

impl Together {
    fn new(replay: Arc<ReplayProvider>, group: Option<(String, usize)>) -> Together {
        Together {
            replay,
            group,
            arrived: Mutex::new(0),
            all_here: tokio::sync::Notify::new(),
        }
    }
}

impl Provider for Together {
    fn name(&self) -> &str {
        "replay"
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            if let Some((schema, n)) = &self.group
                && *schema == request.schema_name
            {
                let waiting = {
                    let mut arrived = self.arrived.lock().unwrap();
                    *arrived += 1;
                    if *arrived == *n {
                        self.all_here.notify_waiters();
                    }
                    (*arrived < *n).then(|| self.all_here.notified())
                };
                if let Some(waiting) = waiting
                    && tokio::time::timeout(Duration::from_secs(10), waiting)
                        .await
                        .is_err()
                {
                    return Err(ProviderError::Protocol(format!(
                        "the {n} calls for `{schema}` were never in flight together"
                    )));
                }
            }
            self.replay.complete(request).await
        })
    }
}

#[test]
fn every_fixture_runs_the_same_on_both_engines() {
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_scratch, fixtures) = fixtures();
    assert!(!fixtures.is_empty(), "no fixture matched");
    let mut failures = Vec::new();
    for fixture in &fixtures {
        let (out, err) = (fixture.beside("out"), fixture.beside("err"));
        if update {
            let o = run(fixture, Engine::Jit, &tokio);
            std::fs::write(&out, &o.output).unwrap();
            match &o.error {
                Some(e) => std::fs::write(&err, e).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&err);
                }
            }
        }
        let Ok(expected_output) = std::fs::read_to_string(&out) else {
            failures.push(format!(
                "{}: no expectation: write {} (or run with UPDATE_SNAPSHOTS=1)",
                fixture.name,
                out.display()
            ));
            continue;
        };
        let expected_error = std::fs::read_to_string(&err).ok();
        for engine in [Engine::Jit, Engine::Cached, Engine::Evaluator] {
            let o = run(fixture, engine, &tokio);
            let who = format!("{} ({engine:?})", fixture.name);
            if o.output != expected_output {
                failures.push(format!(
                    "{who}: printed\n{}\nbut {} says\n{}",
                    o.output,
                    out.display(),
                    expected_output
                ));
            }
            if o.error != expected_error {
                failures.push(format!(
                    "{who}: ended with\n{}\nbut expected\n{}",
                    o.error.as_deref().unwrap_or("success"),
                    expected_error.as_deref().unwrap_or("success")
                ));
            }
            failures.extend(o.problems.iter().map(|p| format!("{who}: {p}")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures over {} fixtures:\n\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n\n")
    );
}

/// Inlined code runs up to the depth limit as the program as written does: near the
/// limit a function with inlined copies passes the call to its plain twin, where every
/// call is a call. At every limit from 1 to 14, both engines stop (or finish) alike.
#[test]
fn every_depth_limit_stops_inlined_code_where_the_evaluator_stops() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scratch = test_support::Scratch::new("depths");
    let path = scratch.join("depths.sap");
    let source = "fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\n\
                  fn twice(n: i64) -> i64 { fib(n) + fib(n - 1) }\n\
                  fn main() -> () { print(to_string(twice(12))) }\n";
    std::fs::write(&path, source).unwrap();
    let mut failures = Vec::new();
    let mut stopped = 0;
    for depth in 1..=14 {
        let mut fixture = Fixture::read(&path, scratch.to_path_buf());
        fixture.limits.max_depth = depth;
        let jit = run(&fixture, Engine::Jit, &tokio);
        let eval = run(&fixture, Engine::Evaluator, &tokio);
        if (&jit.output, &jit.error) != (&eval.output, &eval.error) {
            failures.push(format!(
                "max depth {depth}: the JIT printed {:?} and ended with {:?}, the evaluator {:?} and {:?}",
                jit.output, jit.error, eval.output, eval.error
            ));
        }
        stopped += usize::from(eval.error.is_some());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // fib(12) needs 12 levels under main and twice: the lower limits stop it.
    assert_eq!(stopped, 13, "limits 1..=13 stop the run, 14 lets it finish");
}
