//! `sapc trace`: a run's JSONL trace (`sapc run --trace`) for people. `show` prints it
//! as a tree by call path, `diff` names the first decision at which two runs differ.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::Value;

use crate::exit;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Print a trace as a tree by call path: each model call with its place, the
    /// context it saw, the question, the answer, tokens, time, repairs and re-asks;
    /// tool calls and declassifications where they happened.
    Show {
        /// A trace written by `sapc run --trace`.
        trace: PathBuf,
        /// Context lines shown per call (the rest are counted).
        #[arg(long, default_value_t = 12)]
        context_lines: usize,
    },
    /// Name the first decision at which two runs of one program differ, with its
    /// source location and both answers. Exits 0 when they made the same decisions, 1
    /// when they differ.
    Diff { a: PathBuf, b: PathBuf },
    /// Write a trace as one self-contained HTML page: the tree by call path (each node
    /// folds), every call's prompt and answer, and a timeline of the calls.
    Html {
        trace: PathBuf,
        /// The page to write.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
}

pub fn run(command: TraceCommand) -> u8 {
    let result = match command {
        TraceCommand::Show {
            trace,
            context_lines,
        } => read(&trace).map(|events| {
            print!("{}", show(&events, context_lines));
            exit::OK
        }),
        TraceCommand::Html { trace, output } => read(&trace).and_then(|events| {
            let title = trace.display().to_string();
            std::fs::write(&output, html(&events, &title))
                .map_err(|e| format!("cannot write {}: {e}", output.display()))?;
            eprintln!("wrote {}", output.display());
            Ok(exit::OK)
        }),
        TraceCommand::Diff { a, b } => (|| {
            let (ea, eb) = (read(&a)?, read(&b)?);
            let (text, same) = diff(&ea, &eb);
            print!("{text}");
            Ok(if same { exit::OK } else { exit::ERRORS })
        })(),
    };
    result.unwrap_or_else(|message| {
        eprintln!("error: {message}");
        exit::USAGE
    })
}

/// The events of a trace file; a line that is not a JSON object is an error naming it.
fn read(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() && (v.get("site").is_some() || v.get("event").is_some()) => {
                events.push(v)
            }
            _ => {
                return Err(format!(
                    "{}:{}: not a trace event (a trace is what `sapc run --trace` writes, one JSON object per line)",
                    path.display(),
                    i + 1
                ));
            }
        }
    }
    Ok(events)
}

fn location(e: &Value) -> String {
    let site = &e["site"];
    format!(
        "{}:{}:{}",
        site["file"].as_str().unwrap_or("?"),
        site["line"],
        site["column"]
    )
}

/// The answer as the program got it: the decoded value, else the raw text.
fn answer(e: &Value) -> String {
    if !e["value"].is_null() {
        return e["value"].to_string();
    }
    e["raw_answer"].as_str().unwrap_or("").to_owned()
}

fn show(events: &[Value], context_lines: usize) -> String {
    let mut out = String::new();
    let mut shown: Vec<String> = Vec::new();
    let mut depth = 0;
    for e in events {
        let Some(path) = e["path"].as_array() else {
            // A tool call, a declassification, a note: where the run was.
            let pad = "  ".repeat(depth);
            match e["event"].as_str() {
                Some("tool") => out.push_str(&format!(
                    "{pad}tool {} `{}` {} — {:.1} ms{}\n",
                    e["server"].as_str().unwrap_or("?"),
                    e["tool"].as_str().unwrap_or("?"),
                    e["arguments"],
                    e["ms"].as_f64().unwrap_or(0.0),
                    match (&e["error"], &e["result_bytes"]) {
                        (Value::String(err), _) => format!(", failed: {err}"),
                        (_, Value::Number(n)) => format!(", {n} bytes"),
                        _ => String::new(),
                    }
                )),
                Some("trust") => out.push_str(&format!(
                    "{pad}trust at {}:{}: {}\n",
                    e["file"].as_str().unwrap_or("?"),
                    e["line"],
                    e["reason"].as_str().unwrap_or("")
                )),
                Some(other) => out.push_str(&format!("{pad}{other}: {}\n", e["data"])),
                None => {}
            }
            continue;
        };
        let path: Vec<String> = path
            .iter()
            .filter_map(|p| p.as_str().map(str::to_owned))
            .collect();
        // The part of the path the tree has not printed yet.
        let common = shown.iter().zip(&path).take_while(|(a, b)| a == b).count();
        for (i, name) in path.iter().enumerate().skip(common) {
            out.push_str(&format!("{}{name}\n", "  ".repeat(i)));
        }
        shown = path.clone();
        depth = path.len();
        let pad = "  ".repeat(depth);
        let tokens = &e["tokens"];
        let attempt = e["attempt"].as_u64().unwrap_or(0);
        let cost = if e["from_journal"] == true {
            "answered from the journal".to_owned()
        } else {
            format!(
                "{:.0} ms, {} tokens in, {} out",
                e["latency_ms"].as_f64().unwrap_or(0.0),
                tokens["input"],
                tokens["output"]
            )
        };
        out.push_str(&format!(
            "{pad}{} in `{}` at {} — {cost}{}\n",
            e["kind"].as_str().unwrap_or("call"),
            e["site"]["function"].as_str().unwrap_or("?"),
            location(e),
            if attempt > 0 {
                format!(", re-ask {attempt}")
            } else {
                String::new()
            }
        ));
        let context = e["request"]["context"].as_str().unwrap_or("");
        let lines: Vec<&str> = context.lines().collect();
        if !lines.is_empty() {
            out.push_str(&format!("{pad}  context:\n"));
            for line in lines.iter().take(context_lines) {
                out.push_str(&format!("{pad}  | {line}\n"));
            }
            if lines.len() > context_lines {
                out.push_str(&format!(
                    "{pad}  | … {} more lines\n",
                    lines.len() - context_lines
                ));
            }
        }
        if let Some(q) = e["request"]["instruction"].as_str() {
            let first = q.lines().next().unwrap_or("");
            out.push_str(&format!("{pad}  asked: {first}\n"));
        }
        out.push_str(&format!("{pad}  answer: {}\n", answer(e)));
        if let Some(repairs) = e["repairs"].as_array().filter(|r| !r.is_empty()) {
            let names: Vec<String> = repairs
                .iter()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect();
            out.push_str(&format!("{pad}  repairs: {}\n", names.join(", ")));
        }
        if let Some(err) = e["error"].as_str() {
            out.push_str(&format!("{pad}  error: {err}\n"));
        }
        if let Some(source) = e["untrusted_context"].as_str() {
            out.push_str(&format!("{pad}  untrusted context: {source}\n"));
        }
    }
    out
}

/// The model's decisions of a run, in order: its answers that were accepted (re-asks
/// are part of the decision they led to).
fn decisions(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e.get("site").is_some() && e["error"].is_null())
        .collect()
}

/// The first decision at which the runs differ, and whether they made the same ones.
fn diff(a: &[Value], b: &[Value]) -> (String, bool) {
    let (da, db) = (decisions(a), decisions(b));
    for (i, (x, y)) in da.iter().zip(&db).enumerate() {
        let same_place = x["site"] == y["site"] && x["kind"] == y["kind"];
        if !same_place {
            return (
                format!(
                    "the runs part at decision {}: A asks `{}` at {}, B asks `{}` at {}\n",
                    i + 1,
                    x["site"]["function"].as_str().unwrap_or("?"),
                    location(x),
                    y["site"]["function"].as_str().unwrap_or("?"),
                    location(y)
                ),
                false,
            );
        }
        if x["value"] != y["value"] {
            return (
                format!(
                    "the runs differ first at decision {}: {} in `{}` at {}\n  A: {}\n  B: {}\n",
                    i + 1,
                    x["kind"].as_str().unwrap_or("call"),
                    x["site"]["function"].as_str().unwrap_or("?"),
                    location(x),
                    answer(x),
                    answer(y)
                ),
                false,
            );
        }
    }
    if da.len() != db.len() {
        let (longer, n, m) = if da.len() > db.len() {
            ("A", da.len(), db.len())
        } else {
            ("B", db.len(), da.len())
        };
        return (
            format!(
                "the runs made the same {m} decisions, then {longer} went on to {} more\n",
                n - m
            ),
            false,
        );
    }
    (
        format!("the runs made the same {} decisions\n", da.len()),
        true,
    )
}

/// Text for HTML.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}\
h1{font-size:1.3em}details{margin-left:1.2em}summary{cursor:pointer}\
.call summary{font-family:ui-monospace,monospace}.fn>summary{font-weight:600}\
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap;margin:.3em 0}\
.meta{color:#666}.err{color:#b00}.untrusted{color:#a60}\
.timeline{position:relative;width:75%;border-left:1px solid #999;margin:1em 0 2em}\
.bar{position:relative;height:14px;margin:2px 0;background:#4a7fd4;border-radius:2px;min-width:2px}\
.bar span{position:absolute;left:100%;white-space:nowrap;font-size:11px;padding-left:4px;color:#333}";

/// The page: a summary, the timeline of the model calls, then the tree.
fn html(events: &[Value], title: &str) -> String {
    let calls: Vec<&Value> = events.iter().filter(|e| e.get("site").is_some()).collect();
    // The timeline starts at the first request.
    let begin = calls
        .iter()
        .map(|e| e["start_ms"].as_f64().unwrap_or(0.0))
        .fold(f64::INFINITY, f64::min);
    let begin = if begin.is_finite() { begin } else { 0.0 };
    let end = calls
        .iter()
        .map(|e| {
            e["start_ms"].as_f64().unwrap_or(0.0) + e["latency_ms"].as_f64().unwrap_or(0.0) - begin
        })
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let mut out = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>sap trace: {t}</title><style>{STYLE}</style></head><body>\n<h1>sap trace: {t}</h1>\n<p class=\"meta\" id=\"summary\">{n} model calls, {tools} tool calls, {end:.0} ms</p>\n<h2>Timeline</h2>\n<div class=\"timeline\" id=\"timeline\">\n",
        t = esc(title),
        n = calls.len(),
        tools = events.iter().filter(|e| e["event"] == "tool").count(),
    );
    for e in &calls {
        let start = e["start_ms"].as_f64().unwrap_or(0.0) - begin;
        let len = e["latency_ms"].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "<div class=\"bar\" style=\"left:{:.2}%;width:{:.2}%\" title=\"{}\"><span>{} {:.0} ms</span></div>\n",
            start / end * 100.0,
            (len / end * 100.0).max(0.2),
            esc(&location(e)),
            esc(e["site"]["function"].as_str().unwrap_or("?")),
            len
        ));
    }
    out.push_str("</div>\n<h2>Calls by call path</h2>\n<div id=\"tree\">\n");
    // Open `<details>` for the path printed so far.
    let mut open: Vec<String> = Vec::new();
    for e in events {
        if let Some(path) = e["path"].as_array() {
            let path: Vec<String> = path
                .iter()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect();
            let common = open.iter().zip(&path).take_while(|(a, b)| a == b).count();
            for _ in common..open.len() {
                out.push_str("</details>\n");
            }
            open.truncate(common);
            for name in &path[common..] {
                out.push_str(&format!(
                    "<details class=\"fn\" open><summary>{}</summary>\n",
                    esc(name)
                ));
                open.push(name.clone());
            }
            let tokens = &e["tokens"];
            out.push_str(&format!(
                "<details class=\"call\"><summary>{} in <code>{}</code> at {} <span class=\"meta\">— {:.0} ms, {} / {} tokens{}</span></summary>\n",
                esc(e["kind"].as_str().unwrap_or("call")),
                esc(e["site"]["function"].as_str().unwrap_or("?")),
                esc(&location(e)),
                e["latency_ms"].as_f64().unwrap_or(0.0),
                tokens["input"],
                tokens["output"],
                match e["attempt"].as_u64() {
                    Some(n) if n > 0 => format!(", re-ask {n}"),
                    _ => String::new(),
                }
            ));
            out.push_str(&format!(
                "<pre class=\"context\">{}</pre>\n<p><b>asked:</b> {}</p>\n<pre class=\"answer\">{}</pre>\n",
                esc(e["request"]["context"].as_str().unwrap_or("")),
                esc(e["request"]["instruction"].as_str().unwrap_or("")),
                esc(&answer(e))
            ));
            if let Some(err) = e["error"].as_str() {
                out.push_str(&format!("<p class=\"err\">{}</p>\n", esc(err)));
            }
            if let Some(source) = e["untrusted_context"].as_str() {
                out.push_str(&format!(
                    "<p class=\"untrusted\">untrusted context: {}</p>\n",
                    esc(source)
                ));
            }
            out.push_str("</details>\n");
        } else if e["event"] == "tool" {
            out.push_str(&format!(
                "<p class=\"tool\">tool {} <code>{}</code> {} <span class=\"meta\">— {:.1} ms</span></p>\n",
                esc(e["server"].as_str().unwrap_or("?")),
                esc(e["tool"].as_str().unwrap_or("?")),
                esc(&e["arguments"].to_string()),
                e["ms"].as_f64().unwrap_or(0.0)
            ));
        } else if e["event"] == "trust" {
            out.push_str(&format!(
                "<p class=\"trust\">trust at {}:{}: {}</p>\n",
                esc(e["file"].as_str().unwrap_or("?")),
                e["line"],
                esc(e["reason"].as_str().unwrap_or(""))
            ));
        }
    }
    for _ in &open {
        out.push_str("</details>\n");
    }
    out.push_str("</div>\n</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(path: &[&str], function: &str, line: u32, value: Value) -> Value {
        json!({
            "path": path,
            "site": { "function": function, "file": "a.sap", "line": line, "column": 5 },
            "kind": "produce",
            "attempt": 0,
            "request": { "context": "Be brief.\n<data from=\"main\" name=\"x\">\n1\n</data>", "instruction": "Respond with the result of `f`." },
            "raw_answer": value.to_string(),
            "value": value,
            "error": null,
            "repairs": ["fenced_json"],
            "tokens": { "input": 10, "output": 2 },
            "latency_ms": 12.0,
        })
    }

    #[test]
    fn a_trace_is_shown_as_a_tree_by_call_path() {
        let events = vec![
            call(&["main", "review"], "review", 3, json!("ok")),
            json!({ "event": "tool", "server": "mcp:notes", "tool": "read", "arguments": {"path": "a"}, "ms": 2.0, "result_bytes": 10 }),
            call(&["main", "review", "judge"], "judge", 9, json!(true)),
            call(&["main", "summarize"], "summarize", 14, json!("done")),
        ];
        let text = show(&events, 2);
        let expected_start = "main\n  review\n    produce in `review` at a.sap:3:5 — 12 ms, 10 tokens in, 2 out\n      context:\n      | Be brief.\n      | <data from=\"main\" name=\"x\">\n      | … 2 more lines\n      asked: Respond with the result of `f`.\n      answer: \"ok\"\n      repairs: fenced_json\n    tool mcp:notes `read` {\"path\":\"a\"} — 2.0 ms, 10 bytes\n    judge\n";
        assert!(text.starts_with(expected_start), "{text}");
        assert!(
            text.contains("\n  summarize\n    produce in `summarize` at a.sap:14:5"),
            "{text}"
        );
    }

    #[test]
    fn diff_names_the_first_decision_that_differs() {
        let a = vec![
            call(&["main"], "f", 3, json!(1)),
            call(&["main"], "g", 7, json!("x")),
        ];
        let mut b = a.clone();
        assert_eq!(
            diff(&a, &b),
            ("the runs made the same 2 decisions\n".to_owned(), true)
        );
        b[1]["value"] = json!("y");
        let (text, same) = diff(&a, &b);
        assert!(!same);
        assert_eq!(
            text,
            "the runs differ first at decision 2: produce in `g` at a.sap:7:5\n  A: \"x\"\n  B: \"y\"\n"
        );
        let (text, _) = diff(&a, &a[..1]);
        assert_eq!(
            text,
            "the runs made the same 1 decisions, then A went on to 1 more\n"
        );
    }
}
