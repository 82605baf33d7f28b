//! AgentDojo's environments as MCP servers (tools/agentdojo, #40): `tools/agentdojo/setup.sh`
//! brings AgentDojo and the `mcp` SDK from PyPI; then the environment server and the
//! judge are checked against AgentDojo's own verdicts through a real MCP client, and
//! every suite's real tool schemas are imported as typed sap externs that check.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn the_environment_server_and_the_judge_agree_with_agentdojo() {
    let python = test_support::mcp::agentdojo().join("venv/bin/python");
    let out = Command::new(python)
        .arg(root().join("tools/agentdojo/selftest.py"))
        .args(["--suite", "banking", "--limit", "2"])
        .output()
        .expect("python starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("4 of 4 cases judged as AgentDojo judges them"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_suites_tools_import_as_typed_externs() {
    let python = test_support::mcp::agentdojo().join("venv/bin/python");
    let scratch = test_support::Scratch::new("agentdojo-import");
    let server = root().join("tools/agentdojo/env_server.py");
    let suites = ["workspace", "slack", "travel", "banking"];
    let toml: String = suites
        .iter()
        .map(|s| {
            format!(
                "[mcp.{s}]\ncommand = \"{}\"\nargs = [\"{}\", \"--suite\", \"{s}\", \"--user-task\", \"user_task_0\"]\n\n",
                python.display(),
                server.display()
            )
        })
        .collect();
    std::fs::write(scratch.join("sap.toml"), toml).unwrap();
    let sapc = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sapc"))
            .args(args)
            .current_dir(&*scratch)
            .output()
            .expect("sapc starts");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "sapc {args:?}:\n{text}");
        text
    };
    for (suite, tools) in suites.iter().zip([24, 11, 28, 11]) {
        let said = sapc(&["mcp", "import", suite]);
        assert!(
            said.contains(&format!("({tools} tools of `{suite}`")),
            "{said}"
        );
    }
    let checked = sapc(&["check", "."]);
    assert!(checked.contains("no problems"), "{checked}");
    let banking = std::fs::read_to_string(scratch.join("banking.sap")).unwrap();
    assert!(
        banking.contains("extern \"mcp:banking\" fn send_money("),
        "{banking}"
    );
    assert!(banking.contains("    amount: f64,"), "{banking}");
}
