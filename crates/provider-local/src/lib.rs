//! `--provider local`: a GGUF model in this process, on llama.cpp (`llama-cpp-2`), built
//! when `sapc` has the cargo feature `local`.
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
//!   its caller's. The KV cache keeps `SEQUENCES` sequences of evaluated tokens in one
//!   pool of cells (`Cache`); a new prompt reuses the longest prefix any of them holds
//!   and evaluates only the rest, and a sibling call's shared prefix is copied rather
//!   than truncating the sequence it came from. The answer's usage reports the prompt's
//!   tokens and how many were reused (`cached`), and `--stats` shows them. A run's
//!   first prompt is kept across runs (`Kept`), whole and up to its system turn, as a
//!   warm server keeps its prompts: a repeated run evaluates one token of it.
//! - **The prompt says what to write in few tokens.** The grammar enforces the answer's
//!   shape; the prompt shows it to the model as its shape (`schema::shape`: `{"bugs":
//!   [string], "severity": "Low" | "Medium" | "High"}`, with each field's doc comment),
//!   not as JSON Schema, in the system turn, so calls asking for the same type share it.
//! - **Sampling asks the grammar about one token.** The greedy choice is checked against
//!   the grammar, which is applied to the whole vocabulary only when it refuses it.
//! - **A condition's answer is one token.** A Boolean condition is answered as its schema
//!   asks, a sentence of reason (at most 200 characters) and then `true` or `false`;
//!   `LOCAL_DECISION=token` asks the yes-or-no question alone, answered by one token.
//! - **Deterministic.** Greedy decoding, and calls answered in the order they come:
//!   `sapc run` runs a `parallel for`'s iterations one after another with this provider
//!   (unless `--concurrency` says otherwise), so they come in the program's order. The
//!   order matters: where a call's keys and values sit in the cache, and where its prompt
//!   was split into batches, change the last bits of its logits, and a long answer can
//!   take another path from there (`examples/batch_invariance.rs` shows both). So the
//!   same program and model give the same run.
//!
//! `LOCAL_REUSE=0` in the environment turns the prefix reuse off, for measuring it.

#![cfg(feature = "llama")]
#![deny(unsafe_code)]

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
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

mod cache;
mod kept;

use cache::{Cache, Context, SEQUENCES};
use kept::Kept;

use llm::DECIDE_ASK;
use llm::schema::{self, gbnf, shape, target};
use llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

/// The fewest cells a context may be capped at.
const LEAST_CONTEXT: u32 = 512;
/// Prompt tokens evaluated per batch.
const BATCH: usize = 512;

struct Job {
    prompt: Vec<(String, String)>,
    grammar: String,
    /// A Boolean condition: the one-word answer becomes the decision's JSON.
    decision: bool,
    max_tokens: u32,
    /// The most one text of the answer may take (`LlmRequest::max_text_tokens`).
    max_text_tokens: u32,
    reply: tokio::sync::oneshot::Sender<Result<LlmResponse, ProviderError>>,
}

pub struct LocalProvider {
    jobs: mpsc::Sender<Job>,
    model: String,
    /// `LOCAL_DECISION=token`: a condition is the yes-or-no question alone, answered by
    /// one token (see `DECISION_ASK`).
    decision_token: bool,
    /// Where the answer's shape is written into the prompt: the grammar gives the
    /// answer its shape, the prompt tells a small model what the fields are for.
    schema_place: SchemaPlace,
    /// `LOCAL_SCHEMA_TEXT=json` writes the JSON Schema itself instead of the answer's
    /// shape (`schema::shape`), for measuring one against the other.
    schema_as_json: bool,
    /// From the start of `load` until the model and its first context were ready.
    loaded_in: std::time::Duration,
}

impl LocalProvider {
    /// Loads the model at `path` on a thread of its own; fails when it cannot be loaded.
    /// Loads the GGUF model at `path`. Its context holds up to the model's training
    /// length (Qwen2.5's 32,768, SmolLM2's 8,192), or `context` tokens when that is less
    /// (`--context-tokens`, `context_tokens` in sap.toml): the cells are made as prompts
    /// need them, so a long cap costs memory only when used.
    pub fn load(path: &Path, context: Option<u32>) -> Result<LocalProvider, String> {
        if !path.is_file() {
            return Err(format!(
                "no model at {}: pass `--model PATH.gguf` (tools/local-model/setup.sh fetches SmolLM2-135M-Instruct)",
                path.display()
            ));
        }
        let started = std::time::Instant::now();
        check_memory(path)?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, loaded) = mpsc::channel::<Result<(), String>>();
        let file = path.to_owned();
        std::thread::Builder::new()
            .name("sap-local-model".to_owned())
            .spawn(move || serve(&file, context, &queue, &ready))
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
            schema_place: match std::env::var("LOCAL_SCHEMA_IN_PROMPT").as_deref() {
                Ok("0") => SchemaPlace::Nowhere,
                Ok("end") => SchemaPlace::End,
                _ => SchemaPlace::System,
            },
            schema_as_json: std::env::var("LOCAL_SCHEMA_TEXT").is_ok_and(|v| v == "json"),
            loaded_in: started.elapsed(),
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

    /// One call at a time on one context, and a call's logits depend on where the
    /// calls before it left their keys and values: in program order, a run repeats.
    fn in_order(&self) -> bool {
        true
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn load_time(&self) -> Option<std::time::Duration> {
        Some(self.loaded_in)
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            let condition = *request.schema == schema::decision_schema();
            let decision = self.decision_token && condition;
            let question = request.instruction.strip_suffix(DECIDE_ASK);
            let user = match question.filter(|_| decision) {
                // Asked alone: the reason the instruction asks servers for is not written.
                Some(question) => request.user_turn(&format!("{question}{DECISION_ASK}")),
                None => request.user_text(),
            };
            // A condition's schema is JSON Schema after its question: in the system turn,
            // or shown as its shape, SmolLM2-135M answered `control_flow`'s `keep_going`
            // with `true` every time (the loop ran into its limit); its prompt is short.
            let (place, as_json) = match self.schema_place {
                _ if decision => (SchemaPlace::Nowhere, false),
                SchemaPlace::Nowhere => (SchemaPlace::Nowhere, false),
                _ if condition => (SchemaPlace::End, true),
                place => (place, self.schema_as_json),
            };
            let schema = || match as_json {
                true => format!(
                    "Answer with one JSON value matching this JSON Schema, and nothing else:\n{}",
                    target::for_prompt(&request.schema)
                ),
                false => format!(
                    "Answer with one JSON value of this shape, and nothing else:\n{}",
                    shape::shape(&request.schema)
                ),
            };
            let (system, user) = match place {
                SchemaPlace::System => (format!("{}\n\n{}", request.system, schema()), user),
                SchemaPlace::End => (
                    request.system.to_string(),
                    format!("{user}\n\n{}", schema()),
                ),
                SchemaPlace::Nowhere => (request.system.to_string(), user),
            };
            let mut prompt = vec![("system".to_owned(), system), ("user".to_owned(), user)];
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
                max_text_tokens: request.max_text_tokens,
                reply,
            };
            self.jobs
                .send(job)
                .map_err(|_| failed("its thread has stopped"))?;
            answer
                .await
                .map_err(|_| failed("its thread stopped during the call"))?
        })
    }
}

/// Where a prompt gives the answer's shape (`LOCAL_SCHEMA_IN_PROMPT`: `0` for
/// nowhere, `end` after the instruction, anything else the system turn).
#[derive(Clone, Copy, PartialEq, Eq)]
enum SchemaPlace {
    Nowhere,
    /// In the system turn, before the context: calls asking for the same type share
    /// it in their prompts' prefix, so it is evaluated once for all of them (the
    /// `condition_for` calls of `anot_cafes`).
    System,
    /// After the call-site instruction, where a model reads it last, but evaluated
    /// anew at every call: it follows the context, which differs from call to call.
    End,
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
    ProviderError::Model(message.into())
}

/// The model's thread: loads it, then answers jobs in turn, keeping the tokens in the KV
/// cache between them.
fn serve(
    path: &PathBuf,
    context: Option<u32>,
    queue: &mpsc::Receiver<Job>,
    ready: &mpsc::Sender<Result<(), String>>,
) {
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
    let reuse = std::env::var("LOCAL_REUSE").map_or(true, |v| v != "0");
    let engine = Engine {
        model: &model,
        backend: &backend,
        threads,
        most: context
            .unwrap_or(u32::MAX)
            .min(model.n_ctx_train())
            .max(LEAST_CONTEXT),
        kept: reuse.then(|| Kept::from_env(path, threads)).flatten(),
    };
    let mut ctx = match engine.context(FIRST_CONTEXT_TOKENS.min(engine.most)) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let template = model.chat_template(None).ok();
    let _ = ready.send(Ok(()));
    let mut cache = Cache::default();
    while let Ok(job) = queue.recv() {
        if !reuse {
            cache.clear(&mut ctx);
        }
        let result = answer(&engine, path, &mut ctx, template.as_ref(), &mut cache, &job);
        if result.is_err() {
            // The cache's state is unknown after a failure: start afresh.
            cache.clear(&mut ctx);
        }
        let _ = job.reply.send(result);
    }
}

/// Cells the KV cache starts with. Making a context clears all its cells: with 8192 it
/// took about 100 ms of a one-call run, with 2048 about 30. When the cells are full,
/// the context doubles (up to `Engine::most`; the cache starts again) and the answer
/// is made again in it, rather than dropping a sequence.
const FIRST_CONTEXT_TOKENS: u32 = 2048;

/// Answer tokens a context is made to hold after its prompt, before it needs to grow.
const ANSWER_ROOM: usize = 512;

/// The model and what a context for it is made with.
struct Engine<'m> {
    model: &'m LlamaModel,
    backend: &'m LlamaBackend,
    threads: i32,
    /// The most cells a context gets: the model's training length, or the cap the run
    /// sets if shorter.
    most: u32,
    /// Where first prompts' keys and values are kept across runs, if anywhere.
    kept: Option<Kept>,
}

impl<'m> Engine<'m> {
    fn context(&self, cells: u32) -> Result<Context<'m>, String> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(cells))
            .with_n_batch(BATCH as u32)
            .with_n_seq_max(SEQUENCES as u32)
            // One pool of cells for every sequence: a copied prefix shares its cells.
            .with_kv_unified(true)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        self.model
            .new_context(self.backend, params)
            .map_err(|e| format!("cannot make the model's context of {cells} tokens: {e}"))
    }

    /// Replaces `ctx` by one of at least `cells` cells (a power of two, at most
    /// `most`); the cache starts empty.
    fn grow(
        &self,
        ctx: &mut Context<'m>,
        cache: &mut Cache,
        cells: usize,
    ) -> Result<(), ProviderError> {
        let cells = (cells.next_power_of_two() as u32).min(self.most);
        *ctx = self.context(cells).map_err(failed)?;
        *cache = Cache::default();
        Ok(())
    }
}

/// Why an answer stopped short: the context is full and may grow, or a failure.
enum Stop {
    Full,
    Failed(ProviderError),
}

impl From<ProviderError> for Stop {
    fn from(e: ProviderError) -> Stop {
        Stop::Failed(e)
    }
}

/// Evaluates `batch` in sequence `seq`. When the cells are full, a context that may grow
/// stops the answer (`Stop::Full`); one that may not makes room by evicting other
/// sequences.
fn decode(
    ctx: &mut Context<'_>,
    cache: &mut Cache,
    may_grow: bool,
    seq: usize,
    batch: &mut LlamaBatch,
    what: &str,
) -> Result<(), Stop> {
    loop {
        match ctx.decode(batch) {
            Ok(()) => return Ok(()),
            Err(llama_cpp_2::DecodeError::NoKvCacheSlot) if may_grow => return Err(Stop::Full),
            Err(llama_cpp_2::DecodeError::NoKvCacheSlot) if cache.evict(ctx, seq)? => {}
            Err(e) => return Err(failed(format!("{what}: {e}")).into()),
        }
    }
}

fn answer<'m>(
    engine: &Engine<'m>,
    file: &Path,
    ctx: &mut Context<'m>,
    template: Option<&LlamaChatTemplate>,
    cache: &mut Cache,
    job: &Job,
) -> Result<LlmResponse, ProviderError> {
    let model = engine.model;
    let text = render(model, template, &job.prompt)?;
    let tokens = model.vocab().tokenize(text.as_bytes(), false, true);
    // Asked only of a call into an empty cache (the run's first, or one after the
    // context grew): the system turn's length.
    let head = || system_turn(model, template, &job.prompt, &tokens);
    let needed = tokens.len() + job.max_tokens as usize + 1;
    if needed > engine.most as usize {
        return Err(failed(format!(
            "the prompt has {} tokens and the answer may need {} more: beyond the context window of {} tokens of the model {} (its training length, or the cap of --context-tokens / `context_tokens` in sap.toml)",
            tokens.len(),
            job.max_tokens,
            engine.most,
            file.display()
        )));
    }
    // The prompt must fit, with some room for the answer; the answer's whole budget is
    // a bound, seldom reached, so beyond that room the context grows when its cells are
    // full.
    let room = tokens.len() + (job.max_tokens as usize).min(ANSWER_ROOM) + 1;
    if room > ctx.n_ctx() as usize {
        // As much again for the prompts this one alternates with: a context made for
        // one 3,800-token prompt (a variant of ANoT's conditions, docs/QUALITY.md) had
        // no room for the next request's first call; it grew, the cache started again,
        // and the shared prompt took 116 s to evaluate anew.
        engine.grow(ctx, cache, 2 * room)?;
    }
    loop {
        let may_grow = ctx.n_ctx() < engine.most;
        match attempt(engine, ctx, cache, may_grow, &tokens, &head, job) {
            Ok(response) => return Ok(response),
            Err(Stop::Full) => {
                let twice = 2 * ctx.n_ctx() as usize;
                engine.grow(ctx, cache, twice)?;
            }
            Err(Stop::Failed(e)) => return Err(e),
        }
    }
}

/// The answer to `tokens`, reusing what the cache holds of them; `head` gives the
/// length of the system turn they start with.
fn attempt(
    engine: &Engine<'_>,
    ctx: &mut Context<'_>,
    cache: &mut Cache,
    may_grow: bool,
    tokens: &[LlamaToken],
    head: &dyn Fn() -> Option<usize>,
    job: &Job,
) -> Result<LlmResponse, Stop> {
    let model = engine.model;
    let fresh = cache.is_empty();
    let (seq, mut common) = cache.place(ctx, tokens)?;
    let ids = [seq as i32];
    // Into an empty cache, the prompt is evaluated in batches that end at fixed marks:
    // the end of the system turn and the end of all but the last token. So the keys and
    // values up to a mark are the same bits whether evaluated here or restored from an
    // earlier run (`Kept`), and so is everything after them. The longest mark kept is
    // restored: a run repeated evaluates one token of its first prompt, a run whose
    // first call differs (its input, its context) still finds its system turn.
    let marks: Vec<usize> = if fresh && common == 0 {
        head()
            .into_iter()
            .chain(Some(tokens.len().saturating_sub(1)))
            .filter(|&m| m > 0)
            .collect()
    } else {
        Vec::new()
    };
    let kept = engine.kept.as_ref().filter(|_| !marks.is_empty());
    if let Some(kept) = kept
        && let Some(&mark) = marks
            .iter()
            .rev()
            .find(|&&m| kept.restore(ctx, seq, &tokens[..m]))
    {
        cache.sequences[seq].tokens = tokens[..mark].to_vec();
        common = mark;
    }
    let mut batch = LlamaBatch::new(BATCH, 1);
    let mut position = common;
    let mut start = common;
    for end in marks
        .iter()
        .copied()
        .filter(|&m| m > common)
        .chain([tokens.len()])
    {
        for chunk in tokens[start..end].chunks(BATCH) {
            batch.clear();
            for (i, &t) in chunk.iter().enumerate() {
                let last = position + i + 1 == tokens.len();
                batch
                    .add(t, (position + i) as i32, &ids, last)
                    .map_err(|e| failed(format!("a batch: {e}")))?;
            }
            decode(
                ctx,
                cache,
                may_grow,
                seq,
                &mut batch,
                "evaluating the prompt",
            )?;
            cache.sequences[seq].tokens.extend_from_slice(chunk);
            position += chunk.len();
        }
        if let Some(kept) = kept
            && end < tokens.len()
        {
            kept.save(ctx, seq, &tokens[..end]);
        }
        start = end;
    }
    let mut grammar = LlamaSampler::grammar(model, &job.grammar, "root")
        .map_err(|e| failed(format!("the answer's grammar: {e}")))?;
    let mut out: Vec<u8> = Vec::new();
    let mut finish = Finish::Length;
    let vocab = model.vocab();
    // A text that runs on past its budget (`runaway`) is closed there: the quote is
    // given as the next token, when the grammar allows one, and the model goes on with
    // the rest of the answer. Where it does not, the answer ends, as cut off.
    let mut texts = llm::runaway::Texts::per_token(job.max_text_tokens);
    let quote = match vocab.tokenize(b"\"", false, false)[..] {
        [q] => Some(q),
        _ => None,
    };
    for _ in 0..job.max_tokens {
        let mut token = next_token(ctx, &mut grammar);
        let mut piece = vocab.token_to_piece(token, false, None);
        if !vocab.is_eog(token) && texts.would_run_on(&String::from_utf8_lossy(&piece)) {
            match quote.filter(|&q| allows(&mut grammar, q)) {
                Some(q) => {
                    token = q;
                    piece = b"\"".to_vec();
                }
                None => break,
            }
        }
        grammar.accept(token);
        if vocab.is_eog(token) {
            finish = Finish::Stop;
            break;
        }
        texts.feed(&String::from_utf8_lossy(&piece));
        out.extend(piece);
        batch.clear();
        batch
            .add(token, position as i32, &ids, true)
            .map_err(|e| failed(format!("a batch: {e}")))?;
        decode(ctx, cache, may_grow, seq, &mut batch, "generating")?;
        cache.sequences[seq].tokens.push(token);
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

/// The next token, greedy under the grammar. The best token of the whole vocabulary is
/// taken when the grammar allows it, which asks the grammar about one token; only when
/// it does not is the grammar applied to every token (as llama.cpp's server samples).
/// Either way the token is the first of the highest logit among those the grammar
/// allows, the one a pass over the whole vocabulary would choose, so answers are
/// unchanged; a grammar pass over SmolLM2's 49,152 tokens costs more than evaluating
/// the token.
fn next_token(ctx: &Context<'_>, grammar: &mut LlamaSampler) -> LlamaToken {
    let logits = ctx.get_logits_ith(-1);
    let best = first_max(logits.iter().copied().enumerate());
    let mut one = LlamaTokenDataArray::new(
        vec![LlamaTokenData::new(
            LlamaToken::new(best as i32),
            logits[best],
            0.0,
        )],
        false,
    );
    grammar.apply(&mut one);
    if one.data[0].logit() > f32::NEG_INFINITY {
        return LlamaToken::new(best as i32);
    }
    let mut all = LlamaTokenDataArray::from_iter(ctx.candidates_ith(-1), false);
    grammar.apply(&mut all);
    let i = first_max(all.data.iter().map(|t| t.logit()).enumerate());
    all.data[i].id()
}

/// Whether the grammar, as it stands, allows `token` next.
fn allows(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
    grammar.apply(&mut one);
    one.data[0].logit() > f32::NEG_INFINITY
}

/// The index of the first greatest value (the one llama.cpp's greedy sampler takes).
fn first_max(values: impl Iterator<Item = (usize, f32)>) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, v) in values {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0
}

/// How many of `tokens` (the whole prompt) are the system turn, `turns[0]`, rendered on
/// its own: `None` when that is not a prefix of them with at least one token after it.
fn system_turn(
    model: &LlamaModel,
    template: Option<&LlamaChatTemplate>,
    turns: &[(String, String)],
    tokens: &[LlamaToken],
) -> Option<usize> {
    let template = template?;
    let (role, content) = turns.first()?;
    let message = LlamaChatMessage::new(role.clone(), content.clone()).ok()?;
    let text = model
        .apply_chat_template(template, &[message], false)
        .ok()?;
    let head = model.vocab().tokenize(text.as_bytes(), false, true);
    (head.len() + 1 < tokens.len() && tokens.starts_with(&head)).then_some(head.len())
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
