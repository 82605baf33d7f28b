//! Differential testing: random programs give the same result — or the same error —
//! through the JIT and through the reference evaluator: integer programs (arithmetic that
//! may overflow or divide by zero, comparisons, `if`, loops, calls), and list programs
//! (appends in place and not, shared lists, nesting, indexing in and out of range, `for`,
//! `set`, `parallel for`, lists from builtins).

use std::sync::Arc;

use codegen_jit::{Evaluator, Externs, Host, Limits, on_big_stack};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum E {
    Lit(i64),
    Var(usize),
    Bin(&'static str, Box<E>, Box<E>),
    If(Box<E>, Box<E>, Box<E>),
    Call(Box<E>),
}

fn show(e: &E) -> String {
    match e {
        // `a - a + n` gives the literal the type of `a` (`i64`) wherever it stands: a
        // literal nothing constrains is an `i32`, and `i64::MAX` does not fit one.
        E::Lit(n) => format!("(a - a + ({n}))"),
        E::Var(i) => ["a", "b", "c"][*i].to_owned(),
        E::Bin(op, l, r) if ["<", "==", ">="].contains(op) => {
            format!("(if {} {op} {} {{ 1 }} else {{ 0 }})", show(l), show(r))
        }
        E::Bin(op, l, r) => format!("({} {op} {})", show(l), show(r)),
        E::If(c, t, f) => format!(
            "(if {} > 0 {{ {} }} else {{ {} }})",
            show(c),
            show(t),
            show(f)
        ),
        E::Call(x) => format!("g({})", show(x)),
    }
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(-1),
            Just(7),
            Just(i64::MAX),
            Just(i64::MIN + 1),
            -1000i64..1000
        ]
        .prop_map(E::Lit),
        (0usize..3).prop_map(E::Var),
    ];
    leaf.prop_recursive(5, 40, 3, |inner| {
        prop_oneof![
            (
                prop_oneof![
                    Just("+"),
                    Just("-"),
                    Just("*"),
                    Just("/"),
                    Just("%"),
                    Just("<"),
                    Just("=="),
                    Just(">=")
                ],
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, l, r)| E::Bin(op, Box::new(l), Box::new(r))),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, t, f)| E::If(
                Box::new(c),
                Box::new(t),
                Box::new(f)
            )),
            inner.prop_map(|x| E::Call(Box::new(x))),
        ]
    })
}

fn program(e: &E, a: i64, b: i64, c: i64) -> String {
    format!(
        "fn g(x: i64) -> i64 {{\n    let s: i64 = 0\n    let i: i64 = 0\n    while i < 3 {{ s = s + x % 5; i += 1 }}\n    s\n}}\nfn f(a: i64, b: i64, c: i64) -> i64 {{ {} }}\nfn main() -> i64 {{ f({a}, {b}, {c}) }}\n",
        show(e)
    )
}

/// One statement of a list program over `a`, `b: List<i64>`, `g: List<List<i64>>`,
/// `s: List<String>` and `t: i64`.
fn list_statement() -> impl Strategy<Value = String> {
    let k = prop_oneof![Just(-1i64), 0i64..6, Just(100)];
    prop_oneof![
        k.clone().prop_map(|k| format!("a = push(a, {k})")),
        k.clone().prop_map(|k| format!("b = push(b, {k})")),
        Just("b = a".to_owned()),
        Just("a = b".to_owned()),
        k.clone().prop_map(|k| format!("a = push(b, {k})")),
        Just("g = push(g, a)".to_owned()),
        Just("g = push(g, [t, t + 1])".to_owned()),
        k.clone()
            .prop_map(|k| format!("if len(g) > 0 {{ a = g[{k} % len(g)] }}")),
        k.clone().prop_map(|k| format!("t = t + a[{k}]")),
        k.clone()
            .prop_map(|k| format!("if len(g) > 1 {{ t = t + g[1][{k}] }}")),
        Just("for x in a { t = t + x }".to_owned()),
        Just("for w in s { t = t + len(w) }".to_owned()),
        // Replacements in place (and not, when shared), of every element kind.
        k.clone().prop_map(|k| format!("if len(s) > 0 {{ s = set(s, {k} % len(s), \"z\") }}")),
        k.clone().prop_map(|k| format!("if len(g) > 0 {{ g = set(g, {k} % len(g), a) }}")),
        k.clone().prop_map(|k| format!(
            "let j = 1\n    while j < len(a) {{ a = set(a, j, a[j - 1] + {k})\n if j == {k} {{ b = a }}\n j += 1 }}"
        )),
        // Mostly an error (a node that is not one, or a cycle), sometimes layers.
        Just("t = t + len(toposort(g))".to_owned()),
        Just("g = push(g, [len(g) - 1])".to_owned()),
        Just("for row in g { for x in row { t = t + x } }".to_owned()),
        (k.clone(), k.clone()).prop_map(|(i, v)| format!("a = set(a, {i}, {v})")),
        Just("s = push(s, to_string(len(a)))".to_owned()),
        Just("s = lines(\"x\\ny\")".to_owned()),
        Just("if len(s) > 0 { s = push(s, s[0] + \"!\") }".to_owned()),
        Just("a = parallel for x in a { x * 2 }".to_owned()),
        k.clone().prop_map(|k| format!(
            "let i = 0\n    while i < {k} {{ a = push(a, i)\n b = push(b, len(a))\n i += 1 }}"
        )),
        // Appends in a loop while the list is shared, kept, replaced or read midway.
        (k.clone(), k).prop_map(|(k, j)| format!(
            "let i = 0\n    while i < {k} {{ a = push(a, i)\n if i == {j} {{ b = a }}\n if i == {j} + 1 {{ g = push(g, a) }}\n if i == {j} + 2 {{ a = [t] }}\n t = t + len(a) + a[len(a) - 1]\n i += 1 }}"
        )),
    ]
}

/// Runs `source`'s `main` through both engines and fails unless they give the same value,
/// or the same error at the same place through the same calls.
fn agree(source: &str) -> Result<(), TestCaseError> {
    let mut db = hir::Database::default();
    let file = db.add_file("diff.sap", source.to_owned());
    let errors: Vec<_> = hir::check_file(&db, file)
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    prop_assert!(errors.is_empty(), "{source}\n{errors:#?}");
    let module = Arc::new(lower::lower_workspace(&db).unwrap());
    // A worker thread: `parallel for` iterations run on threads of their own.
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let host = Host::new(
        module.clone(),
        None,
        tokio.handle().clone(),
        Externs::default(),
        Limits::default(),
    );
    let program = codegen_jit::compile(module).unwrap();
    let jit = on_big_stack(|| program.run_main(&host));
    let eval = on_big_stack(|| Evaluator::new(&host).run_main());
    match (&jit, &eval) {
        (Ok(x), Ok(y)) => prop_assert_eq!(x, y, "{}", source),
        (Err(x), Err(y)) => {
            prop_assert_eq!(&x.message, &y.message, "{}", source);
            prop_assert_eq!(x.span, y.span, "{}", source);
            let names = |e: &codegen_jit::ExecError| {
                e.stack
                    .iter()
                    .map(|f| f.function.clone())
                    .collect::<Vec<_>>()
            };
            prop_assert_eq!(names(x), names(y), "{}", source);
        }
        _ => prop_assert!(
            false,
            "the engines disagree on\n{source}\nJIT: {jit:?}\nevaluator: {eval:?}"
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn jit_and_evaluator_agree(e in expr(), a in -50i64..50, b in prop_oneof![Just(0i64), -50i64..50], c in prop_oneof![Just(i64::MAX), -9i64..9]) {
        agree(&program(&e, a, b, c))?;
    }

    #[test]
    fn jit_and_evaluator_agree_on_lists(statements in proptest::collection::vec(list_statement(), 1..14)) {
        let source = format!(
            "fn main() -> String {{\n    let a: List<i64> = [1, 2]\n    let b: List<i64> = []\n    let g: List<List<i64>> = []\n    let s: List<String> = []\n    let t = 0\n    {}\n    to_string(a) + \" \" + to_string(b) + \" \" + to_string(g) + \" \" + to_string(s) + \" \" + to_string(t)\n}}\n",
            statements.join("\n    ")
        );
        agree(&source)?;
    }
}
