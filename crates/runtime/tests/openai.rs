//! The OpenAI-compatible client against an in-process server: the exact requests sent,
//! streaming, usage, and every transport fault.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use llm::types::TypeDesc;
use providers::openai::OpenAiProvider;
use runtime::{Context, ErrorKind, Value};
use serde_json::json;
use test_support::http::{MockServer, Reply};

fn code_analysis_context() -> Context {
    let main = Context::new();
    main.instruct("You are a code analysis expert");
    let callee = main.child();
    callee.instruct("Analyze the following code for potential bugs");
    callee.instruct("Focus on edge cases and error handling");
    callee.inject_value(
        Value::str("fn div(a, b): return a / b"),
        "analyze_code",
        "code",
    );
    callee
}

#[tokio::test]
async fn produce_sends_the_rendered_prompt_and_schema() {
    let answer = r#"{"bugs": ["Division by zero when b is 0."], "severity": "High"}"#;
    let server = MockServer::start(move |_, _| Reply::json(completion(answer))).await;
    let rt = runtime(openai(&server));
    let value = rt
        .produce(
            &site("analyze_code"),
            &code_analysis_context(),
            "analyze_code",
            &analysis(),
        )
        .await
        .unwrap();

    assert_eq!(
        value.to_json(),
        json!({ "bugs": ["Division by zero when b is 0."], "severity": "High" })
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    let body = request.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(
        body["response_format"]["json_schema"]["name"],
        "analyze_code_result"
    );
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body.get("stream").is_none());
    test_support::snapshot::assert_snapshot(
        &snapshots(),
        "openai_produce_user.txt",
        body["messages"][1]["content"].as_str().unwrap(),
    );
    test_support::snapshot::assert_snapshot(
        &snapshots(),
        "openai_produce_schema.json",
        &serde_json::to_string_pretty(&body["response_format"]["json_schema"]["schema"]).unwrap(),
    );

    let stats = rt.stats();
    assert_eq!(
        (
            stats.calls,
            stats.input_tokens,
            stats.output_tokens,
            stats.cached_tokens
        ),
        (1, 120, 15, 64)
    );
}

#[tokio::test]
async fn streaming_reads_events_and_the_final_usage() {
    let events = vec![
        json!({ "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "" } }] }).to_string(),
        json!({ "choices": [{ "index": 0, "delta": { "content": "{\"value\": " } }] }).to_string(),
        json!({ "choices": [{ "index": 0, "delta": { "content": "-3}" } }] }).to_string(),
        json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "stop" }] }).to_string(),
        json!({ "choices": [], "usage": { "prompt_tokens": 50, "completion_tokens": 4, "prompt_tokens_details": { "cached_tokens": 32 } } }).to_string(),
        "[DONE]".to_owned(),
    ];
    let server = MockServer::start(move |_, _| Reply::Events {
        events: events.clone(),
        delay: Duration::ZERO,
    })
    .await;
    let provider = Arc::new(OpenAiProvider::new(openai_config(&server, true)).unwrap());
    let rt = runtime(provider);
    let ctx = Context::new();
    ctx.instruct("Calculate 2 - 5");
    let value = rt
        .produce(&site("calc"), &ctx, "calc", &TypeDesc::I32)
        .await
        .unwrap();
    assert_eq!(value, Value::Int(-3));
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    let stats = rt.stats();
    assert_eq!(
        (stats.input_tokens, stats.output_tokens, stats.cached_tokens),
        (50, 4, 32)
    );
}

/// Each safe repair, on the answer shape it fixes.
#[tokio::test]
async fn repairs_fix_what_is_safe_to_fix() {
    let cases: Vec<(&str, TypeDesc, serde_json::Value)> = vec![
        ("```json\n{\"value\": 7}\n```", TypeDesc::I32, json!(7)),
        (
            "Here is the answer: {\"value\": 7}. Let me know!",
            TypeDesc::I32,
            json!(7),
        ),
        ("7", TypeDesc::I32, json!(7)),
        ("{\"value\": \"7\"}", TypeDesc::I64, json!(7)),
        ("{\"value\": \"true\"}", TypeDesc::Bool, json!(true)),
        ("{\"value\": \"high\"}", common::severity(), json!("High")),
        (
            "{\"value\": {\"bugs\": [], \"severity\": \"LOW\"}}",
            analysis(),
            json!({ "bugs": [], "severity": "Low" }),
        ),
    ];
    for (answer, ty, expected) in cases {
        let answer = answer.to_owned();
        let server = MockServer::start(move |_, _| Reply::json(completion(&answer))).await;
        let rt = runtime(openai(&server));
        let value = rt
            .produce(&site("f"), &Context::new(), "f", &ty)
            .await
            .unwrap();
        assert_eq!(value.to_json(), expected, "{ty}");
        assert_eq!(server.requests().len(), 1, "a repair needs no re-ask");
    }
}

#[tokio::test]
async fn decide_accepts_strings_and_bare_booleans() {
    for (answer, expected) in [
        (r#"{"reason": "ready", "answer": true}"#, true),
        (r#"{"reason": "", "answer": "no"}"#, false),
        ("true", true),
    ] {
        let server = MockServer::start(move |_, _| Reply::json(completion(answer))).await;
        let rt = runtime(openai(&server));
        assert_eq!(
            rt.decide(&site("is_ready"), &Context::new(), "is_ready", None)
                .await
                .unwrap(),
            expected,
            "{answer}"
        );
    }
}

#[tokio::test]
async fn an_invalid_answer_is_sent_back_with_the_error() {
    // 3,000,000,000 does not fit an i32: the schema says "integer", the type says more.
    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 {
            r#"{"value": 3000000000}"#
        } else {
            r#"{"value": 12}"#
        }))
    })
    .await;
    let rt = runtime(openai(&server));
    let value = rt
        .produce(&site("count"), &Context::new(), "count", &TypeDesc::I32)
        .await
        .unwrap();
    assert_eq!(value, Value::Int(12));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].json()["messages"].clone();
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["content"], r#"{"value": 3000000000}"#);
    assert_eq!(messages[3]["role"], "user");
    let correction = messages[3]["content"].as_str().unwrap();
    assert!(
        correction.contains("3000000000 is greater than the maximum of 2147483647"),
        "{correction}"
    );
    assert_eq!(rt.stats().reasks, 1);
}

#[tokio::test]
async fn answers_that_never_fit_stop_with_the_call_site_and_last_answer() {
    let server = MockServer::start(|_, _| {
        Reply::json(completion(
            r#"{"bugs": "none", "severity": "Catastrophic"}"#,
        ))
    })
    .await;
    let rt = runtime(openai(&server));
    let err = rt
        .produce(
            &site("analyze_code"),
            &Context::new(),
            "analyze_code",
            &analysis(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidAnswer);
    assert_eq!(err.site.as_ref().unwrap().function, "analyze_code");
    assert_eq!(
        err.raw_answer.as_deref(),
        Some(r#"{"bugs": "none", "severity": "Catastrophic"}"#)
    );
    assert!(err.message.contains("after 2 re-asks"), "{}", err.message);
    assert_eq!(server.requests().len(), 3, "one request and two re-asks");
    assert!(err.to_string().contains("agent.sap:12:5"));
}

#[tokio::test]
async fn refusals_truncation_and_empty_answers_are_handled() {
    let refusal = json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": null, "refusal": "I can't help with that." }, "finish_reason": "stop" }] });
    let server = MockServer::start(move |_, _| Reply::json(refusal.clone())).await;
    let err = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refusal);
    assert!(err.message.contains("I can't help with that."));

    // Cut off where what it had written is still a value: that value, in one request.
    let cut = json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"value\": [3, 4, 5" }, "finish_reason": "length" }] });
    let server = MockServer::start(move |_, _| Reply::json(cut.clone())).await;
    let value = runtime(openai(&server))
        .produce(
            &site("f"),
            &Context::new(),
            "f",
            &TypeDesc::List(Box::new(TypeDesc::I64)),
        )
        .await
        .unwrap();
    assert_eq!(value.to_json_string(), "[3,4,5]");
    assert_eq!(server.requests().len(), 1);

    // Cut off before the value: asked again for a shorter answer (a bounded number of
    // times), then a clear stop.
    let cut = json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"value\": " }, "finish_reason": "length" }] });
    let server = MockServer::start(move |_, _| Reply::json(cut.clone())).await;
    let err = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Truncated);
    assert!(
        err.message.contains("allow the model more output tokens"),
        "{}",
        err.message
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the first answer and two re-asks");
    let last = requests[2].json()["messages"].clone();
    assert!(
        last[3]["content"]
            .as_str()
            .unwrap()
            .contains("cut off at the output limit"),
        "{last}"
    );

    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 { "" } else { r#"{"value": "ok"}"# }))
    })
    .await;
    let value = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap();
    assert_eq!(value, Value::str("ok"));
    assert!(server.requests()[1].body.contains("the answer was empty"));
}

#[tokio::test]
async fn retryable_statuses_are_retried_honouring_retry_after() {
    for status in [408u16, 409, 429, 500, 503] {
        let server = MockServer::start(move |_, i| {
            if i == 0 {
                Reply::status(status, r#"{"error": {"message": "busy"}}"#)
                    .with_header("retry-after-ms", "20")
            } else {
                Reply::json(completion(r#"{"value": 1}"#))
            }
        })
        .await;
        let rt = runtime(openai(&server));
        let started = Instant::now();
        assert_eq!(
            rt.produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
                .await
                .unwrap(),
            Value::Int(1),
            "{status}"
        );
        assert_eq!(server.requests().len(), 2, "{status}");
        assert!(
            started.elapsed() >= Duration::from_millis(20),
            "retry-after-ms is honoured"
        );
        assert_eq!(rt.stats().retries, 1);
    }
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let server = MockServer::start(|_, i| {
        if i == 0 {
            Reply::status(429, "slow down").with_header("retry-after", "0.05")
        } else {
            Reply::json(completion(r#"{"value": 1}"#))
        }
    })
    .await;
    let started = Instant::now();
    runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(50));
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for status in [400u16, 401, 404, 422] {
        let server = MockServer::start(move |_, _| {
            Reply::status(status, r#"{"error": {"message": "bad request body"}}"#)
        })
        .await;
        let err = runtime(openai(&server))
            .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Provider);
        assert!(
            err.message.contains(&format!("HTTP {status}"))
                && err.message.contains("bad request body"),
            "{}",
            err.message
        );
        assert_eq!(server.requests().len(), 1, "{status} is not retried");
    }
}

#[tokio::test]
async fn an_api_key_with_a_line_break_is_refused_not_sent_nor_retried() {
    let server = MockServer::start(|_, _| Reply::json(completion(r#"{"value": 5}"#))).await;
    let config = providers::openai::OpenAiConfig {
        api_key: Some("sk-secret-0123\n".to_owned()),
        ..openai_config(&server, false)
    };
    let provider = Arc::new(OpenAiProvider::new(config).unwrap());
    let started = std::time::Instant::now();
    let err = runtime(provider)
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains("the `authorization` header has a line break")
            && !err.message.contains("sk-secret")
            && !err.message.contains("retried"),
        "{}",
        err.message
    );
    assert!(server.requests().is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[tokio::test]
async fn retries_give_up_after_the_limit() {
    let server = MockServer::start(|_, _| Reply::status(503, "down")).await;
    let err = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(server.requests().len(), 4, "one request and three retries");
    assert!(err.message.contains("after 3 retries"), "{}", err.message);
}

#[tokio::test]
async fn dropped_connections_are_retried() {
    let server = MockServer::start(|_, i| {
        if i < 2 {
            Reply::Drop
        } else {
            Reply::json(completion(r#"{"value": 5}"#))
        }
    })
    .await;
    let value = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap();
    assert_eq!(value, Value::Int(5));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_connection_refused_is_a_clear_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = MockServer::start(|_, _| Reply::Drop).await;
    let mut config = openai_config(&server, false);
    config.base_url = format!("http://127.0.0.1:{port}/v1");
    config.http.max_retries = 1;
    let rt = runtime(Arc::new(OpenAiProvider::new(config).unwrap()));
    let err = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Provider);
    assert!(
        err.message
            .contains("could not reach the provider (after 1 retries)"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn slow_servers_time_out() {
    let server = MockServer::start(|_, _| {
        Reply::json(completion(r#"{"value": 1}"#)).delayed(Duration::from_secs(3))
    })
    .await;
    let mut config = openai_config(&server, false);
    config.http.request_timeout = Duration::from_millis(200);
    config.http.max_retries = 1;
    let rt = runtime(Arc::new(OpenAiProvider::new(config).unwrap()));
    let started = Instant::now();
    let err = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert!(
        err.message.contains("did not answer in time"),
        "{}",
        err.message
    );
    assert_eq!(server.requests().len(), 2, "a timeout is retried");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_concurrency_limit_holds() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let server = MockServer::start(|_, _| {
        Reply::json(completion(r#"{"value": 1}"#)).delayed(Duration::from_millis(100))
    })
    .await;
    let mut config = openai_config(&server, false);
    config.http.concurrency = Some(2);
    let rt = Arc::new(runtime(Arc::new(OpenAiProvider::new(config).unwrap())));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (rt, in_flight, peak) = (rt.clone(), in_flight.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let r = rt
                .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
                .await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            r
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    // Six 100 ms answers two at a time take three rounds.
    assert!(
        started.elapsed() >= Duration::from_millis(290),
        "{:?}",
        started.elapsed()
    );
}

/// Servers that are not what the base URL says get errors that say what to change.
#[tokio::test]
async fn wrong_servers_are_named_not_dumped() {
    // A web page where the API should be, answering 501: not retried, summarised.
    let server = MockServer::start(|_, _| {
        Reply::status(
            501,
            "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head><body>…</body></html>",
        )
    })
    .await;
    let err = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert!(
        err.message.contains("an HTML page (\"Error response\")")
            && err.message.contains("ending in `/v1`")
            && !err.message.contains("<html"),
        "{}",
        err.message
    );
    assert_eq!(server.requests().len(), 1, "501 is not retried");

    // Nothing listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let provider = OpenAiProvider::new(providers::openai::OpenAiConfig {
        http: http_config(),
        ..providers::openai::OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
    })
    .unwrap();
    let err = runtime(Arc::new(provider))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert!(
        err.message.contains(&format!(
            "nothing answered at http://127.0.0.1:{port}/v1/chat/completions"
        )) && err.message.contains("--base-url"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_local_server_gets_the_output_budget_and_its_own_schema_dialect() {
    use llm::schema::ArmDesc;
    use llm::schema::target::Target;
    use llm::types::ParamDesc;
    use providers::openai::OpenAiConfig;

    // llama.cpp's dialect: a `select` is a top-level `anyOf` tagged by `const`, and the
    // answer comes without the `choice` wrapper.
    let server = MockServer::start(|_, _| {
        Reply::json(completion(
            r#"{"option": 1, "arguments": {"query": "cafes"}}"#,
        ))
    })
    .await;
    let provider = OpenAiProvider::new(OpenAiConfig {
        target: Target::LlamaCpp,
        ..openai_config(&server, false)
    })
    .unwrap();
    let arms = vec![
        ArmDesc {
            tool: "stop".into(),
            doc: None,
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
    let (arm, args) = runtime(Arc::new(provider))
        .choose(&site("main"), &Context::new(), &arms)
        .await
        .unwrap();
    assert_eq!((arm, args), (1, vec![Value::str("cafes")]));
    let body = server.requests()[0].json();
    let schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(
        schema["anyOf"][1]["properties"]["option"],
        json!({"const": 1})
    );
    // A local server: the budget derived from the type goes out as `max_tokens`.
    let budget = body["max_tokens"].as_u64().unwrap();
    assert!((256..=2048).contains(&budget), "{budget}");

    // A decision's budget is small: its reason is one short sentence.
    let server =
        MockServer::start(|_, _| Reply::json(completion(r#"{"reason": "yes", "answer": true}"#)))
            .await;
    let decided = runtime(openai(&server))
        .decide(&site("done"), &Context::new(), "done", None)
        .await
        .unwrap();
    assert!(decided);
    assert_eq!(server.requests()[0].json()["max_tokens"], json!(256));
    // OpenAI's own API: no derived limit (its reasoning models spend output on thought).
    let budgeted =
        OpenAiProvider::new(OpenAiConfig::new("https://api.openai.com/v1", "m")).unwrap();
    let request = llm::LlmRequest {
        system: "s".into(),
        context: String::new(),
        instruction: "i".into(),
        schema_name: "x".into(),
        schema: Arc::new(json!({"type": "object"})),
        corrections: vec![],
        max_tokens: 300,
        max_text_tokens: 256,
        order: Default::default(),
        untrusted: None,
    };
    assert!(budgeted.body(&request).get("max_tokens").is_none());
}

#[tokio::test]
async fn a_long_wrong_answer_is_sent_back_cut() {
    let server = MockServer::start(|_, i| {
        Reply::json(completion(&if i == 0 {
            "ha ".repeat(3000)
        } else {
            r#"{"value": 1}"#.to_owned()
        }))
    })
    .await;
    let value = runtime(openai(&server))
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I64)
        .await
        .unwrap();
    assert_eq!(value, Value::Int(1));
    let second = server.requests()[1].json();
    let echoed = second["messages"][2]["content"].as_str().unwrap();
    assert_eq!(
        echoed.chars().count(),
        1501,
        "1,500 characters and an ellipsis"
    );
    assert!(echoed.ends_with('…'));
}

/// A streamed answer that repeats itself is stopped there, long before the server would
/// stop it, and read as cut off: the repetition trimmed, the value closed.
#[tokio::test]
async fn a_streamed_answer_that_repeats_itself_is_stopped_early() {
    let mut events = vec![
        json!({ "choices": [{ "index": 0, "delta": { "content": "{\"value\": \"The sum is 1" } }] })
            .to_string(),
    ];
    for _ in 0..5000 {
        events
            .push(json!({ "choices": [{ "index": 0, "delta": { "content": "+1" } }] }).to_string());
    }
    events.push("[DONE]".to_owned());
    let server = MockServer::start(move |_, _| Reply::Events {
        events: events.clone(),
        delay: Duration::from_millis(2),
    })
    .await;
    let provider = Arc::new(OpenAiProvider::new(openai_config(&server, true)).unwrap());
    let started = Instant::now();
    let value = runtime(provider)
        .produce(&site("sum"), &Context::new(), "sum", &TypeDesc::String)
        .await
        .unwrap();
    assert_eq!(value, Value::str("The sum is 1+"));
    assert_eq!(server.requests().len(), 1);
    // Read to the end, the 5,000 events would take ten seconds; the loop shows after
    // about 300 of them.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A streamed answer that goes on writing inside one text, without repeating itself (a
/// small model that has ended its answer in its mind while the grammar holds it inside
/// a string), is stopped once the text runs past what a text of the answer may take —
/// the prompt's size and 256 tokens more — and read as cut off; the request's output
/// budget is sized the same way.
#[tokio::test]
async fn a_streamed_text_that_runs_on_is_stopped_at_its_budget() {
    let mut events = vec![
        json!({ "choices": [{ "index": 0, "delta": { "content": "{\"value\": \"The note" } }] })
            .to_string(),
    ];
    for i in 0..5000 {
        let piece = format!(" then item {i} was said");
        events.push(
            json!({ "choices": [{ "index": 0, "delta": { "content": piece } }] }).to_string(),
        );
    }
    events.push("[DONE]".to_owned());
    let server = MockServer::start(move |_, _| Reply::Events {
        events: events.clone(),
        delay: Duration::from_millis(1),
    })
    .await;
    let provider = Arc::new(OpenAiProvider::new(openai_config(&server, true)).unwrap());
    let value = runtime(provider)
        .produce(
            &site("sum"),
            &Context::new(),
            "summarize",
            &TypeDesc::String,
        )
        .await
        .unwrap();
    let Value::Str(text) = value else {
        panic!("{value:?}")
    };
    // A text may take 256 tokens here (the prompt is one word): about 1,024 characters.
    assert!((1000..1200).contains(&text.len()), "{}", text.len());
    assert!(text.starts_with("The note then item 0 was said"));
    assert_eq!(server.requests().len(), 1);
    let budget = server.requests()[0].json()["max_tokens"].as_u64().unwrap();
    assert!((256..400).contains(&budget), "{budget}");
}

/// A `select` answer whose clause is wrong is sent back with what is wrong in that
/// clause, not "valid under none of the clauses".
#[tokio::test]
async fn a_wrong_clause_is_corrected_precisely() {
    use llm::schema::ArmDesc;
    use llm::types::ParamDesc;
    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 {
            r#"{"choice": {"option": 0, "arguments": {"x": 256741839148139}}}"#
        } else {
            r#"{"choice": {"option": 0, "arguments": {"x": 2}}}"#
        }))
    })
    .await;
    let arms = vec![ArmDesc {
        tool: "double".into(),
        doc: None,
        binding: None,
        params: vec![ParamDesc {
            name: "x".into(),
            doc: None,
            ty: TypeDesc::I32,
        }],
    }];
    let (arm, args) = runtime(openai(&server))
        .choose(&site("main"), &Context::new(), &arms)
        .await
        .unwrap();
    assert_eq!((arm, args), (0, vec![Value::Int(2)]));
    let second = server.requests()[1].json();
    let correction = second["messages"][3]["content"].as_str().unwrap();
    assert!(
        correction.contains(
            "at `/choice/arguments/x`: 256741839148139 is greater than the maximum of 2147483647"
        ),
        "{correction}"
    );
}
