//! What a durable run costs (`sapc run --journal`), side by side in one run: a program
//! making N model calls in sequence against a local OpenAI-compatible server that
//! answers at once, without a journal and with one (each answer committed with an
//! fsync before it is used); and the resume of a run whose journal holds 10,000 calls.
//! Run with `cargo bench -p sapc --bench journal`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::http::{MockServer, Reply};

fn program(calls: usize) -> String {
    format!(
        r#"
fn grade(ctx: Context, i: i32) -> i32 {{
    "Grade this item from 1 to 5"!
    i!
}}

fn main(ctx: Context) -> () {{
    let total = 0
    let i = 0
    while i < {calls} {{
        total = total + grade(ctx, i)
        i = i + 1
    }}
    print(to_string(total))
}}
"#
    )
}

fn run(dir: &Path, file: &str, url: &str, extra: &[&str]) -> (Duration, bool) {
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_sapc"))
        .current_dir(dir)
        .args(["run", file, "--provider", "openai", "--model", "bench"])
        .args(["--base-url", url])
        .args(extra)
        .env("OPENAI_API_KEY", "bench")
        .env("SAP_CACHE_DIR", dir.join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    (started.elapsed(), status.success())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let server = tokio.block_on(MockServer::start(move |_, _| {
        counted.fetch_add(1, Ordering::Relaxed);
        Reply::json(json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"value\": 3}" }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 40, "completion_tokens": 4 },
        }))
    }));
    let url = format!("{}/v1", server.url());
    let dir = std::env::temp_dir().join(format!("sap-journal-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // The disk's own fsync, for scale.
    let probe = dir.join("fsync-probe");
    let mut fsyncs = Vec::new();
    for i in 0..200 {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&probe)
            .unwrap();
        let at = Instant::now();
        writeln!(f, "{i}").unwrap();
        f.sync_all().unwrap();
        fsyncs.push(at.elapsed());
    }
    fsyncs.sort();
    println!(
        "this disk: write + fsync of a line, median {:.3} ms",
        ms(fsyncs[fsyncs.len() / 2])
    );

    // Per call: N calls with and without a journal, alternating, best of 3.
    let n = 2000;
    std::fs::write(dir.join("calls.sap"), program(n)).unwrap();
    let mut plain = Vec::new();
    let mut journaled = Vec::new();
    for round in 0..3 {
        let (t, ok) = run(&dir, "calls.sap", &url, &[]);
        assert!(ok);
        plain.push(t);
        let j = format!("calls-{round}.journal");
        let (t, ok) = run(&dir, "calls.sap", &url, &["--journal", &j]);
        assert!(ok);
        journaled.push(t);
    }
    let best = |v: &[Duration]| *v.iter().min().unwrap();
    let (p, j) = (best(&plain), best(&journaled));
    println!(
        "{n} model calls in sequence: {:.0} ms without a journal, {:.0} ms with one: {:.3} ms more per call (fsync included)",
        ms(p),
        ms(j),
        (ms(j) - ms(p)) / n as f64
    );

    // Resume: a run stopped by its budget after 10,000 calls, then the same command.
    let n = 10_000;
    std::fs::write(dir.join("resume.sap"), program(n + 1)).unwrap();
    let (t_first, ok) = run(
        &dir,
        "resume.sap",
        &url,
        &["--journal", "resume.journal", "--max-calls", &n.to_string()],
    );
    assert!(!ok, "the budget stops the first run");
    let before = requests.load(Ordering::Relaxed);
    let (t_resume, ok) = run(&dir, "resume.sap", &url, &["--journal", "resume.journal"]);
    assert!(ok);
    let asked = requests.load(Ordering::Relaxed) - before;
    assert_eq!(
        asked, 1,
        "the resumed run asks only the call the journal lacks"
    );
    let size = std::fs::metadata(dir.join("resume.journal"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "{n} journaled calls: the first run took {:.0} ms; resuming it took {:.0} ms ({:.1} µs per journaled call, 1 request made); journal {:.1} MB",
        ms(t_first),
        ms(t_resume),
        ms(t_resume) * 1000.0 / n as f64,
        size as f64 / 1e6
    );
    let _ = std::fs::remove_dir_all(&dir);
}
