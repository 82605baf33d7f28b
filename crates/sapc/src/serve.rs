//! `sapc mcp serve FILE`: a program's `export fn`s as MCP tools over stdio, so any MCP
//! host can call a sap procedure. Input and output schemas come from the signatures; a
//! `Context` parameter is not an input (each call gets a new, empty context). A runtime
//! error is a tool result with `isError`, its text the located message.

use std::sync::Arc;
use std::time::Instant;

use codegen_jit::Host;
use llm::schema::{arguments_schema, value_schema};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value as JsonValue};
use session::{CallError, Function, Loaded};

use crate::args::RunArgs;
use crate::exit;
use crate::run::failed;

/// One exported function as a tool.
struct Export {
    function: Function,
    tool: Tool,
    /// Whether the result is wrapped as `{"value": …}` (a non-object result).
    wrapped: bool,
}

struct SapServer {
    host: Arc<Host>,
    loaded: Arc<Loaded>,
    exports: Vec<Export>,
}

pub fn serve(args: RunArgs) -> u8 {
    match serve_inner(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}

fn serve_inner(args: &RunArgs) -> Result<u8, String> {
    let started = Instant::now();
    let loaded = match session::load_exports(&args.file) {
        Ok(loaded) => loaded,
        Err(failure) => return failed(failure),
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let options = session::Options {
        serving: true,
        ..args.options()
    };
    let (host, _runtime) = match loaded.host(&options, &tokio.handle().clone().into(), started) {
        Ok(made) => made,
        Err(failure) => return failed(failure),
    };
    let exports = loaded
        .module
        .exports
        .iter()
        .filter_map(|&id| loaded.function(&host, &loaded.module.functions[id as usize].name))
        .map(|function| {
            let mut input = arguments_schema(&function.params);
            // An `Option` argument may be left out (it is then `None`): a client is not
            // made to send `null` for it, as a strict model schema would be.
            if let Some(required) = input.get_mut("required").and_then(JsonValue::as_array_mut) {
                required.retain(|name| {
                    !function.params.iter().any(|p| {
                        Some(p.name.as_str()) == name.as_str()
                            && matches!(p.ty, runtime::TypeDesc::Option(_))
                    })
                });
            }
            let (output, wrapped) = value_schema(&function.ret);
            let mut tool = Tool::new(
                function.name.clone(),
                function.doc.clone().unwrap_or_default(),
                Arc::new(object(input)),
            );
            tool.output_schema = Some(Arc::new(object(output)));
            Export {
                function,
                tool,
                wrapped,
            }
        })
        .collect();
    let server = SapServer {
        host: Arc::new(host),
        loaded: Arc::new(loaded),
        exports,
    };
    tokio.block_on(async move {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| format!("cannot serve MCP over stdio: {e}"))?;
        running
            .waiting()
            .await
            .map_err(|e| format!("the MCP session ended with an error: {e}"))?;
        Ok::<_, String>(())
    })?;
    Ok(exit::OK)
}

fn object(schema: JsonValue) -> Map<String, JsonValue> {
    match schema {
        JsonValue::Object(map) => map,
        _ => Map::new(),
    }
}

impl ServerHandler for SapServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sap", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.exports.iter().map(|e| e.tool.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let export = self
            .exports
            .iter()
            .find(|e| e.tool.name == request.name)
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("there is no tool `{}`", request.name), None)
            })?;
        let arguments = request.arguments.unwrap_or_default();
        let (host, loaded, function) = (
            self.host.clone(),
            self.loaded.clone(),
            export.function.clone(),
        );
        let result = tokio::task::spawn_blocking(move || loaded.call(&host, &function, &arguments))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let result = match result {
            Ok(value) => {
                let json = value.to_json();
                let text = match &json {
                    JsonValue::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let structured = if export.wrapped {
                    serde_json::json!({ "value": json })
                } else {
                    json
                };
                let mut r = CallToolResult::structured(structured);
                r.content = vec![ContentBlock::text(text)];
                r
            }
            // An argument that does not fit is a tool error the caller can correct (as
            // the protocol asks), not a protocol error.
            Err(CallError::Arguments(message)) => {
                CallToolResult::error(vec![ContentBlock::text(message)])
            }
            Err(CallError::Run(e)) => CallToolResult::error(vec![ContentBlock::text(e.message)]),
        };
        Ok(rmcp::model::CallToolResponse::Complete(result))
    }
}
