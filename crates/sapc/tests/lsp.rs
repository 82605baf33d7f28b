//! `sapc lsp` as an editor sees it: a process speaking JSON-RPC over stdio.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: i64,
}

fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// `sapc lsp`, its standard input and output piped.
fn spawn_server() -> Child {
    Command::new(env!("CARGO_BIN_EXE_sapc"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sapc lsp starts")
}

impl Client {
    fn start(init: Value) -> Client {
        let mut child = spawn_server();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(m) = read_message(&mut reader) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            stdin,
            messages,
            next_id: 1,
        };
        let result = client.request("initialize", init);
        assert!(result["capabilities"]["hoverProvider"].as_bool().unwrap());
        client.notify("initialized", json!({}));
        client
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// The full response (result or error) to a request.
    fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.wait_for(|m| m.get("id") == Some(&json!(id)))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_raw(method, params);
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    fn wait_for(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(m) if want(&m) => return m,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no such message from the server in time"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server exited"),
            }
        }
    }

    /// The next diagnostics published for `uri` at `version`.
    fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let m = self.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["version"] == version
        });
        m["params"]["diagnostics"].as_array().unwrap().clone()
    }

    fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "sap", "version": 1, "text": text } }),
        );
    }

    fn at(&mut self, method: &str, uri: &str, line: u32, character: u32) -> Value {
        self.request(method, json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } }))
    }

    fn stop(mut self) {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("the server did not exit");
    }
}

const URI: &str = "file:///tmp/sap-lsp-test/agent.sap";

const PROGRAM: &str = "\
/// What the model found.
struct Analysis {
    /// One sentence per bug.
    bugs: List<String>,
}

/// Finds bugs in `code`.
fn analyze_code(ctx: Context, code: String) -> Analysis {
    \"Analyze the following code\"!
    code!
}

fn main(ctx: Context) -> () {
    let source = \"fn div(a, b) = a / b\"
    let analysis = ctx.analyze_code(source)
    print(to_string(len(analysis.bugs)))
    let n: i32 = \"oops\"
    print(to_string(n))
}
";

#[test]
fn diagnostics_follow_edits() {
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(URI, PROGRAM);
    let diagnostics = client.diagnostics(URI, 1);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0]["code"], "E0103");
    assert_eq!(
        diagnostics[0]["range"]["start"],
        json!({ "line": 16, "character": 17 })
    );
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("expected `i32`, found `String`")
    );

    // Fix it with an incremental edit: `"oops"` → `5`.
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": { "uri": URI, "version": 2 },
            "contentChanges": [{ "range": { "start": { "line": 16, "character": 17 }, "end": { "line": 16, "character": 23 } }, "text": "5" }],
        }),
    );
    assert_eq!(client.diagnostics(URI, 2), Vec::<Value>::new());

    // Break the syntax with a full-text change; the error is located.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 3 }, "contentChanges": [{ "text": "fn f() -> i32 {\n    add(1, 2;\n}\n" }] }),
    );
    let diagnostics = client.diagnostics(URI, 3);
    assert_eq!(diagnostics[0]["code"], "E0001");
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .contains("expected `)` after the arguments of `add`")
    );
    client.stop();
}

#[test]
fn hover_definition_symbols() {
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(URI, PROGRAM);
    client.diagnostics(URI, 1);

    // Hover on `analyze_code` in `ctx.analyze_code(source)`: signature and doc.
    let hover = client.at("textDocument/hover", URI, 14, 25);
    let text = hover["contents"]["value"].as_str().unwrap();
    assert!(
        text.contains("fn analyze_code(ctx: Context, code: String) -> Analysis"),
        "{text}"
    );
    assert!(text.contains("Finds bugs in `code`."), "{text}");

    // Hover on a local: its type.
    let hover = client.at("textDocument/hover", URI, 15, 25);
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("analysis: Analysis"),
        "{hover}"
    );

    // Hover on a field: type and doc.
    let hover = client.at("textDocument/hover", URI, 15, 35);
    let text = hover["contents"]["value"].as_str().unwrap();
    assert!(
        text.contains("Analysis.bugs: List<String>") && text.contains("One sentence per bug."),
        "{text}"
    );

    // Definitions: a function, a local, a field, a type.
    let def = client.at("textDocument/definition", URI, 14, 25);
    assert_eq!(def["range"]["start"], json!({ "line": 7, "character": 3 }));
    let def = client.at("textDocument/definition", URI, 14, 36);
    assert_eq!(
        def["range"]["start"],
        json!({ "line": 13, "character": 8 }),
        "the local `source`"
    );
    let def = client.at("textDocument/definition", URI, 15, 35);
    assert_eq!(
        def["range"]["start"],
        json!({ "line": 3, "character": 4 }),
        "the field `bugs`"
    );
    let def = client.at("textDocument/definition", URI, 7, 50);
    assert_eq!(
        def["range"]["start"],
        json!({ "line": 1, "character": 7 }),
        "the struct `Analysis`"
    );

    let symbols = client.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": URI } }),
    );
    let names: Vec<&str> = symbols
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Analysis", "analyze_code", "main"]);
    assert_eq!(symbols[0]["children"][0]["name"], "bugs");
    client.stop();
}

#[test]
fn completion_and_signature_help() {
    let mut client = Client::start(json!({ "capabilities": {} }));
    let text = "\
struct Analysis { bugs: List<String> }
fn analyze_code(ctx: Context, code: String) -> Analysis { code! }
fn summarize(ctx: Context, a: Analysis) -> String { a! }
fn main(ctx: Context) -> () {
    let source = \"x\"
    let analysis = ctx.analyze_code(source)
    ctx.
}
";
    client.open(URI, text);
    client.diagnostics(URI, 1);

    // After `ctx.`: the functions that take a context first (Context methods).
    let items = client.at("textDocument/completion", URI, 6, 8)["items"].clone();
    let labels: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap())
        .collect();
    assert!(
        labels.contains(&"analyze_code") && labels.contains(&"summarize"),
        "{labels:?}"
    );
    assert!(!labels.contains(&"print"), "{labels:?}");

    // Typing a new statement: locals with their types, functions, keywords.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 2 }, "contentChanges": [{ "range": { "start": { "line": 6, "character": 4 }, "end": { "line": 6, "character": 8 } }, "text": "ana" }] }),
    );
    let items = client.at("textDocument/completion", URI, 6, 7)["items"].clone();
    let find = |label: &str| {
        items
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["label"] == label)
            .cloned()
    };
    assert_eq!(find("analysis").unwrap()["detail"], "Analysis");
    assert_eq!(find("source").unwrap()["detail"], "String");
    assert!(find("analyze_code").is_some());
    assert!(find("while").is_some());

    // A field after a struct value.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 3 }, "contentChanges": [{ "range": { "start": { "line": 6, "character": 4 }, "end": { "line": 6, "character": 7 } }, "text": "analysis." }] }),
    );
    let items = client.at("textDocument/completion", URI, 6, 13)["items"].clone();
    let bugs = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "bugs")
        .cloned()
        .unwrap();
    assert_eq!(bugs["detail"], "List<String>");

    // Signature help inside an unfinished call, with the placeholder marked.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 4 }, "contentChanges": [{ "range": { "start": { "line": 6, "character": 4 }, "end": { "line": 6, "character": 13 } }, "text": "analyze_code(ctx, _" }] }),
    );
    let help = client.at("textDocument/signatureHelp", URI, 6, 23);
    let signature = &help["signatures"][0];
    assert_eq!(
        signature["label"],
        "analyze_code(ctx: Context, code: String) -> Analysis"
    );
    assert_eq!(help["activeParameter"], 1);
    let note = signature["parameters"][1]["documentation"]["value"]
        .as_str()
        .unwrap();
    assert!(note.contains("filled by the model"), "{note}");
    client.stop();
}

#[test]
fn errors_do_not_stop_the_server_and_utf8_is_negotiated() {
    let mut client = Client::start(
        json!({ "capabilities": { "general": { "positionEncodings": ["utf-8", "utf-16"] } } }),
    );
    let response = client.request_raw("textDocument/hover", json!({ "textDocument": { "uri": "file:///not/open.sap" }, "position": { "line": 0, "character": 0 } }));
    assert_eq!(response["error"]["code"], -32602);
    let response = client.request_raw("workspace/frobnicate", json!({}));
    assert_eq!(response["error"]["code"], -32601);

    // UTF-8 columns: the error after `"日本語"` is at byte column 25, not UTF-16 column 19.
    client.open(URI, "fn f() -> i32 {\n    let s = \"日本語\"; s\n}\n");
    let diagnostics = client.diagnostics(URI, 1);
    assert_eq!(
        diagnostics[0]["range"]["start"],
        json!({ "line": 1, "character": 25 })
    );
    client.stop();
}

/// The prelude modules are there in the editor: no "unknown module", hover shows their
/// documentation, and go-to-definition declines (there is no file to open).
#[test]
fn the_prelude_is_known_to_the_editor() {
    let uri = "file:///tmp/sap-lsp-test/prelude_user.sap";
    let text = "use aot\n\nextern fn add(a: i64, b: i64) -> i64;\n\nfn main(ctx: Context) -> () {\n    print(to_string(aot::solve(ctx, \"1 + 2\", [add])))\n}\n";
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(uri, text);
    assert_eq!(client.diagnostics(uri, 1), Vec::<Value>::new());
    // `solve` in `aot::solve` on line 5.
    let hover = client.at("textDocument/hover", uri, 5, 26);
    let shown = hover["contents"]["value"].as_str().unwrap_or_default();
    assert!(
        shown.contains("fn solve(ctx: Context, request: String, tools: List<Tool>) -> Json"),
        "{hover}"
    );
    assert!(shown.contains("the model writes the plan"), "{shown}");
    let def = client.at("textDocument/definition", uri, 5, 26);
    assert_eq!(def, Value::Null);
    // Completion after `aot::` offers the module's functions.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [{ "text": "use aot\n\nfn main(ctx: Context) -> () {\n    aot::\n}\n" }] }),
    );
    let items = client.at("textDocument/completion", uri, 3, 9)["items"].clone();
    let labels: Vec<&str> = items
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["label"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        labels.contains(&"solve") && labels.contains(&"execute"),
        "{labels:?}"
    );
    assert!(
        !labels.contains(&"print"),
        "only the module's items: {labels:?}"
    );
    // After `Enum::`: its variants.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 3 }, "contentChanges": [{ "text": "enum Severity { Low, High }\n\nfn main(ctx: Context) -> () {\n    let s = Severity::\n}\n" }] }),
    );
    let items = client.at("textDocument/completion", uri, 3, 22)["items"].clone();
    let labels: Vec<&str> = items
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["label"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(labels, ["Low", "High"]);
    client.stop();
}

#[test]
fn untrusted_data_reaching_a_trusted_parameter_is_shown_in_the_editor() {
    let uri = "file:///tmp/sap-lsp-test/pay.sap";
    let text = "\
extern \"mcp:inbox\" fn read_mail(id: i64) -> String;
extern \"mcp:bank\" fn pay(trusted to: String, amount: f64) -> String;

fn main() {
    let text = read_mail(1)
    print(pay(text, 10.0));
}
";
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(uri, text);
    let diagnostics = client.diagnostics(uri, 1);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0]["code"], "E0134");
    assert_eq!(
        diagnostics[0]["range"]["start"],
        json!({ "line": 5, "character": 14 })
    );
    assert!(
        diagnostics[0]["message"].as_str().unwrap().starts_with(
            "untrusted data reaches `pay(to:)`: `inbox::read_mail` (line 5) → `pay(to:)` (line 6)\n"
        ),
        "{diagnostics:#?}"
    );
    // Declassified with a reason, it is accepted.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [{ "text": text.replace("pay(text,", "pay(trust(text, \"the user typed this address\"),") }] }),
    );
    assert_eq!(client.diagnostics(uri, 2), Vec::<Value>::new());
    client.stop();
}

#[test]
fn tests_have_diagnostics_and_a_run_test_lens() {
    let dir = test_support::Scratch::new("lsp-tests");
    let path = dir.join("calc.sap");
    let text = "\
fn answer(ctx: Context) -> i32 {
    \"A number\"!
}

test \"the answer is scripted\" {
    given answer(_) => 42
    assert answer(Context::new()) == 42
}

test \"a wrong script\" {
    given answer(_) => \"forty-two\"
}
";
    std::fs::write(&path, text).unwrap();
    let uri = format!("file://{}", path.display());
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(&uri, text);
    // The test's own diagnostics.
    let diagnostics = client.diagnostics(&uri, 1);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0]["code"], "E0103");
    assert_eq!(diagnostics[0]["range"]["start"]["line"], 10);
    // Hover and definition work inside a test's body: `answer` on line 6.
    let hover = client.at("textDocument/hover", &uri, 6, 12);
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("fn answer(ctx: Context) -> i32"),
        "{hover}"
    );
    let definition = client.at("textDocument/definition", &uri, 6, 12);
    assert_eq!(
        definition["range"]["start"],
        json!({ "line": 0, "character": 3 })
    );
    // A lens over each test.
    let lenses = client.request(
        "textDocument/codeLens",
        json!({ "textDocument": { "uri": uri } }),
    );
    let lenses = lenses.as_array().unwrap();
    assert_eq!(lenses.len(), 2, "{lenses:#?}");
    assert_eq!(
        lenses[0]["range"]["start"],
        json!({ "line": 4, "character": 0 })
    );
    assert_eq!(lenses[0]["command"]["command"], "sap.runTest");
    assert_eq!(
        lenses[0]["command"]["arguments"],
        json!([uri, "the answer is scripted"])
    );
    // Running it: the saved file without the broken test passes.
    std::fs::write(&path, &text[..text.find("test \"a wrong").unwrap()]).unwrap();
    let result = client.request("workspace/executeCommand", lenses[0]["command"].clone());
    assert_eq!(result["passed"], true, "{result}");
    assert!(
        result["report"]
            .as_str()
            .unwrap()
            .contains("1 passed, 0 failed"),
        "{result}"
    );
    let shown = client.wait_for(|m| m["method"] == "window/showMessage");
    assert_eq!(
        shown["params"]["message"],
        "test \"the answer is scripted\": passed"
    );
    client.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

impl Client {
    /// Writes raw bytes, framing and all.
    fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The exit status, within ten seconds.
    fn exit_status(mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("the server did not exit");
    }
}

#[test]
fn a_message_that_is_not_json_is_answered_and_the_server_goes_on() {
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.send_raw(b"Content-Length: 9\r\n\r\n{not json");
    let reply = client.wait_for(|m| m.get("error").is_some());
    assert_eq!(reply["error"]["code"], -32700);
    assert!(reply["id"].is_null(), "{reply}");
    client.send_raw(b"Content-Length: 2\r\n\r\n42");
    let reply = client.wait_for(|m| m.get("error").is_some());
    assert_eq!(reply["error"]["code"], -32600);
    // Still serving.
    let response = client.request_raw("workspace/frobnicate", json!({}));
    assert_eq!(response["error"]["code"], -32601);
    client.stop();
}

#[test]
fn leaving_without_shutdown_exits_with_1_and_a_runaway_length_ends_the_server() {
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.notify("exit", Value::Null);
    assert_eq!(client.exit_status(), Some(1));

    // A length of 100 GB: refused at once, not read (nor allocated).
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.send_raw(b"Content-Length: 99999999999\r\n\r\n{\"jsonrpc\"");
    assert_eq!(client.exit_status(), Some(1));
}

#[test]
fn exit_before_initialize_just_exits() {
    let mut child = spawn_server();
    let mut stdin = child.stdin.take().unwrap();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {} })
        .to_string();
    write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let body = json!({ "jsonrpc": "2.0", "method": "exit" }).to_string();
    write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    stdin.flush().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let refused = read_message(&mut reader).expect("an answer to the early request");
    assert_eq!(refused["error"]["code"], -32002);
    assert_eq!(child.wait().unwrap().code(), Some(1));
}

#[test]
fn an_edit_to_one_file_rechecks_the_open_files_that_use_it() {
    // A folder of its own, with nothing on disk: the two files exist only in the editor.
    let dir = test_support::Scratch::new("lsp-cross");
    let main_uri = format!("file://{}/main.sap", dir.display());
    let helpers_uri = format!("file://{}/helpers.sap", dir.display());
    let main = main_uri.as_str();
    let helpers = helpers_uri.as_str();
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(helpers, "fn greet() -> String { \"hi\" }\n");
    assert_eq!(client.diagnostics(helpers, 1), Vec::<Value>::new());
    client.open(
        main,
        "use helpers\n\nfn main() {\n    print(helpers::greet())\n}\n",
    );
    assert_eq!(client.diagnostics(main, 1), Vec::<Value>::new());
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": { "uri": helpers, "version": 2 },
            "contentChanges": [{ "text": "fn greet2() -> String { \"hi\" }\n" }],
        }),
    );
    let diagnostics = client.diagnostics(main, 1);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0]["range"]["start"]["line"], 3);
    client.stop();
}

#[test]
fn the_modules_beside_an_opened_file_are_known_without_a_workspace_folder() {
    let dir = test_support::Scratch::new("lsp-siblings");
    std::fs::write(dir.join("helpers.sap"), "fn greet() -> String { \"hi\" }\n").unwrap();
    let main = dir.join("main.sap");
    let text = "use helpers\n\nfn main() {\n    print(helpers::greet())\n}\n";
    std::fs::write(&main, text).unwrap();
    let uri = format!("file://{}", main.display());
    let mut client = Client::start(json!({ "capabilities": {} }));
    client.open(&uri, text);
    assert_eq!(client.diagnostics(&uri, 1), Vec::<Value>::new());
    let definition = client.at("textDocument/definition", &uri, 3, 20);
    assert!(
        definition["uri"].as_str().unwrap().ends_with("helpers.sap"),
        "{definition}"
    );
    client.stop();
}
