//! Traces for people, through the `sapc` process: `sapc trace show`, `diff` and
//! `html` (the page rendered in headless Chromium), and what runs write into a trace.

mod common;

use std::path::Path;
use std::process::Command;

use common::{examples, program, sapc};
use serde_json::Value;

#[test]
fn a_declassification_is_recorded_in_the_trace_with_its_reason() {
    let (dir, file) = program(
        "trust",
        "fn main() {\n    let payee = trust(\"landlord\", \"the user typed it at the prompt\")\n    print(payee);\n}\n",
    );
    let trace = dir.join("trace.jsonl");
    let out = sapc(&[
        "run",
        file.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "landlord\n");
    let event: Value =
        serde_json::from_str(std::fs::read_to_string(&trace).unwrap().trim()).unwrap();
    assert_eq!(event["event"], "trust");
    assert_eq!(event["reason"], "the user typed it at the prompt");
    assert_eq!(event["line"], 2);
    assert!(event["file"].as_str().unwrap().ends_with("trust.sap"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn traces_are_shown_as_trees_and_diffed_by_decision() {
    let dir = test_support::Scratch::new("trace");
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    let example = examples().join("code_analysis.sap");
    for t in [&a, &b] {
        let out = sapc(&[
            "run",
            example.to_str().unwrap(),
            "--trace",
            t.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let shown = sapc(&["trace", "show", a.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success());
    assert!(
        text.starts_with("main\n  analyze_code\n    produce in `analyze_code` at "),
        "{text}"
    );
    assert!(
        text.contains("\n  suggest_fix\n    produce in `suggest_fix` at "),
        "{text}"
    );
    assert!(
        text.contains(
            "answer: {\"bugs\":[\"Division by zero when b is 0.\"],\"severity\":\"High\"}"
        ),
        "{text}"
    );

    // Two replays of one transcript make the same decisions.
    let same = sapc(&["trace", "diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&same.stdout),
        "the runs made the same 2 decisions\n"
    );
    // A run whose model judged otherwise.
    let changed = std::fs::read_to_string(&b)
        .unwrap()
        .replace("\"severity\":\"High\"", "\"severity\":\"Low\"");
    std::fs::write(&b, changed).unwrap();
    let differ = sapc(&["trace", "diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(differ.status.code(), Some(1));
    let text = String::from_utf8_lossy(&differ.stdout);
    assert!(
        text.starts_with("the runs differ first at decision 1: produce in `analyze_code` at "),
        "{text}"
    );
    assert!(text.contains("\n  A: {\"bugs\":[\"Division by zero when b is 0.\"],\"severity\":\"High\"}\n  B: {\"bugs\":[\"Division by zero when b is 0.\"],\"severity\":\"Low\"}"), "{text}");

    // A file that is not a trace.
    std::fs::write(&b, "hello\n").unwrap();
    let bad = sapc(&["trace", "show", b.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("b.jsonl:1: not a trace event"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Renders `page` in headless Chromium (Debian's package, installed when missing) and
/// returns the DOM it built.
fn chromium_dom(page: &Path) -> String {
    let profile = page.with_extension("profile");
    let out = Command::new(test_support::mcp::chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (apt-get install chromium)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_trace_page_renders_in_a_real_browser() {
    let dir = test_support::Scratch::new("trace-html");
    let trace = dir.join("run.jsonl");
    let page = dir.join("run.html");
    let example = examples().join("code_analysis.sap");
    let out = sapc(&[
        "run",
        example.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = sapc(&[
        "trace",
        "html",
        trace.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = chromium_dom(&page);
    // The browser built the page: its summary, two bars on the timeline, the tree.
    assert!(
        dom.contains("<p class=\"meta\" id=\"summary\">2 model calls, 0 tool calls,"),
        "{dom}"
    );
    assert_eq!(dom.matches("class=\"bar\"").count(), 2, "{dom}");
    assert!(
        dom.contains("<details class=\"fn\" open=\"\"><summary>main</summary>"),
        "{dom}"
    );
    assert!(
        dom.contains("<summary>produce in <code>analyze_code</code> at "),
        "{dom}"
    );
    assert!(dom.contains("Division by zero when b is 0."), "{dom}");
    std::fs::remove_dir_all(&dir).unwrap();
}
