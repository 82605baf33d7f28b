//! `sapc serve --restate` against Restate's own server, run by `cargo test`:
//! `tools/restate/setup.sh` brings `restate-server` (npm `@restatedev/restate-server`);
//! then `tests/restate/test_restate.py` starts it on free ports and drives this build's
//! `sapc` workers through its admin and ingress APIs: a worker killed mid-run, two
//! workers sharing 200 invocations, a changed program refusing an old invocation, an
//! idempotent call, a terminal input error. The model is a scripted server on loopback.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// The tests that start a `restate-server` run one at a time: two servers at once on one
/// machine contend for the listeners the walkthrough leaves at their defaults.
static ONE_SERVER: Mutex<()> = Mutex::new(());

#[test]
fn restate_runs_sap_procedures_durably() {
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache = test_support::mcp::restate();
    let arch = if cfg!(target_arch = "aarch64") {
        "linux-arm64"
    } else {
        "linux-x64"
    };
    let server = cache.join(format!(
        "node_modules/@restatedev/restate-server-{arch}/bin/restate-server"
    ));
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/restate/test_restate.py"))
        .env("SAPC", env!("CARGO_BIN_EXE_sapc"))
        .env("RESTATE_SERVER", server)
        .env("MODEL_SERVER_DIR", root.join("crates/python/tests"))
        // The OTLP receiver decodes with `opentelemetry-proto`, in the MCP tests' venv.
        .env("OTLP_PYTHON", test_support::mcp::python())
        .output()
        .expect("python3 starts");
    assert!(
        out.status.success(),
        "the Restate tests failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sapc serve` with input it cannot serve: a clear error and exit code, nothing served.
#[test]
fn serve_refuses_what_it_cannot_serve() {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/restate/triage.sap");
    let program = program.to_str().unwrap();
    let scratch = test_support::Scratch::new("restate-cli");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sapc"))
            .args(args)
            .env("SAP_CACHE_DIR", scratch.join("cache"))
            .output()
            .expect("sapc starts");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["serve", "--restate", "localhost", program]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("as HOST:PORT"), "{err}");
    let (code, err) = run(&["serve", program]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--restate"), "{err}");
    let (code, err) = run(&[
        "serve",
        "--restate",
        "127.0.0.1:0",
        "--journal",
        "j.db",
        program,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("keeps each invocation's journal"), "{err}");
    // A file stem Restate does not take as a service name.
    let odd = scratch.join("9lives.sap");
    std::fs::write(&odd, "export fn f() -> i64 { 1 }\n").unwrap();
    let (code, err) = run(&["serve", "--restate", "127.0.0.1:0", odd.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("rename the file"), "{err}");
    // No exports; a program with errors.
    let none = scratch.join("none.sap");
    std::fs::write(&none, "fn f() -> i64 { 1 }\n").unwrap();
    let (code, err) = run(&["serve", "--restate", "127.0.0.1:0", none.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("exports no function"), "{err}");
    let broken = scratch.join("broken.sap");
    std::fs::write(&broken, "export fn f() -> i64 { nope }\n").unwrap();
    let (code, err) = run(&[
        "serve",
        "--restate",
        "127.0.0.1:0",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("broken.sap:1"), "{err}");
}

/// docs/DEPLOY.md's walkthrough, run as written (its one `sh` block), with this build's
/// `sapc` first on the `PATH`: each step's output checked as the doc shows it.
#[test]
fn the_deploy_walkthrough_runs_as_written() {
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    test_support::mcp::restate();
    let doc = std::fs::read_to_string(root.join("docs/DEPLOY.md")).unwrap();
    let block = doc
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("DEPLOY.md has a sh block");
    let _ = std::fs::remove_dir_all("/tmp/restate-demo");
    let bin = Path::new(env!("CARGO_BIN_EXE_sapc")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Whatever the walkthrough started is stopped, even when a step fails.
    let script = format!("set -e\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n{block}\n");
    let out = Command::new("timeout")
        .args(["120", "bash", "-c", &script])
        .current_dir(&root)
        .env("PATH", path)
        .output()
        .expect("bash starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{stdout}\n{stderr}"
    );
    // Step 3 registered the service, step 4 and step 5 got the typed result the doc
    // shows, step 5's journal has the batches, step 6 was served by the other worker.
    let shown = doc
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("DEPLOY.md shows step 4's answer");
    assert!(stdout.contains("\"name\":\"support\""), "{stdout}");
    assert_eq!(stdout.matches(shown).count(), 3, "{stdout}");
    assert!(
        stdout.contains("Run [b0]"),
        "the journal's steps:\n{stdout}"
    );
    let _ = std::fs::remove_dir_all("/tmp/restate-demo");
}
