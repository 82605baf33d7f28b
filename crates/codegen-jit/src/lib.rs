//! Execution of sap's IR.
//!
//! - [`host`]: what a running program is given — the module, the LLM runtime, externs,
//!   limits, output — and every operation that is not arithmetic or control flow
//!   (builtins, LLM calls, extern calls), shared by every engine;
//! - [`eval`]: the reference evaluator, which defines each operation's meaning and is
//!   the oracle the native code generator is tested against (`--engine eval`);
//! - [`jit`]: the Cranelift backend, which compiles the IR to native code (what
//!   `sapc run` uses), built from `heap` (objects and native lists: the one module that
//!   reads raw pointers), `abi` (the `Env` and descriptors compiled code shares with the
//!   runtime), `intrinsics` (the runtime functions compiled code calls, declared once)
//!   and `codegen` (IR → Cranelift, for any `cranelift_module::Module`).
//!
//! Layers point one way: `eval` → `ops`, `heap`, `host`; `jit` → `codegen` →
//! `intrinsics` → `abi`, `heap`, `ops`, `host`. `unsafe` is denied everywhere except
//! `raw` (`raw::heap`, re-exported as `heap`, and `raw::code`, which calls compiled code).

#![deny(unsafe_code)]

mod abi;
mod codegen;
pub mod eval;
pub mod host;
mod intrinsics;
pub mod jit;
mod jsonpath;
pub mod native_module;
mod ops;
#[allow(unsafe_code)]
mod raw;
mod toposort;

use raw::heap;

pub use codegen::NativeProgram;
pub use eval::Evaluator;
pub use host::{ExecError, Externs, Host, Limits, StackFrame, Tokio};
pub use jit::{JitProgram, compile, compile_native, load, target};

/// Runs `f` on a thread with a stack large enough for deep sap recursion (the limit in
/// `Limits::max_depth` stops it before the stack ends).
pub fn on_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("sap-main".to_owned())
            .stack_size(1 << 30)
            .spawn_scoped(scope, f)
            .expect("spawn the program's thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
