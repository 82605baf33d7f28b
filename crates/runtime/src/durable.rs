//! The journal of the call a thread of control runs, when its caller gave one: a
//! served procedure's invocation (Restate) journals each call of its own, where `sapc
//! run --journal` gives the whole run one (`Runtime::with_journal`). A fan-out's tasks
//! carry their caller's (`tasks`), as they carry its cancel.

use std::cell::RefCell;
use std::sync::Arc;

use journal::Journal;

thread_local! {
    static CALL_JOURNAL: RefCell<Option<Arc<Journal>>> = const { RefCell::new(None) };
}

/// Runs `f` (a call of a program's function) with `journal` as the call's own, its
/// calls numbered from the start of the program's order: the same call makes the
/// same positions however many calls ran on this thread before.
pub fn with_call_journal<T>(journal: Option<Arc<Journal>>, f: impl FnOnce() -> T) -> T {
    carrying(journal, || crate::order::fresh(f))
}

/// Runs `f` with `journal` as its call's journal, in the thread's place in the order (a
/// fan-out's iteration, carrying its caller's).
pub(crate) fn carrying<T>(journal: Option<Arc<Journal>>, f: impl FnOnce() -> T) -> T {
    let before = CALL_JOURNAL.with(|c| c.replace(journal));
    struct Restore(Option<Option<Arc<Journal>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(before) = self.0.take() {
                CALL_JOURNAL.with(|c| *c.borrow_mut() = before);
            }
        }
    }
    let _restore = Restore(Some(before));
    f()
}

/// The journal of the call this thread of control runs, if its caller gave one.
pub fn call_journal() -> Option<Arc<Journal>> {
    CALL_JOURNAL.with(|c| c.borrow().clone())
}

/// Exchanges this thread's call journal with `saved` (a suspended task's, kept aside).
pub fn swap_call_journal(saved: &mut Option<Arc<Journal>>) {
    CALL_JOURNAL.with(|c| std::mem::swap(&mut *c.borrow_mut(), saved));
}
