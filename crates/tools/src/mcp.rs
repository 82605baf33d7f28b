//! The MCP client: one connection per server of `sap.toml`, opened on the first call,
//! over stdio (a child process) or streamable HTTP, on the official SDK (`rmcp`).
//!
//! A server that has exited is started again once; a call has a time-out (reset by the
//! server's progress notifications, up to ten times the time-out in all) and is cancelled
//! when it ends; the tools the program declares are compared with `sap.lock` on connect.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, Implementation, ProtocolVersion, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Deserialize;
use serde_json::{Map, Value as JsonValue, json};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use super::lock::{LockedTool, ToolLock};
use runtime::trace::TraceSink;

/// How long a call may go without an answer or a progress notification, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to start and answer the handshake, by default (`npx -y`
/// installs a package on its first start).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How much of a stdio server's standard error is kept, for the error when it fails.
const STDERR_TAIL: usize = 2_000;

/// One `[mcp.NAME]` table of `sap.toml`: a command to start (stdio) or a URL (HTTP).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The working directory of the command (relative to `sap.toml`; default: its folder).
    pub cwd: Option<PathBuf>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub timeout_seconds: Option<f64>,
    pub startup_timeout_seconds: Option<f64>,
}

impl ServerConfig {
    pub fn timeout(&self) -> Duration {
        self.timeout_seconds
            .map(|s| Duration::from_secs_f64(s.max(0.001)))
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    fn startup_timeout(&self) -> Duration {
        self.startup_timeout_seconds
            .map(|s| Duration::from_secs_f64(s.max(0.001)))
            .unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    /// Whether the table names exactly one way to reach the server.
    pub fn validate(&self, name: &str) -> Result<(), String> {
        match (&self.command, &self.url) {
            (Some(_), None) | (None, Some(_)) => Ok(()),
            (Some(_), Some(_)) => Err(format!(
                "[mcp.{name}] has both `command` and `url`: give one (a command for stdio, a URL for streamable HTTP)"
            )),
            (None, None) => Err(format!(
                "[mcp.{name}] has neither `command` nor `url`: give a command to start (stdio) or the server's URL (streamable HTTP)"
            )),
        }
    }
}

/// Replaces each `${VAR}` in `text` with the environment variable's value.
pub fn expand_env(text: &str, table: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("[mcp.{table}]: `${{` without a closing `}}` in `{text}`"))?;
        let var = &after[..end];
        let value = std::env::var(var)
            .map_err(|_| format!("[mcp.{table}] uses `${{{var}}}`, which is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A running connection and the tools the server listed.
struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    tools: HashMap<String, Tool>,
    noise: Noise,
    /// A stdio server's process, killed when the connection is dropped.
    _child: Option<tokio::process::Child>,
}

/// What a stdio server wrote besides its answers, for the error when it fails: the tail
/// of its standard error, and the first line of its standard output that is not JSON
/// (the SDK skips such lines, so without this a server that writes them would only be
/// "no answer").
#[derive(Clone, Default)]
struct Noise {
    stderr: Arc<Mutex<String>>,
    not_json: Arc<Mutex<Option<String>>>,
}

impl Noise {
    /// `; it wrote …` for an error message, or nothing.
    fn note(&self) -> String {
        let mut note = String::new();
        if let Some(line) = &*self.not_json.lock().unwrap_or_else(|e| e.into_inner()) {
            note.push_str(&format!(
                "; it wrote a line that is not JSON-RPC (an MCP server over stdio must write only JSON messages to its standard output, logs go to standard error): `{line}`"
            ));
        }
        note.push_str(&stderr_note(&self.stderr));
        note
    }
}

/// A stdio server's standard output as the SDK reads it, watched for lines that are
/// not JSON.
struct Watched<R> {
    inner: R,
    line: Vec<u8>,
    /// The line being read is longer than what is kept to check it.
    long: bool,
    not_json: Arc<Mutex<Option<String>>>,
}

/// The longest line checked (a longer one is taken to be a message).
const WATCHED_LINE: usize = 1 << 20;

impl<R> Watched<R> {
    fn scan(&mut self, bytes: &[u8]) {
        for chunk in bytes.split_inclusive(|&b| b == b'\n') {
            let (text, ends) = match chunk.strip_suffix(b"\n") {
                Some(text) => (text, true),
                None => (chunk, false),
            };
            if !self.long {
                if self.line.len() + text.len() > WATCHED_LINE {
                    self.long = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(text);
                }
            }
            if ends {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        let line = self.line.trim_ascii();
        if !self.long
            && !line.is_empty()
            && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err()
        {
            let mut found = self.not_json.lock().unwrap_or_else(|e| e.into_inner());
            if found.is_none() {
                let text = String::from_utf8_lossy(line);
                *found = Some(match text.char_indices().nth(200) {
                    Some((cut, _)) => format!("{}…", &text[..cut]),
                    None => text.into_owned(),
                });
            }
        }
        self.line.clear();
        self.long = false;
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut this.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            this.scan(&buf.filled()[before..]);
        }
        polled
    }
}

#[derive(Default)]
struct State {
    connection: Option<Arc<Connection>>,
    starts: u32,
    /// Set once the declared tools have been compared with the live ones.
    checked: bool,
}

/// An MCP server of `sap.toml`, connected lazily.
pub struct McpServer {
    name: String,
    config: ServerConfig,
    /// The folder of `sap.toml`: where a command starts.
    dir: PathBuf,
    /// The tools the program declares, with what `sap.lock` recorded of them (if it did).
    declared: BTreeMap<String, Option<LockedTool>>,
    state: tokio::sync::Mutex<State>,
    trace: Option<TraceSink>,
}

impl McpServer {
    pub fn new(name: &str, config: ServerConfig, dir: &Path) -> McpServer {
        McpServer {
            name: name.to_owned(),
            config,
            dir: dir.to_owned(),
            declared: BTreeMap::new(),
            state: tokio::sync::Mutex::new(State::default()),
            trace: None,
        }
    }

    /// The tools the program uses, checked against `lock` on the first connection.
    pub fn expecting(mut self, tools: impl IntoIterator<Item = String>, lock: &ToolLock) -> Self {
        for tool in tools {
            let locked = lock.tool(&self.name, &tool).cloned();
            self.declared.insert(tool, locked);
        }
        self
    }

    pub fn with_trace(mut self, trace: Option<TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connects (if not yet) and lists the server's tools, in the server's order.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, String> {
        let connection = self.connection().await?;
        connection
            .service
            .list_all_tools()
            .await
            .map_err(|e| self.error(None, &e, &connection))
    }

    /// Which protocol version the server agreed to.
    pub async fn protocol_version(&self) -> Result<String, String> {
        let connection = self.connection().await?;
        Ok(connection
            .service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default())
    }

    /// Calls `tool` with `arguments`. `deadline` (a budget's end) shortens the time-out.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, JsonValue>,
        deadline: Option<Instant>,
    ) -> Result<CallToolResult, String> {
        let started = Instant::now();
        let connection = self.connection().await?;
        let mut timeout = self.config.timeout();
        let mut total = timeout * 10;
        // Whether the run's time budget, not the server's time-out, bounds the call.
        let mut budget_bound = false;
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(started);
            if left.is_zero() {
                return Err(format!(
                    "the time budget ran out before the call to `{tool}` on MCP server `{}`",
                    self.name
                ));
            }
            budget_bound = left < total;
            timeout = timeout.min(left);
            total = total.min(left);
        }
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments.clone());
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        options.reset_timeout_on_progress = true;
        options.max_total_timeout = Some(total);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let answer = match connection
            .service
            .send_request_with_option(request, options)
            .await
        {
            Ok(handle) => {
                // Dropped before the answer (the run was cancelled), the call is
                // cancelled on the server too.
                let mut guard = CancelOnDrop(Some((handle.peer.clone(), handle.id.clone())));
                let answer = handle.await_response().await;
                guard.0 = None;
                answer
            }
            Err(e) => Err(e),
        };
        let elapsed = started.elapsed();
        let outcome = match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(ServerResult::InputRequiredResult(_)) => Err(format!(
                "MCP server `{}` asked for more input during `{tool}`, which sap does not give",
                self.name
            )),
            Ok(_) => Err(format!(
                "MCP server `{}` answered the call to `{tool}` with something other than a tool result",
                self.name
            )),
            Err(ServiceError::Timeout { timeout }) if budget_bound && timeout == total => {
                Err(format!(
                    "MCP server `{}`, tool `{tool}`: the run's time budget (--max-time) ended during the call; it was cancelled",
                    self.name
                ))
            }
            Err(e) => Err(self.error(Some(tool), &e, &connection)),
        };
        if let Some(trace) = &self.trace {
            let mut event = json!({
                "event": "tool",
                "server": format!("mcp:{}", self.name),
                "tool": tool,
                "arguments": JsonValue::Object(arguments),
                "ms": elapsed.as_secs_f64() * 1000.0,
            });
            match &outcome {
                Ok(result) => {
                    event["result_bytes"] =
                        json!(serde_json::to_string(result).map(|s| s.len()).unwrap_or(0));
                    if result.is_error == Some(true) {
                        event["is_error"] = json!(true);
                    }
                }
                Err(e) => event["error"] = json!(e),
            }
            trace.record(&event);
        }
        outcome
    }

    /// The live connection: opened on the first call, opened again once after the
    /// server exits.
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut state = self.state.lock().await;
        if let Some(c) = &state.connection {
            if !c.service.is_transport_closed() {
                return Ok(c.clone());
            }
            if state.starts >= 2 {
                return Err(format!(
                    "MCP server `{}` exited again after it was restarted once{}",
                    self.name,
                    c.noise.note()
                ));
            }
            if let Some(trace) = &self.trace {
                trace.record(&json!({"event": "tool_server_restart", "server": format!("mcp:{}", self.name)}));
            }
        }
        state.connection = None;
        state.starts += 1;
        let startup = self.config.startup_timeout();
        let noise = Noise::default();
        let connection = match tokio::time::timeout(startup, self.connect(&noise)).await {
            Ok(result) => Arc::new(result?),
            Err(_) => {
                return Err(format!(
                    "MCP server `{}` did not finish its start-up handshake in {} s{}",
                    self.name,
                    startup.as_secs_f64(),
                    noise.note()
                ));
            }
        };
        if !state.checked {
            self.check_declared(&connection.tools)?;
            state.checked = true;
        }
        state.connection = Some(connection.clone());
        Ok(connection)
    }

    async fn connect(&self, noise: &Noise) -> Result<Connection, String> {
        self.config.validate(&self.name)?;
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("sap", env!("CARGO_PKG_VERSION")),
        );
        let mut child = None;
        let service = if let Some(command) = &self.config.command {
            let mut cmd = tokio::process::Command::new(expand_env(command, &self.name)?);
            for arg in &self.config.args {
                cmd.arg(expand_env(arg, &self.name)?);
            }
            for (k, v) in &self.config.env {
                cmd.env(k, expand_env(v, &self.name)?);
            }
            cmd.current_dir(match &self.config.cwd {
                Some(cwd) => self.dir.join(cwd),
                None => self.dir.clone(),
            });
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true);
            let mut process = cmd.spawn().map_err(|e| {
                format!("cannot start MCP server `{}` (`{command}`): {e}", self.name)
            })?;
            let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
                return Err(format!(
                    "cannot start MCP server `{}` (`{command}`): no pipes to it",
                    self.name
                ));
            };
            let transport = (
                Watched {
                    inner: stdout,
                    line: Vec::new(),
                    long: false,
                    not_json: noise.not_json.clone(),
                },
                stdin,
            );
            let mut reader = None;
            if let Some(mut pipe) = process.stderr.take() {
                let tail = noise.stderr.clone();
                reader = Some(tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = pipe.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                        t.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if t.len() > STDERR_TAIL * 2 {
                            let cut = t.len() - STDERR_TAIL;
                            let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                            t.replace_range(..cut, "");
                        }
                    }
                }));
            }
            child = Some(process);
            match client.serve(transport).await {
                Ok(service) => service,
                Err(e) => {
                    // A server that failed at start has usually said why on its way out:
                    // let the reader reach the end of what it wrote.
                    if let Some(reader) = reader {
                        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
                    }
                    return Err(format!(
                        "MCP server `{}` (`{command}`) failed its start-up handshake: {e}{}",
                        self.name,
                        noise.note()
                    ));
                }
            }
        } else {
            let url = expand_env(self.config.url.as_deref().unwrap_or_default(), &self.name)?;
            http_transport::install_crypto();
            let mut headers = HashMap::new();
            for (k, v) in &self.config.headers {
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| format!("[mcp.{}] header `{k}`: {e}", self.name))?;
                let value = reqwest::header::HeaderValue::from_str(&expand_env(v, &self.name)?)
                    .map_err(|e| format!("[mcp.{}] header `{k}`: {e}", self.name))?;
                headers.insert(name, value);
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(headers),
            );
            client.serve(transport).await.map_err(|e| {
                format!(
                    "MCP server `{}` at {url} failed its start-up handshake: {e}",
                    self.name
                )
            })?
        };
        // A server that answers with a protocol version this client does not know
        // speaks another protocol: say so rather than wait for answers that will not
        // come.
        if let Some(info) = service.peer_info() {
            let version = &info.protocol_version;
            if !ProtocolVersion::KNOWN_VERSIONS.contains(version) {
                let known: Vec<String> = ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .map(|v| v.to_string())
                    .collect();
                return Err(format!(
                    "MCP server `{}` speaks protocol version {version}, which sap's client does not: it speaks {}",
                    self.name,
                    known.join(", ")
                ));
            }
        }
        let listed = service.list_all_tools().await.map_err(|e| {
            format!(
                "MCP server `{}` did not list its tools: {e}{}",
                self.name,
                noise.note()
            )
        })?;
        let tools = listed
            .into_iter()
            .map(|t| (t.name.to_string(), t))
            .collect();
        Ok(Connection {
            service,
            tools,
            noise: noise.clone(),
            _child: child,
        })
    }

    /// Each declared tool must still exist, with the schemas `sap.lock` recorded.
    fn check_declared(&self, live: &HashMap<String, Tool>) -> Result<(), String> {
        for (name, locked) in &self.declared {
            let Some(tool) = live.get(name) else {
                return Err(format!(
                    "MCP server `{}` no longer has the tool `{name}` that the program declares; run `sapc mcp import {}` and fix the calls",
                    self.name, self.name
                ));
            };
            if let Some(locked) = locked {
                let now = LockedTool::of(tool);
                if now.hash != locked.hash {
                    return Err(format!(
                        "the schema of tool `{name}` of MCP server `{}` changed since it was imported ({}); run `sapc mcp import {}` to update `{}.sap` and sap.lock",
                        self.name,
                        locked.describe_change(&now),
                        self.name,
                        self.name
                    ));
                }
            }
        }
        Ok(())
    }

    fn error(&self, tool: Option<&str>, e: &ServiceError, connection: &Connection) -> String {
        let what = match tool {
            Some(tool) => format!("MCP server `{}`, tool `{tool}`", self.name),
            None => format!("MCP server `{}`", self.name),
        };
        match e {
            ServiceError::McpError(data) => {
                format!("{what}: JSON-RPC error {}: {}", data.code.0, data.message)
            }
            ServiceError::Timeout { timeout } => format!(
                "{what}: no answer in {:.1} s; the call was cancelled{}",
                timeout.as_secs_f64(),
                connection.noise.note()
            ),
            ServiceError::TransportClosed => format!(
                "{what}: the server closed the connection{}",
                connection.noise.note()
            ),
            other => format!("{what}: {other}"),
        }
    }
}

/// Tells the server a request is cancelled when dropped: the future waiting for its
/// answer was dropped (a cancelled run). Disarmed once the answer is in.
struct CancelOnDrop(Option<(rmcp::service::Peer<RoleClient>, rmcp::model::RequestId)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((peer, id)) = self.0.take() else {
            return;
        };
        let Ok(tokio) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tokio.spawn(async move {
            let notification = rmcp::model::CancelledNotification::new(
                rmcp::model::CancelledNotificationParam::new(
                    Some(id),
                    Some("the sap run was cancelled".to_owned()),
                ),
            );
            let _ = peer.send_notification(notification.into()).await;
        });
    }
}

fn stderr_note(stderr: &Mutex<String>) -> String {
    let text = stderr.lock().unwrap_or_else(|e| e.into_inner());
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let start = text.len().saturating_sub(STDERR_TAIL);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("; its standard error ends with:\n{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_are_not_json_are_noticed_across_reads() {
        let found = Arc::new(Mutex::new(None));
        let mut w = Watched {
            inner: (),
            line: Vec::new(),
            long: false,
            not_json: found.clone(),
        };
        w.scan(b"{\"jsonrpc\":\"2.0\"}\n{\"a\":");
        w.scan(b"1}\n\r\n  \nnot ");
        assert!(found.lock().unwrap().is_none());
        w.scan(b"json\n{}\nworse\n");
        assert_eq!(found.lock().unwrap().as_deref(), Some("not json"));
        assert!(
            Noise {
                stderr: Default::default(),
                not_json: found
            }
            .note()
            .contains("`not json`")
        );
    }

    #[test]
    fn environment_variables_are_expanded_and_missing_ones_named() {
        // SAFETY of the test: PATH is set in every test environment.
        let path = std::env::var("PATH").unwrap();
        assert_eq!(
            expand_env("a ${PATH} b", "s").unwrap(),
            format!("a {path} b")
        );
        assert_eq!(expand_env("plain", "s").unwrap(), "plain");
        let err = expand_env("Bearer ${SAP_TEST_SURELY_UNSET}", "search").unwrap_err();
        assert!(
            err.contains("[mcp.search]") && err.contains("SAP_TEST_SURELY_UNSET"),
            "{err}"
        );
        assert!(expand_env("${OPEN", "s").unwrap_err().contains("closing"));
    }

    #[test]
    fn a_server_needs_exactly_one_way_in() {
        let mut c = ServerConfig::default();
        assert!(c.validate("x").unwrap_err().contains("neither"));
        c.command = Some("npx".into());
        assert!(c.validate("x").is_ok());
        c.url = Some("http://127.0.0.1:1/mcp".into());
        assert!(c.validate("x").unwrap_err().contains("both"));
    }
}
