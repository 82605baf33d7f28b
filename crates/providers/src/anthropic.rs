//! Anthropic Messages (`POST {base}/v1/messages`). The answer's shape is a forced tool
//! call (`tool_choice: {type: "tool"}`) whose `input_schema` is the schema (in the strict
//! tool-input dialect, see `schema::target`); the stable
//! prefix — system preamble and rendered context — carries `cache_control` so repeated
//! prefixes are read from Anthropic's prompt cache. Usage is normalised: cached tokens are
//! the cache reads, and input counts every input token.

use serde_json::{Value as JsonValue, json};

use http_transport::{HttpConfig, HttpTransport};
use llm::schema::target::{self, Target};
use llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

/// The tool the model is made to call with its answer.
pub const ANSWER_TOOL: &str = "answer";

#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    /// Without `/v1`, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub http: HttpConfig,
}

impl AnthropicConfig {
    /// `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`) and `ANTHROPIC_API_KEY`.
    pub fn from_env(model: &str) -> AnthropicConfig {
        AnthropicConfig {
            base_url: std::env::var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|_| "https://api.anthropic.com".to_owned()),
            api_key: std::env::var("ANTHROPIC_API_KEY")
                .ok()
                .filter(|k| !k.is_empty()),
            model: model.to_owned(),
            max_tokens: 4096,
            temperature: None,
            http: HttpConfig::default(),
        }
    }
}

pub struct AnthropicProvider {
    config: AnthropicConfig,
    transport: HttpTransport,
}

impl AnthropicProvider {
    pub fn new(config: AnthropicConfig) -> Result<AnthropicProvider, ProviderError> {
        let transport = HttpTransport::new(config.http.clone())?;
        Ok(AnthropicProvider { config, transport })
    }

    /// The request body, exactly as sent.
    pub fn body(&self, request: &LlmRequest) -> JsonValue {
        let mut first_turn = Vec::new();
        if !request.context.is_empty() {
            first_turn.push(json!({ "type": "text", "text": request.context, "cache_control": { "type": "ephemeral" } }));
        }
        first_turn.push(json!({ "type": "text", "text": request.instruction }));
        let mut messages = vec![json!({ "role": "user", "content": first_turn })];
        for c in &request.corrections {
            messages.push(
                json!({ "role": "assistant", "content": [{ "type": "text", "text": c.answer }] }),
            );
            messages.push(
                json!({ "role": "user", "content": [{ "type": "text", "text": c.message }] }),
            );
        }
        let mut body = json!({
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "system": [{ "type": "text", "text": &*request.system, "cache_control": { "type": "ephemeral" } }],
            "messages": messages,
            "tools": [{
                "name": ANSWER_TOOL,
                "description": format!("Give your answer ({}).", request.schema_name),
                "input_schema": target::emit(&request.schema, Target::Anthropic).schema,
            }],
            "tool_choice": { "type": "tool", "name": ANSWER_TOOL },
        });
        if let Some(t) = self.config.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    async fn complete_inner(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
        if let Some(key) = &self.config.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        let answer = self
            .transport
            .post_json(&url, &headers, self.body(request))
            .await?;
        let retries = answer.retries;
        let json = answer.json().await?;
        let mut response = parse_message(&json)?;
        response.retries = retries;
        Ok(response)
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
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

/// A `message` object: the answer is the input of the tool call, or else the text.
pub fn parse_message(json: &JsonValue) -> Result<LlmResponse, ProviderError> {
    let content = json
        .get("content")
        .and_then(JsonValue::as_array)
        .ok_or_else(|| {
            ProviderError::Protocol(format!(
                "no `content` in the answer: {}",
                json.to_string().chars().take(300).collect::<String>()
            ))
        })?;
    let tool_input = content
        .iter()
        .find(|b| b.get("type").and_then(JsonValue::as_str) == Some("tool_use"))
        .and_then(|b| b.get("input"));
    let text: String = match tool_input {
        Some(input) => input.to_string(),
        None => content
            .iter()
            .filter_map(|b| b.get("text").and_then(JsonValue::as_str))
            .collect::<Vec<_>>()
            .join(""),
    };
    let stop = json.get("stop_reason").and_then(JsonValue::as_str);
    let finish = match stop {
        None | Some("end_turn") | Some("tool_use") | Some("stop_sequence") => Finish::Stop,
        Some("max_tokens") => Finish::Length,
        Some("refusal") => Finish::Refusal(if text.is_empty() {
            "the model refused to answer".to_owned()
        } else {
            text.clone()
        }),
        Some(other) => Finish::Other(other.to_owned()),
    };
    let n = |p: &str| json.pointer(p).and_then(JsonValue::as_u64).unwrap_or(0);
    let cached = n("/usage/cache_read_input_tokens");
    let usage = Usage {
        input: n("/usage/input_tokens") + cached + n("/usage/cache_creation_input_tokens"),
        output: n("/usage/output_tokens"),
        cached,
    };
    Ok(LlmResponse {
        text,
        finish,
        usage,
        retries: 0,
        structured: None,
        sampling: None,
    })
}
