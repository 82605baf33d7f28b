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
//!   runtime), `intrinsics` (the runtime functions compiled code calls, declared once),
//!   `codegen` (IR → Cranelift machine code, function by function) and [`link`] (the
//!   functions laid out in one position-independent piece);
//! - [`native_module`]: the build cache's file, whose code is mapped as it is.
//!
//! Layers point one way: `eval` → `ops`, `heap`, `host`; `jit` → `link`, `codegen` →
//! `intrinsics` → `abi`, `heap`, `ops`, `host`. `unsafe` is denied everywhere except
//! `raw` (`raw::heap`, re-exported as `heap`; `raw::code`, which calls compiled code;
//! `raw::image`, which maps it; `raw::alloc`).

#![deny(unsafe_code)]

mod abi;
mod codegen;
pub mod eval;
pub mod host;
mod intrinsics;
pub mod jit;
mod jsonpath;
pub mod link;
pub mod native_module;
mod ops;
#[allow(unsafe_code)]
mod raw;
mod toposort;

use raw::heap;

pub use codegen::NativeProgram;
pub use eval::Evaluator;
pub use host::{ExecError, ExternFn, Externs, Host, Limits, StackFrame, Tokio, type_desc};
pub use jit::{JitProgram, MappedProgram, compile, compile_native, load, load_mapped, target};
pub use raw::alloc::Allocator;

/// The program's stack: 1 GiB reserved, committed as it is touched.
const BIG_STACK: usize = 1 << 30;

/// Runs `f` on a thread with a stack large enough for deep sap recursion (the limit in
/// `Limits::max_depth` stops it before the stack ends). A thread of its own rather than
/// a stack switched to on this one (`corosensei::on_stack`, tried): that saved 0.1 ms
/// of a run, but a stack overflowed past a raised `--max-depth` then ends in a bare
/// SIGSEGV instead of Rust's "has overflowed its stack".
pub fn on_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("sap-main".to_owned())
            .stack_size(BIG_STACK)
            .spawn_scoped(scope, || {
                runtime::tasks::on_stack_of(BIG_STACK);
                f()
            })
            .expect("spawn the program's thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Threads with the big stack, kept between calls: what a front end that calls a
/// program's functions many times uses instead of [`on_big_stack`], whose thread per call
/// costs more than a short call (a Python call's 100 µs were mostly that). A job goes to
/// an idle thread, or to a new one when none is idle, so calls at once each get their own;
/// a thread idle for a minute ends.
#[derive(Default)]
pub struct BigStacks {
    idle: std::sync::Arc<std::sync::Mutex<Vec<std::sync::mpsc::Sender<Job>>>>,
}

type Job = Box<dyn FnOnce() + Send>;

impl BigStacks {
    /// Runs `job` on one of the threads (the caller does not wait; a job sends its own
    /// result back). A job that panics ends its thread, not the process.
    pub fn run(&self, mut job: Job) {
        loop {
            let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some(thread) = idle else { break };
            match thread.send(job) {
                Ok(()) => return,
                // It had ended: try the next one.
                Err(std::sync::mpsc::SendError(back)) => job = back,
            }
        }
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let idle = self.idle.clone();
        let spawned = std::thread::Builder::new()
            .name("sap-call".to_owned())
            .stack_size(BIG_STACK)
            .spawn(move || {
                runtime::tasks::on_stack_of(BIG_STACK);
                let mut next = Some(job);
                while let Some(job) = next.take() {
                    job();
                    idle.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(tx.clone());
                    next = rx.recv_timeout(std::time::Duration::from_secs(60)).ok();
                }
            });
        if let Err(e) = spawned {
            panic!("spawn a thread for a call: {e}");
        }
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
        // And this thread goes on as before.
        assert_eq!(deep(10), 0);
    }

    #[test]
    fn a_panic_on_the_big_stack_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| on_big_stack(|| panic!("on the big stack")));
        let message = caught.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"on the big stack"));
    }
}
