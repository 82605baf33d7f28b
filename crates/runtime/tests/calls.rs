//! The four call kinds end to end through the OpenAI client: what each asks (instruction
//! and schema snapshots), how its answer is read, budgets, and the trace.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use llm::schema::ArmDesc;
use llm::types::{ParamDesc, TypeDesc};
use runtime::trace::TraceSink;
use runtime::{Budgets, Context, ErrorKind, Runtime, RuntimeConfig, Value};
use serde_json::{Value as JsonValue, json};
use test_support::http::{MockServer, Reply};

fn param(name: &str, ty: TypeDesc, doc: Option<&str>) -> ParamDesc {
    ParamDesc {
        name: name.to_owned(),
        doc: doc.map(str::to_owned),
        ty,
    }
}

fn calculator_arms() -> Vec<ArmDesc> {
    let ints = || {
        vec![
            param("x", TypeDesc::I32, None),
            param("y", TypeDesc::I32, None),
        ]
    };
    vec![
        ArmDesc {
            tool: "add".to_owned(),
            doc: Some("Adds two integers.".to_owned()),
            binding: Some("sum".to_owned()),
            params: ints(),
        },
        ArmDesc {
            tool: "subtract".to_owned(),
            doc: Some("Subtracts `y` from `x`.".to_owned()),
            binding: Some("diff".to_owned()),
            params: ints(),
        },
    ]
}

fn calculator_context() -> Context {
    let ctx = Context::new().child();
    ctx.instruct("You are a calculator. Use the tools provided.");
    ctx.inject_value(Value::str("Calculate 2 - 5"), "calculator_agent", "request");
    ctx
}

fn user_and_schema(server: &MockServer, index: usize) -> (String, String) {
    let body = server.requests()[index].json();
    let user = body["messages"][1]["content"].as_str().unwrap().to_owned();
    let schema =
        serde_json::to_string_pretty(&body["response_format"]["json_schema"]["schema"]).unwrap();
    (user, schema)
}

#[tokio::test]
async fn select_chooses_an_arm_and_fills_it_in_one_request() {
    let answer = r#"{"choice": {"option": 1, "arguments": {"x": 2, "y": 5}}}"#;
    let server = MockServer::start(move |_, _| Reply::json(completion(answer))).await;
    let rt = runtime(openai(&server));
    let (arm, args) = rt
        .choose(
            &site("calculator_agent"),
            &calculator_context(),
            &calculator_arms(),
        )
        .await
        .unwrap();
    assert_eq!((arm, args), (1, vec![Value::Int(2), Value::Int(5)]));
    assert_eq!(server.requests().len(), 1);
    let (user, schema) = user_and_schema(&server, 0);
    test_support::snapshot::assert_snapshot(&snapshots(), "choose_user.txt", &user);
    test_support::snapshot::assert_snapshot(&snapshots(), "choose_schema.json", &schema);
}

#[tokio::test]
async fn select_answers_are_checked_against_the_chosen_arm() {
    // Option 0 with a string argument: invalid for `add`, re-asked.
    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 {
            r#"{"choice": {"option": 0, "arguments": {"x": "two", "y": 5}}}"#
        } else {
            r#"{"choice": {"option": "0", "arguments": {"x": "2", "y": 5}}}"#
        }))
    })
    .await;
    let rt = runtime(openai(&server));
    let (arm, args) = rt
        .choose(
            &site("calculator_agent"),
            &calculator_context(),
            &calculator_arms(),
        )
        .await
        .unwrap();
    assert_eq!((arm, args), (0, vec![Value::Int(2), Value::Int(5)]));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn placeholders_are_filled_in_one_request() {
    let server = MockServer::start(|_, _| {
        Reply::json(completion(
            r#"{"code": "fn div(a, b) = a/b", "strict": true}"#,
        ))
    })
    .await;
    let rt = runtime(openai(&server));
    let ctx = Context::new();
    ctx.instruct("You are a code analysis expert");
    ctx.instruct("The code to analyze: fn div(a, b) = a/b");
    let params = [
        param("code", TypeDesc::String, Some("The source to analyze.")),
        param("strict", TypeDesc::Bool, None),
    ];
    let args = rt
        .fill_args(
            &site("main"),
            &ctx,
            "analyze_code",
            Some("Finds bugs."),
            &params,
        )
        .await
        .unwrap();
    assert_eq!(
        args,
        vec![Value::str("fn div(a, b) = a/b"), Value::Bool(true)]
    );
    let (user, schema) = user_and_schema(&server, 0);
    test_support::snapshot::assert_snapshot(&snapshots(), "fill_args_user.txt", &user);
    test_support::snapshot::assert_snapshot(&snapshots(), "fill_args_schema.json", &schema);
}

#[tokio::test]
async fn a_condition_is_decided_with_a_reason_first() {
    let server = MockServer::start(|_, _| {
        Reply::json(completion(
            r#"{"reason": "The status says done.", "answer": false}"#,
        ))
    })
    .await;
    let rt = runtime(openai(&server));
    let ctx = Context::new();
    ctx.instruct("Should we continue given status: ");
    ctx.inject_value(Value::str("done"), "keep_going", "status");
    assert!(
        !rt.decide(&site("keep_going"), &ctx, "keep_going", None)
            .await
            .unwrap()
    );
    let (user, schema) = user_and_schema(&server, 0);
    test_support::snapshot::assert_snapshot(&snapshots(), "decide_user.txt", &user);
    let schema: JsonValue = serde_json::from_str(&schema).unwrap();
    let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["reason", "answer"],
        "the reason comes first, so the model thinks before it answers"
    );
}

#[tokio::test]
async fn call_budget() {
    let server = MockServer::start(|_, _| Reply::json(completion(r#"{"value": 1}"#))).await;
    let config = RuntimeConfig {
        budgets: Budgets {
            max_calls: Some(2),
            ..Budgets::default()
        },
        max_reasks: 2,
    };
    let rt = Runtime::new(openai(&server), config);
    for _ in 0..2 {
        rt.produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
            .await
            .unwrap();
    }
    let err = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Budget);
    assert!(
        err.message.contains("budget of 2 LLM calls"),
        "{}",
        err.message
    );
    assert_eq!(
        server.requests().len(),
        2,
        "the third request is never sent"
    );
}

#[tokio::test]
async fn re_asks_count_against_the_call_budget() {
    let server = MockServer::start(|_, _| Reply::json(completion("not json at all"))).await;
    let config = RuntimeConfig {
        budgets: Budgets {
            max_calls: Some(2),
            ..Budgets::default()
        },
        max_reasks: 5,
    };
    let err = Runtime::new(openai(&server), config)
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Budget);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn token_budget() {
    let server = MockServer::start(|_, _| Reply::json(completion(r#"{"value": 1}"#))).await;
    let config = RuntimeConfig {
        budgets: Budgets {
            max_tokens: Some(200),
            ..Budgets::default()
        },
        max_reasks: 2,
    };
    let rt = Runtime::new(openai(&server), config);
    rt.produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap(); // 135 tokens
    let err = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Budget);
    assert!(
        err.message.contains("budget of 200 tokens"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn wall_time_budget_interrupts_a_slow_call() {
    let server = MockServer::start(|_, _| {
        Reply::json(completion(r#"{"value": 1}"#)).delayed(Duration::from_secs(2))
    })
    .await;
    let config = RuntimeConfig {
        budgets: Budgets {
            max_wall_time: Some(Duration::from_millis(150)),
            ..Budgets::default()
        },
        max_reasks: 2,
    };
    let rt = Runtime::new(openai(&server), config);
    let started = std::time::Instant::now();
    let err = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::I32)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Budget);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the call is cut off, not waited for"
    );
}

#[tokio::test]
async fn every_request_is_traced() {
    let server = MockServer::start(|_, i| {
        Reply::json(completion(if i == 0 {
            "```\n{\"value\": \"x\"}\n```"
        } else {
            r#"{"value": 9}"#
        }))
    })
    .await;
    let buffer = SharedBuffer::default();
    let rt = runtime(openai(&server)).with_trace(TraceSink::new(Box::new(buffer.clone())));
    rt.produce(&site("count"), &Context::new(), "count", &TypeDesc::I32)
        .await
        .unwrap();
    let lines: Vec<JsonValue> = buffer
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "the first answer and its re-ask");
    let first = &lines[0];
    assert_eq!(
        first["site"],
        json!({ "function": "count", "file": "agent.sap", "line": 12, "column": 5 })
    );
    assert_eq!(first["kind"], "produce");
    assert_eq!(first["provider"], "openai");
    assert_eq!(first["raw_answer"], "```\n{\"value\": \"x\"}\n```");
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .contains("is not of type \"integer\""),
        "{}",
        first["error"]
    );
    assert_eq!(
        first["tokens"],
        json!({ "input": 120, "output": 15, "cached": 64 })
    );
    assert!(first["latency_ms"].as_f64().unwrap() >= 0.0);
    assert!(
        first["request"]["instruction"]
            .as_str()
            .unwrap()
            .contains("`count`")
    );
    let second = &lines[1];
    assert_eq!(second["value"], 9);
    assert_eq!(second["attempt"], 1);
    assert_eq!(second["error"], JsonValue::Null);
}

#[tokio::test]
async fn parallel_calls_share_one_runtime() {
    let server = MockServer::start(|request, _| {
        let body = request.json();
        let user = body["messages"][1]["content"].as_str().unwrap().to_owned();
        let n: i64 = user
            .split("item ")
            .nth(1)
            .and_then(|s| s.split('\n').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(-1);
        Reply::json(completion(&format!("{{\"value\": {}}}", n * 10)))
            .delayed(Duration::from_millis(20))
    })
    .await;
    let rt = Arc::new(runtime(openai(&server)));
    let parent = Context::new();
    parent.instruct("Score each item.");
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (rt, ctx) = (rt.clone(), parent.child());
            ctx.instruct(&format!("item {i}"));
            tokio::spawn(async move {
                rt.produce(&site("score"), &ctx, "score", &TypeDesc::I64)
                    .await
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap().unwrap());
    }
    assert_eq!(
        results,
        (0..8).map(|i| Value::Int(i * 10)).collect::<Vec<_>>()
    );
    assert_eq!(rt.stats().calls, 8);
}

/// JSON as a model writes it unconstrained — prose around it, bare keys, single quotes,
/// a trailing comma, a lower-case enum, and cut short — is read in the one request,
/// with every repair in the trace; no re-ask.
#[tokio::test]
async fn loose_or_cut_off_json_costs_no_extra_request() {
    let server = MockServer::start(|_, _| {
        Reply::json(completion(
            "Sure, here is the analysis:\n{bugs: ['b may be zero', 'no checks',], severity: 'high', // done\n",
        ))
    })
    .await;
    let buffer = SharedBuffer::default();
    let rt = runtime(openai(&server)).with_trace(TraceSink::new(Box::new(buffer.clone())));
    let value = rt
        .produce(&site("analyze"), &Context::new(), "analyze", &analysis())
        .await
        .unwrap();
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        value.to_json_string(),
        r#"{"bugs":["b may be zero","no checks"],"severity":"High"}"#
    );
    let trace: JsonValue = serde_json::from_str(buffer.text().lines().next().unwrap()).unwrap();
    let repairs = trace["repairs"].to_string();
    for repair in [
        "prose around the JSON removed",
        "bare keys quoted",
        "single quotes read as double",
        "extra commas removed",
        "cut-off answer closed",
        "enum variant spelled differently",
    ] {
        assert!(repairs.contains(repair), "{repair} not in {repairs}");
    }
}
