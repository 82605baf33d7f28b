//! What reading a model's answer costs before validation (`repair::extract_json`):
//! strict JSON, strict JSON cut off near its end (an answer that hit the token limit),
//! the same JSON written loosely (prose around it, bare keys, single
//! quotes, trailing commas), and that cut off too, at 1 KB and
//! 100 KB, side by side. Run with `cargo bench -p runtime --bench answers`; prints a
//! Markdown table of the best of several rounds, in µs per answer.

use std::hint::black_box;
use std::time::Instant;

use runtime::repair::extract_json;

/// A list of `n` findings as strict JSON and as a person would write it.
fn answers(n: usize) -> (String, String) {
    let mut strict = String::from("{\"findings\": [");
    let mut loose = String::from("Here is what I found:\n{findings: [");
    for i in 0..n {
        let sep = if i + 1 < n { ", " } else { "" };
        strict += &format!(
            "{{\"line\": {i}, \"severity\": \"High\", \"note\": \"value may be zero here\"}}{sep}"
        );
        loose += &format!("{{line: {i}, severity: 'high', note: 'value may be zero here',}}, ");
    }
    strict += "]}";
    loose += "], // that is all\n}";
    (strict, loose)
}

fn time_per_answer(text: &str) -> f64 {
    let rounds = 7;
    let iterations = (200_000 / text.len()).max(3);
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(extract_json(black_box(text)).expect("the answer reads"));
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e6 / iterations as f64);
    }
    best
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    println!("| answer | strict JSON | strict, cut off | written loosely | loose and cut off |");
    println!("|---|---|---|---|---|");
    for n in [15, 1500] {
        let (strict, loose) = answers(n);
        let cut = |s: &str| s[..s.len() * 9 / 10].to_owned();
        println!(
            "| {:.0} KB | {:.1} µs | {:.1} µs | {:.1} µs | {:.1} µs |",
            strict.len() as f64 / 1024.0,
            time_per_answer(&strict),
            time_per_answer(&cut(&strict)),
            time_per_answer(&loose),
            time_per_answer(&cut(&loose))
        );
    }
}
