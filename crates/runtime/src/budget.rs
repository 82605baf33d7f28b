//! Budgets of a run (LLM calls, tokens, wall time) and its counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{CallSite, ErrorKind, RuntimeError};
use llm::Usage;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budgets {
    pub max_calls: Option<u64>,
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    pub max_wall_time: Option<Duration>,
}

/// What a run has used so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    /// Transport retries and re-asks, over all calls.
    pub retries: u64,
    pub reasks: u64,
    /// Time spent waiting for the model.
    pub model_time: Duration,
    /// Time since the run started.
    pub wall_time: Duration,
}

impl RunStats {
    /// Time in the program itself: wall time minus time waiting for the model. With
    /// parallel calls the model time can exceed the wall time; then this is zero.
    pub fn program_time(&self) -> Duration {
        self.wall_time.saturating_sub(self.model_time)
    }
}

pub(crate) struct Meter {
    pub budgets: Budgets,
    started: Instant,
    calls: AtomicU64,
    input: AtomicU64,
    output: AtomicU64,
    cached: AtomicU64,
    retries: AtomicU64,
    reasks: AtomicU64,
    model_micros: AtomicU64,
}

impl Meter {
    pub fn new(budgets: Budgets) -> Meter {
        Meter::since(budgets, Instant::now())
    }

    /// A meter whose wall-time budget counts from `started`.
    pub fn since(budgets: Budgets, started: Instant) -> Meter {
        Meter {
            budgets,
            started,
            calls: AtomicU64::new(0),
            input: AtomicU64::new(0),
            output: AtomicU64::new(0),
            cached: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            reasks: AtomicU64::new(0),
            model_micros: AtomicU64::new(0),
        }
    }

    /// Counts one more request to the model, if the budgets allow it.
    pub fn start_request(&self, site: &CallSite) -> Result<(), RuntimeError> {
        self.check_time(site)?;
        let calls = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(max) = self.budgets.max_calls
            && calls > max
        {
            self.calls.fetch_sub(1, Ordering::Relaxed);
            return Err(RuntimeError::new(
                ErrorKind::Budget,
                Some(site),
                format!("the run's budget of {max} LLM calls is used up"),
            ));
        }
        Ok(())
    }

    pub fn check_time(&self, site: &CallSite) -> Result<(), RuntimeError> {
        if let Some(max) = self.budgets.max_wall_time
            && self.started.elapsed() > max
        {
            return Err(RuntimeError::new(
                ErrorKind::Budget,
                Some(site),
                format!(
                    "the run's wall-time budget of {:.1} s is used up",
                    max.as_secs_f64()
                ),
            ));
        }
        Ok(())
    }

    /// The time left before the wall-time budget runs out.
    pub fn time_left(&self) -> Option<Duration> {
        self.budgets
            .max_wall_time
            .map(|max| max.saturating_sub(self.started.elapsed()))
    }

    pub fn finish_request(
        &self,
        site: &CallSite,
        usage: Usage,
        retries: u32,
        latency: Duration,
    ) -> Result<(), RuntimeError> {
        self.input.fetch_add(usage.input, Ordering::Relaxed);
        self.output.fetch_add(usage.output, Ordering::Relaxed);
        self.cached.fetch_add(usage.cached, Ordering::Relaxed);
        self.retries.fetch_add(retries as u64, Ordering::Relaxed);
        self.model_micros
            .fetch_add(latency.as_micros() as u64, Ordering::Relaxed);
        if let Some(max) = self.budgets.max_tokens {
            let used = self.input.load(Ordering::Relaxed) + self.output.load(Ordering::Relaxed);
            if used > max {
                return Err(RuntimeError::new(
                    ErrorKind::Budget,
                    Some(site),
                    format!("the run's budget of {max} tokens is used up ({used} used)"),
                ));
            }
        }
        Ok(())
    }

    pub fn count_reask(&self) {
        self.reasks.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> RunStats {
        RunStats {
            calls: self.calls.load(Ordering::Relaxed),
            input_tokens: self.input.load(Ordering::Relaxed),
            output_tokens: self.output.load(Ordering::Relaxed),
            cached_tokens: self.cached.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            reasks: self.reasks.load(Ordering::Relaxed),
            model_time: Duration::from_micros(self.model_micros.load(Ordering::Relaxed)),
            wall_time: self.started.elapsed(),
        }
    }
}
