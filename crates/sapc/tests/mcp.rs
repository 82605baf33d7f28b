//! MCP tools against real servers no one here wrote: `@modelcontextprotocol/server-everything`
//! and `server-filesystem` from npm, and a server on the Python `mcp` SDK
//! (`tests/mcp/py_server.py`), installed by `tools/mcp/setup.sh`: import, calls, typed
//! results, the lock, time-outs, restarts and servers that cannot be used. Each test
//! works in a folder of its own with a `sap.toml`, as a user would.

mod common;

use std::path::Path;
use std::process::Command;

use common::mcp::{everything_toml, free_port, py_toml, wait_for_port};
use common::{Project, fails, ok, stderr, stdout};
use test_support::mcp::{node_server, python};

#[test]
fn server_everything_is_imported_and_its_tools_called_with_typed_results() {
    let p = Project::new("everything", &everything_toml());
    let out = p.sapc(&["mcp", "import", "everything"]);
    ok(&out);
    let module = p.read("everything.sap");
    // Names that are not identifiers are mapped, the original kept in the binding; the
    // description is the doc comment; an output schema is a struct.
    assert!(
        module.contains(
            "/// Returns the sum of two numbers\nextern \"mcp:everything/get-sum\" fn get_sum("
        ),
        "{module}"
    );
    assert!(
        module.contains("extern \"mcp:everything\" fn echo("),
        "{module}"
    );
    assert!(
        module.contains(") -> GetStructuredContentResult;"),
        "{module}"
    );
    assert!(
        module.contains("struct GetStructuredContentResult {"),
        "{module}"
    );
    let lock = p.read("sap.lock");
    assert!(
        lock.contains("\"get-sum\"") && lock.contains("sha256:"),
        "{lock}"
    );

    let listed = p.sapc(&["mcp", "list", "everything"]);
    ok(&listed);
    assert!(
        stdout(&listed)
            .contains("extern \"mcp:everything/get-sum\" fn get_sum(a: f64, b: f64) -> String;"),
        "{}",
        stdout(&listed)
    );

    p.write(
        "main.sap",
        r#"use everything

fn main() {
    print(everything::echo("hello"));
    print(everything::get_sum(2.5, 4.0));
    let weather = everything::get_structured_content("New York");
    if weather.humidity >= 0.0 {
        print(to_string(weather.conditions != ""));
    }
    // Reports progress while it runs: the time-out is reset by each notification.
    print(everything::trigger_long_running_operation(Some(1.0), Some(4.0)));
}
"#,
    );
    ok(&p.sapc(&["check", "main.sap"]));
    let run = p.sapc(&["run", "main.sap", "--trace", "trace.jsonl"]);
    ok(&run);
    assert_eq!(
        stdout(&run),
        "Echo: hello\nThe sum of 2.5 and 4 is 6.5.\ntrue\nLong running operation completed. Duration: 1 seconds, Steps: 4.\n"
    );
    let trace: Vec<serde_json::Value> = p
        .read("trace.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(trace.len(), 4);
    assert_eq!(trace[1]["server"], "mcp:everything");
    assert_eq!(trace[1]["tool"], "get-sum");
    assert_eq!(
        trace[1]["arguments"],
        serde_json::json!({"a": 2.5, "b": 4.0})
    );
    assert!(trace[1]["ms"].as_f64().unwrap() >= 0.0);
    assert!(trace[1]["result_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_changed_or_vanished_tool_stops_the_run_and_says_to_reimport() {
    let p = Project::new("lock", &everything_toml());
    ok(&p.sapc(&["mcp", "import", "everything"]));
    p.write(
        "main.sap",
        "use everything\n\nfn main() {\n    print(everything::get_sum(1.0, 2.0));\n}\n",
    );
    ok(&p.sapc(&["run", "main.sap"]));
    // As if the server had changed since the import: the lock remembers another schema
    // of `get-sum`, whose `b` was then called `c`.
    let mut lock: serde_json::Value = serde_json::from_str(&p.read("sap.lock")).unwrap();
    let entry = &mut lock["mcp"]["everything"]["tools"]["get-sum"];
    let props = entry["input"]["properties"].as_object_mut().unwrap();
    let b = props.remove("b").unwrap();
    props.insert("c".into(), b);
    entry["hash"] = "sha256:0000".into();
    let lock = serde_json::to_string_pretty(&lock).unwrap();
    p.write("sap.lock", &lock);
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let err = stderr(&run);
    assert!(
        err.contains("the schema of tool `get-sum` of MCP server `everything` changed"),
        "{err}"
    );
    assert!(
        err.contains("parameter `c` was removed; parameter `b` was added"),
        "{err}"
    );
    assert!(err.contains("mcp import everything"), "{err}");
    // A declared tool the server does not have.
    p.write(
        "main.sap",
        "extern \"mcp:everything\" fn teleport(to: String) -> String;\n\nfn main() {\n    print(teleport(\"mars\"));\n}\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    fails(&run, 1, "no longer has the tool `teleport`");
    assert!(stderr(&run).contains("main.sap:4"), "{}", stderr(&run));
}

#[test]
fn server_filesystem_reads_a_folder() {
    let (node, entry) = node_server("filesystem");
    let p = Project::new("fs", "");
    std::fs::create_dir_all(p.dir.join("notes")).unwrap();
    p.write("notes/a.md", "alpha\n")
        .write("notes/b.md", "beta\n");
    p.write(
        "sap.toml",
        &format!("[mcp.files]\ncommand = \"{node}\"\nargs = [\"{entry}\", \"notes\"]\n"),
    );
    ok(&p.sapc(&["mcp", "import", "files"]));
    let module = p.read("files.sap");
    assert!(module.contains("fn read_text_file("), "{module}");
    assert!(module.contains("fn list_directory("), "{module}");
    p.write(
        "main.sap",
        r#"use files

fn main() {
    // The server resolves relative paths in the folder it was given.
    print(files::list_directory(".").content);
    print(files::read_text_file("b.md", None, None).content);
}
"#,
    );
    let run = p.sapc(&["run", "main.sap"]);
    ok(&run);
    let out = stdout(&run);
    assert!(
        out.contains("[FILE] a.md") && out.contains("[FILE] b.md"),
        "{out}"
    );
    assert!(out.contains("beta"), "{out}");
}

#[test]
fn a_python_sdk_server_gives_structs_floats_and_located_errors() {
    let p = Project::new("py", &py_toml(""));
    ok(&p.sapc(&["mcp", "import", "py"]));
    let module = p.read("py.sap");
    // `{"result": X}` output schemas (how the SDK wraps a plain result) read as X; one
    // enum serves the parameter and the result field.
    assert!(
        module.contains("extern \"mcp:py\" fn add(\n    a: f64,\n    b: f64,\n) -> f64;"),
        "{module}"
    );
    assert!(module.contains(") -> DescribeResult;"), "{module}");
    assert!(
        module.contains("    level: DescribeLevel,\n    note: Option<String>,"),
        "{module}"
    );
    p.write(
        "main.sap",
        r#"use py
use py::DescribeLevel

fn main() {
    print(to_string(py::add(1.5, 2.25)));
    let d = py::describe("lamp", ["a", "b"], DescribeLevel::high, None);
    print(d.summary);
    print(to_string(d.tag_count));
    print(py::shout("quiet"));
    print(py::fail("the disk is full"));
}
"#,
    );
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert_eq!(stdout(&run), "3.75\nlamp [high] a,b\n2\nQUIET\n");
    let err = stderr(&run);
    assert!(err.contains("`py::fail` failed"), "{err}");
    assert!(
        err.contains("the tool reported an error") && err.contains("the disk is full"),
        "{err}"
    );
    assert!(err.contains("main.sap:10"), "{err}");
}

#[test]
fn a_result_that_does_not_fit_the_declaration_is_a_located_error() {
    let p = Project::new("misfit", &py_toml(""));
    p.write(
        "main.sap",
        "extern \"mcp:py\" fn add(a: f64, b: f64) -> Boolean;\n\nfn main() {\n    print(to_string(add(1.0, 2.0)));\n}\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(err.contains("does not fit the declared `Boolean`"), "{err}");
    assert!(err.contains("main.sap:4"), "{err}");
}

#[test]
fn a_slow_tool_times_out_and_a_dead_server_is_restarted_once() {
    let p = Project::new("slow", &py_toml("timeout_seconds = 0.5\n"));
    p.write(
        "main.sap",
        "extern \"mcp:py\" fn slow(seconds: f64) -> String;\n\nfn main() {\n    print(slow(30.0));\n}\n",
    );
    let started = std::time::Instant::now();
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("no answer in 0.5 s; the call was cancelled"),
        "{err}"
    );
    // Not a hang: the call ended at its time-out, not at the tool's 30 s.
    assert!(started.elapsed().as_secs() < 20);

    // The run's time budget ends a call too, whatever the server's time-out.
    p.write("sap.toml", &py_toml("timeout_seconds = 60\n"));
    let run = p.sapc(&["run", "main.sap", "--max-time", "3"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("the run's time budget (--max-time) ended during the call; it was cancelled"),
        "{err}"
    );

    p.write(
        "main.sap",
        r#"extern "mcp:py" fn crash(code: i64) -> String;
extern "mcp:py" fn shout(text: String) -> String;

fn main() {
    print(shout("before"));
    print(crash(3));
}
"#,
    );
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(stdout(&run), "BEFORE\n");
    assert!(
        stderr(&run).contains("the server closed the connection"),
        "{}",
        stderr(&run)
    );

    // A server that exits between calls is started again, once.
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/py_server.py");
    p.write(
        "sap.toml",
        &format!(
            "{}\n[mcp.other]\ncommand = \"{}\"\nargs = [\"{}\"]\n",
            py_toml(""),
            python(),
            server.display()
        ),
    );
    p.write(
        "main.sap",
        r#"extern "mcp:py" fn bye() -> String;
extern "mcp:py" fn shout(text: String) -> String;
extern "mcp:other" fn slow(seconds: f64) -> SlowResult;

struct SlowResult {
    result: String,
}

fn main() {
    print(bye());
    // Meanwhile the first server exits.
    print(slow(1.0).result);
    print(shout("after"));
    print(bye());
    print(slow(1.0).result);
    print(shout("again"));
}
"#,
    );
    let run = p.sapc(&["run", "main.sap", "--trace", "t.jsonl"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert_eq!(stdout(&run), "bye\nslept 1.0\nAFTER\nbye\nslept 1.0\n");
    assert!(
        stderr(&run).contains("exited again after it was restarted once"),
        "{}",
        stderr(&run)
    );
    assert_eq!(p.read("t.jsonl").matches("tool_server_restart").count(), 1);
}

/// `mcp-server-time` from PyPI, the reference server on the Python SDK: its results are
/// Pydantic models whose nested model is a `$ref`, imported as structs of their own.
#[test]
fn the_python_reference_time_server_is_imported_with_its_nested_models() {
    let p = Project::new(
        "time",
        &format!(
            "[mcp.clock]\ncommand = \"{}\"\nargs = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n",
            python()
        ),
    );
    ok(&p.sapc(&["mcp", "import", "clock"]));
    let module = p.read("clock.sap");
    assert!(
        module.contains("extern \"mcp:clock\" fn convert_time(")
            && module.contains(") -> ConvertTimeResult;")
            && module.contains("    source: TimeResult,\n    target: TimeResult,")
            && module.contains("struct TimeResult {"),
        "{module}"
    );
    p.write(
        "main.sap",
        r#"use clock

fn main() {
    let c = clock::convert_time("UTC", "12:00", "Asia/Tokyo")
    print(c.time_difference)
    print(c.target.timezone)
    print(to_string(ends_with(c.target.datetime, "T21:00:00+09:00")))
    print(to_string(c.source.is_dst))
    print(clock::get_current_time("Europe/Paris").timezone)
}
"#,
    );
    ok(&p.sapc(&["check", "main.sap"]));
    let run = p.sapc(&["run", "main.sap"]);
    ok(&run);
    assert_eq!(
        stdout(&run),
        "+9.0h\nAsia/Tokyo\ntrue\nfalse\nEurope/Paris\n"
    );
}

#[test]
fn servers_that_cannot_be_used_are_clear_errors() {
    // No such command.
    let p = Project::new("bad", "[mcp.gone]\ncommand = \"/nonexistent/server\"\n");
    p.write(
        "main.sap",
        "extern \"mcp:gone\" fn ping() -> String;\n\nfn main() {\n    print(ping());\n}\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    fails(&run, 1, "cannot start MCP server `gone`");

    // Not an MCP server: it writes text, then waits.
    p.write(
        "sap.toml",
        "[mcp.gone]\ncommand = \"sh\"\nargs = [\"-c\", \"echo not json; echo 'bad line' >&2; sleep 30\"]\nstartup_timeout_seconds = 2\n",
    );
    let started = std::time::Instant::now();
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("MCP server `gone` did not finish its start-up handshake in 2 s")
            && err.contains("it wrote a line that is not JSON-RPC")
            && err.contains("`not json`")
            && err.contains("bad line"),
        "{err}"
    );
    assert!(started.elapsed().as_secs() < 20, "{err}");

    // A server that exits at once, with a message.
    p.write(
        "sap.toml",
        "[mcp.gone]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'missing API key' >&2; exit 3\"]\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("failed its start-up handshake") && err.contains("missing API key"),
        "{err}"
    );

    // A server that speaks another protocol version.
    let fake = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": {"name": "old", "version": "0"}}}), flush=True)
"#;
    p.write("old.py", fake);
    p.write(
        "sap.toml",
        "[mcp.gone]\ncommand = \"python3\"\nargs = [\"old.py\"]\nstartup_timeout_seconds = 5\n",
    );
    let started = std::time::Instant::now();
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("MCP server `gone` speaks protocol version 1999-01-01"),
        "{err}"
    );
    assert!(started.elapsed().as_secs() < 4, "{err}");

    // A server that answers the call with a JSON-RPC error.
    let erring = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    method = m.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "e", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32603, "message": "the database is down"}}), flush=True)
        continue
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
"#;
    p.write("erring.py", erring);
    p.write(
        "sap.toml",
        "[mcp.gone]\ncommand = \"python3\"\nargs = [\"erring.py\"]\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(
        err.contains("MCP server `gone`, tool `ping`: JSON-RPC error -32603: the database is down"),
        "{err}"
    );
    assert!(err.contains("main.sap:4"), "{err}");

    // A binding to a server sap.toml does not have.
    p.write(
        "main.sap",
        "extern \"mcp:elsewhere\" fn ping() -> String;\n\nfn main() {\n    print(ping());\n}\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    fails(&run, 2, "has no [mcp.elsewhere] table");
}

#[test]
fn streamable_http_servers_are_reached_by_url() {
    let port = free_port();
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/py_server.py");
    let mut child = Command::new(python())
        .arg(&server)
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    // A server name that is not a sap identifier names the module `web_tools`; a header
    // takes its value from the environment.
    let p = Project::new(
        "http",
        &format!(
            "[mcp.web-tools]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{SAP_TEST_TOKEN}}\" }}\n"
        ),
    );
    let token = [("SAP_TEST_TOKEN", "s3cret")];
    let import = p.sapc_with_env(&["mcp", "import", "web-tools"], &token);
    p.write(
        "main.sap",
        "use web_tools\n\nfn main() {\n    print(web_tools::authorization())\n    print(web_tools::shout(\"quiet\"))\n}\n",
    );
    let run = p.sapc_with_env(&["run", "main.sap"], &token);
    let unset = p.sapc(&["run", "main.sap"]);
    let _ = child.kill();
    let _ = child.wait();
    ok(&import);
    assert!(
        p.read("web_tools.sap")
            .contains("extern \"mcp:web-tools\" fn shout("),
        "{}",
        p.read("web_tools.sap")
    );
    ok(&run);
    // The server received the header, its variable expanded.
    assert_eq!(stdout(&run), "Bearer s3cret\nQUIET\n");
    fails(
        &unset,
        1,
        "[mcp.web-tools] uses `${SAP_TEST_TOKEN}`, which is not set",
    );
}

#[test]
fn server_everything_in_its_streamable_http_mode() {
    let port = free_port();
    let (node, entry) = node_server("everything");
    let mut child = Command::new(node)
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    let p = Project::new(
        "everything-http",
        &format!("[mcp.everything]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
    );
    let import = p.sapc(&["mcp", "import", "everything"]);
    p.write(
        "main.sap",
        "use everything\n\nfn main() {\n    print(everything::get_sum(40.0, 2.0));\n    print(to_string(everything::get_structured_content(\"Chicago\").humidity > 0.0));\n}\n",
    );
    let run = p.sapc(&["run", "main.sap"]);
    let _ = child.kill();
    let _ = child.wait();
    ok(&import);
    ok(&run);
    assert_eq!(stdout(&run), "The sum of 40 and 2 is 42.\ntrue\n");
}

#[test]
fn progress_notifications_keep_a_long_call_alive() {
    // A 3 s operation with a 1.5 s time-out: it reports progress every 0.5 s, and each
    // report starts the time-out again.
    let p = Project::new(
        "progress",
        &format!("{}timeout_seconds = 1.5\n", everything_toml()),
    );
    p.write(
        "main.sap",
        r#"extern "mcp:everything/trigger-long-running-operation" fn long_operation(duration: Option<f64>, steps: Option<f64>) -> String;

fn main() {
    print(long_operation(Some(3.0), Some(6.0)));
}
"#,
    );
    let run = p.sapc(&["run", "main.sap"]);
    ok(&run);
    assert_eq!(
        stdout(&run),
        "Long running operation completed. Duration: 3 seconds, Steps: 6.\n"
    );
    // Without progress in between, the same time-out ends the call: one 3 s step.
    p.write(
        "main.sap",
        &p.read("main.sap").replace("Some(6.0)", "Some(1.0)"),
    );
    let run = p.sapc(&["run", "main.sap"]);
    fails(&run, 1, "no answer in 1.5 s; the call was cancelled");
}
