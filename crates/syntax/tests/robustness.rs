//! The parser never panics, never loops and keeps its spans on character boundaries, on
//! any input. The property tests feed random bytes and mutated real programs; run them
//! longer with `PROPTEST_CASES=100000 cargo test --release -p syntax --test robustness`.

use std::path::Path;

use proptest::prelude::*;
use syntax::{MAX_NESTING, Span, parse};
use test_support::mutate::{FRAGMENTS, apply, edit};

/// Every span a parse reports lies inside the text, on character boundaries.
fn assert_spans_valid(text: &str) {
    let result = parse(text);
    let check = |span: Span, what: &str| {
        assert!(span.start <= span.end, "{what}: inverted span {span:?}");
        assert!(
            span.end as usize <= text.len(),
            "{what}: span {span:?} past the end ({})",
            text.len()
        );
        assert!(
            text.is_char_boundary(span.start as usize),
            "{what}: {span:?} splits a character"
        );
        assert!(
            text.is_char_boundary(span.end as usize),
            "{what}: {span:?} splits a character"
        );
    };
    for d in &result.diagnostics {
        check(d.span, &d.message);
        for l in &d.secondary {
            check(l.span, &l.message);
        }
    }
    for item in &result.file.items {
        check(item.span, "item");
    }
}

fn seed_programs() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in [
        "examples",
        "tests/fixtures/syntax/seed",
        "tests/fixtures/syntax/valid",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "sap") {
                out.push(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        assert_spans_valid(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_token_soup_never_panics(parts in proptest::collection::vec(0usize..FRAGMENTS.len(), 0..300)) {
        let text: String = parts.iter().map(|&i| FRAGMENTS[i]).collect();
        assert_spans_valid(&text);
    }

    #[test]
    fn mutated_programs_never_panic(which in any::<usize>(), edits in proptest::collection::vec(edit(), 1..8)) {
        let seeds = seed_programs();
        let text = apply(&seeds[which % seeds.len()], &edits);
        assert_spans_valid(&text);
    }
}

#[test]
fn empty_and_trivia_only_inputs_are_clean() {
    for text in ["", " ", "\n\n", "// c", "/* c */", "\u{FEFF}"] {
        let p = parse(text);
        assert!(p.diagnostics.is_empty(), "{text:?}: {:?}", p.diagnostics);
        assert!(p.file.items.is_empty());
    }
}

#[test]
fn nesting_just_under_the_limit_parses() {
    let depth = MAX_NESTING - 2; // the function body's brace is one level
    let parens = format!(
        "fn f() -> i32 {{ {}1{} }}",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let lists = format!(
        "fn f() -> i32 {{ {}1{} }}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let blocks = format!(
        "fn f() -> i32 {{ {}1{} }}",
        "{".repeat(depth),
        "}".repeat(depth)
    );
    // On a thread with a main thread's stack (8 MiB), where `sapc` parses: an
    // unoptimized build's parser needs more than a test thread's default 2 MiB at this
    // depth (the language server's workers get 16 MiB).
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            for text in [parens, lists, blocks] {
                let p = parse(&text);
                assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
                assert_eq!(p.file.items.len(), 1);
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn deep_nesting_is_a_clean_error_and_later_items_survive() {
    for (open, close) in [("(", ")"), ("[", "]"), ("{", "}")] {
        let text = format!(
            "fn f() {{ {}1{} }}\nfn after() -> i32 {{ 2 }}\n",
            open.repeat(10_000),
            close.repeat(10_000)
        );
        let p = parse(&text);
        assert_eq!(p.diagnostics.len(), 1, "{:?}", p.diagnostics);
        assert_eq!(p.diagnostics[0].code, "E0004");
        assert_eq!(p.diagnostics[0].message, "nesting too deep");
        let names: Vec<&str> = p
            .file
            .items
            .iter()
            .filter_map(|i| i.name())
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(names, ["after"]);
    }
}

#[test]
fn spans_stay_correct_after_non_ascii_text() {
    let text = "fn f() -> String {\n    let café = \"日本語 🎉\"\n    café + x )\n}\n";
    let p = parse(text);
    let d = &p.diagnostics[0];
    // The error is at `)`, after multi-byte characters earlier in the item.
    assert_eq!(&text[d.span.range()], ")");
    let lc = syntax::LineIndex::new(text).line_col(text, d.span.start);
    assert_eq!((lc.line, lc.col), (2, 13));
}

#[test]
fn three_broken_functions_report_three_errors_and_keep_the_rest() {
    let text = "fn a() { let = 1 }\nfn ok1() {}\nfn b() { f(1 }\nstruct S { x: i32 }\nfn c() { 1 + }\nfn ok2() {}\n";
    let p = parse(text);
    assert_eq!(p.diagnostics.len(), 3, "{:?}", p.diagnostics);
    let names: Vec<&str> = p
        .file
        .items
        .iter()
        .filter_map(|i| i.name())
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["ok1", "S", "ok2"]);
}

#[test]
fn the_benchmark_program_parses_clean() {
    let text = test_support::program(2_000);
    let p = parse(&text);
    assert!(
        p.diagnostics.is_empty(),
        "{:?}",
        &p.diagnostics[..p.diagnostics.len().min(3)]
    );
    assert!(p.file.items.len() > 100);
}

/// Parsing chunk by chunk (what `hir` does to re-parse only what changed) gives the same
/// items and diagnostics as parsing the whole file.
fn assert_chunked_parse_matches(text: &str) {
    let whole = parse(text);
    let starts = syntax::chunk_starts(text);
    let mut items = Vec::new();
    let mut diagnostics = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let chunk = parse(&text[start..end]);
        items.extend(chunk.file.items.iter().map(|item| {
            (
                item.name().map(|n| n.name.clone()),
                item.span.start as usize + start,
            )
        }));
        // Messages may differ where a chunk ends (the chunk's parser sees the end of its
        // input where the whole file has the next item); what and where must not.
        diagnostics.extend(
            chunk
                .diagnostics
                .iter()
                .map(|d| (d.code, d.span.start as usize + start)),
        );
    }
    let whole_items: Vec<_> = whole
        .file
        .items
        .iter()
        .map(|item| {
            (
                item.name().map(|n| n.name.clone()),
                item.span.start as usize,
            )
        })
        .collect();
    let whole_diagnostics: Vec<_> = whole
        .diagnostics
        .iter()
        .map(|d| (d.code, d.span.start as usize))
        .collect();
    assert_eq!(items, whole_items);
    assert_eq!(diagnostics, whole_diagnostics);
}

#[test]
fn chunked_parse_matches_whole_parse_on_the_fixtures() {
    for text in seed_programs() {
        assert_chunked_parse_matches(&text);
    }
    assert_chunked_parse_matches(&test_support::program(500));
    assert_chunked_parse_matches(
        "fn a() { let = 1 }\n/// doc\n\nfn b() {}\nfn c( {}\nstruct S { x: i32 }\n",
    );
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn chunked_parse_matches_whole_parse_on_mutations(which in any::<usize>(), edits in proptest::collection::vec(edit(), 1..6)) {
        let seeds = seed_programs();
        assert_chunked_parse_matches(&apply(&seeds[which % seeds.len()], &edits));
    }
}

/// Errors are placed the same when other threads are parsing broken programs at the same
/// time. pest's switch for detailed errors is process-wide; CI once saw a chunked parse
/// put an error 14 bytes from where the whole parse put it, because another test's
/// thread switched detail off in the middle of it.
#[test]
fn errors_are_placed_the_same_under_concurrent_parses() {
    let broken: Vec<String> = seed_programs()
        .iter()
        .enumerate()
        .map(|(i, seed)| {
            let edits = [test_support::mutate::Edit::Delete {
                at: i * 7919,
                len: 9,
            }];
            apply(seed, &edits)
        })
        .collect();
    let expected: Vec<Vec<(&str, u32)>> = broken
        .iter()
        .map(|text| {
            parse(text)
                .diagnostics
                .iter()
                .map(|d| (d.code, d.span.start))
                .collect()
        })
        .collect();
    assert!(expected.iter().any(|d| !d.is_empty()), "no seed was broken");
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..50 {
                    for (text, expected) in broken.iter().zip(&expected) {
                        let got: Vec<_> = parse(text)
                            .diagnostics
                            .iter()
                            .map(|d| (d.code, d.span.start))
                            .collect();
                        assert_eq!(&got, expected);
                    }
                }
            });
        }
    });
}
