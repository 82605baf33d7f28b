//! A program ready to run: loaded (from the build cache when it has a fresh entry),
//! checked, lowered and compiled, with the texts its errors are rendered against.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use codegen_jit::{Evaluator, ExecError, Externs, Host, JitProgram, Tokio, on_big_stack};
use ir::{FuncId, Type};
use llm::types::{ParamDesc, TypeDesc};
use runtime::value::decode;
use runtime::{Runtime, Value};
use serde_json::{Map, Value as JsonValue};

use crate::config::{Config, load_config};
use crate::render::render_error;
use crate::{
    Diagnostics, Failure, Options, cache, checked_externs_with, compile, file_texts, host_for,
    load_program,
};

/// How a program's functions run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// Native code (Cranelift), from the build cache when it has a fresh entry.
    #[default]
    Jit,
    /// The reference evaluator (for comparing the two; never cached).
    Eval,
}

/// Where the time before the run went.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Reading, parsing, checking and lowering (or reading the cache entry).
    pub front_end: Duration,
    /// Compiling to native code (zero from the cache).
    pub code_generation: Duration,
    /// Laying out or mapping the native code.
    pub link: Duration,
}

/// A loaded program.
pub struct Loaded {
    pub file: PathBuf,
    /// `sap.toml` beside the program (the defaults when there is none).
    pub config: Config,
    pub module: Arc<ir::Module>,
    /// The name and text of each file of the module, for rendering errors.
    pub texts: Vec<Option<(String, String)>>,
    /// Whether what runs can call the model (a provider is made only then).
    pub calls_model: bool,
    pub engine: Engine,
    program: Option<JitProgram>,
    /// Whether every function was compiled, or only what `main` reaches.
    every: bool,
    pub from_cache: bool,
    /// Why a cache entry was there but not used, if it was.
    pub cache_note: Option<String>,
    pub timings: Timings,
}

/// A function a front end may call: its parameters other than the `Context` (which
/// gets a fresh one per call), by name, and its result type.
#[derive(Clone, Debug)]
pub struct Function {
    pub id: FuncId,
    pub name: String,
    pub doc: Option<String>,
    pub params: Vec<ParamDesc>,
    pub ret: TypeDesc,
}

/// Loads `file` to run its `main`: from the build cache when it has a fresh entry and
/// `engine` is [`Engine::Jit`], else from source. Only what `main` reaches is compiled;
/// to call other functions, [`load_all`].
pub fn load(file: &Path, engine: Engine) -> Result<Loaded, Failure> {
    let started = Instant::now();
    let config = load_config(file)?;
    let inputs = cache::Inputs::read(file)?;
    let mut cache_note = None;
    let mut link = Duration::ZERO;
    if engine == Engine::Jit {
        let target = codegen_jit::target()?;
        let key = cache::key(&inputs, &target);
        match cache::load(&key) {
            Ok(Some(entry)) => {
                let at = Instant::now();
                let mut module = entry.ir;
                inputs.name_files(&mut module);
                let module = Arc::new(module);
                // Loaded here, so that an entry the loader refuses is one more reason to
                // compile from source rather than an error.
                match codegen_jit::load_mapped(entry.program, module.clone()) {
                    Ok(program) => {
                        link = at.elapsed();
                        return Ok(Loaded {
                            file: file.to_owned(),
                            config,
                            texts: file_texts(&module, &inputs),
                            module,
                            calls_model: entry.calls_model,
                            engine,
                            program: Some(program),
                            every: false,
                            from_cache: true,
                            cache_note,
                            timings: Timings {
                                front_end: started.elapsed().saturating_sub(link),
                                code_generation: Duration::ZERO,
                                link,
                            },
                        });
                    }
                    Err(why) => cache_note = Some(format!("the cache entry was not used: {why}")),
                }
                link = at.elapsed();
            }
            Ok(None) => {}
            Err(why) => cache_note = Some(format!("the cache entry was not used: {why}")),
        }
    }
    let module = compile(&load_program(&inputs)?)?;
    from_module(
        file, engine, config, &inputs, module, cache_note, started, link,
    )
}

/// [`load`] for `sapc run --unsafe-ignore-provenance` ([`crate::compile_ignoring_provenance`]),
/// never from the build cache: the loaded program, and the errors ignored, as warnings.
pub fn load_ignoring_provenance(
    file: &Path,
    engine: Engine,
) -> Result<(Loaded, Diagnostics), Failure> {
    let started = Instant::now();
    let config = load_config(file)?;
    let inputs = cache::Inputs::read(file)?;
    let (module, ignored) = crate::compile_ignoring_provenance(&load_program(&inputs)?)?;
    let loaded = from_module(
        file,
        engine,
        config,
        &inputs,
        module,
        None,
        started,
        Duration::ZERO,
    )?;
    Ok((loaded, ignored))
}

#[allow(clippy::too_many_arguments)]
fn from_module(
    file: &Path,
    engine: Engine,
    config: Config,
    inputs: &cache::Inputs,
    module: ir::Module,
    cache_note: Option<String>,
    started: Instant,
    link: Duration,
) -> Result<Loaded, Failure> {
    let calls_model = module.calls_model();
    let module = Arc::new(module);
    let front_end = started.elapsed().saturating_sub(link);
    let mut loaded = Loaded {
        file: file.to_owned(),
        config,
        texts: file_texts(&module, inputs),
        module,
        calls_model,
        engine,
        program: None,
        every: false,
        from_cache: false,
        cache_note,
        timings: Timings {
            front_end,
            ..Timings::default()
        },
    };
    loaded.compile(false)?;
    Ok(loaded)
}

/// Loads `file` so that any of its functions can be called ([`Loaded::call`]), `main`
/// included: every function is compiled, from source, and a provider is made if any of
/// them can call the model.
pub fn load_all(file: &Path) -> Result<Loaded, Failure> {
    from_source(file, |module| {
        let every = vec![true; module.functions.len()];
        Ok((module.reaches_model(&every), module))
    })
}

/// Loads `file` to serve its `export fn`s: compiled from source, with no `main` (what is
/// served is what the exports reach), calling the model only if an export can.
pub fn load_exports(file: &Path) -> Result<Loaded, Failure> {
    from_source(file, |module| {
        if module.exports.is_empty() {
            return Err(Failure::Error(format!(
                "`{}` exports no function: mark the functions to offer with `export fn`",
                file.display()
            )));
        }
        let calls_model = module.reaches_model(&module.reachable_from(&module.exports));
        Ok((
            calls_model,
            ir::Module {
                main: None,
                ..module
            },
        ))
    })
}

/// Every function of `file`'s program compiled from source; `prepare` says whether
/// what will run calls the model, and may change the module.
fn from_source(
    file: &Path,
    prepare: impl FnOnce(ir::Module) -> Result<(bool, ir::Module), Failure>,
) -> Result<Loaded, Failure> {
    let started = Instant::now();
    let config = load_config(file)?;
    let inputs = cache::Inputs::read(file)?;
    let (calls_model, module) = prepare(compile(&load_program(&inputs)?)?)?;
    let module = Arc::new(module);
    let mut loaded = Loaded {
        file: file.to_owned(),
        config,
        texts: file_texts(&module, &inputs),
        module,
        calls_model,
        engine: Engine::Jit,
        program: None,
        every: false,
        from_cache: false,
        cache_note: None,
        timings: Timings {
            front_end: started.elapsed(),
            ..Timings::default()
        },
    };
    loaded.compile(true)?;
    Ok(loaded)
}

impl Loaded {
    /// Compiles what `main` reaches, or `every` function.
    fn compile(&mut self, every: bool) -> Result<(), Failure> {
        if self.engine == Engine::Eval {
            return Ok(());
        }
        let at = Instant::now();
        // Without a `main`, every function is compiled (`ir::Module::reachable`); the
        // functions keep their places, so the code serves the module with its `main`.
        self.every = every;
        let native = if every && self.module.main.is_some() {
            codegen_jit::compile_native(&ir::Module {
                main: None,
                ..(*self.module).clone()
            })?
        } else {
            codegen_jit::compile_native(&self.module)?
        };
        self.timings.code_generation = at.elapsed();
        let at = Instant::now();
        self.program = Some(codegen_jit::load(&native, self.module.clone())?);
        self.timings.link = at.elapsed();
        Ok(())
    }

    /// The host a call runs in, from `options` and `sap.toml`: externs (a declaration
    /// the host cannot serve is a located error), limits and budgets (the time budget
    /// counted from `started`), the trace, the journal, tools and grants, and the
    /// model's runtime when the program calls the model.
    pub fn host(
        &self,
        options: &Options,
        tokio: &Tokio,
        started: Instant,
    ) -> Result<(Host, Option<Arc<Runtime>>), Failure> {
        self.host_with(options, |_| {}, tokio, started)
    }

    /// [`Loaded::host`], with a front end's own externs for the program's `extern fn`
    /// declarations, registered by `add` (after the calculator's).
    pub fn host_with(
        &self,
        options: &Options,
        add: impl FnOnce(&mut Externs),
        tokio: &Tokio,
        started: Instant,
    ) -> Result<(Host, Option<Arc<Runtime>>), Failure> {
        self.host_in(options, add, None, tokio, started)
    }

    /// [`Loaded::host`] for a run with a client (an editor): asked when a standard
    /// tool is outside the grants, and reading and writing files when it offers to.
    pub fn host_for_client(
        &self,
        options: &Options,
        client: Arc<dyn tools::client::Client>,
        tokio: &Tokio,
        started: Instant,
    ) -> Result<(Host, Option<Arc<Runtime>>), Failure> {
        self.host_in(options, |_| {}, Some(client), tokio, started)
    }

    fn host_in(
        &self,
        options: &Options,
        add: impl FnOnce(&mut Externs),
        client: Option<Arc<dyn tools::client::Client>>,
        tokio: &Tokio,
        started: Instant,
    ) -> Result<(Host, Option<Arc<Runtime>>), Failure> {
        let externs =
            checked_externs_with(&self.module, add).map_err(|e| self.located(&e, false))?;
        let (host, runtime) = host_for(
            &self.file,
            options,
            &self.config,
            self.module.clone(),
            externs,
            client,
            self.calls_model,
            started,
            tokio,
        )?;
        let sources = self
            .texts
            .iter()
            .map(|t| t.as_ref().map(|(_, text)| text.clone()))
            .collect();
        Ok((host.with_sources(sources), runtime))
    }

    /// An error of the program's run, rendered at its place with the sap call stack
    /// (coloured for a terminal when `color`).
    pub fn located(&self, e: &ExecError, color: bool) -> Failure {
        Failure::Located(render_error(&self.texts, e, color))
    }

    /// Runs `main` on a thread with a big stack.
    pub fn run_main(&self, host: &Host) -> Result<Value, ExecError> {
        match &self.program {
            Some(program) => on_big_stack(|| program.run_main(host)),
            None => on_big_stack(|| Evaluator::new(host).run_main()),
        }
    }

    /// The function called `name`, if the program has one: `main`, or any function of
    /// the main file or of the modules it uses. (Calling one that `main` does not reach
    /// needs the program loaded by [`load_all`].)
    pub fn function(&self, host: &Host, name: &str) -> Option<Function> {
        let (id, f) = self
            .module
            .functions
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)?;
        Some(Function {
            id: id as FuncId,
            name: f.name.clone(),
            doc: f.doc.clone(),
            params: f
                .params
                .iter()
                .filter(|p| p.ty != Type::Context)
                .map(|p| ParamDesc {
                    name: p.name.clone(),
                    doc: p.doc.clone(),
                    ty: host.desc(&p.ty),
                })
                .collect(),
            ret: host.desc(&f.ret),
        })
    }

    /// Calls `function` with arguments by name, as JSON: each decoded into its
    /// parameter's type (an `Option` left out is `None`). An argument the function does
    /// not take, or one that does not fit, is an error naming it, before anything runs.
    pub fn call(
        &self,
        host: &Host,
        function: &Function,
        arguments: &Map<String, JsonValue>,
    ) -> Result<Value, CallError> {
        on_big_stack(|| self.call_on_this_thread(host, function, arguments, None))
    }

    /// [`Loaded::call`] on the calling thread, which must have the big stack compiled
    /// code needs: one of `codegen_jit::BigStacks`' threads, or `on_big_stack`'s. A
    /// `Context` parameter gets `context` (kept by the caller between calls), or a new
    /// one.
    pub fn call_on_this_thread(
        &self,
        host: &Host,
        function: &Function,
        arguments: &Map<String, JsonValue>,
        context: Option<&runtime::Context>,
    ) -> Result<Value, CallError> {
        let values = arguments_of(function, arguments).map_err(CallError::Arguments)?;
        if !self.every && !self.module.reachable()[function.id as usize] {
            return Err(CallError::Arguments(format!(
                "`{}` was not compiled: `main` does not reach it (load the program with \
                 `session::load_all` to call any function)",
                function.name
            )));
        }
        let program = self
            .program
            .as_ref()
            .ok_or_else(|| CallError::Arguments("the evaluator runs `main` only".to_owned()))?;
        program
            .call_in(host, function.id, values, context)
            .map_err(CallError::Run)
    }
}

/// Why a call did not give a value.
#[derive(Debug)]
pub enum CallError {
    /// The arguments do not fit the function: nothing ran.
    Arguments(String),
    /// The run failed (render it with [`Loaded::located`]).
    Run(ExecError),
}

/// The values of `function`'s parameters from JSON arguments by name.
pub fn arguments_of(
    function: &Function,
    arguments: &Map<String, JsonValue>,
) -> Result<Vec<Value>, String> {
    if let Some(unknown) = arguments
        .keys()
        .find(|k| !function.params.iter().any(|p| &p.name == *k))
    {
        let takes: Vec<&str> = function.params.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "`{}` takes no argument `{unknown}` (it takes: {})",
            function.name,
            if takes.is_empty() {
                "none".to_owned()
            } else {
                takes.join(", ")
            }
        ));
    }
    function
        .params
        .iter()
        .map(|p| {
            let given = arguments.get(&p.name).cloned().unwrap_or(JsonValue::Null);
            decode(&p.ty, &given)
                .map_err(|e| format!("argument `{}` of `{}`: {e}", p.name, function.name))
        })
        .collect()
}
