//! `sapc acp` driven by ACP clients no one here wrote, run by `cargo test`:
//! `tools/acp/setup.sh` brings the Python SDK's client side (PyPI
//! `agent-client-protocol`) with pytest, and the headless CLI `acpx` (npm); then
//! `tests/acp/test_clients.py` runs under pytest against this build's `sapc`. The model
//! is a scripted server on loopback: no network.

use std::path::Path;
use std::process::Command;

#[test]
fn acp_clients_drive_sapc_acp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cache = test_support::mcp::acp_clients();
    let out = Command::new(cache.join("venv/bin/pytest"))
        .args(["-q", "-p", "no:cacheprovider"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/test_clients.py"))
        .env("SAPC", env!("CARGO_BIN_EXE_sapc"))
        .env("ACPX", cache.join("node/node_modules/.bin/acpx"))
        .env("MODEL_SERVER_DIR", root.join("crates/python/tests"))
        .output()
        .expect("pytest starts");
    assert!(
        out.status.success(),
        "the ACP client tests failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
