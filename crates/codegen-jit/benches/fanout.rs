//! Fan-out of the prelude's parallel phases against a local OpenAI-compatible server that
//! answers every request after a fixed latency: the wall time of a 200-branch `anot`
//! scoring phase and a 200-subtask `got` layer, compared with the critical-path bound
//! (the number of model calls in sequence × the latency), and the prompt size per request
//! compared with one unstructured prompt that accumulates everything the run saw.
//!
//! The server runs in its own process (this binary, started again with `FANOUT_SERVE`),
//! as a model server would; prompt sizes are read from an in-process server.
//!
//! `cargo bench -p codegen-jit --bench fanout` (release). Figures go to
//! docs/PERFORMANCE.md.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use codegen_jit::{Externs, Host, Limits, on_big_stack};
use http_transport::HttpConfig;
use providers::openai::{OpenAiConfig, OpenAiProvider};
use runtime::{CallSite, Context, Runtime, RuntimeConfig, TypeDesc};
use serde_json::json;
use test_support::http::{MockServer, Reply};

const BRANCHES: usize = 200;
/// The server's fixed latencies: 100 ms (fast for a model) and 500 ms (typical).
const LATENCIES: [Duration; 2] = [Duration::from_millis(100), Duration::from_millis(500)];

fn module(source: &str) -> Arc<ir::Module> {
    let mut db = hir::Database::default();
    db.add_prelude();
    db.add_file("bench.sap", source);
    Arc::new(lower::lower_workspace(&db).expect("the benchmark program checks"))
}

/// The scripted model: answers by the call site named in the instruction.
fn answer(user: &str) -> serde_json::Value {
    if user.contains("result of `holds`") {
        json!({ "value": if user.contains("opens = 7:") { "Yes" } else { "No" } })
    } else if user.contains("result of `read_request`") {
        json!({ "summary": "opens early", "wants": ["opens early"] })
    } else if user.contains("result of `condition_for`") {
        json!({ "field": "opens", "value": "" })
    } else if user.contains("result of `write_subtasks`") {
        json!({ "value": (0..BRANCHES).map(|i| format!("look up fact {i}")).collect::<Vec<_>>() })
    } else if user.contains("result of `prerequisites`") {
        json!({ "value": [] })
    } else if user.contains("result of `run_subtask`") {
        json!({ "value": "a fact" })
    } else if user.contains("result of `score`") {
        json!({ "value": 1 })
    } else {
        json!({ "value": "all facts" })
    }
}

async fn start_server(latency: Duration) -> MockServer {
    MockServer::start(move |request, _| {
        let body = request.json();
        let user = body["messages"][1]["content"].as_str().unwrap_or("").to_owned();
        Reply::json(json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": answer(&user).to_string() }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": user.len() / 4, "completion_tokens": 5 },
        }))
        .delayed(latency)
    })
    .await
}

/// The server process: prints its URL, serves until its standard input closes.
fn serve(latency_ms: u64) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = tokio.block_on(start_server(Duration::from_millis(latency_ms)));
    println!("{}", server.url());
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

struct Remote {
    child: Child,
    url: String,
}

impl Remote {
    fn start(latency: Duration) -> Remote {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("FANOUT_SERVE", latency.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server process");
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        Remote {
            child,
            url: url.trim().to_owned(),
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn runtime_for(url: &str) -> Arc<Runtime> {
    let provider = OpenAiProvider::new(OpenAiConfig {
        http: HttpConfig {
            concurrency: Some(1024),
            ..HttpConfig::default()
        },
        ..OpenAiConfig::new(format!("{url}/v1"), "bench")
    })
    .expect("provider");
    Arc::new(Runtime::new(Arc::new(provider), RuntimeConfig::default()))
}

/// Runs the program's `main` against the server at `url`; its wall time.
fn run(module: &Arc<ir::Module>, url: &str, tokio: &tokio::runtime::Runtime) -> Duration {
    let limits = Limits {
        concurrency: 1024,
        ..Limits::default()
    };
    let host = Host::new(
        module.clone(),
        Some(runtime_for(url)),
        tokio.handle().clone(),
        Externs::default(),
        limits,
    )
    .with_output(Box::new(std::io::sink()));
    let program = codegen_jit::compile(host.module.clone()).expect("compiles");
    let start = Instant::now();
    let result = on_big_stack(|| program.run_main(&host));
    let wall = start.elapsed();
    result.expect("the benchmark program runs");
    wall
}

struct Prompts {
    calls: usize,
    mean_bytes: f64,
    accumulated_bytes: usize,
}

/// What the program's calls sent, from an in-process server.
fn prompts(module: &Arc<ir::Module>, tokio: &tokio::runtime::Runtime) -> Prompts {
    let server = tokio.block_on(start_server(Duration::ZERO));
    run(module, &server.url(), tokio);
    let prompts: Vec<String> = server
        .requests()
        .iter()
        .map(|r| {
            r.json()["messages"][1]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    // One unstructured conversation would hold every distinct line any call saw.
    let mut lines: Vec<&str> = prompts.iter().flat_map(|p| p.lines()).collect();
    lines.sort_unstable();
    lines.dedup();
    Prompts {
        calls: prompts.len(),
        mean_bytes: prompts.iter().map(String::len).sum::<usize>() as f64
            / prompts.len().max(1) as f64,
        accumulated_bytes: lines.iter().map(|l| l.len() + 1).sum(),
    }
}

/// The floor: 200 concurrent calls straight through the runtime (no sap program, no
/// threads), against the same server.
fn floor(url: &str, tokio: &tokio::runtime::Runtime) -> Duration {
    let rt = runtime_for(url);
    let started = Instant::now();
    tokio.block_on(async {
        let tasks: Vec<_> = (0..BRANCHES)
            .map(|i| {
                let rt = rt.clone();
                tokio::spawn(async move {
                    let ctx = Context::new();
                    ctx.instruct(&format!("item {i}"));
                    let site = CallSite {
                        function: "score".to_owned(),
                        ..CallSite::default()
                    };
                    rt.produce(&site, &ctx, "score", &TypeDesc::I64).await
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
    });
    started.elapsed()
}

/// A warm-up, then the best of three.
fn best(mut f: impl FnMut() -> Duration) -> Duration {
    let _ = f();
    (0..3).map(|_| f()).min().unwrap()
}

fn main() {
    if let Ok(ms) = std::env::var("FANOUT_SERVE") {
        serve(ms.parse().expect("a latency in milliseconds"));
        return;
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let items: Vec<serde_json::Value> = (0..BRANCHES)
        .map(|i| json!({ "name": format!("cafe {i}"), "opens": format!("{}:{:03}", 7 + i % 5, i) }))
        .collect();
    let anot = format!(
        "use anot\nfn main(ctx: Context) -> () {{\n    let items = json_parse({:?})\n    print(to_string(anot::rank(ctx, \"open early\", items, 5)))\n}}\n",
        serde_json::Value::Array(items).to_string()
    );
    let got = "use got\nfn main(ctx: Context) -> () {\n    print(got::solve(ctx, \"collect the facts\"))\n}\n";
    // anot: the wants, the condition of the one want, then the opening times judged in
    // parallel (each of the 200 is distinct).
    // got: the subtasks, 200 prerequisites in parallel, the layer of 200 in parallel,
    // the synthesis.
    let cases: Vec<(&str, Arc<ir::Module>, u32)> = vec![
        ("anot phase 3: 200 items", module(&anot), 3),
        ("got layer: 200 subtasks", module(got), 4),
    ];
    let sizes: Vec<Prompts> = cases.iter().map(|(_, m, _)| prompts(m, &tokio)).collect();
    println!(
        "| fan-out | latency | model calls | wall | critical path | ratio | mean prompt | one accumulated prompt |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for latency in LATENCIES {
        let server = Remote::start(latency);
        let ms = latency.as_secs_f64() * 1000.0;
        let base = best(|| floor(&server.url, &tokio));
        println!(
            "| floor: 200 concurrent runtime calls, no program | {ms:.0} ms | 200 | {:.0} ms | {ms:.0} ms | {:.2}× | | |",
            base.as_secs_f64() * 1000.0,
            base.as_secs_f64() / latency.as_secs_f64()
        );
        for ((name, module, sequential), size) in cases.iter().zip(&sizes) {
            let wall = best(|| run(module, &server.url, &tokio));
            let bound = latency * *sequential;
            println!(
                "| {name} | {ms:.0} ms | {} | {:.0} ms | {:.0} ms | {:.2}× | {:.0} tokens | {:.0} tokens |",
                size.calls,
                wall.as_secs_f64() * 1000.0,
                bound.as_secs_f64() * 1000.0,
                wall.as_secs_f64() / bound.as_secs_f64(),
                size.mean_bytes / 4.0,
                size.accumulated_bytes as f64 / 4.0,
            );
        }
    }
}
