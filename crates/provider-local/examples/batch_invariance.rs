//! Does batching change an answer? For one sequence of a llama.cpp context, compares the
//! logits (bit for bit) and the time of evaluating it alone against evaluating it in one
//! batch with another sequence, after another sequence's cells, and in other chunks.
//! docs/notes/performance-history.md ("Batching queued calls, measured") quotes its answer for
//! SmolLM2-135M on this machine's CPU.
//!
//!     cargo run --release -p provider-local --features llama --example batch_invariance -- MODEL.gguf

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

/// The first index of the greatest logit (greedy decoding's choice).
fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best
}

/// Whether two sets of logits are the same bits, and their largest difference.
fn compare(a: &[f32], b: &[f32]) -> (bool, f32) {
    let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    (same, worst)
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: batch_invariance MODEL.gguf");
        std::process::exit(2);
    };
    let mut backend = LlamaBackend::init().expect("llama.cpp");
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, &path, &LlamaModelParams::default())
        .expect("the model");
    // As the local provider makes its contexts.
    let context = || -> LlamaContext<'_> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(2048))
            .with_n_batch(512)
            .with_n_seq_max(4)
            .with_kv_unified(true)
            .with_n_threads(2)
            .with_n_threads_batch(2);
        model.new_context(&backend, params).expect("a context")
    };
    let tokens = |s: &str| model.vocab().tokenize(s.as_bytes(), false, true);
    let a =
        tokens(&"The cafe has quiet tables, good coffee, and a long wooden counter. ".repeat(12));
    let b = tokens("<|im_start|>user\nWrite a plan of three steps for a day in Paris.<|im_end|>\n");

    // The prompt `a` in chunks ending at `cuts` (then its end), with `rider`: a token of
    // sequence 1 in every batch, as a decoding call would add. The last token's logits.
    let prompt = |cuts: &[usize], rider: bool| -> (Vec<f32>, f64) {
        let mut ctx = context();
        let mut batch = LlamaBatch::new(1024, 2);
        let started = Instant::now();
        let (mut start, mut last) = (0, 0);
        for (k, &end) in cuts.iter().chain([a.len()].iter()).enumerate() {
            batch.clear();
            for (i, &t) in a.iter().enumerate().take(end).skip(start) {
                batch
                    .add(t, i as i32, &[0], i + 1 == a.len())
                    .expect("room");
            }
            last = batch.n_tokens() - 1;
            if rider {
                batch
                    .add(LlamaToken::new(42), k as i32, &[1], true)
                    .expect("room");
            }
            ctx.decode(&mut batch).expect("decoded");
            start = end;
        }
        (
            ctx.get_logits_ith(last).to_vec(),
            started.elapsed().as_secs_f64() * 1e3,
        )
    };
    let (whole, alone_ms) = prompt(&[], false);
    println!("{} prompt tokens in one batch: {alone_ms:.0} ms", a.len());
    let third = a.len() / 3;
    for (what, cuts, rider) in [
        ("in two halves", vec![a.len() / 2], false),
        (
            "in chunks of 7, 93 and the rest, last one token",
            vec![7, 100, a.len() - 1],
            false,
        ),
        ("in one batch with another sequence's token", vec![], true),
        (
            "in thirds, each with another sequence's token",
            vec![third, 2 * third],
            true,
        ),
    ] {
        let (logits, ms) = prompt(&cuts, rider);
        let (same, worst) = compare(&logits, &whole);
        println!("{what}: same bits {same}, largest difference {worst:.3}, {ms:.0} ms");
    }

    // Decoding: `a`'s answer alone, and in lockstep with `b`'s (and after `b`'s cells).
    let steps = 12;
    let decode = |with_b: bool, after_b: bool| -> (Vec<Vec<f32>>, f64) {
        let mut ctx = context();
        let mut batch = LlamaBatch::new(1024, 2);
        if after_b {
            for (i, &t) in b.iter().enumerate() {
                batch.add(t, i as i32, &[1], false).expect("room");
            }
            ctx.decode(&mut batch).expect("decoded");
            batch.clear();
        }
        for (i, &t) in a.iter().enumerate() {
            batch
                .add(t, i as i32, &[0], i + 1 == a.len())
                .expect("room");
        }
        let mut a_at = batch.n_tokens() - 1;
        if with_b {
            for (i, &t) in b.iter().enumerate() {
                batch
                    .add(t, i as i32, &[1], i + 1 == b.len())
                    .expect("room");
            }
        }
        ctx.decode(&mut batch).expect("decoded");
        let mut b_at = batch.n_tokens() - 1;
        let (mut a_pos, mut b_pos) = (a.len(), b.len());
        let mut seen = Vec::new();
        let started = Instant::now();
        for _ in 0..steps {
            let logits = ctx.get_logits_ith(a_at).to_vec();
            let next_a = LlamaToken::new(argmax(&logits) as i32);
            seen.push(logits);
            batch.clear();
            batch.add(next_a, a_pos as i32, &[0], true).expect("room");
            a_at = 0;
            a_pos += 1;
            if with_b {
                let next_b = LlamaToken::new(argmax(ctx.get_logits_ith(b_at)) as i32);
                batch.add(next_b, b_pos as i32, &[1], true).expect("room");
                b_at = 1;
                b_pos += 1;
            }
            ctx.decode(&mut batch).expect("decoded");
        }
        (seen, started.elapsed().as_secs_f64() * 1e3 / steps as f64)
    };
    let (solo, solo_ms) = decode(false, false);
    println!("{steps} answer tokens alone: {solo_ms:.1} ms per step");
    for (what, with_b, after_b) in [
        ("in lockstep with another sequence", true, false),
        ("alone after another sequence's cells", false, true),
    ] {
        let (seen, ms) = decode(with_b, after_b);
        let same = seen
            .iter()
            .zip(&solo)
            .filter(|(x, y)| compare(x, y).0)
            .count();
        println!("{what}: {same} of {steps} steps the same bits, {ms:.1} ms per step");
    }
}
