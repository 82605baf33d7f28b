//! What the `sapc` process tests share.

#![allow(dead_code)]

pub mod mcp;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `sapc` with `args`, from the repository root, as the README runs the examples.
pub fn sapc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sapc"))
        .current_dir(examples().join(".."))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("sapc runs")
}

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A fresh folder of the test's own, holding `NAME.sap` with `text`: the folder (removed
/// when dropped) and the file.
pub fn program(name: &str, text: &str) -> (test_support::Scratch, PathBuf) {
    let dir = test_support::Scratch::new(name);
    let file = dir.join(format!("{name}.sap"));
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// A folder of a test's own with a `sap.toml`, as a user would have; removed at the end
/// (with its `Scratch`).
pub struct Project {
    pub dir: test_support::Scratch,
}

impl Project {
    pub fn new(name: &str, toml: &str) -> Project {
        let dir = test_support::Scratch::new(&format!("mcp-{name}"));
        std::fs::write(dir.join("sap.toml"), toml).unwrap();
        Project { dir }
    }

    pub fn write(&self, file: &str, text: &str) -> &Project {
        std::fs::write(self.dir.join(file), text).unwrap();
        self
    }

    pub fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap()
    }

    pub fn sapc(&self, args: &[&str]) -> Output {
        self.sapc_with_env(args, &[])
    }

    /// `sapc` with `args` and these environment variables set.
    pub fn sapc_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_sapc"))
            .current_dir(&self.dir)
            .args(args)
            .env("NO_COLOR", "1")
            .envs(vars.iter().copied())
            .output()
            .expect("sapc runs")
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

/// The run ended with `code`, and its standard error says `text`.
pub fn fails(o: &Output, code: i32, text: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
    assert!(stderr(o).contains(text), "{}", stderr(o));
}
