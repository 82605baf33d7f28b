//! Record a run through a live protocol, then replay it with no network; a person at the
//! terminal answers through the same validation and re-ask loop.

mod common;

use std::io::Cursor;
use std::sync::Arc;

use common::*;
use llm::types::TypeDesc;
use providers::interactive::InteractiveProvider;
use providers::replay::{RecordingProvider, ReplayProvider};
use runtime::{Context, ErrorKind, Value};
use test_support::http::{MockServer, Reply};

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
    let rt = runtime(Arc::new(replay));
    let replayed = two_calls(&rt).await.unwrap();
    assert_eq!(live, replayed);
    // A run's transcript answers each request as often as it was recorded.
    assert_eq!(
        two_calls(&rt).await.unwrap_err().kind,
        ErrorKind::NotRecorded
    );

    // A served program's call is a run of its own: its replay starts again.
    let served = ReplayProvider::from_text(&text, "memory")
        .unwrap()
        .repeating();
    let rt = runtime(Arc::new(served));
    for _ in 0..3 {
        assert_eq!(two_calls(&rt).await.unwrap(), live);
    }
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
async fn a_replayed_answer_that_does_not_fit_is_named_when_its_re_ask_is_not_recorded() {
    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 {
            "not json at all"
        } else {
            r#"{"value": 1}"#
        }))
    })
    .await;
    let transcript = SharedBuffer::default();
    let recorder = RecordingProvider::new(openai(&server), Box::new(transcript.clone()), vec![]);
    runtime(Arc::new(recorder))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap();
    // Keep the answer that did not fit, not the re-ask's.
    let first = transcript.text().lines().next().unwrap().to_owned();
    let replay = ReplayProvider::from_text(&first, "cut.jsonl").unwrap();
    let err = runtime(Arc::new(replay))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotRecorded);
    assert!(
        err.message
            .contains("cut.jsonl has no (more) answers for this request")
            && err
                .message
                .contains("because the answer before did not fit"),
        "{}",
        err.message
    );
    assert_eq!(err.raw_answer.as_deref(), Some("not json at all"));
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

/// Answers every request after a delay that makes later fan-out iterations finish
/// first (the iteration's number is in the context).
struct Staggered;

impl llm::Provider for Staggered {
    fn name(&self) -> &str {
        "staggered"
    }

    fn complete<'a>(
        &'a self,
        request: &'a llm::LlmRequest,
    ) -> llm::BoxFuture<'a, Result<llm::LlmResponse, llm::ProviderError>> {
        Box::pin(async move {
            let n: u64 = request
                .context
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(10 * (8 - n.min(8)))).await;
            Ok(llm::LlmResponse {
                text: format!(r#"{{"value": {n}}}"#),
                finish: llm::Finish::Stop,
                usage: Default::default(),
                retries: 0,
                structured: None,
                sampling: None,
            })
        })
    }
}

/// Records a fan-out of 8 iterations with two calls each, on 4 threads, answered out of
/// order, followed by one more call.
fn record_fan_out(path: &std::path::Path) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let recorder = RecordingProvider::to_file(Arc::new(Staggered), path, Vec::new()).unwrap();
    let rt = runtime(Arc::new(recorder));
    let ask = |text: String| {
        let ctx = Context::new();
        ctx.instruct(&text);
        tokio
            .block_on(rt.produce(&site("f"), &ctx, "f", &TypeDesc::I64))
            .unwrap()
    };
    ask("before 0".to_owned());
    runtime::tasks::fan_out(
        8,
        4,
        |i| {
            ask(format!("item {i}"));
            ask(format!("again {i}"))
        },
        |_| false,
    );
    ask("after 0".to_owned());
    // Dropping the runtime drops the recorder, which puts the file in program order.
}

#[test]
fn a_transcript_is_written_in_program_order_whatever_the_timing() {
    let dir = test_support::Scratch::new("order");
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    // Each on a thread of its own, as an engine runs a program.
    for path in [&a, &b] {
        std::thread::scope(|s| {
            s.spawn(|| record_fan_out(path));
        });
    }
    let text = std::fs::read_to_string(&a).unwrap();
    assert_eq!(text, std::fs::read_to_string(&b).unwrap());
    let contexts: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["request"]["context"]
                .as_str()
                .unwrap()
                .trim_end()
                .to_owned()
        })
        .collect();
    let mut expected = vec!["before 0".to_owned()];
    for i in 0..8 {
        expected.push(format!("item {i}"));
        expected.push(format!("again {i}"));
    }
    expected.push("after 0".to_owned());
    assert_eq!(contexts, expected);
    // The file still replays.
    ReplayProvider::from_text(&text, "a.jsonl").unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_recording_keeps_the_recorded_providers_properties() {
    // A person asked in program order stays so when the run is recorded (`--record`
    // with `--provider interactive` or `local`): `sapc run` reads `in_order` from the
    // provider it is given, the recorder.
    let person = InteractiveProvider::new(Box::new(Cursor::new(Vec::new())), Box::new(Vec::new()));
    let recorder = RecordingProvider::new(Arc::new(person), Box::new(Vec::new()), Vec::new());
    assert!(llm::Provider::in_order(&recorder));
    assert_eq!(llm::Provider::load_time(&recorder), None);
}
