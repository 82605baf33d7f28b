//! The journal of one invocation, kept in Restate's own journal.
//!
//! Restate matches an attempt's steps with the journal by their order, and its Rust SDK
//! cannot have several steps in flight at once, while a program's effects happen in
//! whatever order its `parallel for` iterations reach them. So effects are not steps of
//! their own: the program's threads hand what they journal to the handler's task, which
//! records whatever has queued as one step (`ctx.run("bN")`, its value the batch) and
//! only then acknowledges. The steps' names and order do not depend on timing, only their
//! contents do, and the contents are what the journal keeps. An attempt first reads the
//! batches back, `b0, b1, …`, until one's closure runs (the journal's end): that is
//! the journal the program resumes against, by position, as `--journal`'s.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::mpsc::sync_channel;

use journal::{JournalError, Record, Store};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

/// One change to the journal, as a batch records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A call at its place in the program's order (`1.0.3`): started (no answer) or done.
    Put {
        at: String,
        kind: String,
        name: String,
        site: String,
        path: String,
        /// The request's SHA-256, in hex.
        hash: String,
        request: String,
        answer: Option<String>,
    },
    /// A call that failed: the next attempt calls it again.
    Forget { at: String },
}

/// A change on its way to the handler's task, with whom to tell once it is recorded.
pub struct Write {
    pub op: Op,
    pub recorded: Option<std::sync::mpsc::SyncSender<()>>,
}

/// The records of the batches an attempt read back, by key, in the order written.
pub fn replay(batches: impl IntoIterator<Item = Op>) -> Vec<(Vec<u8>, Record)> {
    let mut records: Vec<(Vec<u8>, Record)> = Vec::new();
    for op in batches {
        match op {
            Op::Put {
                at,
                kind,
                name,
                site,
                path,
                hash,
                request,
                answer,
            } => {
                let Some(key) = journal::parse_position(&at) else {
                    continue;
                };
                let record = Record {
                    kind,
                    name,
                    site,
                    path,
                    hash: unhex(&hash),
                    request,
                    answer,
                };
                match records.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = record,
                    None => records.push((key, record)),
                }
            }
            Op::Forget { at } => {
                if let Some(key) = journal::parse_position(&at) {
                    records.retain(|(k, _)| *k != key);
                }
            }
        }
    }
    records
}

/// The [`Store`] of one invocation: writes go to the handler's task.
pub struct RestateStore {
    invocation: String,
    writes: UnboundedSender<Write>,
    /// The requests journaled, for a divergence's message.
    requests: Mutex<HashMap<Vec<u8>, String>>,
}

impl RestateStore {
    pub fn new(
        invocation: &str,
        writes: UnboundedSender<Write>,
        records: &[(Vec<u8>, Record)],
    ) -> Self {
        RestateStore {
            invocation: invocation.to_owned(),
            writes,
            requests: Mutex::new(
                records
                    .iter()
                    .map(|(k, r)| (k.clone(), r.request.clone()))
                    .collect(),
            ),
        }
    }

    /// Hands `op` to the handler's task; waits until it is in Restate's journal unless
    /// `durable` is false.
    fn send(&self, op: Op, durable: bool) -> Result<(), JournalError> {
        let gone = || {
            JournalError::Storage(format!(
                "the invocation {} ended before its journal recorded the call",
                self.invocation
            ))
        };
        let (recorded, done) = if durable {
            let (tx, rx) = sync_channel(1);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.writes
            .send(Write { op, recorded })
            .map_err(|_| gone())?;
        match done {
            Some(rx) => rx.recv().map_err(|_| gone()),
            None => Ok(()),
        }
    }
}

impl Store for RestateStore {
    fn name(&self) -> String {
        format!("Restate's journal of the invocation {}", self.invocation)
    }

    fn forget_hint(&self, _position: &str) -> String {
        format!(
            "cancel the invocation (`restate invocations cancel {}`) and invoke the procedure again",
            self.invocation
        )
    }

    fn divergence_hint(&self) -> String {
        "A worker serves one version of a program and an invocation stays with the version it started on, so this is a bug: invoke the procedure again".to_owned()
    }

    fn put(&self, key: &[u8], record: &Record, durable: bool) -> Result<(), JournalError> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_vec(), record.request.clone());
        self.send(
            Op::Put {
                at: journal::position_of(key),
                kind: record.kind.clone(),
                name: record.name.clone(),
                site: record.site.clone(),
                path: record.path.clone(),
                hash: hex(&record.hash),
                request: record.request.clone(),
                answer: record.answer.clone(),
            },
            durable,
        )
    }

    fn delete(&self, key: &[u8]) -> Result<(), JournalError> {
        self.send(
            Op::Forget {
                at: journal::position_of(key),
            },
            true,
        )
    }

    fn request_at(&self, key: &[u8]) -> Result<String, JournalError> {
        Ok(self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
            .unwrap_or_default())
    }

    fn finish(&self) -> Result<(), JournalError> {
        // The invocation's output ends it: Restate does not run it again.
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(at: &str, answer: Option<&str>) -> Op {
        Op::Put {
            at: at.to_owned(),
            kind: "llm".to_owned(),
            name: "f".to_owned(),
            site: "a.sap:1:1".to_owned(),
            path: "main".to_owned(),
            hash: hex(&journal::hash("q")),
            request: "q".to_owned(),
            answer: answer.map(str::to_owned),
        }
    }

    #[test]
    fn batches_replay_to_the_last_write_of_each_place() {
        let records = replay([
            put("0", None),
            put("1.0.0", Some("a")),
            put("0", Some("done")),
            put("2", Some("b")),
            Op::Forget { at: "2".to_owned() },
        ]);
        let got: Vec<(String, Option<String>)> = records
            .iter()
            .map(|(k, r)| (journal::position_of(k), r.answer.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("0".to_owned(), Some("done".to_owned())),
                ("1.0.0".to_owned(), Some("a".to_owned()))
            ]
        );
        assert_eq!(records[0].1.hash, journal::hash("q"));
    }

    #[test]
    fn a_batch_reads_back_as_it_was_written() {
        let batch = vec![put("3.1", Some("x")), Op::Forget { at: "4".to_owned() }];
        let text = serde_json::to_string(&batch).unwrap();
        let back: Vec<Op> = serde_json::from_str(&text).unwrap();
        assert_eq!(replay(back).len(), 1);
    }
}
