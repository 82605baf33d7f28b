//! Latency from a `didChange` inside one function of a 20,000-line file to its
//! `publishDiagnostics`, through the real `sapc lsp` process over stdio (issue target:
//! ≤ 30 ms). Run with `cargo bench -p sapc --bench lsp_latency`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

fn read_message(reader: &mut impl BufRead) -> Value {
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("the server is running");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

fn send(stdin: &mut impl Write, message: Value) {
    let body = message.to_string();
    write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    stdin.flush().unwrap();
}

fn latency(c: &mut Criterion) {
    let text = test_support::program(20_000);
    // The edit: one literal inside one function body in the middle of the file.
    let needle = "total = total + i * i - (i / 3) % 5";
    let at = text
        .match_indices(needle)
        .nth(test_support::function_count(&text) / 20)
        .unwrap()
        .0;
    let line = text[..at].matches('\n').count() as u32;
    let column =
        (at - text[..at].rfind('\n').map_or(0, |i| i + 1)) as u32 + needle.len() as u32 - 1;

    let mut child = Command::new(env!("CARGO_BIN_EXE_sapc"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send(
        &mut stdin,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "capabilities": {} } }),
    );
    read_message(&mut stdout);
    send(
        &mut stdin,
        json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }),
    );
    let uri = "file:///bench/program.sap";
    send(
        &mut stdin,
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": { "uri": uri, "languageId": "sap", "version": 1, "text": text } } }),
    );
    let wait_for = |stdout: &mut BufReader<_>, version: i64| loop {
        let m = read_message(stdout);
        if m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"] == version {
            let errors = m["params"]["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["severity"] == 1)
                .count();
            assert_eq!(errors, 0);
            return;
        }
    };
    wait_for(&mut stdout, 1);

    let mut version = 1i64;
    let mut group = c.benchmark_group("lsp");
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("did_change_to_publish_diagnostics_20k_lines", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                version += 1;
                let digit = if version % 2 == 0 { "7" } else { "5" };
                let change = json!({
                    "range": { "start": { "line": line, "character": column }, "end": { "line": line, "character": column + 1 } },
                    "text": digit,
                });
                let started = Instant::now();
                send(&mut stdin, json!({ "jsonrpc": "2.0", "method": "textDocument/didChange", "params": { "textDocument": { "uri": uri, "version": version }, "contentChanges": [change] } }));
                wait_for(&mut stdout, version);
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
    send(
        &mut stdin,
        json!({ "jsonrpc": "2.0", "id": 2, "method": "shutdown" }),
    );
    send(&mut stdin, json!({ "jsonrpc": "2.0", "method": "exit" }));
    let _ = child.wait();
}

criterion_group!(benches, latency);
criterion_main!(benches);
