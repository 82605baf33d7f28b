//! Hot reload: the program's folder is watched (`notify`); when a `.sap` file or
//! `sap.toml` in it changes, the program is checked again. With errors, every session
//! is told (the diagnostics with their files and lines) and the old program keeps
//! serving; without, the next prompt runs the new one, in the session's context as it
//! is. A turn running meanwhile finishes on the program it started with. `/reload`
//! does the same on demand.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema as acp;
use notify::{EventKind, RecursiveMode, Watcher};
use session::{Engine, Failure};

use crate::updates::Updates;
use crate::{Program, Server, entry};

/// How long changes are gathered before checking: an editor's save is several events.
const SETTLE: Duration = Duration::from_millis(100);

/// Watches the program's folder; the watcher stops when dropped.
pub fn watch(
    server: Arc<Server>,
    tokio: &tokio::runtime::Handle,
) -> Result<notify::RecommendedWatcher, String> {
    let dir = match server.file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => Path::new(".").to_owned(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let changed = matches!(
            event.kind,
            EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
        );
        let ours = event.paths.iter().any(|p| {
            p.extension().is_some_and(|e| e == "sap")
                || p.file_name().is_some_and(|n| n == "sap.toml")
        });
        if changed && ours {
            let _ = tx.send(());
        }
    })
    .map_err(|e| e.to_string())?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    tokio.spawn(async move {
        while rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while rx.try_recv().is_ok() {}
            let (ok, report) = check(&server).await;
            eprintln!("sapc acp: {report}");
            tell(&server, &report, ok);
        }
    });
    Ok(watcher)
}

/// `/reload`: checks the program again now; what came of it, for the client.
pub async fn now(server: &Arc<Server>) -> String {
    check(server).await.1
}

/// Checks the program's files again, and serves the new program when they check.
async fn check(server: &Arc<Server>) -> (bool, String) {
    let file = server.file.clone();
    let loaded = tokio::task::spawn_blocking(move || session::load(&file, Engine::Jit)).await;
    let shown = server.file.display();
    let failed = |why: String| {
        (
            false,
            format!("{shown} was not reloaded; the program before it keeps serving:\n{why}"),
        )
    };
    match loaded {
        Ok(Ok(loaded)) => match entry(&loaded) {
            Ok(entry) => {
                *server.program.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Program {
                    loaded: Arc::new(loaded),
                    entry,
                });
                (
                    true,
                    format!("reloaded {shown}: the next prompt runs the new program"),
                )
            }
            Err(e) => failed(e),
        },
        Ok(Err(Failure::Diagnostics(d))) => failed(d.text()),
        Ok(Err(e)) => failed(e.to_string()),
        Err(e) => failed(e.to_string()),
    }
}

/// Tells the sessions what a reload the watcher started came to: a failure to every
/// session, a success to those not in a turn.
fn tell(server: &Server, report: &str, ok: bool) {
    let Some(cx) = server
        .connection
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
    else {
        return;
    };
    let sessions: Vec<_> = server
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    for session in sessions {
        let busy = session
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if ok && busy {
            continue;
        }
        Updates::new(cx.clone(), session.id.clone()).send_unkept(
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(
                format!("sap: {report}\n").into(),
            )),
        );
    }
}
