//! Running iterations on threads: `parallel for` in both engines and the layers of an
//! Atom-of-Thought plan.

/// Runs `f(i)` for every `i` in `0..n` on at most `width` threads with big stacks, as a
/// sliding window: a thread takes the next index as soon as it is done with one, so one
/// slow iteration does not hold up a batch. Once an iteration fails (`failed`), no new
/// ones start. The results are by index; `None` for an iteration that never ran or
/// whose thread panicked.
pub fn sliding_window<T: Send>(
    n: usize,
    width: usize,
    f: impl Fn(usize) -> T + Sync,
    failed: impl Fn(&T) -> bool + Sync,
) -> Vec<Option<T>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // The iterations' model calls are numbered under this fan-out, by index.
    let fan_out = crate::order::fan_out();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    let work = || {
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            let r = crate::order::within(&fan_out, i as u32, || f(i));
            if failed(&r) {
                stop.store(true, Ordering::Relaxed);
            }
            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        }
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..width.clamp(1, n.max(1)))
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("sap-parallel".to_owned())
                    .stack_size(64 << 20)
                    .spawn_scoped(scope, work)
                    .ok()
            })
            .collect();
        if workers.is_empty() {
            // No thread could be started: run here, one at a time.
            work();
        }
        for w in workers {
            let _ = w.join();
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    use super::sliding_window;

    /// A slow first iteration does not hold back the others: with two threads, the
    /// second works through every other item while the first is still busy (in batches
    /// of two, item 0 would wait forever for items that start after it).
    #[test]
    fn the_window_slides_past_a_slow_iteration() {
        let done = Arc::new((Mutex::new(0usize), Condvar::new()));
        let results = sliding_window(
            6,
            2,
            |i| {
                let (count, cv) = &*done;
                if i == 0 {
                    let guard = count.lock().unwrap();
                    let (guard, timeout) = cv
                        .wait_timeout_while(guard, Duration::from_secs(10), |c| *c < 5)
                        .unwrap();
                    !timeout.timed_out() && *guard == 5
                } else {
                    *count.lock().unwrap() += 1;
                    cv.notify_all();
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
        let results = sliding_window(
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
}
