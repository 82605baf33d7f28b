//! Which model a run talks to, with its HTTP settings (the open-file room for its
//! connections included), the in-process model (feature `local`) and the recorder
//! around it. When no flag names a provider: the transcript beside the program
//! (`FILE.transcript.jsonl`) if there is one — so the examples run offline — else
//! `sap.toml`, else an error that says what to pass.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_transport::HttpConfig;
use llm::Provider;
use llm::schema::target::Target;
use providers::anthropic::{AnthropicConfig, AnthropicProvider};
use providers::gemini::{GeminiConfig, GeminiProvider};
use providers::interactive::InteractiveProvider;
use providers::openai::{OpenAiConfig, OpenAiProvider, Structured};
use providers::replay::{RecordingProvider, ReplayProvider};

use crate::Options;
use crate::cache;
use crate::config::Config;

pub fn transcript_beside(program: &Path) -> PathBuf {
    program.with_extension("transcript.jsonl")
}

/// Files kept for what is not a model connection (the program's own, MCP servers').
const OPEN_FILES_SPARE: usize = 64;

/// Raises this process's open-file limit to the most the system allows; how many
/// connections that leaves for model calls.
fn open_files_allowance() -> Option<usize> {
    let limit = rlimit::increase_nofile_limit(u64::MAX).ok()?;
    Some(
        usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .saturating_sub(OPEN_FILES_SPARE),
    )
}

pub(crate) fn provider(
    file: &Path,
    options: &Options,
    config: &Config,
) -> Result<Arc<dyn Provider>, String> {
    let kind = match (&options.provider, &options.replay) {
        (Some(kind), _) => kind.clone(),
        (None, Some(_)) => "replay".to_owned(),
        (None, None) if transcript_beside(file).is_file() => "replay".to_owned(),
        (None, None) => config.provider.kind.clone().ok_or_else(|| {
            "no LLM provider: pass `--provider openai` (with OPENAI_API_KEY, and OPENAI_BASE_URL for vLLM, llama.cpp or Ollama), `--provider anthropic`, `--provider gemini`, `--replay TRANSCRIPT` or `--provider interactive`, or set [provider] kind in sap.toml".to_owned()
        })?,
    };
    let mut http = HttpConfig::default();
    // Each model call in flight holds a connection, a file: allow as many as the
    // system lets this process open, and no more calls than that leaves room for.
    let room = open_files_allowance();
    match (options.concurrency.or(config.provider.concurrency), room) {
        (Some(c), Some(room)) if c > room => {
            eprintln!(
                "warning: --concurrency {c} needs as many connections, but this process may open only {} files (`ulimit -n`): at most {room} model calls will be in flight",
                room + OPEN_FILES_SPARE
            );
            http.concurrency = Some(room.max(1));
        }
        (Some(c), _) => http.concurrency = Some(c.max(1)),
        (None, Some(room)) if room < llm::limit::DEFAULT_CAP => {
            http.concurrency = Some(room.max(1));
        }
        (None, _) => {}
    }
    if let Some(t) = config.provider.timeout_seconds {
        http.request_timeout = Duration::from_secs_f64(t.max(0.1));
    }
    if let Some(r) = config.provider.max_retries {
        http.max_retries = r;
    }
    let model = options
        .model
        .clone()
        .or_else(|| config.provider.model.clone());
    let base_url = options
        .base_url
        .clone()
        .or_else(|| config.provider.base_url.clone());
    let provider: Arc<dyn Provider> = match kind.as_str() {
        "local" => local_provider(
            model.as_deref(),
            options.context_tokens.or(config.provider.context_tokens),
            &config.dir,
        )?,
        "replay" => {
            let path = options
                .replay
                .clone()
                .unwrap_or_else(|| transcript_beside(file));
            let replay = ReplayProvider::from_file(&path)?;
            Arc::new(if options.serving {
                replay.repeating()
            } else {
                replay
            })
        }
        "openai" | "ollama" | "llamacpp" | "vllm" | "lmstudio" => {
            let mut c = match local_server(&kind) {
                // A local server: its usual address, any model name it serves.
                Some(address) => OpenAiConfig::new(address, model.as_deref().unwrap_or("default")),
                None => OpenAiConfig::from_env(model.as_deref().unwrap_or("gpt-4o-mini")),
            };
            if let Some(url) = base_url {
                c.base_url = url;
            }
            // Streamed by default, except from OpenAI's own API, so that an answer that
            // repeats itself is stopped as soon as it does (`llm::runaway`); a server
            // that cuts streams gets requests unstreamed after the first cut.
            c.stream = options.stream
                || config
                    .provider
                    .stream
                    .unwrap_or(!c.base_url.contains("api.openai.com"));
            c.http = http;
            if let Some(rung) = options
                .structured
                .as_ref()
                .or(config.provider.structured.as_ref())
            {
                c.structured = Some(Structured::parse(rung).ok_or_else(|| {
                    format!("unknown structured output `{rung}`: use json_schema, json_object, tools or prompt")
                })?);
            }
            c.temperature = options.temperature.or(config.provider.temperature);
            c.seed = options.seed.or(config.provider.seed).or(c.seed);
            c.max_tokens = config.provider.max_output_tokens;
            // A server only known as OpenAI-compatible gets the strict dialect, which
            // every such server takes (with lists capped, unless it is OpenAI's); the
            // presets name what the server is.
            c.target = match kind.as_str() {
                "llamacpp" => Target::LlamaCpp,
                "ollama" => Target::Ollama,
                _ if c.base_url.contains("api.openai.com") => Target::OpenAi,
                _ => Target::Compatible,
            };
            c.rung_memory = Some(cache::dir().join("structured-output.json"));
            c.announce = true;
            Arc::new(OpenAiProvider::new(c).map_err(|e| e.to_string())?)
        }
        "anthropic" => {
            let mut c = AnthropicConfig::from_env(model.as_deref().unwrap_or("claude-sonnet-4-5"));
            c.temperature = options.temperature.or(config.provider.temperature);
            if let Some(m) = config.provider.max_output_tokens {
                c.max_tokens = m;
            }
            if let Some(url) = base_url {
                c.base_url = url;
            }
            c.http = http;
            Arc::new(AnthropicProvider::new(c).map_err(|e| e.to_string())?)
        }
        "gemini" => {
            let mut c = GeminiConfig::from_env(model.as_deref().unwrap_or("gemini-2.5-flash"));
            c.temperature = options.temperature.or(config.provider.temperature);
            c.seed = options.seed.or(config.provider.seed).or(c.seed);
            c.max_tokens = config.provider.max_output_tokens;
            if let Some(url) = base_url {
                c.base_url = url;
            }
            c.http = http;
            Arc::new(GeminiProvider::new(c).map_err(|e| e.to_string())?)
        }
        "interactive" => Arc::new(InteractiveProvider::stdio()),
        other => {
            return Err(format!(
                "unknown provider `{other}`: use openai, ollama, llamacpp, vllm, lmstudio, anthropic, gemini, local, replay or interactive"
            ));
        }
    };
    match &options.record {
        Some(path) => {
            let secrets = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"]
                .iter()
                .filter_map(|k| std::env::var(k).ok())
                .collect();
            Ok(Arc::new(RecordingProvider::to_file(
                provider, path, secrets,
            )?))
        }
        None => Ok(provider),
    }
}

/// `--provider local`: the GGUF model `--model` (or `model` in sap.toml, relative to it)
/// names, run in this process.
#[cfg(feature = "local")]
fn local_provider(
    model: Option<&str>,
    context: Option<u32>,
    dir: &Path,
) -> Result<Arc<dyn Provider>, String> {
    let model = model.ok_or(
        "`--provider local` runs a GGUF model in this process: pass `--model PATH.gguf` (tools/local-model/setup.sh fetches SmolLM2-135M-Instruct)",
    )?;
    let path = Path::new(model);
    let path = if path.is_relative() && !path.exists() {
        dir.join(path)
    } else {
        path.to_owned()
    };
    Ok(Arc::new(provider_local::LocalProvider::load(
        &path, context,
    )?))
}

#[cfg(not(feature = "local"))]
fn local_provider(_: Option<&str>, _: Option<u32>, _: &Path) -> Result<Arc<dyn Provider>, String> {
    Err("this sapc was built without the in-process model: build it with `cargo build --release -p sapc --features local` (tools/local-model/setup.sh installs what that needs), or use a server (`--provider llamacpp`)".to_owned())
}

/// The usual address of a local OpenAI-compatible server, by preset name.
fn local_server(kind: &str) -> Option<&'static str> {
    match kind {
        "ollama" => Some("http://localhost:11434/v1"),
        "llamacpp" => Some("http://localhost:8080/v1"),
        "vllm" => Some("http://localhost:8000/v1"),
        "lmstudio" => Some("http://localhost:1234/v1"),
        _ => None,
    }
}
