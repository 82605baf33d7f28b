//! Calling compiled code. Calling a function pointer the JIT made cannot be checked by
//! Rust; what makes it sound is that each pointer is a finalized trampoline of the
//! module kept alive beside it, declared by `codegen` as `fn(env, args: *const i64) ->
//! i64`, and that exactly as many arguments as its function's parameters are passed
//! (checked here).

use cranelift_jit::JITModule;
use ir::FuncId;

use crate::abi::Env;

type Trampoline = unsafe extern "C" fn(*mut std::ffi::c_void, *const i64) -> i64;

/// Finalized code, and the trampoline of every IR function with its arity.
pub(crate) struct Code {
    _module: JITModule,
    /// `None` for a function `main` cannot reach, which was not compiled.
    trampolines: Vec<Option<(Trampoline, usize)>>,
}

// SAFETY: the code is immutable once finalized and reentrant: it keeps its state in
// the `Env` each thread passes, and shares objects only through atomic counts.
unsafe impl Send for Code {}
unsafe impl Sync for Code {}

impl Code {
    /// Takes the finalized `module` and the trampoline (by IR function) of each
    /// function it defines, with the function's arity.
    pub(crate) fn new(
        module: JITModule,
        trampolines: Vec<Option<(cranelift_module::FuncId, usize)>>,
    ) -> Code {
        let trampolines = trampolines
            .into_iter()
            .map(|t| {
                t.map(|(id, arity)| {
                    let code = module.get_finalized_function(id);
                    // SAFETY: `codegen` compiled every trampoline with this signature.
                    let f = unsafe { std::mem::transmute::<*const u8, Trampoline>(code) };
                    (f, arity)
                })
            })
            .collect();
        Code {
            _module: module,
            trampolines,
        }
    }

    /// Calls function `f` with `args`, one word per parameter (owned by the caller),
    /// and gives its result word (owned by the caller).
    pub(crate) fn call(&self, f: FuncId, env: &mut Env<'_>, args: &[i64]) -> i64 {
        let Some((trampoline, arity)) = self.trampolines.get(f as usize).copied().flatten() else {
            // Nothing calls a function `main` cannot reach; if something did, it is a
            // bug in the reachability analysis, reported as an error of the run.
            env.fail(crate::host::ExecError::new(
                format!("internal error: function {f} was not compiled"),
                None,
            ));
            return 0;
        };
        assert_eq!(args.len(), arity, "the arguments of a compiled function");
        // SAFETY: the trampoline reads `arity` words from `args` and runs compiled
        // code on `env` (see the module's comment and `heap.rs`'s contract).
        unsafe { trampoline((env as *mut Env<'_>).cast(), args.as_ptr()) }
    }
}
