//! Incrementality: salsa re-executes only what an edit can change. Editing inside one
//! function body re-checks that body alone; moving code (a line inserted above) re-checks
//! nothing. Counted from salsa's `WillExecute` events.

fn count(executed: &[String], query: &str) -> usize {
    executed
        .iter()
        .filter(|e| e.starts_with(&format!("{query}(")))
        .count()
}

fn program(functions: usize, edited_body: &str) -> String {
    let mut text = String::from("struct Point { x: i64, y: i64 }\n\n");
    for i in 0..functions {
        let body = if i == functions / 2 {
            edited_body.to_owned()
        } else {
            format!("x * {i} + 1")
        };
        text.push_str(&format!("/// Function {i}.\nfn f{i}(x: i64) -> i64 {{\n    let y = {body}\n    y + helper(x)\n}}\n\n"));
    }
    text.push_str("fn helper(x: i64) -> i64 { x - 1 }\n");
    text
}

#[test]
fn editing_one_body_rechecks_only_that_body() {
    let mut db = hir::Database::with_execution_log();
    let file = db.add_file("many.sap", program(200, "x * 2"));
    assert!(hir::check_file(&db, file).is_empty());
    let first = db.take_executed();
    assert_eq!(
        count(&first, "check_body"),
        201,
        "every body is checked once at first"
    );

    db.set_text(file, program(200, "x * 3 - 7"));
    assert!(hir::check_file(&db, file).is_empty());
    let executed = db.take_executed();
    assert_eq!(count(&executed, "check_body"), 1, "{executed:#?}");
    assert_eq!(
        count(&executed, "parse_chunk"),
        1,
        "only the edited chunk is parsed: {executed:#?}"
    );
    // The edited function's signature is recomputed (its syntax changed) and found equal.
    assert!(count(&executed, "fn_signature") <= 1, "{executed:#?}");
    assert_eq!(count(&executed, "struct_def"), 0, "{executed:#?}");
}

#[test]
fn moving_code_rechecks_nothing() {
    let mut db = hir::Database::with_execution_log();
    let text = program(100, "x * 2");
    let file = db.add_file("many.sap", text.clone());
    hir::check_file(&db, file);
    db.take_executed();

    // Two blank lines at the top move every item.
    db.set_text(file, format!("\n\n{text}"));
    let diagnostics = hir::check_file(&db, file).clone();
    let executed = db.take_executed();
    assert_eq!(count(&executed, "check_body"), 0, "{executed:#?}");
    assert_eq!(count(&executed, "fn_signature"), 0, "{executed:#?}");
    assert!(diagnostics.is_empty());
}

#[test]
fn a_signature_change_rechecks_the_callers() {
    let mut db = hir::Database::with_execution_log();
    let text = program(20, "x * 2");
    let file = db.add_file("many.sap", text.clone());
    hir::check_file(&db, file);
    db.take_executed();

    // `helper` now takes a String: every caller must be checked again, and each fails.
    db.set_text(
        file,
        text.replace(
            "fn helper(x: i64) -> i64 { x - 1 }",
            "fn helper(x: String) -> i64 { len(x) }",
        ),
    );
    let errors = hir::check_file(&db, file)
        .iter()
        .filter(|d| d.is_error())
        .count();
    let executed = db.take_executed();
    assert_eq!(errors, 20);
    assert_eq!(count(&executed, "check_body"), 21, "{executed:#?}");
}

#[test]
fn diagnostics_follow_moved_code() {
    let mut db = hir::Database::default();
    let file = db.add_file("a.sap", "fn f() -> i32 {\n    \"x\"\n}\n");
    let before = hir::check_file(&db, file)[0].span;
    db.set_text(file, "\n\nfn f() -> i32 {\n    \"x\"\n}\n");
    let after = hir::check_file(&db, file)[0].span;
    assert_eq!(after.start, before.start + 2);
}

/// The provenance analysis is one salsa query per function: editing one body analyses
/// that function again, and the others only if their summaries could change.
#[test]
fn editing_one_body_reanalyses_only_that_function_for_provenance() {
    let program = |edited: &str| {
        let mut text = String::from(
            "extern \"mcp:web\" fn fetch(url: String) -> String;\nextern fn pay(trusted to: String) -> Boolean;\n\n",
        );
        for i in 0..50 {
            let body = if i == 25 {
                edited.to_owned()
            } else {
                format!("\"f{i}\" + s")
            };
            text.push_str(&format!(
                "fn f{i}(s: String) -> String {{\n    return {body}\n}}\n\n"
            ));
        }
        text.push_str("fn main() {\n    print(f25(fetch(\"u\")))\n    print(to_string(pay(f3(\"alice\"))))\n}\n");
        text
    };
    let mut db = hir::Database::with_execution_log();
    let file = db.add_file("flows.sap", program("\"a\" + s"));
    assert!(hir::check_file(&db, file).is_empty());
    let first = db.take_executed();
    assert!(count(&first, "fn_analysis") >= 51, "{first:#?}");

    db.set_text(file, program("\"b\" + s + \"c\""));
    assert!(hir::check_file(&db, file).is_empty());
    let executed = db.take_executed();
    // The edited function, and nothing else: its summary did not change, so `main`
    // (its caller) is not analysed again.
    assert_eq!(count(&executed, "fn_analysis"), 1, "{executed:#?}");
}
