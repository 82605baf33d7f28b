//! Adaptive concurrency: how many requests one provider (one base URL) has in flight at
//! once, found by AIMD as TCP finds its window.
//!
//! - **Start**: high enough that a `parallel for` of a few hundred items goes out at once
//!   ([`DEFAULT_START`]), or at the cap when the user set one (`--concurrency`,
//!   `concurrency` in sap.toml: they asked for that many).
//! - **Grow**: each answer that comes back at the usual latency adds one (slow start,
//!   doubling per round trip) until the first back-off, then one per round trip; never
//!   above the cap ([`DEFAULT_CAP`] unless set).
//! - **Back off**: a 429 or 503 (rate limited, overloaded), or a request that timed out,
//!   halves the limit; the time to the first byte of streamed answers rising to three
//!   times the fastest seen cuts it by a tenth. (That time is the server's queue and the
//!   prompt; a whole answer's time depends on its length, so answers that are not
//!   streamed say nothing about queueing.) At most one cut per round trip, so a burst of
//!   refusals to requests already in flight counts once.
//!
//! The limit is a semaphore whose permits grow by adding permits and shrink by
//! forgetting returned ones (a debt), so waiting requests queue in order and a release
//! wakes one of them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Where the limit starts when no cap is set: 200 parallel calls go out at once.
pub const DEFAULT_START: usize = 256;
/// The most requests in flight to one provider when no cap is set.
pub const DEFAULT_CAP: usize = 1024;

/// Latency above this many times the fastest answer seen counts as the server queueing.
const RISING: f64 = 3.0;
/// Answers needed before latency is judged.
const LATENCY_SAMPLES: u64 = 8;

/// How a request ended, for the limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Answered, after this long; `first_byte`: the time is the start of a streamed
    /// answer (a sign of the server's queue), not a whole answer's.
    Answered { latency: Duration, first_byte: bool },
    /// Refused for load (429, 503) or timed out: back off.
    Overloaded,
    /// Ended otherwise (a 4xx, a broken connection): says nothing about load.
    Other,
}

/// What the limit is and has been, for `--stats` and the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitStats {
    /// The limit now.
    pub limit: usize,
    /// Where it started, and its cap.
    pub start: usize,
    pub cap: usize,
    /// The most requests that were in flight at once.
    pub peak: usize,
    /// How many times it backed off.
    pub cuts: u32,
}

struct State {
    /// The permits the semaphore stands for (the limit in force).
    limit: usize,
    /// The limit as a real number: additive increase adds fractions.
    target: f64,
    /// Permits to forget as they come back (the limit was cut below what is out).
    debt: usize,
    slow_start: bool,
    /// Exponentially smoothed latency of every answer, seconds: the round trip.
    smoothed: f64,
    samples: u64,
    /// The same for the first bytes of streamed answers, with the fastest seen.
    fastest_first_byte: Option<Duration>,
    smoothed_first_byte: f64,
    first_byte_samples: u64,
    last_cut: Option<Instant>,
    in_flight: usize,
    peak: usize,
    cuts: u32,
    /// The most the limit may grow to: the user's limit or the default cap, or one for
    /// a server that serves one request at a time (`one_at_a_time`).
    cap: usize,
    start: usize,
}

/// One provider's limit.
pub struct Limiter {
    permits: Semaphore,
    state: Mutex<State>,
}

/// A request's place under the limit, held until it is dropped — for an answer, until
/// its body has been read, so a streamed answer counts as in flight while it streams.
/// How the request went is told with [`Permit::record`] (nothing told, it says nothing
/// about load).
pub struct Permit<'a> {
    limiter: &'a Limiter,
    permit: Option<SemaphorePermit<'a>>,
    recorded: bool,
}

impl Limiter {
    /// `cap`: the user's limit, if they set one (then it is also the start).
    pub fn new(cap: Option<usize>) -> Limiter {
        let (start, cap) = match cap {
            Some(c) => (c.max(1), c.max(1)),
            None => (DEFAULT_START, DEFAULT_CAP),
        };
        Limiter {
            permits: Semaphore::new(start),
            state: Mutex::new(State {
                limit: start,
                target: start as f64,
                debt: 0,
                slow_start: true,
                smoothed: 0.0,
                samples: 0,
                fastest_first_byte: None,
                smoothed_first_byte: 0.0,
                first_byte_samples: 0,
                last_cut: None,
                in_flight: 0,
                peak: 0,
                cuts: 0,
                start,
                cap,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a place under the limit.
    pub async fn acquire(&self) -> Permit<'_> {
        // The semaphore is never closed.
        let permit = self.permits.acquire().await.ok();
        let mut s = self.state();
        s.in_flight += 1;
        s.peak = s.peak.max(s.in_flight);
        Permit {
            limiter: self,
            permit,
            recorded: false,
        }
    }

    pub fn stats(&self) -> LimitStats {
        let s = self.state();
        LimitStats {
            limit: s.limit,
            start: s.start,
            cap: s.cap,
            peak: s.peak,
            cuts: s.cuts,
        }
    }

    /// How many requests are in flight now.
    pub fn in_flight(&self) -> usize {
        self.state().in_flight
    }

    /// The server serves one request at a time (it cut a streamed answer when another
    /// request came): the limit is one from now on, for the rest of the run.
    pub fn one_at_a_time(&self) {
        let mut s = self.state();
        s.cap = 1;
        s.target = 1.0;
        s.slow_start = false;
        self.resize(&mut s);
        // The places not taken go now, not as they come back: a request sent again at
        // once must wait for the one in flight.
        let gone = self.permits.forget_permits(s.debt);
        s.debt -= gone;
    }

    /// A place given back; one owed to a cut is forgotten instead.
    fn give_back(&self, permit: SemaphorePermit<'_>) {
        let mut s = self.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.debt > 0 {
            s.debt -= 1;
            permit.forget();
        }
        // Otherwise dropping it returns it.
    }

    /// Moves the limit by how a request went.
    fn adjust(&self, outcome: Outcome) {
        let mut s = self.state();
        let now = Instant::now();
        // One cut per round trip: the requests in flight when the server said "enough"
        // were sent before it could.
        let round_trip = Duration::from_secs_f64(s.smoothed.max(0.05));
        let may_cut = s
            .last_cut
            .is_none_or(|t| now.duration_since(t) >= round_trip);
        match outcome {
            Outcome::Answered {
                latency,
                first_byte,
            } => {
                let secs = latency.as_secs_f64();
                s.smoothed = smooth(s.smoothed, s.samples, secs);
                s.samples += 1;
                let mut queueing = false;
                if first_byte {
                    s.fastest_first_byte =
                        Some(s.fastest_first_byte.map_or(latency, |f| f.min(latency)));
                    s.smoothed_first_byte =
                        smooth(s.smoothed_first_byte, s.first_byte_samples, secs);
                    s.first_byte_samples += 1;
                    let fastest = s.fastest_first_byte.map_or(0.0, |f| f.as_secs_f64());
                    queueing = s.first_byte_samples >= LATENCY_SAMPLES
                        && s.smoothed_first_byte > RISING * fastest + 0.005;
                }
                if queueing {
                    if may_cut {
                        self.cut(&mut s, 0.9, now);
                    }
                } else {
                    let step = if s.slow_start { 1.0 } else { 1.0 / s.target };
                    s.target = (s.target + step).min(s.cap as f64);
                    self.resize(&mut s);
                }
            }
            Outcome::Overloaded => {
                if may_cut {
                    self.cut(&mut s, 0.5, now);
                }
            }
            Outcome::Other => {}
        }
    }

    fn cut(&self, s: &mut State, factor: f64, now: Instant) {
        s.target = (s.target * factor).max(1.0);
        s.slow_start = false;
        s.last_cut = Some(now);
        s.cuts += 1;
        self.resize(s);
    }

    /// Brings the semaphore to the target's whole part.
    fn resize(&self, s: &mut State) {
        let want = (s.target.floor() as usize).clamp(1, s.cap);
        if want > s.limit {
            let mut more = want - s.limit;
            let paid = more.min(s.debt);
            s.debt -= paid;
            more -= paid;
            if more > 0 {
                self.permits.add_permits(more);
            }
        } else {
            s.debt += s.limit - want;
        }
        s.limit = want;
    }
}

/// An exponentially smoothed mean, `n` samples in.
fn smooth(mean: f64, n: u64, sample: f64) -> f64 {
    if n == 0 {
        sample
    } else {
        0.8 * mean + 0.2 * sample
    }
}

impl Permit<'_> {
    /// Tells the limit how the request went (the first time only); the place is kept.
    pub fn record(&mut self, outcome: Outcome) {
        if !self.recorded {
            self.recorded = true;
            self.limiter.adjust(outcome);
        }
    }

    /// Records how the request went and gives the place back.
    pub fn finish(mut self, outcome: Outcome) {
        self.record(outcome);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.limiter.give_back(permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(l: &Limiter, ms: u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let p = rt.block_on(l.acquire());
        p.finish(Outcome::Answered {
            latency: Duration::from_millis(ms),
            first_byte: true,
        });
    }

    #[test]
    fn it_starts_high_and_a_cap_is_the_start() {
        assert_eq!(Limiter::new(None).stats().limit, DEFAULT_START);
        let capped = Limiter::new(Some(10_000));
        assert_eq!((capped.stats().limit, capped.stats().cap), (10_000, 10_000));
    }

    #[test]
    fn it_grows_to_the_cap_and_no_further() {
        let l = Limiter::new(None);
        for _ in 0..2_000 {
            answered(&l, 100);
        }
        assert_eq!(l.stats().limit, DEFAULT_CAP);
    }

    #[test]
    fn overload_halves_it_once_per_round_trip_and_it_recovers_slowly() {
        let l = Limiter::new(None);
        for _ in 0..10 {
            answered(&l, 100);
        }
        let before = l.stats().limit;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // A burst of refusals to requests that were all in flight: one cut.
        let permits: Vec<_> = (0..50).map(|_| rt.block_on(l.acquire())).collect();
        for p in permits {
            p.finish(Outcome::Overloaded);
        }
        let after = l.stats();
        assert_eq!(after.limit, before / 2);
        assert_eq!(after.cuts, 1);
        // Congestion avoidance: about one more per round trip's worth of answers.
        for _ in 0..after.limit + 2 {
            answered(&l, 100);
        }
        assert_eq!(l.stats().limit, after.limit + 1);
    }

    /// A whole answer's time depends on its length: only streamed answers' first bytes
    /// are judged.
    #[test]
    fn long_answers_that_are_not_streamed_do_not_cut_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let l = Limiter::new(Some(100));
        for ms in [100, 100, 100, 100, 100, 100, 100, 100, 5_000, 5_000, 5_000] {
            rt.block_on(l.acquire()).finish(Outcome::Answered {
                latency: Duration::from_millis(ms),
                first_byte: false,
            });
        }
        assert_eq!(l.stats().cuts, 0);
    }

    #[test]
    fn rising_latency_cuts_it_by_a_tenth() {
        let l = Limiter::new(Some(100));
        for _ in 0..LATENCY_SAMPLES {
            answered(&l, 100);
        }
        for _ in 0..5 {
            answered(&l, 1_000);
        }
        let s = l.stats();
        assert!(s.cuts >= 1 && s.limit <= 90, "{s:?}");
    }

    /// A cut below what is in flight takes effect as permits come back: no more than
    /// the new limit are out afterwards.
    #[test]
    fn a_cut_below_what_is_out_is_paid_back() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let l = Limiter::new(Some(8));
        let mut permits: Vec<_> = (0..8).map(|_| rt.block_on(l.acquire())).collect();
        permits.pop().unwrap().finish(Outcome::Overloaded);
        assert_eq!(l.stats().limit, 4);
        for p in permits.drain(..) {
            p.finish(Outcome::Other);
        }
        assert_eq!(l.permits.available_permits(), 4);
    }
}
