//! `sapc serve --restate` against Restate's own server, run by `cargo test`:
//! `tools/restate/setup.sh` brings `restate-server` (npm `@restatedev/restate-server`);
//! then `tests/restate/test_restate.py` starts it on free ports and drives this build's
//! `sapc` workers through its admin and ingress APIs: a worker killed mid-run, two
//! workers sharing 200 invocations, a changed program refusing an old invocation, an
//! idempotent call, a terminal input error. The model is a scripted server on loopback.

use std::path::Path;
use std::process::Command;

#[test]
fn restate_runs_sap_procedures_durably() {
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
        .output()
        .expect("python3 starts");
    assert!(
        out.status.success(),
        "the Restate tests failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
