//! The JIT: puts a compiled program (`codegen::NativeProgram`) into this process's
//! memory — its functions laid out in one piece by `link.rs`, copied into executable
//! pages, or mapped straight from a build cache entry (`native_module.rs`) — makes its
//! pins (`abi::Pin`, the table compiled code reads through `Env::pins`), and runs it.
//! Nothing here is compiled and nothing in the code is patched: it reaches intrinsics
//! through `Env::intrinsics` and pins through `Env::pins`.
//!
//! Heap values cross between Rust and compiled code as object words (see `heap.rs`):
//! arguments are converted in, results converted out and released here. An error
//! returns at once without giving back the counts the failing frames hold (the failed
//! run ends; a failed tool call of a plan leaves them behind).

use std::sync::Arc;

use ir::{FuncId, Module, Type};
use runtime::{Context, Value};

use crate::abi::{Env, ParallelDesc, Pin, Pins, Program, Site, Sites};
use crate::codegen::{self, Layout, NativeProgram};
use crate::heap::{self, Slot, from_value, new_obj, to_value};
use crate::host::{ExecError, Host, main_arguments};
use crate::link::{self, ABSENT};
use crate::ops::collect_iterations;
use crate::raw::code::Code;
use crate::raw::image::Image;

/// A program in memory, ready to run on any number of threads at once.
pub struct JitProgram {
    code: Code,
    /// The most stack one sap call takes.
    frame: usize,
    pins: Pins,
    sites: Sites,
    ir: Arc<Module>,
}

/// A program's code in executable memory, not yet ready to run: what the build cache
/// gives (`native_module::read`).
pub struct MappedProgram {
    /// The target the code was compiled for (`codegen::target_id`).
    pub target: String,
    pub image: Image,
    /// Where each declared function starts in the image (`link::Laid::entries`).
    pub entries: Vec<u32>,
    /// The most stack one call of any of its functions takes.
    pub frame: u32,
    pub pins: Vec<Pin>,
    pub sites: Sites,
}

/// Compiles every function `main` can reach to native code and loads it.
pub fn compile(module: Arc<Module>) -> Result<JitProgram, String> {
    let native = compile_native(&module)?;
    load(&native, module)
}

/// Compiles every function `main` can reach to native code for this machine, without
/// loading it (what the build cache stores).
pub fn compile_native(module: &Module) -> Result<NativeProgram, String> {
    let isa = codegen::host_isa()?;
    codegen::compile(&*isa, module)
}

/// What code compiled here needs of a machine: its target triple and CPU features.
pub fn target() -> Result<String, String> {
    Ok(codegen::target_id(&*codegen::host_isa()?))
}

/// Loads `native`, compiled from `module` (whose function bodies it no longer needs:
/// see `ir::Module::without_bodies`), into this process.
pub fn load(native: &NativeProgram, module: Arc<Module>) -> Result<JitProgram, String> {
    let laid = link::lay_out(native, module.functions.len())?;
    let image = Image::copy_of(&laid.code).map_err(|e| format!("cannot map the code: {e}"))?;
    load_mapped(
        MappedProgram {
            target: native.target.clone(),
            image,
            entries: laid.entries,
            frame: native.frame_bytes() as u32,
            pins: native.pins.clone(),
            sites: Sites::decoded(native.sites.clone()),
        },
        module,
    )
}

/// Makes `program`, compiled from `module`, ready to run.
pub fn load_mapped(program: MappedProgram, module: Arc<Module>) -> Result<JitProgram, String> {
    suits_this_machine(&program.target)?;
    let layout = Layout::new(module.functions.len());
    if program.entries.len() != layout.declared {
        return Err(format!(
            "the code has {} entries, not the {} of its module",
            program.entries.len(),
            layout.declared
        ));
    }
    let size = program.image.bytes().len();
    if let Some(f) = program
        .entries
        .iter()
        .position(|&e| e != ABSENT && e as usize >= size)
    {
        return Err(format!("function {f} starts outside the code"));
    }
    let trampolines = module
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let entry = program.entries[layout.trampolines + i];
            (entry != ABSENT).then_some((entry, f.params.len()))
        })
        .collect();
    Ok(JitProgram {
        frame: program.frame as usize,
        code: Code::new(program.image, trampolines),
        pins: Pins::make(program.pins),
        sites: program.sites,
        ir: module,
    })
}

/// Fails unless code compiled for `target` runs here.
fn suits_this_machine(target: &str) -> Result<(), String> {
    let isa = codegen::host_isa()?;
    let here = codegen::target_id(&*isa);
    if target != here {
        return Err(format!(
            "the program was compiled for `{target}`, not this machine (`{here}`)"
        ));
    }
    Ok(())
}

impl JitProgram {
    /// Calls the function `f` with `args` (its `Context` parameters get a new context),
    /// as a host calls an exported function; on a thread with a big stack.
    pub fn call(&self, host: &Host, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError> {
        self.call_in(host, f, args, None)
    }

    /// [`JitProgram::call`], its `Context` parameters given `context` (a new one when
    /// `None`): a caller that keeps a context between calls hands it in.
    pub fn call_in(
        &self,
        host: &Host,
        f: FuncId,
        args: Vec<Value>,
        context: Option<&Context>,
    ) -> Result<Value, ExecError> {
        self.run_function(host, 0, host.limits.max_loop_iterations, f, args, context)
    }

    /// Runs `main` (call it on a thread with a big stack: see `on_big_stack`).
    pub fn run_main(&self, host: &Host) -> Result<Value, ExecError> {
        let main = self
            .ir
            .main
            .ok_or_else(|| ExecError::new("the program has no `main` function", None))?;
        let f = &self.ir.functions[main as usize];
        let mut arguments = main_arguments(host, f)?.into_iter();
        let args: Vec<i64> = f
            .params
            .iter()
            .map(|p| {
                if p.ty == Type::Context {
                    new_obj(Slot::Ctx(Context::new()))
                } else {
                    let value = arguments.next().expect("a value per parameter");
                    from_value(&p.ty, value)
                }
            })
            .collect();
        let mut env = Env::new(host, self);
        env.fit_stack();
        let raw = self.code.call(main, &mut env, &args);
        for (p, a) in f.params.iter().zip(args) {
            if p.ty.is_heap() {
                heap::release(a);
            }
        }
        if env.failed != 0 {
            return Err(env
                .error
                .take()
                .unwrap_or_else(|| ExecError::new("the program failed", None)));
        }
        let value = to_value(host, &f.ret, raw);
        if f.ret.is_heap() {
            heap::release(raw);
        }
        Ok(value)
    }
}

impl JitProgram {
    fn run_function(
        &self,
        host: &Host,
        depth: u64,
        max_iterations: u64,
        f: FuncId,
        args: Vec<Value>,
        context: Option<&Context>,
    ) -> Result<Value, ExecError> {
        let func = &self.ir.functions[f as usize];
        let mut values = args.into_iter();
        let raw: Vec<i64> = func
            .params
            .iter()
            .map(|p| match &p.ty {
                Type::Context => new_obj(Slot::Ctx(context.cloned().unwrap_or_default())),
                t => from_value(t, values.next().unwrap_or(Value::Unit)),
            })
            .collect();
        let mut env = Env::new(host, self);
        env.depth = depth;
        env.max_iterations = max_iterations;
        env.iterations_left = max_iterations;
        env.fit_stack();
        let out = self.code.call(f, &mut env, &raw);
        for (p, a) in func.params.iter().zip(raw) {
            if p.ty.is_heap() {
                heap::release(a);
            }
        }
        if env.failed != 0 {
            return Err(env
                .error
                .take()
                .unwrap_or_else(|| ExecError::new("a tool failed", Some(func.span))));
        }
        let value = to_value(host, &func.ret, out);
        if func.ret.is_heap() {
            heap::release(out);
        }
        Ok(value)
    }
}

impl Program for JitProgram {
    fn pins(&self) -> *const usize {
        self.pins.addresses.as_ptr()
    }

    fn frame_bytes(&self) -> usize {
        self.frame
    }

    fn intrinsics(&self) -> *const usize {
        crate::intrinsics::table()
    }

    fn site(&self, index: usize) -> Option<&Site> {
        self.sites.get(index)
    }

    fn call_function(
        &self,
        host: &Host,
        depth: u64,
        max_iterations: u64,
        f: FuncId,
        args: Vec<Value>,
    ) -> Result<Value, ExecError> {
        self.run_function(host, depth, max_iterations, f, args, None)
    }

    fn run_parallel(
        &self,
        host: &Host,
        env: &mut Env<'_>,
        desc: &ParallelDesc,
        captured: &[i64],
        items: &[Value],
        origin: u32,
    ) -> Result<(Vec<Value>, u32), ExecError> {
        let depth = env.depth;
        let results_origin = std::sync::atomic::AtomicU32::new(0);
        let remaining = env.iterations_left;
        let used = std::sync::atomic::AtomicU64::new(0);
        let results = runtime::tasks::fan_out(
            items.len(),
            host.limits.concurrency,
            |i| {
                let mut child = Env::new(host, self);
                child.depth = depth;
                child.max_iterations = remaining;
                child.iterations_left = remaining;
                child.fit_stack();
                // The body takes the captures, then the element.
                let mut args = captured.to_vec();
                let item = from_value(&desc.elem, items[i].clone());
                heap::mark_value(&desc.elem, item, origin);
                args.push(item);
                let raw = self.code.call(desc.body, &mut child, &args);
                if desc.elem.is_heap() {
                    heap::release(*args.last().expect("the element"));
                }
                used.fetch_add(
                    child.iterations_used(),
                    std::sync::atomic::Ordering::Relaxed,
                );
                if child.failed != 0 {
                    Err(child.error.take().unwrap_or_else(|| {
                        ExecError::new("a parallel iteration failed", desc.span)
                    }))
                } else {
                    let o = heap::deep_origin(&desc.result, raw);
                    if o != 0 {
                        let _ = results_origin.compare_exchange(
                            0,
                            o,
                            std::sync::atomic::Ordering::Relaxed,
                            std::sync::atomic::Ordering::Relaxed,
                        );
                    }
                    let v = to_value(host, &desc.result, raw);
                    if desc.result.is_heap() {
                        heap::release(raw);
                    }
                    Ok(v)
                }
            },
            Result::is_err,
        );
        env.iterations_left = env.iterations_left.saturating_sub(used.into_inner());
        Ok((collect_iterations(results)?, results_origin.into_inner()))
    }
}
