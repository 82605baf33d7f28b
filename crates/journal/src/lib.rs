//! Durable runs: `sapc run FILE --journal PATH`, and each invocation of a procedure
//! served on Restate (`sapc serve --restate`).
//!
//! [`Journal`] decides what a run may reuse; a [`Store`] keeps the entries: for
//! `--journal` an SQLite database (WAL mode, `sqlite.rs`), for Restate the invocation's
//! own journal (`crates/restate`). The journal holds, for one program, every model
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

use sha2::{Digest, Sha256};

mod sqlite;

pub use sqlite::{Listing, Row, forget, read};

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

/// An entry as the journal keeps it in memory.
#[derive(Clone, Debug)]
struct Entry {
    kind: String,
    hash: Vec<u8>,
    /// `None` while the call is in flight.
    answer: Option<String>,
    name: String,
    site: String,
}

/// One journaled call as a [`Store`] keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub kind: String,
    pub name: String,
    pub site: String,
    pub path: String,
    /// The request's SHA-256.
    pub hash: Vec<u8>,
    pub request: String,
    /// `None` for a call that started and has not finished.
    pub answer: Option<String>,
}

impl Record {
    fn entry(&self) -> Entry {
        Entry {
            kind: self.kind.clone(),
            hash: self.hash.clone(),
            answer: self.answer.clone(),
            name: self.name.clone(),
            site: self.site.clone(),
        }
    }
}

/// A store's records, by key.
pub type Records = Vec<(Vec<u8>, Record)>;

/// Where a journal's entries are kept: an SQLite file (`--journal`), or a
/// durable-execution engine's own journal (Restate). The [`Journal`] decides what is
/// reused, what diverges and what is in flight; a store only keeps what it is given.
pub trait Store: Send + Sync {
    /// The journal, as messages name it: "the journal runs/a.db".
    fn name(&self) -> String;
    /// What a user does to make the call at `position` (`1.0.3`) run again, when it
    /// started and its end was never recorded.
    fn forget_hint(&self, position: &str) -> String;
    /// What a user does when the program no longer matches the journal.
    fn divergence_hint(&self) -> String;
    /// Keeps `record` at `key` (a position, [`key`]), replacing what was there; durably
    /// before returning unless `durable` is false (a `print`'s record).
    fn put(&self, key: &[u8], record: &Record, durable: bool) -> Result<(), JournalError>;
    /// Forgets the entry at `key`.
    fn delete(&self, key: &[u8]) -> Result<(), JournalError>;
    /// Forgets the entries at `keys`, all or none.
    fn delete_all(&self, keys: &[Vec<u8>]) -> Result<(), JournalError> {
        keys.iter().try_for_each(|k| self.delete(k))
    }
    /// The request journaled at `key`.
    fn request_at(&self, key: &[u8]) -> Result<String, JournalError>;
    /// The run ended: the journal is not resumed again.
    fn finish(&self) -> Result<(), JournalError>;
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
    /// For [`Journal::path`]: the SQLite file, when the store is one.
    path: Option<PathBuf>,
    policy: Policy,
    store: Box<dyn Store>,
    state: Mutex<State>,
}

/// A position as a key that sorts like the position: big-endian `u32`s compare as
/// SQLite compares BLOBs (bytes, then length), i.e. lexicographically.
pub fn key(position: &[u32]) -> Vec<u8> {
    position.iter().flat_map(|n| n.to_be_bytes()).collect()
}

/// A key as the position it is, as `sapc journal show` prints it: `1.0.3`.
pub fn position_of(key: &[u8]) -> String {
    key.chunks(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]).to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// The key of a position printed as `1.0.3`.
pub fn parse_position(text: &str) -> Option<Vec<u8>> {
    let parts: Option<Vec<u32>> = text.split('.').map(|p| p.parse().ok()).collect();
    parts.map(|p| key(&p))
}

/// A request's SHA-256, as records keep it.
pub fn hash(request: &str) -> Vec<u8> {
    Sha256::digest(request.as_bytes()).to_vec()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Journal {
    /// Opens (or creates) the SQLite journal at `path` for `program` (its canonical path).
    pub fn open(path: &Path, program: &str, policy: Policy) -> Result<Journal, JournalError> {
        let (store, records) = sqlite::SqliteStore::open(path, program)?;
        let mut journal = Journal::with_store(Box::new(store), records, policy);
        journal.path = Some(path.to_owned());
        Ok(journal)
    }

    /// A journal over `store`, holding `records` (what the store had, by key).
    pub fn with_store(
        store: Box<dyn Store>,
        records: impl IntoIterator<Item = (Vec<u8>, Record)>,
        policy: Policy,
    ) -> Journal {
        let entries = records.into_iter().map(|(k, r)| (k, r.entry())).collect();
        Journal {
            path: None,
            policy,
            store,
            state: Mutex::new(State {
                entries,
                diverged_at: None,
                served: HashSet::new(),
                resumed: Resumed::default(),
            }),
        }
    }

    /// The journal, as messages name it ("the journal runs/a.db").
    pub fn name(&self) -> String {
        self.store.name()
    }

    /// The SQLite file, when the journal is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// What this run has taken from the journal so far.
    pub fn resumed(&self) -> Resumed {
        self.lock_state().resumed
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
            let message = divergence(call, entry, &old, self.store.as_ref());
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
                "`{}` ({}) had started when the journaled run stopped, and its end was never recorded: it may have had its effect. Check, then {} to call it again (or declare it `idempotent extern fn` if calling it twice is harmless)",
                call.name,
                call.site,
                self.store.forget_hint(&position_of(&k))
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
        self.store.request_at(k)
    }

    /// Forgets every entry at or after `from` that this run has not used.
    fn forget_from(&self, state: &mut State, from: &[u8]) -> Result<(), JournalError> {
        let stale: Vec<Vec<u8>> = state
            .entries
            .keys()
            .filter(|k| k.as_slice() >= from && !state.served.contains(*k))
            .cloned()
            .collect();
        self.store.delete_all(&stale)?;
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
        self.store.delete(&k)?;
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
        let record = Record {
            kind: call.kind.as_str().to_owned(),
            name: call.name.to_owned(),
            site: call.site.to_owned(),
            path: call.path.to_owned(),
            hash: hash(call.request),
            request: call.request.to_owned(),
            answer: answer.map(str::to_owned),
        };
        self.store.put(&k, &record, durable)?;
        self.lock_state().entries.insert(k, record.entry());
        Ok(())
    }

    /// Marks the run finished: the journal is not resumed again.
    pub fn finish_run(&self) -> Result<(), JournalError> {
        self.store.finish()
    }
}

/// The message for a call that no longer matches its journal entry: the site, and the
/// first line where the old and the new request differ.
fn divergence(call: &Call<'_>, entry: &Entry, old: &str, store: &dyn Store) -> String {
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
        "the program no longer matches {}: the {} call of `{}` at {}{} diverges; {what}\n{}",
        store.name(),
        call.kind.as_str(),
        call.name,
        call.site,
        if call.path.is_empty() {
            String::new()
        } else {
            format!(" (path {})", call.path)
        },
        store.divergence_hint()
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

#[cfg(test)]
mod tests;

/// `text` cut to `most` characters, with an ellipsis when cut.
fn shorten(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
