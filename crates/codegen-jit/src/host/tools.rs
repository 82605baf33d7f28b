//! Calling an extern: a tool outside the program (an MCP server's, a standard tool's),
//! waited for as a task waits, or a function the host provides; each call journaled
//! and traced.

use ir::{Binding, SrcSpan};
use llm::types::{ParamDesc, TypeDesc};
use runtime::Value;
use runtime::observe::{Place, ToolCall, ToolKind};
use runtime::telemetry::{self, Attribute};

use super::{Engine, ExecError, Host, standard_extern};

/// A bound extern: where its tool is, and the types its call converts.
pub(super) struct BoundExtern {
    pub(super) binding: Binding,
    pub(super) params: Vec<ParamDesc>,
    pub(super) ret: TypeDesc,
}

impl Host {
    pub fn call_extern(
        &self,
        name: &str,
        args: &[Value],
        span: Option<SrcSpan>,
        engine: &dyn Engine,
    ) -> Result<Value, ExecError> {
        if let Some(bound) = self.bound.get(name) {
            let traced = self.tool_span(name, Some(&bound.binding), span);
            let observed = self.tool_started(name, Some(&bound.binding), args, span);
            let result = self.journaled(name, args, span, || {
                self.call_bound(name, bound, args, span)
            });
            self.tool_finished(observed, &result);
            if let Err(e) = &result {
                traced.fail("tool_error", &e.message);
            }
            return result;
        }
        if self.externs.get(name).is_none()
            && let Some(b) = standard_extern(name)
        {
            return self.call_builtin(b, args, span, engine);
        }
        let f = self.externs.get(name).ok_or_else(|| {
            ExecError::new(
                format!("the extern `{name}` is not provided by this host"),
                span,
            )
        })?;
        let traced = self.tool_span(name, None, span);
        let observed = self.tool_started(name, None, args, span);
        let declared = self.declared.get(name).map(|(ty, _)| ty);
        let result = self.journaled(name, args, span, || {
            let value =
                f(args).map_err(|e| ExecError::new(format!("`{name}` failed: {e}"), span))?;
            // The host's function works on i64: a result the declared i32 cannot hold is
            // the call's overflow, reported here rather than as a wrong value.
            match (&value, declared) {
                (Value::Int(v), Some(TypeDesc::I32)) if i32::try_from(*v).is_err() => {
                    Err(ExecError::new(
                        format!("`{name}` failed: integer overflow: {v} does not fit in i32"),
                        span,
                    ))
                }
                _ => Ok(value),
            }
        });
        self.tool_finished(observed, &result);
        if let Err(e) = &result {
            traced.fail("tool_error", &e.message);
        }
        result
    }

    /// Tells the observer, if there is one, of an extern call that starts: its id.
    fn tool_started(
        &self,
        name: &str,
        binding: Option<&Binding>,
        args: &[Value],
        span: Option<SrcSpan>,
    ) -> Option<u64> {
        let observer = self.observer()?;
        let params = self.module.externs.iter().find(|e| e.name == name);
        let mut arguments = serde_json::Map::new();
        for (i, a) in args.iter().enumerate() {
            let key = params
                .and_then(|e| e.params.get(i))
                .map_or_else(|| format!("arg{i}"), |p| p.name.clone());
            arguments.insert(key, a.to_json());
        }
        let (kind, paths) = match binding {
            Some(Binding::Std { module, tool }) => {
                let path = || match args.first() {
                    Some(Value::Str(p)) => vec![p.to_string()],
                    _ => Vec::new(),
                };
                match (module.as_str(), tool.as_str()) {
                    ("fs", "write") => (ToolKind::Edit, path()),
                    ("fs", _) => (ToolKind::Read, path()),
                    ("http", _) => (ToolKind::Fetch, Vec::new()),
                    ("process", _) => (ToolKind::Execute, Vec::new()),
                    _ => (ToolKind::Other, Vec::new()),
                }
            }
            _ => (ToolKind::Other, Vec::new()),
        };
        let id = runtime::observe::next_id();
        observer.tool_started(&ToolCall {
            id,
            name: name.to_owned(),
            source: binding.map_or_else(|| "host".to_owned(), Binding::origin),
            kind,
            arguments: serde_json::Value::Object(arguments),
            paths,
            place: span.map(|s| {
                let (file, line, _) = self.location(s);
                Place {
                    file,
                    line,
                    function: String::new(),
                }
            }),
        });
        Some(id)
    }

    fn tool_finished(&self, id: Option<u64>, result: &Result<Value, ExecError>) {
        if let (Some(id), Some(observer)) = (id, self.observer()) {
            match result {
                Ok(v) => observer.tool_finished(id, Ok(&v.to_json())),
                Err(e) => observer.tool_finished(id, Err(&e.message)),
            }
        }
    }

    /// An extern call's OpenTelemetry span, when spans are exported.
    fn tool_span(
        &self,
        name: &str,
        binding: Option<&Binding>,
        span: Option<SrcSpan>,
    ) -> telemetry::CallSpan {
        if !telemetry::active() {
            return telemetry::CallSpan::none();
        }
        let mut attributes = vec![Attribute::new(
            "gen_ai.tool.type",
            if binding.is_some() {
                "extension"
            } else {
                "function"
            },
        )];
        if let Some(b) = binding {
            attributes.push(Attribute::new("sap.tool.source", b.origin()));
        }
        if let Some(s) = span {
            let (file, line, column) = self.location(s);
            attributes.push(Attribute::new("code.file.path", file));
            attributes.push(Attribute::new("code.line.number", i64::from(line)));
            attributes.push(Attribute::new("code.column.number", i64::from(column)));
        }
        telemetry::tool_span(runtime::context::innermost_span(), name, attributes)
    }

    /// Calls a tool outside the host: an MCP server's, or a standard tool.
    fn call_bound(
        &self,
        name: &str,
        bound: &BoundExtern,
        args: &[Value],
        span: Option<SrcSpan>,
    ) -> Result<Value, ExecError> {
        let result = match &bound.binding {
            Binding::Mcp { server, tool } => self.wait(
                self.tools
                    .call_mcp(server, tool, &bound.params, &bound.ret, args),
                span,
            )?,
            Binding::Std { module, tool } => {
                self.wait(self.tools.call_std(module, tool, &bound.ret, args), span)?
            }
            // Served by the host (`Host::new` leaves these out of `bound`).
            Binding::Python { function } => Err(format!(
                "`{function}` is served by the Python application, not by a tool"
            )),
        };
        result.map_err(|e| ExecError::new(format!("`{name}` failed: {e}"), span))
    }
}
