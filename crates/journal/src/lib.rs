//! Durable runs: `sapc run FILE --journal PATH`.
//!
//! The journal is an SQLite database (WAL mode) holding, for one program, every model
//! call, extern call, `input` line and `print` of its run, keyed by the call's place in
//! the program's own order (`runtime::order`: the thread of control's sequence, and the
//! index of each fan-out iteration it is under), so the key does not depend on timing.
//! Each entry also keeps the request's SHA-256, the request itself, the call site and
//! its call path.
//!
//! - A model or extern call's answer is committed (synchronously: fsync) before the
//!   program uses it. Running the same command again answers journaled calls from the
//!   journal, so a resumed run repeats no request.
//! - An extern that is not `idempotent` is journaled as *started* (fsync) before it is
//!   called. A run that finds a started call with no answer stops and names it: it may
//!   have had its effect. `sapc journal forget` lets it run again.
//! - A `print` is journaled after it is written (WAL, no fsync: it survives the process
//!   being killed, and is made durable by the next call's commit), and not written again.
//! - A journaled call whose request differs from the one the program now makes is a
//!   divergence: the run stops and names the call site, the old and the new request,
//!   or, under [`Policy::RerunChanged`], forgets the journal from that place on and
//!   calls again.
//!
//! One run at a time: a run holds an advisory lock on the file; `sapc journal show`
//! reads while a run writes (WAL).

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

/// The schema's version; a journal from another version is refused, not misread.
const VERSION: i64 = 1;

/// What a resumed run does when a journaled call no longer matches the program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Stop and name the first call that diverges (the default).
    #[default]
    Stop,
    /// Forget the journal from the first diverging call on, and call again from there.
    RerunChanged,
}

/// The kinds of journaled call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Llm,
    Extern,
    Input,
    Print,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Llm => "llm",
            Kind::Extern => "extern",
            Kind::Input => "input",
            Kind::Print => "print",
        }
    }
}

/// One call, as the journal keys and describes it.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub kind: Kind,
    /// Its place in the program's order (`runtime::order::Position`).
    pub position: &'a [u32],
    /// The function a model call answers for, or the extern called.
    pub name: &'a str,
    /// `file:line:column`.
    pub site: &'a str,
    /// The functions on the call path, outermost first, joined by ` > `.
    pub path: &'a str,
    /// The request, as text: what must match for a journaled answer to be reused.
    pub request: &'a str,
}

/// What the journal holds for a call.
#[derive(Debug, PartialEq)]
pub enum Found {
    /// The answer of an earlier run: use it.
    Answer(String),
    /// Nothing: make the call.
    New,
}

#[derive(Debug)]
pub enum JournalError {
    /// The file is not a journal, is from another version, or SQLite failed.
    Storage(String),
    /// Another run holds the journal.
    Busy(PathBuf),
    /// The journal belongs to another program, or to a run that finished.
    Mismatch(String),
    /// A journaled call no longer matches the program.
    Diverged(String),
    /// A call that is not `idempotent` started and never finished.
    InFlight(String),
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Storage(m)
            | JournalError::Mismatch(m)
            | JournalError::Diverged(m)
            | JournalError::InFlight(m) => f.write_str(m),
            JournalError::Busy(path) => write!(
                f,
                "the journal {} is in use by another run (is a `sapc run` with it still running?)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for JournalError {}

fn storage(path: &Path) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
    move |e| {
        if let rusqlite::Error::SqliteFailure(f, _) = &e
            && matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        {
            return JournalError::Busy(path.to_owned());
        }
        if let rusqlite::Error::SqliteFailure(f, _) = &e
            && f.code == rusqlite::ErrorCode::NotADatabase
        {
            return JournalError::Storage(format!(
                "{} is not a sap journal (not an SQLite database)",
                path.display()
            ));
        }
        JournalError::Storage(format!("the journal {}: {e}", path.display()))
    }
}

/// An entry as loaded when the journal is opened.
#[derive(Clone, Debug)]
struct Entry {
    kind: String,
    hash: Vec<u8>,
    /// `None` while the call is in flight.
    answer: Option<String>,
    name: String,
    site: String,
}

/// What a resumed run took from the journal (for `--stats` and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resumed {
    pub llm_calls: u64,
    pub extern_calls: u64,
    pub inputs: u64,
    pub prints: u64,
}

struct State {
    entries: HashMap<Vec<u8>, Entry>,
    /// Under [`Policy::RerunChanged`], the first place that diverged: nothing at or
    /// after it is taken from the journal.
    diverged_at: Option<Vec<u8>>,
    /// Places answered from the journal in this run (kept when forgetting the rest).
    served: HashSet<Vec<u8>>,
    resumed: Resumed,
}

pub struct Journal {
    path: PathBuf,
    /// This run's number: 1 for the first, 2 for the first resume, ….
    run: i64,
    policy: Policy,
    conn: Mutex<Connection>,
    state: Mutex<State>,
    /// The run's lock on the file: one run per journal at a time.
    _lock: std::fs::File,
}

/// A position as a key that sorts like the position: big-endian `u32`s compare as
/// SQLite compares BLOBs (bytes, then length), i.e. lexicographically.
fn key(position: &[u32]) -> Vec<u8> {
    position.iter().flat_map(|n| n.to_be_bytes()).collect()
}

fn position_of(key: &[u8]) -> String {
    key.chunks(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]).to_string())
        .collect::<Vec<_>>()
        .join(".")
}

fn parse_position(text: &str) -> Option<Vec<u8>> {
    let parts: Option<Vec<u32>> = text.split('.').map(|p| p.parse().ok()).collect();
    parts.map(|p| key(&p))
}

fn hash(request: &str) -> Vec<u8> {
    Sha256::digest(request.as_bytes()).to_vec()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Takes the run's lock on the journal: an advisory lock on the file, held while the
/// returned handle lives. (SQLite's own locks are per transaction; readers such as
/// `sapc journal show` still read while a run writes.)
fn hold(path: &Path) -> Result<std::fs::File, JournalError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| JournalError::Storage(format!("the journal {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(JournalError::Busy(path.to_owned())),
        Err(std::fs::TryLockError::Error(e)) => Err(JournalError::Storage(format!(
            "the journal {}: cannot lock it: {e}",
            path.display()
        ))),
    }
}

fn open_connection(path: &Path) -> Result<(Connection, std::fs::File), JournalError> {
    let err = storage(path);
    let conn = Connection::open(path).map_err(&err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(&err)?;
    let lock = hold(path)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(&err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(JournalError::Storage(format!(
            "the journal {}: SQLite would not use WAL mode here ({mode})",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(&err)?;
    Ok((conn, lock))
}

impl Journal {
    /// Opens (or creates) the journal at `path` for `program` (its canonical path).
    pub fn open(path: &Path, program: &str, policy: Policy) -> Result<Journal, JournalError> {
        let (conn, lock) = open_connection(path)?;
        let err = storage(path);
        conn.execute_batch(
            "BEGIN IMMEDIATE;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS calls (
                 position BLOB PRIMARY KEY,
                 kind TEXT NOT NULL,
                 name TEXT NOT NULL,
                 site TEXT NOT NULL,
                 path TEXT NOT NULL,
                 hash BLOB NOT NULL,
                 request TEXT NOT NULL,
                 answer TEXT,
                 at_ms INTEGER NOT NULL,
                 run INTEGER NOT NULL
             ) WITHOUT ROWID;",
        )
        .map_err(&err)?;
        let meta = |k: &str| -> Result<Option<String>, JournalError> {
            conn.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
                .optional()
                .map_err(&err)
        };
        match meta("version")? {
            None => {}
            Some(v) if v == VERSION.to_string() => {}
            Some(v) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(JournalError::Storage(format!(
                    "the journal {} has format version {v}; this sapc reads version {VERSION}",
                    path.display()
                )));
            }
        }
        if let Some(other) = meta("program")?
            && other != program
        {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(JournalError::Mismatch(format!(
                "the journal {} belongs to a run of {other}, not of {program}",
                path.display()
            )));
        }
        if meta("finished")?.is_some() {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(JournalError::Mismatch(format!(
                "the journal {} holds a run that finished: there is nothing to resume; give another path to start a new run, or see it with `sapc journal show {}`",
                path.display(),
                path.display()
            )));
        }
        let run: i64 = meta("runs")?.and_then(|r| r.parse().ok()).unwrap_or(0) + 1;
        for (k, v) in [
            ("version", VERSION.to_string()),
            ("program", program.to_owned()),
            ("runs", run.to_string()),
        ] {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![k, v],
            )
            .map_err(&err)?;
        }
        conn.execute_batch("COMMIT").map_err(&err)?;
        let mut entries = HashMap::new();
        {
            let mut stmt = conn
                .prepare("SELECT position, kind, hash, answer, name, site FROM calls")
                .map_err(&err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, Vec<u8>>(0)?,
                        Entry {
                            kind: r.get(1)?,
                            hash: r.get(2)?,
                            answer: r.get(3)?,
                            name: r.get(4)?,
                            site: r.get(5)?,
                        },
                    ))
                })
                .map_err(&err)?;
            for row in rows {
                let (k, e) = row.map_err(&err)?;
                entries.insert(k, e);
            }
        }
        Ok(Journal {
            path: path.to_owned(),
            run,
            policy,
            conn: Mutex::new(conn),
            _lock: lock,
            state: Mutex::new(State {
                entries,
                diverged_at: None,
                served: HashSet::new(),
                resumed: Resumed::default(),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What this run has taken from the journal so far.
    pub fn resumed(&self) -> Resumed {
        self.lock_state().resumed
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer the journal holds for `call`, if it may be used. A call that does not
    /// match what was journaled at its place is a divergence; one that started and never
    /// finished is in flight (an error unless `idempotent`).
    pub fn lookup(&self, call: &Call<'_>, idempotent: bool) -> Result<Found, JournalError> {
        let k = key(call.position);
        let mut state = self.lock_state();
        if state.diverged_at.as_ref().is_some_and(|d| &k >= d) {
            return Ok(Found::New);
        }
        let Some(entry) = state.entries.get(&k) else {
            return Ok(Found::New);
        };
        if entry.kind != call.kind.as_str() || entry.hash != hash(call.request) {
            let old = self.request_at(&k)?;
            let message = divergence(call, entry, &old, &self.path);
            return match self.policy {
                Policy::Stop => Err(JournalError::Diverged(message)),
                Policy::RerunChanged => {
                    self.forget_from(&mut state, &k)?;
                    Ok(Found::New)
                }
            };
        }
        let Some(answer) = entry.answer.clone() else {
            if idempotent {
                return Ok(Found::New);
            }
            return Err(JournalError::InFlight(format!(
                "`{}` ({}) had started when the journaled run stopped, and its end was never recorded: it may have had its effect. Check, then run `sapc journal forget {} {}` to call it again (or declare it `idempotent extern fn` if calling it twice is harmless)",
                call.name,
                call.site,
                self.path.display(),
                position_of(&k)
            )));
        };
        state.served.insert(k);
        let counter = match call.kind {
            Kind::Llm => &mut state.resumed.llm_calls,
            Kind::Extern => &mut state.resumed.extern_calls,
            Kind::Input => &mut state.resumed.inputs,
            Kind::Print => &mut state.resumed.prints,
        };
        *counter += 1;
        Ok(Found::Answer(answer))
    }

    fn request_at(&self, k: &[u8]) -> Result<String, JournalError> {
        self.lock_conn()
            .query_row("SELECT request FROM calls WHERE position = ?1", [k], |r| {
                r.get(0)
            })
            .map_err(storage(&self.path))
    }

    /// Forgets every entry at or after `from` that this run has not used.
    fn forget_from(&self, state: &mut State, from: &[u8]) -> Result<(), JournalError> {
        let stale: Vec<Vec<u8>> = state
            .entries
            .keys()
            .filter(|k| k.as_slice() >= from && !state.served.contains(*k))
            .cloned()
            .collect();
        let mut conn = self.lock_conn();
        let tx = conn.transaction().map_err(storage(&self.path))?;
        for k in &stale {
            tx.execute("DELETE FROM calls WHERE position = ?1", [k])
                .map_err(storage(&self.path))?;
        }
        tx.commit().map_err(storage(&self.path))?;
        for k in &stale {
            state.entries.remove(k);
        }
        state.diverged_at = Some(from.to_vec());
        Ok(())
    }

    /// Records that `call` is starting (durably): if the run dies before
    /// [`Journal::finish`], the next run will not call it again silently.
    pub fn begin(&self, call: &Call<'_>) -> Result<(), JournalError> {
        self.write(call, None, true)
    }

    /// Records `call`'s answer, durably, before the program uses it.
    pub fn finish(&self, call: &Call<'_>, answer: &str) -> Result<(), JournalError> {
        self.write(call, Some(answer), true)
    }

    /// Records a `print` that was written: no fsync (it survives the process being
    /// killed; the next call's commit makes it durable).
    pub fn printed(&self, call: &Call<'_>, text: &str) -> Result<(), JournalError> {
        self.write(call, Some(text), false)
    }

    /// Forgets a call that failed, so the next run calls it again.
    pub fn failed(&self, call: &Call<'_>) -> Result<(), JournalError> {
        let k = key(call.position);
        self.lock_conn()
            .execute("DELETE FROM calls WHERE position = ?1", [&k])
            .map_err(storage(&self.path))?;
        self.lock_state().entries.remove(&k);
        Ok(())
    }

    fn write(
        &self,
        call: &Call<'_>,
        answer: Option<&str>,
        durable: bool,
    ) -> Result<(), JournalError> {
        let k = key(call.position);
        let h = hash(call.request);
        {
            let conn = self.lock_conn();
            let err = storage(&self.path);
            if !durable {
                conn.pragma_update(None, "synchronous", "NORMAL")
                    .map_err(&err)?;
            }
            let result = conn.execute(
                "INSERT INTO calls (position, kind, name, site, path, hash, request, answer, at_ms, run)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (position) DO UPDATE SET kind = excluded.kind, name = excluded.name,
                   site = excluded.site, path = excluded.path, hash = excluded.hash,
                   request = excluded.request, answer = excluded.answer, at_ms = excluded.at_ms",
                params![
                    k,
                    call.kind.as_str(),
                    call.name,
                    call.site,
                    call.path,
                    h,
                    call.request,
                    answer,
                    now_ms(),
                    self.run
                ],
            );
            if !durable {
                conn.pragma_update(None, "synchronous", "FULL")
                    .map_err(&err)?;
            }
            result.map_err(&err)?;
        }
        self.lock_state().entries.insert(
            k,
            Entry {
                kind: call.kind.as_str().to_owned(),
                hash: h,
                answer: answer.map(str::to_owned),
                name: call.name.to_owned(),
                site: call.site.to_owned(),
            },
        );
        Ok(())
    }

    /// Marks the run finished: the journal is not resumed again.
    pub fn finish_run(&self) -> Result<(), JournalError> {
        self.lock_conn()
            .execute(
                "INSERT INTO meta (key, value) VALUES ('finished', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [now_ms().to_string()],
            )
            .map_err(storage(&self.path))?;
        Ok(())
    }
}

/// The message for a call that no longer matches its journal entry: the site, and the
/// first line where the old and the new request differ.
fn divergence(call: &Call<'_>, entry: &Entry, old: &str, path: &Path) -> String {
    let what = if entry.kind != call.kind.as_str() {
        format!(
            "the journal has a {} call of `{}` ({}) there, and the program now makes a {} call of `{}`",
            entry.kind,
            entry.name,
            entry.site,
            call.kind.as_str(),
            call.name
        )
    } else {
        let (line, before, after) = first_difference(old, call.request);
        format!(
            "its request changed at line {line}:\n  journaled: {}\n  now:       {}",
            shorten(before, 300),
            shorten(after, 300)
        )
    };
    format!(
        "the program no longer matches the journal {}: the {} call of `{}` at {}{} diverges; {what}\nRun with `--journal-policy rerun-changed` to call the model (and the tools) again from this call on, or give another journal path to start over",
        path.display(),
        call.kind.as_str(),
        call.name,
        call.site,
        if call.path.is_empty() {
            String::new()
        } else {
            format!(" (path {})", call.path)
        }
    )
}

/// The 1-based number of the first line where `a` and `b` differ, and those lines.
fn first_difference<'a>(a: &'a str, b: &'a str) -> (usize, &'a str, &'a str) {
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (x, y) => return (n, x.unwrap_or("(nothing)"), y.unwrap_or("(nothing)")),
        }
    }
}

/// One row of `sapc journal show`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub position: String,
    pub kind: String,
    pub name: String,
    pub site: String,
    pub path: String,
    /// `None` for a call that started and never finished.
    pub answer: Option<String>,
    pub at_ms: i64,
}

/// A journal's metadata (program, runs, finished) and its calls.
pub type Listing = (Vec<(String, String)>, Vec<Row>);

/// What `sapc journal show` prints: the program, whether it finished, and the calls in
/// program order. Opens the file read-only; a running run's journal is busy.
pub fn read(path: &Path) -> Result<Listing, JournalError> {
    if !path.exists() {
        return Err(JournalError::Storage(format!(
            "there is no journal at {}",
            path.display()
        )));
    }
    let err = storage(path);
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(&err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(&err)?;
    let meta = {
        let mut stmt = conn
            .prepare("SELECT key, value FROM meta ORDER BY key")
            .map_err(&err)?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(&err)?
            .collect::<Result<Vec<(String, String)>, _>>()
            .map_err(&err)?
    };
    let mut stmt = conn
        .prepare(
            "SELECT position, kind, name, site, path, answer, at_ms FROM calls ORDER BY position",
        )
        .map_err(&err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Row {
                position: position_of(&r.get::<_, Vec<u8>>(0)?),
                kind: r.get(1)?,
                name: r.get(2)?,
                site: r.get(3)?,
                path: r.get(4)?,
                answer: r.get(5)?,
                at_ms: r.get(6)?,
            })
        })
        .map_err(&err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&err)?;
    Ok((meta, rows))
}

/// Forgets the entry at `position` (`1.0.3`, as `sapc journal show` prints it): the next
/// run makes that call again. Returns whether there was one.
pub fn forget(path: &Path, position: &str) -> Result<bool, JournalError> {
    let k = parse_position(position).ok_or_else(|| {
        JournalError::Storage(format!(
            "`{position}` is not a position (numbers separated by dots, as `sapc journal show` prints them)"
        ))
    })?;
    if !path.exists() {
        return Err(JournalError::Storage(format!(
            "there is no journal at {}",
            path.display()
        )));
    }
    let (conn, _lock) = open_connection(path)?;
    let n = conn
        .execute("DELETE FROM calls WHERE position = ?1", [&k])
        .map_err(storage(path))?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests;

/// `text` cut to `most` characters, with an ellipsis when cut.
fn shorten(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
