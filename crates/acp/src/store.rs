//! Sessions kept under `--journal DIR`: each session a folder `DIR/<session>/` holding
//! `history.jsonl` (one line per turn: the prompt, how it ended, the updates the client
//! was sent) and one journal per turn (`turn-N.journal`, a durable run's journal).
//!
//! After a restart, `session/load` brings a session back by running its finished turns
//! again against their journals — every model and tool call answered from the journal,
//! nothing printed — so the session's context is rebuilt by the program itself, typed
//! and labelled as it was; then the history is sent to the client. A turn that did not
//! finish (cancelled, failed) added nothing to the context and is not run again; sent
//! again with the same text, it resumes from its journal: what completed before the
//! cancel is not done twice.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema as acp;
use serde_json::{Value as JsonValue, json};

use crate::{Server, Session};

const HISTORY: &str = "history.jsonl";

/// One prompt of a session and what came of it.
pub struct Turn {
    pub number: usize,
    pub prompt: String,
    /// `end_turn`, `cancelled`, … or `error`.
    pub stop: String,
    pub journal: Option<String>,
    pub updates: Vec<acp::SessionUpdate>,
}

impl Turn {
    fn to_json(&self) -> JsonValue {
        json!({
            "number": self.number,
            "prompt": self.prompt,
            "stop": self.stop,
            "journal": self.journal,
            "updates": self.updates.iter().filter_map(|u| serde_json::to_value(u).ok()).collect::<Vec<_>>(),
        })
    }

    fn from_json(line: &str) -> Result<Turn, String> {
        let j: JsonValue = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let text = |k: &str| j.get(k).and_then(JsonValue::as_str).map(str::to_owned);
        Ok(Turn {
            number: j.get("number").and_then(JsonValue::as_u64).unwrap_or(0) as usize,
            prompt: text("prompt").ok_or("a turn without its prompt")?,
            stop: text("stop").unwrap_or_default(),
            journal: text("journal"),
            updates: j
                .get("updates")
                .and_then(JsonValue::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(|u| serde_json::from_value(u.clone()).ok())
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// The number of the session's next turn and the journal it runs with: a new one, or,
/// when the turn before did not finish and is sent again, that turn's (it resumes).
pub fn journal_for(session: &Session, prompt: &str) -> (usize, Option<PathBuf>) {
    let history = session.history.lock().unwrap_or_else(|e| e.into_inner());
    let number = history.len() + 1;
    let Some(dir) = &session.dir else {
        return (number, None);
    };
    if let Some(last) = history.last()
        && last.stop != "end_turn"
        && last.prompt == prompt
        && let Some(journal) = &last.journal
    {
        return (number, Some(PathBuf::from(journal)));
    }
    (number, Some(dir.join(format!("turn-{number}.journal"))))
}

/// Adds `turn` to the session's history, and to its file when it is kept.
pub fn record(session: &Session, turn: Turn) {
    if let Some(dir) = &session.dir {
        let path = dir.join(HISTORY);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| {
                writeln!(f, "{}", turn.to_json())?;
                f.sync_data()
            });
        if let Err(e) = written {
            eprintln!("sapc acp: cannot keep the turn in {}: {e}", path.display());
        }
    }
    session
        .history
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(turn);
}

/// Brings back session `id` from its folder: its finished turns run again against their
/// journals to rebuild its context.
pub fn restore(server: &Arc<Server>, id: &acp::SessionId) -> Result<Arc<Session>, Error> {
    let not_found = || Error::from(acp::Error::session_not_found(id.clone()));
    let Some(journal) = &server.journal else {
        return Err(not_found());
    };
    // A session id names a folder: nothing but what `new_session_id` makes.
    if id.0.is_empty()
        || !id
            .0
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(not_found());
    }
    let text = match std::fs::read_to_string(journal.join(id.0.as_ref()).join(HISTORY)) {
        Ok(text) => text,
        Err(_) => return Err(not_found()),
    };
    let mut turns = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        turns.push(Turn::from_json(line).map_err(|e| {
            Error::internal_error().data(format!(
                "session {}: line {} of its history does not read: {e}",
                id.0,
                i + 1
            ))
        })?);
    }
    let session = server
        .open_session(Some(id.clone()))
        .map_err(|e| Error::internal_error().data(e))?;
    let program = server.program();
    let loaded = &program.loaded;
    for turn in turns.iter().filter(|t| t.stop == "end_turn") {
        let Some(journal) = &turn.journal else {
            continue;
        };
        let mut options = server.options.clone();
        options.journal = Some(PathBuf::from(journal));
        let failed = |e: String| {
            Error::internal_error().data(format!(
                "session {} cannot be brought back: its turn {} ({:?}) does not run again from its journal: {e}",
                id.0, turn.number, turn.prompt
            ))
        };
        let (host, _) = loaded
            .host(&options, &server.tokio, Instant::now())
            .map_err(|e| failed(e.to_string()))?;
        let host = host
            .with_input(Box::new(std::io::empty()))
            .with_output(Box::new(std::io::sink()));
        program
            .run_main(&host, &turn.prompt, &session.context, None)
            .map_err(|(_, e)| failed(e))?;
    }
    *session.history.lock().unwrap_or_else(|e| e.into_inner()) = turns;
    Ok(session)
}
