//! `sapc acp FILE`: a sap program as an editor's agent, over the Agent Client Protocol
//! (version 1, on standard input and output; logs on standard error).
//!
//! The program declares `fn main(ctx: Context, prompt: String) -> String` (the result
//! is the answer) or `-> ()` (what it prints is the answer). Each `session/prompt` runs
//! `main` with the prompt's text, in the session's own root context: what `main` adds
//! to `ctx` is there for the next prompt. While the turn runs, the editor is sent its
//! printed lines, tool calls, model calls and plans ([`updates`]); a standard tool
//! outside the grants asks the editor's user; `session/cancel` stops the turn at the
//! call it waits for. The program's files are watched ([`reload`]): a change that checks
//! serves the next prompt, one that does not is reported and the old program serves
//! on. With `--journal DIR`, each session is kept under `DIR/<session>/` and
//! `session/load` brings it back after a restart ([`store`]).

#![forbid(unsafe_code)]

mod reload;
mod store;
mod updates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error, Stdio};
use codegen_jit::{Host, Tokio};
use ir::Type;
use runtime::ErrorKind;
use runtime::observe::Cancel;
use session::{CallError, Engine, Failure, Loaded, Options};
use tools::standard::Grants;

use updates::{Editor, Printed, Shown, Updates};

/// Exit statuses.
pub const OK: u8 = 0;
pub const ERRORS: u8 = 1;
pub const USAGE: u8 = 2;

/// What `main` must look like, for the message when it does not.
const SHAPE: &str = "`fn main(ctx: Context, prompt: String) -> String` (the result is the answer) \
or `fn main(ctx: Context, prompt: String)` (what it prints is the answer)";

/// The program's entry: `main`'s parameter that takes the prompt.
#[derive(Clone, Debug)]
struct Entry {
    prompt: String,
    /// Whether the result is the answer (`-> String`), or what is printed (`-> ()`).
    answers: bool,
}

/// Whether `loaded`'s `main` has the shape an agent needs.
fn entry(loaded: &Loaded) -> Result<Entry, String> {
    let module = &loaded.module;
    let main = module
        .main
        .and_then(|m| module.functions.get(m as usize))
        .ok_or_else(|| format!("`{}` has no `main`: declare {SHAPE}", loaded.file.display()))?;
    let contexts = main.params.iter().filter(|p| p.ty == Type::Context).count();
    let strings: Vec<&ir::Param> = main.params.iter().filter(|p| p.ty == Type::Str).collect();
    let answers = match main.ret {
        Type::Str => true,
        Type::Unit => false,
        _ => {
            return Err(format!(
                "`main` of `{}` does not return `String` or `()`: an agent declares {SHAPE}",
                loaded.file.display()
            ));
        }
    };
    if contexts != 1 || strings.len() != 1 || main.params.len() != 2 {
        return Err(format!(
            "`main` of `{}` does not take a `Context` and the prompt: an agent declares {SHAPE}",
            loaded.file.display()
        ));
    }
    Ok(Entry {
        prompt: strings[0].name.clone(),
        answers,
    })
}

/// The program serving, and its entry.
struct Program {
    loaded: Arc<Loaded>,
    entry: Entry,
}

/// A turn's failure: its kind, when a model or tool call failed, and the error rendered
/// at its place.
type Failed = (Option<ErrorKind>, String);

impl Program {
    /// Runs `main` with `prompt` on a thread with a big stack, working in `context`'s
    /// own frame (what it injects is there for the next turn); `cancel` stops it at the
    /// model or tool call it waits for.
    fn run_main(
        &self,
        host: &Host,
        prompt: &str,
        context: &runtime::Context,
        cancel: Option<Cancel>,
    ) -> Result<runtime::Value, Failed> {
        let loaded = &self.loaded;
        let main = loaded
            .function(host, "main")
            .ok_or_else(|| (None, "the program has no `main`".to_owned()))?;
        let mut arguments = serde_json::Map::new();
        arguments.insert(self.entry.prompt.clone(), prompt.into());
        context.keep_next_call();
        codegen_jit::on_big_stack(|| {
            runtime::observe::with_call_cancel(cancel, || {
                loaded.call_on_this_thread(host, &main, &arguments, Some(context))
            })
        })
        .map_err(|e| match e {
            CallError::Arguments(m) => (None, m),
            CallError::Run(e) => (e.kind, loaded.located(&e, false).to_string()),
        })
    }
}

/// One turn's outcome: its stop reason and, for a run that failed otherwise, the error.
type Outcome = Result<acp::StopReason, Error>;

/// A session: its context, its running turn, what its user allowed, its history.
struct Session {
    id: acp::SessionId,
    context: runtime::Context,
    /// The running turn's cancel, while one runs.
    running: Mutex<Option<Cancel>>,
    granted: Arc<Mutex<Grants>>,
    history: Mutex<Vec<store::Turn>>,
    /// Where the session is kept (`--journal DIR`).
    dir: Option<PathBuf>,
}

/// The agent: the program, the options every run takes, the sessions.
struct Server {
    file: PathBuf,
    options: Options,
    program: RwLock<Arc<Program>>,
    tokio: Tokio,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    capabilities: Mutex<acp::ClientCapabilities>,
    initialized: AtomicBool,
    /// `--journal DIR`: sessions are kept there, and can be loaded after a restart.
    journal: Option<PathBuf>,
    /// The connection, once served: a reload tells the sessions through it.
    connection: Mutex<Option<ConnectionTo<Client>>>,
}

/// Serves `file` as an ACP agent on standard input and output, with `options` (the
/// flags of `sapc run`; `journal` names a folder). Returns when the client closes its
/// input; a program of the wrong shape exits 2 before serving.
pub fn serve(file: &Path, options: Options) -> u8 {
    let loaded = match session::load(file, Engine::Jit) {
        Ok(loaded) => loaded,
        Err(Failure::Diagnostics(d)) => {
            d.print();
            return ERRORS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ERRORS;
        }
    };
    let entry = match entry(&loaded) {
        Ok(entry) => entry,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    // Standard input and output are the protocol's: no person can answer there.
    let provider = options
        .provider
        .as_deref()
        .or(loaded.config.provider.kind.as_deref());
    if provider == Some("interactive") {
        eprintln!(
            "error: `sapc acp` talks ACP on standard input and output: the `interactive` provider cannot ask there"
        );
        return USAGE;
    }
    let mut options = options;
    let journal = options.journal.take();
    if let Some(dir) = &journal
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!(
            "error: cannot make the journal folder {}: {e}",
            dir.display()
        );
        return ERRORS;
    }
    let tokio = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ERRORS;
        }
    };
    let program = file.display().to_string();
    if let Err(e) = runtime::telemetry::start(options.otlp.as_deref(), &program, tokio.handle()) {
        eprintln!("error: {e}");
        return USAGE;
    }
    // The options are checked once before serving (a provider that cannot be made, a
    // grant of a folder that does not exist): a prompt would fail on each.
    if let Err(e) = loaded.host(
        &options,
        &Tokio::Running(tokio.handle().clone()),
        Instant::now(),
    ) {
        eprintln!("error: {e}");
        return ERRORS;
    }
    let server = Arc::new(Server {
        file: file.to_owned(),
        options,
        program: RwLock::new(Arc::new(Program {
            loaded: Arc::new(loaded),
            entry,
        })),
        tokio: Tokio::Running(tokio.handle().clone()),
        sessions: Mutex::default(),
        capabilities: Mutex::new(acp::ClientCapabilities::new()),
        initialized: AtomicBool::new(false),
        journal,
        connection: Mutex::default(),
    });
    let _watcher = match reload::watch(server.clone(), tokio.handle()) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("sapc acp: the program's files are not watched (reload with /reload): {e}");
            None
        }
    };
    let served = tokio.block_on(serve_stdio(server.clone()));
    // The client is gone: turns still running are cancelled, and the process ends
    // without waiting for them.
    for session in server
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
    {
        if let Some(cancel) = &*session.running.lock().unwrap_or_else(|e| e.into_inner()) {
            cancel.cancel();
        }
    }
    runtime::telemetry::shutdown(None);
    tokio.shutdown_timeout(std::time::Duration::from_millis(200));
    match served {
        Ok(()) => OK,
        Err(e) => {
            eprintln!("sapc acp: the connection ended: {e}");
            ERRORS
        }
    }
}

async fn serve_stdio(server: Arc<Server>) -> Result<(), Error> {
    let s = server.clone();
    let on_initialize = async move |request: acp::InitializeRequest,
                                    responder: Responder<acp::InitializeResponse>,
                                    _cx: ConnectionTo<Client>| {
        if s.initialized.swap(true, Ordering::SeqCst) {
            return responder.respond_with_error(
                Error::invalid_request().data("the connection is already initialized"),
            );
        }
        *s.capabilities.lock().unwrap_or_else(|e| e.into_inner()) = request.client_capabilities;
        let capabilities = acp::AgentCapabilities::new()
            .load_session(s.journal.is_some())
            .prompt_capabilities(acp::PromptCapabilities::new().embedded_context(true));
        responder.respond(
            acp::InitializeResponse::new(ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .agent_info(acp::Implementation::new("sapc", env!("CARGO_PKG_VERSION"))),
        )
    };
    let s = server.clone();
    let on_new = async move |_request: acp::NewSessionRequest,
                             responder: Responder<acp::NewSessionResponse>,
                             cx: ConnectionTo<Client>| {
        s.remember(&cx);
        let session = match s.open_session(None) {
            Ok(session) => session,
            Err(e) => return responder.respond_with_error(Error::internal_error().data(e)),
        };
        responder.respond(acp::NewSessionResponse::new(session.id.clone()))?;
        advertise(&cx, &session.id)
    };
    let s = server.clone();
    let on_load = async move |request: acp::LoadSessionRequest,
                              responder: Responder<acp::LoadSessionResponse>,
                              cx: ConnectionTo<Client>| {
        s.remember(&cx);
        let s = s.clone();
        // Restoring re-runs the session's turns from their journals: off the loop.
        cx.clone().spawn(async move {
            let loaded = s.clone().load_session(&request.session_id, &cx).await;
            match loaded {
                Ok(()) => {
                    let _ = responder.respond(acp::LoadSessionResponse::new());
                    let _ = advertise(&cx, &request.session_id);
                }
                Err(e) => {
                    let _ = responder.respond_with_error(e);
                }
            }
            Ok(())
        })
    };
    let s = server.clone();
    let on_prompt = async move |request: acp::PromptRequest,
                                responder: Responder<acp::PromptResponse>,
                                cx: ConnectionTo<Client>| {
        s.remember(&cx);
        let Some(session) = s.session(&request.session_id) else {
            return responder.respond_with_error(
                acp::Error::session_not_found(request.session_id.clone()).into(),
            );
        };
        let cancel = Cancel::new();
        {
            let mut running = session.running.lock().unwrap_or_else(|e| e.into_inner());
            if running.is_some() {
                return responder.respond_with_error(Error::invalid_request().data(format!(
                    "a prompt is already running in session {}: wait for its answer, or cancel it",
                    session.id.0
                )));
            }
            *running = Some(cancel.clone());
        }
        let text = prompt_text(&request.prompt);
        let s = s.clone();
        cx.clone().spawn(async move {
            let outcome = s.turn(&session, text, cancel, &cx).await;
            *session.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
            let _ = responder.respond_with_result(outcome.map(acp::PromptResponse::new));
            Ok(())
        })
    };
    let s = server.clone();
    let on_cancel = async move |notification: acp::CancelNotification,
                                _cx: ConnectionTo<Client>| {
        if let Some(session) = s.session(&notification.session_id)
            && let Some(cancel) = &*session.running.lock().unwrap_or_else(|e| e.into_inner())
        {
            cancel.cancel();
        }
        Ok(())
    };
    Agent
        .v1()
        .name("sapc")
        .on_receive_request(on_initialize, agent_client_protocol::on_receive_request!())
        .on_receive_request(on_new, agent_client_protocol::on_receive_request!())
        .on_receive_request(on_load, agent_client_protocol::on_receive_request!())
        .on_receive_request(on_prompt, agent_client_protocol::on_receive_request!())
        .on_receive_notification(on_cancel, agent_client_protocol::on_receive_notification!())
        .connect_to(Stdio::new())
        .await
}

/// Tells the client of the commands a session has: `/reload`.
fn advertise(cx: &ConnectionTo<Client>, session: &acp::SessionId) -> Result<(), Error> {
    cx.send_notification(acp::SessionNotification::new(
        session.clone(),
        acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(vec![
            acp::AvailableCommand::new(
                "reload",
                "Check the program's files again and serve the new program (the session's context is kept)",
            ),
        ])),
    ))
}

/// A prompt's content as the text `main` gets: text as it is, a linked file as its
/// path or URI, an embedded file's text under its URI.
fn prompt_text(blocks: &[acp::ContentBlock]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(t) => parts.push(t.text.clone()),
            acp::ContentBlock::ResourceLink(link) => parts.push(
                link.uri
                    .strip_prefix("file://")
                    .unwrap_or(&link.uri)
                    .to_owned(),
            ),
            acp::ContentBlock::Resource(r) => {
                if let acp::EmbeddedResourceResource::TextResourceContents(t) = &r.resource {
                    parts.push(format!(
                        "{}:\n{}",
                        t.uri.strip_prefix("file://").unwrap_or(&t.uri),
                        t.text
                    ));
                }
            }
            _ => {}
        }
    }
    parts.join("\n")
}

impl Server {
    fn remember(&self, cx: &ConnectionTo<Client>) {
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        if connection.is_none() {
            *connection = Some(cx.clone());
        }
    }

    fn session(&self, id: &acp::SessionId) -> Option<Arc<Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id.0.as_ref())
            .cloned()
    }

    /// A new session (with `id` when it is one being restored).
    fn open_session(&self, id: Option<acp::SessionId>) -> Result<Arc<Session>, String> {
        let id = id.unwrap_or_else(new_session_id);
        let dir = match &self.journal {
            Some(journal) => {
                let dir = journal.join(id.0.as_ref());
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
                Some(dir)
            }
            None => None,
        };
        let session = Arc::new(Session {
            id: id.clone(),
            context: runtime::Context::new(),
            running: Mutex::default(),
            granted: Arc::default(),
            history: Mutex::default(),
            dir,
        });
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.0.to_string(), session.clone());
        Ok(session)
    }

    fn program(&self) -> Arc<Program> {
        self.program
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs one prompt: `main` with its text, in the session's context.
    async fn turn(
        self: &Arc<Self>,
        session: &Arc<Session>,
        text: String,
        cancel: Cancel,
        cx: &ConnectionTo<Client>,
    ) -> Outcome {
        let updates = Updates::new(cx.clone(), session.id.clone());
        if text.trim() == "/reload" {
            let report = reload::now(self).await;
            updates.message(&report);
            return Ok(acp::StopReason::EndTurn);
        }
        let program = self.program();
        let mut options = self.options.clone();
        let (number, journal) = store::journal_for(session, &text);
        options.journal = journal.clone();
        let before = session.context.len();
        let shown = Arc::new(Shown::new(updates.clone()));
        let capabilities = self
            .capabilities
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let editor = Arc::new(Editor::new(
            updates.clone(),
            &capabilities,
            session.granted.clone(),
            &shown,
        ));
        let tokio = self.tokio.clone();
        let context = session.context.clone();
        let printed = Printed::new(updates.clone());
        let prompt = text.clone();
        let run = program.clone();
        let result = tokio::task::spawn_blocking(move || {
            let (host, _) = run
                .loaded
                .host_for_client(&options, editor, &tokio, Instant::now())
                .map_err(|e| (None, e.to_string()))?;
            // Standard input is the protocol's: `input()` reads an empty line.
            let host = host
                .with_input(Box::new(std::io::empty()))
                .with_output(Box::new(printed))
                .with_observer(shown);
            run.run_main(&host, &prompt, &context, Some(cancel))
        })
        .await;
        let outcome: Outcome = match result {
            Err(e) => Err(Error::internal_error().data(format!("the turn stopped: {e}"))),
            Ok(Ok(value)) => {
                if program.entry.answers
                    && let runtime::Value::Str(answer) = &value
                {
                    updates.message(answer);
                }
                Ok(acp::StopReason::EndTurn)
            }
            Ok(Err((kind, message))) => {
                let stop = match kind {
                    Some(ErrorKind::Cancelled) => Some(acp::StopReason::Cancelled),
                    Some(ErrorKind::Refusal) => Some(acp::StopReason::Refusal),
                    Some(ErrorKind::Budget) if message.contains("tokens") => {
                        Some(acp::StopReason::MaxTokens)
                    }
                    Some(ErrorKind::Budget) => Some(acp::StopReason::MaxTurnRequests),
                    _ => None,
                };
                match stop {
                    Some(stop) => {
                        if stop != acp::StopReason::Cancelled {
                            updates.message(&message);
                        }
                        Ok(stop)
                    }
                    None => Err(Error::internal_error().data(message)),
                }
            }
        };
        // A turn that did not end takes back what it added to the session's context.
        if !matches!(outcome, Ok(acp::StopReason::EndTurn)) {
            session.context.truncate(before);
        }
        // As the protocol spells it (`end_turn`), or `error`.
        let stop = match &outcome {
            Ok(stop) => serde_json::to_value(stop)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            Err(_) => "error".to_owned(),
        };
        store::record(
            session,
            store::Turn {
                number,
                prompt: text,
                stop,
                journal: journal.map(|p| p.display().to_string()),
                updates: updates.take(),
            },
        );
        outcome
    }

    /// `session/load`: the session as it is in this process, or brought back from its
    /// folder under `--journal DIR`; its history is sent to the client as updates.
    async fn load_session(
        self: Arc<Self>,
        id: &acp::SessionId,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let session = match self.session(id) {
            Some(session) => session,
            None => {
                let server = self.clone();
                let id = id.clone();
                tokio::task::spawn_blocking(move || store::restore(&server, &id))
                    .await
                    .map_err(|e| Error::internal_error().data(e.to_string()))??
            }
        };
        let updates = Updates::new(cx.clone(), session.id.clone());
        for turn in session
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            updates.send_unkept(acp::SessionUpdate::UserMessageChunk(
                acp::ContentChunk::new(turn.prompt.clone().into()),
            ));
            for update in &turn.updates {
                updates.send_unkept(update.clone());
            }
        }
        Ok(())
    }
}

/// A session id unique across restarts of the agent.
fn new_session_id() -> acp::SessionId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    acp::SessionId::new(format!(
        "sap-{now:x}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}
