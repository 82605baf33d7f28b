//! `sapc mcp`: MCP servers' tools as sap modules (`import`, `list`), and the tools a run
//! connects to.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use tools::import::import_module;
use tools::lock::ToolLock;
use tools::mcp::McpServer;

use crate::exit;
use session::read_config;

#[derive(Subcommand)]
pub enum McpCommand {
    /// Connect to a server of sap.toml and write NAME.sap beside it: one typed `extern`
    /// per tool. Records each tool's schema in sap.lock.
    Import {
        /// The server: an [mcp.NAME] table of sap.toml.
        name: String,
        /// The folder of sap.toml (default: the current directory).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Connect to a server of sap.toml and print its tools with their sap signatures.
    List {
        name: String,
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Serve the program's `export fn`s as MCP tools over standard input and output
    /// (with `sapc run`'s flags for the provider, budgets and grants).
    Serve(Box<crate::args::RunArgs>),
}

pub fn run(command: McpCommand) -> u8 {
    let result = match command {
        McpCommand::Import { name, dir } => import(&name, &dir),
        McpCommand::List { name, dir } => list(&name, &dir),
        McpCommand::Serve(args) => return crate::serve::serve(*args),
    };
    match result {
        Ok(()) => exit::OK,
        Err(message) => {
            eprintln!("error: {message}");
            exit::ERRORS
        }
    }
}

/// The server `name` of the sap.toml in `dir`, not yet connected.
fn server(name: &str, dir: &Path) -> Result<McpServer, String> {
    let config =
        read_config(dir)?.ok_or_else(|| format!("there is no sap.toml in {}", dir.display()))?;
    let server = config.mcp.get(name).cloned().ok_or_else(|| {
        let known: Vec<&String> = config.mcp.keys().collect();
        format!(
            "sap.toml in {} has no [mcp.{name}] table{}",
            dir.display(),
            if known.is_empty() {
                String::new()
            } else {
                format!(
                    " (it has {})",
                    known
                        .iter()
                        .map(|k| format!("[mcp.{k}]"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )
    })?;
    Ok(McpServer::new(name, server, dir))
}

fn block_on<T>(f: impl Future<Output = T>) -> Result<T, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    Ok(rt.block_on(f))
}

fn import(name: &str, dir: &Path) -> Result<(), String> {
    // The module is named after the server, as a sap identifier (`brave-search` →
    // `brave_search.sap`); its bindings keep the server's own name.
    let module_name = tools::import::identifier(name);
    let server = server(name, dir)?;
    let (tools, version) = block_on(async {
        let tools = server.list_tools().await?;
        Ok::<_, String>((tools, server.protocol_version().await?))
    })??;
    let imported = import_module(name, &tools);
    let module = dir.join(format!("{module_name}.sap"));
    std::fs::write(&module, &imported.text)
        .map_err(|e| format!("cannot write {}: {e}", module.display()))?;
    let lock_path = dir.join("sap.lock");
    let mut lock = ToolLock::read(&lock_path)?;
    lock.set_server(name, &tools);
    lock.write(&lock_path)?;
    eprintln!(
        "wrote {} ({} tools of `{name}`, protocol {version}) and {}",
        module.display(),
        imported.tools.len(),
        lock_path.display()
    );
    Ok(())
}

fn list(name: &str, dir: &Path) -> Result<(), String> {
    let server = server(name, dir)?;
    let tools = block_on(server.list_tools())??;
    let imported = import_module(name, &tools);
    for (tool, line) in tools.iter().zip(&imported.tools) {
        println!("{}", line.tool);
        if let Some(d) = tool.description.as_deref() {
            let first = d.lines().next().unwrap_or_default();
            println!("    {first}");
        }
        println!("    {}", line.signature);
    }
    Ok(())
}
