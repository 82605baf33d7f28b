//! Google Gemini (`POST {base}/models/{model}:generateContent`, the Generative Language
//! API). An answer's shape goes as `generationConfig.responseSchema` with
//! `responseMimeType: application/json`, in Gemini's OpenAPI dialect (see
//! `schema::target`); a `select` goes as function calling instead: one function
//! declaration per clause, its parameters the clause's arguments, and
//! `functionCallingConfig.mode: ANY` so the model must call one. The call is read back as
//! `{"choice": {"option": i, "arguments": {…}}}`, the shape every provider answers in.
//! The key goes in the `x-goog-api-key` header.

use serde_json::{Value as JsonValue, json};

use http_transport::{HttpConfig, HttpTransport};
use llm::schema::target::{self, Target};
use llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

#[derive(Clone, Debug)]
pub struct GeminiConfig {
    /// Up to the API version, e.g. `https://generativelanguage.googleapis.com/v1beta`.
    pub base_url: String,
    pub api_key: Option<String>,
    /// `gemini-2.5-flash`, or `models/gemini-2.5-flash`.
    pub model: String,
    pub temperature: Option<f64>,
    /// The base of every request's seed ([`LlmRequest::seed`]); `None` sends none.
    pub seed: Option<u64>,
    /// `maxOutputTokens`; `None` leaves the model's own limit (thinking models spend
    /// output tokens on thought).
    pub max_tokens: Option<u32>,
    pub http: HttpConfig,
}

impl GeminiConfig {
    /// `GEMINI_BASE_URL` (default the public API's `v1beta`) and `GEMINI_API_KEY`.
    pub fn from_env(model: &str) -> GeminiConfig {
        GeminiConfig {
            base_url: std::env::var("GEMINI_BASE_URL")
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "https://generativelanguage.googleapis.com/v1beta".to_owned()),
            api_key: std::env::var("GEMINI_API_KEY")
                .ok()
                .filter(|k| !k.is_empty()),
            model: model.to_owned(),
            temperature: None,
            seed: Some(0),
            max_tokens: None,
            http: HttpConfig::default(),
        }
    }
}

pub struct GeminiProvider {
    config: GeminiConfig,
    transport: HttpTransport,
}

/// A `select`'s clauses as function declarations: names unique and valid for Gemini
/// (the clause's function, numbered when two clauses call the same one).
fn declarations(request: &LlmRequest) -> Option<Vec<(String, JsonValue)>> {
    let branches = target::select_branches(&request.schema)?;
    let arguments = target::emit(&request.schema, Target::Gemini).schema;
    let mut out: Vec<(String, JsonValue)> = Vec::new();
    for (i, branch) in branches.iter().enumerate() {
        let description = branch
            .get("description")
            .and_then(JsonValue::as_str)
            .unwrap_or("");
        // The portable branch is described as "call `tool`: its documentation".
        let tool = description
            .strip_prefix("call `")
            .and_then(|rest| rest.split('`').next())
            .unwrap_or("option");
        let mut name: String = tool
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(60)
            .collect();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            name.insert_str(0, "call_");
        }
        if out.iter().any(|(n, _)| *n == name) {
            name = format!("{name}_{i}");
        }
        let mut declaration = json!({ "name": name, "description": description });
        let parameters = &arguments["anyOf"][i];
        // Gemini refuses an object without properties: a clause without arguments
        // declares none.
        if parameters
            .get("properties")
            .and_then(JsonValue::as_object)
            .is_some_and(|p| !p.is_empty())
        {
            declaration["parameters"] = parameters.clone();
        }
        out.push((name, declaration));
    }
    Some(out)
}

impl GeminiProvider {
    pub fn new(config: GeminiConfig) -> Result<GeminiProvider, ProviderError> {
        let transport = HttpTransport::new(config.http.clone())?;
        Ok(GeminiProvider { config, transport })
    }

    fn url(&self) -> String {
        let model = self.config.model.trim_start_matches("models/");
        format!(
            "{}/models/{model}:generateContent",
            self.config.base_url.trim_end_matches('/')
        )
    }

    /// The request body, exactly as sent.
    pub fn body(&self, request: &LlmRequest) -> JsonValue {
        self.body_with(request, declarations(request).as_deref())
    }

    /// The body, given the function declarations of a `select` (`None` otherwise).
    fn body_with(
        &self,
        request: &LlmRequest,
        functions: Option<&[(String, JsonValue)]>,
    ) -> JsonValue {
        let mut contents =
            vec![json!({ "role": "user", "parts": [{ "text": request.user_text() }] })];
        for c in &request.corrections {
            contents.push(json!({ "role": "model", "parts": [{ "text": c.answer }] }));
            contents.push(json!({ "role": "user", "parts": [{ "text": c.message }] }));
        }
        let mut generation = serde_json::Map::new();
        let mut body = json!({
            "systemInstruction": { "parts": [{ "text": &*request.system }] },
            "contents": contents,
        });
        match functions {
            Some(declarations) => {
                let names: Vec<&String> = declarations.iter().map(|(n, _)| n).collect();
                body["toolConfig"] = json!({
                    "functionCallingConfig": { "mode": "ANY", "allowedFunctionNames": names },
                });
                let declarations: Vec<&JsonValue> = declarations.iter().map(|(_, d)| d).collect();
                body["tools"] = json!([{ "functionDeclarations": declarations }]);
            }
            None => {
                generation.insert("responseMimeType".into(), json!("application/json"));
                generation.insert(
                    "responseSchema".into(),
                    target::emit(&request.schema, Target::Gemini).schema,
                );
            }
        }
        if let Some(t) = self.config.temperature {
            generation.insert("temperature".into(), json!(t));
        }
        if let Some(base) = self.config.seed {
            generation.insert("seed".into(), json!(request.seed(base)));
        }
        if let Some(m) = self.config.max_tokens {
            generation.insert("maxOutputTokens".into(), json!(m));
        }
        if !generation.is_empty() {
            body["generationConfig"] = JsonValue::Object(generation);
        }
        body
    }

    async fn complete_inner(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        let mut headers = Vec::new();
        if let Some(key) = &self.config.api_key {
            headers.push(("x-goog-api-key", key.clone()));
        }
        let functions = declarations(request);
        let body = self.body_with(request, functions.as_deref());
        let answer = self
            .transport
            .post_json(&self.url(), &headers, body)
            .await?;
        let retries = answer.retries;
        let json = answer.json().await?;
        let names: Vec<String> = functions
            .into_iter()
            .flatten()
            .map(|(name, _)| name)
            .collect();
        let mut response = parse_generation(&json, &names)?;
        response.retries = retries;
        response.structured = Some(if names.is_empty() {
            "responseSchema"
        } else {
            "functions"
        });
        response.sampling = llm::sampling_note(self.config.temperature, self.config.seed, request);
        Ok(response)
    }
}

impl Provider for GeminiProvider {
    fn name(&self) -> &str {
        "gemini"
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

/// A `GenerateContentResponse`. `functions` names the declarations of a `select`, in
/// clause order: a function call is read back as the clause it names.
pub fn parse_generation(
    json: &JsonValue,
    functions: &[String],
) -> Result<LlmResponse, ProviderError> {
    let n = |p: &str| json.pointer(p).and_then(JsonValue::as_u64).unwrap_or(0);
    let usage = Usage {
        input: n("/usageMetadata/promptTokenCount"),
        output: n("/usageMetadata/candidatesTokenCount") + n("/usageMetadata/thoughtsTokenCount"),
        cached: n("/usageMetadata/cachedContentTokenCount"),
    };
    let answer = |text: String, finish: Finish| LlmResponse {
        text,
        finish,
        usage,
        retries: 0,
        structured: None,
        sampling: None,
    };
    if let Some(reason) = json
        .pointer("/promptFeedback/blockReason")
        .and_then(JsonValue::as_str)
    {
        return Ok(answer(
            String::new(),
            Finish::Refusal(format!("Gemini blocked the prompt ({reason})")),
        ));
    }
    let candidate = json.pointer("/candidates/0").ok_or_else(|| {
        ProviderError::Protocol(format!(
            "no `candidates` in the answer: {}",
            json.to_string().chars().take(300).collect::<String>()
        ))
    })?;
    let parts: &[JsonValue] = candidate
        .pointer("/content/parts")
        .and_then(JsonValue::as_array)
        .map_or(&[], Vec::as_slice);
    let call = parts.iter().find_map(|p| p.get("functionCall"));
    let text = match call {
        Some(call) => {
            let name = call.get("name").and_then(JsonValue::as_str).unwrap_or("");
            let option = functions.iter().position(|f| f == name).ok_or_else(|| {
                ProviderError::Protocol(format!(
                    "the model called `{name}`, which was not offered (offered: {})",
                    functions.join(", ")
                ))
            })?;
            let arguments = call.get("args").cloned().unwrap_or_else(|| json!({}));
            json!({ "choice": { "option": option, "arguments": arguments } }).to_string()
        }
        None => parts
            .iter()
            // Thought summaries are not the answer.
            .filter(|p| p.get("thought").and_then(JsonValue::as_bool) != Some(true))
            .filter_map(|p| p.get("text").and_then(JsonValue::as_str))
            .collect(),
    };
    let finish = match candidate.get("finishReason").and_then(JsonValue::as_str) {
        None | Some("STOP") | Some("FINISH_REASON_UNSPECIFIED") => Finish::Stop,
        Some("MAX_TOKENS") => Finish::Length,
        Some(reason @ ("SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII")) => {
            Finish::Refusal(format!("Gemini stopped the answer ({reason})"))
        }
        Some(other) => Finish::Other(other.to_owned()),
    };
    Ok(answer(text, finish))
}
