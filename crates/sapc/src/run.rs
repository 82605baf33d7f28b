//! `sapc run`: check, lower and execute a program's `main` (or map it from the build
//! cache), in the host `session` makes from flags, environment and `sap.toml`; and
//! `sapc build`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codegen_jit::{Evaluator, ExecError, Tokio, on_big_stack};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, SourceSpan};
use runtime::Value;

use crate::args::RunArgs;
use crate::config::load_config;
use crate::session::{checked_externs, compile, file_texts, host_for, load_program};
use crate::{cache, exit};

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
