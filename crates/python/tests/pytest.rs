//! The Python package's own tests, run by `cargo test`: `tools/python/setup.sh` brings
//! maturin and a wheelhouse from PyPI, the wheel is built from this checkout (debug, on
//! this build's target directory; or `SAP_PYTHON_WHEEL` names one already built from
//! it, as CI's release wheel), installed into a fresh virtual environment made
//! offline from the wheelhouse, and `crates/python/tests/test_saplang.py` runs there
//! under pytest. Skipped, saying why, only when the set-up cannot install maturin.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(what: &str, command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_wheel_installs_into_a_fresh_environment_and_passes_its_tests() {
    let root = root();
    let setup = Command::new(root.join("tools/python/setup.sh")).output();
    let cache = match setup {
        Ok(out) if out.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Ok(out) => {
            eprintln!(
                "skipped: tools/python/setup.sh could not install maturin:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: tools/python/setup.sh could not run: {e}");
            return;
        }
    };
    let scratch = test_support::Scratch::new("python-wheel");
    // CI builds the release wheel from this checkout first and names it here, which
    // spares a second build of the whole workspace (debug, with pyo3's features).
    let wheel = match std::env::var_os("SAP_PYTHON_WHEEL") {
        Some(built) => PathBuf::from(built),
        None => {
            let wheels = scratch.join("wheels");
            run(
                "maturin build",
                Command::new(cache.join("venv/bin/maturin"))
                    .current_dir(&root)
                    .args(["build", "--quiet", "-m", "crates/python/Cargo.toml", "-o"])
                    .arg(&wheels),
            );
            std::fs::read_dir(&wheels)
                .unwrap()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "whl"))
                .expect("maturin wrote a wheel")
        }
    };
    assert!(wheel.is_file(), "no wheel at {}", wheel.display());
    let venv = scratch.join("venv");
    run(
        "python3 -m venv",
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
    );
    run(
        "pip install",
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
            ])
            .arg("--find-links")
            .arg(cache.join("wheelhouse"))
            .arg(&wheel)
            .args(["pytest", "mypy"]),
    );
    let out = run(
        "pytest",
        Command::new(venv.join("bin/python"))
            .current_dir(&root)
            // The OTLP receiver of the sapc tests, on the MCP set-up's Python (which
            // has OpenTelemetry's protobuf definitions).
            .env("OTLP_PYTHON", test_support::mcp::python())
            .env("OTLP_RECEIVER", root.join("tests/otlp/receiver.py"))
            .args([
                "-m",
                "pytest",
                "crates/python/tests",
                "-q",
                "-p",
                "no:cacheprovider",
            ]),
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains(" passed"), "{summary}");
    assert!(!summary.contains("skipped"), "{summary}");
}
