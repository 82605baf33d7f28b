//! OpenTelemetry export (`sapc run --otlp URL`, `OTEL_EXPORTER_OTLP_ENDPOINT`), against
//! an OTLP/HTTP receiver that decodes what arrives with OpenTelemetry's own protobuf
//! definitions (`tests/otlp/receiver.py`, the `opentelemetry-proto` package).

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{examples, fails, ok, stdout};
use serde_json::Value;

struct Receiver {
    child: Child,
    port: u16,
    spans: PathBuf,
}

impl Receiver {
    fn start(name: &str) -> Receiver {
        let spans =
            std::env::temp_dir().join(format!("sap-otlp-{name}-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&spans);
        let script = examples().join("../tests/otlp/receiver.py");
        let mut child = Command::new(test_support::mcp::python())
            .arg(script)
            .arg(&spans)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the receiver starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        Receiver { child, port, spans }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans received, once `count` have arrived.
    fn spans(&self, count: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans: Vec<Value> = std::fs::read_to_string(&self.spans)
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if spans.len() >= count || started.elapsed() > Duration::from_secs(20) {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.spans);
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
}

fn sapc_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sapc"));
    c.current_dir(examples().join(".."))
        .args(args)
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn a_run_exports_a_tree_of_function_model_and_tool_spans() {
    let receiver = Receiver::start("tree");
    let plain = sapc_env(&["run", "examples/calculator_extern.sap"], &[]);
    let o = sapc_env(
        &[
            "run",
            "examples/calculator_extern.sap",
            "--otlp",
            &receiver.url(),
        ],
        &[],
    );
    ok(&o);
    assert_eq!(stdout(&o), stdout(&plain), "exporting changed the run");
    let spans = receiver.spans(5);
    let root = named(&spans, "sap run examples/calculator_extern.sap");
    assert_eq!(root["parent_span_id"], "");
    assert_eq!(root["resource"]["service.name"], "sap");
    let main = named(&spans, "main");
    let agent = named(&spans, "calculator_agent");
    let chat = spans
        .iter()
        .find(|s| s["kind"] == "SPAN_KIND_CLIENT")
        .expect("a model call's span");
    let tool = spans
        .iter()
        .find(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
        .expect("an extern call's span");
    // One trace, and the call stack as the tree.
    for s in &spans {
        assert_eq!(s["trace_id"], root["trace_id"]);
    }
    assert_eq!(main["parent_span_id"], root["span_id"]);
    assert_eq!(agent["parent_span_id"], main["span_id"]);
    assert_eq!(chat["parent_span_id"], agent["span_id"]);
    assert_eq!(tool["parent_span_id"], agent["span_id"]);
    // The GenAI conventions.
    let a = &chat["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "chat");
    assert_eq!(a["gen_ai.provider.name"], "replay");
    assert_eq!(a["sap.call.kind"], "choose");
    assert!(a["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0, "{a}");
    assert!(a["gen_ai.usage.output_tokens"].as_i64().unwrap() > 0, "{a}");
    assert_eq!(a["gen_ai.response.finish_reasons"][0], "stop");
    assert_eq!(a["code.function.name"], "calculator_agent");
    assert_eq!(a["code.file.path"], "examples/calculator_extern.sap");
    let t = &tool["attributes"];
    assert!(
        ["add", "subtract"].contains(&t["gen_ai.tool.name"].as_str().unwrap()),
        "{t}"
    );
    assert_eq!(t["gen_ai.tool.type"], "function");
    // Spans nest in time too.
    assert!(agent["start"].as_u64() <= chat["start"].as_u64());
    assert!(chat["end"].as_u64() <= agent["end"].as_u64());
}

#[test]
fn the_standard_environment_variable_turns_export_on() {
    let receiver = Receiver::start("env");
    let o = sapc_env(
        &["run", "examples/code_analysis.sap"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url())],
    );
    ok(&o);
    let spans = receiver.spans(6);
    let chats = spans.iter().filter(|s| s["name"] == "chat").count();
    assert_eq!(chats, 2, "{spans:#?}");
    named(&spans, "analyze_code");
    named(&spans, "suggest_fix");
}

#[test]
fn a_collector_that_is_not_there_does_not_stop_the_run() {
    let plain = sapc_env(&["run", "examples/code_analysis.sap"], &[]);
    let o = sapc_env(
        &[
            "run",
            "examples/code_analysis.sap",
            "--otlp",
            "http://127.0.0.1:9",
        ],
        &[],
    );
    ok(&o);
    assert_eq!(stdout(&o), stdout(&plain));
    fails(
        &sapc_env(
            &[
                "run",
                "examples/code_analysis.sap",
                "--otlp",
                "grpc://localhost:4317",
            ],
            &[],
        ),
        2,
        "must be an http:// or https:// URL",
    );
}

#[test]
fn an_editor_agent_exports_its_turns_tool_calls() {
    use std::io::Write;
    let receiver = Receiver::start("acp");
    let program = examples().join("../crates/sapc/tests/acp/chat.sap");
    let mut agent = Command::new(env!("CARGO_BIN_EXE_sapc"))
        .args(["acp", program.to_str().unwrap(), "--allow-run=true"])
        // A provider that is never called: `wait 0` asks no model.
        .args([
            "--provider",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "x",
        ])
        .args(["--otlp", &receiver.url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = agent.stdin.take().unwrap();
    let mut output = BufReader::new(agent.stdout.take().unwrap());
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(input, "{request}").unwrap();
        loop {
            let mut line = String::new();
            output.read_line(&mut line).unwrap();
            let m: Value = serde_json::from_str(&line).unwrap();
            if m["method"] == "session/request_permission" {
                let no = serde_json::json!({"jsonrpc": "2.0", "id": m["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "reject-once"}}});
                writeln!(input, "{no}").unwrap();
            }
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
        }
    };
    ask(0, "initialize", serde_json::json!({"protocolVersion": 1}));
    let made = ask(
        1,
        "session/new",
        serde_json::json!({"cwd": "/", "mcpServers": []}),
    );
    let session = made["result"]["sessionId"].clone();
    let prompt =
        serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": "wait 0"}]});
    // `wait 0` runs `process::run("sleep", …)`: not granted, and the user says no.
    let answer = ask(2, "session/prompt", prompt);
    assert!(
        answer["error"]["data"]
            .as_str()
            .is_some_and(|e| e.contains("--allow-run=sleep") && e.contains("refused")),
        "{answer}"
    );
    drop(input);
    assert!(agent.wait().unwrap().success());
    let spans = receiver.spans(2);
    named(&spans, &format!("sap run {}", program.display()));
    let tool = spans
        .iter()
        .find(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
        .expect("the tool call's span");
    assert_eq!(tool["attributes"]["sap.tool.source"], "std:process/run");
}
