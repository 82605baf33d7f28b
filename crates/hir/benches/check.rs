//! `hir` checking speed (issue: cold check of 50,000 lines at ≥ 200,000 lines/s end to
//! end; re-check after a one-line edit inside one function of a 20,000-line program in
//! ≤ 10 ms). Run with `cargo bench -p hir --bench check`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

/// Replaces the `n`-th occurrence of `from` with `to`.
fn replace_nth(text: &str, from: &str, to: &str, n: usize) -> String {
    let at = text
        .match_indices(from)
        .nth(n)
        .expect("occurrence exists")
        .0;
    format!("{}{to}{}", &text[..at], &text[at + from.len()..])
}

fn cold_check(c: &mut Criterion) {
    let text = test_support::program(50_000);
    let lines = text.lines().count() as u64;
    {
        let mut db = hir::Database::default();
        let file = db.add_file("bench.sap", text.clone());
        let errors = hir::check_file(&db, file)
            .iter()
            .filter(|d| d.is_error())
            .count();
        assert_eq!(errors, 0, "the generated program must check clean");
    }
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    group.throughput(Throughput::Elements(lines));
    group.bench_function("cold_50k_lines", |b| {
        b.iter_batched(
            || text.clone(),
            |text| {
                let mut db = hir::Database::default();
                let file = db.add_file("bench.sap", text);
                black_box(hir::check_file(&db, file).len())
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn recheck_after_edit(c: &mut Criterion) {
    let text = test_support::program(20_000);
    // Two versions of one line inside one function body in the middle of the file.
    let middle = test_support::function_count(&text) / 20;
    let a = replace_nth(
        &text,
        "total = total + i * i - (i / 3) % 5",
        "total = total + i * i - (i / 3) % 7",
        middle,
    );
    let b = text.clone();
    let mut db = hir::Database::default();
    let file = db.add_file("bench.sap", a.clone());
    hir::check_file(&db, file);
    let mut flip = false;
    let mut group = c.benchmark_group("check");
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("recheck_after_one_line_edit_20k_lines", |bench| {
        bench.iter(|| {
            flip = !flip;
            db.set_text(file, if flip { b.clone() } else { a.clone() });
            black_box(hir::check_file(&db, file).len())
        })
    });
    group.finish();
}

/// The provenance analysis's share of a cold check (issue: ≤ 10%): the same 50,000-line
/// check without the analysis, and the analysis alone on the checked program (forced:
/// the program has no untrusted source, so `check_file` skips it).
fn provenance_share(c: &mut Criterion) {
    let text = test_support::program(50_000);
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    group.bench_function("cold_50k_lines_without_provenance", |b| {
        b.iter_batched(
            || text.clone(),
            |text| {
                let mut db = hir::Database::default();
                let file = db.add_file("bench.sap", text);
                let mut n = 0;
                for &item in &hir::items::file_items(&db, file).items {
                    if item.kind(&db) == hir::ItemKind::Fn {
                        n += hir::defs::fn_signature(&db, item).diagnostics.len();
                        n += hir::infer::check_body(&db, item).diagnostics.len();
                    }
                }
                black_box(n)
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("cold_50k_lines_provenance_only", |b| {
        b.iter_batched(
            || {
                // Everything else already checked: only the analysis is timed.
                let mut db = hir::Database::default();
                let file = db.add_file("bench.sap", text.clone());
                let items = hir::items::file_items(&db, file).items.clone();
                for &item in &items {
                    if item.kind(&db) == hir::ItemKind::Fn {
                        hir::infer::check_body(&db, item);
                    }
                }
                (db, file)
            },
            |(db, file)| {
                let mut n = 0;
                for &item in &hir::items::file_items(&db, file).items {
                    if item.kind(&db) == hir::ItemKind::Fn {
                        // The analysis itself, past the gate that skips it for a program
                        // with no source or no sink (as this one).
                        n += hir::provenance::fn_analysis(&db, item).1.len();
                    }
                }
                // Returned, so that dropping the database is not timed.
                (db, black_box(n))
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, cold_check, recheck_after_edit, provenance_share);
criterion_main!(benches);
