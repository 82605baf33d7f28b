//! Model calls to OpenAI-compatible servers on HTTP stacks no one here wrote: uvicorn
//! (h11, as vLLM serves) and Node's `http` module, with answers whole and streamed
//! (chunked). The calls follow one another, so each should go on the connection the one
//! before left open: a streamed answer's end is read after its `[DONE]` so that its
//! connection is kept. And with a proxy set in the environment, calls go through it.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::mcp::{free_port, scripted_model};
use common::{Project, ok, stdout};
use test_support::mcp::python;

const CALLS: usize = 6;

const PROGRAM: &str = r#"
enum Verdict { Match, NoMatch }

/// Judge one item.
fn judge(ctx: Context, item: String) -> Verdict {
    "Judge whether this item fits."!
    item!
}

fn main() {
    let verdicts: List<Verdict> = []
    let i = 0
    while i < 6 {
        verdicts = push(verdicts, judge(Context::new(), "item " + to_string(i)))
        i = i + 1
    }
    print(to_string(len(verdicts)) + " verdicts")
}
"#;

/// A server process, stopped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(program: &str, script: &str) -> Server {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/http")
            .join(script);
        let port = free_port();
        let mut child = Command::new(program)
            .arg(&script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program} {}: {e}", script.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "{} did not start", script.display());
        Server { child, port }
    }

    /// The requests served and the connections they came on.
    fn stats(&self) -> (u64, u64) {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        use std::io::{Read, Write};
        stream
            .write_all(b"GET /stats HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        // A chunked body is one chunk here: its JSON is the line that starts with `{`.
        let json: serde_json::Value = body
            .lines()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("stats: {answer}"));
        (
            json["served"].as_u64().unwrap(),
            json["connections"].as_u64().unwrap(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sapc run main.sap` against an OpenAI-compatible server at `base`.
fn run(p: &Project, base: &str, vars: &[(&str, &str)]) -> std::process::Output {
    let args = [
        "run",
        "main.sap",
        "--provider",
        "openai",
        "--model",
        "m",
        "--base-url",
        base,
    ];
    p.sapc_with_env(&args, vars)
}

/// Runs the program against `server`, streamed or not, and returns the requests it
/// served and the connections they came on.
fn calls(server: &Server, streamed: bool) -> (u64, u64) {
    let p = Project::new(
        if streamed {
            "http-streamed"
        } else {
            "http-whole"
        },
        &format!("[provider]\nstream = {streamed}\n"),
    );
    p.write("main.sap", PROGRAM);
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let before = server.stats();
    let out = run(&p, &base, &[]);
    ok(&out);
    assert_eq!(stdout(&out).trim(), format!("{CALLS} verdicts"));
    let after = server.stats();
    // The `/stats` request itself is one connection.
    (after.0 - before.0, after.1 - before.1 - 1)
}

fn connections_are_kept(server: &Server) {
    for streamed in [false, true] {
        let (served, connections) = calls(server, streamed);
        assert_eq!(served, CALLS as u64);
        assert!(
            connections <= 2,
            "{CALLS} calls one after another (streamed: {streamed}) took {connections} connections"
        );
    }
}

#[test]
fn uvicorn_answers_whole_and_streamed_on_kept_connections() {
    connections_are_kept(&Server::start(&python(), "openai_asgi.py"));
}

#[test]
fn node_answers_whole_and_streamed_on_kept_connections() {
    connections_are_kept(&Server::start("node", "openai_node.js"));
}

#[test]
fn a_proxy_set_in_the_environment_carries_plain_http_calls() {
    let (_rt, proxy) = scripted_model(vec![serde_json::json!({ "value": "Match" })]);
    let p = Project::new("http-proxy", "[provider]\nstream = false\n");
    p.write("main.sap", PROGRAM);
    // Nothing listens at the base URL: only the proxy can answer.
    let base = format!("http://127.0.0.1:{}/v1", free_port());
    let out = run(
        &p,
        &base,
        &[
            ("HTTP_PROXY", &proxy.url()),
            ("NO_PROXY", ""),
            ("no_proxy", ""),
        ],
    );
    ok(&out);
    let requests = proxy.requests();
    assert_eq!(requests.len(), CALLS);
    assert_eq!(
        requests[0].path,
        format!("{base}/chat/completions"),
        "the absolute form a proxy is sent"
    );
}
