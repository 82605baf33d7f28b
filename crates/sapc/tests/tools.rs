//! The standard tools (`fs`, `http`, `process`) as a program uses them: denied unless
//! granted by a flag or by `[permissions]` in sap.toml, with errors that name the flag.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::json;
use test_support::http::{MockServer, Reply};

fn project(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sap-tools-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data/inner")).unwrap();
    std::fs::write(dir.join("data/notes.txt"), "first note").unwrap();
    std::fs::write(dir.join("secret.txt"), "do not read").unwrap();
    dir
}

fn sapc(dir: &PathBuf, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sapc"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("sapc runs")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn files_are_read_and_written_only_inside_granted_folders() {
    let dir = project("fs");
    std::fs::write(
        dir.join("main.sap"),
        r#"use fs

fn main() {
    print(fs::read("data/notes.txt"));
    fs::write("data/copy.txt", "copied");
    print(to_string(fs::list("data")));
    print(fs::read("data/../secret.txt"));
}
"#,
    )
    .unwrap();
    // Nothing granted: the first read is refused, and the error says what to add.
    let run = sapc(&dir, &["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        err(&run).contains("`fs::read` may not read data/notes.txt: run with --allow-read="),
        "{}",
        err(&run)
    );
    assert!(err(&run).contains("main.sap:4"), "{}", err(&run));

    // Read granted, write not.
    let run = sapc(&dir, &["run", "main.sap", "--allow-read=data"]);
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(out(&run), "first note\n");
    assert!(err(&run).contains("--allow-write="), "{}", err(&run));

    // Both granted: the `..` escape is still refused.
    let run = sapc(
        &dir,
        &["run", "main.sap", "--allow-read=data", "--allow-write=data"],
    );
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        out(&run),
        "first note\n[\"copy.txt\",\"inner\",\"notes.txt\"]\n"
    );
    assert!(
        err(&run).contains("may not read data/../secret.txt"),
        "{}",
        err(&run)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("data/copy.txt")).unwrap(),
        "copied"
    );

    // The same grants from sap.toml, relative to its folder.
    std::fs::write(
        dir.join("sap.toml"),
        "[permissions]\nread = [\"data\"]\nwrite = [\"data\"]\n",
    )
    .unwrap();
    let run = sapc(&dir, &["run", "main.sap"]);
    assert_eq!(
        out(&run),
        "first note\n[\"copy.txt\",\"inner\",\"notes.txt\"]\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn programs_run_as_an_argv_when_granted() {
    let dir = project("process");
    std::fs::write(
        dir.join("main.sap"),
        r#"use process

fn main() {
    let done = process::run("sh", ["-c", "echo out; echo err >&2; exit 3", "ignored"]);
    print(to_string(done.status));
    print(done.stdout);
    print(done.stderr);
    // An argv, not a shell line: the `;` is an argument.
    print(process::run("echo", ["a;", "b"]).stdout);
}
"#,
    )
    .unwrap();
    let run = sapc(&dir, &["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        err(&run).contains("may not run `sh`: run with --allow-run=sh"),
        "{}",
        err(&run)
    );
    let run = sapc(&dir, &["run", "main.sap", "--allow-run=sh,echo"]);
    assert!(run.status.success(), "{}", err(&run));
    assert_eq!(out(&run), "3\nout\n\nerr\n\na; b\n\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn http_reaches_only_granted_hosts() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(MockServer::start(|req, _| {
        if req.path.starts_with("/echo") {
            Reply::json(json!({"got": req.json()}))
        } else {
            Reply::status(200, "plain page")
        }
    }));
    let url = server.url();
    let host = url.trim_start_matches("http://").to_owned();
    let dir = project("http");
    std::fs::write(
        dir.join("main.sap"),
        format!(
            r#"use http

fn main() {{
    print(http::get("{url}/page"));
    print(to_string(http::post("{url}/echo", json_parse("{{\"n\": 1}}"))));
}}
"#
        ),
    )
    .unwrap();
    let run = sapc(&dir, &["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        err(&run).contains(&format!(
            "may not connect to {host}: run with --allow-net={host}"
        )),
        "{}",
        err(&run)
    );
    let run = sapc(&dir, &["run", "main.sap", &format!("--allow-net={host}")]);
    assert!(run.status.success(), "{}", err(&run));
    assert_eq!(out(&run), "plain page\n{\"got\":{\"n\":1}}\n");
    assert_eq!(server.requests().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
