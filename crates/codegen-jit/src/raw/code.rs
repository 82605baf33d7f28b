//! Calling compiled code. Calling a function pointer into compiled code cannot be
//! checked by Rust; what makes it sound is that each pointer is the entry of a
//! trampoline in the executable image kept alive beside it, declared by `codegen` as
//! `fn(env, args: *const i64) -> i64`, and that exactly as many arguments as its
//! function's parameters are passed (checked here).

use ir::FuncId;

use super::image::Image;
use crate::abi::Env;

type Trampoline = unsafe extern "C" fn(*mut std::ffi::c_void, *const i64) -> i64;

/// Executable code, and the trampoline of every IR function with its arity.
pub(crate) struct Code {
    _image: Image,
    /// `None` for a function `main` cannot reach, which was not compiled.
    trampolines: Vec<Option<(Trampoline, usize)>>,
}

// SAFETY: the code is immutable once mapped and reentrant: it keeps its state in
// the `Env` each thread passes, and shares objects only through atomic counts.
unsafe impl Send for Code {}
unsafe impl Sync for Code {}

impl Code {
    /// Takes `image` and the offset in it of the trampoline (by IR function) of each
    /// function it defines, with the function's arity. The caller guarantees that each
    /// offset is the start of a trampoline `codegen` compiled (`link::lay_out` placed
    /// it there).
    pub(crate) fn new(image: Image, trampolines: Vec<Option<(u32, usize)>>) -> Code {
        let trampolines = trampolines
            .into_iter()
            .map(|t| {
                t.map(|(offset, arity)| {
                    let code = image.at(offset);
                    // SAFETY: `codegen` compiled every trampoline with this signature.
                    let f = unsafe { std::mem::transmute::<*const u8, Trampoline>(code) };
                    (f, arity)
                })
            })
            .collect();
        Code {
            _image: image,
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
