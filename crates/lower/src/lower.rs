//! HIR → IR. Works on a workspace that checked without errors: names are resolved and
//! every expression has a type (`hir::infer`), so lowering only decides control flow and
//! where the model is asked.

use std::collections::HashMap;

use hir::body::{Callee, Resolution};
use hir::defs::{enum_def, fn_signature, struct_def};
use hir::infer::{BodyResult, check_body};
use hir::{Database, Db, Item, ItemKind, Ty};
use syntax::Span;
use syntax::ast::{self, BinaryOp, Expr, ExprKind, Stmt, StmtKind, UnaryOp};

use crate::ir::*;

/// Lowers every function of the workspace. `None` when a file has errors: lowering
/// assumes a program that checks.
pub fn lower_workspace(db: &Database) -> Option<Module> {
    let files = hir::items::program_files(db, db.workspace()).clone();
    for &file in &files {
        if hir::check_file(db, file).iter().any(|d| d.is_error()) {
            return None;
        }
    }
    let mut cx = ModuleLower::new(db, &files);
    Some(cx.run())
}

struct ModuleLower<'db> {
    db: &'db Database,
    files: Vec<hir::SourceFile>,
    module: Module,
    funcs: HashMap<Item<'db>, FuncId>,
    types: HashMap<Item<'db>, TypeId>,
    externs: HashMap<Item<'db>, String>,
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
            },
            funcs: HashMap::new(),
            types: HashMap::new(),
            externs: HashMap::new(),
        }
    }

    fn run(&mut self) -> Module {
        let db = self.db;
        // Number the functions first so calls can refer to any of them.
        let mut bodies = Vec::new();
        // The program's `main` is in its first file that is not a prelude module.
        let program_file = self.files.iter().copied().find(|f| !f.is_prelude(db));
        for (file_index, &file) in self.files.clone().iter().enumerate() {
            for &item in &hir::file_items(db, file).items {
                match item.kind(db) {
                    ItemKind::Fn => {
                        let id = bodies.len() as FuncId;
                        self.funcs.insert(item, id);
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
                            })
                            .collect();
                        let ret = self.ty(&sig.ret);
                        self.externs.insert(item, item.name(db).clone());
                        self.module.externs.push(Extern {
                            name: item.name(db).clone(),
                            params,
                            ret,
                        });
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
                locals: Vec::new(),
                context: None,
                blocks: Vec::new(),
                value_count: 0,
                span,
            });
        }
        for (index, (item, file)) in bodies.into_iter().enumerate() {
            let function = FnLower::lower_fn(self, item, file);
            self.module.functions[index] = function;
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
/// An assignment that updates the list it reads (see `FnLower::update_of`).
enum Update<'e> {
    /// `xs = push(xs, x)`.
    Push(&'e Expr),
    /// `xs = set(xs, i, x)`.
    Set(&'e Expr, &'e Expr),
}

struct LoopTarget {
    continue_to: BlockId,
    /// Whether `continue` goes straight back to the head (a `while`), which starts an
    /// iteration, rather than to a step block that does (a `for`).
    continue_iterates: bool,
    break_to: BlockId,
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
            let frame = lx.emit(Op::ContextChild(outer), Type::Context, None);
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
            f,
            block: 0,
            loops: Vec::new(),
        }
    }

    // ------------------------------------------------------------ building

    fn src(&self, span: Span) -> SrcSpan {
        SrcSpan {
            file: self.file,
            start: self.base + span.start,
            end: self.base + span.end,
        }
    }

    fn new_local(&mut self, name: &str, ty: Type) -> LocalId {
        self.f.locals.push(LocalDef {
            name: name.to_owned(),
            ty,
        });
        self.f.locals.len() as LocalId - 1
    }

    /// The variable of a hir local; hir declared it before any use.
    fn local(&self, local: hir::body::LocalId) -> LocalId {
        *self
            .locals
            .get(&local)
            .unwrap_or_else(|| panic!("internal error: local {local:?} used before it is lowered"))
    }

    /// A new variable for the local that the expression `by` gives its value (see
    /// [`BodyResult::declared`]).
    fn declare(&mut self, by: &Expr, name: &str, ty: Type) -> LocalId {
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

    fn new_block(&mut self) -> BlockId {
        self.f.blocks.push(Block::default());
        self.f.blocks.len() as BlockId - 1
    }

    /// Whether the current block already ends (after `return`, `break`, …).
    fn terminated(&self) -> bool {
        self.f.blocks[self.block as usize].term != Terminator::Unreachable
    }

    fn terminate(&mut self, term: Terminator) {
        if !self.terminated() {
            self.f.blocks[self.block as usize].term = term;
        }
    }

    fn switch_to(&mut self, block: BlockId) {
        self.block = block;
    }

    fn emit(&mut self, op: Op, ty: Type, span: Option<SrcSpan>) -> ValueId {
        let id = self.f.value_count;
        self.f.value_count += 1;
        self.f.blocks[self.block as usize].insts.push(Inst {
            dest: Some((id, ty)),
            op,
            span,
        });
        id
    }

    fn emit_void(&mut self, op: Op, span: Option<SrcSpan>) {
        self.f.blocks[self.block as usize].insts.push(Inst {
            dest: None,
            op,
            span,
        });
    }

    fn unit(&mut self) -> ValueId {
        self.emit(Op::Const(Const::Unit), Type::Unit, None)
    }

    /// The type hir inferred for `e`. Lowering takes only programs that check, in which
    /// every expression has one: a missing type is a bug, not a guess.
    fn type_of(&mut self, e: &Expr) -> Type {
        let body = self.body;
        match body.expr_types.get(e.id) {
            Some(t) => self.m.ty(&t.ty),
            None => panic!(
                "internal error: hir gave no type to the expression at {:?} in `{}`",
                e.span, self.f.name
            ),
        }
    }

    fn context(&mut self) -> ValueId {
        let local = self
            .f
            .context
            .expect("hir checked that a context exists here");
        self.emit(Op::Load(local), Type::Context, None)
    }

    fn site(&mut self, subject: &str, doc: Option<String>, kind: SiteKind, span: Span) -> SiteId {
        let site = LlmSite {
            function: self.f.name.clone(),
            subject: subject.to_owned(),
            doc,
            kind,
            span: self.src(span),
        };
        self.m.module.sites.push(site);
        self.m.module.sites.len() as SiteId - 1
    }

    // ------------------------------------------------------------ bodies

    fn lower_body(&mut self, body: &ast::Block, ret: &Ty<'db>) {
        let ends_with_value = matches!(body.stmts.last().map(|s| &s.kind), Some(StmtKind::Expr(e)) if !matches!(e.kind, ExprKind::Inject(_)) && !matches!(&e.kind, ExprKind::If { else_block: None, .. }));
        let value = self.lower_block_stmts(body);
        if self.terminated() {
            return;
        }
        let is_unit = matches!(ret, Ty::Unit | Ty::Error | Ty::Never);
        let result = if ends_with_value || is_unit {
            if is_unit { self.unit() } else { value }
        } else {
            // No value: the model produces it (an LLM function).
            let ctx = self.context();
            let name = self.f.name.clone();
            let doc = self.f.doc.clone();
            let ret_ty = self.m.ty(ret);
            let span = Span {
                start: body.span.end.saturating_sub(1),
                end: body.span.end,
            };
            if ret_ty == Type::Bool {
                let site = self.site(&name, doc, SiteKind::Decide, span);
                self.emit(Op::Decide { site, ctx }, Type::Bool, Some(self.src(span)))
            } else {
                let site = self.site(
                    &name,
                    doc,
                    SiteKind::Produce {
                        ret: ret_ty.clone(),
                    },
                    span,
                );
                // A `Json` result asked for against a schema the program passes in.
                // (Parameters are the first locals, in order.)
                let schema = fn_signature(self.m.db, self.item)
                    .answer_schema_param()
                    .map(|local| self.emit(Op::Load(local as LocalId), Type::Json, None));
                self.emit(
                    Op::Produce { site, ctx, schema },
                    ret_ty,
                    Some(self.src(span)),
                )
            }
        };
        self.terminate(Terminator::Return(result));
    }

    /// Lowers a block in its own scope; its value (the tail expression's, else unit).
    fn lower_block(&mut self, block: &ast::Block) -> ValueId {
        self.lower_block_stmts(block)
    }

    fn lower_block_stmts(&mut self, block: &ast::Block) -> ValueId {
        let mut value = None;
        for (i, stmt) in block.stmts.iter().enumerate() {
            if self.terminated() {
                // Unreachable code (hir warned); nothing to emit.
                break;
            }
            let is_tail = i + 1 == block.stmts.len();
            match &stmt.kind {
                StmtKind::Expr(e) if is_tail && !matches!(e.kind, ExprKind::Inject(_)) => {
                    value = Some(self.expr(e))
                }
                _ => self.stmt(stmt),
            }
        }
        match value {
            Some(v) => v,
            None if self.terminated() => 0,
            None => self.unit(),
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Let { name, init, .. } => {
                let ty = self.type_of(init);
                let v = self.expr(init);
                let local = self.declare(init, &name.name, ty);
                self.emit_void(Op::Store(local, v), None);
            }
            StmtKind::Assign { target, op, value } => {
                let assigned = *self.body.assigned.get(value.id).unwrap_or_else(|| {
                    panic!(
                        "internal error: hir did not resolve the assignment to `{}`",
                        target.name
                    )
                });
                let local = self.local(assigned);
                let ty = self.f.locals[local as usize].ty.clone();
                if *op == ast::AssignOp::Assign
                    && let Some(update) = self.update_of(assigned, value)
                {
                    // `xs = push(xs, x)` / `xs = set(xs, i, x)`: in place when nothing
                    // else holds the list.
                    let span = Some(self.src(value.span));
                    let op = match update {
                        Update::Push(x) => Op::PushInPlace(local, self.expr(x)),
                        Update::Set(i, x) => {
                            let i = self.expr(i);
                            Op::SetInPlace(local, i, self.expr(x))
                        }
                    };
                    self.emit_void(op, span);
                    return;
                }
                let v = self.expr(value);
                let v = match op {
                    ast::AssignOp::Assign => v,
                    other => {
                        let current = self.emit(Op::Load(local), ty.clone(), None);
                        let bin = match other {
                            ast::AssignOp::Add if ty == Type::Str => BinOp::Concat,
                            ast::AssignOp::Add => BinOp::Add,
                            ast::AssignOp::Sub => BinOp::Sub,
                            ast::AssignOp::Mul => BinOp::Mul,
                            ast::AssignOp::Div => BinOp::Div,
                            _ => BinOp::Rem,
                        };
                        self.emit(
                            Op::Binary(bin, ty.clone(), current, v),
                            ty,
                            Some(self.src(stmt.span)),
                        )
                    }
                };
                self.emit_void(Op::Store(local, v), None);
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.expr(e),
                    None => self.unit(),
                };
                if !self.terminated() {
                    self.terminate(Terminator::Return(v));
                }
            }
            StmtKind::Break | StmtKind::Continue => {
                let target = self.loops.last().expect("hir checked the loop");
                let saved = target.saved_context;
                let term = match stmt.kind {
                    StmtKind::Break => Terminator::Jump(target.break_to),
                    _ if target.continue_iterates => Terminator::Loop(target.continue_to),
                    _ => Terminator::Jump(target.continue_to),
                };
                self.restore_context(saved);
                self.terminate(term);
            }
            StmtKind::While { cond, body } => {
                let head = self.new_block();
                let body_block = self.new_block();
                let exit = self.new_block();
                self.terminate(Terminator::Jump(head));
                self.switch_to(head);
                let c = self.expr(cond);
                self.terminate(Terminator::Branch(c, body_block, exit));
                self.switch_to(body_block);
                let saved = self.enter_iteration();
                self.loops.push(LoopTarget {
                    continue_to: head,
                    continue_iterates: true,
                    break_to: exit,
                    saved_context: saved,
                });
                self.lower_block(body);
                self.loops.pop();
                self.restore_context(saved);
                self.terminate(Terminator::Loop(head));
                self.switch_to(exit);
            }
            StmtKind::For { var, iter, body } => {
                let list_ty = self.type_of(iter);
                let elem_ty = match &list_ty {
                    Type::List(e) => (**e).clone(),
                    _ => Type::Unit,
                };
                let list_v = self.expr(iter);
                let list = self.new_local("for list", list_ty.clone());
                self.emit_void(Op::Store(list, list_v), None);
                let index = self.new_local("for index", Type::I64);
                let zero = self.emit(Op::Const(Const::Int(0)), Type::I64, None);
                self.emit_void(Op::Store(index, zero), None);
                // The hidden local is never assigned again, so the length is read once.
                let count = self.new_local("for count", Type::I64);
                let l = self.emit(Op::Load(list), list_ty.clone(), None);
                let n = self.emit(Op::CallBuiltin(Builtin::Len, vec![l]), Type::I64, None);
                self.emit_void(Op::Store(count, n), None);
                let head = self.new_block();
                let body_block = self.new_block();
                let step = self.new_block();
                let exit = self.new_block();
                self.terminate(Terminator::Jump(head));
                self.switch_to(head);
                let i = self.emit(Op::Load(index), Type::I64, None);
                let n = self.emit(Op::Load(count), Type::I64, None);
                let more = self.emit(Op::Binary(BinOp::Lt, Type::I64, i, n), Type::Bool, None);
                self.terminate(Terminator::Branch(more, body_block, exit));
                self.switch_to(body_block);
                let saved = self.enter_iteration();
                let l = self.emit(Op::Load(list), list_ty, None);
                let i = self.emit(Op::Load(index), Type::I64, None);
                let element = self.emit(
                    Op::Element(l, i),
                    elem_ty.clone(),
                    Some(self.src(iter.span)),
                );
                let var_local = self.declare(iter, &var.name, elem_ty);
                self.emit_void(Op::Store(var_local, element), None);
                self.loops.push(LoopTarget {
                    continue_to: step,
                    continue_iterates: false,
                    break_to: exit,
                    saved_context: saved,
                });
                self.lower_block(body);
                self.loops.pop();
                self.restore_context(saved);
                self.terminate(Terminator::Jump(step));
                self.switch_to(step);
                let i = self.emit(Op::Load(index), Type::I64, None);
                let one = self.emit(Op::Const(Const::Int(1)), Type::I64, None);
                let next = self.emit(Op::Binary(BinOp::Add, Type::I64, i, one), Type::I64, None);
                self.emit_void(Op::Store(index, next), None);
                self.terminate(Terminator::Loop(head));
                self.switch_to(exit);
                self.emit_void(Op::Release(list), None);
            }
            StmtKind::Expr(e) => {
                self.expr(e);
            }
        }
    }

    /// When `value` is `push(xs, x)` or `set(xs, i, x)` of the standard externs, with
    /// `xs` the local `target`.
    fn update_of<'e>(&self, target: hir::body::LocalId, value: &'e Expr) -> Option<Update<'e>> {
        let ExprKind::Call { args, .. } = &value.kind else {
            return None;
        };
        if self.body.resolutions.get(args.first()?.id) != Some(&Resolution::Local(target)) {
            return None;
        }
        match (self.body.callees.get(value.id), args.as_slice()) {
            (Some(Callee::Builtin(hir::Builtin::Push)), [_, x]) => Some(Update::Push(x)),
            (Some(Callee::Builtin(hir::Builtin::Set)), [_, i, x]) => Some(Update::Set(i, x)),
            _ => None,
        }
    }

    /// A loop iteration is a context scope: its injections go to a frame of their own.
    fn enter_iteration(&mut self) -> Option<(LocalId, LocalId)> {
        let ctx = self.f.context?;
        let saved = self.new_local("outer frame", Type::Context);
        let outer = self.emit(Op::Load(ctx), Type::Context, None);
        self.emit_void(Op::Store(saved, outer), None);
        let frame = self.emit(Op::ContextChild(outer), Type::Context, None);
        self.emit_void(Op::Store(ctx, frame), None);
        Some((ctx, saved))
    }

    fn restore_context(&mut self, saved: Option<(LocalId, LocalId)>) {
        if let Some((ctx, saved)) = saved
            && !self.terminated()
        {
            let outer = self.emit(Op::Load(saved), Type::Context, None);
            self.emit_void(Op::Store(ctx, outer), None);
        }
    }

    // ------------------------------------------------------------ expressions

    fn expr(&mut self, e: &Expr) -> ValueId {
        if self.terminated() {
            return 0;
        }
        let ty = self.type_of(e);
        match &e.kind {
            ExprKind::Int(n) => self.emit(Op::Const(Const::Int(*n as i64)), ty, None),
            ExprKind::Float(x) => self.emit(Op::Const(Const::Float(*x)), Type::F64, None),
            ExprKind::Str(s) => self.emit(Op::Const(Const::Str(s.clone())), Type::Str, None),
            ExprKind::Bool(b) => self.emit(Op::Const(Const::Bool(*b)), Type::Bool, None),
            ExprKind::Unit | ExprKind::Placeholder => self.unit(),
            ExprKind::Paren(inner) => self.expr(inner),
            ExprKind::List(items) => {
                let vs = items.iter().map(|i| self.expr(i)).collect();
                self.emit(Op::List(vs), ty, None)
            }
            ExprKind::StructLit { fields, .. } => {
                let Type::Struct(id) = ty else {
                    return self.unit();
                };
                let TypeDef::Struct { fields: defs, .. } = self.m.module.types[id as usize].clone()
                else {
                    return self.unit();
                };
                // Fields in declaration order, each evaluated where written.
                let mut values: Vec<Option<ValueId>> = vec![None; defs.len()];
                let body = self.body;
                for (index, f) in fields.iter().enumerate() {
                    let v = match &f.value {
                        Some(v) => self.expr(v),
                        None => {
                            let resolution = body
                                .shorthands
                                .get(e.id)
                                .and_then(|s| s.iter().find(|(i, _)| *i as usize == index))
                                .map(|(_, r)| r)
                                .unwrap_or_else(|| {
                                    panic!("internal error: hir did not resolve `{}`", f.name.name)
                                });
                            let field_ty = defs
                                .iter()
                                .find(|d| d.name == f.name.name)
                                .map_or(Type::Unit, |d| d.ty.clone());
                            self.resolved_value(resolution, &f.name.name, field_ty)
                        }
                    };
                    if let Some(i) = defs.iter().position(|d| d.name == f.name.name) {
                        values[i] = Some(v);
                    }
                }
                let values = values.into_iter().map(|v| v.unwrap_or(0)).collect();
                self.emit(Op::Struct(id, values), ty, None)
            }
            ExprKind::Path(path) => {
                let body = self.body;
                let resolution = body.resolutions.get(e.id).unwrap_or_else(|| {
                    panic!("internal error: hir did not resolve `{}`", path.text())
                });
                self.resolved_value(resolution, &path.last().name, ty)
            }
            ExprKind::Call { callee, args } => {
                let ExprKind::Path(path) = &callee.kind else {
                    unreachable!("hir rejects a call of anything but a name")
                };
                let name = path.text();
                if name == "Context::new" {
                    return self.emit(Op::ContextNew, Type::Context, None);
                }
                self.call(e, &name, args.iter().collect(), ty)
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => {
                let mut all: Vec<&Expr> = vec![receiver];
                all.extend(args);
                self.call(e, &method.name, all, ty)
            }
            ExprKind::Field { base, name } => {
                let b = self.expr(base);
                let index = match self.type_of(base) {
                    Type::Struct(id) => match &self.m.module.types[id as usize] {
                        TypeDef::Struct { fields, .. } => {
                            fields.iter().position(|f| f.name == name.name).unwrap_or(0) as u32
                        }
                        TypeDef::Enum { .. } => 0,
                    },
                    _ => 0,
                };
                self.emit(Op::Field(b, index), ty, None)
            }
            ExprKind::Index { base, index } => {
                let b = self.expr(base);
                let i = self.expr(index);
                self.emit(Op::Index(b, i), ty, Some(self.src(e.span)))
            }
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            } => {
                if let ExprKind::Int(n) = operand.kind {
                    // `-9223372036854775808` is a literal, not a negated overflow.
                    return self.emit(
                        Op::Const(Const::Int((n as i128).wrapping_neg() as i64)),
                        ty,
                        None,
                    );
                }
                let v = self.expr(operand);
                self.emit(
                    Op::Unary(UnOp::Neg, ty.clone(), v),
                    ty,
                    Some(self.src(e.span)),
                )
            }
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => {
                let v = self.expr(operand);
                self.emit(Op::Unary(UnOp::Not, Type::Bool, v), Type::Bool, None)
            }
            ExprKind::Binary {
                op: op @ (BinaryOp::And | BinaryOp::Or),
                lhs,
                rhs,
            } => {
                // Short-circuit: the right side runs only when it decides.
                let result = self.new_local("logic", Type::Bool);
                let l = self.expr(lhs);
                self.emit_void(Op::Store(result, l), None);
                let right = self.new_block();
                let join = self.new_block();
                if *op == BinaryOp::And {
                    self.terminate(Terminator::Branch(l, right, join));
                } else {
                    self.terminate(Terminator::Branch(l, join, right));
                }
                self.switch_to(right);
                let r = self.expr(rhs);
                self.emit_void(Op::Store(result, r), None);
                self.terminate(Terminator::Jump(join));
                self.switch_to(join);
                self.emit(Op::Load(result), Type::Bool, None)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let operand_ty = self.type_of(lhs);
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                let bin = match op {
                    BinaryOp::Add if operand_ty == Type::Str => BinOp::Concat,
                    BinaryOp::Add => BinOp::Add,
                    BinaryOp::Sub => BinOp::Sub,
                    BinaryOp::Mul => BinOp::Mul,
                    BinaryOp::Div => BinOp::Div,
                    BinaryOp::Rem => BinOp::Rem,
                    BinaryOp::Eq => BinOp::Eq,
                    BinaryOp::Ne => BinOp::Ne,
                    BinaryOp::Lt => BinOp::Lt,
                    BinaryOp::Le => BinOp::Le,
                    BinaryOp::Gt => BinOp::Gt,
                    BinaryOp::Ge => BinOp::Ge,
                    BinaryOp::And | BinaryOp::Or => unreachable!("handled above"),
                };
                let can_fail = matches!(
                    bin,
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
                );
                let span = can_fail.then(|| self.src(e.span));
                self.emit(Op::Binary(bin, operand_ty, l, r), ty, span)
            }
            ExprKind::Inject(inner) => {
                let ctx = self.context();
                match &inner.kind {
                    ExprKind::Str(s) => self.emit_void(Op::Instruct(ctx, s.clone()), None),
                    _ => {
                        let label = self.label(inner);
                        let v = self.expr(inner);
                        let function = self.f.name.clone();
                        self.emit_void(
                            Op::Inject {
                                ctx,
                                value: v,
                                function,
                                label,
                            },
                            None,
                        );
                    }
                }
                self.unit()
            }
            ExprKind::Block(block) => self.lower_block(block),
            ExprKind::If {
                branches,
                else_block,
            } => self.lower_if(branches, else_block.as_ref(), ty),
            ExprKind::Select { arms } => self.lower_select(e, arms, ty),
            ExprKind::ParallelFor { var, iter, body } => {
                self.lower_parallel_for(e, var, iter, body, ty)
            }
        }
    }

    /// How an injected value is labelled: its name, or `result of f`.
    fn label(&self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Path(p) => p.text(),
            ExprKind::Call { callee, .. } => match &callee.kind {
                ExprKind::Path(p) => format!("result of {}", p.text()),
                _ => "value".to_owned(),
            },
            ExprKind::MethodCall { method, .. } => format!("result of {}", method.name),
            ExprKind::Field { base, name } => format!("{}.{}", self.label(base), name.name),
            ExprKind::Paren(inner) => self.label(inner),
            _ => "value".to_owned(),
        }
    }

    /// The value a name stands for, as hir resolved it; `name` is its last segment.
    fn resolved_value(&mut self, resolution: &Resolution<'db>, name: &str, ty: Type) -> ValueId {
        match resolution {
            Resolution::Local(local) => {
                let local = self.local(*local);
                let t = self.f.locals[local as usize].ty.clone();
                self.emit(Op::Load(local), t, None)
            }
            Resolution::Builtin(Builtin::None) => {
                self.emit(Op::CallBuiltin(Builtin::None, Vec::new()), ty, None)
            }
            Resolution::Variant { owner, index } => {
                let id = self.m.type_id(*owner);
                self.emit(Op::Const(Const::Variant(id, *index)), ty, None)
            }
            Resolution::Item(_) | Resolution::Builtin(_) => {
                let function = match resolution {
                    Resolution::Item(item) => self.m.funcs.get(item).copied(),
                    _ => None,
                };
                let tool = Const::Tool {
                    name: name.to_owned(),
                    function,
                };
                self.emit(Op::Const(tool), Type::Tool, None)
            }
        }
    }

    /// What hir resolved the call `e` to.
    fn callee(&self, e: &Expr) -> Callee<'db> {
        *self.body.callees.get(e.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir did not resolve the call at {:?}",
                e.span
            )
        })
    }

    /// A call of `name` (as written) with every argument, the receiver first; its `_`
    /// arguments are filled by the model in one request.
    fn call(&mut self, e: &Expr, name: &str, all: Vec<&Expr>, ty: Type) -> ValueId {
        let callee = self.callee(e);
        let placeholders: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a.kind, ExprKind::Placeholder))
            .map(|(i, _)| i)
            .collect();
        let filled = if placeholders.is_empty() {
            None
        } else {
            let (params, doc) = self.callee_params(callee);
            let wanted: Vec<Param> = placeholders
                .iter()
                .filter_map(|&i| params.get(i).cloned())
                .collect();
            let site = self.site(
                name,
                None,
                SiteKind::Fill {
                    callee: name.to_owned(),
                    callee_doc: doc,
                    params: wanted,
                },
                e.span,
            );
            let ctx = self.context();
            Some(self.emit(Op::Fill { site, ctx }, Type::Unit, Some(self.src(e.span))))
        };
        self.finish_call(e, name, callee, &all, filled, ty)
    }

    fn callee_params(&mut self, callee: Callee<'db>) -> (Vec<Param>, Option<String>) {
        match callee {
            Callee::Item(item) => {
                let sig = fn_signature(self.m.db, item);
                let params = sig
                    .params
                    .iter()
                    .map(|p| Param {
                        name: p.name.clone(),
                        doc: p.doc.clone(),
                        ty: self.m.ty(&p.ty),
                    })
                    .collect();
                (params, sig.doc.clone())
            }
            Callee::Builtin(b) => {
                let sig = b.signature();
                let params = sig
                    .params
                    .iter()
                    .map(|(n, t)| Param {
                        name: (*n).to_owned(),
                        doc: None,
                        ty: self.m.ty(t),
                    })
                    .collect();
                (params, None)
            }
        }
    }

    /// Evaluates the arguments (reading `_`s from `filled`) and emits the call.
    fn finish_call(
        &mut self,
        e: &Expr,
        name: &str,
        callee: Callee<'db>,
        all: &[&Expr],
        filled: Option<ValueId>,
        ty: Type,
    ) -> ValueId {
        let (params, _) = self.callee_params(callee);
        let mut values = Vec::new();
        let mut next_filled = 0;
        for (i, a) in all.iter().enumerate() {
            if matches!(a.kind, ExprKind::Placeholder) {
                let t = params.get(i).map_or(Type::Unit, |p| p.ty.clone());
                let pack = filled.unwrap_or(0);
                values.push(self.emit(Op::Arg(pack, next_filled), t, None));
                next_filled += 1;
            } else {
                values.push(self.expr(a));
            }
        }
        let span = Some(self.src(e.span));
        match callee {
            Callee::Item(item) if item.kind(self.m.db) == ItemKind::Fn => {
                let id = self.m.funcs[&item];
                self.emit(Op::Call(id, values), ty, span)
            }
            Callee::Item(item) => {
                let name = self
                    .m
                    .externs
                    .get(&item)
                    .cloned()
                    .unwrap_or_else(|| name.to_owned());
                self.emit(Op::CallExtern(name, values), ty, span)
            }
            Callee::Builtin(b) => self.emit(Op::CallBuiltin(b, values), ty, span),
        }
    }

    fn lower_if(
        &mut self,
        branches: &[ast::IfBranch],
        else_block: Option<&ast::Block>,
        ty: Type,
    ) -> ValueId {
        let has_value = else_block.is_some() && ty != Type::Unit;
        let result = has_value.then(|| self.new_local("if value", ty.clone()));
        let join = self.new_block();
        for branch in branches {
            let c = self.expr(&branch.cond);
            let then = self.new_block();
            let next = self.new_block();
            self.terminate(Terminator::Branch(c, then, next));
            self.switch_to(then);
            let v = self.lower_block(&branch.body);
            if let Some(result) = result
                && !self.terminated()
            {
                self.emit_void(Op::Store(result, v), None);
            }
            self.terminate(Terminator::Jump(join));
            self.switch_to(next);
        }
        if let Some(block) = else_block {
            let v = self.lower_block(block);
            if let Some(result) = result
                && !self.terminated()
            {
                self.emit_void(Op::Store(result, v), None);
            }
        }
        self.terminate(Terminator::Jump(join));
        self.switch_to(join);
        match result {
            Some(result) => self.emit(Op::Load(result), ty, None),
            None => self.unit(),
        }
    }

    fn lower_select(&mut self, e: &Expr, arms: &[ast::SelectArm], ty: Type) -> ValueId {
        // One request chooses the arm and fills its `_` arguments.
        let mut site_arms = Vec::new();
        let mut calls = Vec::new();
        for arm in arms {
            let (name, all): (String, Vec<&Expr>) = match &arm.call.kind {
                ExprKind::Call { callee, args } => match &callee.kind {
                    ExprKind::Path(p) => (p.text(), args.iter().collect()),
                    _ => continue,
                },
                ExprKind::MethodCall {
                    receiver,
                    method,
                    args,
                } => {
                    let mut all: Vec<&Expr> = vec![receiver];
                    all.extend(args);
                    (method.name.clone(), all)
                }
                _ => continue,
            };
            let callee = self.callee(&arm.call);
            let (params, doc) = self.callee_params(callee);
            let wanted = all
                .iter()
                .enumerate()
                .filter(|(_, a)| matches!(a.kind, ExprKind::Placeholder))
                .filter_map(|(i, _)| params.get(i).cloned())
                .collect();
            site_arms.push(SiteArm {
                tool: name.clone(),
                doc,
                binding: arm.binding.as_ref().map(|b| b.name.clone()),
                params: wanted,
            });
            calls.push((arm, name, callee, all));
        }
        let name = self.f.name.clone();
        let site = self.site(&name, None, SiteKind::Choose { arms: site_arms }, e.span);
        let ctx = self.context();
        let choice = self.emit(Op::Choose { site, ctx }, Type::Unit, Some(self.src(e.span)));
        let index = self.emit(Op::Arm(choice), Type::I64, None);
        let result = (ty != Type::Unit).then(|| self.new_local("select value", ty.clone()));
        let join = self.new_block();
        let mut targets = Vec::new();
        for (arm, name, callee, all) in calls {
            let block = self.new_block();
            targets.push(block);
            let resume = self.block;
            self.switch_to(block);
            let call_ty = self.type_of(&arm.call);
            let v = self.finish_call(
                &arm.call,
                &name,
                callee,
                &all,
                Some(choice),
                call_ty.clone(),
            );
            if let Some(binding) = &arm.binding {
                let local = self.declare(&arm.call, &binding.name, call_ty);
                self.emit_void(Op::Store(local, v), None);
            }
            let body = self.expr(&arm.body);
            if let Some(result) = result
                && !self.terminated()
            {
                self.emit_void(Op::Store(result, body), None);
            }
            self.terminate(Terminator::Jump(join));
            self.switch_to(resume);
        }
        self.terminate(Terminator::Switch(index, targets));
        self.switch_to(join);
        match result {
            Some(result) => self.emit(Op::Load(result), ty, None),
            None => self.unit(),
        }
    }

    /// The body becomes a function of its own, given every variable in scope (a body
    /// cannot assign them, so passing their values is exact) and then the element.
    fn lower_parallel_for(
        &mut self,
        e: &Expr,
        var: &ast::Ident,
        iter: &Expr,
        body: &ast::Block,
        ty: Type,
    ) -> ValueId {
        let list = self.expr(iter);
        let elem_ty = match self.type_of(iter) {
            Type::List(e) => *e,
            _ => Type::Unit,
        };
        let result_ty = match &ty {
            Type::List(e) => (**e).clone(),
            _ => Type::Unit,
        };
        let hir_body = self.body;
        let captured = hir_body.captures.get(e.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir gave no captures to the `parallel for` at {:?}",
                e.span
            )
        });
        let visible: Vec<(String, LocalId)> = captured
            .iter()
            .map(|&l| (hir_body.locals[l.0 as usize].name.clone(), self.local(l)))
            .collect();
        let captures: Vec<ValueId> = visible
            .iter()
            .map(|(_, local)| {
                let t = self.f.locals[*local as usize].ty.clone();
                self.emit(Op::Load(*local), t, None)
            })
            .collect();
        let mut params: Vec<Param> = visible
            .iter()
            .map(|(name, local)| Param {
                name: name.clone(),
                doc: None,
                ty: self.f.locals[*local as usize].ty.clone(),
            })
            .collect();
        params.push(Param {
            name: var.name.clone(),
            doc: None,
            ty: elem_ty,
        });
        let body_id = self.m.module.functions.len() as FuncId;
        let name = format!(
            "{}::parallel_for@{}",
            self.f.name,
            self.base + body.span.start
        );
        let function = Function {
            name: name.clone(),
            doc: None,
            params: params.clone(),
            ret: result_ty,
            effect: self.f.effect,
            locals: Vec::new(),
            context: None,
            blocks: vec![Block::default()],
            value_count: 0,
            span: self.src(body.span),
        };
        self.m.module.functions.push(function.clone());
        let outer_context = self
            .f
            .context
            .and_then(|c| visible.iter().position(|(_, l)| *l == c));
        let mut inner = FnLower::new(&mut *self.m, self.item, self.file, function);
        for p in &params {
            inner.new_local(&p.name, p.ty.clone());
        }
        // The body's variables are the parameters: the captures, then the element.
        for (i, &l) in captured.iter().enumerate() {
            inner.locals.insert(l, i as LocalId);
        }
        let element = *hir_body.declared.get(iter.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir declared no `parallel for` variable at {:?}",
                iter.span
            )
        });
        inner.locals.insert(element, captured.len() as LocalId);
        if let Some(i) = outer_context {
            // Each iteration sees the loop's context and its own injections.
            let local = i as LocalId;
            inner.f.context = Some(local);
            let outer = inner.emit(Op::Load(local), Type::Context, None);
            let frame = inner.emit(Op::ContextChild(outer), Type::Context, None);
            inner.emit_void(Op::Store(local, frame), None);
        }
        let v = inner.lower_block(body);
        inner.terminate(Terminator::Return(v));
        let lowered = inner.f;
        self.m.module.functions[body_id as usize] = lowered;
        self.emit(
            Op::ParallelFor {
                list,
                body: body_id,
                captures,
            },
            ty,
            Some(self.src(iter.span)),
        )
    }
}
