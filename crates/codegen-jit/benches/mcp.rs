//! The cost of an MCP tool call from a sap program, against the reference server
//! `@modelcontextprotocol/server-everything` over stdio and its trivial `echo` tool
//! (issue targets: ≤ 100 µs per call on top of the server's own time; 100 concurrent
//! calls from `parallel for`).
//!
//! Side by side in one run, on one server process each:
//! - the floor: a minimal JSON-RPC client on raw pipes (one line out, one line back);
//! - a compiled sap program calling `everything::echo` in a loop (JIT, through the host,
//!   `rmcp`, the typed conversion of arguments and result);
//! - 100 calls at once: the floor pipelines 100 requests; sap runs them from a
//!   `parallel for` with `--concurrency 100`.
//!
//! `cargo bench -p codegen-jit --bench mcp` (release). Figures go to docs/PERFORMANCE.md.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codegen_jit::{Externs, Host, Limits, on_big_stack};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tools::Tools;
use tools::mcp::{McpServer, ServerConfig};

/// As `sapc` allocates.
#[global_allocator]
static ALLOCATOR: codegen_jit::Allocator = codegen_jit::Allocator;

const SEQUENTIAL: usize = 2_000;
const CONCURRENT: usize = 100;
const ROUNDS: usize = 7;

fn module(source: &str) -> Arc<ir::Module> {
    let mut db = hir::Database::default();
    db.add_prelude();
    db.add_file("bench.sap", source);
    Arc::new(lower::lower_workspace(&db).expect("the benchmark program checks"))
}

fn server() -> ServerConfig {
    let (node, entry) = test_support::mcp::node_server("everything");
    ServerConfig {
        command: Some(node),
        args: vec![entry],
        ..ServerConfig::default()
    }
}

/// A raw JSON-RPC client on the server's pipes: the floor.
struct Raw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl Raw {
    async fn start() -> Raw {
        let config = server();
        let mut child = tokio::process::Command::new(config.command.unwrap())
            .args(&config.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("server-everything starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut raw = Raw {
            child,
            stdin,
            lines,
            next: 0,
        };
        raw.request(json!({"method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}))
            .await;
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends a request and reads lines until its response.
    async fn request(&mut self, mut message: Value) -> Value {
        let id = self.next;
        self.next += 1;
        message["jsonrpc"] = json!("2.0");
        message["id"] = json!(id);
        self.send(&message).await;
        self.response(id).await
    }

    async fn response(&mut self, id: u64) -> Value {
        loop {
            let line = self.lines.next_line().await.unwrap().expect("a line");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    fn echo(&mut self) -> Value {
        let id = self.next;
        self.next += 1;
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"message": "hi"}}})
    }

    async fn sequential(&mut self, n: usize) -> Duration {
        let start = Instant::now();
        for _ in 0..n {
            let call = self.echo();
            let id = call["id"].as_u64().unwrap();
            self.send(&call).await;
            let r = self.response(id).await;
            assert!(r["result"]["content"][0]["text"] == "Echo: hi", "{r}");
        }
        start.elapsed()
    }

    /// `n` requests written at once, then their `n` responses read.
    async fn pipelined(&mut self, n: usize) -> Duration {
        let start = Instant::now();
        let mut batch = String::new();
        let first = self.next;
        for _ in 0..n {
            batch.push_str(&self.echo().to_string());
            batch.push('\n');
        }
        self.stdin.write_all(batch.as_bytes()).await.unwrap();
        let mut seen = 0;
        while seen < n {
            let line = self.lines.next_line().await.unwrap().expect("a line");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"].as_u64().is_some_and(|id| id >= first) {
                seen += 1;
            }
        }
        start.elapsed()
    }
}

/// Runs `main` of `module` with `tools`; its wall time (the code is compiled first).
fn run(
    module: &Arc<ir::Module>,
    tools: &Arc<Tools>,
    tokio: &tokio::runtime::Runtime,
    concurrency: usize,
) -> Duration {
    let host = Host::new(
        module.clone(),
        None,
        tokio.handle().clone(),
        Externs::default(),
        Limits {
            concurrency,
            ..Limits::default()
        },
    )
    .with_tools(tools.clone())
    .with_output(Box::new(std::io::sink()));
    let program = codegen_jit::compile(host.module.clone()).expect("compiles");
    let start = Instant::now();
    on_big_stack(|| program.run_main(&host)).expect("the benchmark program runs");
    start.elapsed()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once, quickly.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (sequential, rounds) = if quick { (20, 1) } else { (SEQUENTIAL, ROUNDS) };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let mut raw = tokio.block_on(Raw::start());
    tokio.block_on(raw.sequential(50)); // warm-up
    let raw_seq = median(
        (0..rounds)
            .map(|_| tokio.block_on(raw.sequential(sequential)))
            .collect(),
    );
    let raw_par = median(
        (0..rounds)
            .map(|_| tokio.block_on(raw.pipelined(CONCURRENT)))
            .collect(),
    );
    drop(tokio.block_on(async { raw.child.kill().await }));

    let mut tools = Tools::default();
    tools.add_server(McpServer::new("everything", server(), Path::new(".")));
    let tools = Arc::new(tools);
    let decl = "extern \"mcp:everything\" fn echo(message: String) -> String;\n";
    let loop_of = |n: usize| {
        module(&format!(
            "{decl}fn main() {{\n    let i = 0\n    while i < {n} {{\n        echo(\"hi\")\n        i += 1\n    }}\n}}\n"
        ))
    };
    let warm = loop_of(50);
    run(&warm, &tools, &tokio, 1); // connects, then warms up
    let seq = loop_of(sequential);
    let sap_seq = median((0..rounds).map(|_| run(&seq, &tools, &tokio, 1)).collect());
    let items: Vec<String> = (0..CONCURRENT).map(|i| i.to_string()).collect();
    let fan = module(&format!(
        "{decl}fn main() {{\n    let out = parallel for i in [{}] {{\n        echo(\"hi\")\n    }}\n    print(to_string(len(out)))\n}}\n",
        items.join(", ")
    ));
    let sap_par = median(
        (0..rounds)
            .map(|_| run(&fan, &tools, &tokio, CONCURRENT))
            .collect(),
    );
    // The same fan-out with no tool call: what `parallel for` itself costs.
    let empty = module(&format!(
        "fn main() {{\n    let out = parallel for i in [{}] {{\n        \"hi\"\n    }}\n    print(to_string(len(out)))\n}}\n",
        items.join(", ")
    ));
    let fan_only = median(
        (0..rounds)
            .map(|_| run(&empty, &tools, &tokio, CONCURRENT))
            .collect(),
    );

    let per = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n as f64;
    println!("MCP calls to server-everything `echo` over stdio (median of {rounds} rounds)");
    println!("| | floor (raw pipes) | sap | sap − floor |");
    println!("|---|---|---|---|");
    println!(
        "| one call at a time, per call ({sequential} calls) | {:.1} µs | {:.1} µs | {:.1} µs |",
        per(raw_seq, sequential),
        per(sap_seq, sequential),
        per(sap_seq, sequential) - per(raw_seq, sequential)
    );
    println!(
        "| {CONCURRENT} calls at once, wall time | {:.2} ms (pipelined) | {:.2} ms (`parallel for`, concurrency {CONCURRENT}) | {:.2} ms |",
        raw_par.as_secs_f64() * 1e3,
        sap_par.as_secs_f64() * 1e3,
        (sap_par.as_secs_f64() - raw_par.as_secs_f64()) * 1e3
    );
    println!(
        "| the same `parallel for` without the call | | {:.2} ms | |",
        fan_only.as_secs_f64() * 1e3
    );
}
