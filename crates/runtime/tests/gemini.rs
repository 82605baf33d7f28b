//! The Gemini client against an in-process server speaking `generateContent`: the exact
//! requests sent (schema dialect, function calling for `select`), the answers read back,
//! refusals, cut-off answers and errors.

mod common;

use std::sync::Arc;

use common::*;
use llm::Provider;
use llm::schema::ArmDesc;
use llm::types::{ParamDesc, TypeDesc};
use providers::gemini::{GeminiConfig, GeminiProvider};
use runtime::{Context, ErrorKind, Value};
use serde_json::{Value as JsonValue, json};
use test_support::http::{MockServer, Reply};

fn gemini(server: &MockServer) -> Arc<dyn Provider> {
    Arc::new(
        GeminiProvider::new(GeminiConfig {
            base_url: format!("{}/v1beta", server.url()),
            api_key: Some("g-key".into()),
            model: "gemini-2.5-flash".into(),
            temperature: Some(0.0),
            seed: Some(7),
            max_tokens: None,
            http: http_config(),
        })
        .unwrap(),
    )
}

fn text_answer(text: &str, finish: &str) -> JsonValue {
    json!({
        "candidates": [{ "content": { "role": "model", "parts": [{ "text": text }] }, "finishReason": finish }],
        "usageMetadata": { "promptTokenCount": 50, "candidatesTokenCount": 9, "thoughtsTokenCount": 3, "cachedContentTokenCount": 20 },
    })
}

#[tokio::test]
async fn produce_sends_a_response_schema_in_gemini_dialect() {
    let answer = r#"{"bugs": ["b is 0"], "severity": "High"}"#;
    let server = MockServer::start(move |_, _| Reply::json(text_answer(answer, "STOP"))).await;
    let rt = runtime(gemini(&server));
    let ctx = Context::new();
    ctx.instruct("Find the bugs");
    let value = rt
        .produce(&site("analyze"), &ctx, "analyze", &analysis())
        .await
        .unwrap();
    assert_eq!(
        value.to_json(),
        json!({"bugs": ["b is 0"], "severity": "High"})
    );
    let requests = server.requests();
    let request = &requests[0];
    assert_eq!(
        request.path,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(request.header("x-goog-api-key"), Some("g-key"));
    let body = request.json();
    assert!(body["systemInstruction"]["parts"][0]["text"].is_string());
    assert_eq!(body["contents"][0]["role"], "user");
    assert!(
        body["contents"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Find the bugs")
    );
    let generation = &body["generationConfig"];
    assert_eq!(generation["responseMimeType"], "application/json");
    assert_eq!(generation["temperature"], json!(0.0));
    assert!(generation["seed"].as_u64().is_some_and(|s| s < 1 << 31));
    let schema = &generation["responseSchema"];
    assert!(schema.get("additionalProperties").is_none(), "{schema}");
    assert_eq!(schema["propertyOrdering"], json!(["bugs", "severity"]));
    let stats = rt.stats();
    assert_eq!(
        (stats.input_tokens, stats.output_tokens, stats.cached_tokens),
        (50, 12, 20)
    );
}

#[tokio::test]
async fn select_is_function_calling_read_back_as_a_clause() {
    let server = MockServer::start(|_, _| {
        Reply::json(json!({
            "candidates": [{ "content": { "role": "model", "parts": [{ "functionCall": { "name": "search", "args": { "query": "cafes" } } }] }, "finishReason": "STOP" }],
        }))
    })
    .await;
    let arms = vec![
        ArmDesc {
            tool: "stop".into(),
            doc: Some("Ends the search.".into()),
            binding: None,
            params: vec![],
        },
        ArmDesc {
            tool: "search".into(),
            doc: None,
            binding: None,
            params: vec![ParamDesc {
                name: "query".into(),
                doc: None,
                ty: TypeDesc::String,
            }],
        },
    ];
    let (arm, args) = runtime(gemini(&server))
        .choose(&site("main"), &Context::new(), &arms)
        .await
        .unwrap();
    assert_eq!((arm, args), (1, vec![Value::str("cafes")]));
    let body = server.requests()[0].json();
    assert!(
        body.get("generationConfig")
            .unwrap()
            .get("responseSchema")
            .is_none()
    );
    assert_eq!(body["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
    assert_eq!(
        body["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"],
        json!(["stop", "search"])
    );
    let declarations = &body["tools"][0]["functionDeclarations"];
    assert!(
        declarations[0].get("parameters").is_none(),
        "no arguments, no parameters"
    );
    assert!(
        declarations[0]["description"]
            .as_str()
            .unwrap()
            .contains("Ends the search.")
    );
    assert_eq!(
        declarations[1]["parameters"]["properties"]["query"]["type"],
        "string"
    );

    // A function nobody offered is a protocol error, not a guess.
    let server = MockServer::start(|_, _| {
        Reply::json(json!({
            "candidates": [{ "content": { "parts": [{ "functionCall": { "name": "launch", "args": {} } }] }, "finishReason": "STOP" }],
        }))
    })
    .await;
    let err = runtime(gemini(&server))
        .choose(&site("main"), &Context::new(), &arms)
        .await
        .unwrap_err();
    assert!(
        err.message.contains("`launch`, which was not offered"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn decisions_refusals_and_cut_off_answers() {
    let server = MockServer::start(|_, _| {
        Reply::json(text_answer(r#"{"reason": "done", "answer": true}"#, "STOP"))
    })
    .await;
    assert!(
        runtime(gemini(&server))
            .decide(&site("done"), &Context::new(), "done", None)
            .await
            .unwrap()
    );
    let body = server.requests()[0].json();
    assert_eq!(
        body["generationConfig"]["responseSchema"]["propertyOrdering"],
        json!(["reason", "answer"])
    );

    let server = MockServer::start(|_, _| {
        Reply::json(json!({ "promptFeedback": { "blockReason": "SAFETY" } }))
    })
    .await;
    let err = runtime(gemini(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refusal);
    assert!(err.message.contains("SAFETY"), "{}", err.message);

    // Cut off where the value closes: used as it is.
    let server =
        MockServer::start(|_, _| Reply::json(text_answer(r#"{"value": [1, 2"#, "MAX_TOKENS")))
            .await;
    let value = runtime(gemini(&server))
        .produce(
            &site("f"),
            &Context::new(),
            "f",
            &TypeDesc::List(Box::new(TypeDesc::I64)),
        )
        .await
        .unwrap();
    assert_eq!(value.to_json_string(), "[1,2]");
}

#[tokio::test]
async fn an_unknown_model_is_a_clear_error() {
    let server = MockServer::start(|_, _| {
        Reply::status(
            404,
            r#"{"error": {"code": 404, "message": "models/gemini-9 is not found for API version v1beta", "status": "NOT_FOUND"}}"#,
        )
    })
    .await;
    let err = runtime(gemini(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Provider);
    assert!(err.message.contains("HTTP 404"), "{}", err.message);
    assert!(err.message.contains("is not found"), "{}", err.message);
    assert_eq!(server.requests().len(), 1, "a 404 is not retried");
}
