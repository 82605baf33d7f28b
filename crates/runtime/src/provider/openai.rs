//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`): OpenAI, vLLM,
//! llama.cpp server, Ollama, LM Studio. The answer's shape is sent as
//! `response_format: {type: "json_schema", json_schema: {…, strict}}`; streaming reads the
//! server-sent events and asks for the usage in the last one.

use serde_json::{Value as JsonValue, json};

use crate::http::{HttpConfig, HttpTransport};
use crate::llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

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
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub http: HttpConfig,
}

impl OpenAiConfig {
    /// A server at `base_url` (up to `/v1`), no API key, strict schemas, no streaming,
    /// the server's own sampling defaults.
    pub fn new(base_url: impl Into<String>, model: &str) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.to_owned(),
            strict: true,
            stream: false,
            temperature: None,
            max_tokens: None,
            http: HttpConfig::default(),
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
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> Result<OpenAiProvider, ProviderError> {
        let transport = HttpTransport::new(config.http.clone())?;
        Ok(OpenAiProvider { config, transport })
    }

    /// The request body, exactly as sent.
    pub fn body(&self, request: &LlmRequest) -> JsonValue {
        let mut messages = vec![
            json!({ "role": "system", "content": &*request.system }),
            json!({ "role": "user", "content": request.user_text() }),
        ];
        for c in &request.corrections {
            messages.push(json!({ "role": "assistant", "content": c.answer }));
            messages.push(json!({ "role": "user", "content": c.message }));
        }
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": &*request.schema,
                    "strict": self.config.strict,
                },
            },
        });
        if let Some(t) = self.config.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(m) = self.config.max_tokens {
            body["max_tokens"] = json!(m);
        }
        if self.config.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({ "include_usage": true });
        }
        body
    }

    async fn complete_inner(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
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
            .post_json(&url, &headers, &self.body(request))
            .await?;
        let retries = answer.retries;
        let mut response = if self.config.stream {
            read_stream(answer.response).await?
        } else {
            let text = answer.response.text().await.map_err(body_error)?;
            let json: JsonValue = serde_json::from_str(&text).map_err(|e| {
                ProviderError::Protocol(format!("the body is not JSON ({e}): {}", clip(&text)))
            })?;
            parse_completion(&json)?
        };
        response.retries = retries;
        Ok(response)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(self.complete_inner(request))
    }
}

fn body_error(e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout {
            message: e.to_string(),
            retries: 0,
        }
    } else {
        ProviderError::Transport {
            message: e.to_string(),
            retries: 0,
        }
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
    let text = choice
        .pointer("/message/content")
        .and_then(JsonValue::as_str)
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
    })
}

/// Reads `data: {chunk}` events until `data: [DONE]` or the end of the body.
async fn read_stream(mut response: reqwest::Response) -> Result<LlmResponse, ProviderError> {
    let mut buffer: Vec<u8> = Vec::new();
    let mut text = String::new();
    let mut refusal = String::new();
    let mut reason: Option<String> = None;
    let mut usage = Usage::default();
    let mut done = false;
    while !done {
        let Some(chunk) = response.chunk().await.map_err(body_error)? else {
            break;
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
                    retries: 0,
                });
            }
            if let Some(delta) = event.pointer("/choices/0/delta") {
                if let Some(piece) = delta.get("content").and_then(JsonValue::as_str) {
                    text.push_str(piece);
                }
                if let Some(piece) = delta.get("refusal").and_then(JsonValue::as_str) {
                    refusal.push_str(piece);
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
        }
    }
    let finish = finish_of(reason.as_deref(), Some(refusal));
    Ok(LlmResponse {
        text,
        finish,
        usage,
        retries: 0,
    })
}
