//! The scope of one served call (a Restate invocation's): its own journal, where `sapc
//! run --journal` gives the whole run one (`Runtime::with_journal`), and its own
//! budgets (`--max-calls`, `--max-tokens`, `--max-time` count per call, not over the
//! worker's life). A fan-out's tasks carry their caller's scope (`tasks`), as they carry
//! its cancel.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use journal::Journal;

use crate::budget::{Budgets, Meter};

/// What one served call has of its own.
pub struct CallScope {
    journal: Option<Arc<Journal>>,
    started: Instant,
    /// Made at the call's first model request, with the runtime's budgets.
    meter: OnceLock<Meter>,
}

impl CallScope {
    /// The call's meter: its budgets counted from its start.
    pub(crate) fn meter(&self, budgets: &Budgets) -> &Meter {
        self.meter
            .get_or_init(|| Meter::since(budgets.clone(), self.started))
    }
}

thread_local! {
    static CALL: RefCell<Option<Arc<CallScope>>> = const { RefCell::new(None) };
}

/// Runs `f` (a call of a program's function) as a served call: with `journal` as its
/// own, budgets of its own, and its calls numbered from the start of the program's
/// order, so the same call makes the same positions however many calls ran on this
/// thread before.
pub fn with_call_scope<T>(journal: Option<Arc<Journal>>, f: impl FnOnce() -> T) -> T {
    let scope = Arc::new(CallScope {
        journal,
        started: Instant::now(),
        meter: OnceLock::new(),
    });
    carrying(Some(scope), || crate::order::fresh(f))
}

/// The journal of the call this thread of control runs, if its caller gave one.
pub fn call_journal() -> Option<Arc<Journal>> {
    CALL.with(|c| c.borrow().as_ref().and_then(|s| s.journal.clone()))
}

/// The scope of the call this thread of control runs, if it is a served call.
pub(crate) fn current() -> Option<Arc<CallScope>> {
    CALL.with(|c| c.borrow().clone())
}

/// Runs `f` in `scope`, in the thread's place in the order (a fan-out's iteration,
/// carrying its caller's).
pub(crate) fn carrying<T>(scope: Option<Arc<CallScope>>, f: impl FnOnce() -> T) -> T {
    let before = CALL.with(|c| c.replace(scope));
    struct Restore(Option<Option<Arc<CallScope>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(before) = self.0.take() {
                CALL.with(|c| *c.borrow_mut() = before);
            }
        }
    }
    let _restore = Restore(Some(before));
    f()
}

/// Exchanges this thread's call scope with `saved` (a suspended task's, kept aside).
pub(crate) fn swap(saved: &mut Option<Arc<CallScope>>) {
    CALL.with(|c| std::mem::swap(&mut *c.borrow_mut(), saved));
}
