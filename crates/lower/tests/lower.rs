//! The IR of every example, as snapshots of its printed form; serialization round trips.

use std::path::{Path, PathBuf};

fn lower_file(path: &Path) -> ir::Module {
    let mut db = hir::Database::default();
    db.add_prelude();
    db.add_file(
        path.display().to_string(),
        std::fs::read_to_string(path).unwrap(),
    );
    for module in test_support::fixtures::used_modules(path) {
        db.add_file(
            module.display().to_string(),
            std::fs::read_to_string(&module).unwrap(),
        );
    }
    lower::lower_workspace(&db).unwrap_or_else(|| panic!("{} does not check", path.display()))
}

fn examples() -> Vec<PathBuf> {
    test_support::fixtures::example_programs(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"),
    )
}

#[test]
fn every_example_lowers_and_matches_its_snapshot() {
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let examples = examples();
    assert!(examples.len() >= 10);
    for path in examples {
        let module = lower_file(&path);
        let mut printed = ir::print::module(&module);
        // Spans depend on the example's text; the snapshot is about structure.
        printed = printed
            .lines()
            .map(|l| l.split("  @").next().unwrap_or(l).to_owned() + "\n")
            .collect();
        let name = path.file_stem().unwrap().to_string_lossy().to_string() + ".ir";
        test_support::snapshot::assert_snapshot(&snapshots, &name, &printed);
    }
}

#[test]
fn the_ir_round_trips_through_json() {
    for path in examples() {
        let module = lower_file(&path);
        let json = serde_json::to_string(&module).unwrap();
        let back: ir::Module = serde_json::from_str(&json).unwrap();
        assert_eq!(module, back, "{}", path.display());
    }
}

#[test]
fn programs_with_errors_are_not_lowered() {
    let mut db = hir::Database::default();
    db.add_file("bad.sap", "fn f() -> i32 { \"no\" }\n");
    assert!(lower::lower_workspace(&db).is_none());
}

#[test]
fn llm_sites_are_distinct_instructions_with_spans() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/calculator_extern.sap");
    let module = lower_file(&path);
    let printed = ir::print::module(&module);
    assert!(printed.contains("site s0 in calculator_agent"), "{printed}");
    assert!(
        printed.contains("choose [add(x, y) as sum | subtract(x, y) as diff]"),
        "{printed}"
    );
    assert!(printed.contains("llm.choose s0"), "{printed}");
    assert!(printed.contains("call extern add(v"), "{printed}");
    let site = &module.sites[0];
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text[site.span.start as usize..site.span.end as usize].starts_with("select {"));
}

#[test]
fn data_injected_in_a_parallel_for_is_labelled_with_the_function_the_source_names() {
    let mut db = hir::Database::default();
    db.add_file(
        "p.sap",
        "fn judge(ctx: Context, note: String) -> Boolean {\n    \"Is it good?\"!\n    note!\n}\n\
         fn main(ctx: Context) -> () {\n    let all = parallel for item in [\"a\", \"b\"] {\n        \
         let c = ctx\n        let note = \"about \" + item\n        note!\n        judge(c, note)\n    }\n    \
         print(to_string(len(all)))\n}\n",
    );
    let module = lower::lower_workspace(&db).expect("the program lowers");
    let body = module
        .functions
        .iter()
        .find(|f| f.name.starts_with("main::parallel_for@"))
        .expect("the parallel body is a function of its own");
    let injects: Vec<&str> = body
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .filter_map(|i| match &i.op {
            ir::Op::Inject { function, .. } => Some(function.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(injects, ["main"]);
}
