//! `sapc mcp serve FILE`: a program's `export fn`s as MCP tools over stdio, so any MCP
//! host can call a sap procedure. Input and output schemas come from the signatures; a
//! `Context` parameter is not an input (each call gets a new, empty context). A runtime
//! error is a tool result with `isError`, its text the located message.

use std::sync::Arc;
use std::time::Instant;

use codegen_jit::{Host, JitProgram, on_big_stack};
use ir::{FuncId, Type};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use runtime::schema::{arguments_schema, value_schema};
use runtime::types::ParamDesc;
use runtime::value::decode;
use serde_json::{Map, Value as JsonValue};

use crate::args::RunArgs;
use crate::config::load_config;
use crate::session::{checked_externs, compile, host_for, load_program};
use crate::{cache, exit};

/// One exported function as a tool.
struct Export {
    id: FuncId,
    tool: Tool,
    /// The parameters an MCP client gives (not the `Context`).
    params: Vec<ParamDesc>,
    /// Whether the result is wrapped as `{"value": …}` (a non-object result).
    wrapped: bool,
}

struct SapServer {
    host: Arc<Host>,
    program: Arc<JitProgram>,
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
    let config = load_config(&args.file)?;
    let inputs = cache::Inputs::read(&args.file)?;
    let program = match load_program(&inputs)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let module = match compile(&program)? {
        Ok(m) => Arc::new(m),
        Err(code) => return Ok(code),
    };
    if module.exports.is_empty() {
        return Err(format!(
            "`{}` exports no function: mark the functions to offer with `export fn`",
            args.file.display()
        ));
    }
    // What is served is what the exports reach, whatever `main` does: every function is
    // compiled, and a provider is needed only when an export can call the model.
    let calls_model = module.reaches_model(&module.reachable_from(&module.exports));
    let module = Arc::new(ir::Module {
        main: None,
        ..(*module).clone()
    });
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let externs = checked_externs(&module).map_err(|e| e.message)?;
    let (host, _runtime) = host_for(
        args,
        &config,
        module.clone(),
        externs,
        calls_model,
        started,
        &tokio.handle().clone().into(),
    )?;
    let native = codegen_jit::compile_native(&module)?;
    let jit = codegen_jit::load(&native, module.clone())?;
    let exports = module
        .exports
        .iter()
        .map(|&id| {
            let f = &module.functions[id as usize];
            let params: Vec<ParamDesc> = f
                .params
                .iter()
                .filter(|p| p.ty != Type::Context)
                .map(|p| ParamDesc {
                    name: p.name.clone(),
                    doc: p.doc.clone(),
                    ty: host.desc(&p.ty),
                })
                .collect();
            let mut input = arguments_schema(&params);
            // An `Option` argument may be left out (it is then `None`): a client is not
            // made to send `null` for it, as a strict model schema would be.
            if let Some(required) = input.get_mut("required").and_then(JsonValue::as_array_mut) {
                required.retain(|name| {
                    !params.iter().any(|p| {
                        Some(p.name.as_str()) == name.as_str()
                            && matches!(p.ty, runtime::TypeDesc::Option(_))
                    })
                });
            }
            let (output, wrapped) = value_schema(&host.desc(&f.ret));
            let mut tool = Tool::new(
                f.name.clone(),
                f.doc.clone().unwrap_or_default(),
                Arc::new(object(input)),
            );
            tool.output_schema = Some(Arc::new(object(output)));
            Export {
                id,
                tool,
                params,
                wrapped,
            }
        })
        .collect();
    let server = SapServer {
        host: Arc::new(host),
        program: Arc::new(jit),
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
        // The schema says `additionalProperties: false`: an argument the tool does not
        // take is the caller's mistake, said as such rather than ignored.
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !export.params.iter().any(|p| &p.name == *k))
        {
            let takes: Vec<&str> = export.params.iter().map(|p| p.name.as_str()).collect();
            return Ok(rmcp::model::CallToolResponse::Complete(
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "`{}` takes no argument `{unknown}` (it takes: {})",
                    export.tool.name,
                    if takes.is_empty() {
                        "none".to_owned()
                    } else {
                        takes.join(", ")
                    }
                ))]),
            ));
        }
        let mut values = Vec::new();
        for p in &export.params {
            let given = arguments.get(&p.name).cloned().unwrap_or(JsonValue::Null);
            match decode(&p.ty, &given) {
                Ok(value) => values.push(value),
                // An argument that does not fit is a tool error the caller can correct
                // (as the protocol asks), not a protocol error.
                Err(e) => {
                    return Ok(rmcp::model::CallToolResponse::Complete(
                        CallToolResult::error(vec![ContentBlock::text(format!(
                            "argument `{}` of `{}`: {e}",
                            p.name, export.tool.name
                        ))]),
                    ));
                }
            }
        }
        let (host, program, id) = (self.host.clone(), self.program.clone(), export.id);
        let result =
            tokio::task::spawn_blocking(move || on_big_stack(|| program.call(&host, id, values)))
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
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message)]),
        };
        Ok(rmcp::model::CallToolResponse::Complete(result))
    }
}
