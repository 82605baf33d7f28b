//! Where a model call stands in the program's own order, independent of timing: the
//! calls of one thread of control are numbered in sequence, and the iterations of a
//! concurrent fan-out (`parallel for`, a layer of a plan) each get a numbering of their
//! own under the fan-out's place, by index. Sorting by these positions gives the same
//! order on every run however the threads interleave — what a transcript is written in.

use std::cell::RefCell;

pub use llm::Position;

#[derive(Default)]
struct Cursor {
    /// The place of the fan-out iteration this thread is running, empty at top level.
    prefix: Vec<u32>,
    /// The number the next call or fan-out here gets.
    next: u32,
}

thread_local! {
    static CURSOR: RefCell<Cursor> = RefCell::new(Cursor::default());
}

fn take_next() -> Position {
    CURSOR.with(|c| {
        let mut c = c.borrow_mut();
        let mut p = c.prefix.clone();
        p.push(c.next);
        c.next += 1;
        p
    })
}

/// The position of a model call made now on this thread.
pub fn next_call() -> Position {
    take_next()
}

/// The position of a fan-out starting now on this thread: its iteration `i` runs under
/// `[fan-out…, i]` (see [`within`]).
pub fn fan_out() -> Position {
    take_next()
}

/// A thread of control's place in the order, kept aside while another runs on its
/// thread (a suspended fan-out task): see [`swap`].
#[derive(Default)]
pub struct Saved(Cursor);

/// Exchanges this thread's place with `saved`: a scheduler swaps a task's place in when
/// it resumes the task, and out again when the task suspends.
pub fn swap(saved: &mut Saved) {
    CURSOR.with(|c| std::mem::swap(&mut *c.borrow_mut(), &mut saved.0));
}

/// Runs `f` with a numbering of its own from the start (`[0]`, `[1]`, …), as a new
/// run's: a served call's positions do not depend on the calls before it on this
/// thread. The thread's own numbering is restored afterwards.
pub fn fresh<T>(f: impl FnOnce() -> T) -> T {
    numbered(Cursor::default(), f)
}

/// Runs `f` as iteration `index` of the fan-out at `fan_out`, on whatever thread: its
/// calls are numbered from 0 under `[fan_out…, index]`. The thread's own numbering is
/// restored afterwards.
pub fn within<T>(fan_out: &[u32], index: u32, f: impl FnOnce() -> T) -> T {
    let mut prefix = fan_out.to_vec();
    prefix.push(index);
    numbered(Cursor { prefix, next: 0 }, f)
}

/// Runs `f` with `cursor` as the thread's numbering, restoring the thread's own
/// afterwards, even if `f` panics (the fan-out catches panics of iterations).
fn numbered<T>(cursor: Cursor, f: impl FnOnce() -> T) -> T {
    let saved = CURSOR.with(|c| std::mem::replace(&mut *c.borrow_mut(), cursor));
    struct Restore(Option<Cursor>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(saved) = self.0.take() {
                CURSOR.with(|c| *c.borrow_mut() = saved);
            }
        }
    }
    let _restore = Restore(Some(saved));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_the_program_not_the_threads() {
        let a = next_call();
        let fan = fan_out();
        let inner: Vec<Vec<Position>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3u32)
                .rev()
                .map(|i| {
                    let fan = fan.clone();
                    s.spawn(move || within(&fan, i, || vec![next_call(), next_call()]))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let b = next_call();
        // Iterations spawned in reverse still sort by index, between `a` and `b`.
        let mut all = vec![b.clone(), a.clone()];
        all.extend(inner.into_iter().flatten());
        all.sort();
        assert_eq!(all.first(), Some(&a));
        assert_eq!(all.last(), Some(&b));
        let middle: Vec<(u32, u32)> = all[1..all.len() - 1]
            .iter()
            .map(|p| (p[p.len() - 2], p[p.len() - 1]))
            .collect();
        assert_eq!(middle, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
        // And the thread's own numbering goes on after the fan-out.
        assert!(b > fan);
    }
}
