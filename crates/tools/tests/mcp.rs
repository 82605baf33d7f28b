//! The MCP client against a server on the Python `mcp` SDK (`tests/mcp/py_server.py`),
//! driven without a program: what the server itself receives.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, json};
use tools::mcp::{McpServer, ServerConfig};

fn py_server(config: ServerConfig) -> McpServer {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/py_server.py");
    McpServer::new(
        "py",
        ServerConfig {
            command: Some(test_support::mcp::python()),
            args: vec![script.display().to_string()],
            ..config
        },
        &std::env::temp_dir(),
    )
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// The server's events, asked until it has recorded a cancellation (it handles the
/// notification on its own time), or after five seconds.
async fn events_once_cancelled(server: &McpServer) -> String {
    let mut seen = String::new();
    for _ in 0..50 {
        seen = text(&server.call("events", Map::new(), None).await.unwrap());
        if seen.contains("cancelled slow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// A call that times out is cancelled on the server, not only given up by the client:
/// the server saw `notifications/cancelled` while the connection stayed open.
#[test]
fn a_call_that_times_out_is_cancelled_on_the_server() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = py_server(ServerConfig {
        timeout_seconds: Some(0.5),
        ..ServerConfig::default()
    });
    rt.block_on(async {
        let mut args = Map::new();
        args.insert("seconds".into(), json!(30.0));
        let err = server.call("slow", args, None).await.unwrap_err();
        assert!(
            err.contains("no answer in 0.5 s; the call was cancelled"),
            "{err}"
        );
        assert_eq!(events_once_cancelled(&server).await, "cancelled slow");
    });
}

/// A call whose future is dropped before the answer (a cancelled run: an editor's
/// `session/cancel`, Ctrl-C in Python) is cancelled on the server too.
#[test]
fn a_call_dropped_midway_is_cancelled_on_the_server() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = py_server(ServerConfig::default());
    rt.block_on(async {
        // Connected first: under load, starting the server alone can take longer than
        // the time the call is given, and a call never sent is not cancelled.
        server.call("events", Map::new(), None).await.unwrap();
        let mut args = Map::new();
        args.insert("seconds".into(), json!(30.0));
        let dropped =
            tokio::time::timeout(Duration::from_millis(1500), server.call("slow", args, None))
                .await;
        assert!(dropped.is_err(), "the slow call answered: {dropped:?}");
        assert_eq!(events_once_cancelled(&server).await, "cancelled slow");
    });
}

/// A server of a few lines of Python that speaks just enough of the protocol: it answers
/// `initialize`, and each other request by `answer(method, params)` (None: no answer).
fn fake_server(name: &str, answer: &str, timeout: f64) -> (McpServer, test_support::Scratch) {
    let dir = test_support::Scratch::new(name);
    let script = dir.join("server.py");
    std::fs::write(
        &script,
        format!(
            r#"import json, sys
{answer}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {{"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {{"tools": {{}}}},
                  "serverInfo": {{"name": "fake", "version": "1"}}}}
    else:
        result = answer(msg["method"], msg.get("params") or {{}})
    if result is None:
        continue
    sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": result}}) + "\n")
    sys.stdout.flush()
"#
        ),
    )
    .unwrap();
    let server = McpServer::new(
        name,
        ServerConfig {
            command: Some("python3".to_owned()),
            args: vec![script.display().to_string()],
            timeout_seconds: Some(timeout),
            ..ServerConfig::default()
        },
        &dir,
    );
    (server, dir)
}

/// A server that writes something other than JSON-RPC to its standard output in answer
/// to a call (the SDK skips such lines): the error at the time-out says what it wrote.
#[test]
fn a_line_that_is_not_json_is_named_when_the_call_ends() {
    let (server, dir) = fake_server(
        "garbler",
        r#"def answer(method, params):
    if method == "tools/list":
        return {"tools": [{"name": "garble", "inputSchema": {"type": "object"}}]}
    sys.stdout.write("{this is not json\n")
    sys.stdout.flush()
"#,
        1.0,
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt
        .block_on(server.call("garble", Map::new(), None))
        .unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        err.contains("MCP server `garbler`, tool `garble`: no answer in 1.0 s")
            && err.contains("it wrote a line that is not JSON-RPC")
            && err.contains("`{this is not json`"),
        "{err}"
    );
}

/// `tools/list` is paginated: every page is read, in the server's order.
#[test]
fn every_page_of_the_tool_list_is_read() {
    let (server, dir) = fake_server(
        "pager",
        r#"def answer(method, params):
    if method != "tools/list":
        return None
    page = int(params.get("cursor") or 0)
    tools = [{"name": f"tool_{page}_{i}", "inputSchema": {"type": "object"}} for i in range(2)]
    return {"tools": tools, "nextCursor": str(page + 1)} if page < 2 else {"tools": tools}
"#,
        5.0,
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tools = rt.block_on(server.list_tools()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        names,
        [
            "tool_0_0", "tool_0_1", "tool_1_0", "tool_1_1", "tool_2_0", "tool_2_1"
        ]
    );
}
