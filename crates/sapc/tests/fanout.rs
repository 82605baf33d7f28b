//! `parallel for` at scale against an OpenAI-compatible server (#20): iterations are
//! tasks, model calls go out at once up to the adaptive limit, and servers that refuse,
//! rate-limit or never answer end the run in bounded time with a clear message.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Project, stderr, stdout};
use serde_json::json;
use test_support::http::{MockServer, Reply};

fn program(items: usize) -> String {
    format!(
        r#"enum Verdict {{ Match, NoMatch }}

/// Judge one item.
fn judge(ctx: Context, item: String) -> Verdict {{
    "Judge whether this item fits."!
    item!
}}

fn main() {{
    let items: List<String> = []
    let i = 0
    while i < {items} {{
        items = push(items, "item " + to_string(i))
        i = i + 1
    }}
    let verdicts = parallel for item in items {{
        judge(Context::new(), item)
    }}
    print(to_string(len(verdicts)) + " verdicts")
}}
"#
    )
}

fn answer() -> Reply {
    Reply::json(json!({
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"value\":\"Match\"}" }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 40, "completion_tokens": 5 },
    }))
}

fn project(name: &str, items: usize, extra_toml: &str) -> Project {
    let p = Project::new(
        &format!("fanout-{name}"),
        &format!("[provider]\nstream = false\n{extra_toml}"),
    );
    p.write("main.sap", &program(items));
    p
}

fn run(p: &Project, url: &str, flags: &[&str]) -> std::process::Output {
    let base = format!("{url}/v1");
    let mut args = vec![
        "run",
        "main.sap",
        "--provider",
        "openai",
        "--model",
        "m",
        "--base-url",
        &base,
    ];
    args.extend_from_slice(flags);
    p.sapc(&args)
}

/// Every request arrived before the first answer left: all were in flight at once.
fn all_at_once(n: usize, flags: &[&str]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = arrivals.clone();
    let hold = Duration::from_secs(3);
    let server = rt.block_on(MockServer::start(move |_, _| {
        seen.lock().unwrap().push(Instant::now());
        answer().delayed(hold)
    }));
    let p = project(&format!("once-{n}"), n, "");
    let out = run(&p, &server.url(), flags);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{n} verdicts\n"));
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), n);
    let first = *arrivals.iter().min().unwrap();
    let last = *arrivals.iter().max().unwrap();
    assert!(
        last.duration_since(first) < hold,
        "the last of {n} requests came {:?} after the first, after the first answer",
        last.duration_since(first)
    );
}

#[test]
fn two_hundred_calls_go_out_at_once_with_no_flags() {
    all_at_once(200, &[]);
}

#[test]
fn two_thousand_calls_go_out_at_once_under_their_cap() {
    all_at_once(2_000, &["--concurrency", "2000"]);
}

/// A server that rate-limits the first requests: the limit backs off, the run retries
/// and finishes, and `--stats` says so.
#[test]
fn a_rate_limited_server_is_backed_off_from_and_the_run_finishes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(MockServer::start(|_, i| {
        if i < 100 {
            Reply::status(429, r#"{"error":{"message":"slow down"}}"#)
                .with_header("retry-after", "0")
        } else {
            answer().delayed(Duration::from_millis(50))
        }
    }));
    let p = project("429-then-ok", 300, "");
    let out = run(&p, &server.url(), &["--stats", "--trace", "trace.jsonl"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "300 verdicts\n");
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("concurrency:"))
        .unwrap_or_else(|| panic!("no concurrency line in --stats:\n{err}"));
    assert!(line.contains("started at 256, cap 1024"), "{line}");
    assert!(!line.contains(" 0 back-offs"), "{line}");
    // Each call's trace line carries the limit in force.
    let trace = p.read("trace.jsonl");
    assert!(trace.contains("\"concurrency_limit\":"), "{trace}");
}

/// A server that answers 429 to everything: the run stops, in bounded time, naming it.
#[test]
fn a_server_that_refuses_everything_stops_the_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(MockServer::start(|_, _| {
        Reply::status(429, r#"{"error":{"message":"quota exceeded"}}"#)
            .with_header("retry-after", "0")
    }));
    let p = project("429-always", 200, "");
    let started = Instant::now();
    let out = run(&p, &server.url(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("429") && err.contains("quota exceeded"),
        "{err}"
    );
    assert!(err.contains("main.sap"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60), "{err}");
    // Each call is tried at most five times (four retries), and none after the run
    // stopped.
    assert!(
        server.requests().len() <= 5 * 200,
        "{}",
        server.requests().len()
    );
}

/// A server that accepts connections and never answers: each call times out (tried
/// twice, not five times), and the run stops with a message.
#[test]
fn a_server_that_never_answers_is_a_time_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream);
        }
    });
    let p = project("silent", 50, "timeout_seconds = 0.5\n");
    let started = Instant::now();
    let out = run(&p, &url, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("timed out") || err.contains("time-out") || err.contains("timeout"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "{err}");
}

/// A hundred thousand iterations: tasks, not threads, so memory stays bounded.
#[test]
fn a_hundred_thousand_iterations_complete() {
    let p = Project::new("fanout-many", "");
    p.write(
        "main.sap",
        r#"fn main() {
    let items: List<i64> = []
    let i = 0
    while i < 100000 {
        items = push(items, i)
        i = i + 1
    }
    let doubled = parallel for x in items {
        x * 2
    }
    let total = 0
    for d in doubled {
        total = total + d
    }
    print(to_string(total))
}
"#,
    );
    let out = p.sapc(&["run", "main.sap"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "9999900000\n");
}

/// More calls asked for than the process may open connections: sapc says so, and keeps
/// the calls in flight (each holding its connection until its answer is read) within
/// what it may open — no call fails for want of a file.
#[test]
fn calls_in_flight_stay_within_the_open_file_limit() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(MockServer::start(|_, _| {
        answer().delayed(Duration::from_millis(200))
    }));
    let p = project("ulimit", 600, "");
    let out = std::process::Command::new("bash")
        .current_dir(&p.dir)
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256 -Hn 256 && exec {} run main.sap --provider openai --model m --base-url {}/v1 --concurrency 1000 --stats",
            env!("CARGO_BIN_EXE_sapc"),
            server.url()
        ))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "600 verdicts\n");
    let err = stderr(&out);
    assert!(
        err.contains("warning: --concurrency 1000 needs as many connections, but this process may open only 256 files"),
        "{err}"
    );
    assert!(err.contains("(0 re-asks, 0 retries)"), "{err}");
    assert!(err.contains("limit 192 (started at 192, cap 192"), "{err}");
}
