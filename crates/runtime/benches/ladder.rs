//! What the structured-output ladder costs, counted in requests and timed, side by side
//! in one run: 200 calls against in-process servers that accept `json_schema` (OpenAI,
//! llama-server), only `json_object` (llama-cpp-python's server, which answers 500 to
//! `json_schema`), only tools, and nothing (the schema in the prompt); each once with no
//! rung remembered and once starting from the rung a previous run remembered. Run with
//! `cargo bench -p runtime --bench ladder`; prints a Markdown table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_transport::HttpConfig;
use llm::types::TypeDesc;
use providers::openai::{OpenAiConfig, OpenAiProvider};
use runtime::{CallSite, Context, Runtime, RuntimeConfig};
use serde_json::{Value as JsonValue, json};
use test_support::http::{MockServer, Reply};

const CALLS: usize = 200;

fn rung_of(body: &JsonValue) -> &'static str {
    match body["response_format"]["type"].as_str() {
        Some("json_schema") => "json_schema",
        Some("json_object") => "json_object",
        _ if body.get("tools").is_some() => "tools",
        _ => "prompt",
    }
}

fn answer(content: Option<&str>, tool: Option<&JsonValue>) -> JsonValue {
    let message = match tool {
        Some(name) => {
            json!({ "role": "assistant", "content": null, "tool_calls": [{ "id": "1", "type": "function", "function": { "name": name, "arguments": "{\"value\": 7}" } }] })
        }
        None => json!({ "role": "assistant", "content": content }),
    };
    json!({ "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }] })
}

async fn server(accepts: &'static str) -> MockServer {
    MockServer::start(move |request, _| {
        let body = request.json();
        let rung = rung_of(&body);
        if rung != accepts {
            return Reply::status(
                500,
                &format!(
                    r#"{{"error": {{"message": "response_format {rung} is not supported"}}}}"#
                ),
            );
        }
        match rung {
            "tools" => Reply::json(answer(None, Some(&body["tools"][0]["function"]["name"]))),
            _ => Reply::json(answer(Some(r#"{"value": 7}"#), None)),
        }
    })
    .await
}

async fn run(server: &MockServer, memory: &std::path::Path) -> (usize, Duration) {
    let before = server.requests().len();
    let provider = OpenAiProvider::new(OpenAiConfig {
        http: HttpConfig {
            backoff_base: Duration::from_millis(1),
            ..HttpConfig::default()
        },
        rung_memory: Some(memory.to_path_buf()),
        ..OpenAiConfig::new(format!("{}/v1", server.url()), "bench")
    })
    .unwrap();
    let rt = Runtime::new(Arc::new(provider), RuntimeConfig::default());
    let site = CallSite {
        function: "count".into(),
        file: "bench.sap".into(),
        line: 1,
        column: 1,
        span: (0, 1),
        path: vec!["count".into()],
    };
    let start = Instant::now();
    for _ in 0..CALLS {
        rt.produce(&site, &Context::new(), "count", &TypeDesc::I64)
            .await
            .expect("the answer fits");
    }
    (server.requests().len() - before, start.elapsed())
}

#[tokio::main]
async fn main() {
    let dir = std::env::temp_dir().join(format!("sap-ladder-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!("| server accepts | run | calls | requests | requests per call | µs per call |");
    println!("|---|---|---|---|---|---|");
    for accepts in ["json_schema", "json_object", "tools", "prompt"] {
        let server = server(accepts).await;
        let memory = dir.join(format!("{accepts}.json"));
        for run_name in ["first (nothing remembered)", "next (rung remembered)"] {
            let (requests, time) = run(&server, &memory).await;
            println!(
                "| `{accepts}` | {run_name} | {CALLS} | {requests} | {:.3} | {:.0} |",
                requests as f64 / CALLS as f64,
                time.as_secs_f64() * 1e6 / CALLS as f64
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
