//! Tools outside the program: MCP servers' tools (the client, `sap.lock`, the importer),
//! and how a tool's arguments and result cross into and out of sap values.

#![forbid(unsafe_code)]

pub mod client;
pub mod import;
pub mod lock;
pub mod mcp;
pub mod result;
pub mod standard;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use client::Client;
use llm::types::{ParamDesc, TypeDesc};
use mcp::McpServer;
use runtime::trace::TraceSink;
use runtime::value::Value;
use standard::Grants;

/// The tools a run can reach: its MCP servers by name, and what the standard tools may
/// touch.
#[derive(Default)]
pub struct Tools {
    servers: HashMap<String, Arc<McpServer>>,
    grants: Grants,
    /// When the run's time budget ends: no tool call outlives it.
    deadline: Option<Instant>,
    /// The run's trace, for what the program records besides tool calls (`trust`).
    trace: Option<TraceSink>,
    /// The run's client (an editor): asked when a standard tool is outside the grants.
    client: Option<Arc<dyn Client>>,
}

impl Tools {
    pub fn add_server(&mut self, server: McpServer) {
        self.servers
            .insert(server.name().to_owned(), Arc::new(server));
    }

    pub fn with_trace(mut self, trace: Option<TraceSink>) -> Tools {
        self.trace = trace;
        self
    }

    /// Writes `event` to the run's trace, if it has one.
    pub fn record(&self, event: &serde_json::Value) {
        if let Some(trace) = &self.trace {
            trace.record(event);
        }
    }

    pub fn with_grants(mut self, grants: Grants) -> Tools {
        self.grants = grants;
        self
    }

    /// Calls the standard tool `module::tool` (`fs::read`, …) within the grants.
    pub async fn call_std(
        &self,
        module: &str,
        tool: &str,
        ret: &TypeDesc,
        args: &[Value],
    ) -> Result<Value, String> {
        let client = self.client.as_deref();
        standard::call(&self.grants, client, module, tool, args, ret, self.deadline).await
    }

    /// Asks `client` about standard tool calls outside the grants, and reads and writes
    /// files through it when it offers to.
    pub fn with_client(mut self, client: Arc<dyn Client>) -> Tools {
        self.client = Some(client);
        self
    }

    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Tools {
        self.deadline = deadline;
        self
    }

    /// Calls `tool` of MCP server `server` with sap values, and reads the result as `ret`.
    pub async fn call_mcp(
        &self,
        server: &str,
        tool: &str,
        params: &[ParamDesc],
        ret: &TypeDesc,
        args: &[Value],
    ) -> Result<Value, String> {
        let s = self.servers.get(server).ok_or_else(|| {
            format!(
                "no MCP server `{server}` is configured: add an [mcp.{server}] table to sap.toml"
            )
        })?;
        let arguments = result::arguments(params, args)?;
        let outcome = s.call(tool, arguments, self.deadline).await?;
        result::value(&outcome, ret)
            .map_err(|e| format!("MCP server `{server}`, tool `{tool}`: {e}"))
    }
}
