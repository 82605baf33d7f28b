//! Transcripts: a recording provider writes every request and answer of a run to a file
//! (one JSON object per line, no headers, secrets scrubbed); a replay provider answers
//! from such a file with no network, and fails clearly on a request that is not in it.
//! The same request asked again (a loop) gets the recorded answers in order.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value as JsonValue, json};

use llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

fn response_to_json(r: &LlmResponse) -> JsonValue {
    let (finish, refusal) = match &r.finish {
        Finish::Stop => ("stop", None),
        Finish::Length => ("length", None),
        Finish::Refusal(m) => ("refusal", Some(m.clone())),
        Finish::Other(o) => (o.as_str(), None),
    };
    json!({
        "text": r.text,
        "finish": finish,
        "refusal": refusal,
        "usage": { "input": r.usage.input, "output": r.usage.output, "cached": r.usage.cached },
    })
}

fn response_from_json(j: &JsonValue) -> Option<LlmResponse> {
    let text = j.get("text")?.as_str()?.to_owned();
    let finish = match j
        .get("finish")
        .and_then(JsonValue::as_str)
        .unwrap_or("stop")
    {
        "stop" => Finish::Stop,
        "length" => Finish::Length,
        "refusal" => Finish::Refusal(
            j.get("refusal")
                .and_then(JsonValue::as_str)
                .unwrap_or("")
                .to_owned(),
        ),
        other => Finish::Other(other.to_owned()),
    };
    let n = |k: &str| {
        j.pointer(&format!("/usage/{k}"))
            .and_then(JsonValue::as_u64)
            .unwrap_or(0)
    };
    Some(LlmResponse {
        text,
        finish,
        usage: Usage {
            input: n("input"),
            output: n("output"),
            cached: n("cached"),
        },
        retries: 0,
        structured: None,
        sampling: None,
    })
}

/// The key a request is found by: its canonical JSON without the schema. The schema
/// follows from the call site's type, and its wording may change between versions of
/// sap (a keyword added where targets enforce it); a transcript stays valid across such
/// changes, and an answer that no longer fits its type fails validation like any other.
fn key(request: &LlmRequest) -> String {
    key_of(&request.to_json())
}

fn key_of(request: &JsonValue) -> String {
    match request {
        JsonValue::Object(map) if map.contains_key("schema") => {
            let mut map = map.clone();
            map.shift_remove("schema");
            JsonValue::Object(map).to_string()
        }
        other => other.to_string(),
    }
}

pub struct ReplayProvider {
    answers: Mutex<HashMap<String, VecDeque<LlmResponse>>>,
    source: String,
    /// For a served program, whose every call is a run of its own: a request whose
    /// recorded answers are used up gets them again, from the first.
    recorded: Option<HashMap<String, VecDeque<LlmResponse>>>,
}

impl ReplayProvider {
    /// Reads a transcript file.
    pub fn from_file(path: &Path) -> Result<ReplayProvider, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the transcript {}: {e}", path.display()))?;
        ReplayProvider::from_text(&text, &path.display().to_string())
    }

    pub fn from_text(text: &str, source: &str) -> Result<ReplayProvider, String> {
        let mut answers: HashMap<String, VecDeque<LlmResponse>> = HashMap::new();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let entry: JsonValue = serde_json::from_str(line)
                .map_err(|e| format!("{source}:{}: not a transcript entry: {e}", i + 1))?;
            let (Some(request), Some(response)) = (
                entry.get("request"),
                entry.get("response").and_then(response_from_json),
            ) else {
                return Err(format!(
                    "{source}:{}: a transcript entry needs `request` and `response`",
                    i + 1
                ));
            };
            answers
                .entry(key_of(request))
                .or_default()
                .push_back(response);
        }
        Ok(ReplayProvider {
            answers: Mutex::new(answers),
            source: source.to_owned(),
            recorded: None,
        })
    }

    /// This replay, for a served program: each call is a run of its own, so a request
    /// whose recorded answers were all given gets them again, in order.
    pub fn repeating(mut self) -> ReplayProvider {
        self.recorded = Some(
            self.answers
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        );
        self
    }
}

impl ReplayProvider {
    /// How many recorded answers no request has taken yet: a run that asked the model
    /// fewer times than the recording did leaves some.
    pub fn unanswered(&self) -> usize {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(VecDeque::len)
            .sum()
    }
}

impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        let key = key(request);
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let mut answer = answers.get_mut(&key).and_then(VecDeque::pop_front);
        if answer.is_none()
            && let Some(again) = self.recorded.as_ref().and_then(|r| r.get(&key))
        {
            let mut again = again.clone();
            answer = again.pop_front();
            answers.insert(key, again);
        }
        drop(answers);
        Box::pin(async move {
            answer.ok_or_else(|| {
                ProviderError::NotRecorded(format!(
                    "the transcript {} has no (more) answers for this request; record one by running with a live provider and `--record`",
                    self.source
                ))
            })
        })
    }
}

/// A transcript line and where its call stands in the program's order.
type PlacedLine = (llm::Position, String);

/// Wraps a provider and appends every exchange to a transcript, as it happens (nothing
/// is lost if the run stops). A transcript file is rewritten in the program's order when
/// the recorder is dropped, so recording the same run twice gives the same file however
/// its concurrent calls interleaved.
pub struct RecordingProvider {
    inner: Arc<dyn Provider>,
    sink: Mutex<Box<dyn Write + Send>>,
    /// Strings never written to the transcript (API keys).
    secrets: Vec<String>,
    /// The file written, and every line with its call's position.
    file: Option<(std::path::PathBuf, Mutex<Vec<PlacedLine>>)>,
}

impl RecordingProvider {
    pub fn new(
        inner: Arc<dyn Provider>,
        sink: Box<dyn Write + Send>,
        secrets: Vec<String>,
    ) -> RecordingProvider {
        let secrets = secrets.into_iter().filter(|s| s.len() >= 4).collect();
        RecordingProvider {
            inner,
            sink: Mutex::new(sink),
            secrets,
            file: None,
        }
    }

    /// Records to the file at `path` (created anew).
    pub fn to_file(
        inner: Arc<dyn Provider>,
        path: &Path,
        secrets: Vec<String>,
    ) -> Result<RecordingProvider, String> {
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut recorder = RecordingProvider::new(inner, Box::new(file), secrets);
        recorder.file = Some((path.to_path_buf(), Mutex::new(Vec::new())));
        Ok(recorder)
    }

    fn scrub(&self, mut line: String) -> String {
        for secret in &self.secrets {
            line = line.replace(secret.as_str(), "[REDACTED]");
        }
        line
    }
}

impl Provider for RecordingProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn concurrency(&self) -> Option<llm::limit::LimitStats> {
        self.inner.concurrency()
    }

    fn in_order(&self) -> bool {
        self.inner.in_order()
    }

    fn load_time(&self) -> Option<std::time::Duration> {
        self.inner.load_time()
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            let response = self.inner.complete(request).await?;
            let line = json!({
                "order": request.order,
                "request": request.to_json(),
                "response": response_to_json(&response),
            })
            .to_string();
            let line = self.scrub(line);
            let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
            // A transcript that cannot be written must not lose the run's answer; the
            // error is reported with the answer's call if it matters to the caller.
            let _ = writeln!(sink, "{line}").and_then(|_| sink.flush());
            if let Some((_, lines)) = &self.file {
                let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                lines.push((request.order.clone(), line));
            }
            Ok(response)
        })
    }
}

impl Drop for RecordingProvider {
    /// Rewrites a transcript file in the program's order (a stable sort: the attempts
    /// of one call keep the order they happened in). Through a temporary file and a
    /// rename, so the transcript on disk is always whole.
    fn drop(&mut self) {
        let Some((path, lines)) = self.file.take() else {
            return;
        };
        let mut lines = lines.into_inner().unwrap_or_else(|e| e.into_inner());
        if lines.windows(2).all(|w| w[0].0 <= w[1].0) {
            return;
        }
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        let mut text = String::new();
        for (_, line) in &lines {
            text.push_str(line);
            text.push('\n');
        }
        let temporary = path.with_extension("jsonl.sorting");
        if std::fs::write(&temporary, text).is_ok() && std::fs::rename(&temporary, &path).is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
    }
}
