//! Every function is classified pure, extern-calling or contextual, transitively over the
//! call graph (REFERENCE.md, "Context rules", rule 5); `lower` compiles pure functions entirely to native code.

use hir::{FnKind, ItemKind};

fn kinds(text: &str) -> Vec<(String, FnKind)> {
    let mut db = hir::Database::default();
    let file = db.add_file("kinds.sap", text);
    assert!(
        hir::check_file(&db, file).iter().all(|d| !d.is_error()),
        "{:#?}",
        hir::check_file(&db, file)
    );
    let mut out: Vec<(String, FnKind)> = hir::file_items(&db, file)
        .items
        .iter()
        .filter(|i| matches!(i.kind(&db), ItemKind::Fn | ItemKind::ExternFn))
        .map(|&i| {
            (
                i.name(&db).clone(),
                hir::fn_kind(&db, i).expect("functions have a kind"),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn functions_are_classified_transitively() {
    let text = r#"
extern fn lookup(key: String) -> String;

fn square(x: i64) -> i64 { x * x }
fn sum_squares(n: i64) -> i64 { square(n) + square(n - 1) }
fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }

fn fetch(key: String) -> String { lookup(key) }
fn log(message: String) -> () { print(message) }
fn fetch_twice(key: String) -> String { fetch(key) + fetch(key) }

fn ask(ctx: Context, question: String) -> String { question! }
fn detached(question: String) -> String { ask(Context::new(), question) }
fn uses_detached(q: String) -> String { detached(q) }

fn even(n: i64) -> Boolean { if n == 0 { true } else { odd(n - 1) } }
fn odd(n: i64) -> Boolean { if n == 0 { false } else { even(n - 1) } }
"#;
    let expected = [
        ("ask", FnKind::Contextual),
        ("detached", FnKind::Contextual),
        ("even", FnKind::Pure),
        ("fetch", FnKind::ExternCalling),
        ("fetch_twice", FnKind::ExternCalling),
        ("fib", FnKind::Pure),
        ("log", FnKind::ExternCalling),
        ("lookup", FnKind::ExternCalling),
        ("odd", FnKind::Pure),
        ("square", FnKind::Pure),
        ("sum_squares", FnKind::Pure),
        ("uses_detached", FnKind::Contextual),
    ];
    let expected: Vec<(String, FnKind)> =
        expected.iter().map(|(n, k)| (n.to_string(), *k)).collect();
    assert_eq!(kinds(text), expected);
}
