//! `sapc test`, driven as a process: what ships passes, failures show their values at
//! their source, the formats, coverage, filters, and what a test may not do.

mod common;

use common::{fails, ok, program, sapc, stderr, stdout};

const CALC: &str = r#"
extern fn add(x: i32, y: i32) -> i32;
extern fn subtract(x: i32, y: i32) -> i32;

enum Mood { Calm, Angry }

fn mood(ctx: Context, text: String) -> Mood {
    "How does this read?"!
    text!
}

fn is_ready(ctx: Context) -> Boolean {
    "Is the system ready?"!
}

fn agent(ctx: Context, request: String) -> i32 {
    request!
    select {
        add(_, _) as sum => sum,
        subtract(_, _) as diff => diff
    }
}

fn double(x: i32) -> i32 { x * 2 }

fn main(ctx: Context) -> () {
    print(to_string(double(21)))
}

test "double doubles" {
    assert double(2) == 4
}

test "a wrong expectation fails with both sides" {
    assert double(3) == 7, "three doubled"
}

test "the agent returns the clause the model chose" {
    given agent { select subtract(2, 5) }
    assert agent(Context::new(), "2 - 5") == -3
}

test "a stub answers over the parameters" {
    given mood(_, text) => if contains(text, "!") { Mood::Angry } else { Mood::Calm }
    assert mood(Context::new(), "now!") == Mood::Angry
}

test "an unscripted call fails at its site" {
    assert is_ready(Context::new())
}
"#;

/// The 1-based line of `text` that holds `part`.
fn line_of(text: &str, part: &str) -> usize {
    text.lines().position(|l| l.contains(part)).unwrap() + 1
}

#[test]
fn what_ships_passes_its_tests() {
    // `mcp_notes`'s test reads its notes through the reference filesystem server.
    test_support::mcp::cache();
    let o = sapc(&["test", "examples/", "crates/hir/prelude/tests/"]);
    ok(&o);
    let out = stdout(&o);
    let last = out.lines().last().unwrap_or("");
    assert!(last.ends_with("passed, 0 failed"), "{out}");
    let passed: usize = last.split(' ').next().unwrap().parse().unwrap();
    assert!(passed >= 35, "{out}");
    // Every example and every prelude module with a model decision has tests.
    for name in [
        "code_analysis",
        "react",
        "anot_cafes",
        "aot_calculator",
        "got_day_plan",
    ] {
        assert!(
            out.contains(&format!("examples/{name}.sap: ")),
            "{name}: {out}"
        );
    }
    for module in ["aot", "anot", "got"] {
        assert!(
            out.contains(&format!("{module}_test.sap: ")),
            "{module}: {out}"
        );
    }
}

#[test]
fn failures_show_their_values_at_their_source() {
    let (_dir, file) = program("test_calc", CALC);
    let f = file.to_str().unwrap();
    let o = sapc(&["test", f]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("ok    ") && out.contains("FAIL  "), "{out}");
    assert!(out.contains("assertion failed: three doubled"), "{out}");
    assert!(
        out.contains("left:  6") && out.contains("right: 7"),
        "{out}"
    );
    assert!(
        out.contains("assert double(3) == 7, \"three doubled\""),
        "{out}"
    );
    assert!(
        out.contains(
            "the model was asked for the result of `is_ready`, and the test scripts no answer"
        ),
        "{out}"
    );
    assert!(out.trim_end().ends_with("3 passed, 2 failed"), "{out}");

    // `--filter` runs what matches; all of it passing exits 0.
    let o = sapc(&["test", f, "--filter", "agent"]);
    ok(&o);
    assert!(
        stdout(&o).trim_end().ends_with("1 passed, 0 failed"),
        "{}",
        stdout(&o)
    );

    // `--exact` runs only the test of that name, not those whose names contain it.
    let o = sapc(&["test", f, "--filter", "double", "--exact"]);
    assert!(!stdout(&o).contains("double doubles"), "{}", stdout(&o));
    let o = sapc(&["test", f, "--filter", "double doubles", "--exact"]);
    ok(&o);
    assert!(
        stdout(&o).trim_end().ends_with("1 passed, 0 failed"),
        "{}",
        stdout(&o)
    );

    // `sapc run` leaves the tests out.
    let o = sapc(&["run", f]);
    ok(&o);
    assert_eq!(stdout(&o), "42\n");
}

#[test]
fn json_and_junit_reports() {
    let (_dir, file) = program("test_formats", CALC);
    let f = file.to_str().unwrap();
    let o = sapc(&["test", f, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    let failed = lines
        .iter()
        .find(|l| l["name"] == "a wrong expectation fails with both sides")
        .unwrap();
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["location"]["line"],
        line_of(CALC, "assert double(3) == 7")
    );
    assert_eq!(
        lines[5],
        serde_json::json!({ "passed": 3, "failed": 2, "did_not_check": 0 })
    );

    let o = sapc(&["test", f, "--format", "junit"]);
    let xml = stdout(&o);
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains("tests=\"5\" failures=\"2\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"assertion failed: three doubled\">"),
        "{xml}"
    );
}

#[test]
fn coverage_names_every_outcome_and_writes_lcov() {
    let (dir, file) = program("test_coverage", CALC);
    let lcov = dir.join("out.info");
    let o = sapc(&[
        "test",
        file.to_str().unwrap(),
        "--coverage",
        "--lcov",
        lcov.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("`select` in `agent`: 1/2  add ✗, subtract ✓1"),
        "{out}"
    );
    assert!(
        out.contains("result of `mood` in `mood`: 1/2  Calm ✗, Angry ✓1"),
        "{out}"
    );
    assert!(
        out.contains("condition `is_ready` in `is_ready`: 0/2"),
        "{out}"
    );
    let info = std::fs::read_to_string(&lcov).unwrap();
    assert!(
        info.contains("SF:") && info.contains("end_of_record"),
        "{info}"
    );
    // The `select` has two branches, one taken once.
    let line = line_of(CALC, "select {");
    assert!(
        info.contains(&format!("BRDA:{line},2,0,0\nBRDA:{line},2,1,1")),
        "{info}"
    );
    assert!(info.contains("BRF:6\nBRH:2"), "{info}");
}

#[test]
fn scripts_are_checked_and_used_in_order() {
    let text = r#"
extern fn add(x: i32, y: i32) -> i32;

fn pick(ctx: Context) -> i32 {
    select {
        add(_, _) as n => n,
        add(_, 1) as m => m
    }
}

fn answer(ctx: Context) -> i32 { "A number"! }

test "a wrong kind of answer is a compile error" {
    given answer(_) => "seven"
}
"#;
    let (_dir, file) = program("test_typed", text);
    let o = sapc(&["test", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("E0103"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("0 passed, 0 failed; 1 file did not check"),
        "{}",
        stdout(&o)
    );
    // Machine formats say so too, not only "0 failed".
    let o = sapc(&["test", file.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["status"], "did_not_check");
    assert!(
        lines[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("test_typed.sap")
    );
    assert_eq!(lines[1]["did_not_check"], 1);
    let o = sapc(&["test", file.to_str().unwrap(), "--format", "junit"]);
    assert!(
        stdout(&o).contains("errors=\"1\"") && stdout(&o).contains("<error message="),
        "{}",
        stdout(&o)
    );

    let text = r#"
fn answer(ctx: Context) -> i32 { "A number"! }

test "answers run out" {
    given answer { 1, 2 }
    assert answer(Context::new()) == 1
    assert answer(Context::new()) == 2
    assert answer(Context::new()) == 3
}
"#;
    let (_dir, file) = program("test_order", text);
    let o = sapc(&["test", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("the model was asked for the result of `answer`, and the test scripts no answer (its script for `answer` gave 2 answers, and has no more)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_transcript_answers_what_no_given_scripts() {
    let text = r#"
fn analyze(ctx: Context, code: String) -> String {
    "Summarize what this code does in one sentence"!
    code!
}

fn main(ctx: Context) -> () {
    "You are helpful"!
    print(analyze(ctx, "fn div(a, b): return a / b"))
}

test "the replayed answer" {
    main(Context::new())
}
"#;
    let (dir, file) = program("test_replay", text);
    let f = file.to_str().unwrap();
    fails(&sapc(&["test", f]), 1, "");
    let transcript = dir.join("t.jsonl");
    std::fs::copy(
        common::examples().join("context_flow.transcript.jsonl"),
        &transcript,
    )
    .unwrap();
    ok(&sapc(&[
        "test",
        f,
        "--replay",
        transcript.to_str().unwrap(),
    ]));
}

#[test]
fn usage_errors_exit_2() {
    fails(
        &sapc(&["test", "no/such/dir"]),
        2,
        "cannot read `no/such/dir`",
    );
    fails(&sapc(&["test", "--format", "xml"]), 2, "xml");
    fails(&sapc(&["test", "--lcov", "x.info"]), 2, "--coverage");
}
