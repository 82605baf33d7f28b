//! Record a run through a live protocol, then replay it with no network; a person at the
//! terminal answers through the same validation and re-ask loop.

mod common;

use std::io::Cursor;
use std::sync::Arc;

use common::*;
use runtime::provider::interactive::InteractiveProvider;
use runtime::provider::replay::{RecordingProvider, ReplayProvider};
use runtime::types::TypeDesc;
use runtime::{Context, ErrorKind, Value};
use testgen::http::{MockServer, Reply};

async fn two_calls(rt: &runtime::Runtime) -> Result<(Value, Value), runtime::RuntimeError> {
    let ctx = Context::new();
    ctx.instruct("You are a code analysis expert");
    let callee = ctx.child();
    callee.instruct("Analyze the following code for potential bugs");
    let analysis = rt
        .produce(&site("analyze_code"), &callee, "analyze_code", &analysis())
        .await?;
    let count = rt
        .produce(&site("count"), &ctx, "count", &TypeDesc::I64)
        .await?;
    Ok((analysis, count))
}

#[tokio::test]
async fn a_recorded_run_replays_without_the_network() {
    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 {
            r#"{"bugs": ["b may be 0"], "severity": "High"}"#
        } else {
            r#"{"value": 1}"#
        }))
    })
    .await;
    let transcript = SharedBuffer::default();
    let recorder = RecordingProvider::new(
        openai(&server),
        Box::new(transcript.clone()),
        vec![API_KEY.to_owned()],
    );
    let live = two_calls(&runtime(Arc::new(recorder))).await.unwrap();
    drop(server);

    let text = transcript.text();
    assert_eq!(text.lines().count(), 2);
    assert!(
        !text.contains(API_KEY),
        "the key is sent in a header, never recorded"
    );

    let replay = ReplayProvider::from_text(&text, "memory").unwrap();
    let replayed = two_calls(&runtime(Arc::new(replay))).await.unwrap();
    assert_eq!(live, replayed);
}

#[tokio::test]
async fn secrets_that_reach_a_prompt_are_scrubbed_from_the_transcript() {
    let server = MockServer::start(|_, _| Reply::json(completion(r#"{"value": "ok"}"#))).await;
    let transcript = SharedBuffer::default();
    let recorder = RecordingProvider::new(
        openai(&server),
        Box::new(transcript.clone()),
        vec![API_KEY.to_owned()],
    );
    let ctx = Context::new();
    ctx.inject_value(
        Value::str(&format!("config: key={API_KEY}")),
        "main",
        "config",
    );
    runtime(Arc::new(recorder))
        .produce(&site("f"), &ctx, "f", &TypeDesc::String)
        .await
        .unwrap();
    let text = transcript.text();
    assert!(!text.contains(API_KEY));
    assert!(text.contains("key=[REDACTED]"), "{text}");
}

#[tokio::test]
async fn a_request_missing_from_the_transcript_fails_clearly() {
    let replay = ReplayProvider::from_text("", "empty.jsonl").unwrap();
    let rt = runtime(Arc::new(replay));
    let err = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotRecorded);
    assert!(
        err.message
            .contains("empty.jsonl has no (more) answers for this request"),
        "{}",
        err.message
    );
    assert_eq!(err.site.unwrap().function, "f");
}

#[tokio::test]
async fn a_malformed_transcript_is_a_located_error() {
    let err = ReplayProvider::from_text("{\"request\": {}}\nnot json\n", "bad.jsonl")
        .err()
        .unwrap();
    assert!(err.starts_with("bad.jsonl:1:"), "{err}");
}

#[tokio::test]
async fn a_person_answers_and_is_asked_again_when_it_does_not_fit() {
    let input = "I think it's seven\n\n{\"value\":\n 7}\n";
    let output = SharedBuffer::default();
    let provider = InteractiveProvider::new(
        Box::new(Cursor::new(input.as_bytes().to_vec())),
        Box::new(output.clone()),
    );
    let rt = runtime(Arc::new(provider));
    let ctx = Context::new();
    ctx.instruct("How many days in a week?");
    assert_eq!(
        rt.produce(&site("days"), &ctx, "days", &TypeDesc::I32)
            .await
            .unwrap(),
        Value::Int(7)
    );
    let shown = output.text();
    assert!(shown.contains("How many days in a week?"), "{shown}");
    assert!(
        shown.contains("\"type\": \"integer\""),
        "the schema is shown: {shown}"
    );
    assert!(
        shown.contains("does not match the schema"),
        "the person sees why: {shown}"
    );
}

#[tokio::test]
async fn the_end_of_input_is_an_error_not_a_hang() {
    let provider = InteractiveProvider::new(
        Box::new(Cursor::new(Vec::new())),
        Box::new(SharedBuffer::default()),
    );
    let err = runtime(Arc::new(provider))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Provider);
    assert!(err.message.contains("input ended"), "{}", err.message);
}
