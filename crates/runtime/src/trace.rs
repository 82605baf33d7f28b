//! The trace of a run: one JSON object per LLM call, per line — call site, kind,
//! rendered request, raw answer, parsed value, repairs, tokens, latency, retries.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value as JsonValue;

/// Where trace events go; clones share the one output (LLM calls and tool calls).
#[derive(Clone)]
pub struct TraceSink {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl TraceSink {
    pub fn new(out: Box<dyn Write + Send>) -> TraceSink {
        TraceSink {
            out: Arc::new(Mutex::new(out)),
        }
    }

    pub fn record(&self, event: &JsonValue) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A trace that cannot be written must not stop the program it observes.
        let _ = writeln!(out, "{event}").and_then(|_| out.flush());
    }
}
