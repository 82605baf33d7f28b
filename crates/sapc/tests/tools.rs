//! The standard tools (`fs`, `http`, `process`) as a program uses them: denied unless
//! granted by a flag or by `[permissions]` in sap.toml, with errors that name the flag.

mod common;

use common::{Project, stderr as err, stdout as out};
use serde_json::json;
use test_support::http::{MockServer, Reply};

/// A project folder with data to read, and a secret beside it.
fn project(name: &str) -> Project {
    let p = Project::new(&format!("tools-{name}"), "");
    std::fs::create_dir_all(p.dir.join("data/inner")).unwrap();
    p.write("data/notes.txt", "first note")
        .write("secret.txt", "do not read");
    p
}

#[test]
fn files_are_read_and_written_only_inside_granted_folders() {
    let p = project("fs");
    std::fs::write(
        p.dir.join("main.sap"),
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
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        err(&run).contains("`fs::read` may not read data/notes.txt: run with --allow-read="),
        "{}",
        err(&run)
    );
    assert!(err(&run).contains("main.sap:4"), "{}", err(&run));

    // Read granted, write not.
    let run = p.sapc(&["run", "main.sap", "--allow-read=data"]);
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(out(&run), "first note\n");
    assert!(err(&run).contains("--allow-write="), "{}", err(&run));

    // Both granted: the `..` escape is still refused.
    let run = p.sapc(&["run", "main.sap", "--allow-read=data", "--allow-write=data"]);
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
        std::fs::read_to_string(p.dir.join("data/copy.txt")).unwrap(),
        "copied"
    );

    // The same grants from sap.toml, relative to its folder.
    std::fs::write(
        p.dir.join("sap.toml"),
        "[permissions]\nread = [\"data\"]\nwrite = [\"data\"]\n",
    )
    .unwrap();
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(
        out(&run),
        "first note\n[\"copy.txt\",\"inner\",\"notes.txt\"]\n"
    );
}

#[test]
fn programs_run_as_an_argv_when_granted() {
    let p = project("process");
    std::fs::write(
        p.dir.join("main.sap"),
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
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        err(&run).contains("may not run `sh`: run with --allow-run=sh"),
        "{}",
        err(&run)
    );
    let run = p.sapc(&["run", "main.sap", "--allow-run=sh,echo"]);
    assert!(run.status.success(), "{}", err(&run));
    assert_eq!(out(&run), "3\nout\n\nerr\n\na; b\n\n");
    // The same grant in sap.toml; a program it does not name is still refused.
    std::fs::write(p.dir.join("sap.toml"), "[permissions]\nrun = [\"sh\"]\n").unwrap();
    let run = p.sapc(&["run", "main.sap"]);
    assert!(
        err(&run).contains("may not run `echo`: run with --allow-run=echo"),
        "{}",
        err(&run)
    );
    std::fs::write(
        p.dir.join("sap.toml"),
        "[permissions]\nrun = [\"sh\", \"echo\"]\n",
    )
    .unwrap();
    let run = p.sapc(&["run", "main.sap"]);
    assert!(run.status.success(), "{}", err(&run));
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
    let p = project("http");
    std::fs::write(
        p.dir.join("main.sap"),
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
    let run = p.sapc(&["run", "main.sap"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        err(&run).contains(&format!(
            "may not connect to {host}: run with --allow-net={host}"
        )),
        "{}",
        err(&run)
    );
    let run = p.sapc(&["run", "main.sap", &format!("--allow-net={host}")]);
    assert!(run.status.success(), "{}", err(&run));
    assert_eq!(out(&run), "plain page\n{\"got\":{\"n\":1}}\n");
    assert_eq!(server.requests().len(), 2);
    // The same grant in sap.toml.
    std::fs::write(
        p.dir.join("sap.toml"),
        format!("[permissions]\nnet = [\"{host}\"]\n"),
    )
    .unwrap();
    let run = p.sapc(&["run", "main.sap"]);
    assert!(run.status.success(), "{}", err(&run));
    assert_eq!(server.requests().len(), 4);
}
