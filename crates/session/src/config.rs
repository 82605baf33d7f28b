//! `sap.toml`: the provider, budgets and MCP servers of the programs beside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tools::mcp::ServerConfig;

/// `sap.toml`, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub provider: ProviderConfig,
    #[serde(default)]
    pub budgets: BudgetConfig,
    /// `[mcp.NAME]`: the MCP servers whose tools `extern "mcp:NAME" fn`s call.
    #[serde(default)]
    pub mcp: BTreeMap<String, ServerConfig>,
    /// `[permissions]`: what the standard tools may touch, besides the `--allow-*` flags.
    #[serde(default)]
    pub permissions: Permissions,
    /// The folder of the `sap.toml` read (where MCP commands start and `sap.lock` is);
    /// the program's folder when there is none.
    #[serde(skip)]
    pub dir: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub stream: Option<bool>,
    pub concurrency: Option<usize>,
    pub timeout_seconds: Option<f64>,
    pub max_retries: Option<u32>,
    pub structured: Option<String>,
    /// The temperature; by default the server's (see docs/PROVIDERS.md for why not 0).
    pub temperature: Option<f64>,
    /// The base of every request's seed (default 0): each call's seed follows from it and
    /// the call's place in the program, so sampling repeats from run to run.
    pub seed: Option<u64>,
    /// The output limit of every answer (default: derived from each answer's type, for
    /// servers other than OpenAI's own).
    pub max_output_tokens: Option<u32>,
    /// The in-process model's context window (`--provider local`), in tokens: at most
    /// the model's training length, which is the default.
    pub context_tokens: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    pub max_calls: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_time_seconds: Option<f64>,
    pub max_depth: Option<u32>,
    pub max_iterations: Option<u64>,
    pub max_model_iterations: Option<u64>,
}

/// `[permissions]`: folders relative to sap.toml's, hosts, programs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    #[serde(default)]
    pub net: Vec<String>,
    #[serde(default)]
    pub run: Vec<String>,
}

/// The `sap.toml` beside the program, else the one in the current directory.
pub fn load_config(program: &Path) -> Result<Config, String> {
    let folder = program
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for dir in [folder, Path::new(".")] {
        if let Some(config) = read_config(dir)? {
            return Ok(config);
        }
    }
    Ok(Config {
        dir: folder.to_owned(),
        ..Config::default()
    })
}

/// The `sap.toml` in `dir`, if there is one.
pub fn read_config(dir: &Path) -> Result<Option<Config>, String> {
    let path = dir.join("sap.toml");
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut config: Config =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    for (name, server) in &config.mcp {
        server
            .validate(name)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    config.dir = dir.to_owned();
    Ok(Some(config))
}
