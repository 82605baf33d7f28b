//! How fast this build's llama.cpp evaluates a prompt and writes an answer, measured as
//! llama-server measures itself (`timings.prompt_per_token_ms`, `predicted_per_token_ms`
//! of its `/completion` answer), so `tools/local-model/speed.sh` can put the two side
//! by side: the same prompt in one batch, then greedy answer tokens one at a time, in a
//! context made as the local provider makes its contexts.
//!
//!     cargo run --release -p provider-local --features llama --example local_speed -- MODEL.gguf [ROUNDS]

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

/// The prompt speed.sh sends to llama-server too (round `n` appends `n`, so no cache
/// holds it).
fn prompt(n: usize) -> String {
    let words: Vec<String> = (0..40)
        .map(|i| format!("word{i} is a test of the prompt speed."))
        .collect();
    format!("{}{n}", words.join(" "))
}

const ANSWER_TOKENS: usize = 20;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: local_speed MODEL.gguf [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let mut backend = LlamaBackend::init().expect("llama.cpp");
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, &path, &LlamaModelParams::default())
        .expect("the model");
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get() as i32);
    for n in 0..rounds {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(2048))
            .with_n_batch(512)
            .with_n_seq_max(4)
            .with_kv_unified(true)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let mut ctx = model.new_context(&backend, params).expect("a context");
        let tokens = model.vocab().tokenize(prompt(n).as_bytes(), true, true);
        let mut batch = LlamaBatch::new(1024, 1);
        for (i, &t) in tokens.iter().enumerate() {
            batch
                .add(t, i as i32, &[0], i + 1 == tokens.len())
                .expect("room");
        }
        let started = Instant::now();
        ctx.decode(&mut batch).expect("decoded");
        let prompt_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut last = batch.n_tokens() - 1;
        let started = Instant::now();
        for step in 0..ANSWER_TOKENS {
            let logits = ctx.get_logits_ith(last);
            let mut best = 0;
            for (i, &l) in logits.iter().enumerate() {
                if l > logits[best] {
                    best = i;
                }
            }
            batch.clear();
            batch
                .add(
                    LlamaToken::new(best as i32),
                    (tokens.len() + step) as i32,
                    &[0],
                    true,
                )
                .expect("room");
            ctx.decode(&mut batch).expect("decoded");
            last = 0;
        }
        let answer_ms = started.elapsed().as_secs_f64() * 1e3;
        println!(
            "{} {:.2} ms/token prompt; {} {:.2} ms/token answer",
            tokens.len(),
            prompt_ms / tokens.len() as f64,
            ANSWER_TOKENS,
            answer_ms / ANSWER_TOKENS as f64
        );
    }
}
