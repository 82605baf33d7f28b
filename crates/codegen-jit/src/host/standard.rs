//! What each standard extern does (their signatures are the `builtins` crate's table),
//! and the tools of an Atom-of-Thought plan: a `Tool` value resolved to what it runs.

use std::sync::Arc;

use ir::{self, Builtin, FuncId, SrcSpan, Type};
use runtime::Value;
use runtime::atom_plan::{self, ToolSig, Yields};
use runtime::value::ToolRef;

use super::{Engine, ExecError, Host, Scripted, display, out_of_range, outcome, truncated};
use crate::jsonpath;

/// What a `Tool` value names.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ToolTarget {
    Function(FuncId),
    Extern,
}

impl Host {
    /// The signature a tool is offered with (its `Context` parameter, if any, left out)
    /// and what it runs: a sap function of the module, or an extern.
    fn tool(&self, tool: &ToolRef) -> Result<(ToolSig, ToolTarget), String> {
        let m = &self.module;
        let name = &*tool.name;
        if let Some((id, f)) = tool
            .function
            .and_then(|id| Some((id, m.functions.get(id as usize)?)))
        {
            let params: Vec<ir::Param> = f
                .params
                .iter()
                .filter(|p| p.ty != Type::Context)
                .cloned()
                .collect();
            let sig = ToolSig {
                name: name.to_owned(),
                doc: f.doc.clone(),
                params: self.params(&params),
                ret: self.desc(&f.ret),
                compensate: None,
                trusted: trusted_names(&params),
                yields: if f.returns_untrusted {
                    Yields::Untrusted
                } else {
                    Yields::FromArguments
                },
            };
            return Ok((sig, ToolTarget::Function(id)));
        }
        if let Some(e) = m.externs.iter().find(|e| e.name == name) {
            let sig = ToolSig {
                name: name.to_owned(),
                doc: e.doc.clone(),
                params: self.params(&e.params),
                ret: self.desc(&e.ret),
                compensate: None,
                trusted: trusted_names(&e.params),
                yields: if e.untrusted || self.untrusted_result(name).is_some() {
                    Yields::Untrusted
                } else {
                    Yields::Trusted
                },
            };
            return Ok((sig, ToolTarget::Extern));
        }
        Err(format!(
            "`{name}` is not a function or extern of this program"
        ))
    }

    fn tools(&self, list: &[Value]) -> Result<Vec<(ToolSig, ToolTarget)>, String> {
        list.iter()
            .map(|v| match v {
                Value::Tool(tool) => self.tool(tool),
                other => Err(format!("{} is not a tool", display(other))),
            })
            .collect()
    }

    /// Runs an Atom-of-Thought plan, calling the tools through `engine`.
    fn run_plan(
        &self,
        plan: &serde_json::Value,
        tools: &[Value],
        retries: i64,
        undo: &[Value],
        engine: &dyn Engine,
        span: Option<SrcSpan>,
    ) -> Result<Value, ExecError> {
        let err = |m: String| ExecError::new(m, span);
        let mut tools = self.tools(tools).map_err(err)?;
        // Compensations: each `[tool, undo]` pair names the tool that reverses `tool`;
        // the undoing tool is callable by the executor but not offered to the plan.
        let mut undoers = Vec::new();
        for pair in undo {
            let Value::List(pair) = pair else {
                return Err(err("each compensation is a pair `[tool, undo]`".to_owned()));
            };
            let [Value::Tool(done), Value::Tool(reverse)] = pair.as_slice() else {
                return Err(err("each compensation is a pair `[tool, undo]`".to_owned()));
            };
            let Some(entry) = tools.iter_mut().find(|(s, _)| *s.name == *done.name) else {
                return Err(err(format!(
                    "`{}` has a compensation but is not offered",
                    done.name
                )));
            };
            entry.0.compensate = Some(reverse.name.to_string());
            undoers.push(self.tool(reverse).map_err(err)?);
        }
        let offered: Vec<ToolSig> = tools.iter().map(|(s, _)| s.clone()).collect();
        tools.extend(undoers);
        let sigs: Vec<ToolSig> = tools.iter().map(|(s, _)| s.clone()).collect();
        let plan = atom_plan::check(plan, &offered).map_err(|errors| {
            let lines: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
            err(format!("the plan is invalid:\n{}", lines.join("\n")))
        })?;
        let call = |sig: &ToolSig, args: Vec<Value>| -> atom_plan::ToolResult {
            let target = tools
                .iter()
                .find(|(s, _)| s.name == sig.name)
                .map(|(_, t)| *t)
                .ok_or_else(|| format!("`{}` is not offered", sig.name))?;
            match target {
                ToolTarget::Extern => self.call_extern(&sig.name, &args, span, engine),
                ToolTarget::Function(f) => engine.call_function(f, args),
            }
            .map_err(|e| {
                let prefix = format!("`{}` failed: ", sig.name);
                e.message
                    .strip_prefix(&prefix)
                    .unwrap_or(&e.message)
                    .to_owned()
            })
        };
        let options = atom_plan::ExecOptions {
            retries: u32::try_from(retries.max(0)).unwrap_or(u32::MAX),
            width: self.limits.concurrency,
        };
        let run = match self.observer() {
            Some(observer) => {
                let atoms: Vec<(i64, String)> = plan
                    .atoms
                    .iter()
                    .map(|a| {
                        let input = serde_json::Value::Object(a.input.clone());
                        (a.id, format!("{}. {}({input})", a.id, a.name))
                    })
                    .collect();
                observer.plan(&atoms);
                atom_plan::execute_observed(&plan, &sigs, &call, &options, &|id, status| {
                    observer.atom(id, status)
                })
            }
            None => atom_plan::execute(&plan, &sigs, &call, &options),
        }
        .map_err(|f| err(f.to_string()))?;
        Ok(Value::Json(Arc::new(run.answer)))
    }

    pub fn call_builtin(
        &self,
        b: Builtin,
        args: &[Value],
        span: Option<SrcSpan>,
        engine: &dyn Engine,
    ) -> Result<Value, ExecError> {
        let err = |m: String| ExecError::new(m, span);
        match (b, args) {
            (Builtin::Print, [v]) => {
                self.print_line(&display(v), span)?;
                Ok(Value::Unit)
            }
            (Builtin::Input, []) => Ok(Value::str(&self.input_line(span)?)),
            (Builtin::ToString, [v]) => Ok(Value::str(&display(v))),
            (Builtin::Contains, [Value::Str(text), Value::Str(part)]) => {
                Ok(Value::Bool(text.contains(&**part)))
            }
            (Builtin::Contains, [Value::List(items), x]) => {
                Ok(Value::Bool(items.iter().any(|item| item == x)))
            }
            (Builtin::StartsWith, [Value::Str(text), Value::Str(prefix)]) => {
                Ok(Value::Bool(text.starts_with(&**prefix)))
            }
            (Builtin::EndsWith, [Value::Str(text), Value::Str(suffix)]) => {
                Ok(Value::Bool(text.ends_with(&**suffix)))
            }
            (Builtin::Split, [Value::Str(text), Value::Str(separator)]) => {
                if separator.is_empty() {
                    return Err(err("`split` needs a separator that is not empty".to_owned()));
                }
                Ok(Value::List(Arc::new(
                    text.split(&**separator).map(Value::str).collect(),
                )))
            }
            (Builtin::Join, [Value::List(parts), Value::Str(separator)]) => {
                let parts: Vec<&str> = parts
                    .iter()
                    .map(|p| match p {
                        Value::Str(s) => &**s,
                        _ => "",
                    })
                    .collect();
                Ok(Value::str(&parts.join(separator)))
            }
            (Builtin::Trim, [Value::Str(text)]) => Ok(Value::str(text.trim())),
            (Builtin::ToLower, [Value::Str(text)]) => Ok(Value::str(&text.to_lowercase())),
            (Builtin::ToUpper, [Value::Str(text)]) => Ok(Value::str(&text.to_uppercase())),
            (Builtin::Replace, [Value::Str(text), Value::Str(from), Value::Str(to)]) => {
                if from.is_empty() {
                    return Err(err(
                        "`replace` needs a text to find that is not empty".to_owned()
                    ));
                }
                Ok(Value::str(&text.replace(&**from, to)))
            }
            (Builtin::ParseInt, [Value::Str(text)]) => Ok(Value::Option(
                text.trim()
                    .parse::<i64>()
                    .ok()
                    .map(|n| Box::new(Value::Int(n))),
            )),
            (Builtin::ParseFloat, [Value::Str(text)]) => Ok(Value::Option(
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .map(|x| Box::new(Value::Float(x))),
            )),
            (Builtin::None, []) => Ok(Value::Option(None)),
            (Builtin::Some, [v]) => Ok(Value::Option(Some(Box::new(v.clone())))),
            (Builtin::IsSome, [Value::Option(o)]) => Ok(Value::Bool(o.is_some())),
            (Builtin::IsNone, [Value::Option(o)]) => Ok(Value::Bool(o.is_none())),
            (Builtin::UnwrapOr, [Value::Option(o), default]) => {
                Ok(o.as_deref().unwrap_or(default).clone())
            }
            (Builtin::Unwrap, [Value::Option(o)]) => o
                .as_deref()
                .cloned()
                .ok_or_else(|| err("`unwrap` of `None`".to_owned())),
            (Builtin::Len, [Value::List(items)]) => Ok(Value::Int(items.len() as i64)),
            (Builtin::Len, [Value::Str(s)]) => Ok(Value::Int(s.chars().count() as i64)),
            (Builtin::Push, [Value::List(items), x]) => {
                let mut items = items.clone();
                Arc::make_mut(&mut items).push(x.clone());
                Ok(Value::List(items))
            }
            (Builtin::Set, [Value::List(items), Value::Int(index), x]) => {
                let at = usize::try_from(*index)
                    .ok()
                    .filter(|&i| i < items.len())
                    .ok_or_else(|| err(out_of_range(*index, items.len())))?;
                let mut items = items.clone();
                Arc::make_mut(&mut items)[at] = x.clone();
                Ok(Value::List(items))
            }
            (Builtin::ReadFile, [Value::Str(path)]) => std::fs::read_to_string(&**path)
                .map(|t| Value::str(&t))
                .map_err(|e| err(format!("cannot read `{path}`: {e}"))),
            (Builtin::WriteFile, [Value::Str(path), Value::Str(content)]) => {
                std::fs::write(&**path, content.as_bytes())
                    .map(|_| Value::Unit)
                    .map_err(|e| err(format!("cannot write `{path}`: {e}")))
            }
            (Builtin::JsonParse, [Value::Str(text)]) => {
                serde_json::from_str::<serde_json::Value>(text)
                    .map(|j| Value::Json(Arc::new(j)))
                    .map_err(|e| err(format!("`json_parse`: not JSON ({e})")))
            }
            (Builtin::JsonGet, [Value::Json(j), Value::Str(path)]) => jsonpath::get(j, path)
                .map(|v| Value::Json(Arc::new(v)))
                .map_err(err),
            (Builtin::Toposort, [Value::List(deps)]) => {
                // Flattened straight from the values: no list per node.
                let mut offsets = Vec::with_capacity(deps.len() + 1);
                let mut targets = Vec::with_capacity(deps.len() * 2);
                offsets.push(0);
                for d in deps.iter() {
                    if let Value::List(items) = d {
                        targets.extend(
                            items
                                .iter()
                                .map(|v| if let Value::Int(n) = v { *n } else { -1 }),
                        );
                    }
                    offsets.push(targets.len());
                }
                let layers = crate::toposort::layers_flat(&offsets, &targets, |layer| {
                    Value::List(Arc::new(
                        layer.iter().map(|&i| Value::Int(i as i64)).collect(),
                    ))
                })
                .map_err(err)?;
                Ok(Value::List(Arc::new(layers)))
            }
            (Builtin::ToJson, [v]) => Ok(Value::Json(Arc::new(v.to_json()))),
            (Builtin::ToolSignatures, [Value::List(list)]) => {
                let tools = self.tools(list).map_err(err)?;
                let shown: Vec<serde_json::Value> = tools
                    .iter()
                    .map(|(t, _)| {
                        let params: serde_json::Map<String, serde_json::Value> = t
                            .params
                            .iter()
                            .map(|p| (p.name.clone(), llm::schema::schema_of(&p.ty)))
                            .collect();
                        let mut o = serde_json::Map::new();
                        o.insert("name".into(), t.name.clone().into());
                        if let Some(doc) = &t.doc {
                            o.insert("description".into(), doc.clone().into());
                        }
                        o.insert("parameters".into(), params.into());
                        o.insert("returns".into(), t.ret.to_string().into());
                        serde_json::Value::Object(o)
                    })
                    .collect();
                Ok(Value::str(&serde_json::Value::Array(shown).to_string()))
            }
            (Builtin::AotSchema, [Value::List(list)]) => {
                let tools = self.tools(list).map_err(err)?;
                let sigs: Vec<ToolSig> = tools.into_iter().map(|(s, _)| s).collect();
                Ok(Value::Json(Arc::new(atom_plan::plan_schema(&sigs))))
            }
            (Builtin::AotCheck, [Value::Json(plan), Value::List(list)]) => {
                let tools = self.tools(list).map_err(err)?;
                let sigs: Vec<ToolSig> = tools.into_iter().map(|(s, _)| s).collect();
                let errors = match atom_plan::check(plan, &sigs) {
                    Ok(_) => Vec::new(),
                    Err(errors) => errors.iter().map(|e| Value::str(&e.to_string())).collect(),
                };
                Ok(Value::List(Arc::new(errors)))
            }
            (
                Builtin::AotExecute,
                [
                    Value::Json(plan),
                    Value::List(list),
                    Value::Int(retries),
                    Value::List(undo),
                ],
            ) => self.run_plan(plan, list, *retries, undo, engine, span),
            (Builtin::AotDot | Builtin::AotMermaid, [Value::Json(plan)]) => {
                let plan = atom_plan::parse(plan).map_err(|errors| {
                    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    err(format!("not a plan: {}", lines.join("; ")))
                })?;
                Ok(Value::str(&if b == Builtin::AotDot {
                    atom_plan::to_dot(&plan)
                } else {
                    atom_plan::to_mermaid(&plan)
                }))
            }
            (Builtin::JsonHas, [Value::Json(j), Value::Str(path)]) => {
                // A missing key reads as `null`: neither is "there".
                Ok(Value::Bool(
                    jsonpath::get(j, path).is_ok_and(|v| !v.is_null()),
                ))
            }
            (Builtin::JsonLen, [Value::Json(j)]) => Ok(Value::Int(match &**j {
                serde_json::Value::Array(items) => items.len() as i64,
                serde_json::Value::Object(map) => map.len() as i64,
                serde_json::Value::String(s) => s.chars().count() as i64,
                serde_json::Value::Null => 0,
                _ => 1,
            })),
            (Builtin::JsonKind, [Value::Json(j)]) => Ok(Value::str(match &**j {
                serde_json::Value::Object(_) => "object",
                serde_json::Value::Array(_) => "array",
                serde_json::Value::String(_) => "string",
                serde_json::Value::Number(_) => "number",
                serde_json::Value::Bool(_) => "boolean",
                serde_json::Value::Null => "null",
            })),
            (Builtin::JsonKeys, [Value::Json(j)]) => Ok(Value::List(Arc::new(match &**j {
                serde_json::Value::Object(map) => map.keys().map(|k| Value::str(k)).collect(),
                _ => Vec::new(),
            }))),
            (Builtin::JsonItems, [Value::Json(j)]) => Ok(Value::List(Arc::new(match &**j {
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(|v| Value::Json(Arc::new(v.clone())))
                    .collect(),
                serde_json::Value::Object(map) => map
                    .values()
                    .map(|v| Value::Json(Arc::new(v.clone())))
                    .collect(),
                _ => Vec::new(),
            }))),
            (Builtin::Lines, [Value::Str(text)]) => Ok(Value::List(Arc::new(
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(Value::str)
                    .collect(),
            ))),
            (Builtin::Truncate, [Value::Str(text), Value::Int(max)]) => {
                let max = usize::try_from(*max).unwrap_or(0);
                Ok(match text.char_indices().nth(max) {
                    Some((cut, _)) => Value::str(&format!("{}…", &text[..cut])),
                    None => Value::Str(text.clone()),
                })
            }
            (Builtin::Trace, [Value::Str(event), Value::Json(data)]) => {
                if let Some(rt) = &self.runtime {
                    rt.trace_note(event, (**data).clone());
                }
                Ok(Value::Unit)
            }
            (Builtin::Trust, [value, Value::Str(reason)]) => {
                // A declassification is part of the record of the run.
                let (file, line, column) = span.map(|s| self.location(s)).unwrap_or_default();
                self.tools.record(&serde_json::json!({
                    "event": "trust",
                    "reason": reason.as_ref(),
                    "file": file,
                    "line": line,
                    "column": column,
                }));
                Ok(value.clone())
            }
            (Builtin::ModelLoop, [Value::Int(n)]) => {
                let limit = self.limits.max_model_iterations;
                if u64::try_from(*n).unwrap_or(0) > limit {
                    Err(err(format!(
                        "the model decided to go on with this loop {limit} times, the limit for a `while` the model decides (bound the loop in the program, or raise the limit with `--max-model-iterations` or `max_model_iterations` in sap.toml)"
                    )))
                } else {
                    Ok(Value::Unit)
                }
            }
            (Builtin::Stubbed, [Value::Int(site), Value::Int(f), args @ ..]) => {
                let f = *f as FuncId;
                let stub = self.lock_script().stub_of(f);
                let answer = match stub {
                    Some(stub) => Some(engine.call_function(stub, args.to_vec())?),
                    None => self.lock_script().next_value(f),
                };
                if let Some(v) = &answer {
                    self.record(*site as u32, outcome(v));
                }
                Ok(Value::Option(answer.map(Box::new)))
            }
            (Builtin::Given, [Value::Int(f), Value::Tool(tool)]) => {
                if let Some(stub) = tool.function {
                    self.lock_script().stub(*f as FuncId, stub);
                }
                Ok(Value::Unit)
            }
            (
                Builtin::Script,
                [
                    Value::Int(f),
                    Value::Str(kind),
                    Value::Str(callee),
                    Value::List(names),
                    values @ ..,
                ],
            ) => {
                let answer = if &**kind == "value" {
                    Scripted::Value(values.first().cloned().unwrap_or(Value::Unit))
                } else {
                    let names = names.iter().map(|n| match n {
                        Value::Str(s) => s.to_string(),
                        _ => String::new(),
                    });
                    Scripted::Call {
                        select: &**kind == "select",
                        callee: callee.to_string(),
                        args: names.zip(values.iter().cloned()).collect(),
                    }
                };
                self.lock_script().push(*f as FuncId, answer);
                Ok(Value::Unit)
            }
            (Builtin::AssertFailed, [Value::Str(message), Value::Str(left), Value::Str(right)]) => {
                let mut text = "assertion failed".to_owned();
                if !message.is_empty() {
                    text.push_str(": ");
                    text.push_str(message);
                }
                if !left.is_empty() || !right.is_empty() {
                    text.push_str(&format!("\n  left:  {left}\n  right: {right}"));
                }
                Err(err(text))
            }
            (Builtin::ClockMs, []) => Ok(Value::Int(self.started.elapsed().as_millis() as i64)),
            (Builtin::JsonInt, [Value::Json(j)]) => match j.as_i64() {
                Some(n) => Ok(Value::Int(n)),
                None => Err(err(format!(
                    "`json_int`: {} is not an integer",
                    truncated(j)
                ))),
            },
            (Builtin::JsonStr, [Value::Json(j)]) => match j.as_str() {
                Some(s) => Ok(Value::str(s)),
                None => Err(err(format!("`json_str`: {} is not a string", truncated(j)))),
            },
            (b, args) => Err(err(format!(
                "internal: {b:?} called with {} arguments of the wrong kinds",
                args.len()
            ))),
        }
    }
}

/// The names of a tool's `trusted` parameters.
fn trusted_names(params: &[ir::Param]) -> Vec<String> {
    params
        .iter()
        .filter(|p| p.trusted)
        .map(|p| p.name.clone())
        .collect()
}
