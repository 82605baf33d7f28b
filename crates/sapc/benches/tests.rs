//! `sapc test` on 1,000 generated tests, start-up included: the whole process, from
//! spawning it to its exit, side by side in one run with `sapc check` of the same file
//! (the front end alone) and with one test of it (`--filter`). Each test scripts an LLM
//! function with a stub and a `select` with a script, and asserts on both. Run with
//! `cargo bench -p sapc --bench tests`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn program(tests: usize) -> String {
    let mut text = String::from(
        r#"
extern fn add(x: i32, y: i32) -> i32;
extern fn subtract(x: i32, y: i32) -> i32;

enum Mood { Calm, Angry }

fn mood(ctx: Context, text: String) -> Mood {
    "How does this read?"!
    text!
}

fn agent(ctx: Context, request: String) -> i32 {
    request!
    select {
        add(_, _) as sum => sum,
        subtract(_, _) as diff => diff
    }
}
"#,
    );
    for i in 0..tests {
        text.push_str(&format!(
            r#"
test "case {i}" {{
    given mood(_, text) => if contains(text, "!") {{ Mood::Angry }} else {{ Mood::Calm }}
    given agent {{ select add({i}, 1) }}
    assert agent(Context::new(), "{i} + 1") == {i} + 1
    assert mood(Context::new(), "case {i}!") == Mood::Angry
}}
"#
        ));
    }
    text
}

fn time(args: &[&str], dir: &std::path::Path) -> Duration {
    let mut runs: Vec<Duration> = (0..5)
        .map(|_| {
            let at = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_sapc"))
                .args(args)
                .current_dir(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "sapc {args:?}");
            at.elapsed()
        })
        .collect();
    runs.sort();
    runs[2]
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("sap-tests-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("many.sap"), program(1000)).unwrap();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let check = time(&["check", "many.sap"], &dir);
    let one = time(&["test", "many.sap", "--filter", "case 999"], &dir);
    let all = time(&["test", "many.sap"], &dir);
    let serial = time(&["test", "many.sap", "--jobs", "1"], &dir);
    println!("1,000 tests in one file (6,000 lines), whole process, median of 5:");
    println!(
        "  sapc check many.sap                      {:>8.1} ms",
        ms(check)
    );
    println!(
        "  sapc test many.sap --filter \"case 999\"   {:>8.1} ms",
        ms(one)
    );
    println!(
        "  sapc test many.sap                       {:>8.1} ms",
        ms(all)
    );
    println!(
        "  sapc test many.sap --jobs 1              {:>8.1} ms",
        ms(serial)
    );
    println!(
        "  per test, beyond compiling: {:.1} µs (all cores), {:.1} µs (one)",
        (ms(all) - ms(one)) * 1000.0 / 999.0,
        (ms(serial) - ms(one)) * 1000.0 / 999.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}
