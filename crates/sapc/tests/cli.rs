//! `sapc` driven as a process: exit statuses, the three output formats, directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sapc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sapc"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("sapc runs")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn temp_dir(name: &str) -> test_support::Scratch {
    test_support::Scratch::new(&format!("cli-{name}"))
}

const BROKEN: &str = "fn one() -> i32 {\n    add(1, 2;\n}\n\nfn two() {\n    let = 5\n}\n";

#[test]
fn examples_check_clean() {
    let out = sapc(&["check", root().join("examples").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // `check` searches the folder recursively (`examples/acp/` has an agent).
    fn count_sap(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                if p.is_dir() {
                    count_sap(&p)
                } else {
                    usize::from(p.extension().is_some_and(|x| x == "sap"))
                }
            })
            .sum()
    }
    let count = count_sap(&root().join("examples"));
    assert!(count >= 14);
    assert!(
        stderr.contains(&format!("checked {count} files")),
        "{stderr}"
    );
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn errors_exit_1_and_render_with_source() {
    let dir = temp_dir("human");
    let file = dir.join("broken.sap");
    std::fs::write(&file, BROKEN).unwrap();
    let out = sapc(&["check", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("expected `)` after the arguments of `add`, found `;`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("expected a name after `let`, found `=`"),
        "{stderr}"
    );
    assert!(stderr.contains("broken.sap:2:13"), "{stderr}");
    assert!(
        stderr.contains("add(1, 2;"),
        "the source line is shown: {stderr}"
    );
    assert!(stderr.contains("checked 1 file: 2 errors"), "{stderr}");
}

#[test]
fn json_format_has_one_object_per_diagnostic() {
    let dir = temp_dir("json");
    let file = dir.join("broken.sap");
    std::fs::write(&file, BROKEN).unwrap();
    let out = sapc(&["check", "--format", "json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let objects: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(objects.len(), 2, "{stdout}");
    let first = &objects[0];
    assert_eq!(first["code"], "E0001");
    assert_eq!(first["severity"], "error");
    assert_eq!(first["line"], 2);
    assert_eq!(first["column"], 13);
    assert_eq!(first["range"]["start"], 30);
    assert!(first["file"].as_str().unwrap().ends_with("broken.sap"));
    assert_eq!(first["help"], "add `)`");
    assert_eq!(first["labels"][0]["message"], "`(` opened here");
}

#[test]
fn github_format_is_workflow_commands() {
    let dir = temp_dir("github");
    let file = dir.join("broken.sap");
    std::fs::write(&file, BROKEN).unwrap();
    let out = sapc(&["check", "--format", "github", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first = stdout.lines().next().unwrap();
    assert!(first.starts_with("::error file="), "{first}");
    assert!(
        first.contains(",line=2,col=13,endLine=2,endColumn=14,title=E0001::expected `)`"),
        "{first}"
    );
    assert!(
        first.contains("%0Ahelp: add `)`"),
        "newlines are escaped: {first}"
    );
}

#[test]
fn directories_are_searched_recursively() {
    let dir = temp_dir("recursive");
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    std::fs::write(dir.join("a/ok.sap"), "fn f() -> i32 { 1 }\n").unwrap();
    std::fs::write(dir.join("a/b/bad.sap"), "fn g( {}\n").unwrap();
    std::fs::write(dir.join("a/b/notes.txt"), "fn g( {}\n").unwrap();
    let out = sapc(&["check", "--format", "json", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains("bad.sap"));
}

#[test]
fn usage_and_io_problems_exit_2() {
    let out = sapc(&["check", "/definitely/not/here.sap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));

    let out = sapc(&["check", "--format", "xml", "."]);
    assert_eq!(out.status.code(), Some(2));

    let out = sapc(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));

    let empty = temp_dir("empty");
    let out = sapc(&["check", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no `.sap` files"));
}

#[test]
fn invalid_utf8_is_a_located_error() {
    let dir = temp_dir("utf8");
    let file = dir.join("bin.sap");
    std::fs::write(&file, b"fn f() {}\n\xff\xfe garbage").unwrap();
    let out = sapc(&["check", "--format", "json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("\"code\":\"E0009\""), "{stdout}");
    assert!(stdout.contains("\"line\":2"), "{stdout}");
}

#[test]
fn warnings_alone_exit_0() {
    let dir = temp_dir("warn");
    let file = dir.join("w.sap");
    std::fs::write(&file, "fn f() -> i32 {\n    /// nothing\n    1\n}\n").unwrap();
    let out = sapc(&["check", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("W0001"), "{stderr}");
    assert!(stderr.contains("1 warning"), "{stderr}");
}

#[test]
fn check_target_warns_where_a_provider_does_not_enforce_the_type() {
    let dir = temp_dir("target");
    let file = dir.join("rate.sap");
    std::fs::write(
        &file,
        "struct Score {\n    value: i32,\n    note: String,\n}\n\nfn rate(ctx: Context, text: String) -> Score {\n    text!\n}\n\nfn main(ctx: Context) -> () {\n    print(rate(ctx, \"good\").note)\n}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let out = sapc(&["check", path, "--target", "anthropic", "--format", "json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("W0301"), "{stdout}");
    assert!(stdout.contains("the `i32` range of `value`"), "{stdout}");
    assert!(
        stdout.contains("\"line\":8"),
        "at the end of `rate`: {stdout}"
    );
    // llama.cpp's grammar bounds integers: nothing to say.
    let out = sapc(&["check", path, "--target", "llamacpp", "--format", "json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("W0301"));
    // Without a target, no such warnings; an unknown target is a usage error.
    let out = sapc(&["check", path, "--format", "json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("W0301"));
    let out = sapc(&["check", path, "--target", "palm"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("use openai, anthropic"));
}

#[test]
fn every_example_checks_against_every_target() {
    for target in ["openai", "anthropic", "llamacpp", "ollama", "gemini"] {
        let out = sapc(&[
            "check",
            root().join("examples").to_str().unwrap(),
            "--target",
            target,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{target}: {stderr}");
    }
}

/// `file:line:column` in the human output counts characters, as the JSON does and as
/// editors do, after emoji and CJK and after a byte-order mark.
#[test]
fn human_and_json_columns_count_characters() {
    let dir = temp_dir("columns");
    let file = dir.join("columns.sap");
    std::fs::write(
        &file,
        "\u{feff}fn f() -> i32 {\n    let _s = \"😀中文\"; let x: i32 = \"str\"\n    x\n}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let human = sapc(&["check", file]);
    let json = sapc(&["check", "--format", "json", file]);
    let stdout = String::from_utf8(json.stdout).unwrap();
    let d: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(2), Some(34))
    );
    let stderr = String::from_utf8_lossy(&human.stderr);
    assert!(stderr.contains("columns.sap:2:34]"), "{stderr}");
}

#[test]
fn a_python_function_is_not_served_by_sapc_run_and_it_says_who_serves_it() {
    let dir = temp_dir("python-extern");
    let file = dir.join("mail.sap");
    std::fs::write(
        &file,
        "extern \"python\" fn read_mail(id: i64) -> String;\nfn main() { print(read_mail(1)) }\n",
    )
    .unwrap();
    let out = sapc(&["run", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("served by the Python application") && stderr.contains("mail.sap:1"),
        "{stderr}"
    );
}
