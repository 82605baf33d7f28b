//! HIR → IR. Works on a workspace that checked without errors: names are resolved and
//! every expression has a type (`hir::infer`, read by expression and local id), so
//! lowering only decides control flow and where the model is asked.
//!
//! This module holds the module-wide tables (function, type and extern ids) and the
//! state of one function being lowered, with the helpers that build its blocks; the work
//! is split into `stmt` (blocks, statements, loops), `expr` (expressions), `llm`
//! (the LLM sites and the calls that carry them) and `parallel` (`parallel for` bodies
//! outlined as functions).

mod expr;
mod llm;
mod parallel;
mod stmt;
mod tests;

use std::collections::HashMap;

use hir::defs::{enum_def, fn_signature, name_span as defs_name_span, struct_def};
use hir::infer::{BodyResult, check_body};
use hir::{Database, Db, Item, ItemKind, Ty};
use syntax::Span;
use syntax::ast::{self, Expr};
use syntax::binding::ExternBinding;

use ir::*;

/// Lowers every function of the workspace. `None` when a file has errors: lowering
/// assumes a program that checks.
pub fn lower_workspace(db: &Database) -> Option<Module> {
    lower_workspace_ignoring(db, &[])
}

/// [`lower_workspace`], lowering despite the errors whose codes are in `ignored`
/// (`sapc run --unsafe-ignore-provenance`: the checker's E0134).
pub fn lower_workspace_ignoring(db: &Database, ignored: &[&str]) -> Option<Module> {
    let files = hir::items::program_files(db, db.workspace()).clone();
    for &file in &files {
        if hir::check_file(db, file)
            .iter()
            .any(|d| d.is_error() && !ignored.contains(&d.code))
        {
            return None;
        }
    }
    let mut cx = ModuleLower::new(db, &files);
    Some(cx.run())
}

/// Lowers the workspace for `sapc test`: its tests too (each a function, listed in
/// [`Module::tests`]), with every LLM function asking the test's scripted answers
/// first. The module has no `main`: every function is compiled.
pub fn lower_tests(db: &Database) -> Option<Module> {
    let files = hir::items::program_files(db, db.workspace()).clone();
    for &file in &files {
        if hir::check_file(db, file).iter().any(|d| d.is_error()) {
            return None;
        }
    }
    let mut cx = ModuleLower::new(db, &files);
    cx.for_tests = true;
    let mut module = cx.run();
    module.main = None;
    Some(module)
}

struct ModuleLower<'db> {
    db: &'db Database,
    files: Vec<hir::SourceFile>,
    module: Module,
    funcs: HashMap<Item<'db>, FuncId>,
    types: HashMap<Item<'db>, TypeId>,
    externs: HashMap<Item<'db>, String>,
    /// For each bound extern, how a context labels what it returns (`mcp:notes/read`).
    origins: HashMap<Item<'db>, String>,
    /// Lowering for `sapc test` (see [`lower_tests`]).
    for_tests: bool,
}

impl<'db> ModuleLower<'db> {
    fn new(db: &'db Database, files: &[hir::SourceFile]) -> Self {
        ModuleLower {
            db,
            files: files.to_vec(),
            module: Module {
                files: files.iter().map(|f| f.path(db).clone()).collect(),
                types: Vec::new(),
                functions: Vec::new(),
                externs: Vec::new(),
                sites: Vec::new(),
                main: None,
                exports: Vec::new(),
                tests: Vec::new(),
            },
            funcs: HashMap::new(),
            types: HashMap::new(),
            externs: HashMap::new(),
            origins: HashMap::new(),
            for_tests: false,
        }
    }

    fn run(&mut self) -> Module {
        let db = self.db;
        // Number the functions first so calls can refer to any of them.
        let mut bodies = Vec::new();
        let mut tests = Vec::new();
        // The program's `main` is in its first file that is not a prelude module.
        let program_file = self.files.iter().copied().find(|f| !f.is_prelude(db));
        for (file_index, &file) in self.files.clone().iter().enumerate() {
            for &item in &hir::file_items(db, file).items {
                match item.kind(db) {
                    ItemKind::Fn => {
                        let id = bodies.len() as FuncId;
                        self.funcs.insert(item, id);
                        if Some(file) == program_file
                            && matches!(&item.ast(db).kind, ast::ItemKind::Fn(f) if f.exported)
                        {
                            self.module.exports.push(id);
                        }
                        bodies.push((item, file_index as u32));
                        if item.name(db) == "main"
                            && self.module.main.is_none()
                            && Some(file) == program_file
                        {
                            self.module.main = Some(id);
                        }
                    }
                    ItemKind::ExternFn => {
                        let sig = fn_signature(db, item);
                        let params = sig
                            .params
                            .iter()
                            .map(|p| Param {
                                name: p.name.clone(),
                                doc: p.doc.clone(),
                                ty: self.ty(&p.ty),
                                trusted: p.trusted,
                            })
                            .collect();
                        let ret = self.ty(&sig.ret);
                        let declared = item.name(db).clone();
                        let binding = sig.binding.as_ref().map(|b| match b {
                            ExternBinding::Mcp { server, .. } => Binding::Mcp {
                                server: server.clone(),
                                tool: b.tool(&declared).to_owned(),
                            },
                            ExternBinding::Std { module, tool } => Binding::Std {
                                module: module.clone(),
                                tool: tool.clone(),
                            },
                            ExternBinding::Python => Binding::Python {
                                function: declared.clone(),
                            },
                        });
                        // A bound extern is called by its server's name and its own, so
                        // two servers' tools of one name stay apart.
                        let name = match &binding {
                            Some(Binding::Mcp { server, .. }) => format!("{server}::{declared}"),
                            Some(Binding::Std { module, .. }) => format!("{module}::{declared}"),
                            Some(Binding::Python { .. }) | None => declared,
                        };
                        if let Some(b) = &binding {
                            self.origins.insert(item, b.origin());
                        }
                        self.externs.insert(item, name.clone());
                        self.module.externs.push(Extern {
                            name,
                            params,
                            ret,
                            doc: sig.doc.clone(),
                            binding,
                            idempotent: sig.idempotent,
                            untrusted: hir::provenance::returns_untrusted(sig),
                            trusted: sig.trusted,
                            span: Some(SrcSpan {
                                file: file_index as u32,
                                start: item.offset(db) + item.ast(db).span.start,
                                end: item.offset(db) + item.ast(db).span.end,
                            }),
                        });
                    }
                    ItemKind::Test if self.for_tests && Some(file) == program_file => {
                        tests.push((item, file_index as u32));
                    }
                    _ => {}
                }
            }
        }
        if self.module.main.is_none() {
            self.module.main = bodies
                .iter()
                .position(|(item, _)| item.name(db) == "main")
                .map(|i| i as FuncId);
        }
        // Placeholders, filled as the bodies are lowered; `parallel for` bodies are
        // appended after them.
        for (item, file) in &bodies {
            let span = SrcSpan {
                file: *file,
                start: item.offset(db),
                end: item.offset(db) + item.ast(db).span.end,
            };
            self.module.functions.push(Function {
                name: item.name(db).clone(),
                doc: None,
                params: Vec::new(),
                ret: Type::Unit,
                effect: Effect::Pure,
                returns_untrusted: false,
                locals: Vec::new(),
                context: None,
                blocks: Vec::new(),
                value_count: 0,
                span,
            });
        }
        // Tests come after the functions (their ids follow), then the outlined bodies.
        let first_test = bodies.len();
        for (i, (item, file)) in tests.iter().enumerate() {
            let id = (first_test + i) as FuncId;
            self.funcs.insert(*item, id);
            let span = SrcSpan {
                file: *file,
                start: item.offset(db) + defs_name_span(db, *item).start,
                end: item.offset(db) + defs_name_span(db, *item).end,
            };
            self.module.tests.push(TestDef {
                name: item.name(db).clone(),
                function: id,
                span,
            });
            self.module.functions.push(Function::new(
                item.name(db).clone(),
                Vec::new(),
                Type::Unit,
                Effect::Contextual,
                span,
            ));
        }
        for (index, (item, file)) in bodies.into_iter().enumerate() {
            let function = FnLower::lower_fn(self, item, file);
            self.module.functions[index] = function;
        }
        for (i, (item, file)) in tests.into_iter().enumerate() {
            let function = FnLower::lower_test(self, item, file);
            self.module.functions[first_test + i] = function;
        }
        for function in &mut self.module.functions {
            crate::cleanup::function(function);
        }
        std::mem::replace(
            &mut self.module,
            Module {
                files: Vec::new(),
                types: Vec::new(),
                functions: Vec::new(),
                externs: Vec::new(),
                sites: Vec::new(),
                main: None,
                exports: Vec::new(),
                tests: Vec::new(),
            },
        )
    }

    fn ty(&mut self, t: &Ty<'db>) -> Type {
        match t {
            Ty::I32 => Type::I32,
            Ty::I64 => Type::I64,
            Ty::F64 => Type::F64,
            Ty::Bool => Type::Bool,
            Ty::String => Type::Str,
            Ty::Unit | Ty::Never | Ty::Error | Ty::Var(_) | Ty::Param(_) => Type::Unit,
            Ty::Json => Type::Json,
            Ty::Tool => Type::Tool,
            Ty::Context => Type::Context,
            Ty::List(inner) => Type::List(Box::new(self.ty(inner))),
            Ty::Option(inner) => Type::Option(Box::new(self.ty(inner))),
            Ty::Struct(item) => Type::Struct(self.type_id(*item)),
            Ty::Enum(item) => Type::Enum(self.type_id(*item)),
        }
    }

    fn type_id(&mut self, item: Item<'db>) -> TypeId {
        if let Some(&id) = self.types.get(&item) {
            return id;
        }
        let db = self.db;
        let id = self.module.types.len() as TypeId;
        self.types.insert(item, id);
        let doc = item.ast(db).doc.as_ref().map(|d| d.text.clone());
        // Reserve the slot before lowering fields: a struct may refer to itself.
        self.module.types.push(TypeDef::Enum {
            name: String::new(),
            doc: None,
            variants: Vec::new(),
        });
        let def = match item.kind(db) {
            ItemKind::Struct => {
                let fields = struct_def(db, item)
                    .fields
                    .iter()
                    .map(|f| Field {
                        name: f.name.clone(),
                        doc: f.doc.clone(),
                        ty: self.ty(&f.ty),
                    })
                    .collect();
                TypeDef::Struct {
                    name: item.name(db).clone(),
                    doc,
                    fields,
                }
            }
            _ => TypeDef::Enum {
                name: item.name(db).clone(),
                doc,
                variants: enum_def(db, item).variants.clone(),
            },
        };
        self.module.types[id as usize] = def;
        id
    }
}

/// Where `break` and `continue` go, and what leaving the loop restores.
struct LoopTarget {
    continue_to: BlockId,
    /// Whether `continue` goes straight back to the head (a `while`), which starts an
    /// iteration, rather than to a step block that does (a `for`).
    continue_iterates: bool,
    break_to: BlockId,
    /// The loop's span, for its iteration budget's error.
    span: SrcSpan,
    /// The context slot and the frame to restore when the iteration ends.
    saved_context: Option<(LocalId, LocalId)>,
}

struct FnLower<'a, 'db> {
    m: &'a mut ModuleLower<'db>,
    item: Item<'db>,
    file: u32,
    base: u32,
    /// What hir found in the body: types, resolutions and locals by id.
    body: &'db BodyResult<'db>,
    /// The variable of each hir local lowered so far.
    locals: HashMap<hir::body::LocalId, LocalId>,
    /// Variables that hold what a bound extern returned, with its origin label.
    tool_values: HashMap<LocalId, String>,
    f: Function,
    block: BlockId,
    loops: Vec<LoopTarget>,
}

impl<'a, 'db> FnLower<'a, 'db> {
    fn lower_fn(m: &'a mut ModuleLower<'db>, item: Item<'db>, file: u32) -> Function {
        let db = m.db;
        let ast::ItemKind::Fn(f) = &item.ast(db).kind else {
            unreachable!("lower_fn of a non-function")
        };
        let sig = fn_signature(db, item);
        let effect = match hir::fn_kind(db, item) {
            Some(hir::FnKind::Pure) | None => Effect::Pure,
            Some(hir::FnKind::ExternCalling) => Effect::ExternCalling,
            Some(hir::FnKind::Contextual) => Effect::Contextual,
        };
        let params: Vec<Param> = sig
            .params
            .iter()
            .map(|p| Param {
                name: p.name.clone(),
                doc: p.doc.clone(),
                ty: m.ty(&p.ty),
                trusted: p.trusted,
            })
            .collect();
        let ret = m.ty(&sig.ret);
        let span = SrcSpan {
            file,
            start: item.offset(db),
            end: item.offset(db) + item.ast(db).span.end,
        };
        let function = Function {
            name: item.name(db).clone(),
            doc: sig.doc.clone(),
            params: params.clone(),
            ret,
            effect,
            returns_untrusted: hir::provenance::fn_summary(db, item).ret_source.is_some(),
            locals: Vec::new(),
            context: None,
            blocks: vec![Block::default()],
            value_count: 0,
            span,
        };
        let mut lx = FnLower::new(m, item, file, function);
        // Parameters are the first locals, in order, in hir and here.
        for (i, p) in params.iter().enumerate() {
            let local = lx.new_local(&p.name, p.ty.clone());
            lx.locals.insert(hir::body::LocalId(i as u32), local);
        }
        if let Some(i) = sig.context_param {
            let local = i as LocalId;
            lx.f.context = Some(local);
            // The callee's frame: its injections vanish when it returns.
            let outer = lx.emit(Op::Load(local), Type::Context, None);
            let name = lx.f.name.clone();
            let frame = lx.emit(Op::ContextEnter(outer, name), Type::Context, None);
            lx.emit_void(Op::Store(local, frame), None);
        }
        lx.lower_body(&f.body, &sig.ret);
        lx.f
    }

    fn new(m: &'a mut ModuleLower<'db>, item: Item<'db>, file: u32, f: Function) -> Self {
        let db = m.db;
        FnLower {
            base: item.offset(db),
            body: check_body(db, item),
            m,
            item,
            file,
            locals: HashMap::new(),
            tool_values: HashMap::new(),
            f,
            block: 0,
            loops: Vec::new(),
        }
    }

    pub(super) fn src(&self, span: Span) -> SrcSpan {
        SrcSpan {
            file: self.file,
            start: self.base + span.start,
            end: self.base + span.end,
        }
    }

    pub(super) fn new_local(&mut self, name: &str, ty: Type) -> LocalId {
        self.f.locals.push(LocalDef {
            name: name.to_owned(),
            ty,
        });
        self.f.locals.len() as LocalId - 1
    }

    /// The variable of a hir local; hir declared it before any use.
    pub(super) fn local(&self, local: hir::body::LocalId) -> LocalId {
        *self
            .locals
            .get(&local)
            .unwrap_or_else(|| panic!("internal error: local {local:?} used before it is lowered"))
    }

    /// A new variable for the local that the expression `by` gives its value (see
    /// [`BodyResult::declared`]).
    pub(super) fn declare(&mut self, by: &Expr, name: &str, ty: Type) -> LocalId {
        let local = self.new_local(name, ty);
        let declared = *self.body.declared.get(by.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir declared no local for `{name}` at {:?}",
                by.span
            )
        });
        self.locals.insert(declared, local);
        local
    }

    pub(super) fn new_block(&mut self) -> BlockId {
        self.f.blocks.push(Block::default());
        self.f.blocks.len() as BlockId - 1
    }

    /// Whether the current block already ends (after `return`, `break`, …).
    pub(super) fn terminated(&self) -> bool {
        self.f.blocks[self.block as usize].term != Terminator::Unreachable
    }

    pub(super) fn terminate(&mut self, term: Terminator) {
        if !self.terminated() {
            self.f.blocks[self.block as usize].term = term;
        }
    }

    /// Ends a branch of an `if` or `select` that gives `value`: stored into the
    /// expression's `result` local, if it has one and the branch did not already end
    /// (`return`, `break`), then on to `join`.
    pub(super) fn join_with(&mut self, result: Option<LocalId>, value: ValueId, join: BlockId) {
        if let Some(result) = result
            && !self.terminated()
        {
            self.emit_void(Op::Store(result, value), None);
        }
        self.terminate(Terminator::Jump(join));
    }

    pub(super) fn switch_to(&mut self, block: BlockId) {
        self.block = block;
    }

    pub(super) fn emit(&mut self, op: Op, ty: Type, span: Option<SrcSpan>) -> ValueId {
        let id = self.f.value_count;
        self.f.value_count += 1;
        self.f.blocks[self.block as usize].insts.push(Inst {
            dest: Some((id, ty)),
            op,
            span,
        });
        id
    }

    pub(super) fn emit_void(&mut self, op: Op, span: Option<SrcSpan>) {
        self.f.blocks[self.block as usize].insts.push(Inst {
            dest: None,
            op,
            span,
        });
    }

    pub(super) fn unit(&mut self) -> ValueId {
        self.emit(Op::Const(Const::Unit), Type::Unit, None)
    }

    /// The type hir inferred for `e`. Lowering takes only programs that check, in which
    /// every expression has one: a missing type is a bug, not a guess.
    pub(super) fn type_of(&mut self, e: &Expr) -> Type {
        let body = self.body;
        match body.expr_types.get(e.id) {
            Some(t) => self.m.ty(&t.ty),
            None => panic!(
                "internal error: hir gave no type to the expression at {:?} in `{}`",
                e.span, self.f.name
            ),
        }
    }
}
