//! Durable runs (`sapc run --journal`): a run killed with SIGKILL and run again repeats
//! no journaled request, prints nothing twice, and together prints what an
//! uninterrupted run prints; an extern caught mid-call stops the resume; a changed
//! program is named at the call that diverges, or re-run from there.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fails, ok, program, stderr, stdout};
use serde_json::json;
use test_support::http::{MockServer, Reply};

const RATE: &str = r#"
extern fn add(x: i32, y: i32) -> i32;

/// How many stars the item deserves, 1 to 5.
fn rate(ctx: Context, item: String) -> i32 {
    "Rate this item"!
    item!
}

fn main(ctx: Context) -> () {
    let items = ["apple", "bread", "cheese", "dates", "eggs", "figs"]
    let total = 0
    for item in items {
        let stars = ctx.rate(item)
        total = add(total, stars)
        print("rated " + item + ": " + to_string(stars))
    }
    print("total " + to_string(total))
}
"#;

/// A model that gives each item as many stars as its name has letters, mod 5, plus 1,
/// after `delay`; it remembers what it was asked.
fn model(delay: Duration) -> (tokio::runtime::Runtime, MockServer, Arc<Mutex<Vec<String>>>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let server = rt.block_on(MockServer::start(move |req, _| {
        let body = req.json();
        let user = body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let item = ["apple", "bread", "cheese", "dates", "eggs", "figs"]
            .into_iter()
            .find(|i| user.contains(i))
            .unwrap_or("");
        seen.lock().unwrap().push(item.to_owned());
        let answer = json!({ "value": item.len() % 5 + 1 });
        Reply::json(json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": answer.to_string() }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 50, "completion_tokens": 5 },
        }))
        .delayed(delay)
    }));
    (rt, server, asked)
}

fn run_args<'a>(file: &'a str, journal: &'a str, url: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        file,
        "--provider",
        "openai",
        "--base-url",
        url,
        "--model",
        "m",
        "--journal",
        journal,
    ]
}

fn sapc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sapc"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", "test")
        .output()
        .expect("sapc runs")
}

#[test]
fn a_killed_run_resumes_without_repeating_a_request_or_a_line() {
    // The uninterrupted run, for comparison.
    let (dir, file) = program("journal_whole", RATE);
    let (_rt, server, _) = model(Duration::ZERO);
    let url = format!("{}/v1", server.url());
    let whole = sapc_in(
        &dir,
        &run_args(file.to_str().unwrap(), "whole.journal", &url),
    );
    ok(&whole);
    assert!(stdout(&whole).contains("total 15"), "{}", stdout(&whole));

    // The same run, killed (SIGKILL) once three answers have been given.
    let (dir, file) = program("journal_killed", RATE);
    let (_rt, slow, asked) = model(Duration::from_millis(300));
    let url = format!("{}/v1", slow.url());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sapc"))
        .current_dir(&dir)
        .args(run_args(file.to_str().unwrap(), "run.journal", &url))
        .env("OPENAI_API_KEY", "test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while asked.lock().unwrap().len() < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never asked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    let first = child.wait_with_output().unwrap();
    let before: Vec<String> = asked.lock().unwrap().clone();

    let show = sapc_in(&dir, &["journal", "show", "run.journal"]);
    ok(&show);
    let listing = stdout(&show);
    assert!(listing.contains("not finished"), "{listing}");
    let journaled = listing.matches("  llm ").count();
    assert!((2..=4).contains(&journaled), "{listing}");

    // Resumed with a fast model: only the calls the journal does not hold are asked.
    let (_rt, fast, asked_again) = model(Duration::ZERO);
    let url = format!("{}/v1", fast.url());
    let mut args = run_args(file.to_str().unwrap(), "run.journal", &url);
    args.extend(["--stats", "--trace", "resumed.jsonl"]);
    let second = sapc_in(&dir, &args);
    ok(&second);
    let shown = stdout(&sapc_in(&dir, &["trace", "show", "resumed.jsonl"]));
    assert_eq!(
        shown.matches("answered from the journal").count(),
        journaled,
        "{shown}"
    );
    let again = asked_again.lock().unwrap().clone();
    assert_eq!(again.len(), 6 - journaled, "asked again: {again:?}");
    for item in &before[..journaled] {
        assert!(!again.contains(item), "{item} was asked twice: {again:?}");
    }
    assert!(
        stderr(&second).contains(&format!("{journaled} model calls")),
        "{}",
        stderr(&second)
    );
    // The two runs' output together is the uninterrupted run's.
    assert_eq!(
        format!("{}{}", stdout(&first), stdout(&second)),
        stdout(&whole)
    );
    // A finished run is not resumed again.
    fails(
        &sapc_in(&dir, &run_args(file.to_str().unwrap(), "run.journal", &url)),
        2,
        "holds a run that finished",
    );
}

#[test]
fn an_extern_caught_mid_call_stops_the_resume_unless_forgotten() {
    let text = r#"
fn main() -> () {
    print("before")
    let out = process::run("sleep", ["30"])
    print("slept " + to_string(out.status))
}
"#;
    let (dir, file) = program("journal_inflight", text);
    let file = file.to_str().unwrap();
    let args = ["run", file, "--allow-run", "sleep", "--journal", "j.db"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_sapc"))
        .current_dir(&dir)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // `print("before")` is journaled after it is written; then the extern starts, and
    // `sapc journal show` reads the journal while the run holds it.
    let started = Instant::now();
    loop {
        let show = sapc_in(&dir, &["journal", "show", "j.db"]);
        if stdout(&show).contains("STARTED, NEVER FINISHED") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}",
            stderr(&show)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    let first = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&first.stdout), "before\n");

    let resumed = sapc_in(&dir, &args);
    fails(&resumed, 1, "`process::run`");
    fails(&resumed, 1, "had started when the journaled run stopped");
    assert_eq!(stdout(&resumed), "", "`before` was printed again");

    // Forgotten, it runs again (a short sleep this time would be a changed program:
    // the same call is made).
    let show = stdout(&sapc_in(&dir, &["journal", "show", "j.db"]));
    let position = show
        .lines()
        .find(|l| l.contains("process::run"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    ok(&sapc_in(&dir, &["journal", "forget", "j.db", &position]));
    let text = text.replace("[\"30\"]", "[\"0\"]");
    std::fs::write(file, text).unwrap();
    let finished = sapc_in(
        &dir,
        &["run", file, "--allow-run", "sleep", "--journal", "j.db"],
    );
    ok(&finished);
    assert_eq!(stdout(&finished), "slept 0\n");
}

#[test]
fn a_changed_program_is_named_at_the_first_call_that_diverges() {
    let (dir, file) = program("journal_diverge", RATE);
    let (_rt, server, asked) = model(Duration::ZERO);
    let url = format!("{}/v1", server.url());
    let f = file.to_str().unwrap();
    // A run stopped by its budget after three calls.
    let mut args = run_args(f, "d.journal", &url);
    args.extend(["--max-calls", "3"]);
    let o = sapc_in(&dir, &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(asked.lock().unwrap().len(), 3);

    // The prompt changed: the first call no longer matches.
    std::fs::write(&file, RATE.replace("Rate this item", "Rate this product")).unwrap();
    let o = sapc_in(&dir, &run_args(f, "d.journal", &url));
    fails(&o, 1, "no longer matches the journal");
    fails(&o, 1, "journaled: Rate this item");
    fails(&o, 1, "now:       Rate this product");
    fails(&o, 1, "journal_diverge.sap:");
    assert_eq!(
        asked.lock().unwrap().len(),
        3,
        "a diverging run asked the model"
    );

    let mut args = run_args(f, "d.journal", &url);
    args.extend(["--journal-policy", "rerun-changed"]);
    let o = sapc_in(&dir, &args);
    ok(&o);
    assert_eq!(asked.lock().unwrap().len(), 9);
    assert!(stdout(&o).contains("total 15"), "{}", stdout(&o));
}

#[test]
fn journals_that_cannot_be_used_are_refused_clearly() {
    let (dir, file) = program("journal_bad", RATE);
    std::fs::write(dir.join("text.journal"), "x".repeat(4096)).unwrap();
    let f = file.to_str().unwrap();
    let url = "http://127.0.0.1:9/v1";
    fails(
        &sapc_in(&dir, &run_args(f, "text.journal", url)),
        2,
        "is not a sap journal",
    );
    fails(
        &sapc_in(&dir, &["journal", "show", "missing.journal"]),
        2,
        "there is no journal at missing.journal",
    );
    fails(
        &sapc_in(&dir, &["run", f, "--journal-policy", "rerun-changed"]),
        2,
        "--journal",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_run_stopped_by_its_budget_resumes_where_it_stopped() {
    // Two runs of one journal never share a request with the server: the count of
    // requests in both is the number of calls the program makes.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(MockServer::start(move |_, _| {
        c.fetch_add(1, Ordering::SeqCst);
        Reply::json(json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"value\": 2}" }, "finish_reason": "stop" }],
        }))
    }));
    let (dir, file) = program("journal_count", RATE);
    let url = format!("{}/v1", server.url());
    let f = file.to_str().unwrap();
    let mut args = run_args(f, "c.journal", &url);
    args.extend(["--max-calls", "2"]);
    assert_eq!(sapc_in(&dir, &args).status.code(), Some(1));
    ok(&sapc_in(&dir, &run_args(f, "c.journal", &url)));
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

#[test]
fn the_iterations_of_a_parallel_for_resume_by_their_index() {
    let text = r#"
/// How many stars the item deserves, 1 to 5.
fn rate(ctx: Context, item: String) -> i32 {
    "Rate this item"!
    item!
}

fn main(ctx: Context) -> () {
    let items = ["apple", "bread", "cheese", "dates", "eggs", "figs"]
    let stars = parallel for item in items {
        print("rating " + item)
        rate(Context::new(), item)
    }
    print(to_string(stars))
}
"#;
    let (dir, file) = program("journal_parallel", text);
    let (_rt, server, asked) = model(Duration::from_millis(20));
    let url = format!("{}/v1", server.url());
    let f = file.to_str().unwrap();
    let whole = sapc_in(&dir, &run_args(f, "whole.journal", &url));
    ok(&whole);
    asked.lock().unwrap().clear();

    let mut args = run_args(f, "p.journal", &url);
    args.extend(["--max-calls", "4", "--concurrency", "2"]);
    let first = sapc_in(&dir, &args);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let second = sapc_in(&dir, &run_args(f, "p.journal", &url));
    ok(&second);
    // Every call was asked once over the two runs, whichever finished first.
    let mut all = asked.lock().unwrap().clone();
    all.sort();
    assert_eq!(all, ["apple", "bread", "cheese", "dates", "eggs", "figs"]);
    let last = |o: &Output| stdout(o).lines().last().unwrap_or("").to_owned();
    assert_eq!(last(&second), last(&whole));
    // Each iteration's line was printed once over the two runs.
    let mut lines: Vec<String> = format!("{}{}", stdout(&first), stdout(&second))
        .lines()
        .filter(|l| l.starts_with("rating"))
        .map(str::to_owned)
        .collect();
    lines.sort();
    assert_eq!(lines.len(), 6, "{lines:?}");
    lines.dedup();
    assert_eq!(lines.len(), 6, "a line was printed twice");
}
