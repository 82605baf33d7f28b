//! What the editor sees while a turn runs: `print` output and the answer as message
//! chunks, tool calls and their updates, model calls as thought chunks, an `aot` plan
//! whose entries move — each sent as a `session/update` when it happens — and the
//! editor as the run's client: asked for permissions, reading and writing files.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use runtime::error::shorten;
use runtime::observe::{AtomStatus, ModelCall, Observer, ToolCall, ToolKind};
use serde_json::Value as JsonValue;
use tools::client::{Answer, Answering, Client as RunClient, Permission};
use tools::standard::Grants;

/// The longest tool result shown in the editor, in characters.
const SHOWN: usize = 4_000;

/// Sends a session's updates, and keeps those of the running turn for its history.
#[derive(Clone)]
pub struct Updates {
    cx: ConnectionTo<Client>,
    session: acp::SessionId,
    kept: Arc<Mutex<Vec<acp::SessionUpdate>>>,
}

impl Updates {
    pub fn new(cx: ConnectionTo<Client>, session: acp::SessionId) -> Updates {
        Updates {
            cx,
            session,
            kept: Arc::default(),
        }
    }

    pub fn send(&self, update: acp::SessionUpdate) {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(update.clone());
        self.send_unkept(update);
    }

    /// Sends an update that is not part of the turn's history (a replay, a notice).
    pub fn send_unkept(&self, update: acp::SessionUpdate) {
        // The client went away: the turn goes on to its end, and nothing reads this.
        let _ = self
            .cx
            .send_notification(acp::SessionNotification::new(self.session.clone(), update));
    }

    pub fn message(&self, text: &str) {
        self.send(acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(text.into()),
        ));
    }

    /// The turn's updates so far, taken.
    pub fn take(&self) -> Vec<acp::SessionUpdate> {
        std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn connection(&self) -> &ConnectionTo<Client> {
        &self.cx
    }

    pub fn session(&self) -> &acp::SessionId {
        &self.session
    }
}

/// Where `print` writes: each flushed line is an agent message chunk.
pub struct Printed {
    updates: Updates,
    pending: Vec<u8>,
}

impl Printed {
    pub fn new(updates: Updates) -> Printed {
        Printed {
            updates,
            pending: Vec::new(),
        }
    }
}

impl Write for Printed {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let text = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            self.updates.message(&text);
        }
        Ok(())
    }
}

/// Tells the editor of a turn's tool calls, model calls and plan.
pub struct Shown {
    updates: Updates,
    /// The plan's entries, with their atoms' ids: each change sends them all.
    plan: Mutex<Vec<(i64, acp::PlanEntry)>>,
    /// The last standard tool call started, `(tool, id)`: a permission asked for it
    /// refers to it.
    last_std: Arc<Mutex<Option<(String, String)>>>,
}

impl Shown {
    pub fn new(updates: Updates) -> Shown {
        Shown {
            updates,
            plan: Mutex::default(),
            last_std: Arc::default(),
        }
    }

    fn send_plan(&self, plan: &[(i64, acp::PlanEntry)]) {
        let entries = plan.iter().map(|(_, e)| e.clone()).collect();
        self.updates
            .send(acp::SessionUpdate::Plan(acp::Plan::new(entries)));
    }
}

fn tool_call_id(id: u64) -> acp::ToolCallId {
    acp::ToolCallId::new(format!("sap-{id}"))
}

fn kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::Other => acp::ToolKind::Other,
    }
}

/// A tool call's title: the extern as the program names it (`fs::read`,
/// `notes::read_file`), and the files it touches or its arguments, short.
fn title(call: &ToolCall) -> String {
    let what = match (call.paths.first(), &call.arguments) {
        (Some(path), _) => path.clone(),
        (None, JsonValue::Object(map)) => {
            let values: Vec<String> = map
                .values()
                .map(|v| match v {
                    JsonValue::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            shorten(&values.join(", "), 60)
        }
        (None, _) => String::new(),
    };
    if what.is_empty() {
        call.name.clone()
    } else {
        format!("{} {what}", call.name)
    }
}

impl Observer for Shown {
    fn tool_started(&self, call: &ToolCall) {
        let id = tool_call_id(call.id);
        if call.source.starts_with("std:") {
            let tool = call.source.trim_start_matches("std:").replace('/', "::");
            *self.last_std.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((tool, id.0.to_string()));
        }
        let mut locations: Vec<acp::ToolCallLocation> = call
            .paths
            .iter()
            .map(|p| acp::ToolCallLocation::new(PathBuf::from(p)))
            .collect();
        if locations.is_empty()
            && let Some(place) = &call.place
        {
            locations.push(acp::ToolCallLocation::new(PathBuf::from(&place.file)).line(place.line));
        }
        self.updates.send(acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id, title(call))
                .kind(kind(call.kind))
                .status(acp::ToolCallStatus::InProgress)
                .raw_input(call.arguments.clone())
                .locations(locations),
        ));
    }

    fn tool_finished(&self, id: u64, outcome: Result<&JsonValue, &str>) {
        let (status, text, raw) = match outcome {
            Ok(value) => {
                let text = match value {
                    JsonValue::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (acp::ToolCallStatus::Completed, text, value.clone())
            }
            Err(e) => (
                acp::ToolCallStatus::Failed,
                e.to_owned(),
                serde_json::json!({ "error": e }),
            ),
        };
        self.updates.send(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(
                tool_call_id(id),
                acp::ToolCallUpdateFields::new()
                    .status(status)
                    .content(vec![shorten(&text, SHOWN).into()])
                    .raw_output(raw),
            ),
        ));
    }

    fn model_started(&self, call: &ModelCall) {
        let what = match call.kind {
            "produce" => format!("the result of `{}`", call.subject),
            "decide" => format!("whether `{}`", call.subject),
            "fill_args" => format!("the arguments of `{}`", call.subject),
            _ => format!("which action to take in `{}`", call.place.function),
        };
        let file = std::path::Path::new(&call.place.file)
            .file_name()
            .map_or_else(
                || call.place.file.clone(),
                |f| f.to_string_lossy().into_owned(),
            );
        self.updates.send(acp::SessionUpdate::AgentThoughtChunk(
            acp::ContentChunk::new(
                format!("Asking the model for {what} ({file}:{})\n", call.place.line).into(),
            ),
        ));
    }

    fn plan(&self, atoms: &[(i64, String)]) {
        let mut plan = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        *plan = atoms
            .iter()
            .map(|(id, text)| {
                (
                    *id,
                    acp::PlanEntry::new(
                        text.clone(),
                        acp::PlanEntryPriority::Medium,
                        acp::PlanEntryStatus::Pending,
                    ),
                )
            })
            .collect();
        self.send_plan(&plan);
    }

    fn atom(&self, id: i64, status: AtomStatus) {
        let mut plan = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, entry)) = plan.iter_mut().find(|(a, _)| *a == id) else {
            return;
        };
        entry.status = match status {
            AtomStatus::Pending => acp::PlanEntryStatus::Pending,
            AtomStatus::Running => acp::PlanEntryStatus::InProgress,
            // ACP's plan entries are pending, in progress or completed: a failed atom
            // is completed, and its tool call says it failed.
            AtomStatus::Done | AtomStatus::Failed => acp::PlanEntryStatus::Completed,
        };
        self.send_plan(&plan);
    }
}

/// The editor as the run's client.
pub struct Editor {
    updates: Updates,
    reads: bool,
    writes: bool,
    /// What the user allowed "always" in this session.
    granted: Arc<Mutex<Grants>>,
    last_std: Arc<Mutex<Option<(String, String)>>>,
}

impl Editor {
    pub fn new(
        updates: Updates,
        capabilities: &acp::ClientCapabilities,
        granted: Arc<Mutex<Grants>>,
        shown: &Shown,
    ) -> Editor {
        Editor {
            updates,
            reads: capabilities.fs.read_text_file,
            writes: capabilities.fs.write_text_file,
            granted,
            last_std: shown.last_std.clone(),
        }
    }
}

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT: &str = "reject-once";

impl RunClient for Editor {
    fn ask(&self, permission: Permission) -> Answering<'_, Answer> {
        Box::pin(async move {
            if self
                .granted
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .covers(&permission)
            {
                return Answer::Always;
            }
            let id = match &*self.last_std.lock().unwrap_or_else(|e| e.into_inner()) {
                Some((tool, id)) if *tool == permission.tool => id.clone(),
                _ => format!("sap-permission-{}", runtime::observe::next_id()),
            };
            let title = format!("{} wants to {}", permission.tool, permission.describe());
            let tool_call = acp::ToolCallUpdate::new(
                acp::ToolCallId::new(id),
                acp::ToolCallUpdateFields::new()
                    .title(title)
                    .status(acp::ToolCallStatus::Pending),
            );
            let options = vec![
                acp::PermissionOption::new(
                    ALLOW_ONCE,
                    "Allow once",
                    acp::PermissionOptionKind::AllowOnce,
                ),
                acp::PermissionOption::new(
                    ALLOW_ALWAYS,
                    format!("Always allow in this session ({})", permission.scope),
                    acp::PermissionOptionKind::AllowAlways,
                ),
                acp::PermissionOption::new(REJECT, "Reject", acp::PermissionOptionKind::RejectOnce),
            ];
            let request = acp::RequestPermissionRequest::new(
                self.updates.session().clone(),
                tool_call,
                options,
            );
            let answer = self
                .updates
                .connection()
                .send_request(request)
                .block_task()
                .await;
            match answer.map(|r| r.outcome) {
                Ok(acp::RequestPermissionOutcome::Selected(chosen)) => {
                    match chosen.option_id.0.as_ref() {
                        ALLOW_ONCE => Answer::Once,
                        ALLOW_ALWAYS => {
                            self.granted
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .allow(&permission);
                            Answer::Always
                        }
                        _ => Answer::Reject,
                    }
                }
                // Cancelled (the turn was), an option we did not offer, or no answer.
                _ => Answer::Reject,
            }
        })
    }

    fn reads_files(&self) -> bool {
        self.reads
    }

    fn read_text(&self, path: PathBuf) -> Answering<'_, Result<String, String>> {
        Box::pin(async move {
            let request = acp::ReadTextFileRequest::new(self.updates.session().clone(), path);
            self.updates
                .connection()
                .send_request(request)
                .block_task()
                .await
                .map(|r| r.content)
                .map_err(|e| format!("the editor answered: {}", e.message))
        })
    }

    fn writes_files(&self) -> bool {
        self.writes
    }

    fn write_text(&self, path: PathBuf, content: String) -> Answering<'_, Result<(), String>> {
        Box::pin(async move {
            let request =
                acp::WriteTextFileRequest::new(self.updates.session().clone(), path, content);
            self.updates
                .connection()
                .send_request(request)
                .block_task()
                .await
                .map(drop)
                .map_err(|e| format!("the editor answered: {}", e.message))
        })
    }
}
