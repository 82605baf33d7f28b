//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`): OpenAI, vLLM,
//! llama.cpp server, Ollama, LM Studio. Servers differ in how they can be asked for an
//! answer's shape, so the provider walks a ladder of [`Structured`] rungs: `json_schema`
//! (strict), `json_object` with the schema, a forced tool call, and the schema in the
//! prompt (the runtime validates every answer either way). When a server rejects a rung
//! — an error that names `response_format`, the schema, tools or a grammar — the same
//! request goes out once on the next rung, and the run keeps to the rung that worked
//! (remembered across runs in a file, when the configuration names one). Streaming reads
//! the server-sent events and asks for the usage in the last one.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value as JsonValue, json};

use http_transport::{HttpConfig, HttpTransport, body_error, names_request_shape};
use llm::schema::target::{self, Target};
use llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    /// Up to and including `/v1`, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1` for Ollama.
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    /// Ask the server to enforce the schema exactly (OpenAI's strict mode); servers that
    /// do not know the flag ignore it.
    pub strict: bool,
    pub stream: bool,
    /// The temperature; `None` leaves the server's default.
    pub temperature: Option<f64>,
    /// The base of every request's seed ([`LlmRequest::seed`]), so sampling repeats from run to run; `None`
    /// sends no seed.
    pub seed: Option<u64>,
    /// The output limit of every answer; `None` sends each request's budget derived from
    /// its type ([`LlmRequest::max_tokens`]), except to OpenAI's own API, whose
    /// reasoning models spend output tokens on thinking (and which enforces schemas, so
    /// answers do not run away).
    pub max_tokens: Option<u32>,
    /// The dialect the answer's schema is written in for this server.
    pub target: Target,
    pub http: HttpConfig,
    /// The rung to use, and no other (`--structured`); `None` walks the ladder from
    /// `first_rung`.
    pub structured: Option<Structured>,
    /// Where the ladder starts when nothing is remembered.
    pub first_rung: Structured,
    /// A file remembering, per base URL and model, the rung that worked.
    pub rung_memory: Option<PathBuf>,
    /// Say on standard error when the provider steps down the ladder.
    pub announce: bool,
}

/// How a request asks for the answer's shape, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structured {
    /// `response_format: {type: "json_schema", json_schema: {schema, strict}}`.
    JsonSchema,
    /// `response_format: {type: "json_object", schema}` (llama-cpp-python's form).
    JsonObject,
    /// One tool whose parameters are the schema, and `tool_choice` forcing it.
    Tools,
    /// No constraint: the schema is in the prompt, and the answer is validated here.
    Prompt,
}

impl Structured {
    pub const LADDER: [Structured; 4] = [
        Structured::JsonSchema,
        Structured::JsonObject,
        Structured::Tools,
        Structured::Prompt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Structured::JsonSchema => "json_schema",
            Structured::JsonObject => "json_object",
            Structured::Tools => "tools",
            Structured::Prompt => "prompt",
        }
    }

    pub fn parse(name: &str) -> Option<Structured> {
        Structured::LADDER.into_iter().find(|r| r.name() == name)
    }

    fn index(self) -> usize {
        Structured::LADDER
            .iter()
            .position(|r| *r == self)
            .unwrap_or(0)
    }
}

impl OpenAiConfig {
    /// A server at `base_url` (up to `/v1`), no API key, strict schemas, no streaming,
    /// the server's temperature, seeds derived from base 0.
    pub fn new(base_url: impl Into<String>, model: &str) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.to_owned(),
            strict: true,
            stream: false,
            temperature: None,
            seed: Some(0),
            max_tokens: None,
            target: Target::OpenAi,
            http: HttpConfig::default(),
            structured: None,
            first_rung: Structured::JsonSchema,
            rung_memory: None,
            announce: false,
        }
    }

    /// `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and `OPENAI_API_KEY`.
    pub fn from_env(model: &str) -> OpenAiConfig {
        let base_url = std::env::var("OPENAI_BASE_URL")
            .unwrap_or_else(|_| "https://api.openai.com/v1".to_owned());
        OpenAiConfig {
            api_key: std::env::var("OPENAI_API_KEY")
                .ok()
                .filter(|k| !k.is_empty()),
            ..OpenAiConfig::new(base_url, model)
        }
    }
}

pub struct OpenAiProvider {
    config: OpenAiConfig,
    transport: HttpTransport,
    /// The rung requests use now (an index into `Structured::LADDER`).
    rung: AtomicUsize,
    announced: AtomicBool,
    /// Set when the server rejected the sampling parameters (some models accept only
    /// their default temperature): requests then leave them out.
    server_sampling: AtomicBool,
    /// Set when the server cut a stream (llama-cpp-python's cuts one when another request
    /// arrives): requests then go unstreamed.
    unstreamed: AtomicBool,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> Result<OpenAiProvider, ProviderError> {
        let transport = HttpTransport::new(config.http.clone())?;
        let start = config
            .structured
            .or_else(|| remembered(&config))
            .unwrap_or(config.first_rung);
        Ok(OpenAiProvider {
            rung: AtomicUsize::new(start.index()),
            config,
            transport,
            announced: AtomicBool::new(false),
            server_sampling: AtomicBool::new(false),
            unstreamed: AtomicBool::new(false),
        })
    }

    /// The rung requests use now.
    pub fn rung(&self) -> Structured {
        Structured::LADDER[self.rung.load(Ordering::Relaxed).min(3)]
    }

    /// The request body on the current rung, exactly as sent.
    pub fn body(&self, request: &LlmRequest) -> JsonValue {
        self.body_on(request, self.rung())
    }

    fn body_on(&self, request: &LlmRequest, rung: Structured) -> JsonValue {
        let mut user = request.user_text();
        let schema = match rung {
            Structured::Prompt => {
                user.push_str(&format!(
                    "\n\nAnswer with one JSON value matching this JSON Schema, and nothing else:\n{}",
                    target::for_prompt(&request.schema)
                ));
                JsonValue::Null
            }
            Structured::Tools => {
                // A tool's parameters must be an object: a `select` keeps its wrapper.
                let emitted = target::emit(&request.schema, self.config.target).schema;
                if emitted.get("type").is_some() {
                    emitted
                } else {
                    target::emit(&request.schema, Target::Compatible).schema
                }
            }
            _ => target::emit(&request.schema, self.config.target).schema,
        };
        let mut messages = vec![
            json!({ "role": "system", "content": &*request.system }),
            json!({ "role": "user", "content": user }),
        ];
        for c in &request.corrections {
            messages.push(json!({ "role": "assistant", "content": c.answer }));
            messages.push(json!({ "role": "user", "content": c.message }));
        }
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
        });
        match rung {
            Structured::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": request.schema_name,
                        "schema": schema,
                        "strict": self.config.strict,
                    },
                });
            }
            Structured::JsonObject => {
                body["response_format"] = json!({ "type": "json_object", "schema": schema });
            }
            Structured::Tools => {
                body["tools"] = json!([{
                    "type": "function",
                    "function": {
                        "name": request.schema_name,
                        "description": "Give the answer.",
                        "parameters": schema,
                    },
                }]);
                body["tool_choice"] =
                    json!({ "type": "function", "function": { "name": request.schema_name } });
            }
            Structured::Prompt => {}
        }
        if !self.server_sampling.load(Ordering::Relaxed) {
            if let Some(t) = self.config.temperature {
                body["temperature"] = json!(t);
            }
            if let Some(base) = self.config.seed {
                body["seed"] = json!(request.seed(base));
            }
        }
        if let Some(m) = self.config.max_tokens.or_else(|| {
            (!self.config.base_url.contains("api.openai.com")).then_some(request.max_tokens)
        }) {
            body["max_tokens"] = json!(m);
        }
        if self.streams() {
            body["stream"] = json!(true);
            body["stream_options"] = json!({ "include_usage": true });
        }
        body
    }

    /// Sends `request` on the current rung; a server that rejects the rung gets the
    /// request once on each lower one (unless the rung was chosen by the user), and the
    /// run keeps to the one that worked.
    async fn complete_inner(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        let mut rung = self.rung();
        loop {
            match self.send(request, rung).await {
                Err(ProviderError::Http {
                    status,
                    message,
                    param,
                    ..
                }) if matches!(status, 400 | 415 | 422 | 500 | 501)
                    && names_request_shape(&message, param.as_deref())
                    && self.config.structured.is_none()
                    && rung != Structured::Prompt =>
                {
                    let next = Structured::LADDER[rung.index() + 1];
                    self.step_down(rung, next, status, &message);
                    rung = next;
                }
                Err(ProviderError::Http {
                    status: 400 | 422,
                    message,
                    ..
                }) if self.sends_sampling()
                    && ["temperature", "seed"]
                        .iter()
                        .any(|p| message.to_ascii_lowercase().contains(p)) =>
                {
                    // The model takes only its own sampling: say so once, and leave it.
                    self.server_sampling.store(true, Ordering::Relaxed);
                    if self.config.announce {
                        eprintln!(
                            "note: {} ({}) rejected the sampling parameters; using the model's own (runs may differ)",
                            self.config.base_url, self.config.model
                        );
                    }
                }
                other => return other,
            }
        }
    }

    /// Whether requests still carry sampling parameters.
    fn sends_sampling(&self) -> bool {
        (self.config.temperature.is_some() || self.config.seed.is_some())
            && !self.server_sampling.load(Ordering::Relaxed)
    }

    fn sampling(&self, request: &LlmRequest) -> Option<String> {
        if !self.sends_sampling() {
            return None;
        }
        llm::sampling_note(self.config.temperature, self.config.seed, request)
    }

    fn step_down(&self, from: Structured, to: Structured, status: u16, message: &str) {
        // Only ever down: concurrent calls may all learn it at once.
        self.rung.fetch_max(to.index(), Ordering::Relaxed);
        if self.config.announce && !self.announced.swap(true, Ordering::Relaxed) {
            eprintln!(
                "note: {} ({}) rejected `{}` structured output (HTTP {status}: {}); using `{}` (set `--structured` to choose)",
                self.config.base_url,
                self.config.model,
                from.name(),
                message
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .chars()
                    .take(120)
                    .collect::<String>(),
                to.name()
            );
        }
        if let Some(path) = &self.config.rung_memory {
            remember(path, &self.config, to);
        }
    }

    /// Whether requests are streamed now.
    fn streams(&self) -> bool {
        self.config.stream && !self.unstreamed.load(Ordering::Relaxed)
    }

    /// Sends `request` on `rung`. A stream the server cuts while other requests are in
    /// flight is the mark of a server that serves one request at a time and drops the
    /// answer it was writing when the next comes (llama-cpp-python's): requests then go
    /// one at a time, still streamed, so the runaway stop keeps working. A stream cut
    /// with nothing else in flight is sent again unstreamed, and the run stops streaming
    /// to that server.
    async fn send(
        &self,
        request: &LlmRequest,
        rung: Structured,
    ) -> Result<LlmResponse, ProviderError> {
        // Each cut under concurrency waits for the requests in flight; a server that
        // cuts even so is asked unstreamed after a few.
        const CROWDED_CUTS: usize = 8;
        let limiter = &self.transport.limiter;
        let mut crowded = 0;
        loop {
            if let Some(response) = self.send_once(request, rung).await? {
                return Ok(response);
            }
            if !self.streams() {
                return Err(ProviderError::Protocol(
                    "the server cut an answer short".to_owned(),
                ));
            }
            if limiter.in_flight() > 0 && crowded < CROWDED_CUTS {
                crowded += 1;
                if limiter.stats().cap > 1 {
                    limiter.one_at_a_time();
                    if self.config.announce {
                        eprintln!(
                            "note: {} ({}) cut a streamed answer when another request came; sending one request at a time, for the rest of the run",
                            self.config.base_url, self.config.model
                        );
                    }
                }
                continue;
            }
            if !self.unstreamed.swap(true, Ordering::Relaxed) && self.config.announce {
                eprintln!(
                    "note: {} ({}) cut a streamed answer short; asking again without streaming, for the rest of the run",
                    self.config.base_url, self.config.model
                );
            }
        }
    }

    /// One request; `None` when the server cut the stream before the answer finished.
    async fn send_once(
        &self,
        request: &LlmRequest,
        rung: Structured,
    ) -> Result<Option<LlmResponse>, ProviderError> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let mut headers = Vec::new();
        if let Some(key) = &self.config.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let answer = self
            .transport
            .post_json(&url, &headers, self.body_on(request, rung))
            .await?;
        let retries = answer.retries;
        // A server that does not stream answers with one JSON body anyway.
        let streamed = answer
            .response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        let mut response = if streamed {
            // A limit set for every answer (`max_output_tokens`) is one for every text.
            let text_limit = self.config.max_tokens.unwrap_or(request.max_text_tokens);
            match read_stream(answer.response, text_limit).await? {
                Some(response) => response,
                None => return Ok(None),
            }
        } else {
            parse_completion(&answer.json().await?)?
        };
        response.retries = retries;
        response.structured = Some(rung.name());
        response.sampling = self.sampling(request);
        Ok(Some(response))
    }
}

/// The key a server's rung is remembered under.
fn memory_key(config: &OpenAiConfig) -> String {
    format!("{} {}", config.base_url.trim_end_matches('/'), config.model)
}

fn remembered(config: &OpenAiConfig) -> Option<Structured> {
    let text = std::fs::read_to_string(config.rung_memory.as_ref()?).ok()?;
    let memory: JsonValue = serde_json::from_str(&text).ok()?;
    Structured::parse(memory.get(memory_key(config))?.as_str()?)
}

/// Records the rung that works for this server, keeping what other servers learned. A
/// memory that cannot be written is only a missed shortcut for the next run.
fn remember(path: &std::path::Path, config: &OpenAiConfig, rung: Structured) {
    let mut memory = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<JsonValue>(&t).ok())
        .filter(JsonValue::is_object)
        .unwrap_or_else(|| json!({}));
    memory[memory_key(config)] = json!(rung.name());
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, memory.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn concurrency(&self) -> Option<llm::limit::LimitStats> {
        Some(self.transport.limiter.stats())
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(self.complete_inner(request))
    }
}

fn clip(text: &str) -> String {
    text.chars().take(300).collect()
}

fn finish_of(reason: Option<&str>, refusal: Option<String>) -> Finish {
    if let Some(r) = refusal.filter(|r| !r.is_empty()) {
        return Finish::Refusal(r);
    }
    match reason {
        None | Some("stop") | Some("tool_calls") => Finish::Stop,
        Some("length") => Finish::Length,
        Some("content_filter") => {
            Finish::Refusal("the provider's content filter stopped the answer".to_owned())
        }
        Some(other) => Finish::Other(other.to_owned()),
    }
}

fn usage_of(json: &JsonValue) -> Usage {
    let n = |p: &str| json.pointer(p).and_then(JsonValue::as_u64).unwrap_or(0);
    Usage {
        input: n("/prompt_tokens"),
        output: n("/completion_tokens"),
        cached: n("/prompt_tokens_details/cached_tokens"),
    }
}

/// A non-streaming `chat.completion` object.
pub fn parse_completion(json: &JsonValue) -> Result<LlmResponse, ProviderError> {
    let choice = json.pointer("/choices/0").ok_or_else(|| {
        ProviderError::Protocol(format!(
            "no `choices` in the answer: {}",
            clip(&json.to_string())
        ))
    })?;
    // A forced tool call carries the answer as the call's arguments.
    let text = choice
        .pointer("/message/tool_calls/0/function/arguments")
        .and_then(JsonValue::as_str)
        .or_else(|| {
            choice
                .pointer("/message/content")
                .and_then(JsonValue::as_str)
        })
        .unwrap_or("")
        .to_owned();
    let refusal = choice
        .pointer("/message/refusal")
        .and_then(JsonValue::as_str)
        .map(str::to_owned);
    let finish = finish_of(
        choice.get("finish_reason").and_then(JsonValue::as_str),
        refusal,
    );
    let usage = json.get("usage").map(usage_of).unwrap_or_default();
    Ok(LlmResponse {
        text,
        finish,
        usage,
        retries: 0,
        structured: None,
        sampling: None,
    })
}

/// Reads `data: {chunk}` events until `data: [DONE]` or the end of the body, or until the
/// answer repeats itself or one of its texts runs past `max_text_tokens` (see
/// `runaway`), which is then read as cut off.
/// `None` when the stream ends without a finish reason: cut short.
async fn read_stream(
    mut response: http_transport::Response,
    max_text_tokens: u32,
) -> Result<Option<LlmResponse>, ProviderError> {
    let mut texts = llm::runaway::Texts::new(max_text_tokens);
    let mut ran_on = false;
    let mut buffer: Vec<u8> = Vec::new();
    let mut text = String::new();
    let mut refusal = String::new();
    let mut reason: Option<String> = None;
    let mut usage = Usage::default();
    let mut done = false;
    let mut checked = 0;
    while !done {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            // A connection closed in the middle of the stream cut it as surely as an
            // early `[DONE]` (llama-cpp-python's server does either when another request
            // arrives); a stream that stalls is an error.
            Err(e) if e.kind != http_transport::HttpErrorKind::Timeout => break,
            Err(e) => return Err(body_error(e, 0)),
        };
        buffer.extend_from_slice(&chunk);
        while let Some(newline) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=newline).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                done = true;
                break;
            }
            let event: JsonValue = serde_json::from_str(data).map_err(|e| {
                ProviderError::Protocol(format!("a stream event is not JSON ({e}): {}", clip(data)))
            })?;
            if let Some(message) = event.pointer("/error/message").and_then(JsonValue::as_str) {
                return Err(ProviderError::Http {
                    status: 200,
                    message: message.to_owned(),
                    param: event
                        .pointer("/error/param")
                        .and_then(JsonValue::as_str)
                        .map(str::to_owned),
                    retries: 0,
                });
            }
            if let Some(delta) = event.pointer("/choices/0/delta") {
                if let Some(piece) = delta.get("content").and_then(JsonValue::as_str) {
                    text.push_str(piece);
                    ran_on |= texts.feed(piece);
                }
                if let Some(piece) = delta.get("refusal").and_then(JsonValue::as_str) {
                    refusal.push_str(piece);
                }
                if let Some(piece) = delta
                    .pointer("/tool_calls/0/function/arguments")
                    .and_then(JsonValue::as_str)
                {
                    text.push_str(piece);
                    ran_on |= texts.feed(piece);
                }
            }
            if let Some(r) = event
                .pointer("/choices/0/finish_reason")
                .and_then(JsonValue::as_str)
            {
                reason = Some(r.to_owned());
            }
            if let Some(u) = event.get("usage").filter(|u| !u.is_null()) {
                usage = usage_of(u);
            }
            // A model repeating itself, or writing on inside one text, is stopped now,
            // not at the output limit: dropping the response closes the connection,
            // which stops the server.
            let repeats = text.len() >= checked + 256 && {
                checked = text.len();
                llm::runaway::repeats_itself(&text)
            };
            if repeats || ran_on {
                // The usage comes in the last event, which never comes: the output is
                // counted at about four characters a token, so budgets still see it.
                usage.output = usage.output.max(text.len() as u64 / 4);
                let kept = llm::runaway::trim(&text).len();
                text.truncate(kept);
                return Ok(Some(LlmResponse {
                    text,
                    finish: Finish::Length,
                    usage,
                    retries: 0,
                    structured: None,
                    sampling: None,
                }));
            }
        }
    }
    if done {
        // What follows `[DONE]` is the body's end: read, it lets the connection be kept.
        response.release();
    }
    if reason.is_none() {
        // No finish reason: the server cut the stream. llama-cpp-python's server does so
        // to a stream when another request arrives, ending it with `[DONE]` all the same.
        return Ok(None);
    }
    let finish = finish_of(reason.as_deref(), Some(refusal));
    Ok(Some(LlmResponse {
        text,
        finish,
        usage,
        retries: 0,
        structured: None,
        sampling: None,
    }))
}
