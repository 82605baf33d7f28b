//! The IR: each function is a control-flow graph of basic blocks. Variables are slots
//! (`Local`); expression results are values (`Value`) that live within one block.
//! Deterministic operations and the four kinds of LLM call site are distinct
//! instructions, and every LLM site and every operation that can fail carries the source
//! span it came from, so runtime errors and traces point at source.
//!
//! The module is plain data (serde), so `sapc build` can cache it; [`print::module`]
//! gives its readable form. `lower` produces it and the engines of `codegen-jit` run
//! it, so neither engine depends on the checker (or salsa).

#![forbid(unsafe_code)]

pub mod print;

use serde::{Deserialize, Serialize};

pub type FuncId = u32;
pub type TypeId = u32;
pub type SiteId = u32;
pub type LocalId = u32;
pub type BlockId = u32;
pub type ValueId = u32;

/// A byte range in a source file of the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SrcSpan {
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Module {
    /// Source file paths, indexed by `SrcSpan::file`.
    pub files: Vec<String>,
    pub types: Vec<TypeDef>,
    pub functions: Vec<Function>,
    pub externs: Vec<Extern>,
    pub sites: Vec<LlmSite>,
    /// The function `sapc run` starts, if the module has a `main`.
    pub main: Option<FuncId>,
    /// The program's `export fn`s, which `sapc mcp serve` offers as tools.
    pub exports: Vec<FuncId>,
    /// The tests, when the module was lowered for `sapc test` (otherwise none).
    pub tests: Vec<TestDef>,
}

/// A `test "name" { … }`, lowered to a function of no parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestDef {
    pub name: String,
    pub function: FuncId,
    /// The test's name, in its file.
    pub span: SrcSpan,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Type {
    Unit,
    Bool,
    I32,
    I64,
    F64,
    Str,
    Json,
    Tool,
    Context,
    List(Box<Type>),
    Option(Box<Type>),
    Struct(TypeId),
    Enum(TypeId),
}

impl Type {
    /// Whether values of the type live on the heap (and are reference counted).
    pub fn is_heap(&self) -> bool {
        !matches!(
            self,
            Type::Unit | Type::Bool | Type::I32 | Type::I64 | Type::F64 | Type::Enum(_)
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TypeDef {
    Struct {
        name: String,
        doc: Option<String>,
        fields: Vec<Field>,
    },
    Enum {
        name: String,
        doc: Option<String>,
        variants: Vec<(String, Option<String>)>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub doc: Option<String>,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub doc: Option<String>,
    pub ty: Type,
    /// `trusted name: T`: the runtime refuses to let the model fill it from a context
    /// that holds untrusted data (the checker's E0134, checked again).
    pub trusted: bool,
}

/// Pure, extern-calling or contextual (see `hir::FnKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    Pure,
    ExternCalling,
    Contextual,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    pub doc: Option<String>,
    pub params: Vec<Param>,
    pub ret: Type,
    pub effect: Effect,
    /// What it returns may be untrusted data whatever its arguments (it reads a tool,
    /// or asks the model with such data in context): the checker's summary, kept for
    /// the plans the run validates (`aot_execute`), whose data flow only the run sees.
    #[serde(default)]
    pub returns_untrusted: bool,
    /// Parameters first, in order, then every `let`, loop variable and temporary slot.
    pub locals: Vec<LocalDef>,
    /// The local holding the current context, when the function has one.
    pub context: Option<LocalId>,
    /// Block 0 is the entry.
    pub blocks: Vec<Block>,
    /// Values are numbered per function.
    pub value_count: u32,
    pub span: SrcSpan,
}

impl Function {
    /// A function with its signature and an empty entry block, to be lowered into.
    pub fn new(
        name: String,
        params: Vec<Param>,
        ret: Type,
        effect: Effect,
        span: SrcSpan,
    ) -> Function {
        Function {
            name,
            doc: None,
            params,
            ret,
            effect,
            returns_untrusted: false,
            locals: Vec::new(),
            context: None,
            blocks: vec![Block::default()],
            value_count: 0,
            span,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocalDef {
    pub name: String,
    pub ty: Type,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub insts: Vec<Inst>,
    pub term: Terminator,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inst {
    /// The value this instruction defines, with its type.
    pub dest: Option<(ValueId, Type)>,
    pub op: Op,
    /// Where it comes from; set on everything that can fail or calls the model.
    pub span: Option<SrcSpan>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Const {
    Unit,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// An enum variant by index.
    Variant(TypeId, u32),
    /// A function (with its id) or an extern (by name) used as a value.
    Tool {
        name: String,
        function: Option<FuncId>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `+` on strings.
    Concat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnOp {
    Neg,
    Not,
}

/// A standard extern, implemented by the runtime: the checker's own list, so a name,
/// its signature and its meaning are written once.
pub use builtins::Builtin;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    Const(Const),
    /// Copy a variable's value.
    Load(LocalId),
    /// Set a variable.
    Store(LocalId, ValueId),
    /// Checked arithmetic and comparisons; the operand type says which.
    Binary(BinOp, Type, ValueId, ValueId),
    Unary(UnOp, Type, ValueId),
    /// Call a sap function.
    Call(FuncId, Vec<ValueId>),
    /// Call a declared extern, by name (the host registers it).
    CallExtern(String, Vec<ValueId>),
    CallBuiltin(Builtin, Vec<ValueId>),
    /// `xs = push(xs, x)`: append in place when `xs` is not shared.
    PushInPlace(LocalId, ValueId),
    /// A hidden local's value is no longer needed — the list a `for` loop walked, at the
    /// loop's exit — so it is given back, and the program's own variable holds that list
    /// alone again (appending to it or replacing in it need not copy).
    Release(LocalId),
    /// `xs = set(xs, i, x)`: replace element `i` in place when `xs` is not shared (an
    /// index out of range is an error, as for `set`).
    SetInPlace(LocalId, ValueId, ValueId),
    List(Vec<ValueId>),
    Struct(TypeId, Vec<ValueId>),
    Field(ValueId, u32),
    Index(ValueId, ValueId),
    /// An element of the list a `for` loop walks: like `Index`, but the index is in range
    /// by construction (the loop's own list never changes and the index stays below its
    /// length), so native code skips the bounds check.
    Element(ValueId, ValueId),
    /// `Context::new()`.
    ContextNew,
    /// A frame on top of a context, for a loop iteration.
    ContextChild(ValueId),
    /// A callee's frame on top of its caller's context, named after the callee.
    ContextEnter(ValueId, String),
    /// `"text"!`: an instruction into a context.
    Instruct(ValueId, String),
    /// `value!`: data into a context, labelled.
    Inject {
        ctx: ValueId,
        value: ValueId,
        function: String,
        label: String,
    },
    /// LLM site: the result of an LLM function. A function returning `Json` with a
    /// `schema: Json` parameter passes that schema: the model's answer must match it.
    Produce {
        site: SiteId,
        ctx: ValueId,
        #[serde(default)]
        schema: Option<ValueId>,
    },
    /// LLM site: the `_` arguments of a call, all at once; then `Arg` reads each.
    Fill {
        site: SiteId,
        ctx: ValueId,
    },
    /// LLM site: a `select` arm and its `_` arguments; `Arm` reads the index, `Arg` the
    /// arguments.
    Choose {
        site: SiteId,
        ctx: ValueId,
    },
    /// LLM site: a Boolean condition.
    Decide {
        site: SiteId,
        ctx: ValueId,
    },
    /// The `i`-th argument the model filled in a `Fill` or `Choose` result.
    Arg(ValueId, u32),
    /// The arm index of a `Choose` result.
    Arm(ValueId),
    /// `parallel for`: run `body` for every element of `list` concurrently, passing the
    /// `captures` and then the element; the result is the list of its results, in order.
    ParallelFor {
        list: ValueId,
        body: FuncId,
        captures: Vec<ValueId>,
    },
}

impl Module {
    /// Forgets every `trusted` mark (parameters, the arms of a `select`), so that the
    /// run refuses nothing on provenance: `sapc run --unsafe-ignore-provenance`, for
    /// measuring an undefended agent (tools/agentdojo), and nothing else.
    pub fn strip_trust(&mut self) {
        let params = self
            .functions
            .iter_mut()
            .flat_map(|f| f.params.iter_mut())
            .chain(self.externs.iter_mut().flat_map(|e| e.params.iter_mut()));
        for p in params {
            p.trusted = false;
        }
        for site in &mut self.sites {
            match &mut site.kind {
                SiteKind::Fill { params, .. } => params.iter_mut().for_each(|p| p.trusted = false),
                SiteKind::Choose { arms } => {
                    for arm in arms {
                        arm.guarded = false;
                        arm.params.iter_mut().for_each(|p| p.trusted = false);
                    }
                }
                SiteKind::Produce { .. } | SiteKind::Decide => {}
            }
        }
    }

    /// The externs the code calls or passes as tools, by name.
    pub fn used_externs(&self) -> std::collections::BTreeSet<&str> {
        let mut used = std::collections::BTreeSet::new();
        for inst in self
            .functions
            .iter()
            .flat_map(|f| &f.blocks)
            .flat_map(|b| &b.insts)
        {
            match &inst.op {
                Op::CallExtern(name, _) => {
                    used.insert(name.as_str());
                }
                Op::Const(Const::Tool {
                    name,
                    function: None,
                }) => {
                    used.insert(name.as_str());
                }
                _ => {}
            }
        }
        used
    }

    /// The functions running `main` can reach: through calls, `parallel for` bodies, and
    /// functions passed as tools (the `aot` executor calls them). In a module of tests
    /// (no `main`), those its tests can reach, so `sapc test` with one test selected
    /// compiles what that test needs; in a module with neither, every function.
    pub fn reachable(&self) -> Vec<bool> {
        match self.main {
            Some(main) => self.reachable_from(&[main]),
            None if !self.tests.is_empty() => {
                let roots: Vec<FuncId> = self.tests.iter().map(|t| t.function).collect();
                self.reachable_from(&roots)
            }
            None => vec![true; self.functions.len()],
        }
    }

    /// The functions `roots` can reach (see [`Module::reachable`]).
    pub fn reachable_from(&self, roots: &[FuncId]) -> Vec<bool> {
        let mut seen = vec![false; self.functions.len()];
        let mut todo: Vec<FuncId> = roots.to_vec();
        while let Some(f) = todo.pop() {
            let Some(slot) = seen.get_mut(f as usize) else {
                continue;
            };
            if std::mem::replace(slot, true) {
                continue;
            }
            for inst in self.functions[f as usize]
                .blocks
                .iter()
                .flat_map(|b| &b.insts)
            {
                match &inst.op {
                    Op::Call(callee, _) | Op::ParallelFor { body: callee, .. } => {
                        todo.push(*callee)
                    }
                    Op::Const(Const::Tool {
                        function: Some(f), ..
                    }) => todo.push(*f),
                    _ => {}
                }
            }
        }
        seen
    }

    /// Whether running `main` can reach an LLM call site ([`Module::reachable`]): the
    /// prelude's model-calling functions do not count unless the program uses them.
    pub fn calls_model(&self) -> bool {
        self.reaches_model(&self.reachable())
    }

    /// Whether a function marked in `reachable` has an LLM call site.
    pub fn reaches_model(&self, reachable: &[bool]) -> bool {
        self.functions
            .iter()
            .zip(reachable)
            .filter(|(_, r)| **r)
            .flat_map(|(f, _)| f.blocks.iter().flat_map(|b| &b.insts))
            .any(|inst| {
                matches!(
                    inst.op,
                    Op::Produce { .. } | Op::Fill { .. } | Op::Choose { .. } | Op::Decide { .. }
                )
            })
    }

    /// The module without its functions' bodies: what running compiled code still needs
    /// (names, signatures, spans, call sites, types), as a cached native module stores it.
    pub fn without_bodies(&self) -> Module {
        let mut module = self.clone();
        for f in &mut module.functions {
            f.blocks = Vec::new();
            f.locals = Vec::new();
        }
        module
    }
}

impl Op {
    /// The values the operation reads, appended to `out`.
    pub fn operands(&self, out: &mut Vec<ValueId>) {
        match self {
            Op::Const(_) | Op::Load(_) | Op::ContextNew | Op::Release(_) => {}
            Op::Store(_, v)
            | Op::Unary(_, _, v)
            | Op::PushInPlace(_, v)
            | Op::Field(v, _)
            | Op::ContextChild(v)
            | Op::ContextEnter(v, _)
            | Op::Arg(v, _)
            | Op::Arm(v)
            | Op::Instruct(v, _) => out.push(*v),
            Op::Binary(_, _, a, b)
            | Op::Index(a, b)
            | Op::Element(a, b)
            | Op::SetInPlace(_, a, b) => out.extend([*a, *b]),
            Op::Call(_, args)
            | Op::CallExtern(_, args)
            | Op::CallBuiltin(_, args)
            | Op::List(args)
            | Op::Struct(_, args) => out.extend(args),
            Op::Inject { ctx, value, .. } => out.extend([*ctx, *value]),
            Op::Produce { ctx, schema, .. } => {
                out.push(*ctx);
                out.extend(schema);
            }
            Op::Fill { ctx, .. } | Op::Choose { ctx, .. } | Op::Decide { ctx, .. } => {
                out.push(*ctx)
            }
            Op::ParallelFor { list, captures, .. } => {
                out.push(*list);
                out.extend(captures);
            }
        }
    }
}

impl Terminator {
    /// The value the terminator reads, if any.
    pub fn operand(&self) -> Option<ValueId> {
        match self {
            Terminator::Branch(v, _, _) | Terminator::Switch(v, _) | Terminator::Return(v) => {
                Some(*v)
            }
            Terminator::Jump(_) | Terminator::Loop(..) | Terminator::Unreachable => None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Terminator {
    #[default]
    Unreachable,
    Jump(BlockId),
    /// Back to a loop's head for its next iteration: a jump that counts against the
    /// loop-iteration budget. Every cycle of the graph passes through one.
    /// With the loop's span: where its iteration budget stops it.
    Loop(BlockId, SrcSpan),
    Branch(ValueId, BlockId, BlockId),
    /// Jump to `targets[value]` (a `select`'s chosen arm).
    Switch(ValueId, Vec<BlockId>),
    Return(ValueId),
}

/// What kind of question an LLM site asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SiteKind {
    /// A value of `ret`, the result of `function`.
    Produce { ret: Type },
    /// The `params` of a call to `callee`.
    Fill {
        callee: String,
        callee_doc: Option<String>,
        params: Vec<Param>,
    },
    /// One of `arms`.
    Choose { arms: Vec<SiteArm> },
    /// A Boolean: whether `function` holds.
    Decide,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteArm {
    pub tool: String,
    pub doc: Option<String>,
    pub binding: Option<String>,
    /// The arm's `_` parameters, in order.
    pub params: Vec<Param>,
    /// The arm calls something with `trusted` parameters: the model may not choose it
    /// from a context that holds untrusted data.
    pub guarded: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmSite {
    /// The function the site is in.
    pub function: String,
    /// The id of the function whose source the site is in (the outer function for a
    /// `parallel for` body): what a test's `given f { … }` scripts.
    #[serde(default)]
    pub owner: FuncId,
    /// The function asked about (the callee for `Produce` and `Decide`).
    pub subject: String,
    pub doc: Option<String>,
    pub kind: SiteKind,
    pub span: SrcSpan,
}

/// A declared extern: the signature the host must register, or a tool it is bound to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Extern {
    /// The name calls use: the declared name for the host's externs, `SERVER::name`
    /// (`MODULE::name` for a standard tool) for a bound one.
    pub name: String,
    pub params: Vec<Param>,
    pub ret: Type,
    pub doc: Option<String>,
    pub binding: Option<Binding>,
    /// `idempotent extern fn`: a journaled run that stopped during a call of it runs
    /// the call again on resuming (otherwise it stops and names the call).
    #[serde(default)]
    pub idempotent: bool,
    /// What it returns is untrusted (a tool outside the program, not declared `trusted
    /// extern fn`): the run marks it, and refuses it to a `trusted` parameter.
    #[serde(default)]
    pub untrusted: bool,
    /// Declared `trusted extern fn`: its results are never marked untrusted, whoever
    /// serves it.
    #[serde(default)]
    pub trusted: bool,
    /// The declaration, for errors about it (a host without it, another signature).
    #[serde(default)]
    pub span: Option<SrcSpan>,
}

/// Where a bound extern's tool lives (`extern "mcp:notes" fn …`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Binding {
    /// A tool of an MCP server of `sap.toml`, by its name on the server.
    Mcp { server: String, tool: String },
    /// A standard tool behind a grant (`fs`, `http`, `process`).
    Std { module: String, tool: String },
    /// A function of the Python application that loads the program (`saplang`): the
    /// host serves it, and its results are untrusted.
    Python { function: String },
}

impl Binding {
    /// How a value the tool returned is labelled in a context: `mcp:notes/read_file`.
    pub fn origin(&self) -> String {
        match self {
            Binding::Mcp { server, tool } => format!("mcp:{server}/{tool}"),
            Binding::Std { module, tool } => format!("std:{module}/{tool}"),
            Binding::Python { function } => format!("python:{function}"),
        }
    }
}
