//! The library way in, as a front end uses it: load a program, make its host, call its
//! functions with JSON arguments by name; failures come back as values with the text
//! `sapc` prints.

use std::time::Instant;

use codegen_jit::Tokio;
use serde_json::{Map, Value as JsonValue, json};
use session::{CallError, Engine, Failure, Options};
use test_support::Scratch;

const PROGRAM: &str = r#"/// A word count.
struct Count {
    words: i64,
    longest: String,
}

/// Counts the words of a text.
fn count_words(ctx: Context, text: String, least: Option<i64>) -> Count {
    let words = split(text, " ");
    let longest = "";
    for w in words {
        if len(w) > len(longest) {
            longest = w;
        }
    }
    Count { words: len(words), longest: longest }
}

fn divide(a: i64, b: i64) -> i64 {
    a / b
}

fn main() {
    print(to_string(divide(6, 3)));
}
"#;

fn tokio() -> (tokio::runtime::Runtime, Tokio) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle: Tokio = rt.handle().clone().into();
    (rt, handle)
}

fn args(value: JsonValue) -> Map<String, JsonValue> {
    value.as_object().unwrap().clone()
}

#[test]
fn any_function_is_called_with_arguments_by_name() {
    let dir = Scratch::new("session-call");
    let file = dir.join("words.sap");
    std::fs::write(&file, PROGRAM).unwrap();
    let loaded = session::load_all(&file).unwrap();
    assert!(!loaded.calls_model);
    // `main` runs too.
    assert!(loaded.module.main.is_some());
    let (_rt, tokio) = tokio();
    let (host, runtime) = loaded
        .host(&Options::default(), &tokio, Instant::now())
        .unwrap();
    assert!(
        runtime.is_none(),
        "no provider for a program that never asks the model"
    );

    let count = loaded.function(&host, "count_words").unwrap();
    // The `Context` is not a parameter a caller gives.
    let names: Vec<&str> = count.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["text", "least"]);
    assert_eq!(count.doc.as_deref(), Some("Counts the words of a text."));
    let value = loaded
        .call(&host, &count, &args(json!({"text": "a sap program"})))
        .unwrap();
    assert_eq!(value.to_json(), json!({"words": 3, "longest": "program"}));

    // An argument it does not take, or one that does not fit, names it; nothing runs.
    match loaded.call(&host, &count, &args(json!({"text": "x", "txt": "y"}))) {
        Err(CallError::Arguments(m)) => {
            assert!(m.contains("takes no argument `txt`"), "{m}");
            assert!(m.contains("text, least"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    match loaded.call(&host, &count, &args(json!({"text": 3}))) {
        Err(CallError::Arguments(m)) => assert!(m.contains("argument `text`"), "{m}"),
        other => panic!("{other:?}"),
    }

    // A run's failure is rendered at its place in the program.
    let divide = loaded.function(&host, "divide").unwrap();
    match loaded.call(&host, &divide, &args(json!({"a": 1, "b": 0}))) {
        Err(CallError::Run(e)) => {
            let text = loaded.located(&e, false).to_string();
            assert!(text.contains("words.sap:"), "{text}");
            assert!(text.contains("a / b"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert!(loaded.function(&host, "no_such_function").is_none());
    assert_eq!(loaded.run_main(&host).unwrap(), runtime::Value::Unit);

    // Loaded to run `main`, only what it reaches is compiled: another function is
    // refused by name, not run.
    let for_main = session::load(&file, Engine::Jit).unwrap();
    let (host, _) = for_main
        .host(&Options::default(), &tokio, Instant::now())
        .unwrap();
    let count = for_main.function(&host, "count_words").unwrap();
    match for_main.call(&host, &count, &args(json!({"text": "a"}))) {
        Err(CallError::Arguments(m)) => assert!(m.contains("load_all"), "{m}"),
        other => panic!("{other:?}"),
    }
    let divide = for_main.function(&host, "divide").unwrap();
    let six = for_main.call(&host, &divide, &args(json!({"a": 12, "b": 2})));
    assert_eq!(six.unwrap().to_json(), json!(6));
}

#[test]
fn a_program_that_does_not_check_gives_its_diagnostics_as_sapc_prints_them() {
    let dir = Scratch::new("session-diagnostics");
    let file = dir.join("broken.sap");
    std::fs::write(
        &file,
        "fn main() {\n    let x: i64 = \"text\";\n    print(to_string(x));\n}\n",
    )
    .unwrap();
    match session::load(&file, Engine::Jit) {
        Err(Failure::Diagnostics(d)) => {
            let text = d.text();
            assert!(text.contains("broken.sap:2:"), "{text}");
            assert!(text.contains("E0103"), "{text}");
            // Plain text for a library caller: no terminal colours.
            assert!(!text.contains('\u{1b}'), "{text:?}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a program with a type error loaded"),
    }
    match session::load(&dir.join("missing.sap"), Engine::Jit) {
        Err(Failure::Error(m)) => assert!(m.contains("missing.sap"), "{m}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a missing file loaded"),
    }
}

#[test]
fn exports_load_without_main_and_a_program_without_exports_is_refused() {
    let dir = Scratch::new("session-exports");
    let file = dir.join("words.sap");
    std::fs::write(&file, PROGRAM.replace("fn divide", "export fn divide")).unwrap();
    let loaded = session::load_exports(&file).unwrap();
    assert!(loaded.module.main.is_none());
    let plain = dir.join("plain.sap");
    std::fs::write(&plain, PROGRAM).unwrap();
    match session::load_exports(&plain) {
        Err(Failure::Error(m)) => assert!(m.contains("exports no function"), "{m}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a program without exports was served"),
    }
}
