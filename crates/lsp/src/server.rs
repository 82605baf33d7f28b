//! The server loop. One thread owns the database (salsa's single writer) and handles
//! every message; diagnostics are computed on worker threads from database clones.
//!
//! An edit updates the file's text, which cancels any worker still computing from the old
//! text (salsa unwinds it), and schedules diagnostics after a short quiet period, so a
//! burst of keystrokes is checked once. Results for a version that is no longer current
//! are dropped. A request that panics answers with an error and the server goes on.

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};
use hir::{Database, SourceFile};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use serde_json::{Value as JsonValue, json};

use crate::convert::{self, Encoding, Text};
use crate::ide;

/// Quiet time after an edit before its diagnostics are computed.
const DEBOUNCE: Duration = Duration::from_millis(8);

/// At most this many `.sap` files are loaded from the workspace folders at start.
const MAX_WORKSPACE_FILES: usize = 2000;

struct Document {
    file: SourceFile,
    text: Text,
    version: i32,
}

struct Published {
    uri: String,
    version: i32,
    diagnostics: Vec<JsonValue>,
}

pub struct Server {
    sender: Sender<Message>,
    db: Database,
    encoding: Encoding,
    /// Open documents, by URI.
    documents: HashMap<String, Document>,
    /// Workspace files that are not open, by URI.
    on_disk: HashMap<String, SourceFile>,
    /// The folders whose `.sap` files are in the database (see `load_folder`).
    folders: HashSet<PathBuf>,
    /// Diagnostics due, by URI.
    due: HashMap<String, Instant>,
    results: (Sender<Published>, Receiver<Published>),
    /// The file completions are checked in (outside the workspace).
    scratch: SourceFile,
    shutting_down: bool,
}

pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let mut bytes = Vec::new();
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        // `get`: a `%` before a multi-byte character is not an escape (and not a panic).
        if raw[i] == b'%'
            && let Some(hex) = rest.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            bytes.push(b);
            i += 3;
            continue;
        }
        bytes.push(raw[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
}

pub fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn collect_sap_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if out.len() >= MAX_WORKSPACE_FILES {
            return;
        }
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            collect_sap_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "sap") {
            out.push(path);
        }
    }
}

impl Server {
    pub fn new(sender: Sender<Message>, encoding: Encoding, roots: &[PathBuf]) -> Server {
        let mut db = Database::default();
        db.add_prelude();
        let mut on_disk = HashMap::new();
        let mut files = Vec::new();
        for root in roots {
            collect_sap_files(root, &mut files);
        }
        for path in files {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let file = db.add_file(path.display().to_string(), text);
                on_disk.insert(path_to_uri(&path), file);
            }
        }
        let scratch =
            hir::SourceFile::new(&db, "<completion>/completion.sap".to_owned(), String::new());
        Server {
            sender,
            db,
            encoding,
            documents: HashMap::new(),
            on_disk,
            folders: HashSet::new(),
            due: HashMap::new(),
            results: crossbeam_channel::unbounded(),
            scratch,
            shutting_down: false,
        }
    }

    /// Serves until `exit` or the end of the input; whether `shutdown` came first.
    pub fn main_loop(&mut self, receiver: &Receiver<Message>) -> bool {
        loop {
            let wait = self
                .due
                .values()
                .min()
                .map_or(Duration::from_secs(3600), |t| {
                    t.saturating_duration_since(Instant::now())
                });
            let results = self.results.1.clone();
            select! {
                recv(receiver) -> message => match message {
                    Ok(Message::Request(request)) => {
                        if request.method == "shutdown" {
                            self.shutting_down = true;
                            self.reply(Response::new_ok(request.id, JsonValue::Null));
                        } else {
                            self.handle_request(request);
                        }
                    }
                    Ok(Message::Notification(n)) => {
                        if n.method == "exit" {
                            return self.shutting_down;
                        }
                        self.handle_notification(n);
                    }
                    Ok(Message::Response(_)) => {}
                    Err(_) => return self.shutting_down,
                },
                recv(results) -> result => {
                    if let Ok(result) = result {
                        self.publish(result);
                    }
                },
                default(wait) => {}
            }
            self.start_due_checks();
        }
    }

    fn reply(&self, response: Response) {
        let _ = self.sender.send(Message::Response(response));
    }

    fn notify(&self, method: &str, params: JsonValue) {
        let _ = self.sender.send(Message::Notification(Notification::new(
            method.to_owned(),
            params,
        )));
    }

    // ------------------------------------------------------------ documents

    fn handle_notification(&mut self, n: Notification) {
        let params = n.params;
        let uri = params
            .pointer("/textDocument/uri")
            .and_then(JsonValue::as_str)
            .unwrap_or("")
            .to_owned();
        match n.method.as_str() {
            "textDocument/didOpen" => {
                let text = params
                    .pointer("/textDocument/text")
                    .and_then(JsonValue::as_str)
                    .unwrap_or("")
                    .to_owned();
                let version = params
                    .pointer("/textDocument/version")
                    .and_then(JsonValue::as_i64)
                    .unwrap_or(0) as i32;
                // The modules beside it, as `sapc run` and `sapc check` of its folder
                // see them, when no workspace folder brought them in.
                if let Some(dir) = uri_to_path(&uri).and_then(|p| p.parent().map(Path::to_path_buf))
                {
                    self.load_folder(&dir);
                }
                // The file as loaded from disk, under whichever spelling of its URI.
                let on_disk = uri_to_path(&uri).and_then(|path| {
                    self.on_disk
                        .keys()
                        .find(|u| uri_to_path(u).as_deref() == Some(path.as_path()))
                        .cloned()
                });
                let file = match on_disk.and_then(|u| self.on_disk.remove(&u)) {
                    Some(file) => {
                        self.db.set_text(file, text.clone());
                        file
                    }
                    None => {
                        let path = uri_to_path(&uri)
                            .map_or_else(|| uri.clone(), |p| p.display().to_string());
                        self.db.add_file(path, text.clone())
                    }
                };
                self.documents.insert(
                    uri.clone(),
                    Document {
                        file,
                        text: Text::new(text),
                        version,
                    },
                );
                self.due.insert(uri, Instant::now());
                self.recheck_others();
            }
            "textDocument/didChange" => {
                let encoding = self.encoding;
                let Some(doc) = self.documents.get_mut(&uri) else {
                    return;
                };
                let mut text = std::mem::take(&mut doc.text.text);
                for change in params
                    .get("contentChanges")
                    .and_then(JsonValue::as_array)
                    .into_iter()
                    .flatten()
                {
                    let new_text = change.get("text").and_then(JsonValue::as_str).unwrap_or("");
                    match change.get("range") {
                        Some(range) => {
                            let current = Text::new(text);
                            let at = |p: &str| {
                                let line = range
                                    .pointer(&format!("/{p}/line"))
                                    .and_then(JsonValue::as_u64)
                                    .unwrap_or(0) as u32;
                                let ch = range
                                    .pointer(&format!("/{p}/character"))
                                    .and_then(JsonValue::as_u64)
                                    .unwrap_or(0) as u32;
                                current.offset(line, ch, encoding)
                            };
                            let (start, end) = (at("start"), at("end"));
                            let (start, end) = (start.min(end), start.max(end));
                            text = current.text;
                            text.replace_range(start..end, new_text);
                        }
                        None => text = new_text.to_owned(),
                    }
                }
                doc.version = params
                    .pointer("/textDocument/version")
                    .and_then(JsonValue::as_i64)
                    .unwrap_or(doc.version as i64 + 1) as i32;
                doc.text = Text::new(text.clone());
                let file = doc.file;
                // Cancels workers still checking the old text.
                self.db.set_text(file, text);
                self.due.insert(uri, Instant::now() + DEBOUNCE);
                self.recheck_others();
            }
            "textDocument/didClose" => {
                if let Some(doc) = self.documents.remove(&uri) {
                    // The file stays part of the workspace, as it is on disk.
                    if let Some(path) = uri_to_path(&uri)
                        && let Ok(text) = std::fs::read_to_string(path)
                    {
                        self.db.set_text(doc.file, text);
                    }
                    self.on_disk.insert(uri.clone(), doc.file);
                    self.due.remove(&uri);
                    self.notify(
                        "textDocument/publishDiagnostics",
                        json!({ "uri": uri, "diagnostics": [] }),
                    );
                }
            }
            _ => {}
        }
    }

    /// Adds the `.sap` files of `dir` (not its subfolders) that the database does not
    /// have yet, once per folder.
    fn load_folder(&mut self, dir: &Path) {
        if !self.folders.insert(dir.to_path_buf()) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let sap_files = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "sap") && p.is_file());
        for path in sap_files.take(MAX_WORKSPACE_FILES) {
            // An open document may spell its URI otherwise (an editor leaves `+` or `@`
            // unescaped): it is the same file.
            let uri = path_to_uri(&path);
            let known = |u: &String| uri_to_path(u).as_deref() == Some(path.as_path());
            if self.on_disk.keys().any(known) || self.documents.keys().any(known) {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(&path) {
                let file = self.db.add_file(path.display().to_string(), text);
                self.on_disk.insert(uri, file);
            }
        }
    }

    /// Schedules a check of every open document: an edit to one file can make errors
    /// appear or go in the files that use it.
    fn recheck_others(&mut self) {
        let at = Instant::now() + DEBOUNCE;
        for uri in self.documents.keys() {
            self.due.entry(uri.clone()).or_insert(at);
        }
    }

    /// Starts a worker for every document whose diagnostics are due.
    fn start_due_checks(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .due
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(u, _)| u.clone())
            .collect();
        for uri in due {
            self.due.remove(&uri);
            let Some(doc) = self.documents.get(&uri) else {
                continue;
            };
            let snapshot = self.db.clone();
            let (file, text, version, encoding) =
                (doc.file, doc.text.clone(), doc.version, self.encoding);
            let sender = self.results.0.clone();
            // Parsing deeply nested text recurses: a worker gets a stack to match.
            let worker = std::thread::Builder::new().stack_size(16 << 20);
            let _ = worker.spawn(move || {
                let computed = salsa::Cancelled::catch(AssertUnwindSafe(|| {
                    hir::check_file(&snapshot, file)
                        .iter()
                        .map(|d| convert::diagnostic(&text, &uri, d, encoding))
                        .collect::<Vec<_>>()
                }));
                drop(snapshot);
                // Cancelled: a newer edit has scheduled its own check.
                if let Ok(diagnostics) = computed {
                    let _ = sender.send(Published {
                        uri,
                        version,
                        diagnostics,
                    });
                }
            });
        }
    }

    fn publish(&self, result: Published) {
        let current = self.documents.get(&result.uri).map(|d| d.version);
        if current != Some(result.version) {
            return;
        }
        self.notify(
            "textDocument/publishDiagnostics",
            json!({ "uri": result.uri, "version": result.version, "diagnostics": result.diagnostics }),
        );
    }

    // ------------------------------------------------------------ requests

    fn handle_request(&mut self, request: Request) {
        let id = request.id.clone();
        if self.shutting_down {
            self.reply(Response::new_err(
                id,
                ErrorCode::InvalidRequest as i32,
                "the server is shutting down".to_owned(),
            ));
            return;
        }
        if request.method == "workspace/executeCommand" {
            // A command replies when it has finished, from a thread of its own.
            if let Err((code, message)) = self.execute_command(&request) {
                self.reply(Response::new_err(id, code as i32, message));
            }
            return;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| self.answer(&request)));
        let response = match outcome {
            Ok(Ok(result)) => Response::new_ok(id, result),
            Ok(Err((code, message))) => Response::new_err(id, code as i32, message),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "unknown".to_owned());
                Response::new_err(
                    id,
                    ErrorCode::InternalError as i32,
                    format!("internal error in `{}`: {what}", request.method),
                )
            }
        };
        self.reply(response);
    }

    /// The open document a request names.
    fn document(&self, params: &JsonValue) -> Result<&Document, (ErrorCode, String)> {
        let uri = params
            .pointer("/textDocument/uri")
            .and_then(JsonValue::as_str)
            .unwrap_or("");
        self.documents.get(uri).ok_or_else(|| {
            (
                ErrorCode::InvalidParams,
                format!("the document {uri} is not open"),
            )
        })
    }

    /// The document and byte offset a position request points at.
    fn position(&self, params: &JsonValue) -> Result<(&Document, usize), (ErrorCode, String)> {
        let doc = self.document(params)?;
        let line = params
            .pointer("/position/line")
            .and_then(JsonValue::as_u64)
            .unwrap_or(0) as u32;
        let character = params
            .pointer("/position/character")
            .and_then(JsonValue::as_u64)
            .unwrap_or(0) as u32;
        Ok((doc, doc.text.offset(line, character, self.encoding)))
    }

    fn location(&self, location: &ide::Location) -> JsonValue {
        let uri_and_text = self
            .documents
            .iter()
            .find(|(_, d)| d.file == location.file)
            .map(|(u, d)| (u.clone(), d.text.clone()))
            .unwrap_or_else(|| {
                let path = location.file.path(&self.db).clone();
                (
                    path_to_uri(Path::new(&path)),
                    Text::new(location.file.text(&self.db).clone()),
                )
            });
        json!({ "uri": uri_and_text.0, "range": uri_and_text.1.range(location.span.start, location.span.end, self.encoding) })
    }

    fn answer(&mut self, request: &Request) -> Result<JsonValue, (ErrorCode, String)> {
        let params = &request.params;
        match request.method.as_str() {
            "textDocument/hover" => {
                let (doc, offset) = self.position(params)?;
                Ok(match ide::hover(&self.db, doc.file, offset as u32) {
                    Some(h) => json!({
                        "contents": { "kind": "markdown", "value": h.markdown },
                        "range": doc.text.range(h.span.start, h.span.end, self.encoding),
                    }),
                    None => JsonValue::Null,
                })
            }
            "textDocument/definition" => {
                let (doc, offset) = self.position(params)?;
                Ok(match ide::definition(&self.db, doc.file, offset as u32) {
                    // The prelude ships inside the compiler: there is no file to open
                    // (hover shows its documentation).
                    Some(location) if location.file.is_prelude(&self.db) => JsonValue::Null,
                    Some(location) => self.location(&location),
                    None => JsonValue::Null,
                })
            }
            "textDocument/completion" => {
                let (doc, offset) = self.position(params)?;
                let text = doc.text.text.clone();
                let scratch = self.scratch;
                let items = ide::completions(&mut self.db, scratch, &text, offset);
                let items: Vec<JsonValue> = items
                    .into_iter()
                    .map(|c| {
                        let kind = match c.kind {
                            ide::CompletionKind::Function => 3,
                            ide::CompletionKind::Variable => 6,
                            ide::CompletionKind::Field => 5,
                            ide::CompletionKind::Keyword => 14,
                            ide::CompletionKind::Struct => 22,
                            ide::CompletionKind::Enum => 13,
                            ide::CompletionKind::Snippet => 15,
                        };
                        let mut item = json!({ "label": c.label, "kind": kind });
                        if let Some(detail) = c.detail {
                            item["detail"] = json!(detail);
                        }
                        if let Some(doc) = c.documentation {
                            item["documentation"] = json!({ "kind": "markdown", "value": doc });
                        }
                        item
                    })
                    .collect();
                Ok(json!({ "isIncomplete": false, "items": items }))
            }
            "textDocument/documentSymbol" => {
                let doc = self.document(params)?;
                let symbols = ide::document_symbols(&self.db, doc.file);
                Ok(JsonValue::Array(
                    symbols.iter().map(|s| self.symbol(&doc.text, s)).collect(),
                ))
            }
            "textDocument/codeLens" => {
                let doc = self.document(params)?;
                let uri = params
                    .pointer("/textDocument/uri")
                    .and_then(JsonValue::as_str)
                    .unwrap_or("")
                    .to_owned();
                let lenses: Vec<JsonValue> = ide::tests(&self.db, doc.file)
                    .into_iter()
                    .map(|t| {
                        json!({
                            "range": doc.text.range(t.span.start, t.span.end, self.encoding),
                            "command": {
                                "title": "▶ run test",
                                "command": RUN_TEST,
                                "arguments": [uri, t.name],
                            },
                        })
                    })
                    .collect();
                Ok(JsonValue::Array(lenses))
            }
            "textDocument/signatureHelp" => {
                let (doc, offset) = self.position(params)?;
                Ok(
                    match ide::signature_help(&self.db, doc.file, &doc.text.text, offset) {
                        Some(help) => {
                            let parameters: Vec<JsonValue> = help
                                .parameters
                                .iter()
                                .map(|((start, end), doc)| {
                                    let label = &help.label[*start as usize..*end as usize];
                                    let mut p = json!({ "label": label });
                                    if let Some(doc) = doc {
                                        p["documentation"] =
                                            json!({ "kind": "markdown", "value": doc });
                                    }
                                    p
                                })
                                .collect();
                            let mut signature =
                                json!({ "label": help.label, "parameters": parameters });
                            if let Some(doc) = help.documentation {
                                signature["documentation"] =
                                    json!({ "kind": "markdown", "value": doc });
                            }
                            json!({ "signatures": [signature], "activeSignature": 0, "activeParameter": help.active_parameter })
                        }
                        None => JsonValue::Null,
                    },
                )
            }
            method => Err((
                ErrorCode::MethodNotFound,
                format!("the sap server does not handle `{method}`"),
            )),
        }
    }

    /// `sap.runTest URI NAME`: runs `sapc test` on the file, filtered to the test, on a
    /// thread of its own; the reply (and a message) comes when it has finished. The
    /// saved file is tested, as the command line would.
    fn execute_command(&mut self, request: &Request) -> Result<(), (ErrorCode, String)> {
        let params = &request.params;
        let command = params
            .pointer("/command")
            .and_then(JsonValue::as_str)
            .unwrap_or("");
        if command != RUN_TEST {
            return Err((
                ErrorCode::InvalidParams,
                format!("the sap server has no command `{command}`"),
            ));
        }
        let arg = |i: usize| {
            params
                .pointer(&format!("/arguments/{i}"))
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
        };
        let (Some(uri), Some(name)) = (arg(0), arg(1)) else {
            return Err((
                ErrorCode::InvalidParams,
                format!("`{RUN_TEST}` takes the document's URI and the test's name"),
            ));
        };
        let path = uri_to_path(&uri).ok_or_else(|| {
            (
                ErrorCode::InvalidParams,
                format!("`{uri}` is not a file URI"),
            )
        })?;
        let exe = std::env::current_exe().map_err(|e| (ErrorCode::InternalError, e.to_string()))?;
        let sender = self.sender.clone();
        let id = request.id.clone();
        std::thread::spawn(move || {
            let output = std::process::Command::new(exe)
                .arg("test")
                .arg(&path)
                .arg(format!("--filter={name}"))
                .arg("--exact")
                .env("NO_COLOR", "1")
                .output();
            let (passed, report) = match output {
                Ok(o) => (
                    o.status.success(),
                    String::from_utf8_lossy(&o.stdout).into_owned()
                        + &String::from_utf8_lossy(&o.stderr),
                ),
                Err(e) => (false, format!("cannot run `sapc test`: {e}")),
            };
            let summary = report.lines().last().unwrap_or("").to_owned();
            let message = format!(
                "test \"{name}\": {}",
                if passed {
                    "passed".to_owned()
                } else {
                    format!("failed ({summary})")
                }
            );
            let _ = sender.send(Message::Response(Response::new_ok(
                id,
                json!({ "passed": passed, "report": report }),
            )));
            let _ = sender.send(Message::Notification(Notification::new(
                "window/showMessage".to_owned(),
                json!({ "type": if passed { 3 } else { 1 }, "message": message }),
            )));
        });
        Ok(())
    }

    fn symbol(&self, text: &Text, s: &ide::Symbol) -> JsonValue {
        let kind = match s.kind {
            ide::SymbolKind::Function => 12,
            ide::SymbolKind::Struct => 23,
            ide::SymbolKind::Field => 8,
            ide::SymbolKind::Enum => 10,
            ide::SymbolKind::Variant => 22,
            ide::SymbolKind::TypeAlias => 26,
            ide::SymbolKind::Module => 2,
        };
        let mut out = json!({
            "name": s.name,
            "kind": kind,
            "range": text.range(s.span.start, s.span.end, self.encoding),
            "selectionRange": text.range(s.selection.start, s.selection.end, self.encoding),
            "children": s.children.iter().map(|c| self.symbol(text, c)).collect::<Vec<_>>(),
        });
        if let Some(detail) = &s.detail {
            out["detail"] = json!(detail);
        }
        out
    }
}

/// The command of the "run test" code lens: `sapc test FILE --filter NAME`, run by the
/// server, its result shown as a message.
pub const RUN_TEST: &str = "sap.runTest";

/// The capabilities this server offers, in the negotiated position encoding.
pub fn capabilities(encoding: Encoding) -> JsonValue {
    json!({
        "positionEncoding": match encoding { Encoding::Utf8 => "utf-8", Encoding::Utf16 => "utf-16" },
        "textDocumentSync": { "openClose": true, "change": 2 },
        "hoverProvider": true,
        "definitionProvider": true,
        "completionProvider": { "triggerCharacters": [".", ":"] },
        "documentSymbolProvider": true,
        "codeLensProvider": { "resolveProvider": false },
        "executeCommandProvider": { "commands": [RUN_TEST] },
        "signatureHelpProvider": { "triggerCharacters": ["(", ","], "retriggerCharacters": [","] },
    })
}

/// Runs the server on a connection until `exit` or the end of its input; whether the
/// client asked for `shutdown` first (LSP: the process then exits with 0, else 1).
pub fn run(connection: Connection) -> Result<bool, String> {
    // Before `initialize`: a request is refused as the protocol says, `exit` exits.
    let (id, params): (RequestId, JsonValue) = loop {
        match connection.receiver.recv() {
            Ok(Message::Request(r)) if r.method == "initialize" => break (r.id, r.params),
            Ok(Message::Request(r)) => {
                let refused = Response::new_err(
                    r.id,
                    ErrorCode::ServerNotInitialized as i32,
                    format!("`{}` before `initialize`", r.method),
                );
                connection
                    .sender
                    .send(refused.into())
                    .map_err(|e| e.to_string())?;
            }
            Ok(Message::Notification(n)) if n.method == "exit" => return Ok(false),
            Ok(_) => {}
            Err(_) => return Ok(false),
        }
    };
    let offered: Vec<&str> = params
        .pointer("/capabilities/general/positionEncodings")
        .and_then(JsonValue::as_array)
        .map(|a| a.iter().filter_map(JsonValue::as_str).collect())
        .unwrap_or_default();
    let encoding = if offered.contains(&"utf-8") {
        Encoding::Utf8
    } else {
        Encoding::Utf16
    };
    let mut roots: Vec<PathBuf> = params
        .get("workspaceFolders")
        .and_then(JsonValue::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.get("uri").and_then(JsonValue::as_str))
                .filter_map(uri_to_path)
                .collect()
        })
        .unwrap_or_default();
    if roots.is_empty()
        && let Some(root) = params
            .get("rootUri")
            .and_then(JsonValue::as_str)
            .and_then(uri_to_path)
    {
        roots.push(root);
    }
    let result = json!({
        "capabilities": capabilities(encoding),
        "serverInfo": { "name": "sapc lsp", "version": env!("CARGO_PKG_VERSION") },
    });
    // The answer; what comes next (`initialized`, or a request sent before it) is the
    // main loop's.
    connection
        .sender
        .send(Response::new_ok(id, result).into())
        .map_err(|e| e.to_string())?;
    let mut server = Server::new(connection.sender.clone(), encoding, &roots);
    Ok(server.main_loop(&connection.receiver))
}
