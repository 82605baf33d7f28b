//! Parse throughput on a generated program of 50,000+ lines (issue: ≥ 20 MB/s).
//! Run with `cargo bench -p syntax --bench parse`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn parse_throughput(c: &mut Criterion) {
    let text = test_support::program(50_000);
    let lines = text.lines().count();
    let parse = syntax::parse(&text);
    assert!(
        parse.diagnostics.is_empty(),
        "the generated program must parse clean"
    );
    eprintln!(
        "program: {lines} lines, {} bytes, {} items",
        text.len(),
        parse.file.items.len()
    );

    let mut group = c.benchmark_group("parse");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("50k_lines_bytes", |b| {
        b.iter(|| syntax::parse(black_box(&text)))
    });
    group.throughput(Throughput::Elements(lines as u64));
    group.bench_function("50k_lines_lines", |b| {
        b.iter(|| syntax::parse(black_box(&text)))
    });
    group.finish();
}

criterion_group!(benches, parse_throughput);
criterion_main!(benches);
