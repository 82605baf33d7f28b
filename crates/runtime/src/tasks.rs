//! Fan-out on tasks, not threads: the iterations of a `parallel for` (in both engines)
//! and the steps of a plan's layer run as stackful coroutines, a few OS threads (one per
//! core) each driving many of them.
//!
//! An iteration is ordinary code — native code from the JIT, the evaluator's recursion,
//! host calls — running on a stack of its own. When it waits for a model, a tool or the
//! network, it reaches [`block_on`], which polls the future once and, if it is not
//! ready, *suspends the coroutine*: its thread goes on with other iterations, and the
//! future's waker puts the iteration back in its thread's ready queue. So an iteration in
//! flight costs what its stack has touched and what its request holds, not an OS thread,
//! and thousands wait at once on two cores.
//!
//! - **Stacks** are reserved with `mmap` (the size of a thread's, so the depth limit
//!   holds the same) and committed page by page as they are touched; a finished
//!   iteration's stack is reused by the next one on its thread.
//! - **What is per thread of control** — the place in the program's order
//!   ([`crate::order`]) and the open frames of spans ([`crate::context`]) — is swapped in
//!   when a task resumes and out when it suspends.
//! - **Nesting**: a fan-out inside a task runs its tasks on that task's thread, and when
//!   none of them is ready the outer task suspends until one is.
//! - **Failures**: once an iteration fails, no new one starts; those in flight finish. A
//!   panic in an iteration is caught and reported as `None`, as before.
//! - **Blocking**: code that blocks its thread instead of waiting here (a synchronous
//!   host extern that sleeps, `input()`) holds up the other tasks of its thread; model
//!   calls, MCP tools and the standard tools all wait here.
//!
//! Everything here that is `unsafe` is the coroutine's access to its own yielder
//! (see [`Running`]) and the borrow the coroutines make of the caller's closure (see
//! [`fan_out`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::{context, order};

/// The stack reserved for each task: as much as a `parallel for` thread had, so
/// `--max-depth` recursion fits. Only the pages a task touches are committed.
const TASK_STACK: usize = 64 << 20;

/// The stack of each worker thread: it switches between tasks and polls their futures,
/// and runs an iteration itself when no stack could be reserved for it, so it is as
/// big as a task's (reserved, not committed).
const WORKER_STACK: usize = TASK_STACK;

thread_local! {
    /// The task this thread is running now, if any.
    static RUNNING: RefCell<Option<Running>> = const { RefCell::new(None) };
    /// The lowest address the code running now may use of its stack (the task's, or
    /// the thread's), less a margin; 0 when unknown.
    static FLOOR: Cell<usize> = const { Cell::new(0) };
}

/// What is kept free at the bottom of a stack: room for the host code a call at the
/// deepest point runs (an LLM call's HTTP client), and the guard page.
const STACK_MARGIN: usize = 1 << 20;

/// An address on the current stack: where its top is now, near enough.
#[inline(always)]
fn stack_pointer() -> usize {
    let here = 0u8;
    std::hint::black_box(&here) as *const u8 as usize
}

/// Says that the thread calling this runs on a stack of `size` bytes, of which it has
/// used little so far: [`stack_room`] then knows how much is left.
pub fn on_stack_of(size: usize) {
    FLOOR.with(|f| f.set(stack_pointer().saturating_sub(size) + STACK_MARGIN));
}

/// How many bytes of its stack the code running now may still use, when its stack is
/// known (a task's, a worker's, or a thread's that called [`on_stack_of`]): deep
/// recursion checks it to stop with an error rather than overflow the stack.
pub fn stack_room() -> Option<usize> {
    match FLOOR.with(Cell::get) {
        0 => None,
        floor => Some(stack_pointer().saturating_sub(floor)),
    }
}

/// The task a thread is running: how to suspend it, and how to wake it.
#[derive(Clone)]
struct Running {
    /// The running coroutine's yielder. Set by the scheduler only for the time of a
    /// `resume`, during which the coroutine — and so the yielder, which lives on its
    /// stack — exists; read only by code running on that coroutine.
    yielder: *const Yielder<(), ()>,
    waker: Waker,
}

impl Running {
    fn yielder(&self) -> &Yielder<(), ()> {
        // SAFETY: see the field: this runs on the coroutine the yielder belongs to,
        // while the scheduler's `resume` of it is in progress.
        #[allow(unsafe_code)]
        unsafe {
            &*self.yielder
        }
    }
}

/// Whether this thread is running a fan-out task.
pub fn in_task() -> bool {
    RUNNING.with(|r| r.borrow().is_some())
}

/// Waits for `fut`. In a fan-out task, the task is suspended until the future can make
/// progress, and its thread runs other tasks meanwhile; elsewhere the thread blocks.
/// The future is polled inside `handle`'s runtime context (its timers and sockets).
///
/// A task polls on its thread's own stack, not the task's: the deep call chains of a
/// poll (an HTTP client's) touch stack pages that every task shares, and a task's stack
/// keeps only its own frames and the future's state.
pub fn block_on<F: Future + Send>(handle: &tokio::runtime::Handle, fut: F) -> F::Output {
    wait_on(Some(handle), fut)
}

/// [`block_on`], for a future that may need no runtime.
fn wait_on<F: Future + Send>(handle: Option<&tokio::runtime::Handle>, fut: F) -> F::Output {
    let Some(task) = RUNNING.with(|r| r.borrow().clone()) else {
        return match handle {
            Some(h) => h.block_on(fut),
            None => park_on(fut),
        };
    };
    let yielder = task.yielder();
    let waker = &task.waker;
    let mut fut = pin!(fut);
    loop {
        let polled = yielder.on_parent_stack(|| {
            let _entered = handle.map(tokio::runtime::Handle::enter);
            // The poll runs on the thread's stack, not the task's: whatever it calls
            // (a tool the plan executor runs) must not measure its room against the
            // task's stack.
            let floor = FLOOR.with(|f| f.replace(0));
            let polled = fut.as_mut().poll(&mut TaskContext::from_waker(waker));
            FLOOR.with(|f| f.set(floor));
            polled
        });
        if let Poll::Ready(out) = polled {
            return out;
        }
        yielder.suspend(());
    }
}

/// The tasks of one scheduler that are ready to run again.
#[derive(Default)]
struct ReadyQueue {
    ready: Mutex<(VecDeque<usize>, Option<Waker>)>,
}

impl ReadyQueue {
    fn push(&self, slot: usize) {
        let waiter = {
            let mut r = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            r.0.push_back(slot);
            r.1.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }

    fn pop(&self) -> Option<usize> {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .pop_front()
    }

    /// Ready once a task is.
    fn wait(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| {
            let mut r = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            if r.0.is_empty() {
                r.1 = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
    }
}

/// Wakes one task: puts its slot back in its scheduler's queue.
struct TaskWaker {
    queue: Arc<ReadyQueue>,
    slot: usize,
    /// Set when the task is already queued, so a flurry of wakes queues it once.
    queued: AtomicBool,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.queue.push(self.slot);
        }
    }
}

/// A task in flight: its coroutine, its thread-of-control state while suspended, and
/// its waker.
struct Slot<T> {
    coroutine: Coroutine<(), (), Option<T>, DefaultStack>,
    /// The lowest address of the coroutine's stack, with the margin (see [`FLOOR`]).
    floor: usize,
    /// Where the coroutine's yielder is, once it has started.
    yielder: Rc<Cell<*const Yielder<(), ()>>>,
    locals: Locals,
    waker: Arc<TaskWaker>,
    index: usize,
}

/// What is per thread of control (the place in the program's order, the open spans),
/// kept aside while the task is suspended.
#[derive(Default)]
struct Locals {
    order: order::Saved,
    open: context::OpenFrames,
    cancel: Option<crate::observe::Cancel>,
    scope: Option<std::sync::Arc<crate::durable::CallScope>>,
}

impl Locals {
    /// Exchanges these with the thread's: in when the task resumes, out when it stops.
    fn swap(&mut self) {
        order::swap(&mut self.order);
        context::swap_open(&mut self.open);
        crate::observe::swap_call_cancel(&mut self.cancel);
        crate::durable::swap(&mut self.scope);
    }
}

/// What the schedulers of one fan-out share.
struct Shared<'f, T, F, G> {
    n: usize,
    next: AtomicUsize,
    stop: AtomicBool,
    fan_out: order::Position,
    /// The caller's call cancel, which every iteration carries.
    cancel: Option<crate::observe::Cancel>,
    /// The caller's call scope (a served call's journal and budgets), which every
    /// iteration carries.
    scope: Option<std::sync::Arc<crate::durable::CallScope>>,
    f: &'f F,
    failed: &'f G,
    results: Mutex<Vec<Option<T>>>,
}

/// Runs `f(i)` for every `i` in `0..n`, at most `width` at once, each as a task (see
/// the module's documentation). Once an iteration fails (`failed`), no new ones start.
/// The results are by index; `None` for an iteration that never ran or panicked.
pub fn fan_out<T: Send, F, G>(n: usize, width: usize, f: F, failed: G) -> Vec<Option<T>>
where
    F: Fn(usize) -> T + Sync,
    G: Fn(&T) -> bool + Sync,
{
    let shared = Shared {
        n,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        // The iterations' model calls are numbered under this fan-out, by index.
        fan_out: order::fan_out(),
        cancel: crate::observe::call_cancel(),
        scope: crate::durable::current(),
        f: &f,
        failed: &failed,
        results: Mutex::new((0..n).map(|_| None).collect()),
    };
    let width = width.max(1);
    if in_task() {
        // Nested: on this task's thread; waiting suspends the outer task.
        schedule(&shared, width);
    } else {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let threads = cores.min(n).min(width).max(1);
        let per_thread = width.div_ceil(threads);
        // The workers run in the caller's tokio context, if it has one: what the
        // iterations build (timers, sockets) finds its runtime.
        let handle = tokio::runtime::Handle::try_current().ok();
        let work = || {
            on_stack_of(WORKER_STACK);
            let _entered = handle.as_ref().map(tokio::runtime::Handle::enter);
            schedule(&shared, per_thread);
        };
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .filter_map(|_| {
                    std::thread::Builder::new()
                        .name("sap-tasks".to_owned())
                        .stack_size(WORKER_STACK)
                        .spawn_scoped(scope, work)
                        .ok()
                })
                .collect();
            if workers.is_empty() {
                // No thread could be started: schedule here.
                schedule(&shared, width);
            }
            for w in workers {
                let _ = w.join();
            }
        });
    }
    shared
        .results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
}

/// One thread's scheduler: starts tasks while fewer than `width` of its own are in
/// flight, resumes the ready ones, and waits when none is.
fn schedule<T: Send, F, G>(shared: &Shared<'_, T, F, G>, width: usize)
where
    F: Fn(usize) -> T + Sync,
    G: Fn(&T) -> bool + Sync,
{
    let queue = Arc::new(ReadyQueue::default());
    let mut slots: Vec<Option<Slot<T>>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut stacks: Vec<DefaultStack> = Vec::new();
    let mut in_flight = 0usize;
    loop {
        // Start tasks up to the width.
        while in_flight < width && !shared.stop.load(Ordering::Relaxed) {
            let i = shared.next.fetch_add(1, Ordering::Relaxed);
            if i >= shared.n {
                break;
            }
            let stack = match stacks.pop() {
                Some(s) => s,
                None => match DefaultStack::new(TASK_STACK) {
                    Ok(s) => s,
                    Err(_) => {
                        // No address space for another stack: run it here, now.
                        let r = run_one(shared, i);
                        store(shared, i, r);
                        continue;
                    }
                },
            };
            let floor = stack.limit().get() + STACK_MARGIN;
            let slot = free.pop().unwrap_or_else(|| {
                slots.push(None);
                slots.len() - 1
            });
            let waker = Arc::new(TaskWaker {
                queue: queue.clone(),
                slot,
                queued: AtomicBool::new(true),
            });
            let yielder = Rc::new(Cell::new(std::ptr::null()));
            let published = yielder.clone();
            let body = move |y: &Yielder<(), ()>, ()| {
                // First resume: say where this coroutine's yielder is, to the
                // scheduler for later resumes, and to code on it for this one.
                published.set(y as *const _);
                RUNNING.with(|r| {
                    if let Some(running) = r.borrow_mut().as_mut() {
                        running.yielder = y as *const _;
                    }
                });
                run_one(shared, i)
            };
            // SAFETY: the coroutine borrows `shared` (and through it the caller's
            // closures), which outlive it: every coroutine is in `slots`, which is
            // dropped — finishing or unwinding each one still suspended — before this
            // function returns.
            #[allow(unsafe_code)]
            let coroutine = unsafe { Coroutine::with_stack_unchecked(stack, body) };
            slots[slot] = Some(Slot {
                coroutine,
                floor,
                yielder,
                locals: Locals::default(),
                waker,
                index: i,
            });
            in_flight += 1;
            queue.push(slot);
        }
        if in_flight == 0 {
            break;
        }
        let Some(id) = queue.pop() else {
            // Nothing ready: wait for a waker (suspending the outer task, if nested).
            wait_on(None, queue.wait());
            continue;
        };
        let Some(slot) = slots.get_mut(id).and_then(Option::as_mut) else {
            continue;
        };
        slot.waker.queued.store(false, Ordering::Release);
        slot.locals.swap();
        let outer = RUNNING.with(|r| {
            r.replace(Some(Running {
                yielder: slot.yielder.get(),
                waker: Waker::from(slot.waker.clone()),
            }))
        });
        let outer_floor = FLOOR.with(|f| f.replace(slot.floor));
        let resumed = slot.coroutine.resume(());
        FLOOR.with(|f| f.set(outer_floor));
        RUNNING.with(|r| *r.borrow_mut() = outer);
        slot.locals.swap();
        if let CoroutineResult::Return(result) = resumed {
            let done = slots[id].take().expect("the slot just resumed");
            let index = done.index;
            stacks.push(done.coroutine.into_stack());
            free.push(id);
            in_flight -= 1;
            store(shared, index, result);
        }
    }
}

/// Runs iteration `i`, a panic caught.
fn run_one<T, F, G>(shared: &Shared<'_, T, F, G>, i: usize) -> Option<T>
where
    F: Fn(usize) -> T + Sync,
    G: Fn(&T) -> bool + Sync,
{
    let f = shared.f;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::observe::with_call_cancel(shared.cancel.clone(), || {
            crate::durable::carrying(shared.scope.clone(), || {
                order::within(&shared.fan_out, i as u32, || f(i))
            })
        })
    }))
    .ok()
}

fn store<T, F, G>(shared: &Shared<'_, T, F, G>, i: usize, r: Option<T>)
where
    G: Fn(&T) -> bool,
{
    if let Some(r) = r {
        if (shared.failed)(&r) {
            shared.stop.store(true, Ordering::Relaxed);
        }
        shared.results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
    }
}

/// Blocks this thread on a future that needs no runtime (a scheduler's wait for a ready
/// task): parks until woken.
fn park_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = TaskContext::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::{block_on, fan_out, in_task};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    /// A waiting iteration does not hold up the others, even with one thread: the first
    /// waits until all the others have run, which they can only do while it is
    /// suspended.
    #[test]
    fn a_waiting_iteration_lets_the_others_run_on_its_thread() {
        let rt = runtime();
        let _entered = rt.enter();
        let handle = rt.handle().clone();
        let done = Arc::new(tokio::sync::Semaphore::new(0));
        let results = fan_out(
            6,
            6,
            |i| {
                if i == 0 {
                    let wait = done.acquire_many(5);
                    let got =
                        block_on(&handle, tokio::time::timeout(Duration::from_secs(10), wait));
                    got.is_ok()
                } else {
                    done.add_permits(1);
                    true
                }
            },
            |_| false,
        );
        assert_eq!(results, vec![Some(true); 6]);
    }

    #[test]
    fn no_iteration_starts_after_a_failure() {
        let calls = AtomicUsize::new(0);
        let results = fan_out(
            100,
            1,
            |i| {
                calls.fetch_add(1, Ordering::Relaxed);
                i != 3
            },
            |ok| !ok,
        );
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        assert_eq!(results[3], Some(false));
        assert!(results[4..].iter().all(Option::is_none));
    }

    /// Ten thousand iterations wait at once, on no more threads than cores: each is a
    /// task, not a thread.
    #[test]
    fn ten_thousand_iterations_wait_at_once_on_a_few_threads() {
        let rt = runtime();
        let _entered = rt.enter();
        let handle = rt.handle().clone();
        let n = 10_000;
        let waiting = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let threads = Mutex::new(HashSet::new());
        let results = fan_out(
            n,
            n,
            |i| {
                assert!(in_task());
                threads.lock().unwrap().insert(std::thread::current().id());
                let now = waiting.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                block_on(&handle, tokio::time::sleep(Duration::from_millis(300)));
                waiting.fetch_sub(1, Ordering::SeqCst);
                i
            },
            |_| false,
        );
        assert!(results.iter().enumerate().all(|(i, r)| *r == Some(i)));
        assert_eq!(peak.load(Ordering::SeqCst), n);
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        assert!(threads.lock().unwrap().len() <= cores);
    }

    /// A fan-out inside a task: its tasks wait together with the outer ones' others.
    #[test]
    fn nested_fan_outs_wait_together() {
        let rt = runtime();
        let _entered = rt.enter();
        let handle = rt.handle().clone();
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let results = fan_out(
            4,
            4,
            |_| {
                let inner = fan_out(
                    4,
                    4,
                    |_| {
                        let b = barrier.clone();
                        block_on(
                            &handle,
                            tokio::time::timeout(Duration::from_secs(10), async move {
                                b.wait().await;
                            }),
                        )
                        .is_ok()
                    },
                    |_| false,
                );
                inner.iter().all(|r| *r == Some(true))
            },
            |_| false,
        );
        assert_eq!(results, vec![Some(true); 4]);
    }

    /// Each task has its own place in the program's order, however they interleave.
    #[test]
    fn positions_are_per_task() {
        let rt = runtime();
        let _entered = rt.enter();
        let handle = rt.handle().clone();
        let results = fan_out(
            3,
            3,
            |i| {
                let first = crate::order::next_call();
                block_on(
                    &handle,
                    tokio::time::sleep(Duration::from_millis(10 * (3 - i as u64))),
                );
                (first, crate::order::next_call())
            },
            |_| false,
        );
        for (i, r) in results.into_iter().enumerate() {
            let (a, b) = r.unwrap();
            assert_eq!(a[a.len() - 2..], [i as u32, 0]);
            assert_eq!(b[b.len() - 2..], [i as u32, 1]);
        }
    }

    #[test]
    fn a_panicking_iteration_is_none_and_the_others_finish() {
        let results = fan_out(
            3,
            3,
            |i| {
                if i == 1 {
                    panic!("iteration 1");
                }
                i
            },
            |_| false,
        );
        assert_eq!(results, vec![Some(0), None, Some(2)]);
    }
}
