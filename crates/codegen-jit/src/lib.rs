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

/// The stack a program runs on: address space reserved, pages touched as calls go
/// deeper. The depth limit (`Limits::max_depth`, 10,000 calls by default) stops a
/// program long before the evaluator's frames, the largest, reach its end.
const BIG_STACK: usize = 1 << 30;

/// Runs `f` on a stack large enough for deep sap recursion, on this thread: a stack of
/// its own is switched to and back (a thread of its own, spawned and joined, cost a
/// fifth of a millisecond of every run's start). Where the address space is too
/// limited for it (`ulimit -v`), `f` runs on a smaller stack, or on this thread's own.
pub fn on_big_stack<T>(f: impl FnOnce() -> T) -> T {
    use corosensei::stack::DefaultStack;
    match DefaultStack::new(BIG_STACK).or_else(|_| DefaultStack::new(BIG_STACK / 16)) {
        Ok(stack) => corosensei::on_stack(stack, f),
        Err(_) => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::on_big_stack;

    /// About a kilobyte of stack per call.
    fn deep(n: usize) -> u64 {
        let frame = std::hint::black_box([n as u8; 1024]);
        if n == 0 {
            0
        } else {
            deep(n - 1) + u64::from(frame[n % 1024] == 0)
        }
    }

    #[test]
    fn a_big_stack_holds_what_a_thread_stack_does_not() {
        // 100,000 kilobyte frames: 50 times the 2 MB of a test's thread.
        let zeros = (1..=100_000).filter(|n| n % 256 == 0).count() as u64;
        assert_eq!(on_big_stack(|| deep(100_000)), zeros);
        // The stack is switched back: this thread goes on as before.
        assert_eq!(deep(10), 0);
    }

    #[test]
    fn a_panic_on_the_big_stack_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| on_big_stack(|| panic!("on the big stack")));
        let message = caught.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"on the big stack"));
    }
}
