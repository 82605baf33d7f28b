//! The real MCP servers the tests use, and what drives them.

use std::path::Path;

use test_support::http::{MockServer, Reply};
use test_support::mcp::{node_server, python};

pub fn everything_toml() -> String {
    let (node, entry) = node_server("everything");
    format!("[mcp.everything]\ncommand = \"{node}\"\nargs = [\"{entry}\"]\n")
}

pub fn py_toml(extra: &str) -> String {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/py_server.py");
    format!(
        "[mcp.py]\ncommand = \"{}\"\nargs = [\"{}\"]\n{extra}",
        python(),
        server.display()
    )
}

/// Waits (up to 30 s) until a server listens on `port`.
pub fn wait_for_port(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "no server listens on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scripted OpenAI-compatible model that gives `answers` in order.
pub fn scripted_model(answers: Vec<serde_json::Value>) -> (tokio::runtime::Runtime, MockServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(MockServer::start(move |_, i| {
        let answer = answers[i.min(answers.len() - 1)].clone();
        Reply::json(serde_json::json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": answer.to_string() }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5 },
        }))
    }));
    (rt, server)
}
