//! The flags of `sapc run` (and of `sapc mcp serve`, `sapc test`, which take the same
//! provider, budget and permission flags), and the `session::Options` they make.

use std::path::PathBuf;

#[derive(clap::Args, Debug, Default)]
pub struct RunArgs {
    /// The program; its `main` runs.
    pub file: PathBuf,
    /// Arguments for the program, after `--`, for `main`'s parameters other than its
    /// `Context`, in order: a `String` as it is, other types as JSON, a last
    /// `List<String>` all that are left.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
    /// `openai` (any OpenAI-compatible server), `ollama`, `llamacpp`, `vllm`,
    /// `lmstudio` (OpenAI-compatible at their usual local address), `anthropic`,
    /// `gemini`, `local` (a GGUF model in this process: `--model PATH.gguf`, built with
    /// the feature `local`; a run's first prompt is kept for the next run in
    /// `SAP_LOCAL_KV_CACHE`, default `~/.cache/sap/local-kv`, `0` for none), `replay` or
    /// `interactive`.
    #[arg(long)]
    pub provider: Option<String>,
    /// How to ask an OpenAI-compatible server for the answer's shape: `json_schema`,
    /// `json_object`, `tools` or `prompt` (default: the best the server accepts, found
    /// by stepping down and remembered per server in the build cache's directory).
    #[arg(long, value_name = "RUNG")]
    pub structured: Option<String>,
    /// The model name sent to the provider.
    #[arg(long)]
    pub model: Option<String>,
    /// The provider's base URL (default: `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` /
    /// `GEMINI_BASE_URL`, else the vendor's API).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Answer from this transcript, with no network.
    #[arg(long, value_name = "TRANSCRIPT")]
    pub replay: Option<PathBuf>,
    /// Record every request and answer of the run to this transcript.
    #[arg(long, value_name = "TRANSCRIPT")]
    pub record: Option<PathBuf>,
    /// Write one JSON line per LLM call to this file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Stream answers (OpenAI-compatible servers; the default for every server but
    /// OpenAI's API, `stream = false` in sap.toml turns it off).
    #[arg(long)]
    pub stream: bool,
    /// The most model calls the run may make, re-asks included [default: no limit]
    /// (also `max_calls` under [budgets] in sap.toml).
    #[arg(long, value_name = "N")]
    pub max_calls: Option<u64>,
    /// The most tokens, prompt and answer together, the run's model calls may use
    /// [default: no limit] (also `max_tokens` under [budgets]).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Wall-time budget in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub max_time: Option<f64>,
    /// The deepest the program's calls may nest; deeper recursion is a located error,
    /// never a stack overflow [default: 10000] (also `max_depth` under [budgets]).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<u32>,
    /// The most loop iterations (`while` and `for`) over the whole run
    /// [default: 1000000000] (also `max_iterations` under [budgets]).
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u64>,
    /// Iterations of one run of a `while` whose condition the model decides [default: 100].
    #[arg(long, value_name = "N")]
    pub max_model_iterations: Option<u64>,
    /// The in-process model's context window in tokens (`--provider local`) [default:
    /// the model's training length] (also `context_tokens` under [provider]).
    #[arg(long, value_name = "N")]
    pub context_tokens: Option<u32>,
    /// Let the standard tools (`fs::read`, `fs::list`) read inside DIR (repeatable).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub allow_read: Vec<String>,
    /// Let `fs::write` write inside DIR (repeatable).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub allow_write: Vec<String>,
    /// Let `http::get` and `http::post` reach HOST, or only HOST:PORT (repeatable).
    #[arg(long, value_name = "HOST[:PORT]", value_delimiter = ',')]
    pub allow_net: Vec<String>,
    /// Let `process::run` run PROGRAM, named as the program names it (repeatable).
    #[arg(long, value_name = "PROGRAM", value_delimiter = ',')]
    pub allow_run: Vec<String>,
    /// The most LLM calls and `parallel for` iterations in flight at once [default:
    /// adaptive — model calls start at 256 at once per provider, grow while answers come
    /// back at the usual latency, back off on 429/503, time-outs and a queue at the
    /// server (streamed answers starting later and later), up to 1024; iterations:
    /// 1024; with `--provider local` or `interactive`, 1: iterations run in order, so the
    /// in-process model's run repeats exactly and a person is asked in the program's
    /// order]. Setting it starts model calls at N and caps both at N (also
    /// `concurrency` under [provider] in sap.toml).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Print the run's counters (calls, tokens, time) to standard error.
    #[arg(long)]
    pub stats: bool,
    /// `jit` (native code, the default) or `eval` (the reference evaluator).
    #[arg(long, default_value = "jit")]
    pub engine: String,
    /// Make the run durable: journal each model call, extern call, `input` and `print`
    /// to this SQLite file, committed before it is used. The same command after a crash
    /// resumes: journaled calls are answered from the journal, printed lines are not
    /// printed again.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// When a resumed run's program no longer matches its journal: `stop` and name the
    /// first call that diverges, or `rerun-changed` to call again from there.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = JournalPolicy::Stop, requires = "journal")]
    pub journal_policy: JournalPolicy,
    /// Export OpenTelemetry spans over OTLP/HTTP to this collector (e.g.
    /// `http://localhost:4318`): one per call of a function with a context, per model
    /// call (GenAI conventions) and per extern call. Without it,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns
    /// export on.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

/// `sapc run`: the flags every command that runs a program takes, and one of its own.
#[derive(clap::Args, Debug)]
pub struct RunCommand {
    #[command(flatten)]
    pub run: RunArgs,
    /// UNSAFE, for measuring an undefended agent only (tools/agentdojo): the checker's
    /// provenance errors (E0134) become warnings, and the run refuses nothing on
    /// provenance, so data a tool returns may steer what the program does.
    #[arg(long)]
    pub unsafe_ignore_provenance: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JournalPolicy {
    #[default]
    Stop,
    RerunChanged,
}

impl RunArgs {
    /// The run options these flags give.
    pub fn options(&self) -> session::Options {
        session::Options {
            provider: self.provider.clone(),
            structured: self.structured.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            replay: self.replay.clone(),
            // The front ends that serve set it (`sapc serve`, `sapc mcp serve`).
            serving: false,
            record: self.record.clone(),
            trace: self.trace.clone(),
            stream: self.stream,
            // Sampling is sap.toml's (`[provider]`) for the command line.
            temperature: None,
            seed: None,
            max_calls: self.max_calls,
            max_tokens: self.max_tokens,
            max_time: self.max_time,
            max_depth: self.max_depth,
            max_iterations: self.max_iterations,
            max_model_iterations: self.max_model_iterations,
            context_tokens: self.context_tokens,
            allow_read: self.allow_read.clone(),
            allow_write: self.allow_write.clone(),
            allow_net: self.allow_net.clone(),
            allow_run: self.allow_run.clone(),
            concurrency: self.concurrency,
            journal: self.journal.clone(),
            journal_policy: match self.journal_policy {
                JournalPolicy::Stop => session::JournalPolicy::Stop,
                JournalPolicy::RerunChanged => session::JournalPolicy::RerunChanged,
            },
            otlp: self.otlp.clone(),
        }
    }
}
