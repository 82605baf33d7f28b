//! `--provider local`: a GGUF model in this process, on llama.cpp (`llama-cpp-2`), built
//! with the cargo feature `local`.
//!
//! - **One backend per process.** The model and its context live on a thread of their
//!   own; requests queue on a channel, so calls from a `parallel for` wait their turn.
//! - **The grammar is the type's.** Every answer is decoded under the GBNF grammar of its
//!   schema (`schema::gbnf`): a struct's fields in order, an enum's variants, a
//!   `select`'s clauses with their arguments, Booleans, lists and options, integers in
//!   exactly their range, strings with their lengths and simple patterns, so an answer
//!   never needs repairing for its shape.
//! - **The call stack is a KV cache.** A prompt is the system turn, the rendered context
//!   (outermost frame first) and the call-site instruction, so a callee's prompt extends
//!   its caller's. The context keeps the tokens it last evaluated; a new prompt reuses
//!   their longest common prefix and evaluates only the rest. The answer's usage reports
//!   the prompt's tokens and how many were reused (`cached`), and `--stats` shows them.
//! - **A condition's answer is one token.** A Boolean condition is answered as its schema
//!   asks, a sentence of reason (at most 200 characters) and then `true` or `false`;
//!   `LOCAL_DECISION=token` asks the yes-or-no question alone, answered by one token.
//! - **Deterministic.** Greedy decoding: the same program and model give the same run.
//!
//! `LOCAL_REUSE=0` in the environment turns the prefix reuse off, for measuring it.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use crate::call::DECIDE_ASK;
use crate::llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};
use crate::schema::{self, gbnf, target};

/// Tokens the context holds: SmolLM2's training length, enough for the examples.
const CONTEXT_TOKENS: u32 = 8192;
/// Prompt tokens evaluated per batch.
const BATCH: usize = 512;

struct Job {
    prompt: Vec<(String, String)>,
    grammar: String,
    /// A Boolean condition: the one-word answer becomes the decision's JSON.
    decision: bool,
    max_tokens: u32,
    reply: tokio::sync::oneshot::Sender<Result<LlmResponse, ProviderError>>,
}

pub struct LocalProvider {
    jobs: mpsc::Sender<Job>,
    model: String,
    /// `LOCAL_DECISION=token`: a condition is the yes-or-no question alone, answered by
    /// one token (see `DECISION_ASK`).
    decision_token: bool,
    /// The answer's JSON Schema written into the prompt (`LOCAL_SCHEMA_IN_PROMPT=0`
    /// leaves it out): the grammar gives the answer its shape, the schema tells a small
    /// model what the fields are for.
    schema_in_prompt: bool,
}

impl LocalProvider {
    /// Loads the model at `path` on a thread of its own; fails when it cannot be loaded.
    pub fn load(path: &Path) -> Result<LocalProvider, String> {
        if !path.is_file() {
            return Err(format!(
                "no model at {}: pass `--model PATH.gguf` (tools/local-model/setup.sh fetches SmolLM2-135M-Instruct)",
                path.display()
            ));
        }
        check_memory(path)?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, loaded) = mpsc::channel::<Result<(), String>>();
        let file = path.to_owned();
        std::thread::Builder::new()
            .name("sap-local-model".to_owned())
            .spawn(move || serve(&file, &queue, &ready))
            .map_err(|e| format!("cannot start the model's thread: {e}"))?;
        loaded
            .recv()
            .map_err(|_| "the model's thread stopped while loading".to_owned())??;
        let model = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(LocalProvider {
            jobs,
            model,
            decision_token: std::env::var("LOCAL_DECISION").is_ok_and(|v| v == "token"),
            schema_in_prompt: std::env::var("LOCAL_SCHEMA_IN_PROMPT").map_or(true, |v| v != "0"),
        })
    }
}

/// Refuses a model whose weights would not fit in the memory available now (llama.cpp
/// maps the file and reads all of it; a model larger than memory would thrash or be
/// killed rather than fail).
fn check_memory(path: &Path) -> Result<(), String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the model {}: {e}", path.display()))?
        .len();
    if let Some(available) = available_memory()
        && size > available
    {
        return Err(format!(
            "the model {} is {}, more than the {} of memory available: use a smaller or more quantized model",
            path.display(),
            megabytes(size),
            megabytes(available)
        ));
    }
    Ok(())
}

/// `MemAvailable` from `/proc/meminfo`, in bytes (Linux; elsewhere unknown).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn megabytes(bytes: u64) -> String {
    format!("{} MB", bytes / (1024 * 1024))
}

impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            let decision = self.decision_token && *request.schema == schema::decision_schema();
            let question = request.instruction.strip_suffix(DECIDE_ASK);
            let user = if let Some(question) = question.filter(|_| decision) {
                // Asked alone: the reason the instruction asks servers for is not written.
                request.user_turn(&format!("{question}{DECISION_ASK}"))
            } else if self.schema_in_prompt && !decision {
                format!(
                    "{}\n\nAnswer with one JSON value matching this JSON Schema, and nothing else:\n{}",
                    request.user_text(),
                    target::for_prompt(&request.schema)
                )
            } else {
                request.user_text()
            };
            let mut prompt = vec![
                ("system".to_owned(), request.system.to_string()),
                ("user".to_owned(), user),
            ];
            for c in &request.corrections {
                prompt.push(("assistant".to_owned(), c.answer.clone()));
                prompt.push(("user".to_owned(), c.message.clone()));
            }
            let (reply, answer) = tokio::sync::oneshot::channel();
            let grammar = if decision {
                DECISION_GRAMMAR.to_owned()
            } else {
                gbnf::grammar(&request.schema)
            };
            let job = Job {
                prompt,
                grammar,
                decision,
                max_tokens: request.max_tokens.max(16),
                reply,
            };
            self.jobs.send(job).map_err(|_| ProviderError::Transport {
                message: "the local model's thread has stopped".to_owned(),
                retries: 0,
            })?;
            answer.await.map_err(|_| ProviderError::Transport {
                message: "the local model's thread stopped during the call".to_owned(),
                retries: 0,
            })?
        })
    }
}

/// How a condition is asked with `LOCAL_DECISION=token`: the yes-or-no question chat
/// models are tuned to answer. Measured on SmolLM2-135M, a choice without a reason
/// follows the model's bias more than the question: asked "true or false?" it said
/// `true` to every `keep_going` (`control_flow` ran into its loop limit), asked "yes or
/// no?" it said `No` to every `task_complete` (`while_placeholders` did); with a
/// sentence of reason first, both examples end. So the reason is the default.
const DECISION_ASK: &str = "? Answer yes or no.";

/// A condition's answer: one token, `Yes` or `No`.
const DECISION_GRAMMAR: &str = r#"root ::= ("Yes" | "No")"#;

fn failed(message: impl Into<String>) -> ProviderError {
    ProviderError::Transport {
        message: message.into(),
        retries: 0,
    }
}

/// The model's thread: loads it, then answers jobs in turn, keeping the tokens in the KV
/// cache between them.
fn serve(path: &PathBuf, queue: &mpsc::Receiver<Job>, ready: &mpsc::Sender<Result<(), String>>) {
    let loaded = (|| {
        let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
        backend.void_logs();
        let model = LlamaModel::load_from_file(&backend, path, &LlamaModelParams::default())
            .map_err(|e| format!("cannot load the model {}: {e}", path.display()))?;
        Ok::<_, String>((backend, model))
    })();
    let (backend, model) = match loaded {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get() as i32);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(
            CONTEXT_TOKENS.min(model.n_ctx_train().max(512)),
        ))
        .with_n_batch(BATCH as u32)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = match model.new_context(&backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot make the model's context: {e}")));
            return;
        }
    };
    let template = model.chat_template(None).ok();
    let _ = ready.send(Ok(()));
    let reuse = std::env::var("LOCAL_REUSE").map_or(true, |v| v != "0");
    // The tokens whose keys and values the context holds, in order.
    let mut cached: Vec<LlamaToken> = Vec::new();
    while let Ok(job) = queue.recv() {
        if !reuse {
            ctx.clear_kv_cache();
            cached.clear();
        }
        let result = answer(&model, path, &mut ctx, template.as_ref(), &mut cached, &job);
        if result.is_err() {
            // The cache's state is unknown after a failure: start afresh.
            ctx.clear_kv_cache();
            cached.clear();
        }
        let _ = job.reply.send(result);
    }
}

fn answer(
    model: &LlamaModel,
    file: &Path,
    ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
    template: Option<&LlamaChatTemplate>,
    cached: &mut Vec<LlamaToken>,
    job: &Job,
) -> Result<LlmResponse, ProviderError> {
    let text = render(model, template, &job.prompt)?;
    let tokens = model.vocab().tokenize(text.as_bytes(), false, true);
    let budget = ctx.n_ctx() as usize;
    if tokens.len() + job.max_tokens as usize >= budget {
        return Err(failed(format!(
            "the prompt has {} tokens and the answer may need {} more: beyond the context window of {budget} tokens of the model {}",
            tokens.len(),
            job.max_tokens,
            file.display()
        )));
    }
    // Reuse the longest common prefix; at least the last prompt token is evaluated, for
    // the logits of the first answer token.
    let mut common = cached
        .iter()
        .zip(&tokens)
        .take_while(|(a, b)| a == b)
        .count();
    common = common.min(tokens.len().saturating_sub(1));
    ctx.kv_cache_seq_rm(0, Some(common as u32), None)
        .map_err(|e| failed(format!("the KV cache: {e}")))?;
    cached.truncate(common);
    let mut batch = LlamaBatch::new(BATCH, 1);
    let mut position = common;
    for chunk in tokens[common..].chunks(BATCH) {
        batch.clear();
        for (i, &t) in chunk.iter().enumerate() {
            let last = position + i + 1 == tokens.len();
            batch
                .add(t, (position + i) as i32, &[0], last)
                .map_err(|e| failed(format!("a batch: {e}")))?;
        }
        ctx.decode(&mut batch)
            .map_err(|e| failed(format!("evaluating the prompt: {e}")))?;
        cached.extend_from_slice(chunk);
        position += chunk.len();
    }
    let grammar = LlamaSampler::grammar(model, &job.grammar, "root")
        .map_err(|e| failed(format!("the answer's grammar: {e}")))?;
    let mut sampler = LlamaSampler::chain_simple([grammar, LlamaSampler::greedy()]);
    let mut out: Vec<u8> = Vec::new();
    let mut finish = Finish::Length;
    let vocab = model.vocab();
    for _ in 0..job.max_tokens {
        let token = sampler.sample(ctx, -1);
        if vocab.is_eog(token) {
            finish = Finish::Stop;
            break;
        }
        out.extend(vocab.token_to_piece(token, false, None));
        batch.clear();
        batch
            .add(token, position as i32, &[0], true)
            .map_err(|e| failed(format!("a batch: {e}")))?;
        ctx.decode(&mut batch)
            .map_err(|e| failed(format!("generating: {e}")))?;
        cached.push(token);
        position += 1;
    }
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if job.decision {
        let yes = text == "Yes";
        text = format!(r#"{{"reason":"","answer":{yes}}}"#);
    }
    Ok(LlmResponse {
        text,
        finish,
        usage: Usage {
            input: tokens.len() as u64,
            output: (position - tokens.len()) as u64,
            cached: common as u64,
        },
        retries: 0,
        structured: Some("grammar"),
        sampling: Some("greedy".to_owned()),
    })
}

/// The prompt text: the model's chat template over the turns, ending where the
/// assistant's answer starts (a plain transcript if the model has no template).
fn render(
    model: &LlamaModel,
    template: Option<&LlamaChatTemplate>,
    turns: &[(String, String)],
) -> Result<String, ProviderError> {
    let Some(template) = template else {
        let mut text = String::new();
        for (role, content) in turns {
            text.push_str(&format!("{role}: {content}\n"));
        }
        text.push_str("assistant: ");
        return Ok(text);
    };
    let messages = turns
        .iter()
        .map(|(role, content)| LlamaChatMessage::new(role.clone(), content.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(format!("a chat message: {e}")))?;
    model
        .apply_chat_template(template, &messages, true)
        .map_err(|e| failed(format!("the model's chat template: {e}")))
}
