//! The `--journal` store: an SQLite file (WAL mode) per run, and what `sapc journal
//! show` and `sapc journal forget` do with one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use crate::{JournalError, Record, Records, Store, VERSION, now_ms, parse_position, position_of};

/// An SQLite journal: one file per run, locked while the run holds it.
pub(crate) struct SqliteStore {
    path: PathBuf,
    /// This run's number: 1 for the first, 2 for the first resume, ….
    run: i64,
    conn: Mutex<Connection>,
    /// The run's lock on the file: one run per journal at a time.
    _lock: std::fs::File,
}

impl SqliteStore {
    /// Opens (or creates) the journal at `path` for `program` (its canonical path): the
    /// store, and what it holds.
    pub(crate) fn open(path: &Path, program: &str) -> Result<(SqliteStore, Records), JournalError> {
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
        let mut records = Vec::new();
        {
            let mut stmt = conn
                .prepare("SELECT position, kind, name, site, path, hash, answer FROM calls")
                .map_err(&err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, Vec<u8>>(0)?,
                        Record {
                            kind: r.get(1)?,
                            name: r.get(2)?,
                            site: r.get(3)?,
                            path: r.get(4)?,
                            hash: r.get(5)?,
                            // Read when a divergence is reported (`request_at`).
                            request: String::new(),
                            answer: r.get(6)?,
                        },
                    ))
                })
                .map_err(&err)?;
            for row in rows {
                records.push(row.map_err(&err)?);
            }
        }
        Ok((
            SqliteStore {
                path: path.to_owned(),
                run,
                conn: Mutex::new(conn),
                _lock: lock,
            },
            records,
        ))
    }

    fn lock_conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store for SqliteStore {
    fn name(&self) -> String {
        format!("the journal {}", self.path.display())
    }

    fn forget_hint(&self, position: &str) -> String {
        format!(
            "run `sapc journal forget {} {position}`",
            self.path.display()
        )
    }

    fn divergence_hint(&self) -> String {
        "Run with `--journal-policy rerun-changed` to call the model (and the tools) again from this call on, or give another journal path to start over".to_owned()
    }

    fn put(&self, key: &[u8], record: &Record, durable: bool) -> Result<(), JournalError> {
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
                key,
                record.kind,
                record.name,
                record.site,
                record.path,
                record.hash,
                record.request,
                record.answer,
                now_ms(),
                self.run
            ],
        );
        if !durable {
            conn.pragma_update(None, "synchronous", "FULL")
                .map_err(&err)?;
        }
        result.map_err(&err)?;
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<(), JournalError> {
        self.lock_conn()
            .execute("DELETE FROM calls WHERE position = ?1", [key])
            .map_err(storage(&self.path))?;
        Ok(())
    }

    fn delete_all(&self, keys: &[Vec<u8>]) -> Result<(), JournalError> {
        let mut conn = self.lock_conn();
        let tx = conn.transaction().map_err(storage(&self.path))?;
        for k in keys {
            tx.execute("DELETE FROM calls WHERE position = ?1", [k])
                .map_err(storage(&self.path))?;
        }
        tx.commit().map_err(storage(&self.path))
    }

    fn request_at(&self, key: &[u8]) -> Result<String, JournalError> {
        self.lock_conn()
            .query_row(
                "SELECT request FROM calls WHERE position = ?1",
                [key],
                |r| r.get(0),
            )
            .map_err(storage(&self.path))
    }

    fn finish(&self) -> Result<(), JournalError> {
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
