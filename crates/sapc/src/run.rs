//! `sapc run`: a thin adapter over `session`: the flags become `session::Options`, the
//! program is loaded (or mapped from the build cache) and its `main` run in the host
//! `session` makes; and `sapc build`.

use std::path::Path;
use std::time::{Duration, Instant};

use codegen_jit::Tokio;
use runtime::Value;
use session::{Engine, Failure, Timings, cache, compile, load_program, render};

use crate::args::{RunArgs, RunCommand};
use crate::exit;

pub fn run(command: RunCommand) -> u8 {
    match run_inner(&command.run, command.unsafe_ignore_provenance) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}

fn run_inner(args: &RunArgs, ignore_provenance: bool) -> Result<u8, String> {
    let started = Instant::now();
    let engine = match args.engine.as_str() {
        "jit" => Engine::Jit,
        "eval" => Engine::Eval,
        other => return Err(format!("unknown engine `{other}`: use jit or eval")),
    };
    let loaded = if ignore_provenance {
        match session::load_ignoring_provenance(&args.file, engine) {
            Ok((loaded, ignored)) => {
                ignored.print();
                eprintln!(
                    "warning: --unsafe-ignore-provenance: this run is undefended; data a tool returns may steer what the program does"
                );
                loaded
            }
            Err(failure) => return failed(failure),
        }
    } else {
        match session::load(&args.file, engine) {
            Ok(loaded) => loaded,
            Err(failure) => return failed(failure),
        }
    };
    if loaded.module.main.is_none() {
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
    if runtime::telemetry::wanted(args.otlp.as_deref()) {
        let program = args.file.display().to_string();
        runtime::telemetry::start(args.otlp.as_deref(), &program, tokio.handle()?)?;
    }
    let (mut host, runtime) = match loaded.host(&args.options(), &tokio, started) {
        Ok(made) => made,
        Err(failure) => return failed(failure),
    };
    host.args = args.args.clone();
    let ran = Instant::now();
    let result = loaded.run_main(&host);
    if args.stats {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let running = ran.elapsed();
        let from_cache = loaded.from_cache;
        let Timings {
            front_end,
            code_generation,
            link,
        } = loaded.timings;
        let cache_note = match &loaded.cache_note {
            Some(why) => format!(" ({why})"),
            None => String::new(),
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
                journal
                    .path()
                    .map_or_else(|| journal.name(), |p| p.display().to_string()),
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
        Err(e) => failed(loaded.located(&e, render::stderr_color())),
    }
}

/// A failure's text on standard error, and the exit status it gives.
pub(crate) fn failed(failure: Failure) -> Result<u8, String> {
    match failure {
        Failure::Diagnostics(d) => {
            d.print();
            Ok(exit::ERRORS)
        }
        Failure::Located(text) => {
            eprintln!("{text}");
            Ok(exit::ERRORS)
        }
        Failure::Error(message) => Err(message),
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
        let module = match load_program(&inputs).and_then(|p| compile(&p)) {
            Ok(module) => module,
            Err(failure) => return failed(failure),
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
