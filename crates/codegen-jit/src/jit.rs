//! The JIT: links a compiled program (`codegen::NativeProgram`) into this process's
//! memory with Cranelift's JIT linker — the intrinsics by their addresses — makes its
//! pins (`abi::Pin`, the table compiled code reads through `Env::pins`), and runs it. A program comes straight from the code
//! generator ([`compile`]) or from the build cache ([`load`]); either way nothing is
//! compiled here.
//!
//! Heap values cross between Rust and compiled code as object words (see `heap.rs`):
//! arguments are converted in, results converted out and released here. An error
//! returns at once without giving back the counts the failing frames hold (the failed
//! run ends; a failed tool call of a plan leaves them behind).

use std::sync::Arc;

use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId as ClifFuncId, Module as _};
use ir::{FuncId, Module, Type};
use runtime::{Context, Value};

use crate::abi::{Env, ParallelDesc, Pins, Program};
use crate::codegen::{self, Layout, NativeProgram};
use crate::heap::{self, Slot, from_value, new_obj, to_value};
use crate::host::{ExecError, Host, main_arguments};
use crate::intrinsics::Intr;
use crate::ops::collect_iterations;
use crate::raw::code::Code;

/// A program in memory, ready to run on any number of threads at once.
pub struct JitProgram {
    code: Code,
    /// The most stack one sap call takes.
    frame: usize,
    pins: Pins,
    ir: Arc<Module>,
}

/// Compiles every function `main` can reach to native code and links it.
pub fn compile(module: Arc<Module>) -> Result<JitProgram, String> {
    let native = compile_native(&module)?;
    load(&native, module)
}

/// Compiles every function `main` can reach to native code for this machine, without
/// linking it (what the build cache stores).
pub fn compile_native(module: &Module) -> Result<NativeProgram, String> {
    let isa = codegen::host_isa()?;
    codegen::compile(&*isa, module)
}

/// What code compiled here needs of a machine: its target triple and CPU features.
pub fn target() -> Result<String, String> {
    Ok(codegen::target_id(&*codegen::host_isa()?))
}

/// Links `native`, compiled from `module` (whose function bodies it no longer needs:
/// see `ir::Module::without_bodies`), into this process.
pub fn load(native: &NativeProgram, module: Arc<Module>) -> Result<JitProgram, String> {
    let isa = codegen::host_isa()?;
    if native.target != codegen::target_id(&*isa) {
        return Err(format!(
            "the program was compiled for `{}`, not this machine (`{}`)",
            native.target,
            codegen::target_id(&*isa)
        ));
    }
    let decls = codegen::declarations(&*isa, &module);
    let pins = Pins::make(&native.pins);
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for which in Intr::ALL {
        builder.symbol(which.symbol(), which.address());
    }
    let mut jit = JITModule::new(builder);
    for (i, d) in decls.iter().enumerate() {
        let id = jit
            .declare_function(&d.name, d.linkage, &d.signature)
            .map_err(|e| e.to_string())?;
        debug_assert_eq!(id.as_u32() as usize, i);
    }
    for f in &native.functions {
        jit.define_function_bytes(
            ClifFuncId::from_u32(f.decl),
            f.alignment,
            &f.code,
            &f.relocs,
        )
        .map_err(|e| e.to_string())?;
    }
    jit.finalize_definitions().map_err(|e| e.to_string())?;
    let layout = Layout::new(module.functions.len());
    let defined: std::collections::HashSet<u32> = native.functions.iter().map(|f| f.decl).collect();
    let trampolines = module
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let decl = (layout.trampolines + i) as u32;
            defined
                .contains(&decl)
                .then(|| (ClifFuncId::from_u32(decl), f.params.len()))
        })
        .collect();
    Ok(JitProgram {
        frame: native.frame_bytes(),
        code: Code::new(jit, trampolines),
        pins,
        ir: module,
    })
}

impl JitProgram {
    /// Calls the function `f` with `args` (its `Context` parameters get a new context),
    /// as a host calls an exported function; on a thread with a big stack.
    pub fn call(&self, host: &Host, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError> {
        self.call_function(host, 0, host.limits.max_loop_iterations, f, args)
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

impl Program for JitProgram {
    fn pins(&self) -> *const usize {
        self.pins.addresses.as_ptr()
    }

    fn frame_bytes(&self) -> usize {
        self.frame
    }

    fn call_function(
        &self,
        host: &Host,
        depth: u64,
        max_iterations: u64,
        f: FuncId,
        args: Vec<Value>,
    ) -> Result<Value, ExecError> {
        let func = &self.ir.functions[f as usize];
        let mut values = args.into_iter();
        let raw: Vec<i64> = func
            .params
            .iter()
            .map(|p| match &p.ty {
                Type::Context => new_obj(Slot::Ctx(Context::new())),
                t => from_value(t, values.next().unwrap_or(Value::Unit)),
            })
            .collect();
        let mut env = Env::new(host, self);
        env.depth = depth;
        env.max_iterations = max_iterations;
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
        let remaining = env.max_iterations.saturating_sub(env.iterations);
        let used = std::sync::atomic::AtomicU64::new(0);
        let results = runtime::tasks::fan_out(
            items.len(),
            host.limits.concurrency,
            |i| {
                let mut child = Env::new(host, self);
                child.depth = depth;
                child.max_iterations = remaining;
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
                used.fetch_add(child.iterations, std::sync::atomic::Ordering::Relaxed);
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
        env.iterations = env.iterations.saturating_add(used.into_inner());
        Ok((collect_iterations(results)?, results_origin.into_inner()))
    }
}
