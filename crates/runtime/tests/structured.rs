//! The structured-output ladder of the OpenAI-compatible client against in-process
//! servers that each accept only some ways of asking for a shape, as real ones do
//! (llama-cpp-python's server answers 500 to `json_schema` and takes `json_object` with a
//! schema; some servers take only tools; some nothing).

mod common;

use std::sync::Arc;

use common::*;
use llm::types::TypeDesc;
use providers::openai::{OpenAiConfig, OpenAiProvider, Structured};
use runtime::{Context, Value};
use serde_json::{Value as JsonValue, json};
use test_support::http::{MockServer, Reply};

/// Which rung a request body uses.
fn rung_of(body: &JsonValue) -> &'static str {
    match body["response_format"]["type"].as_str() {
        Some("json_schema") => "json_schema",
        Some("json_object") => "json_object",
        _ if body.get("tools").is_some() => "tools",
        _ => "prompt",
    }
}

/// A server that accepts the rungs in `accepts` and rejects the others as a server
/// that cannot do them does.
async fn server(accepts: &'static [&'static str]) -> MockServer {
    MockServer::start(move |request, _| {
        let body = request.json();
        let rung = rung_of(&body);
        if !accepts.contains(&rung) {
            return Reply::status(
                500,
                &format!(r#"{{"error": {{"message": "response_format {rung} is not supported"}}}}"#),
            );
        }
        if rung == "tools" {
            return Reply::json(json!({
                "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": null,
                    "tool_calls": [{ "id": "1", "type": "function", "function": {
                        "name": body["tools"][0]["function"]["name"], "arguments": "{\"value\": 7}" } }] } }],
            }));
        }
        Reply::json(completion(r#"{"value": 7}"#))
    })
    .await
}

fn config(server: &MockServer) -> OpenAiConfig {
    openai_config(server, false)
}

async fn ask(provider: &Arc<OpenAiProvider>) -> Value {
    runtime(provider.clone())
        .produce(&site("count"), &Context::new(), "count", &TypeDesc::I64)
        .await
        .unwrap()
}

/// Asks once through a provider of its own, for an answer that must fail.
async fn ask_failing(server: &MockServer) -> runtime::RuntimeError {
    let provider = Arc::new(OpenAiProvider::new(config(server)).unwrap());
    runtime(provider)
        .produce(&site("count"), &Context::new(), "count", &TypeDesc::I64)
        .await
        .unwrap_err()
}

fn rungs(server: &MockServer) -> Vec<&'static str> {
    server
        .requests()
        .iter()
        .map(|r| rung_of(&r.json()))
        .collect()
}

#[tokio::test]
async fn a_rejected_rung_is_left_once_and_the_run_keeps_to_the_one_that_worked() {
    let server = server(&["json_object"]).await;
    let provider = Arc::new(OpenAiProvider::new(config(&server)).unwrap());
    assert_eq!(ask(&provider).await, Value::Int(7));
    // The 500 named the response format: not retried, the next rung at once.
    assert_eq!(rungs(&server), ["json_schema", "json_object"]);
    assert_eq!(ask(&provider).await, Value::Int(7));
    assert_eq!(
        rungs(&server),
        ["json_schema", "json_object", "json_object"]
    );
    assert_eq!(provider.rung(), Structured::JsonObject);
    let schema = &server.requests()[1].json()["response_format"]["schema"];
    assert_eq!(schema["properties"]["value"]["type"], "integer");
}

#[tokio::test]
async fn a_forced_tool_call_carries_the_answer() {
    let server = server(&["tools"]).await;
    let provider = Arc::new(OpenAiProvider::new(config(&server)).unwrap());
    assert_eq!(ask(&provider).await, Value::Int(7));
    assert_eq!(rungs(&server), ["json_schema", "json_object", "tools"]);
    let body = server.requests()[2].json();
    assert_eq!(
        body["tool_choice"]["function"]["name"],
        body["tools"][0]["function"]["name"]
    );
}

#[tokio::test]
async fn the_last_rung_puts_the_schema_in_the_prompt() {
    let server = server(&["prompt"]).await;
    let provider = Arc::new(OpenAiProvider::new(config(&server)).unwrap());
    assert_eq!(ask(&provider).await, Value::Int(7));
    assert_eq!(
        rungs(&server),
        ["json_schema", "json_object", "tools", "prompt"]
    );
    let user = server.requests()[3].json()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.contains("matching this JSON Schema"), "{user}");
    assert!(user.contains("\"integer\""), "{user}");
}

#[tokio::test]
async fn a_rung_the_user_chose_is_kept_even_when_rejected() {
    let server = server(&["json_object"]).await;
    let provider = Arc::new(
        OpenAiProvider::new(OpenAiConfig {
            structured: Some(Structured::JsonSchema),
            ..config(&server)
        })
        .unwrap(),
    );
    let err = runtime(provider)
        .produce(&site("count"), &Context::new(), "count", &TypeDesc::I64)
        .await
        .unwrap_err();
    assert!(err.message.contains("not supported"), "{}", err.message);
    assert_eq!(rungs(&server), ["json_schema"], "never resent as it was");
}

#[tokio::test]
async fn the_rung_that_worked_is_remembered_for_the_next_run() {
    let scratch = test_support::Scratch::new("rungs");
    let memory = scratch.join("rungs.json");
    let server = server(&["tools"]).await;
    let remembering = || OpenAiConfig {
        rung_memory: Some(memory.clone()),
        ..config(&server)
    };
    let first = Arc::new(OpenAiProvider::new(remembering()).unwrap());
    ask(&first).await;
    let second = Arc::new(OpenAiProvider::new(remembering()).unwrap());
    assert_eq!(second.rung(), Structured::Tools);
    ask(&second).await;
    assert_eq!(
        rungs(&server),
        ["json_schema", "json_object", "tools", "tools"],
        "the second run starts where the first ended"
    );
    let _ = std::fs::remove_file(&memory);
}

#[tokio::test]
async fn errors_a_rung_cannot_cure_do_not_step_down() {
    let server = MockServer::start(|_, _| {
        Reply::status(
            404,
            r#"{"error": {"message": "model not found (schema v2 endpoint)"}}"#,
        )
    })
    .await;
    let err = ask_failing(&server).await;
    assert!(err.message.contains("HTTP 404"), "{}", err.message);
    assert_eq!(server.requests().len(), 1);
}

/// A server that takes no structured rung and whose answers never fit: the error says
/// so, and what would help.
#[tokio::test]
async fn a_server_that_enforces_nothing_is_named_in_the_error() {
    let server = MockServer::start(|request, _| {
        if rung_of(&request.json()) != "prompt" {
            return Reply::status(
                400,
                r#"{"error": {"message": "unknown field response_format"}}"#,
            );
        }
        Reply::json(completion("I think the number is seven."))
    })
    .await;
    let err = ask_failing(&server).await;
    assert!(
        err.message.contains("enforced no schema") && err.message.contains("structured output"),
        "{}",
        err.message
    );
}

/// A model that takes only its own sampling (OpenAI's reasoning models refuse any other
/// temperature) gets the request again without it, once; the trace says which.
#[tokio::test]
async fn sampling_a_model_refuses_is_left_out() {
    let server = MockServer::start(|request, _| {
        if request.json().get("temperature").is_some() {
            return Reply::status(
                400,
                r#"{"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model."}}"#,
            );
        }
        Reply::json(completion(r#"{"value": 7}"#))
    })
    .await;
    let provider = Arc::new(
        OpenAiProvider::new(OpenAiConfig {
            temperature: Some(0.0),
            seed: Some(1),
            ..config(&server)
        })
        .unwrap(),
    );
    assert_eq!(ask(&provider).await, Value::Int(7));
    assert_eq!(ask(&provider).await, Value::Int(7));
    let bodies: Vec<JsonValue> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(
        bodies.len(),
        3,
        "one refusal, then two requests without sampling"
    );
    assert!(bodies[0]["seed"].is_u64());
    assert!(bodies[1].get("temperature").is_none() && bodies[2].get("seed").is_none());
}

/// OpenAI's error shape: a 400 whose message names the rung itself and whose `param`
/// names the field (`json_object is not supported by this server`), and one for tools
/// whose message names neither but whose `param` does.
#[tokio::test]
async fn a_rejection_is_read_from_the_rung_named_or_the_param() {
    let server = MockServer::start(|request, _| {
        let body = request.json();
        let (message, param) = match rung_of(&body) {
            "json_schema" => ("Invalid schema for response_format", "response_format"),
            "json_object" => (
                "json_object is not supported by this server",
                "response_format",
            ),
            "tools" => ("this model cannot do that", "tools"),
            _ => return Reply::json(completion(r#"{"value": 7}"#)),
        };
        Reply::status(
            400,
            &json!({"error": {"message": message, "type": "invalid_request_error", "param": param}})
                .to_string(),
        )
    })
    .await;
    let provider = Arc::new(OpenAiProvider::new(config(&server)).unwrap());
    assert_eq!(ask(&provider).await, Value::Int(7));
    assert_eq!(
        rungs(&server),
        ["json_schema", "json_object", "tools", "prompt"]
    );
    assert_eq!(provider.rung(), Structured::Prompt);
}

/// A 400 whose `param` names something other than the answer's shape (the messages) is
/// not a rung's rejection: it is reported, not stepped down from.
#[tokio::test]
async fn a_param_outside_the_shape_does_not_step_down() {
    let server = MockServer::start(|_, _| {
        Reply::status(
            400,
            r#"{"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error", "param": "messages"}}"#,
        )
    })
    .await;
    let err = ask_failing(&server).await;
    assert!(
        err.message.contains("maximum context length"),
        "{}",
        err.message
    );
    assert_eq!(rungs(&server), ["json_schema"]);
}
