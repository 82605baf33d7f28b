//! The Anthropic Messages client against an in-process server.

mod common;

use std::sync::Arc;

use common::*;
use llm::types::TypeDesc;
use providers::anthropic::{AnthropicConfig, AnthropicProvider};
use runtime::{Context, ErrorKind, Value};
use serde_json::{Value as JsonValue, json};
use test_support::http::{MockServer, Reply};

fn anthropic(server: &MockServer) -> Arc<AnthropicProvider> {
    Arc::new(
        AnthropicProvider::new(AnthropicConfig {
            base_url: server.url(),
            api_key: Some(API_KEY.to_owned()),
            model: "claude-test".to_owned(),
            max_tokens: 1024,
            temperature: None,
            http: http_config(),
        })
        .unwrap(),
    )
}

fn message(input: JsonValue, stop: &str) -> JsonValue {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{ "type": "tool_use", "id": "toolu_1", "name": "answer", "input": input }],
        "stop_reason": stop,
        "usage": { "input_tokens": 20, "output_tokens": 12, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0 },
    })
}

#[tokio::test]
async fn forced_tool_use_with_a_cached_prefix() {
    let server = MockServer::start(|_, _| {
        Reply::json(message(
            json!({ "bugs": ["b is 0"], "severity": "Medium" }),
            "tool_use",
        ))
    })
    .await;
    let rt = runtime(anthropic(&server));
    let ctx = Context::new();
    ctx.instruct("You are a code analysis expert");
    let value = rt
        .produce(&site("analyze_code"), &ctx, "analyze_code", &analysis())
        .await
        .unwrap();
    assert_eq!(
        value.to_json(),
        json!({ "bugs": ["b is 0"], "severity": "Medium" })
    );

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(API_KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    let body = request.json();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(
        body["tool_choice"],
        json!({ "type": "tool", "name": "answer" })
    );
    assert_eq!(
        body["tools"][0]["input_schema"]["required"],
        json!(["bugs", "severity"])
    );
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({ "type": "ephemeral" })
    );
    let first = &body["messages"][0]["content"];
    assert_eq!(first[0]["text"], "You are a code analysis expert\n");
    assert_eq!(
        first[0]["cache_control"],
        json!({ "type": "ephemeral" }),
        "the context is the cached prefix"
    );
    assert!(
        first[1].get("cache_control").is_none(),
        "the instruction changes per call"
    );
    test_support::snapshot::assert_snapshot(
        &snapshots(),
        "anthropic_produce_body.json",
        &serde_json::to_string_pretty(&body).unwrap(),
    );

    // Usage is normalised: input counts cache reads too, and they are the cached tokens.
    let stats = rt.stats();
    assert_eq!(
        (stats.input_tokens, stats.output_tokens, stats.cached_tokens),
        (320, 12, 300)
    );
}

#[tokio::test]
async fn a_text_answer_is_read_when_there_is_no_tool_call() {
    let text = json!({
        "content": [{ "type": "text", "text": "```json\n{\"value\": 41}\n```" }],
        "stop_reason": "end_turn",
        "usage": { "input_tokens": 5, "output_tokens": 5 },
    });
    let server = MockServer::start(move |_, _| Reply::json(text.clone())).await;
    let value = runtime(anthropic(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I64)
        .await
        .unwrap();
    assert_eq!(value, Value::Int(41));
}

#[tokio::test]
async fn max_tokens_and_refusals_stop_clearly() {
    let server = MockServer::start(|_, _| Reply::json(message(json!({}), "max_tokens"))).await;
    let err = runtime(anthropic(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Truncated);

    let refusal = json!({ "content": [], "stop_reason": "refusal", "usage": { "input_tokens": 5, "output_tokens": 0 } });
    let server = MockServer::start(move |_, _| Reply::json(refusal.clone())).await;
    let err = runtime(anthropic(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refusal);
}

#[tokio::test]
async fn overloaded_is_retried_and_corrections_are_turns() {
    let server = MockServer::start(|_, i| match i {
        0 => Reply::status(
            529,
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
        ),
        1 => Reply::json(message(json!({ "value": "not a number" }), "tool_use")),
        _ => Reply::json(message(json!({ "value": 3 }), "tool_use")),
    })
    .await;
    let rt = runtime(anthropic(&server));
    assert_eq!(
        rt.produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
            .await
            .unwrap(),
        Value::Int(3)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let messages = requests[2].json()["messages"].clone();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][0]["text"],
        r#"{"value":"not a number"}"#
    );
    assert!(
        messages[2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("is not of type \"integer\"")
    );
}
