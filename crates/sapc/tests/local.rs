//! `--provider local`: a GGUF model in-process. Built and run with
//! `cargo test --release -p sapc --features local --test local` after
//! `tools/local-model/setup.sh` (which fetches SmolLM2-135M-Instruct); without the
//! feature, the provider's absence is a clear error.

mod common;

#[cfg(not(feature = "local"))]
#[test]
fn without_the_feature_the_provider_says_how_to_get_it() {
    use common::{fails, sapc};
    fails(
        &sapc(&[
            "run",
            "examples/code_analysis.sap",
            "--provider",
            "local",
            "--model",
            "m.gguf",
        ]),
        2,
        "built without the in-process model: build it with `cargo build --release -p sapc --features local`",
    );
}

#[cfg(feature = "local")]
mod with_the_model {
    use super::common::{fails, ok, program, sapc, stderr, stdout};

    fn model() -> String {
        let path = std::env::var("SAP_LOCAL_MODEL").unwrap_or_else(|_| {
            format!(
                "{}/.cache/sap-local-model/SmolLM2-135M-Instruct.gguf",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        assert!(
            std::path::Path::new(&path).is_file(),
            "no model at {path}: run tools/local-model/setup.sh"
        );
        path
    }

    /// llama.cpp's threads spin while they wait for work: two processes running the
    /// model at once on two cores slow each other many times over, so tests take turns.
    static MODEL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        MODEL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `sapc run FILE --provider local --model MODEL --stats EXTRA…`, with no system
    /// turns kept from earlier runs, so each test's token counts are its own.
    fn run(file: &str, extra: &[&str]) -> std::process::Output {
        run_keeping(file, extra, "0")
    }

    /// `run` with `SAP_LOCAL_KV_CACHE=kept`.
    fn run_keeping(file: &str, extra: &[&str], kept: &str) -> std::process::Output {
        let _turn = turn();
        let m = model();
        let mut args = vec![
            "run",
            file,
            "--provider",
            "local",
            "--model",
            m.as_str(),
            "--stats",
        ];
        args.extend(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_sapc"))
            .current_dir(super::common::examples().join(".."))
            .args(&args)
            .env("NO_COLOR", "1")
            .env("SAP_LOCAL_KV_CACHE", kept)
            .output()
            .expect("sapc runs")
    }

    /// The main example with `--provider local --model MODEL`.
    fn main_example_with(model: &str) -> std::process::Output {
        let _turn = turn();
        sapc(&[
            "run",
            "examples/code_analysis.sap",
            "--provider",
            "local",
            "--model",
            model,
        ])
    }

    /// `tokens: N in (M cached)` from `--stats`.
    fn tokens(o: &std::process::Output) -> (u64, u64) {
        let err = stderr(o);
        let line = err
            .lines()
            .find(|l| l.contains("LLM calls"))
            .expect("stats");
        let after = line.split("tokens: ").nth(1).unwrap();
        let input: u64 = after.split(' ').next().unwrap().parse().unwrap();
        let cached: u64 = after
            .split('(')
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        (input, cached)
    }

    #[test]
    fn the_main_example_runs_and_runs_the_same_way_again() {
        let first = run("examples/code_analysis.sap", &[]);
        ok(&first);
        let second = run("examples/code_analysis.sap", &[]);
        ok(&second);
        assert_eq!(stdout(&first), stdout(&second));
        assert!(!stdout(&first).is_empty());
        // `--stats` says how long the model took to load, apart from the run.
        let load = stderr(&first)
            .lines()
            .find_map(|l| l.strip_prefix("model: loaded in this process in "))
            .and_then(|rest| rest.split(' ').next()?.parse::<f64>().ok())
            .expect("the model's load time in --stats");
        assert!(load > 0.0, "{}", stderr(&first));
    }

    #[test]
    fn a_callee_reuses_its_callers_prefix() {
        let text = r#"
fn detail(ctx: Context, topic: String) -> String {
    "Name one detail of the topic."!
    topic!
}

fn outline(ctx: Context, topic: String) -> List<String> {
    "You write short outlines of topics, one line per point, plain and factual."!
    "The topic is a city visit for a person who likes coffee, museums and long walks."!
    topic!
}

fn main(ctx: Context) -> () {
    "You plan days out. Keep every answer short."!
    let points = outline(ctx, "Philadelphia")
    print(detail(ctx, "Philadelphia"))
    print(to_string(len(points)))
}
"#;
        let (_dir, file) = program("local_reuse", text);
        let f = file.to_str().unwrap();
        let reused = run(f, &[]);
        ok(&reused);
        let (input, cached) = tokens(&reused);
        assert!(cached > 0 && cached < input, "{}", stderr(&reused));
        let m = model();
        let _turn = turn();
        let cold = std::process::Command::new(env!("CARGO_BIN_EXE_sapc"))
            .args([
                "run",
                f,
                "--provider",
                "local",
                "--model",
                m.as_str(),
                "--stats",
            ])
            .env("LOCAL_REUSE", "0")
            .output()
            .unwrap();
        ok(&cold);
        assert_eq!(tokens(&cold), (input, 0), "{}", stderr(&cold));
        // The same answers either way: reuse changes what is computed, not the result.
        assert_eq!(stdout(&cold), stdout(&reused));
    }

    #[test]
    fn calls_that_come_back_to_a_prefix_find_it_cached() {
        // Two sibling calls alternate: with one sequence in the KV cache each would
        // evaluate its long paragraph afresh every time; with several, the second round
        // finds both prompts cached whole (all but the last token).
        let text = r#"
enum Place { Museum, Market, Park }

fn about(ctx: Context, text: String) -> Place {
    "Which place is this text about?"!
    text!
}

fn main(ctx: Context) -> () {
    "You sort short texts by the place they describe."!
    let round = 0
    while round < 2 {
        print(to_string(about(ctx, "The museum of art sits at the end of a long parkway lined with flags. Its steps are famous from a film about a boxer who runs up them at dawn, and visitors still run up them to take photographs of the skyline.")))
        print(to_string(about(ctx, "The market hall is a covered market under an old railway shed, with stalls selling sandwiches, doughnuts, cheese, fish and flowers, and long counters where people eat breakfast before work.")))
        round = round + 1
    }
}
"#;
        let (_dir, file) = program("local_siblings", text);
        let o = run(file.to_str().unwrap(), &[]);
        ok(&o);
        let (input, cached) = tokens(&o);
        // Four prompts of about the same length: the last two are cached but for one
        // token each, so at least half of all prompt tokens come from the cache.
        assert!(
            2 * cached + 8 >= input,
            "{input} in, {cached} cached: {}",
            stderr(&o)
        );
        let lines: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), 4, "{}", stdout(&o));
        assert_eq!((&lines[0], &lines[1]), (&lines[2], &lines[3]));
    }

    #[test]
    fn answers_follow_their_type_and_parallel_calls_queue() {
        let text = r#"
enum Mood { Calm, Angry }

struct Review {
    mood: Mood,
    stars: i32,
    tags: List<String>,
}

fn review(ctx: Context, text: String) -> Review {
    "Review this text."!
    text!
}

fn is_short(ctx: Context, text: String) -> Boolean {
    "Is this text short?"!
    text!
}

fn main() -> () {
    let texts = ["Great coffee!", "Terrible, cold and slow service.", "Fine.", "Loved it"]
    let reviews = parallel for t in texts {
        review(Context::new(), t)
    }
    for r in reviews {
        print(to_string(r.mood) + " " + to_string(len(r.tags)))
    }
    if is_short(Context::new(), "Fine.") {
        print("short")
    }
}
"#;
        let (_dir, file) = program("local_types", text);
        let o = run(file.to_str().unwrap(), &["--concurrency", "4"]);
        ok(&o);
        assert_eq!(
            stdout(&o)
                .lines()
                .filter(|l| l.contains("Calm") || l.contains("Angry"))
                .count(),
            4,
            "{}",
            stdout(&o)
        );
        // No answer was repaired or asked again: the grammar gave each its shape.
        assert!(stderr(&o).contains("(0 re-asks"), "{}", stderr(&o));
    }

    /// Eight free-text judgements from a `parallel for`: long answers, which go
    /// another way when their logits' last bits change.
    const REVIEWS: &str = r#"
/// A short verdict on a cafe.
struct Verdict {
    /// What the review says of the coffee, in a few words.
    coffee: String,
    /// Stars, 1 to 5.
    stars: i32,
}

fn judge(ctx: Context, review: String) -> Verdict {
    "You judge cafes from their reviews for a guide to quiet places to work. Say what the review tells about the coffee, then give stars from 1 to 5."!
    review!
}

fn main() -> () {
    let reviews = [
        "Blue Door: the espresso is bright and sour, the tables are small, the music is loud after five.",
        "Corner Mill: slow service but the filter coffee is excellent and the back room is silent.",
        "Harbor Beans: huge windows, many power outlets, coffee is burnt and bitter most days.",
        "Little Fern: tiny place, friendly staff, oat flat white is the best in town, always full.",
        "Station Roasters: loud grinders, good pastries, the cold brew is watery, wifi is fast.",
        "The Reading Room: library quiet, tea is better than the coffee, seats are comfortable.",
        "Kiln & Co: pottery studio cafe, pour over is careful and sweet, open only in mornings.",
        "Night Owl: open late, decaf tastes like cardboard, lots of students studying silently.",
    ]
    let verdicts = parallel for r in reviews {
        judge(Context::new(), r)
    }
    for v in verdicts {
        print(to_string(v.stars) + " " + v.coffee)
    }
}
"#;

    #[test]
    fn a_parallel_for_gives_the_same_run_every_time() {
        // Eight calls from a `parallel for`. Where a call's keys and values sit in the
        // KV cache depends on the calls before it and changes its logits' last bits,
        // and SmolLM2's long strings go their own way from there: when the calls came
        // in whatever order the iterations reached the model, this program printed five
        // different outputs in six runs. By default they now come in the program's order.
        let (_dir, file) = program("local_parallel_runs", REVIEWS);
        let f = file.to_str().unwrap();
        let first = run(f, &[]);
        ok(&first);
        assert_eq!(stdout(&first).lines().count(), 8, "{}", stdout(&first));
        let again = run(f, &[]);
        ok(&again);
        assert_eq!(stdout(&again), stdout(&first));
    }

    #[test]
    fn a_first_prompt_kept_from_an_earlier_run_gives_the_same_run() {
        // The first run evaluates its first call's prompt and keeps the keys and values
        // of its system turn and of all of it but the last token; the second restores
        // the whole one instead, and prints the same, bit-sensitive long answers
        // included.
        let (dir, file) = program("local_kept", REVIEWS);
        let f = file.to_str().unwrap();
        let kept = dir.join("kv");
        let k = kept.to_str().unwrap();
        let first = run_keeping(f, &[], k);
        ok(&first);
        let files = std::fs::read_dir(&kept)
            .expect("the folder is made")
            .count();
        assert_eq!(files, 2, "the system turn and the whole first prompt kept");
        let second = run_keeping(f, &[], k);
        ok(&second);
        assert_eq!(stdout(&second), stdout(&first));
        let (sent, reused) = tokens(&second);
        assert_eq!(sent, tokens(&first).0);
        assert!(
            reused > tokens(&first).1,
            "the second run reuses the kept prompt: {}",
            stderr(&second)
        );
    }

    /// One call, on `review`.
    fn one_review(review: &str) -> String {
        let (types, _) = REVIEWS.split_once("fn main()").unwrap();
        format!(
            "{types}fn main() -> () {{\n    print(judge(Context::new(), \"{review}\").coffee)\n}}\n"
        )
    }

    #[test]
    fn a_repeated_run_evaluates_one_token_of_its_first_prompt_and_another_input_its_user_turn() {
        let (dir, file) = program(
            "local_kept_one",
            &one_review("Corner Mill: slow service but the filter coffee is excellent."),
        );
        let f = file.to_str().unwrap();
        let kept = dir.join("kv");
        let k = kept.to_str().unwrap();
        let first = run_keeping(f, &[], k);
        ok(&first);
        let (sent, reused) = tokens(&first);
        assert_eq!(reused, 0, "{}", stderr(&first));
        let again = run_keeping(f, &[], k);
        ok(&again);
        assert_eq!(stdout(&again), stdout(&first));
        assert_eq!(tokens(&again), (sent, sent - 1), "{}", stderr(&again));
        // Another review: the same system turn, restored; the user turn evaluated. It
        // prints what a run keeping nothing prints.
        let (_other_dir, other) = program(
            "local_kept_other",
            &one_review("Night Owl: open late, decaf tastes like cardboard, students everywhere."),
        );
        let o = other.to_str().unwrap();
        let restoring = run_keeping(o, &[], k);
        ok(&restoring);
        let (sent, reused) = tokens(&restoring);
        assert!(reused > 0 && reused + 10 < sent, "{}", stderr(&restoring));
        let afresh = run(o, &[]);
        ok(&afresh);
        assert_eq!(stdout(&restoring), stdout(&afresh));
    }

    #[test]
    fn a_damaged_kept_prompt_is_evaluated_and_written_again() {
        let (dir, _) = program("local_kept_damaged", "");
        let kept = dir.join("kv");
        let k = kept.to_str().unwrap();
        let f = "examples/code_analysis.sap";
        let first = run_keeping(f, &[], k);
        ok(&first);
        let files: Vec<_> = std::fs::read_dir(&kept)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let wholes: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        assert_eq!(files.len(), 2);
        // Every file torn, then one bit flipped in the middle of each: each run evaluates
        // the prompt (reuses what the first run did within itself), prints the same, and
        // writes them again.
        let torn = |w: &Vec<u8>| w[..w.len() / 3].to_vec();
        let flipped = |w: &Vec<u8>| {
            let mut d = w.clone();
            d[w.len() / 2] ^= 1;
            d
        };
        for damage in [&torn as &dyn Fn(&Vec<u8>) -> Vec<u8>, &flipped] {
            for (file, whole) in files.iter().zip(&wholes) {
                std::fs::write(file, damage(whole)).unwrap();
            }
            let again = run_keeping(f, &[], k);
            ok(&again);
            assert_eq!(stdout(&again), stdout(&first));
            assert_eq!(tokens(&again), tokens(&first));
            for (file, whole) in files.iter().zip(&wholes) {
                assert_eq!(&std::fs::read(file).unwrap(), whole, "written again");
            }
        }
    }

    #[test]
    fn a_missing_model_is_a_clear_error() {
        fails(
            &main_example_with("/no/such.gguf"),
            2,
            "no model at /no/such.gguf",
        );
        fails(
            &sapc(&["run", "examples/code_analysis.sap", "--provider", "local"]),
            2,
            "pass `--model PATH.gguf`",
        );
    }

    #[test]
    fn a_corrupt_model_names_the_file() {
        let (dir, _) = program("local_corrupt", "");
        let bad = dir.join("corrupt.gguf");
        std::fs::write(&bad, b"GGUF but not really a model file").unwrap();
        let b = bad.to_str().unwrap();
        fails(
            &main_example_with(b),
            2,
            &format!("cannot load the model {b}"),
        );
    }

    #[test]
    fn a_model_larger_than_memory_is_refused_before_loading() {
        let (dir, _) = program("local_huge", "");
        let huge = dir.join("huge.gguf");
        // A sparse file of a tebibyte: larger than this machine's memory, and instant.
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let h = huge.to_str().unwrap();
        let o = main_example_with(h);
        fails(
            &o,
            2,
            &format!("the model {h} is 1048576 MB, more than the "),
        );
        assert!(
            stderr(&o).contains("MB of memory available"),
            "{}",
            stderr(&o)
        );
    }

    /// A program that asks for a summary of "lorem ipsum dolor " said `times` times
    /// (about three tokens each).
    fn summary_of_lorem(times: u32) -> String {
        format!(
            r#"
fn summary(ctx: Context, text: String) -> String {{
    "Summarize this."!
    text!
}}

fn main() -> () {{
    let text = ""
    let i = 0
    while i < {times} {{
        text = text + "lorem ipsum dolor "
        i += 1
    }}
    print(summary(Context::new(), text))
}}
"#
        )
    }

    #[test]
    fn a_prompt_beyond_the_context_window_names_the_limit() {
        let (_dir, file) = program("local_overflow", &summary_of_lorem(6000));
        let o = run(file.to_str().unwrap(), &[]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        // The message, as one line (the report wraps it at 80 columns).
        let err = stderr(&o).replace("\n  │ ", "");
        assert!(
            err.contains("the local model: the prompt has")
                && err.contains("beyond the context window of 8192 tokens of the model")
                && !err.contains("could not reach")
                && err.contains("SmolLM2-135M-Instruct.gguf"),
            "{err}"
        );
        // Located: the error points at the call site.
        assert!(err.contains("local_overflow.sap"), "{err}");
    }

    /// `--context-tokens` caps the window below the model's training length.
    #[test]
    fn context_tokens_caps_the_window() {
        let (_dir, file) = program("local_capped", &summary_of_lorem(600));
        let o = run(file.to_str().unwrap(), &["--context-tokens", "1024"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let err = stderr(&o).replace("\n  │ ", "");
        assert!(
            err.contains("beyond the context window of 1024 tokens of the model"),
            "{err}"
        );
    }

    /// The context starts with 2048 cells and grows to hold a longer prompt: one of
    /// about 2,800 tokens is answered.
    #[test]
    fn a_prompt_longer_than_the_first_context_grows_it() {
        let text = r#"
/// One word.
enum Word { Lorem, Ipsum }

fn first_word(ctx: Context, text: String) -> Word {
    "Which word comes first in this text?"!
    text!
}

fn main() -> () {
    let text = ""
    let i = 0
    while i < 400 {
        text = text + "lorem ipsum dolor "
        i += 1
    }
    print(to_string(first_word(Context::new(), text)))
}
"#;
        let (_dir, file) = program("local_grows", text);
        let o = run(file.to_str().unwrap(), &[]);
        ok(&o);
        let (input, _) = tokens(&o);
        assert!(input > 2048, "{}", stderr(&o));
    }
}
