//! The JIT: compiles a module with the code generator (`codegen`) into this process's
//! memory, links the intrinsics by their addresses, and runs the result.
//!
//! Heap values cross between Rust and compiled code as object words (see `heap.rs`):
//! arguments are converted in, results converted out and released here. An error
//! returns at once without giving back the counts the failing frames hold (the failed
//! run ends; a failed tool call of a plan leaves them behind).

use std::sync::Arc;

use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use ir::{FuncId, Module, Type};
use runtime::{Context, Value};

use crate::abi::{Env, ParallelDesc, Program};
use crate::codegen::{self, Keep};
use crate::heap::{self, Slot, from_value, new_obj, to_value};
use crate::host::{ExecError, Host};
use crate::intrinsics::Intr;
use crate::ops::collect_iterations;

/// A compiled module, ready to run on any number of threads at once.
pub struct JitProgram {
    code: native::Code,
    _keep: Keep,
    ir: Arc<Module>,
}

/// Compiles every function of `module` to native code.
pub fn compile(module: Arc<Module>) -> Result<JitProgram, String> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    // The IR verifier checks our code generator; tests (debug builds) keep it, release
    // builds skip its cost at start-up.
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    flags
        .set("enable_verifier", verify)
        .map_err(|e| e.to_string())?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this machine is not supported by Cranelift: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for which in Intr::ALL {
        builder.symbol(which.symbol(), which.address());
    }
    let mut jit = JITModule::new(builder);
    let program = codegen::define_program(&mut jit, &module)?;
    jit.finalize_definitions().map_err(|e| e.to_string())?;
    let arities = module.functions.iter().map(|f| f.params.len()).collect();
    Ok(JitProgram {
        code: native::Code::new(jit, &program.trampolines, arities),
        _keep: program.keep,
        ir: module,
    })
}

impl JitProgram {
    /// Runs `main` (call it on a thread with a big stack: see `on_big_stack`).
    pub fn run_main(&self, host: &Host) -> Result<Value, ExecError> {
        let main = self
            .ir
            .main
            .ok_or_else(|| ExecError::new("the program has no `main` function", None))?;
        let f = &self.ir.functions[main as usize];
        let args: Vec<i64> = f
            .params
            .iter()
            .map(|p| {
                if p.ty == Type::Context {
                    new_obj(Slot::Ctx(Context::new()))
                } else {
                    0
                }
            })
            .collect();
        let mut env = Env::new(host, self);
        let raw = self.code.call(main, &mut env, &args);
        for a in args {
            heap::release(a);
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
    ) -> Result<Vec<Value>, ExecError> {
        let depth = env.depth;
        let remaining = env.max_iterations.saturating_sub(env.iterations);
        let used = std::sync::atomic::AtomicU64::new(0);
        let results = runtime::window::sliding_window(
            items.len(),
            host.limits.concurrency,
            |i| {
                let mut child = Env::new(host, self);
                child.depth = depth;
                child.max_iterations = remaining;
                // The body takes the captures, then the element.
                let mut args = captured.to_vec();
                args.push(from_value(&desc.elem, items[i].clone()));
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
        collect_iterations(results)
    }
}

/// The glue that calls compiled code: the one place outside `heap.rs` allowed `unsafe`.
/// Calling a function pointer the JIT made cannot be checked by Rust; what makes it
/// sound is that each pointer is a finalized trampoline of the module kept alive
/// beside it, declared by `codegen` as `fn(env, args: *const i64) -> i64`, and that
/// exactly as many arguments as its function's parameters are passed (checked here).
#[allow(unsafe_code)]
mod native {
    use cranelift_jit::JITModule;
    use ir::FuncId;

    use crate::abi::Env;

    type Trampoline = unsafe extern "C" fn(*mut std::ffi::c_void, *const i64) -> i64;

    /// Finalized code, and the trampoline of every IR function with its arity.
    pub(super) struct Code {
        _module: JITModule,
        trampolines: Vec<(Trampoline, usize)>,
    }

    // SAFETY: the code is immutable once finalized and reentrant: it keeps its state in
    // the `Env` each thread passes, and shares objects only through atomic counts.
    unsafe impl Send for Code {}
    unsafe impl Sync for Code {}

    impl Code {
        /// Takes the finalized `module` and the trampolines `ids` (by IR function) that
        /// `codegen::define_program` defined in it, with their functions' arities.
        pub(super) fn new(
            module: JITModule,
            ids: &[cranelift_module::FuncId],
            arities: Vec<usize>,
        ) -> Code {
            let trampolines = ids
                .iter()
                .zip(arities)
                .map(|(id, arity)| {
                    let code = module.get_finalized_function(*id);
                    // SAFETY: `codegen` compiled every trampoline with this signature.
                    let f = unsafe { std::mem::transmute::<*const u8, Trampoline>(code) };
                    (f, arity)
                })
                .collect();
            Code {
                _module: module,
                trampolines,
            }
        }

        /// Calls function `f` with `args`, one word per parameter (owned by the caller),
        /// and gives its result word (owned by the caller).
        pub(super) fn call(&self, f: FuncId, env: &mut Env<'_>, args: &[i64]) -> i64 {
            let (trampoline, arity) = self.trampolines[f as usize];
            assert_eq!(args.len(), arity, "the arguments of a compiled function");
            // SAFETY: the trampoline reads `arity` words from `args` and runs compiled
            // code on `env` (see the module's comment and `heap.rs`'s contract).
            unsafe { trampoline((env as *mut Env<'_>).cast(), args.as_ptr()) }
        }
    }
}
