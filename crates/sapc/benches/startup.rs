//! `sapc run` start-up to the first LLM call: from spawning the process to the first
//! request reaching a local OpenAI-compatible server, compiling from source (cold) vs
//! loading the module `sapc build` cached. Run with `cargo bench -p sapc --bench startup`.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::http::{MockServer, Reply};

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let first: Arc<Mutex<Option<Instant>>> = Arc::default();
    let seen = first.clone();
    let server = tokio.block_on(MockServer::start(move |request, _| {
        let mut f = seen.lock().unwrap();
        if f.is_none() {
            *f = Some(Instant::now());
        }
        let name = request.json()["response_format"]["json_schema"]["name"].as_str().unwrap_or("").to_owned();
        let content = if name == "analyze_code_result" {
            json!({ "bugs": ["b may be 0"], "severity": "High" })
        } else {
            json!({ "value": "a fix" })
        };
        Reply::json(json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": content.to_string() }, "finish_reason": "stop" }] }))
    }));
    let program = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/code_analysis.sap"
    );
    let cache = std::env::temp_dir().join(format!("sap-startup-bench-{}", std::process::id()));
    let measure = |label: &str| {
        let mut times = Vec::new();
        for _ in 0..20 {
            *first.lock().unwrap() = None;
            let started = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_sapc"))
                .args(["run", program, "--provider", "openai", "--model", "bench"])
                .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
                .env("SAP_CACHE_DIR", &cache)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            let at = first.lock().unwrap().expect("the program called the model");
            times.push(at.duration_since(started));
        }
        times.sort();
        let median: Duration = times[times.len() / 2];
        println!(
            "| {label} | {:.1} ms | {:.1} ms |",
            median.as_secs_f64() * 1000.0,
            times[0].as_secs_f64() * 1000.0
        );
    };
    println!(
        "| `sapc run examples/code_analysis.sap`, spawn → first LLM request | median | best |"
    );
    println!("|---|---|---|");
    let _ = std::fs::remove_dir_all(&cache);
    measure("cold: parse, check, lower, compile");
    let status = Command::new(env!("CARGO_BIN_EXE_sapc"))
        .args(["build", program])
        .env("SAP_CACHE_DIR", &cache)
        .status()
        .unwrap();
    assert!(status.success());
    measure("from the `sapc build` cache: link only");
    let _ = std::fs::remove_dir_all(&cache);
}
