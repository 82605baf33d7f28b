//! `sapc test`: runs the `test "name" { … }` items of sap files. Each file with tests is
//! checked, lowered with its tests (`lower::lower_tests`) and compiled once; its tests
//! run in parallel, each with a host of its own whose script the test's `given`s fill.
//! A model call no `given` answers fails its test, unless `--provider` or `--replay`
//! answers it. `--coverage` reports which outcomes of each decision point the tests
//! exercised, as a table and as an lcov file with branch records.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use codegen_jit::{Host, Tokio};
use ir::{Module, SiteKind, Type, TypeDef};

use session::render::{render_error, stderr_color};
use session::{
    Options, cache, checked_externs, compile_tests, file_texts, host_for, load_config, load_program,
};

use crate::exit;

/// The stack of each thread running tests.
const TEST_STACK: usize = 256 << 20;

#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// Files or directories (searched for `*.sap` recursively); default: the current
    /// directory.
    pub paths: Vec<PathBuf>,
    /// Only the tests whose name contains TEXT.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// With `--filter`: only the test named exactly TEXT.
    #[arg(long, requires = "filter")]
    pub exact: bool,
    /// Answer the model calls no `given` scripts from this provider (`openai`,
    /// `anthropic`, …; as for `sapc run`).
    #[arg(long, conflicts_with = "replay")]
    pub provider: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub base_url: Option<String>,
    /// Answer the model calls no `given` scripts from this transcript.
    #[arg(long, value_name = "TRANSCRIPT")]
    pub replay: Option<PathBuf>,
    /// How to report: `human`, `json` (one object per test, then a summary) or `junit`
    /// (an XML report, on standard output).
    #[arg(long, value_enum, default_value_t = TestFormat::Human)]
    pub format: TestFormat,
    /// Report which outcomes of each model decision the tests exercised, and write them
    /// as lcov branch records (to `lcov.info`, or `--lcov PATH`).
    #[arg(long)]
    pub coverage: bool,
    /// Where `--coverage` writes its lcov file.
    #[arg(long, value_name = "PATH", requires = "coverage")]
    pub lcov: Option<PathBuf>,
    /// Tests run at once [default: the number of cores].
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    Human,
    Json,
    Junit,
}

/// One test's outcome.
struct Outcome {
    file: String,
    name: String,
    /// `None` when it passed; the rendered failure otherwise.
    failure: Option<Failure>,
    duration: Duration,
}

struct Failure {
    message: String,
    /// Line and column of the failure in its file, when known.
    at: Option<(String, u32, u32)>,
    rendered: String,
}

/// Everything the tests of one file need, compiled once.
struct Suite {
    file: PathBuf,
    module: Arc<Module>,
    texts: Vec<Option<(String, String)>>,
    program: codegen_jit::JitProgram,
}

pub fn run(args: TestArgs) -> u8 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}

fn run_inner(args: &TestArgs) -> Result<u8, String> {
    let started = Instant::now();
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut files = Vec::new();
    for p in &paths {
        crate::check::collect(p, &mut files)?;
    }
    files.sort();
    files.dedup();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut broken: Vec<String> = Vec::new();
    let mut coverage = CoverageReport::default();
    for file in files {
        let text = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        if !has_tests(&text) {
            continue;
        }
        let wanted = |name: &str| {
            args.filter.as_ref().is_none_or(|f| {
                if args.exact {
                    name == f
                } else {
                    name.contains(f.as_str())
                }
            })
        };
        let suite = match compile(&file, wanted)? {
            Ok(Some(suite)) => suite,
            Ok(None) => continue,
            Err(failure) => {
                // The file's tests cannot run: why, on standard error.
                match failure {
                    session::Failure::Diagnostics(d) => d.print(),
                    other => eprintln!("{other}"),
                }
                broken.push(file.display().to_string());
                continue;
            }
        };
        let selected: Vec<&ir::TestDef> = suite.module.tests.iter().collect();
        let (results, covered) = run_suite(args, &suite, &selected, &tokio, started)?;
        outcomes.extend(results);
        if args.coverage {
            coverage.add(&suite, &covered);
        }
    }
    let passed = outcomes.iter().filter(|o| o.failure.is_none()).count();
    let failed = outcomes.len() - passed;
    match args.format {
        TestFormat::Human => print_human(&outcomes),
        TestFormat::Json => print_json(&outcomes, &broken),
        TestFormat::Junit => print!("{}", junit(&outcomes, &broken)),
    }
    if args.coverage {
        let lcov = args
            .lcov
            .clone()
            .unwrap_or_else(|| PathBuf::from("lcov.info"));
        std::fs::write(&lcov, coverage.lcov())
            .map_err(|e| format!("cannot write {}: {e}", lcov.display()))?;
        let table = coverage.table();
        if args.format == TestFormat::Human {
            print!("{table}");
            println!("lcov branch records written to {}", lcov.display());
        } else {
            eprint!("{table}");
        }
    }
    let summary = format!(
        "{passed} passed, {failed} failed{}",
        if !broken.is_empty() {
            format!(
                "; {} file{} did not check",
                broken.len(),
                if broken.len() == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        }
    );
    match args.format {
        TestFormat::Human => println!("{summary}"),
        _ => eprintln!("{summary}"),
    }
    Ok(if failed > 0 || !broken.is_empty() {
        exit::ERRORS
    } else {
        exit::OK
    })
}

/// Whether a file has a test item: a line that starts with `test "`.
fn has_tests(text: &[u8]) -> bool {
    String::from_utf8_lossy(text)
        .lines()
        .any(|l| l.starts_with("test \"") || l.starts_with("test\t\""))
}

/// Checks and lowers one file with its tests, keeps the tests `wanted` names, and
/// compiles what they reach (`ir::Module::reachable`): one selected test costs what it
/// calls, not the whole file. `Ok(None)` when no test is wanted; `Err` when the file
/// does not check (its diagnostics).
fn compile(
    file: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<Result<Option<Suite>, session::Failure>, String> {
    let inputs = cache::Inputs::read(file)?;
    let mut module = match load_program(&inputs).and_then(|p| compile_tests(&p)) {
        Ok(m) => m,
        Err(session::Failure::Error(message)) => return Err(message),
        Err(failure) => return Ok(Err(failure)),
    };
    module.tests.retain(|t| wanted(&t.name));
    if module.tests.is_empty() {
        return Ok(Ok(None));
    }
    let module = Arc::new(module);
    let native = codegen_jit::compile_native(&module)?;
    let program = codegen_jit::load(&native, module.clone())?;
    Ok(Ok(Some(Suite {
        file: file.to_owned(),
        texts: file_texts(&module, &inputs),
        module,
        program,
    })))
}

type Covered = BTreeMap<ir::SiteId, BTreeMap<String, u64>>;

/// Runs the selected tests of one file on `jobs` threads, each test with a host of its
/// own; the outcomes in the file's order, and the decisions they covered.
fn run_suite(
    args: &TestArgs,
    suite: &Suite,
    tests: &[&ir::TestDef],
    tokio: &tokio::runtime::Runtime,
    started: Instant,
) -> Result<(Vec<Outcome>, Covered), String> {
    let options = Options {
        provider: args.provider.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        replay: args.replay.clone(),
        ..Options::default()
    };
    let config = load_config(&suite.file)?;
    // The model answers only what no `given` scripts, and only when asked to.
    let calls_model = args.provider.is_some() || args.replay.is_some();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .clamp(1, tests.len().max(1));
    let next = AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<(Outcome, Covered)>>> =
        std::sync::Mutex::new((0..tests.len()).map(|_| None).collect());
    let setup_error: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let tokio: Tokio = tokio.handle().clone().into();
    let externs = checked_externs(&suite.module).map_err(|e| e.message)?;
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let worker = || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(test) = tests.get(i) else { break };
                // What the test prints is kept, and shown when it fails.
                let captured = Captured::default();
                let host = match host_for(
                    &suite.file,
                    &options,
                    &config,
                    suite.module.clone(),
                    externs.clone(),
                    None,
                    calls_model,
                    started,
                    &tokio,
                ) {
                    Ok((host, _)) => host
                        .for_test()
                        .with_output(Box::new(captured.clone()))
                        .with_sources(
                            suite
                                .texts
                                .iter()
                                .map(|t| t.as_ref().map(|(_, text)| text.clone()))
                                .collect(),
                        ),
                    Err(e) => {
                        *setup_error.lock().unwrap() = Some(e);
                        break;
                    }
                };
                let at = Instant::now();
                let result = suite.program.call(&host, test.function, Vec::new());
                let duration = at.elapsed();
                let failure = result.err().map(|e| {
                    let mut f = failure(suite, &host, &e);
                    let printed = captured.text();
                    if !printed.is_empty() {
                        f.rendered
                            .push_str(&format!("\nit printed:\n{}", printed.trim_end()));
                    }
                    f
                });
                let outcome = Outcome {
                    file: suite.file.display().to_string(),
                    name: test.name.clone(),
                    failure,
                    duration,
                };
                let covered = host.coverage();
                results.lock().unwrap()[i] = Some((outcome, covered));
            };
            std::thread::Builder::new()
                .stack_size(TEST_STACK)
                .spawn_scoped(scope, move || {
                    // Deep recursion stops where this stack ends, not past it.
                    runtime::tasks::on_stack_of(TEST_STACK);
                    worker()
                })
                .expect("spawn a test thread");
        }
    });
    if let Some(e) = setup_error.into_inner().unwrap() {
        return Err(e);
    }
    let mut outcomes = Vec::new();
    let mut covered: Covered = BTreeMap::new();
    for (outcome, c) in results.into_inner().unwrap().into_iter().flatten() {
        outcomes.push(outcome);
        for (site, seen) in c {
            let entry = covered.entry(site).or_default();
            for (o, n) in seen {
                *entry.entry(o).or_default() += n;
            }
        }
    }
    Ok((outcomes, covered))
}

fn failure(suite: &Suite, host: &Host, e: &codegen_jit::ExecError) -> Failure {
    let at = e.span.map(|s| host.location(s));
    Failure {
        message: e.message.clone(),
        at,
        rendered: render_error(&suite.texts, e, stderr_color()),
    }
}

fn print_human(outcomes: &[Outcome]) {
    for o in outcomes {
        let ms = o.duration.as_secs_f64() * 1000.0;
        match &o.failure {
            None => println!("ok    {}: {} ({ms:.1} ms)", o.file, o.name),
            Some(_) => println!("FAIL  {}: {} ({ms:.1} ms)", o.file, o.name),
        }
    }
    let failures: Vec<&Outcome> = outcomes.iter().filter(|o| o.failure.is_some()).collect();
    if !failures.is_empty() {
        println!();
        for o in failures {
            println!("---- {}: {}", o.file, o.name);
            if let Some(f) = &o.failure {
                println!("{}", f.rendered.trim_end());
            }
            println!();
        }
    }
}

/// A line per test, a line per file whose tests could not run because it did not check
/// (its diagnostics are on standard error), then the counts.
fn print_json(outcomes: &[Outcome], broken: &[String]) {
    for o in outcomes {
        let mut line = serde_json::json!({
            "file": o.file,
            "name": o.name,
            "status": if o.failure.is_none() { "passed" } else { "failed" },
            "ms": o.duration.as_secs_f64() * 1000.0,
        });
        if let Some(f) = &o.failure {
            line["message"] = f.message.clone().into();
            if let Some((file, l, c)) = &f.at {
                line["location"] = serde_json::json!({ "file": file, "line": l, "column": c });
            }
        }
        println!("{line}");
    }
    for file in broken {
        let line = serde_json::json!({
            "file": file,
            "status": "did_not_check",
            "message": "the file has errors (on standard error): its tests did not run",
        });
        println!("{line}");
    }
    let passed = outcomes.iter().filter(|o| o.failure.is_none()).count();
    println!(
        "{}",
        serde_json::json!({
            "passed": passed,
            "failed": outcomes.len() - passed,
            "did_not_check": broken.len(),
        })
    );
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A JUnit XML report: one `<testsuite>` per file.
fn junit(outcomes: &[Outcome], broken: &[String]) -> String {
    let mut by_file: BTreeMap<&str, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        by_file.entry(&o.file).or_default().push(o);
    }
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    let total: f64 = outcomes.iter().map(|o| o.duration.as_secs_f64()).sum();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"sapc test\" tests=\"{}\" failures=\"{failed}\" errors=\"{}\" time=\"{total:.3}\">\n",
        outcomes.len() + broken.len(),
        broken.len()
    );
    for (file, tests) in by_file {
        let failed = tests.iter().filter(|o| o.failure.is_some()).count();
        let time: f64 = tests.iter().map(|o| o.duration.as_secs_f64()).sum();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" time=\"{time:.3}\">\n",
            xml(file),
            tests.len()
        ));
        for o in tests {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml(file),
                xml(&o.name),
                o.duration.as_secs_f64()
            ));
            match &o.failure {
                None => out.push_str("/>\n"),
                Some(f) => {
                    let first = f.message.lines().next().unwrap_or("");
                    out.push_str(&format!(
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                        xml(first),
                        xml(&f.message)
                    ));
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    // A file that did not check is a suite with one error: its tests did not run.
    for file in broken {
        out.push_str(&format!(
            "  <testsuite name=\"{0}\" tests=\"1\" failures=\"0\" errors=\"1\">\n    <testcase classname=\"{0}\" name=\"(check)\">\n      <error message=\"the file has errors: its tests did not run\"/>\n    </testcase>\n  </testsuite>\n",
            xml(file)
        ));
    }
    out.push_str("</testsuites>\n");
    out
}

/// One decision point of the program: where it is, what it decides, the outcomes it
/// can have and how often each was seen.
struct Point {
    file: String,
    line: u32,
    column: u32,
    function: String,
    what: String,
    outcomes: Vec<(String, u64)>,
}

#[derive(Default)]
struct CoverageReport {
    points: Vec<Point>,
}

impl CoverageReport {
    /// The decision points of a suite's program files (not the prelude's, not the
    /// tests'), with what its tests covered.
    fn add(&mut self, suite: &Suite, covered: &Covered) {
        let module = &suite.module;
        let test_functions: BTreeSet<ir::FuncId> =
            module.tests.iter().map(|t| t.function).collect();
        for (id, site) in module.sites.iter().enumerate() {
            let id = id as ir::SiteId;
            if test_functions.contains(&site.owner) {
                continue;
            }
            let Some(Some((name, text))) = suite.texts.get(site.span.file as usize) else {
                continue;
            };
            if hir::prelude_source(name).is_some() && !self.wants_prelude(name, suite) {
                continue;
            }
            let lc = syntax::LineIndex::new(text).line_col(text, site.span.start);
            let seen = covered.get(&id);
            let outcomes = possible(module, &site.kind)
                .into_iter()
                .map(|o| {
                    let n = seen.and_then(|s| s.get(&o)).copied().unwrap_or(0);
                    (o, n)
                })
                .collect();
            let what = match &site.kind {
                SiteKind::Produce { .. } => format!("result of `{}`", site.subject),
                SiteKind::Decide => format!("condition `{}`", site.subject),
                SiteKind::Fill { callee, .. } => format!("`_` arguments of `{callee}`"),
                SiteKind::Choose { .. } => "`select`".to_owned(),
            };
            let point = Point {
                file: source_path(name, &suite.file),
                line: lc.line + 1,
                column: lc.col + 1,
                function: module
                    .functions
                    .get(site.owner as usize)
                    .map_or_else(String::new, |f| f.name.clone()),
                what,
                outcomes,
            };
            // A file tested from two suites: the same point, outcomes added up.
            match self.points.iter_mut().find(|p| {
                p.file == point.file
                    && p.line == point.line
                    && p.column == point.column
                    && p.what == point.what
            }) {
                Some(p) => {
                    for (o, n) in point.outcomes {
                        if let Some(slot) = p.outcomes.iter_mut().find(|(x, _)| *x == o) {
                            slot.1 += n;
                        }
                    }
                }
                None => self.points.push(point),
            }
        }
    }

    /// Prelude modules are reported when the tests are their own (`aot_test.sap` tests
    /// `aot`; a program using `aot` does not make `aot` its subject).
    fn wants_prelude(&self, name: &str, suite: &Suite) -> bool {
        let stem = Path::new(name)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("");
        suite
            .file
            .file_stem()
            .and_then(|s| s.to_str())
            .is_some_and(|s| s == stem || s.strip_suffix("_test") == Some(stem))
    }

    fn table(&self) -> String {
        let mut points: Vec<&Point> = self.points.iter().collect();
        points.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        let total: usize = points.iter().map(|p| p.outcomes.len()).sum();
        let hit: usize = points
            .iter()
            .map(|p| p.outcomes.iter().filter(|(_, n)| *n > 0).count())
            .sum();
        let mut out = String::from("\ndecision coverage\n");
        for p in &points {
            let covered = p.outcomes.iter().filter(|(_, n)| *n > 0).count();
            let outcomes: Vec<String> = p
                .outcomes
                .iter()
                .map(|(o, n)| {
                    if *n > 0 {
                        format!("{o} ✓{n}")
                    } else {
                        format!("{o} ✗")
                    }
                })
                .collect();
            out.push_str(&format!(
                "  {}:{}:{}  {} in `{}`: {}/{}  {}\n",
                p.file,
                p.line,
                p.column,
                p.what,
                p.function,
                covered,
                p.outcomes.len(),
                outcomes.join(", ")
            ));
        }
        let percent = if total == 0 {
            100.0
        } else {
            hit as f64 * 100.0 / total as f64
        };
        out.push_str(&format!(
            "  {hit} of {total} outcomes exercised ({percent:.0}%) at {} decision points\n",
            points.len()
        ));
        out
    }

    /// lcov: per file, a line record for each decision point (how often it was asked)
    /// and a branch record for each of its outcomes.
    fn lcov(&self) -> String {
        let mut by_file: BTreeMap<&str, Vec<&Point>> = BTreeMap::new();
        for p in &self.points {
            by_file.entry(&p.file).or_default().push(p);
        }
        let mut out = String::new();
        for (file, mut points) in by_file {
            points.sort_by_key(|p| (p.line, p.column));
            out.push_str("TN:\n");
            let path = std::fs::canonicalize(file)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| file.to_owned());
            out.push_str(&format!("SF:{path}\n"));
            let (mut found, mut hit) = (0, 0);
            for (block, p) in points.iter().enumerate() {
                for (branch, (_, n)) in p.outcomes.iter().enumerate() {
                    out.push_str(&format!("BRDA:{},{block},{branch},{n}\n", p.line));
                    found += 1;
                    hit += usize::from(*n > 0);
                }
            }
            out.push_str(&format!("BRF:{found}\nBRH:{hit}\n"));
            let mut lines: BTreeMap<u32, u64> = BTreeMap::new();
            for p in &points {
                *lines.entry(p.line).or_default() += p.outcomes.iter().map(|(_, n)| n).sum::<u64>();
            }
            for (line, n) in &lines {
                out.push_str(&format!("DA:{line},{n}\n"));
            }
            let lh = lines.values().filter(|n| **n > 0).count();
            out.push_str(&format!("LF:{}\nLH:{lh}\nend_of_record\n", lines.len()));
        }
        out
    }
}

/// The outcomes a decision can have: both sides of a Boolean, each variant of an enum,
/// `some` and `none`, each `select` clause; `answered` for the rest.
fn possible(module: &Module, kind: &SiteKind) -> Vec<String> {
    match kind {
        SiteKind::Decide => vec!["true".to_owned(), "false".to_owned()],
        SiteKind::Produce { ret } => match ret {
            Type::Bool => vec!["true".to_owned(), "false".to_owned()],
            Type::Option(_) => vec!["some".to_owned(), "none".to_owned()],
            Type::Enum(id) => match module.types.get(*id as usize) {
                Some(TypeDef::Enum { variants, .. }) => {
                    variants.iter().map(|v| v.0.clone()).collect()
                }
                _ => vec!["answered".to_owned()],
            },
            _ => vec!["answered".to_owned()],
        },
        SiteKind::Choose { arms } => arms.iter().map(|a| a.tool.clone()).collect(),
        SiteKind::Fill { .. } => vec!["answered".to_owned()],
    }
}

/// A test's output: what its `print`s wrote, kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where a file of the module is on disk: its own path, or, for a prelude module tested
/// from the prelude's `tests/` folder, the prelude's source beside it.
fn source_path(name: &str, test_file: &Path) -> String {
    if let Some(module) = name.strip_prefix("<prelude>/")
        && let Some(dir) = test_file.parent().and_then(Path::parent)
        && dir.join(module).is_file()
    {
        return dir.join(module).display().to_string();
    }
    name.to_owned()
}
