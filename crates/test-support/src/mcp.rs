//! The real counterparts the tests talk to: the MCP servers, installed from the
//! registries by `tools/mcp/setup.sh` into a cache outside the repository, a headless
//! browser (`tools/browser/setup.sh`), and the ACP clients (`tools/acp/setup.sh`); once
//! per test process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Runs a set-up script of `tools/` and returns what it prints (a path). Panics with
/// what to do when it fails: a test of a real counterpart must not pass without one.
fn set_up(script: &str, needs: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tools")
        .join(script);
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed (it needs {needs}):\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The cache folder, after making sure the servers are installed.
pub fn cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        set_up(
            "mcp/setup.sh",
            "node/npm and python3 with network access to the registries",
        )
    })
}

/// `node` and the entry point of a reference server (`everything`, `filesystem`).
pub fn node_server(name: &str) -> (String, String) {
    let entry = cache()
        .join("npm/node_modules/@modelcontextprotocol")
        .join(format!("server-{name}"))
        .join("dist/index.js");
    ("node".to_owned(), entry.display().to_string())
}

/// Headless Chromium, installed from Debian's packages by `tools/browser/setup.sh` if it
/// is missing.
pub fn chromium() -> &'static Path {
    static CHROMIUM: OnceLock<PathBuf> = OnceLock::new();
    CHROMIUM.get_or_init(|| {
        set_up(
            "browser/setup.sh",
            "Debian's chromium package, or root to install it",
        )
    })
}

/// The cache of the ACP clients `sapc acp` is tested with: the Python SDK's client
/// (`venv/`, with pytest) and `acpx` (`node/node_modules/.bin/acpx`).
pub fn acp_clients() -> &'static Path {
    static CLIENTS: OnceLock<PathBuf> = OnceLock::new();
    CLIENTS.get_or_init(|| {
        set_up(
            "acp/setup.sh",
            "node/npm and python3 with network access to the registries",
        )
    })
}

/// Restate's server and CLI (npm), installed by `tools/restate/setup.sh`: the cache
/// folder they are in.
pub fn restate() -> &'static Path {
    static RESTATE: OnceLock<PathBuf> = OnceLock::new();
    RESTATE.get_or_init(|| {
        set_up(
            "restate/setup.sh",
            "node/npm with network access to the registry",
        )
    })
}

/// AgentDojo and the `mcp` SDK, installed by `tools/agentdojo/setup.sh`: the cache folder
/// (its `venv/bin/python` runs tools/agentdojo's server and judge).
pub fn agentdojo() -> &'static Path {
    static AGENTDOJO: OnceLock<PathBuf> = OnceLock::new();
    AGENTDOJO.get_or_init(|| set_up("agentdojo/setup.sh", "python3 with network access to PyPI"))
}

/// The Python of the venv that has the `mcp` SDK.
pub fn python() -> String {
    cache().join("venv/bin/python").display().to_string()
}
