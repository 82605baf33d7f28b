//! Both engines — the Cranelift JIT and the reference evaluator — on deterministic
//! programs, runtime errors with spans and the sap call stack, and LLM programs against an
//! in-process OpenAI-compatible server, asserting on the exact sequence of model calls.
//! Every test runs on both engines and expects the same behaviour (differential testing).

use std::sync::{Arc, Mutex};

use codegen_jit::{Evaluator, ExecError, Externs, Host, Limits, on_big_stack};
use runtime::provider::openai::{OpenAiConfig, OpenAiProvider};
use runtime::{Runtime, RuntimeConfig, Value};
use serde_json::{Value as JsonValue, json};
use testgen::http::{MockServer, RecordedRequest, Reply};

#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn module(source: &str) -> (Arc<lower::ir::Module>, String) {
    let mut db = hir::Database::default();
    db.add_prelude();
    let file = db.add_file("test.sap", source);
    let errors: Vec<_> = hir::check_file(&db, file)
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    (
        Arc::new(lower::lower_workspace(&db).unwrap()),
        source.to_owned(),
    )
}

struct Run {
    result: Result<Value, ExecError>,
    output: String,
    requests: Vec<RecordedRequest>,
}

/// Runs `source` with a model that answers each request with `answer(index, user text)`.
fn run_with_model(
    source: &str,
    limits: Limits,
    answer: impl Fn(usize, &str) -> String + Send + Sync + 'static,
) -> Run {
    run_with_replies(source, limits, move |i, user| {
        (answer(i, user), std::time::Duration::ZERO)
    })
}

/// `run_with_model` where each answer also says how long the model takes to give it.
fn run_with_replies(
    source: &str,
    limits: Limits,
    answer: impl Fn(usize, &str) -> (String, std::time::Duration) + Send + Sync + 'static,
) -> Run {
    let (module, text) = module(source);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = tokio.block_on(MockServer::start(move |request, i| {
        let body = request.json();
        let user = body["messages"][1]["content"].as_str().unwrap_or("").to_owned();
        let (content, delay) = answer(i, &user);
        Reply::json(json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5 },
        }))
        .delayed(delay)
    }));
    let provider =
        OpenAiProvider::new(OpenAiConfig::new(format!("{}/v1", server.url()), "test")).unwrap();
    let runtime = Arc::new(Runtime::new(Arc::new(provider), RuntimeConfig::default()));
    let output = Output::default();
    let sources: Vec<Option<String>> = module
        .files
        .iter()
        .map(|f| (f == "test.sap").then(|| text.clone()))
        .collect();
    let host = Host::new(
        module,
        Some(runtime),
        tokio.handle().clone(),
        Externs::default().with_calculator(),
        limits,
    )
    .with_output(Box::new(output.clone()))
    .with_sources(sources);
    let result = match engine() {
        Engine::Evaluator => on_big_stack(|| Evaluator::new(&host).run_main()),
        Engine::Jit => {
            let program = codegen_jit::compile(host.module.clone()).expect("the module compiles");
            on_big_stack(|| program.run_main(&host))
        }
    };
    let requests = server.requests();
    let output = String::from_utf8(output.0.lock().unwrap().clone()).unwrap();
    Run {
        result,
        output,
        requests,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Engine {
    Evaluator,
    Jit,
}

thread_local! {
    static ENGINE: std::cell::Cell<Engine> = const { std::cell::Cell::new(Engine::Jit) };
}

fn engine() -> Engine {
    ENGINE.with(|e| e.get())
}

/// Runs a test body once per engine.
fn both(test: fn()) {
    for e in [Engine::Jit, Engine::Evaluator] {
        ENGINE.with(|c| c.set(e));
        test();
    }
}

fn run(source: &str) -> Run {
    run_with_model(source, Limits::default(), |_, _| {
        panic!("this program must not call the model")
    })
}

fn user_text(r: &RecordedRequest) -> String {
    r.json()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn deterministic_programs() {
    both(deterministic_programs_body)
}

fn deterministic_programs_body() {
    let r = run(r#"
fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }
struct P { x: i64, name: String }
fn main() -> () {
    print(to_string(fib(20)))
    let xs: List<i64> = []
    let i = 0
    while i < 5 { xs = push(xs, i * i); i += 1 }
    print(to_string(xs))
    let total = 0
    for x in xs { total += x }
    print(to_string(total))
    let p = P { x: 3, name: "p" }
    print(p.name + " has x = " + to_string(p.x))
    let label = if total > 20 { "big" } else { "small" }
    print(label)
    print(to_string(len("héllo")))
    print(to_string(1.5 * 2.0))
    let smallest: i64 = -9223372036854775808
    print(to_string(smallest + 1))
}
"#);
    assert_eq!(r.result, Ok(Value::Unit));
    assert_eq!(
        r.output,
        "6765\n[0,1,4,9,16]\n30\np has x = 3\nbig\n5\n3.0\n-9223372036854775807\n"
    );
}

/// Lists built by compiled code are native (appended and indexed in place); lists from
/// the host are not. Both kinds mix: a shared list is copied before an append, a list
/// from a field or a builtin becomes native when appended to, and every kind of element
/// (integers, floats, Booleans, variants, strings, lists) crosses back intact.
#[test]
fn lists_of_every_origin_and_element_type() {
    both(lists_of_every_origin_and_element_type_body)
}

fn lists_of_every_origin_and_element_type_body() {
    let r = run(r#"
struct Bag { items: List<i64>, names: List<String> }
fn sum(xs: List<i64>) -> i64 {
    let t = 0
    for x in xs { t += x }
    t
}
enum Color { Red, Green }
fn main() -> () {
    let xs: List<i64> = []
    let i = 0
    while i < 100 { xs = push(xs, i); i += 1 }
    let ys = xs
    xs = push(xs, 1000)
    print(to_string(len(xs)) + " " + to_string(len(ys)))
    print(to_string(sum(xs)) + " " + to_string(sum(ys)))
    let b = Bag { items: ys, names: ["a", "b"] }
    let zs = b.items
    zs = push(zs, 7)
    print(to_string(len(zs)) + " " + to_string(len(b.items)) + " " + to_string(zs[100]))
    let words = lines("x\ny")
    words = push(words, "z")
    print(to_string(words))
    let grid: List<List<String>> = []
    grid = push(grid, words)
    grid = push(grid, [])
    grid = push(grid, ["w"])
    print(to_string(grid))
    print(grid[0][2] + grid[2][0])
    let fs = [1.5, 2.5]
    fs = push(fs, 3.0)
    print(to_string(fs))
    let bs = [true]
    bs = push(bs, false)
    print(to_string(bs))
    let cs = [Color::Red]
    cs = push(cs, Color::Green)
    print(to_string(cs))
    let squares = parallel for x in xs { x * 2 }
    print(to_string(len(squares)) + " " + to_string(squares[100]))
    print(to_string(to_string(xs) == to_string(ys)) + " " + to_string(to_string(ys) == to_string(b.items)))
    print(to_string(set(ys, 0, 42)[0]) + " " + to_string(ys[0]))
    let t = toposort([[], [0], [0, 1]])
    print(to_string(t))
    let from_host = 0
    for x in b.items { from_host += x }
    for w in lines("ab\nc") { from_host += len(w) }
    print(to_string(from_host))
    let grow = [1, 2, 3]
    for x in grow { grow = push(grow, x * 10) }
    print(to_string(grow))
}
"#);
    assert_eq!(r.result, Ok(Value::Unit));
    assert_eq!(
        r.output,
        "101 100\n5950 4950\n101 100 7\n[\"x\",\"y\",\"z\"]\n[[\"x\",\"y\",\"z\"],[],[\"w\"]]\nzw\n[1.5,2.5,3.0]\n[true,false]\n[\"Red\",\"Green\"]\n101 2000\nfalse true\n42 0\n[[0],[1],[2]]\n4953\n[1,2,3,10,20,30]\n"
    );
}

/// `Option`: `Some`, `None` typed by where it goes, the helpers, options in structs and
/// lists, and `unwrap` of `None` as a located runtime error.
#[test]
fn options() {
    both(options_body)
}

fn options_body() {
    let source = r#"
struct Finding {
    /// The line, if the model found one.
    line: Option<i64>,
    note: String,
}
fn first_even(xs: List<i64>) -> Option<i64> {
    for x in xs {
        if x % 2 == 0 { return Some(x) }
    }
    None
}
fn main() -> () {
    let f = Finding { line: None, note: "x" }
    let g = Finding { line: Some(12), note: "y" }
    print(to_string(f) + " " + to_string(g))
    print(to_string(is_none(f.line)) + " " + to_string(is_some(g.line)))
    print(to_string(unwrap_or(f.line, -1) + unwrap_or(g.line, -1)))
    print(to_string(unwrap(g.line)))
    let e = first_even([1, 3, 4, 6])
    let n = first_even([1, 3])
    print(to_string(e) + " " + to_string(n))
    let names: List<Option<String>> = [Some("a"), None]
    print(to_string(names))
    print(to_string(unwrap(n)))
}
"#;
    let r = run(source);
    assert_eq!(
        r.output,
        "{\"line\":null,\"note\":\"x\"} {\"line\":12,\"note\":\"y\"}\ntrue true\n11\n12\n4 null\n[\"a\",null]\n"
    );
    let e = r.result.unwrap_err();
    assert_eq!(e.message, "`unwrap` of `None`");
    let span = e.span.unwrap();
    assert_eq!(&source[span.start as usize..span.end as usize], "unwrap(n)");
}

/// The text helpers (and `contains` on lists), `parse_int`/`parse_float` giving options,
/// and an empty separator as a located runtime error.
#[test]
fn text_helpers() {
    both(text_helpers_body)
}

fn text_helpers_body() {
    let source = r#"
enum Color { Red, Green }
fn main() -> () {
    let line = "  name: Ada Lovelace ; born: 1815  "
    let parts = split(trim(line), " ; ")
    print(to_string(parts))
    print(join(parts, " | "))
    print(to_string(contains(line, "Ada")) + " " + to_string(contains(parts, "born: 1815")) + " " + to_string(contains([1, 2, 3], 4)))
    print(to_string(starts_with(trim(line), "name")) + " " + to_string(ends_with(line, "x")))
    print(to_upper("ada") + to_lower("LOVELACE") + replace("a-b-c", "-", "+"))
    let year = parse_int(split(parts[1], ": ")[1])
    print(to_string(unwrap_or(year, 0) + 1) + " " + to_string(parse_int("12x")) + " " + to_string(parse_float(" 2.5 ")))
    print(to_string(contains([Color::Red], Color::Green)) + " " + to_string(line.contains("Lovelace")))
    print(to_string(split("a,,b", ",")))
    print(to_string(split("abc", "")))
}
"#;
    let r = run(source);
    assert_eq!(
        r.output,
        "[\"name: Ada Lovelace\",\"born: 1815\"]\nname: Ada Lovelace | born: 1815\ntrue true false\ntrue false\nADAlovelacea+b+c\n1816 null 2.5\nfalse true\n[\"a\",\"\",\"b\"]\n"
    );
    let e = r.result.unwrap_err();
    assert_eq!(e.message, "`split` needs a separator that is not empty");
    let span = e.span.unwrap();
    assert_eq!(
        &source[span.start as usize..span.end as usize],
        "split(\"abc\", \"\")"
    );
}

#[test]
fn arithmetic_errors_point_at_the_source() {
    both(arithmetic_errors_point_at_the_source_body)
}

fn arithmetic_errors_point_at_the_source_body() {
    let source = "fn divide(a: i32, b: i32) -> i32 { a / b }\nfn main() -> () {\n    print(to_string(divide(1, 0)))\n}\n";
    let e = run(source).result.unwrap_err();
    assert_eq!(e.message, "division by zero: 1 / 0");
    let span = e.span.unwrap();
    assert_eq!(&source[span.start as usize..span.end as usize], "a / b");
    let stack: Vec<&str> = e.stack.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(stack, ["divide", "main"]);
    let call = e.stack[1].span.unwrap();
    assert_eq!(
        &source[call.start as usize..call.end as usize],
        "divide(1, 0)"
    );

    let e = run("fn main() -> () { let x: i32 = 2147483647\n print(to_string(x + 1)) }")
        .result
        .unwrap_err();
    assert_eq!(
        e.message,
        "integer overflow: 2147483647 + 1 does not fit in i32"
    );
    let e = run("fn main() -> () { let xs = [1, 2]\n print(to_string(xs[2])) }")
        .result
        .unwrap_err();
    assert_eq!(
        e.message,
        "index 2 is out of range for a list of 2 elements"
    );
}

/// Adding or subtracting a constant is checked with one comparison against a bound:
/// the bounds are exact, for `i64` and `i32`.
#[test]
fn constant_operands_overflow_at_the_exact_bound() {
    both(constant_operands_overflow_at_the_exact_bound_body)
}

fn constant_operands_overflow_at_the_exact_bound_body() {
    let r = run(r#"
fn main() -> () {
    let big: i64 = 9223372036854775806
    let small: i64 = -9223372036854775807
    let narrow: i32 = 2147483646
    print(to_string(big + 1) + " " + to_string(small - 1) + " " + to_string(small + -1))
    print(to_string(big - -1) + " " + to_string(narrow + 1) + " " + to_string(0 - narrow))
}
"#);
    assert_eq!(r.result, Ok(Value::Unit), "{}", r.output);
    assert_eq!(
        r.output,
        "9223372036854775807 -9223372036854775808 -9223372036854775808\n9223372036854775807 2147483647 -2147483646\n"
    );
    for (expr, message) in [
        (
            "big + 2",
            "integer overflow: 9223372036854775806 + 2 does not fit in i64",
        ),
        (
            "small - 2",
            "integer overflow: -9223372036854775807 - 2 does not fit in i64",
        ),
        (
            "big - -2",
            "integer overflow: 9223372036854775806 - -2 does not fit in i64",
        ),
        (
            "narrow + 2",
            "integer overflow: 2147483646 + 2 does not fit in i32",
        ),
    ] {
        let source = format!(
            "fn main() -> () {{\n    let big: i64 = 9223372036854775806\n    let small: i64 = -9223372036854775807\n    let narrow: i32 = 2147483646\n    print(to_string({expr}))\n}}\n"
        );
        let e = run(&source).result.unwrap_err();
        assert_eq!(e.message, message, "{expr}");
    }
}

#[test]
fn recursion_and_loops_are_bounded() {
    both(recursion_and_loops_are_bounded_body)
}

fn recursion_and_loops_are_bounded_body() {
    let limits = Limits {
        max_depth: 200,
        max_loop_iterations: 1000,
        concurrency: 4,
    };
    let e = run_with_model(
        "fn down(n: i64) -> i64 { down(n + 1) }\nfn main() -> () { print(to_string(down(0))) }",
        limits.clone(),
        |_, _| unreachable!(),
    )
    .result
    .unwrap_err();
    assert_eq!(e.message, "recursion deeper than 200 calls");
    let e = run_with_model(
        "fn main() -> () { let go = true\n while go { print(\"\") } }",
        limits.clone(),
        |_, _| unreachable!(),
    )
    .result
    .unwrap_err();
    assert_eq!(e.message, "more than 1000 loop iterations");
    // `continue` starts an iteration too.
    let e = run_with_model(
        "fn main() -> () { let i = 0\n while i < 5000 { i += 1\n if i > 0 { continue }\n print(\"\") } }",
        limits.clone(),
        |_, _| unreachable!(),
    )
    .result
    .unwrap_err();
    assert_eq!(e.message, "more than 1000 loop iterations");
    // Branches are not iterations: fib(16) takes 3,193 calls, each with an `if`.
    let r = run_with_model(
        "fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\nfn main() -> () { let i = 0\n while i < 3 { i += 1 }\n print(to_string(fib(16))) }",
        limits,
        |_, _| unreachable!(),
    );
    assert_eq!(r.output, "987\n");
}

#[test]
fn deep_recursion_within_the_limit_runs() {
    both(deep_recursion_within_the_limit_runs_body)
}

fn deep_recursion_within_the_limit_runs_body() {
    let r = run(
        "fn depth(n: i64) -> i64 { if n == 0 { 0 } else { 1 + depth(n - 1) } }\nfn main() -> () { print(to_string(depth(9000))) }",
    );
    assert_eq!(r.output, "9000\n");
}

#[test]
fn the_worked_example_makes_two_calls_with_the_slides_prompts() {
    both(the_worked_example_makes_two_calls_with_the_slides_prompts_body)
}

fn the_worked_example_makes_two_calls_with_the_slides_prompts_body() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/code_analysis.sap"
    ))
    .unwrap();
    let r = run_with_model(&source, Limits::default(), |i, _| match i {
        0 => r#"{"bugs": ["Division by zero error possible."], "severity": "High"}"#.to_owned(),
        _ => r#"{"value": "fn div(a, b): if b == 0 { return None }; return a / b"}"#.to_owned(),
    });
    assert_eq!(r.result, Ok(Value::Unit));
    assert_eq!(r.requests.len(), 2);
    let first = user_text(&r.requests[0]);
    assert!(first.starts_with("You are a code analysis expert\nAnalyze the following code for potential bugs\nFocus on edge cases and error handling\n<data from=\"analyze_code\" name=\"code\">\nfn div(a, b): return a / b\n</data>\n"), "{first}");
    let second = user_text(&r.requests[1]);
    // `analyze_code`'s lines are gone; `suggest_fix` sees the role, its line, the analysis.
    assert!(second.starts_with("You are a code analysis expert\nGiven this analysis, suggest a fix\n<data from=\"suggest_fix\" name=\"analysis\">\n{\"bugs\":[\"Division by zero error possible.\"],\"severity\":\"High\"}\n</data>"), "{second}");
    assert!(!second.contains("Focus on edge cases"));
    assert_eq!(
        r.output,
        "fn div(a, b): if b == 0 { return None }; return a / b\n"
    );
}

#[test]
fn select_chooses_fills_and_runs_the_arm_in_one_call() {
    both(select_chooses_fills_and_runs_the_arm_in_one_call_body)
}

fn select_chooses_fills_and_runs_the_arm_in_one_call_body() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/calculator_select.sap"
    ))
    .unwrap();
    let r = run_with_model(&source, Limits::default(), |_, _| {
        r#"{"choice": {"option": 1, "arguments": {"x": 2, "y": 5}}}"#.to_owned()
    });
    assert_eq!(r.requests.len(), 1, "one request chooses and fills");
    assert_eq!(r.output, "-3\n");
    let body = r.requests[0].json();
    let arms = &body["response_format"]["json_schema"]["schema"]["properties"]["choice"]["anyOf"];
    assert_eq!(arms.as_array().unwrap().len(), 2);

    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/calculator_extern.sap"
    ))
    .unwrap();
    let r = run_with_model(&source, Limits::default(), |_, _| {
        r#"{"choice": {"option": 0, "arguments": {"x": 40, "y": 2}}}"#.to_owned()
    });
    assert_eq!(r.output, "42\n", "the extern `add` ran on the host");
}

#[test]
fn conditions_and_loops_driven_by_the_model_with_iteration_scopes() {
    both(conditions_and_loops_driven_by_the_model_with_iteration_scopes_body)
}

fn conditions_and_loops_driven_by_the_model_with_iteration_scopes_body() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/control_flow.sap"
    ))
    .unwrap();
    // should_start → true; then keep_going / process_step alternate three times.
    let r = run_with_model(&source, Limits::default(), |i, _| match i {
        0 => r#"{"reason": "ok", "answer": true}"#.to_owned(),
        1 | 3 => r#"{"reason": "more", "answer": true}"#.to_owned(),
        2 => r#"{"value": "step one done"}"#.to_owned(),
        4 => r#"{"value": "step two done"}"#.to_owned(),
        _ => r#"{"reason": "finished", "answer": false}"#.to_owned(),
    });
    assert_eq!(r.result, Ok(Value::Unit));
    assert_eq!(r.requests.len(), 6);
    assert_eq!(r.output, "step two done\n");
    let texts: Vec<String> = r.requests.iter().map(user_text).collect();
    // The second keep_going sees the status from the first step, but not the first
    // iteration's "Processing step" line: iterations are scopes.
    assert!(texts[3].contains("step one done"), "{}", texts[3]);
    assert_eq!(
        texts[3].matches("Processing step").count(),
        0,
        "{}",
        texts[3]
    );
    assert_eq!(
        texts[4].matches("Processing step").count(),
        1,
        "{}",
        texts[4]
    );
}

#[test]
fn placeholders_are_filled_then_the_callee_runs() {
    both(placeholders_are_filled_then_the_callee_runs_body)
}

fn placeholders_are_filled_then_the_callee_runs_body() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/if_placeholders.sap"
    ))
    .unwrap();
    let r = run_with_model(&source, Limits::default(), |i, _| match i {
        0 => r#"{"data": "the input"}"#.to_owned(),
        1 => r#"{"reason": "valid", "answer": true}"#.to_owned(),
        _ => r#"{"data": "the input, again"}"#.to_owned(),
    });
    assert_eq!(r.result, Ok(Value::Unit));
    assert_eq!(r.requests.len(), 3);
    assert!(user_text(&r.requests[0]).contains("The program calls `should_process` and needs you to provide these arguments:\n- `data` (String)"));
    assert_eq!(r.output, "the input, again\n");
}

#[test]
fn sub_agents_get_an_isolated_context_and_explicit_returns_skip_the_model() {
    both(sub_agents_get_an_isolated_context_and_explicit_returns_skip_the_model_body)
}

fn sub_agents_get_an_isolated_context_and_explicit_returns_skip_the_model_body() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/sub_agents.sap"
    ))
    .unwrap();
    let r = run_with_model(&source, Limits::default(), |i, _| {
        if i == 0 {
            r#"{"value": "analysis"}"#.to_owned()
        } else {
            r#"{"value": "report"}"#.to_owned()
        }
    });
    let texts: Vec<String> = r.requests.iter().map(user_text).collect();
    assert!(
        texts[0].starts_with("You are an expert analyst\n"),
        "the sub-agent sees only its own lines: {}",
        texts[0]
    );
    assert!(!texts[0].contains("research specialist"));
    assert!(
        texts[1].contains(
            "<data from=\"research_agent\" name=\"result of analysis_agent\">\nanalysis\n</data>"
        ),
        "{}",
        texts[1]
    );
    assert_eq!(r.output, "report\n");

    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/explicit_return.sap"
    ))
    .unwrap();
    let r = run_with_model(&source, Limits::default(), |_, _| {
        r#"{"bugs": ["b may be 0"]}"#.to_owned()
    });
    assert_eq!(
        r.requests.len(),
        1,
        "`add` returns without the model; `analyze_code` asks"
    );
    assert_eq!(r.output, "5\n1\n");
}

#[test]
fn parallel_for_keeps_input_order_and_iterations_see_the_loop_context() {
    both(parallel_for_keeps_input_order_and_iterations_see_the_loop_context_body)
}

fn parallel_for_keeps_input_order_and_iterations_see_the_loop_context_body() {
    let source = r#"
fn score(ctx: Context, item: String) -> i64 {
    "Score this item"!
    item!
}
fn main(ctx: Context) -> () {
    "You rate cafes."!
    let items = ["a", "b", "c", "d", "e"]
    let scores = parallel for item in items { score(ctx, item) }
    print(to_string(scores))
}
"#;
    let r = run_with_model(
        source,
        Limits {
            concurrency: 3,
            ..Limits::default()
        },
        |_, user| {
            let item = user
                .split("name=\"item\">\n")
                .nth(1)
                .unwrap()
                .chars()
                .next()
                .unwrap();
            format!("{{\"value\": {}}}", item as i64 - 'a' as i64 + 1)
        },
    );
    assert_eq!(r.output, "[1,2,3,4,5]\n");
    for req in &r.requests {
        let text = user_text(req);
        assert!(
            text.starts_with("You rate cafes.\nScore this item\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("<data").count(),
            1,
            "each iteration sees only its item: {text}"
        );
    }
}

#[test]
fn model_failures_stop_with_the_call_site() {
    both(model_failures_stop_with_the_call_site_body)
}

fn model_failures_stop_with_the_call_site_body() {
    let source = "fn ask(ctx: Context) -> i32 {\n    \"How many?\"!\n}\nfn main(ctx: Context) -> () {\n    print(to_string(ask(ctx)))\n}\n";
    let r = run_with_model(source, Limits::default(), |_, _| "not a number".to_owned());
    let e = r.result.unwrap_err();
    assert!(
        e.message.contains("does not fit after 2 re-asks"),
        "{}",
        e.message
    );
    assert_eq!(e.raw_answer.as_deref(), Some("not a number"));
    let span = e.span.unwrap();
    assert_eq!(&source[span.start as usize..span.end as usize], "}");
    let stack: Vec<&str> = e.stack.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(stack, ["ask", "main"]);
    let _: JsonValue = json!(null);
}

#[test]
fn declared_standard_externs_are_checked_and_run() {
    both(declared_standard_externs_body)
}

fn declared_standard_externs_body() {
    let r = run(
        "extern fn print(value: String) -> ();\nextern fn len(xs: List<i64>) -> i64;\nfn main() -> () { print(to_string(len([1, 2, 3]))) }\n",
    );
    assert_eq!(r.output, "3\n");
    let (declared, _) =
        module("extern fn print(value: i64) -> ();\nfn main() -> () { print(3) }\n");
    let err = Externs::default().check(&declared).unwrap_err();
    assert!(
        err.contains("not the signature of the standard `print`"),
        "{err}"
    );
    let (unknown, _) = module(
        "extern fn lookup(key: String) -> String;\nfn main() -> () { print(lookup(\"k\")) }\n",
    );
    let err = Externs::default().check(&unknown).unwrap_err();
    assert!(
        err.contains("this host provides no extern of that name"),
        "{err}"
    );
}

#[test]
fn aot_plans_run_sap_functions_as_tools() {
    both(aot_plans_run_sap_functions_as_tools_body)
}

fn aot_plans_run_sap_functions_as_tools_body() {
    let source = r#"
use aot

/// The n-th Fibonacci number.
fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }
/// Greets someone (tools may take a context; they get a new, empty one).
fn greet(ctx: Context, name: String) -> String { "Hello, " + name }
struct P { x: i64, y: i64 }
fn norm1(p: P) -> i64 { p.x + p.y }
fn div(a: i64, b: i64) -> i64 { a / b }

fn main() -> () {
    let tools = [fib, greet, norm1, div]
    let plan = json_parse("{\"atoms\": [{\"id\": 1, \"kind\": \"tool\", \"name\": \"fib\", \"input\": {\"n\": 20}}, {\"id\": 2, \"kind\": \"tool\", \"name\": \"norm1\", \"input\": {\"p\": {\"x\": \"<result_of_1>\", \"y\": 5}}}, {\"id\": 3, \"kind\": \"tool\", \"name\": \"greet\", \"input\": {\"name\": \"sap\"}}, {\"id\": 4, \"kind\": \"final\", \"dependsOn\": [2, 3]}]}")
    print(to_string(aot_check(plan, tools)))
    print(to_string(aot::execute(plan, tools)))
    aot::save(plan, "SAVED_PLAN")
    print(to_string(aot::execute(aot::load("SAVED_PLAN"), tools)))
    let bad = json_parse("{\"atoms\": [{\"id\": 1, \"kind\": \"tool\", \"name\": \"fib\", \"input\": {\"n\": \"x\"}}, {\"id\": 1, \"kind\": \"tool\", \"name\": \"nope\"}]}")
    print(to_string(aot_check(bad, tools)))
    let failing = json_parse("{\"atoms\": [{\"id\": 1, \"kind\": \"tool\", \"name\": \"fib\", \"input\": {\"n\": 0}}, {\"id\": 2, \"kind\": \"tool\", \"name\": \"div\", \"input\": {\"a\": 6, \"b\": \"<result_of_1>\"}}]}")
    print(to_string(aot::execute(failing, tools)))
}
"#;
    let saved = std::env::temp_dir().join(format!(
        "sap-plan-{}-{:?}.json",
        std::process::id(),
        engine()
    ));
    let source = source.replace("SAVED_PLAN", saved.to_str().unwrap());
    let r = run(&source);
    let on_disk: JsonValue =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(
        on_disk["atoms"][1]["input"]["p"]["y"],
        json!(5),
        "saved in the seed's format"
    );
    let _ = std::fs::remove_file(&saved);
    assert_eq!(
        r.output,
        "[]\n[6770,\"Hello, sap\"]\n[6770,\"Hello, sap\"]\n[\"atom 1: argument `n` of `fib` must be a i64: expected an integer, found a string\",\"atom 1: duplicate atom id\",\"atom 1: unknown tool `nope` (the tools are: fib, greet, norm1, div)\"]\n"
    );
    let e = r.result.unwrap_err();
    assert_eq!(e.message, "atom 2 (`div`) failed: division by zero: 6 / 0");
    let stack: Vec<&str> = e.stack.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(stack, ["execute", "main"]);
}

#[test]
fn aot_solve_replans_with_the_defects() {
    both(aot_solve_replans_with_the_defects_body)
}

fn aot_solve_replans_with_the_defects_body() {
    let source = r#"
use aot

fn main(ctx: Context) -> () {
    print(to_string(aot::solve(ctx, "(15 + 7) * 3", [add, multiply])))
}

extern fn add(a: i64, b: i64) -> i64;
extern fn multiply(a: i64, b: i64) -> i64;
"#;
    // First an unknown tool, which the schema rules out (the runtime asks again with the
    // schema error); then a plan that fits the schema but uses a result it does not
    // depend on (the program sends it back with the defect); then a valid plan.
    let unknown_tool = json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "sum", "input": {"a": 15, "b": 7}, "dependsOn": []},
        {"id": 2, "kind": "final", "name": "report", "dependsOn": [1]}
    ]});
    let missing_dependency = json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": 15, "b": 7}, "dependsOn": []},
        {"id": 2, "kind": "tool", "name": "multiply", "input": {"a": "<result_of_1>", "b": 3}, "dependsOn": []},
        {"id": 3, "kind": "final", "name": "report", "dependsOn": [2]}
    ]});
    let valid = json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": 15, "b": 7}, "dependsOn": []},
        {"id": 2, "kind": "tool", "name": "multiply", "input": {"a": "<result_of_1>", "b": 3}, "dependsOn": [1]},
        {"id": 3, "kind": "final", "name": "report", "dependsOn": [2]}
    ]});
    let r = run_with_model(source, Limits::default(), move |i, _| match i {
        0 => unknown_tool.to_string(),
        1 => missing_dependency.to_string(),
        _ => valid.to_string(),
    });
    assert_eq!(r.result, Ok(Value::Unit));
    assert_eq!(r.output, "66\n");
    assert_eq!(r.requests.len(), 3);
    let first = user_text(&r.requests[0]);
    assert!(
        first.contains("\"name\":\"add\""),
        "the tools are shown: {first}"
    );
    assert!(!first.contains("rejected"));
    let correction = r.requests[1].json()["messages"].to_string();
    assert!(
        correction.contains("sum"),
        "the schema error is sent back: {correction}"
    );
    let third = user_text(&r.requests[2]);
    assert!(third.contains("This plan was rejected:"), "{third}");
    assert!(
        third.contains("atom 2: uses `<result_of_1>` but atom 1 is not in its `dependsOn`"),
        "{third}"
    );
    // The plan's schema is derived from the offered tools: one kind of atom per tool,
    // with that tool's arguments, and the final atom.
    let schema = r.requests[0].json()["response_format"]["json_schema"]["schema"].clone();
    let atoms = &schema["properties"]["atoms"]["items"]["anyOf"];
    assert_eq!(atoms.as_array().unwrap().len(), 3, "{schema}");
    assert_eq!(atoms[0]["properties"]["name"]["enum"], json!(["add"]));
    assert_eq!(atoms[1]["properties"]["name"]["enum"], json!(["multiply"]));
    assert_eq!(
        atoms[0]["properties"]["input"]["properties"]["a"]["anyOf"][0],
        json!({ "type": "integer" })
    );
}

#[test]
fn anot_explores_expands_and_scores_in_parallel() {
    both(anot_explores_expands_and_scores_in_parallel_body)
}

fn anot_explores_expands_and_scores_in_parallel_body() {
    let source = r#"
use anot

fn main(ctx: Context) -> () {
    let items = json_parse("[{\"name\": \"A\", \"wifi\": \"free\"}, {\"name\": \"B\", \"wifi\": \"no\"}, {\"name\": \"C\"}, {\"name\": \"D\", \"wifi\": \"free\"}, {\"name\": \"E\", \"wifi\": \"no\"}, {\"name\": \"F\", \"wifi\": \"free\"}]")
    print(to_string(anot::rank(ctx, "free wifi please", items, 3)))
}
"#;
    let judged: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let seen = judged.clone();
    let delay = std::time::Duration::from_millis(400);
    let r = run_with_replies(source, Limits::default(), move |_, user| {
        let zero = std::time::Duration::ZERO;
        if user.contains("Judge whether this item fits") {
            seen.lock().unwrap().push(std::time::Instant::now());
            let evidence = user.rsplit("<data").next().unwrap();
            let verdict = if evidence.contains("wifi = free;") {
                "Match"
            } else if evidence.contains("no wifi;") {
                "Unknown"
            } else {
                "NoMatch"
            };
            (json!({ "value": verdict }).to_string(), delay)
        } else if user.contains("Respond with the result of `write_plan`") {
            (
                json!({ "fields": ["wifi"], "name_field": "name" }).to_string(),
                zero,
            )
        } else if user.contains("union_keys(items[*]) =") {
            (
                json!({ "choice": { "option": 4, "arguments": {} } }).to_string(),
                zero,
            )
        } else {
            let union = json!({ "choice": { "option": 2, "arguments": { "path": "items[*]" } } });
            (union.to_string(), zero)
        }
    });
    assert_eq!(r.result, Ok(Value::Unit), "{}", r.output);
    // A, D and F match; C is unknown; B and E do not: top 3 by score, then index.
    assert_eq!(r.output, "[0,3,5]\n");
    let texts: Vec<String> = r.requests.iter().map(user_text).collect();
    assert_eq!(
        texts.len(),
        2 + 1 + 6,
        "two exploration steps, the plan, six judgements"
    );
    assert!(
        texts[1].contains(r#"union_keys(items[*]) = [\"name\",\"wifi\"]"#),
        "{}",
        texts[1]
    );
    // Each judgement sees the request and its own item's evidence, nothing of the others.
    let judgements: Vec<&String> = texts
        .iter()
        .filter(|t| t.contains("Judge whether"))
        .collect();
    assert_eq!(judgements.len(), 6);
    for j in &judgements {
        assert!(j.contains("free wifi please"));
        assert_eq!(
            j.matches(": wifi = ").count() + j.matches(": no wifi;").count(),
            1,
            "one item's evidence: {j}"
        );
        assert!(
            !j.contains("union_keys"),
            "exploration is not in a judgement's context"
        );
    }
    assert!(texts.iter().any(|t| t.contains("(2) C: no wifi;")));
    // The six judgements overlapped: all were asked before the first could be answered.
    let times = judged.lock().unwrap();
    let spread = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    assert!(
        spread < delay,
        "judgements asked over {spread:?}: not in parallel"
    );
}

/// A scripted Graph-of-Thought model: three subtasks, the third waiting for the first
/// two; after the first layer it adds a fourth subtask that waits for the third.
fn got_model(cyclic: bool) -> impl Fn(usize, &str) -> (String, std::time::Duration) {
    move |_, user: &str| {
        let zero = std::time::Duration::ZERO;
        let last = user.rsplit("<data").next().unwrap_or("").to_owned();
        let value = |v: JsonValue| (json!({ "value": v }).to_string(), zero);
        if user.contains("Respond with the result of `write_subtasks`") {
            value(json!(["find A", "find B", "combine A and B"]))
        } else if user.contains("Respond with the result of `prerequisites`") {
            if last.contains("combine A and B") {
                value(json!([1, 2]))
            } else if cyclic && last.contains("find A") {
                value(json!([3]))
            } else {
                value(json!([]))
            }
        } else if user.contains("Respond with the result of `run_subtask`") {
            let delay = std::time::Duration::from_millis(300);
            let answer = if last.contains("find A") {
                "A=1"
            } else if last.contains("find B") {
                "B=2"
            } else if last.contains("combine") {
                "A+B=3"
            } else {
                "checked"
            };
            (json!({ "value": answer }).to_string(), delay)
        } else if user.contains("Respond with the result of `revise`") {
            let changes = if user.contains("4. check the combination") {
                json!([])
            } else {
                json!([{ "action": "AddSubtask", "subtask": 0, "on": 3, "description": "check the combination" }])
            };
            (json!({ "changes": changes }).to_string(), zero)
        } else {
            value(json!("A+B=3, checked"))
        }
    }
}

#[test]
fn got_runs_layers_concurrently_and_revises_the_plan() {
    both(got_runs_layers_concurrently_and_revises_the_plan_body)
}

fn got_runs_layers_concurrently_and_revises_the_plan_body() {
    let source = r#"
use got

fn main(ctx: Context) -> () {
    "Be brief."!
    print(got::solve(ctx, "add A and B"))
}
"#;
    let started: Arc<Mutex<Vec<(String, std::time::Instant)>>> = Arc::default();
    let seen = started.clone();
    let model = got_model(false);
    let r = run_with_replies(source, Limits::default(), move |i, user| {
        if user.contains("`run_subtask`") {
            let last = user.rsplit("<data").next().unwrap_or("").to_owned();
            seen.lock().unwrap().push((last, std::time::Instant::now()));
        }
        model(i, user)
    });
    assert_eq!(r.result, Ok(Value::Unit), "{}", r.output);
    assert_eq!(r.output, "A+B=3, checked\n");
    let texts: Vec<String> = r.requests.iter().map(user_text).collect();
    let kinds: Vec<&str> = texts
        .iter()
        .map(|t| {
            [
                "write_subtasks",
                "prerequisites",
                "run_subtask",
                "revise",
                "synthesize",
            ]
            .into_iter()
            .find(|k| t.contains(&format!("result of `{k}`")))
            .unwrap_or("?")
        })
        .collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "prerequisites",
            "prerequisites",
            "prerequisites",
            "revise",
            "revise",
            "run_subtask",
            "run_subtask",
            "run_subtask",
            "run_subtask",
            "synthesize",
            "write_subtasks"
        ]
    );
    // Every call sees the caller's context; a subtask sees its inputs' results.
    assert!(texts.iter().all(|t| t.starts_with("Be brief.")));
    let combine = texts
        .iter()
        .find(|t| t.contains("`run_subtask`") && t.contains("combine A and B\n</data>"))
        .unwrap();
    assert!(
        combine.contains("find A: A=1") && combine.contains("find B: B=2"),
        "{combine}"
    );
    let check = texts
        .iter()
        .find(|t| t.contains("`run_subtask`") && t.contains("check the combination"))
        .unwrap();
    assert!(check.contains("combine A and B: A+B=3"), "{check}");
    // The first layer's two subtasks overlapped.
    let times = started.lock().unwrap();
    let first: Vec<_> = times
        .iter()
        .filter(|(s, _)| s.contains("find"))
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(first.len(), 2);
    let spread = if first[0] > first[1] {
        first[0] - first[1]
    } else {
        first[1] - first[0]
    };
    assert!(spread < std::time::Duration::from_millis(300), "{spread:?}");

    // A dependency cycle is a clean error at the toposort.
    let r = run_with_replies(source, Limits::default(), got_model(true));
    let e = r.result.unwrap_err();
    assert!(e.message.contains("cycle"), "{}", e.message);
    let stack: Vec<&str> = e.stack.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(stack, ["solve_with", "solve", "main"]);
}

#[test]
fn aot_compensations_run_newest_first_when_an_atom_fails() {
    both(aot_compensations_run_newest_first_when_an_atom_fails_body)
}

fn aot_compensations_run_newest_first_when_an_atom_fails_body() {
    let source = r#"
use aot

fn book(seat: i64) -> i64 {
    print("book " + to_string(seat))
    seat
}
fn cancel(seat: i64) -> i64 {
    print("cancel " + to_string(seat))
    seat
}
fn pay(total: i64, people: i64) -> i64 { total / people }

fn main() -> () {
    let plan = json_parse("{\"atoms\": [{\"id\": 1, \"kind\": \"tool\", \"name\": \"book\", \"input\": {\"seat\": 1}}, {\"id\": 2, \"kind\": \"tool\", \"name\": \"book\", \"input\": {\"seat\": \"<result_of_1>\"}}, {\"id\": 3, \"kind\": \"tool\", \"name\": \"pay\", \"input\": {\"total\": 10, \"people\": 0}, \"dependsOn\": [2]}]}")
    print(to_string(aot::execute_compensated(plan, [book, pay], 1, [aot::Compensation { tool: book, undo: cancel }])))
}
"#;
    let r = run(source);
    let e = r.result.unwrap_err();
    assert_eq!(
        e.message,
        "atom 3 (`pay`) failed: division by zero: 10 / 0 (after 2 attempts); compensated atoms 2, 1"
    );
    assert_eq!(r.output, "book 1\nbook 1\ncancel 1\ncancel 1\n");
    // The undoing tool is not offered to the plan.
    let r = run(&source.replace("\\\"name\\\": \\\"pay\\\"", "\\\"name\\\": \\\"cancel\\\""));
    assert!(
        r.result
            .unwrap_err()
            .message
            .contains("unknown tool `cancel`")
    );
}

#[test]
fn a_json_result_is_asked_for_against_the_schema_passed_in() {
    both(a_json_result_is_asked_for_against_the_schema_passed_in_body)
}

fn a_json_result_is_asked_for_against_the_schema_passed_in_body() {
    let source = r#"
/// Picks a colour.
fn pick(ctx: Context, schema: Json) -> Json {
    "Pick a colour."!
}

fn main(ctx: Context) -> () {
    print(to_string(pick(ctx, json_parse("{\"type\": \"string\", \"enum\": [\"red\", \"green\"]}"))))
    print(to_string(pick(ctx, json_parse("{\"type\": \"banana\"}"))))
}
"#;
    let r = run_with_model(source, Limits::default(), |i, _| {
        if i == 0 {
            json!({ "value": "blue" }).to_string()
        } else {
            json!({ "value": "green" }).to_string()
        }
    });
    // "blue" is outside the schema: asked again, then "green".
    assert_eq!(r.output, "green\n");
    assert_eq!(r.requests.len(), 2);
    let schema = r.requests[0].json()["response_format"]["json_schema"]["schema"].clone();
    assert_eq!(
        schema["properties"]["value"],
        json!({ "type": "string", "enum": ["red", "green"] })
    );
    let e = r.result.unwrap_err();
    assert!(
        e.message
            .contains("the schema passed to `pick` is not a JSON Schema"),
        "{}",
        e.message
    );
}

#[test]
fn set_replaces_one_element() {
    both(set_replaces_one_element_body)
}

fn set_replaces_one_element_body() {
    let r = run(
        "fn main() -> () {\n    let xs = [1, 2, 3]\n    let ys = set(xs, 1, 20)\n    print(to_string(xs) + \" \" + to_string(ys))\n    print(to_string(set(ys, 3, 0)))\n}\n",
    );
    assert_eq!(r.output, "[1,2,3] [1,20,3]\n", "the original is unchanged");
    assert_eq!(
        r.result.unwrap_err().message,
        "index 3 is out of range for a list of 3 elements"
    );
}

/// A tool is the function the program named, even when another module (here the
/// `anot` prelude, which has its own `score`) defines one of the same name.
#[test]
fn a_tool_is_the_function_named_not_a_namesake() {
    both(a_tool_is_the_function_named_not_a_namesake_body)
}

fn a_tool_is_the_function_named_not_a_namesake_body() {
    let r = run(r#"
use aot
use anot

/// Scales a number.
fn score(x: i64) -> i64 { x * 100 }

fn main() -> () {
    let plan = json_parse("{\"atoms\": [{\"id\": 1, \"kind\": \"tool\", \"name\": \"score\", \"input\": {\"x\": 2}}]}")
    print(to_string(aot::execute(plan, [score])))
    print(tool_signatures([score]))
}
"#);
    assert_eq!(r.result, Ok(Value::Unit), "{}", r.output);
    assert_eq!(
        r.output,
        "200\n[{\"name\":\"score\",\"description\":\"Scales a number.\",\"parameters\":{\"x\":{\"type\":\"integer\"}},\"returns\":\"i64\"}]\n"
    );
}
