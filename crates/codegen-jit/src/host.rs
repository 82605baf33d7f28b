//! What a running sap program is given by its host: the module, the LLM runtime, the
//! extern functions, the limits (recursion depth, loop iterations), and where `print`
//! writes. Shared by every execution engine; all the operations that are not arithmetic
//! or control flow live here, once.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use builtins::SigType;
use lower::ir::{self, Builtin, FuncId, LlmSite, Module, SiteKind, SrcSpan, Type, TypeDef};
use runtime::atom_plan::{self, ToolSig};
use runtime::schema::ArmDesc;
use runtime::types::{EnumDesc, FieldDesc, ParamDesc, StructDesc, TypeDesc, VariantDesc};
use runtime::value::ToolRef;
use runtime::{CallSite, Context, Runtime, RuntimeError, Value};
use syntax::LineIndex;

use crate::jsonpath;

/// An extern function: arguments in, a value or an error message out.
pub type ExternFn = Arc<dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync>;

/// Decides whether a declared signature fits a registered extern.
pub type SignatureCheck = Arc<dyn Fn(&[Type], &Type) -> bool + Send + Sync>;

/// `i64::checked_add` and its kin.
type CheckedOp = fn(i64, i64) -> Option<i64>;

/// How a builtin calls back into the engine running the program: the `aot` executor
/// runs sap functions offered as tools. Context parameters get a new, empty context.
pub trait Engine: Sync {
    fn call_function(&self, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError>;
}

/// What a `Tool` value names.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ToolTarget {
    Function(FuncId),
    Extern,
}

/// Extern functions the host provides, by name.
#[derive(Clone, Default)]
pub struct Externs {
    functions: HashMap<String, (String, SignatureCheck, ExternFn)>,
}

impl Externs {
    /// Registers `f` for programs that declare exactly `params -> ret`.
    pub fn register(&mut self, name: &str, params: Vec<Type>, ret: Type, f: ExternFn) {
        let shown = format!(
            "({}) -> {}",
            params.iter().map(show_type).collect::<Vec<_>>().join(", "),
            show_type(&ret)
        );
        let check: SignatureCheck =
            Arc::new(move |p: &[Type], r: &Type| p == params.as_slice() && *r == ret);
        self.functions.insert(name.to_owned(), (shown, check, f));
    }

    /// Registers `f` with a custom signature check (`shown` describes it in errors).
    pub fn register_with(&mut self, name: &str, shown: &str, check: SignatureCheck, f: ExternFn) {
        self.functions
            .insert(name.to_owned(), (shown.to_owned(), check, f));
    }

    pub fn get(&self, name: &str) -> Option<&ExternFn> {
        self.functions.get(name).map(|(_, _, f)| f)
    }

    /// The arithmetic tools of the seed's calculators: `add`, `subtract`, `multiply`,
    /// `divide`, on `i32` or `i64` as the program declares them.
    pub fn with_calculator(mut self) -> Externs {
        let int_binary: SignatureCheck = Arc::new(
            |p: &[Type], r: &Type| matches!(p, [a, b] if a == b && a == r && matches!(r, Type::I32 | Type::I64)),
        );
        let ops: [(&str, CheckedOp); 4] = [
            ("add", i64::checked_add),
            ("subtract", i64::checked_sub),
            ("multiply", i64::checked_mul),
            ("divide", i64::checked_div),
        ];
        for (name, op) in ops {
            let f: ExternFn = Arc::new(move |args: &[Value]| match args {
                [Value::Int(a), Value::Int(b)] => op(*a, *b).map(Value::Int).ok_or_else(|| {
                    if *b == 0 && name == "divide" {
                        "division by zero".to_owned()
                    } else {
                        "integer overflow".to_owned()
                    }
                }),
                _ => Err(format!("`{name}` takes two integers")),
            });
            self.register_with(
                name,
                "(i32, i32) -> i32 or (i64, i64) -> i64",
                int_binary.clone(),
                f,
            );
        }
        self
    }

    /// Checks the module's extern declarations against what is registered.
    pub fn check(&self, module: &Module) -> Result<(), String> {
        for e in &module.externs {
            let params: Vec<Type> = e.params.iter().map(|p| p.ty.clone()).collect();
            if !self.functions.contains_key(&e.name)
                && let Some(b) = standard_extern(&e.name)
            {
                // A declaration of a standard extern: it must say what the standard says.
                if !standard_signature_fits(b, &params, &e.ret) {
                    return Err(format!(
                        "`extern fn {}` is declared as ({}) -> {}, which is not the signature of the standard `{}`",
                        e.name,
                        params.iter().map(show_type).collect::<Vec<_>>().join(", "),
                        show_type(&e.ret),
                        e.name
                    ));
                }
                continue;
            }
            match self.functions.get(&e.name) {
                None => {
                    return Err(format!(
                        "the program declares `extern fn {}`, but this host provides no extern of that name",
                        e.name
                    ));
                }
                Some((shown, check, _)) if !check(&params, &e.ret) => {
                    let declared = format!(
                        "({}) -> {}",
                        params.iter().map(show_type).collect::<Vec<_>>().join(", "),
                        show_type(&e.ret)
                    );
                    return Err(format!(
                        "`extern fn {}` is declared as {declared}, but the host's `{}` is {shown}",
                        e.name, e.name
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// The error of an index outside a list, for every engine and path.
pub(crate) fn out_of_range(index: i64, len: usize) -> String {
    format!("index {index} is out of range for a list of {len} elements")
}

/// The standard extern a declared extern of that name stands for.
pub fn standard_extern(name: &str) -> Option<Builtin> {
    builtins::lookup(name)
}

/// Whether a declaration matches one of a standard extern's forms in the table; its
/// type parameter stands for one type throughout a form.
fn standard_signature_fits(b: Builtin, params: &[Type], ret: &Type) -> bool {
    b.entry().forms().any(|form| {
        let mut t = None;
        form.params.len() == params.len()
            && form
                .params
                .iter()
                .zip(params)
                .all(|((_, want), have)| type_fits(*want, have, &mut t))
            && type_fits(form.ret, ret, &mut t)
    })
}

/// Whether `have` is `want`, binding the type parameter to the first type it meets.
fn type_fits(want: SigType, have: &Type, t: &mut Option<Type>) -> bool {
    match (want, have) {
        (SigType::T, _) => match t {
            Some(bound) => bound == have,
            None => {
                *t = Some(have.clone());
                true
            }
        },
        (SigType::List(w), Type::List(h)) | (SigType::Option(w), Type::Option(h)) => {
            type_fits(*w, h, t)
        }
        (SigType::Unit, Type::Unit)
        | (SigType::Bool, Type::Bool)
        | (SigType::I64, Type::I64)
        | (SigType::F64, Type::F64)
        | (SigType::String, Type::Str)
        | (SigType::Json, Type::Json)
        | (SigType::Tool, Type::Tool) => true,
        _ => false,
    }
}

pub fn show_type(t: &Type) -> String {
    match t {
        Type::Unit => "()".to_owned(),
        Type::Bool => "Boolean".to_owned(),
        Type::I32 => "i32".to_owned(),
        Type::I64 => "i64".to_owned(),
        Type::F64 => "f64".to_owned(),
        Type::Str => "String".to_owned(),
        Type::Json => "Json".to_owned(),
        Type::Tool => "Tool".to_owned(),
        Type::Context => "Context".to_owned(),
        Type::List(e) => format!("List<{}>", show_type(e)),
        Type::Option(e) => format!("Option<{}>", show_type(e)),
        Type::Struct(id) | Type::Enum(id) => format!("t{id}"),
    }
}

#[derive(Clone, Debug)]
pub struct Limits {
    /// Nested calls at once; deeper recursion is an error, not a stack overflow.
    pub max_depth: u32,
    /// Loop iterations over the whole run (`while` and `for`).
    pub max_loop_iterations: u64,
    /// `parallel for` iterations in flight at once.
    pub concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 10_000,
            max_loop_iterations: 1_000_000_000,
            concurrency: 16,
        }
    }
}

/// One frame of the sap call stack, for errors.
#[derive(Clone, Debug, PartialEq)]
pub struct StackFrame {
    pub function: String,
    /// Where the call to the next frame is (or the error, for the innermost).
    pub span: Option<SrcSpan>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExecError {
    pub message: String,
    /// Where it happened.
    pub span: Option<SrcSpan>,
    /// Innermost first.
    pub stack: Vec<StackFrame>,
    /// The model's last answer, for LLM failures.
    pub raw_answer: Option<String>,
}

impl ExecError {
    pub fn new(message: impl Into<String>, span: Option<SrcSpan>) -> ExecError {
        ExecError {
            message: message.into(),
            span,
            stack: Vec::new(),
            raw_answer: None,
        }
    }

    fn from_runtime(e: RuntimeError, span: SrcSpan) -> ExecError {
        ExecError {
            message: e.message,
            span: Some(span),
            stack: Vec::new(),
            raw_answer: e.raw_answer,
        }
    }
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub struct Host {
    pub module: Arc<Module>,
    pub runtime: Option<Arc<Runtime>>,
    pub tokio: tokio::runtime::Handle,
    pub externs: Externs,
    pub limits: Limits,
    /// Runtime descriptions of the module's types, by `TypeId`.
    pub types: Vec<TypeDesc>,
    output: Mutex<Box<dyn Write + Send>>,
    input: Mutex<Box<dyn BufRead + Send>>,
    /// When the host was made: `clock_ms` counts from here.
    started: std::time::Instant,
    /// Source texts by file, for line and column in LLM call sites.
    lines: Vec<Option<(String, LineIndex)>>,
}

impl Host {
    pub fn new(
        module: Arc<Module>,
        runtime: Option<Arc<Runtime>>,
        tokio: tokio::runtime::Handle,
        externs: Externs,
        limits: Limits,
    ) -> Host {
        let types = type_descs(&module);
        Host {
            module,
            runtime,
            tokio,
            externs,
            limits,
            types,
            output: Mutex::new(Box::new(std::io::stdout())),
            input: Mutex::new(Box::new(std::io::BufReader::new(std::io::stdin()))),
            started: std::time::Instant::now(),
            lines: Vec::new(),
        }
    }

    pub fn with_output(mut self, out: Box<dyn Write + Send>) -> Host {
        self.output = Mutex::new(out);
        self
    }

    pub fn with_input(mut self, input: Box<dyn BufRead + Send>) -> Host {
        self.input = Mutex::new(input);
        self
    }

    /// The source texts, by the module's file index, for line and column numbers.
    pub fn with_sources(mut self, sources: Vec<Option<String>>) -> Host {
        self.lines = sources
            .into_iter()
            .map(|s| {
                s.map(|t| {
                    let idx = LineIndex::new(&t);
                    (t, idx)
                })
            })
            .collect();
        self
    }

    pub fn desc(&self, t: &Type) -> TypeDesc {
        desc_of(&self.types, t)
    }

    fn call_site(&self, site: &LlmSite) -> CallSite {
        let span = site.span;
        let file = self
            .module
            .files
            .get(span.file as usize)
            .cloned()
            .unwrap_or_default();
        let (line, column) = match self.lines.get(span.file as usize).and_then(Option::as_ref) {
            Some((text, idx)) => {
                let lc = idx.line_col(text, span.start);
                (lc.line + 1, lc.col + 1)
            }
            None => (0, 0),
        };
        CallSite {
            function: site.function.clone(),
            file,
            line,
            column,
            span: (span.start, span.end),
        }
    }

    fn runtime(&self, span: SrcSpan) -> Result<&Runtime, ExecError> {
        self.runtime.as_deref().ok_or_else(|| {
            ExecError::new(
                "this program calls the model, but no LLM provider is configured",
                Some(span),
            )
        })
    }

    fn params(&self, params: &[ir::Param]) -> Vec<ParamDesc> {
        params
            .iter()
            .map(|p| ParamDesc {
                name: p.name.clone(),
                doc: p.doc.clone(),
                ty: self.desc(&p.ty),
            })
            .collect()
    }

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
            };
            return Ok((sig, ToolTarget::Function(id)));
        }
        if let Some(e) = m.externs.iter().find(|e| e.name == name) {
            let sig = ToolSig {
                name: name.to_owned(),
                doc: None,
                params: self.params(&e.params),
                ret: self.desc(&e.ret),
                compensate: None,
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
        let run =
            atom_plan::execute(&plan, &sigs, &call, &options).map_err(|f| err(f.to_string()))?;
        Ok(Value::Json(Arc::new(run.answer)))
    }

    /// Blocks on an LLM call. Engines run on plain threads, never on a tokio worker.
    fn block<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, RuntimeError>>,
        span: SrcSpan,
    ) -> Result<T, ExecError> {
        self.tokio
            .block_on(f)
            .map_err(|e| ExecError::from_runtime(e, span))
    }

    /// The result of an LLM function; `schema`, for a `Json` result, is the JSON Schema
    /// the program passed for it.
    pub fn produce(
        &self,
        site: u32,
        ctx: &Context,
        schema: Option<&Value>,
    ) -> Result<Value, ExecError> {
        let s = &self.module.sites[site as usize];
        let rt = self.runtime(s.span)?;
        let SiteKind::Produce { ret } = &s.kind else {
            return Err(ExecError::new("internal: not a produce site", Some(s.span)));
        };
        if let Some(Value::Json(schema)) = schema {
            let site = self.call_site(s);
            return self.block(rt.produce_matching(&site, ctx, &s.subject, schema), s.span);
        }
        let ty = self.desc(ret);
        self.block(rt.produce(&self.call_site(s), ctx, &s.subject, &ty), s.span)
    }

    pub fn decide(&self, site: u32, ctx: &Context) -> Result<bool, ExecError> {
        let s = &self.module.sites[site as usize];
        let rt = self.runtime(s.span)?;
        self.block(
            rt.decide(&self.call_site(s), ctx, &s.subject, s.doc.as_deref()),
            s.span,
        )
    }

    pub fn fill(&self, site: u32, ctx: &Context) -> Result<Vec<Value>, ExecError> {
        let s = &self.module.sites[site as usize];
        let rt = self.runtime(s.span)?;
        let SiteKind::Fill {
            callee,
            callee_doc,
            params,
        } = &s.kind
        else {
            return Err(ExecError::new("internal: not a fill site", Some(s.span)));
        };
        let params = self.params(params);
        self.block(
            rt.fill_args(
                &self.call_site(s),
                ctx,
                callee,
                callee_doc.as_deref(),
                &params,
            ),
            s.span,
        )
    }

    pub fn choose(&self, site: u32, ctx: &Context) -> Result<(usize, Vec<Value>), ExecError> {
        let s = &self.module.sites[site as usize];
        let rt = self.runtime(s.span)?;
        let SiteKind::Choose { arms } = &s.kind else {
            return Err(ExecError::new("internal: not a choose site", Some(s.span)));
        };
        let arms: Vec<ArmDesc> = arms
            .iter()
            .map(|a| ArmDesc {
                tool: a.tool.clone(),
                doc: a.doc.clone(),
                binding: a.binding.clone(),
                params: self.params(&a.params),
            })
            .collect();
        self.block(rt.choose(&self.call_site(s), ctx, &arms), s.span)
    }

    pub fn call_extern(
        &self,
        name: &str,
        args: &[Value],
        span: Option<SrcSpan>,
        engine: &dyn Engine,
    ) -> Result<Value, ExecError> {
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
        f(args).map_err(|e| ExecError::new(format!("`{name}` failed: {e}"), span))
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
                let mut out = self.output.lock().unwrap_or_else(|e| e.into_inner());
                writeln!(out, "{}", display(v))
                    .and_then(|_| out.flush())
                    .map_err(|e| err(format!("cannot print: {e}")))?;
                Ok(Value::Unit)
            }
            (Builtin::Input, []) => {
                let mut line = String::new();
                self.input
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .read_line(&mut line)
                    .map_err(|e| err(format!("cannot read input: {e}")))?;
                Ok(Value::str(line.trim_end_matches(['\n', '\r'])))
            }
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
                            .map(|p| (p.name.clone(), runtime::schema::schema_of(&p.ty)))
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

/// A JSON value for an error message, shortened.
fn truncated(j: &serde_json::Value) -> String {
    let text = j.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// How `print` and `to_string` show a value: strings as they are, the rest as JSON.
pub fn display(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        // A `Json` string is a string too.
        Value::Json(j) if j.is_string() => j.as_str().unwrap_or_default().to_owned(),
        Value::Unit => "()".to_owned(),
        Value::Float(x) => {
            if x.fract() == 0.0 && x.is_finite() && x.abs() < 1e15 {
                format!("{x:.1}")
            } else {
                format!("{x}")
            }
        }
        other => other.to_json_string(),
    }
}

fn type_descs(module: &Module) -> Vec<TypeDesc> {
    // Two passes: first the names (so recursive types can refer to each other), then
    // the fields.
    let mut out: Vec<TypeDesc> = module
        .types
        .iter()
        .map(|t| match t {
            TypeDef::Struct { name, doc, .. } => TypeDesc::Struct(Arc::new(StructDesc {
                name: name.clone(),
                doc: doc.clone(),
                fields: Vec::new(),
            })),
            TypeDef::Enum {
                name,
                doc,
                variants,
            } => TypeDesc::Enum(Arc::new(EnumDesc {
                name: name.clone(),
                doc: doc.clone(),
                variants: variants
                    .iter()
                    .map(|(n, d)| VariantDesc {
                        name: n.clone(),
                        doc: d.clone(),
                    })
                    .collect(),
            })),
        })
        .collect();
    // Then each struct's fields, the structs it contains first, so a field's description
    // is complete when it is copied in (a type that contains itself keeps the name-only
    // description where it recurs).
    let mut state = vec![0u8; module.types.len()];
    for i in 0..module.types.len() {
        complete_struct(module, i, &mut out, &mut state);
    }
    out
}

fn complete_struct(module: &Module, i: usize, out: &mut [TypeDesc], state: &mut [u8]) {
    let TypeDef::Struct { name, doc, fields } = &module.types[i] else {
        return;
    };
    if state[i] != 0 {
        return;
    }
    state[i] = 1;
    fn structs_in(t: &Type, found: &mut Vec<usize>) {
        match t {
            Type::Struct(id) => found.push(*id as usize),
            Type::List(inner) | Type::Option(inner) => structs_in(inner, found),
            _ => {}
        }
    }
    let mut inner = Vec::new();
    fields.iter().for_each(|f| structs_in(&f.ty, &mut inner));
    for j in inner {
        if j < out.len() {
            complete_struct(module, j, out, state);
        }
    }
    let fields = fields
        .iter()
        .map(|f| FieldDesc {
            name: f.name.clone(),
            doc: f.doc.clone(),
            ty: desc_of(out, &f.ty),
        })
        .collect();
    out[i] = TypeDesc::Struct(Arc::new(StructDesc {
        name: name.clone(),
        doc: doc.clone(),
        fields,
    }));
    state[i] = 2;
}

fn desc_of(types: &[TypeDesc], t: &Type) -> TypeDesc {
    match t {
        Type::Unit | Type::Tool | Type::Context => TypeDesc::Unit,
        Type::Bool => TypeDesc::Bool,
        Type::I32 => TypeDesc::I32,
        Type::I64 => TypeDesc::I64,
        Type::F64 => TypeDesc::F64,
        Type::Str => TypeDesc::String,
        Type::Json => TypeDesc::Json,
        Type::List(e) => TypeDesc::List(Box::new(desc_of(types, e))),
        Type::Option(e) => TypeDesc::Option(Box::new(desc_of(types, e))),
        Type::Struct(id) | Type::Enum(id) => {
            types.get(*id as usize).cloned().unwrap_or(TypeDesc::Unit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }

    #[test]
    fn redeclared_standard_externs_are_checked_against_the_table() {
        use Type::{Bool, I32, I64, Str, Unit};
        let fits = |b, params: &[Type], ret: Type| standard_signature_fits(b, params, &ret);
        assert!(fits(Builtin::Print, &[Str], Unit));
        assert!(!fits(Builtin::Print, &[I32], Unit));
        assert!(fits(Builtin::Push, &[list(I32), I32], list(I32)));
        // The type parameter stands for one type throughout.
        assert!(!fits(Builtin::Push, &[list(I32), I64], list(I32)));
        assert!(!fits(Builtin::Push, &[list(I32), I32], list(I64)));
        // The other forms of `len` and `contains`.
        assert!(fits(Builtin::Len, &[Str], I64));
        assert!(fits(Builtin::Len, &[list(Bool)], I64));
        assert!(fits(Builtin::Contains, &[Str, Str], Bool));
        assert!(fits(Builtin::Contains, &[list(Str), Str], Bool));
        assert!(!fits(Builtin::Contains, &[Str, I32], Bool));
        assert!(!fits(Builtin::Split, &[Str], list(Str)));
        assert!(fits(Builtin::Toposort, &[list(list(I64))], list(list(I64))));
    }
}
