//! How a program runs, whatever front end asked: the provider and its model, budgets,
//! grants, durability and observability. `sapc`'s flags, an ACP session's settings or a
//! Python caller's keywords all become one of these; `sap.toml` fills in what it leaves
//! unset.

use std::path::PathBuf;

/// The run options `sapc run` documents flag by flag (`sapc run --help`); `None` or
/// empty means "as `sap.toml` says, else the default".
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `openai`, `ollama`, `llamacpp`, `vllm`, `lmstudio`, `anthropic`, `gemini`,
    /// `local`, `replay` or `interactive`.
    pub provider: Option<String>,
    /// The structured-output rung for OpenAI-compatible servers.
    pub structured: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// Answer from this transcript, with no network.
    pub replay: Option<PathBuf>,
    /// A served program (`sapc serve`, `sapc mcp serve`): each call is a run of its
    /// own, so a replayed transcript gives a request's answers again once all were given.
    pub serving: bool,
    /// Record every request and answer to this transcript.
    pub record: Option<PathBuf>,
    /// One JSON line per model call (and tool call) to this file.
    pub trace: Option<PathBuf>,
    pub stream: bool,
    /// Sampling: the temperature (default: the server's) and the base of every call's
    /// seed (default 0), as `temperature` and `seed` under `[provider]` in sap.toml.
    pub temperature: Option<f64>,
    pub seed: Option<u64>,
    pub max_calls: Option<u64>,
    pub max_tokens: Option<u64>,
    /// Wall-time budget, in seconds.
    pub max_time: Option<f64>,
    pub max_depth: Option<u32>,
    pub max_iterations: Option<u64>,
    pub max_model_iterations: Option<u64>,
    /// The in-process model's context window, in tokens (default: the model's training
    /// length), as `context_tokens` under `[provider]` in sap.toml.
    pub context_tokens: Option<u32>,
    /// What the standard tools may touch: folders to read and write, hosts, programs.
    pub allow_read: Vec<String>,
    pub allow_write: Vec<String>,
    pub allow_net: Vec<String>,
    pub allow_run: Vec<String>,
    pub concurrency: Option<usize>,
    /// Make the run durable in this SQLite journal.
    pub journal: Option<PathBuf>,
    pub journal_policy: JournalPolicy,
    /// Export OpenTelemetry spans to this OTLP/HTTP collector.
    pub otlp: Option<String>,
}

/// What a resumed run does when its program no longer matches its journal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JournalPolicy {
    /// Stop, naming the first call that diverges.
    #[default]
    Stop,
    /// Call again from there.
    RerunChanged,
}
