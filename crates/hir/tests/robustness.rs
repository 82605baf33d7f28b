//! The checker never panics on any input: random token soup and mutated real programs go
//! through parsing, resolution, inference and the context rules. Run longer with
//! `PROPTEST_CASES=20000 cargo test --release -p hir --test robustness`.

use std::path::Path;

use proptest::prelude::*;
use test_support::mutate::{FRAGMENTS, apply, edit};

fn programs() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out: Vec<String> = [
        "examples",
        "tests/fixtures/hir",
        "tests/fixtures/syntax/valid",
    ]
    .iter()
    .flat_map(|d| test_support::fixtures::sap_files(&root.join(d)))
    .map(|p| std::fs::read_to_string(p).unwrap())
    .collect();
    out.push(test_support::program(300));
    out
}

fn check(text: &str) {
    let mut db = hir::Database::default();
    let file = db.add_file("fuzz.sap", text);
    for d in hir::check_file(&db, file) {
        assert!(d.span.end as usize <= text.len(), "{d:?}");
        assert!(
            text.is_char_boundary(d.span.start as usize)
                && text.is_char_boundary(d.span.end as usize)
        );
    }
    let _ = hir::function_kinds(&db, hir::Db::workspace(&db));
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_programs_never_panic(which in any::<usize>(), edits in proptest::collection::vec(edit(), 1..8)) {
        let programs = programs();
        check(&apply(&programs[which % programs.len()], &edits));
    }

    #[test]
    fn token_soup_never_panics(parts in proptest::collection::vec(0usize..FRAGMENTS.len(), 0..200)) {
        let body: String = parts.iter().map(|&i| FRAGMENTS[i]).collect();
        check(&format!("fn f(ctx: Context, x: i32) -> i32 {{\n{body}\n}}\n"));
    }
}
