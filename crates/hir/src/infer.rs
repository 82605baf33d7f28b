//! Checking one function body: name resolution of locals, type inference (bidirectional,
//! with unification for integer literals, empty lists and the generic standard externs),
//! and the context rules of the brief §4. One tracked query per function, so an edit
//! inside one body re-checks only that body.

use syntax::Span;
use syntax::ast::{self, BinaryOp, Expr, ExprKind, Stmt, StmtKind, UnaryOp};

use crate::Db;
pub use crate::body::Callee;
use crate::body::{ExprMap, LocalData, LocalId, Resolution};
use crate::builtins::Builtin;
use crate::defs::{alias_def, enum_def, fn_signature, struct_def};
use crate::diagnostics::{self as diag, HirDiagnostic};
use crate::items::{Item, ItemKind};
use crate::resolve::{Resolver, TypeDef, ValueDef, closest};
use crate::ty::Ty;
use crate::type_lowering::TypeLowering;

#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct BodyFacts<'db> {
    /// Every function, extern and standard extern the body calls, once each.
    pub calls: Vec<Callee<'db>>,
    /// The body calls `Context::new()`.
    pub creates_context: bool,
}

impl<'db> BodyFacts<'db> {
    fn add_call(&mut self, callee: Callee<'db>) {
        if !self.calls.contains(&callee) {
            self.calls.push(callee);
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct ExprType<'db> {
    pub span: Span,
    pub ty: Ty<'db>,
}

/// What checking one function body found. Per-expression facts are indexed by the
/// expression's id, per-local ones by [`LocalId`]; spans are relative to the item.
#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct BodyResult<'db> {
    pub diagnostics: Vec<HirDiagnostic<'db>>,
    /// The type of every expression, with its span (for the IDE).
    pub expr_types: ExprMap<ExprType<'db>>,
    /// Every local binding of the body, by id.
    pub locals: Vec<LocalData<'db>>,
    /// What each path expression names.
    pub resolutions: ExprMap<Resolution<'db>>,
    /// What each call and method call (a `select` arm's included) calls.
    pub callees: ExprMap<Callee<'db>>,
    /// The local a `let`, `for`, `parallel for` or `select` arm declares, by the
    /// expression whose value it binds: the initializer, the iterable, the arm's call.
    pub declared: ExprMap<LocalId>,
    /// The local an assignment (`x = e`, `x += e`) writes, by the assigned value `e`.
    pub assigned: ExprMap<LocalId>,
    /// For a struct literal with shorthand fields (`Name { x }`), what each names, by
    /// the field's position in the literal.
    pub shorthands: ExprMap<Vec<(u32, Resolution<'db>)>>,
    /// For each `parallel for`, the locals visible at it (a shadowed one left out), in
    /// the order they were declared: its body is given their values.
    pub captures: ExprMap<Vec<LocalId>>,
    pub facts: BodyFacts<'db>,
    /// The body can end without a value, so the model produces the result.
    pub is_llm_function: bool,
    /// Every resolved name, in source order.
    pub references: Vec<Reference<'db>>,
    /// Set when the body holds [`COMPLETION_MARKER`].
    pub completion: Option<CompletionSite<'db>>,
}

/// What a name in the source refers to, for go-to-definition and hover.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub enum Target<'db> {
    /// A parameter or `let` (or loop, `select` binding) of the same function, declared
    /// at `decl` (relative to the item).
    Local {
        local: LocalId,
        decl: Span,
    },
    /// A function, extern, struct, enum or alias.
    Item(Item<'db>),
    Field {
        owner: Item<'db>,
        name: String,
    },
    Variant {
        owner: Item<'db>,
        name: String,
    },
    Builtin(Builtin),
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct Reference<'db> {
    /// The name as written, relative to the item.
    pub span: Span,
    pub target: Target<'db>,
}

/// A local visible at some point of a body.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct LocalInfo<'db> {
    pub name: String,
    pub ty: Ty<'db>,
    pub decl: Span,
}

/// The name an editor inserts at the cursor to ask what could be written there (a
/// completion request on code that is being typed).
pub const COMPLETION_MARKER: &str = "sapCompletionMarker";

/// What the checker saw at the completion marker.
#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct CompletionSite<'db> {
    /// The locals in scope there.
    pub locals: Vec<LocalInfo<'db>>,
    /// For `receiver.marker`, the receiver's type.
    pub receiver: Option<Ty<'db>>,
}

#[salsa::tracked(returns(ref))]
pub fn check_body<'db>(db: &'db dyn Db, item: Item<'db>) -> BodyResult<'db> {
    let ast::ItemKind::Fn(f) = &item.ast(db).kind else {
        return BodyResult::default();
    };
    let resolver = Resolver::new(db, item.file(db));
    let sig = fn_signature(db, item);
    let mut cx = Checker {
        db,
        item,
        resolver: &resolver,
        fn_name: f.name.name.clone(),
        ret: sig.ret.clone(),
        has_context: sig.context_param.is_some(),
        schema_param: sig.answer_schema_param(),
        context_used_implicitly: false,
        vars: Vec::new(),
        locals: Vec::new(),
        scopes: vec![Vec::new()],
        loops: Vec::new(),
        parallel_depth: 0,
        pending_ints: Vec::new(),
        pending_lists: Vec::new(),
        pending_nones: Vec::new(),
        expr_types: ExprMap::default(),
        resolutions: ExprMap::default(),
        callees: ExprMap::default(),
        declared: ExprMap::default(),
        assigned: ExprMap::default(),
        shorthands: ExprMap::default(),
        captures: ExprMap::default(),
        diagnostics: Vec::new(),
        facts: BodyFacts::default(),
        llm_bool_calls: 0,
        loop_exits: 0,
        references: Vec::new(),
        completion: None,
    };
    for (i, p) in sig.params.iter().enumerate() {
        let is_context = sig.context_param == Some(i);
        let span = f.params[i].name.span;
        cx.declare(&p.name, p.ty.clone(), span, LocalKind::Param { is_context });
    }
    let is_llm_function = cx.check_fn_body(&f.body);
    cx.finish(&f.params, is_llm_function)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LocalKind {
    Param { is_context: bool },
    Let,
}

struct Local<'db> {
    name: String,
    ty: Ty<'db>,
    span: Span,
    used: bool,
    kind: LocalKind,
    /// How many `parallel for` bodies enclose the declaration.
    parallel_depth: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LoopKind {
    Sequential,
    Parallel,
}

struct Var<'db> {
    binding: Option<Ty<'db>>,
    /// Only an integer type may bind it (the type of an integer literal).
    int_only: bool,
}

struct Checker<'a, 'db> {
    db: &'db dyn Db,
    item: Item<'db>,
    resolver: &'a Resolver<'db>,
    fn_name: String,
    ret: Ty<'db>,
    has_context: bool,
    context_used_implicitly: bool,
    /// The `schema: Json` parameter an LLM function's answer is asked against.
    schema_param: Option<usize>,
    vars: Vec<Var<'db>>,
    locals: Vec<Local<'db>>,
    scopes: Vec<Vec<usize>>,
    loops: Vec<LoopKind>,
    parallel_depth: usize,
    /// Integer literals whose range is checked once their type is known.
    pending_ints: Vec<(Ty<'db>, u64, bool, Span)>,
    /// `[]` literals whose element type must be inferred.
    pending_lists: Vec<(Ty<'db>, Span)>,
    /// Each `None`'s value type, which must be known by the end.
    pending_nones: Vec<(Ty<'db>, Span)>,
    expr_types: ExprMap<(Span, Ty<'db>)>,
    resolutions: ExprMap<Resolution<'db>>,
    callees: ExprMap<Callee<'db>>,
    declared: ExprMap<LocalId>,
    assigned: ExprMap<LocalId>,
    shorthands: ExprMap<Vec<(u32, Resolution<'db>)>>,
    captures: ExprMap<Vec<LocalId>>,
    diagnostics: Vec<HirDiagnostic<'db>>,
    facts: BodyFacts<'db>,
    /// Calls to Boolean functions that take a context: conditions the model decides.
    llm_bool_calls: usize,
    /// `break`s and `return`s seen, to tell bounded loops.
    loop_exits: usize,
    references: Vec<Reference<'db>>,
    completion: Option<CompletionSite<'db>>,
}

impl<'a, 'db> Checker<'a, 'db> {
    // ------------------------------------------------------------ types

    fn fresh(&mut self, int_only: bool) -> Ty<'db> {
        self.vars.push(Var {
            binding: None,
            int_only,
        });
        Ty::Var(self.vars.len() as u32 - 1)
    }

    /// Follows variable bindings at the top of `t`.
    fn shallow(&self, t: &Ty<'db>) -> Ty<'db> {
        let mut t = t.clone();
        while let Ty::Var(v) = t {
            match &self.vars[v as usize].binding {
                Some(b) => t = b.clone(),
                None => break,
            }
        }
        t
    }

    /// Replaces every bound variable in `t`.
    fn resolve(&self, t: &Ty<'db>) -> Ty<'db> {
        match self.shallow(t) {
            Ty::List(inner) => Ty::List(Box::new(self.resolve(&inner))),
            Ty::Option(inner) => Ty::Option(Box::new(self.resolve(&inner))),
            other => other,
        }
    }

    fn display(&self, t: &Ty<'db>) -> String {
        let t = self.resolve(t);
        match t {
            Ty::Var(v) if self.vars[v as usize].int_only => "{integer}".to_owned(),
            t => t.display(self.db),
        }
    }

    fn occurs(&self, v: u32, t: &Ty<'db>) -> bool {
        match self.shallow(t) {
            Ty::Var(w) => v == w,
            Ty::List(inner) | Ty::Option(inner) => self.occurs(v, &inner),
            _ => false,
        }
    }

    fn bind(&mut self, v: u32, t: Ty<'db>) -> bool {
        if let Ty::Var(w) = t {
            if v == w {
                return true;
            }
            let int_only = self.vars[v as usize].int_only || self.vars[w as usize].int_only;
            self.vars[w as usize].int_only = int_only;
            self.vars[v as usize].binding = Some(Ty::Var(w));
            return true;
        }
        if self.vars[v as usize].int_only && !matches!(t, Ty::I32 | Ty::I64 | Ty::Error | Ty::Never)
        {
            return false;
        }
        if self.occurs(v, &t) {
            return false;
        }
        self.vars[v as usize].binding = Some(t);
        true
    }

    fn unify(&mut self, a: &Ty<'db>, b: &Ty<'db>) -> bool {
        let (a, b) = (self.shallow(a), self.shallow(b));
        match (a, b) {
            (Ty::Error, _) | (_, Ty::Error) | (Ty::Never, _) | (_, Ty::Never) => true,
            (Ty::Var(v), t) | (t, Ty::Var(v)) => self.bind(v, t),
            (Ty::List(x), Ty::List(y)) | (Ty::Option(x), Ty::Option(y)) => self.unify(&x, &y),
            (x, y) => x == y,
        }
    }

    /// Reports a mismatch at `span` unless `found` fits `expected`.
    fn expect(&mut self, span: Span, found: &Ty<'db>, expected: &Ty<'db>) {
        if !self.unify(found, expected) {
            let d = diag::mismatch(
                self.item,
                span,
                &self.display(expected),
                &self.display(found),
            );
            self.diagnostics.push(d);
        }
    }

    fn lower_type(&mut self, t: &ast::TypeExpr) -> Ty<'db> {
        let mut lowering = TypeLowering::new(self.resolver, self.item);
        let ty = lowering.lower(t);
        self.diagnostics.extend(lowering.diagnostics);
        for (span, item) in lowering.references {
            self.refer(span, Target::Item(item));
        }
        ty
    }

    // ------------------------------------------------------------ locals

    fn declare(&mut self, name: &str, ty: Ty<'db>, span: Span, kind: LocalKind) -> LocalId {
        self.locals.push(Local {
            name: name.to_owned(),
            ty,
            span,
            used: false,
            kind,
            parallel_depth: self.parallel_depth,
        });
        let id = self.locals.len() - 1;
        self.scopes.last_mut().expect("a scope is open").push(id);
        LocalId(id as u32)
    }

    fn lookup_local(&self, name: &str) -> Option<usize> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .copied()
            .find(|&id| self.locals[id].name == name)
    }

    fn push_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    fn pop_scope(&mut self) {
        let scope = self.scopes.pop().unwrap_or_default();
        for id in scope {
            let local = &self.locals[id];
            if local.used || local.name.starts_with('_') {
                continue;
            }
            let d = match local.kind {
                LocalKind::Param { is_context: true } => {
                    if self.context_used_implicitly {
                        continue;
                    }
                    diag::unused_context(self.item, local.span, &local.name)
                }
                _ => diag::unused_variable(self.item, local.span, &local.name),
            };
            self.diagnostics.push(d);
        }
    }

    fn use_context(&mut self, span: Span, what: &str) {
        if self.has_context {
            self.context_used_implicitly = true;
        } else {
            let d = diag::no_context(self.item, span, what, &self.fn_name);
            self.diagnostics.push(d);
        }
    }

    // ------------------------------------------------------------ bodies

    /// Checks the function body; returns whether it is an LLM function.
    fn check_fn_body(&mut self, body: &ast::Block) -> bool {
        let ret = self.ret.clone();
        let ends_with_value = block_tail(body).is_some_and(|tail| !is_valueless_if(tail));
        let (value, diverges) = self.check_block_inner(body, Some(&ret));
        if diverges {
            return false;
        }
        if ends_with_value {
            let tail = block_tail(body).expect("checked above");
            self.expect(tail.span, &value, &ret);
            return false;
        }
        if matches!(self.shallow(&ret), Ty::Unit | Ty::Error) {
            return false;
        }
        let end = Span {
            start: body.span.end.saturating_sub(1),
            end: body.span.end,
        };
        if self.has_context {
            self.context_used_implicitly = true;
            // The model is asked against the `schema` parameter: it is used. (Parameters
            // are the first locals, in order.)
            if let Some(i) = self.schema_param {
                self.locals[i].used = true;
            }
            true
        } else {
            let d = diag::missing_return(self.item, end, &self.fn_name, &self.display(&ret));
            self.diagnostics.push(d);
            false
        }
    }

    /// A block in its own scope; its value type.
    fn check_block(&mut self, block: &ast::Block, hint: Option<&Ty<'db>>) -> Ty<'db> {
        self.push_scope();
        let (value, diverges) = self.check_block_inner(block, hint);
        self.pop_scope();
        if diverges { Ty::Never } else { value }
    }

    /// Checks statements in the current scope; returns (tail value type, diverges).
    fn check_block_inner(&mut self, block: &ast::Block, hint: Option<&Ty<'db>>) -> (Ty<'db>, bool) {
        let mut diverged_at: Option<Span> = None;
        let mut reported_unreachable = false;
        let mut value = Ty::Unit;
        let mut previous_injection: Option<(&str, Span)> = None;
        for (i, stmt) in block.stmts.iter().enumerate() {
            if let Some(cause) = diverged_at
                && !reported_unreachable
            {
                self.diagnostics
                    .push(diag::unreachable(self.item, stmt.span, cause));
                reported_unreachable = true;
            }
            // Warn about `"same text"!` twice in a row.
            let injected = injected_literal(stmt);
            if let (Some((text, span)), Some((prev, prev_span))) = (injected, previous_injection)
                && text == prev
            {
                self.diagnostics
                    .push(diag::duplicate_injection(self.item, span, prev_span));
            }
            previous_injection = injected;

            let is_tail = i + 1 == block.stmts.len();
            let ty = match &stmt.kind {
                StmtKind::Expr(e) if is_tail && !matches!(e.kind, ExprKind::Inject(_)) => {
                    let t = self.infer(e, hint);
                    value = t.clone();
                    t
                }
                _ => self.check_stmt(stmt),
            };
            if matches!(self.shallow(&ty), Ty::Never) && diverged_at.is_none() {
                diverged_at = Some(stmt.span);
            }
        }
        (value, diverged_at.is_some())
    }

    fn check_stmt(&mut self, stmt: &Stmt) -> Ty<'db> {
        match &stmt.kind {
            StmtKind::Let { name, ty, init } => {
                let ty = match ty {
                    Some(t) => {
                        let declared = self.lower_type(t);
                        let found = self.infer(init, Some(&declared));
                        self.expect(init.span, &found, &declared);
                        declared
                    }
                    None => self.infer(init, None),
                };
                let diverges = matches!(self.shallow(&ty), Ty::Never);
                let local = self.declare(&name.name, ty, name.span, LocalKind::Let);
                self.declared.insert(init.id, local);
                if diverges { Ty::Never } else { Ty::Unit }
            }
            StmtKind::Assign { target, op, value } => {
                let Some(id) = self.lookup_local(&target.name) else {
                    self.infer(value, None);
                    self.diagnostics.push(diag::assign_undeclared(
                        self.item,
                        target.span,
                        &target.name,
                    ));
                    return Ty::Unit;
                };
                self.assigned.insert(value.id, LocalId(id as u32));
                self.refer_local(target.span, id);
                if self.locals[id].parallel_depth < self.parallel_depth {
                    let declared = self.locals[id].span;
                    self.diagnostics.push(diag::parallel_assign(
                        self.item,
                        target.span,
                        &target.name,
                        declared,
                    ));
                }
                let target_ty = self.locals[id].ty.clone();
                let found = self.infer(value, Some(&target_ty));
                match op {
                    ast::AssignOp::Assign => self.expect(value.span, &found, &target_ty),
                    _ => {
                        let bin = match op {
                            ast::AssignOp::Add => BinaryOp::Add,
                            ast::AssignOp::Sub => BinaryOp::Sub,
                            ast::AssignOp::Mul => BinaryOp::Mul,
                            ast::AssignOp::Div => BinaryOp::Div,
                            _ => BinaryOp::Rem,
                        };
                        // `x += e` reads `x`.
                        self.locals[id].used = true;
                        let result = self.arithmetic(stmt.span, bin, &target_ty, &found);
                        self.expect(value.span, &result, &target_ty);
                    }
                }
                Ty::Unit
            }
            StmtKind::Return(value) => {
                self.loop_exits += 1;
                let ret = self.ret.clone();
                match value {
                    Some(e) => {
                        let found = self.infer(e, Some(&ret));
                        self.expect(e.span, &found, &ret);
                    }
                    None => self.expect(stmt.span, &Ty::Unit, &ret),
                }
                Ty::Never
            }
            StmtKind::Break | StmtKind::Continue => {
                let keyword = if matches!(stmt.kind, StmtKind::Break) {
                    "break"
                } else {
                    "continue"
                };
                match self.loops.last() {
                    None => self.diagnostics.push(diag::loop_control(
                        self.item,
                        stmt.span,
                        keyword,
                        "is only allowed inside a loop",
                    )),
                    Some(LoopKind::Parallel) => self.diagnostics.push(diag::loop_control(
                        self.item,
                        stmt.span,
                        keyword,
                        "cannot leave a `parallel for` iteration: every iteration produces a value",
                    )),
                    Some(LoopKind::Sequential) => {}
                }
                if keyword == "break" {
                    self.loop_exits += 1;
                }
                Ty::Never
            }
            StmtKind::While { cond, body } => {
                let llm_before = self.llm_bool_calls;
                self.condition(cond);
                let llm_decided = self.llm_bool_calls > llm_before;
                let exits_before = self.loop_exits;
                self.loops.push(LoopKind::Sequential);
                self.check_block(body, None);
                self.loops.pop();
                let exits = self.loop_exits > exits_before;
                if llm_decided && !exits && !has_deterministic_bound(cond) {
                    self.diagnostics
                        .push(diag::unbounded_while(self.item, cond.span));
                }
                Ty::Unit
            }
            StmtKind::For { var, iter, body } => {
                let elem = self.iterable(iter);
                self.loops.push(LoopKind::Sequential);
                self.push_scope();
                let local = self.declare(&var.name, elem, var.span, LocalKind::Let);
                self.declared.insert(iter.id, local);
                self.check_block(body, None);
                self.pop_scope();
                self.loops.pop();
                Ty::Unit
            }
            StmtKind::Expr(e) => self.infer(e, None),
        }
    }

    fn condition(&mut self, cond: &Expr) {
        let t = self.infer(cond, Some(&Ty::Bool));
        if !self.unify(&t, &Ty::Bool) {
            let d = diag::condition(self.item, cond.span, &self.display(&t));
            self.diagnostics.push(d);
        }
    }

    /// The element type of a `for`/`parallel for` iterable.
    fn iterable(&mut self, iter: &Expr) -> Ty<'db> {
        let elem = self.fresh(false);
        let list = Ty::List(Box::new(elem.clone()));
        let found = self.infer(iter, Some(&list));
        if !self.unify(&found, &list) {
            let d = diag::mismatch(self.item, iter.span, "List<_>", &self.display(&found))
                .with_help("`for` and `parallel for` iterate over a `List`");
            self.diagnostics.push(d);
            return Ty::Error;
        }
        elem
    }

    // ------------------------------------------------------------ expressions

    fn infer(&mut self, e: &Expr, hint: Option<&Ty<'db>>) -> Ty<'db> {
        let t = self.infer_inner(e, hint);
        self.expr_types.insert(e.id, (e.span, t.clone()));
        t
    }

    fn infer_inner(&mut self, e: &Expr, hint: Option<&Ty<'db>>) -> Ty<'db> {
        match &e.kind {
            ExprKind::Int(n) => self.int_literal(*n, false, e.span, hint),
            ExprKind::Float(_) => Ty::F64,
            ExprKind::Str(_) => Ty::String,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Unit => Ty::Unit,
            ExprKind::List(items) => {
                let elem = match hint.map(|h| self.shallow(h)) {
                    Some(Ty::List(elem)) => *elem,
                    _ => self.fresh(false),
                };
                if items.is_empty() {
                    self.pending_lists.push((elem.clone(), e.span));
                }
                for item in items {
                    let t = self.infer(item, Some(&elem));
                    if matches!(self.shallow(&t), Ty::Context) {
                        self.diagnostics.push(diag::context_misuse(
                            self.item,
                            item.span,
                            "put in a `List`",
                        ));
                        continue;
                    }
                    self.expect(item.span, &t, &elem);
                }
                Ty::List(Box::new(elem))
            }
            ExprKind::StructLit { path, fields } => self.struct_literal(e, path, fields),
            ExprKind::Path(path) if self.names_none(path) => {
                // `None` of the option type the context asks for.
                let inner = match hint.map(|h| self.shallow(h)) {
                    Some(Ty::Option(t)) => *t,
                    _ => self.fresh(false),
                };
                self.pending_nones.push((inner.clone(), e.span));
                self.resolutions
                    .insert(e.id, Resolution::Builtin(Builtin::None));
                self.refer(path.span, Target::Builtin(Builtin::None));
                self.facts.add_call(Callee::Builtin(Builtin::None));
                Ty::Option(Box::new(inner))
            }
            ExprKind::Path(path) => {
                let Some((t, resolution)) = self.path_value(path) else {
                    return Ty::Error;
                };
                self.resolutions.insert(e.id, resolution);
                t
            }
            ExprKind::Placeholder => Ty::Error,
            ExprKind::Call { callee, args } => self.call(e, callee, args, false),
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => self.method_call(e, receiver, method, args),
            ExprKind::Field { base, name } => {
                let base_ty = self.infer(base, None);
                if name.name == COMPLETION_MARKER {
                    let receiver = self.shallow(&base_ty);
                    self.completion_here(Some(receiver));
                    return Ty::Error;
                }
                match self.shallow(&base_ty) {
                    Ty::Struct(item) => {
                        let def = struct_def(self.db, item);
                        match def.fields.iter().find(|f| f.name == name.name) {
                            Some(f) => {
                                let target = Target::Field {
                                    owner: item,
                                    name: name.name.clone(),
                                };
                                self.refer(name.span, target);
                                f.ty.clone()
                            }
                            None => {
                                let similar =
                                    closest(&name.name, def.fields.iter().map(|f| f.name.as_str()));
                                let d = diag::no_field(
                                    self.item,
                                    name.span,
                                    item.name(self.db),
                                    &name.name,
                                    similar,
                                );
                                self.diagnostics.push(d);
                                Ty::Error
                            }
                        }
                    }
                    Ty::Error | Ty::Never => Ty::Error,
                    other => {
                        let d = diag::field_access(self.item, name.span, &self.display(&other));
                        self.diagnostics.push(d);
                        Ty::Error
                    }
                }
            }
            ExprKind::Index { base, index } => {
                let base_ty = self.infer(base, None);
                let index_ty = self.infer(index, None);
                let int = self.fresh(true);
                if !self.unify(&index_ty, &int) {
                    let d = diag::mismatch(self.item, index.span, "i64", &self.display(&index_ty))
                        .with_help("a list is indexed with an integer");
                    self.diagnostics.push(d);
                }
                match self.shallow(&base_ty) {
                    Ty::List(elem) => *elem,
                    Ty::Error | Ty::Never => Ty::Error,
                    other => {
                        let d = diag::indexing(self.item, base.span, &self.display(&other));
                        self.diagnostics.push(d);
                        Ty::Error
                    }
                }
            }
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            } => {
                if let ExprKind::Int(n) = operand.kind {
                    let t = self.int_literal(n, true, operand.span, hint);
                    self.expr_types
                        .insert(operand.id, (operand.span, t.clone()));
                    return t;
                }
                let t = self.infer(operand, hint);
                let resolved = self.shallow(&t);
                let numeric = resolved.is_numeric()
                    || matches!(resolved, Ty::Error | Ty::Never)
                    || matches!(resolved, Ty::Var(v) if self.vars[v as usize].int_only);
                if !numeric {
                    let d = diag::operator(self.item, e.span, "-", &self.display(&t), None);
                    self.diagnostics.push(d);
                    return Ty::Error;
                }
                t
            }
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => {
                let t = self.infer(operand, Some(&Ty::Bool));
                if !self.unify(&t, &Ty::Bool) {
                    let d = diag::operator(self.item, e.span, "!", &self.display(&t), None);
                    self.diagnostics.push(d);
                }
                Ty::Bool
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(e.span, *op, lhs, rhs, hint),
            ExprKind::Inject(inner) => {
                self.use_context(e.span, "injecting with `!`");
                let t = self.infer(inner, None);
                if matches!(self.shallow(&t), Ty::Context) {
                    self.diagnostics
                        .push(diag::context_injected(self.item, inner.span));
                }
                Ty::Unit
            }
            ExprKind::Paren(inner) => self.infer(inner, hint),
            ExprKind::Block(block) => self.check_block(block, hint),
            ExprKind::If {
                branches,
                else_block,
            } => {
                let mut result: Option<Ty<'db>> = None;
                let mut all_diverge = else_block.is_some();
                for branch in branches {
                    self.condition(&branch.cond);
                    let t = self.check_block(&branch.body, hint.or(result.as_ref()));
                    all_diverge &= matches!(self.shallow(&t), Ty::Never);
                    if else_block.is_some() {
                        self.join_branch(&mut result, t, &branch.body);
                    }
                }
                match else_block {
                    Some(block) => {
                        let t = self.check_block(block, hint.or(result.as_ref()));
                        all_diverge &= matches!(self.shallow(&t), Ty::Never);
                        self.join_branch(&mut result, t, block);
                        if all_diverge {
                            Ty::Never
                        } else {
                            result.unwrap_or(Ty::Unit)
                        }
                    }
                    None => Ty::Unit,
                }
            }
            ExprKind::Select { arms } => self.select(e.span, arms, hint),
            ExprKind::ParallelFor { var, iter, body } => {
                let elem = self.iterable(iter);
                let captures = self.visible_local_ids();
                self.captures.insert(e.id, captures);
                self.loops.push(LoopKind::Parallel);
                self.parallel_depth += 1;
                self.push_scope();
                let local = self.declare(&var.name, elem, var.span, LocalKind::Let);
                self.declared.insert(iter.id, local);
                let hint_elem = match hint.map(|h| self.shallow(h)) {
                    Some(Ty::List(elem)) => Some(*elem),
                    _ => None,
                };
                let value = self.check_block(body, hint_elem.as_ref());
                self.pop_scope();
                self.parallel_depth -= 1;
                self.loops.pop();
                Ty::List(Box::new(value))
            }
        }
    }

    /// Adds one branch's type to an `if`/`else`'s type; branches must agree.
    fn join_branch(&mut self, result: &mut Option<Ty<'db>>, t: Ty<'db>, block: &ast::Block) {
        match result {
            None => *result = Some(t),
            Some(first) => {
                let first = first.clone();
                if matches!(self.shallow(&first), Ty::Never) {
                    *result = Some(t);
                } else if !self.unify(&t, &first) {
                    let span = block_tail(block).map_or(block.span, |e| e.span);
                    let d = diag::mismatch(
                        self.item,
                        span,
                        &self.display(&first),
                        &self.display(&t),
                    )
                    .with_help(
                        "every branch of an `if`/`else` must produce a value of the same type",
                    );
                    self.diagnostics.push(d);
                }
            }
        }
    }

    fn int_literal(
        &mut self,
        n: u64,
        negated: bool,
        span: Span,
        hint: Option<&Ty<'db>>,
    ) -> Ty<'db> {
        let t = match hint.map(|h| self.shallow(h)) {
            Some(t @ (Ty::I32 | Ty::I64)) => t,
            Some(Ty::Var(v)) if self.vars[v as usize].int_only => Ty::Var(v),
            _ => self.fresh(true),
        };
        self.pending_ints.push((t.clone(), n, negated, span));
        t
    }

    fn binary(
        &mut self,
        span: Span,
        op: BinaryOp,
        lhs: &Expr,
        rhs: &Expr,
        hint: Option<&Ty<'db>>,
    ) -> Ty<'db> {
        match op {
            BinaryOp::And | BinaryOp::Or => {
                for side in [lhs, rhs] {
                    let t = self.infer(side, Some(&Ty::Bool));
                    if !self.unify(&t, &Ty::Bool) {
                        let d = diag::operator(
                            self.item,
                            side.span,
                            op.as_str(),
                            &self.display(&t),
                            None,
                        );
                        self.diagnostics.push(d);
                    }
                }
                Ty::Bool
            }
            BinaryOp::Eq | BinaryOp::Ne => {
                let l = self.infer(lhs, None);
                let r = self.infer(rhs, Some(&l));
                for (t, side) in [(&l, lhs), (&r, rhs)] {
                    if matches!(self.shallow(t), Ty::Context) {
                        self.diagnostics
                            .push(diag::context_misuse(self.item, side.span, "compared"));
                        return Ty::Bool;
                    }
                }
                if !self.unify(&l, &r) {
                    let d = diag::operator(
                        self.item,
                        span,
                        op.as_str(),
                        &self.display(&l),
                        Some(&self.display(&r)),
                    );
                    self.diagnostics.push(d);
                    return Ty::Bool;
                }
                let comparable = matches!(
                    self.shallow(&l),
                    Ty::I32
                        | Ty::I64
                        | Ty::F64
                        | Ty::Bool
                        | Ty::String
                        | Ty::Enum(_)
                        | Ty::Unit
                        | Ty::Error
                        | Ty::Never
                        | Ty::Var(_)
                );
                if !comparable {
                    let d = diag::operator(
                        self.item,
                        span,
                        op.as_str(),
                        &self.display(&l),
                        Some(&self.display(&r)),
                    );
                    self.diagnostics.push(d);
                }
                Ty::Bool
            }
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let l = self.infer(lhs, None);
                let r = self.infer(rhs, Some(&l));
                let ok = self.unify(&l, &r) && {
                    let t = self.shallow(&l);
                    t.is_numeric()
                        || matches!(t, Ty::String | Ty::Error | Ty::Never)
                        || matches!(t, Ty::Var(v) if self.vars[v as usize].int_only)
                };
                if !ok {
                    let d = diag::operator(
                        self.item,
                        span,
                        op.as_str(),
                        &self.display(&l),
                        Some(&self.display(&r)),
                    );
                    self.diagnostics.push(d);
                }
                Ty::Bool
            }
            _ => {
                let l = self.infer(lhs, hint);
                let r = self.infer(rhs, Some(&l));
                self.arithmetic(span, op, &l, &r)
            }
        }
    }

    /// The result type of `l op r` for `+ - * / %`.
    fn arithmetic(&mut self, span: Span, op: BinaryOp, l: &Ty<'db>, r: &Ty<'db>) -> Ty<'db> {
        let same = self.unify(l, r);
        let t = self.shallow(l);
        let ok = same
            && (t.is_numeric()
                || matches!(t, Ty::Error | Ty::Never)
                || matches!(t, Ty::Var(v) if self.vars[v as usize].int_only)
                || (op == BinaryOp::Add && t == Ty::String));
        if !ok {
            let d = diag::operator(
                self.item,
                span,
                op.as_str(),
                &self.display(l),
                Some(&self.display(r)),
            );
            self.diagnostics.push(d);
            return Ty::Error;
        }
        t
    }

    /// Whether `path` is the value `None`: the name, unless a local or an item takes it.
    fn names_none(&self, path: &ast::Path) -> bool {
        matches!(path.segments.as_slice(), [one] if one.name == "None")
            && self.lookup_local("None").is_none()
            && self.resolver.lookup_value("None").is_none()
    }

    /// The type of the value `path` names and what it names; `None` (reported here) when
    /// it names nothing.
    fn path_value(&mut self, path: &ast::Path) -> Option<(Ty<'db>, Resolution<'db>)> {
        let db = self.db;
        if let [one] = path.segments.as_slice() {
            if one.name == COMPLETION_MARKER {
                self.completion_here(None);
                return None;
            }
            if let Some(id) = self.lookup_local(&one.name) {
                self.locals[id].used = true;
                self.refer_local(one.span, id);
                return Some((
                    self.locals[id].ty.clone(),
                    Resolution::Local(LocalId(id as u32)),
                ));
            }
            match self.resolver.lookup_value(&one.name) {
                Some(def) => {
                    self.refer(one.span, Self::value_target(def));
                    return Some((Ty::Tool, Self::value_resolution(def)));
                }
                None if self.resolver.is_broken(&one.name) => return None,
                None => {
                    if self.resolver.lookup_type_path(path).is_some() || is_builtin_type(&one.name)
                    {
                        let d = diag::not_a_value(
                            self.item,
                            path.span,
                            &format!("the type `{}`", one.name),
                        );
                        self.diagnostics.push(d);
                        return None;
                    }
                    let locals: Vec<&str> = self.visible_locals();
                    let similar = self.resolver.similar_value_names(&one.name, &locals);
                    let d = diag::unresolved_name(self.item, one.span, &one.name, similar);
                    self.diagnostics.push(d);
                    return None;
                }
            }
        }
        // `Enum::Variant`, `module::function`.
        if let [first, second] = path.segments.as_slice() {
            let enum_path = ast::Path {
                segments: vec![first.clone()],
                span: first.span,
            };
            if let Some(TypeDef::Item(item)) = self.resolver.lookup_type_path(&enum_path) {
                let enum_item = match item.kind(db) {
                    ItemKind::Enum => Some(item),
                    ItemKind::TypeAlias => match &alias_def(db, item).0 {
                        Ty::Enum(e) => Some(*e),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(enum_item) = enum_item {
                    self.refer(first.span, Target::Item(item));
                    let def = enum_def(db, enum_item);
                    if let Some(index) = def.variants.iter().position(|(v, _)| *v == second.name) {
                        let target = Target::Variant {
                            owner: enum_item,
                            name: second.name.clone(),
                        };
                        self.refer(second.span, target);
                        let resolution = Resolution::Variant {
                            owner: enum_item,
                            index: index as u32,
                        };
                        return Some((Ty::Enum(enum_item), resolution));
                    }
                    let similar =
                        closest(&second.name, def.variants.iter().map(|(v, _)| v.as_str()));
                    let d = diag::no_variant(
                        self.item,
                        second.span,
                        enum_item.name(db),
                        &second.name,
                        similar,
                    );
                    self.diagnostics.push(d);
                    return None;
                }
            }
            if first.name == "Context" {
                let d =
                    diag::not_a_value(self.item, path.span, &format!("`Context::{}`", second.name))
                        .with_help("create a context with `Context::new()`");
                self.diagnostics.push(d);
                return None;
            }
            if self.resolver.is_module(&first.name) {
                if let Some(def) = self.resolver.lookup_value_path(path) {
                    self.refer(second.span, Self::value_target(def));
                    return Some((Ty::Tool, Self::value_resolution(def)));
                }
                let d = diag::unresolved_name(self.item, second.span, &path.text(), None);
                self.diagnostics.push(d);
                return None;
            }
        }
        let d = diag::unresolved_name(self.item, path.span, &path.text(), None);
        self.diagnostics.push(d);
        None
    }

    /// The locals a name could reach here: every one in scope but a shadowed one, in the
    /// order they were declared.
    fn visible_local_ids(&self) -> Vec<LocalId> {
        let mut visible: Vec<usize> = Vec::new();
        for &id in self.scopes.iter().flatten() {
            visible.retain(|&v| self.locals[v].name != self.locals[id].name);
            visible.push(id);
        }
        visible.into_iter().map(|id| LocalId(id as u32)).collect()
    }

    fn visible_locals(&self) -> Vec<&str> {
        self.scopes
            .iter()
            .flatten()
            .map(|&id| self.locals[id].name.as_str())
            .collect()
    }

    fn struct_literal(&mut self, e: &Expr, path: &ast::Path, fields: &[ast::FieldInit]) -> Ty<'db> {
        let db = self.db;
        let span = e.span;
        let item = match self.resolver.lookup_type_path(path) {
            Some(TypeDef::Item(item)) => match item.kind(db) {
                ItemKind::Struct => Some(item),
                ItemKind::TypeAlias => match &alias_def(db, item).0 {
                    Ty::Struct(s) => Some(*s),
                    _ => None,
                },
                _ => None,
            },
            None => None,
        };
        let Some(item) = item else {
            for f in fields {
                if let Some(v) = &f.value {
                    self.infer(v, None);
                }
            }
            let name = path.text();
            let d = if self.resolver.lookup_type_path(path).is_some() {
                diag::struct_literal(
                    self.item,
                    path.span,
                    format!("`{name}` is not a struct"),
                    "not a struct",
                )
            } else {
                diag::unresolved_type(
                    self.item,
                    path.span,
                    &name,
                    self.resolver.similar_type_names(&name),
                )
            };
            self.diagnostics.push(d);
            return Ty::Error;
        };
        let def = struct_def(db, item);
        self.refer(path.last().span, Target::Item(item));
        let mut seen: Vec<&str> = Vec::new();
        let mut shorthands = Vec::new();
        for (index, f) in fields.iter().enumerate() {
            let field = def.fields.iter().find(|d| d.name == f.name.name);
            if field.is_some() {
                let target = Target::Field {
                    owner: item,
                    name: f.name.name.clone(),
                };
                self.refer(f.name.span, target);
            }
            let expected = field.map(|d| d.ty.clone());
            let found = match &f.value {
                Some(v) => {
                    let t = self.infer(v, expected.as_ref());
                    (t, v.span)
                }
                None => {
                    let path = ast::Path {
                        segments: vec![f.name.clone()],
                        span: f.name.span,
                    };
                    let t = match self.path_value(&path) {
                        Some((t, resolution)) => {
                            shorthands.push((index as u32, resolution));
                            t
                        }
                        None => Ty::Error,
                    };
                    (t, f.name.span)
                }
            };
            match expected {
                Some(expected) => self.expect(found.1, &found.0, &expected),
                None => {
                    let similar = closest(&f.name.name, def.fields.iter().map(|d| d.name.as_str()));
                    let d = diag::no_field(
                        self.item,
                        f.name.span,
                        item.name(db),
                        &f.name.name,
                        similar,
                    );
                    self.diagnostics.push(d);
                }
            }
            if seen.contains(&f.name.name.as_str()) {
                let d = diag::struct_literal(
                    self.item,
                    f.name.span,
                    format!("the field `{}` is given twice", f.name.name),
                    "given again",
                );
                self.diagnostics.push(d);
            }
            seen.push(&f.name.name);
        }
        if !shorthands.is_empty() {
            self.shorthands.insert(e.id, shorthands);
        }
        let missing: Vec<String> = def
            .fields
            .iter()
            .filter(|d| !seen.contains(&d.name.as_str()))
            .map(|d| format!("`{}`", d.name))
            .collect();
        if !missing.is_empty() {
            let plural = if missing.len() == 1 {
                "field"
            } else {
                "fields"
            };
            let d = diag::struct_literal(
                self.item,
                span,
                format!(
                    "missing {plural} {} in `{}`",
                    missing.join(", "),
                    item.name(db)
                ),
                "incomplete",
            )
            .with_help("every field of a struct must be given");
            self.diagnostics.push(d);
        }
        Ty::Struct(item)
    }

    fn method_call(
        &mut self,
        call: &Expr,
        receiver: &Expr,
        method: &ast::Ident,
        args: &[Expr],
    ) -> Ty<'db> {
        let Some(def) = self.resolver.lookup_value(&method.name) else {
            self.infer(receiver, None);
            for a in args {
                self.infer(a, None);
            }
            if !self.resolver.is_broken(&method.name) {
                self.diagnostics
                    .push(diag::no_method(self.item, method.span, &method.name));
            }
            return Ty::Error;
        };
        let mut all_args: Vec<&Expr> = vec![receiver];
        all_args.extend(args);
        self.refer(method.span, Self::value_target(def));
        self.call_resolved(call, def, &method.name, &all_args, false)
    }

    /// `callee(args)`; `in_select` when it is a `select` arm's call.
    fn call(&mut self, call: &Expr, callee: &Expr, args: &[Expr], in_select: bool) -> Ty<'db> {
        let span = call.span;
        let ExprKind::Path(path) = &callee.kind else {
            self.infer(callee, None);
            for a in args {
                self.infer(a, None);
            }
            self.diagnostics.push(diag::not_callable(
                self.item,
                callee.span,
                "this expression",
            ));
            return Ty::Error;
        };
        let text = path.text();
        if text == "Context::new" {
            self.facts.creates_context = true;
            if !args.is_empty() {
                self.diagnostics
                    .push(diag::arity(self.item, span, "Context::new", 0, args.len()));
            }
            return Ty::Context;
        }
        if let [one] = path.segments.as_slice()
            && let Some(id) = self.lookup_local(&one.name)
        {
            self.locals[id].used = true;
            for a in args {
                self.infer(a, None);
            }
            let what = format!(
                "`{}`, a variable of type `{}`,",
                one.name,
                self.display(&self.locals[id].ty.clone())
            );
            let mut d = diag::not_callable(self.item, callee.span, &what);
            if self.locals[id].ty == Ty::Tool {
                d = d.with_help(
                    "a `Tool` value is called by the `aot` prelude with arguments the model writes",
                );
            }
            self.diagnostics.push(d);
            return Ty::Error;
        }
        let Some(def) = self.resolver.lookup_value_path(path) else {
            for a in args {
                self.infer(a, None);
            }
            if self.resolver.is_broken(&text) {
                return Ty::Error;
            }
            if self.resolver.lookup_type_path(path).is_some() || path.segments.len() == 2 {
                let d = diag::not_callable(self.item, callee.span, &format!("`{text}`"));
                self.diagnostics.push(d);
            } else {
                let locals = self.visible_locals();
                let similar = self.resolver.similar_value_names(&text, &locals);
                let d = diag::unresolved_name(self.item, path.span, &text, similar);
                self.diagnostics.push(d);
            }
            return Ty::Error;
        };
        let all_args: Vec<&Expr> = args.iter().collect();
        self.refer(path.last().span, Self::value_target(def));
        self.call_resolved(call, def, &text, &all_args, in_select)
    }

    /// Checks the arguments of a call to a resolved function against its signature.
    fn call_resolved(
        &mut self,
        call: &Expr,
        def: ValueDef<'db>,
        name: &str,
        args: &[&Expr],
        in_select: bool,
    ) -> Ty<'db> {
        let db = self.db;
        let span = call.span;
        let callee = match def {
            ValueDef::Item(item) => Callee::Item(item),
            ValueDef::Builtin(b) => Callee::Builtin(b),
        };
        self.callees.insert(call.id, callee);
        let (params, ret, callee_takes_context): (Vec<(String, Ty<'db>)>, Ty<'db>, bool) = match def
        {
            ValueDef::Item(item) => {
                self.facts.add_call(Callee::Item(item));
                let sig = fn_signature(db, item);
                let params = sig
                    .params
                    .iter()
                    .map(|p| (p.name.clone(), p.ty.clone()))
                    .collect();
                (params, sig.ret.clone(), sig.context_param.is_some())
            }
            ValueDef::Builtin(b) => {
                self.facts.add_call(Callee::Builtin(b));
                if b == Builtin::Len && args.len() == 1 {
                    return self.len_call(args[0]);
                }
                if b == Builtin::Contains && args.len() == 2 {
                    return self.contains_call(args[0], args[1]);
                }
                let sig = b.signature();
                let vars: Vec<Ty<'db>> = (0..sig.generics).map(|_| self.fresh(false)).collect();
                let params = sig
                    .params
                    .iter()
                    .map(|(n, t)| ((*n).to_owned(), instantiate(t, &vars)))
                    .collect();
                (params, instantiate(&sig.ret, &vars), false)
            }
        };
        if callee_takes_context && ret == Ty::Bool {
            self.llm_bool_calls += 1;
        }
        if args.len() != params.len() {
            self.diagnostics
                .push(diag::arity(self.item, span, name, params.len(), args.len()));
        }
        for (i, arg) in args.iter().enumerate() {
            let param = params.get(i);
            if matches!(arg.kind, ExprKind::Placeholder) {
                if !in_select {
                    self.use_context(arg.span, "the placeholder `_`");
                }
                if let Some((pname, Ty::Context)) = param {
                    self.diagnostics
                        .push(diag::context_placeholder(self.item, arg.span, pname));
                }
                let ty = param.map_or(Ty::Error, |p| p.1.clone());
                self.expr_types.insert(arg.id, (arg.span, ty));
                continue;
            }
            let expected = param.map(|p| p.1.clone());
            let found = self.infer(arg, expected.as_ref());
            if matches!(def, ValueDef::Builtin(_)) && matches!(self.shallow(&found), Ty::Context) {
                let d = diag::context_misuse(self.item, arg.span, &format!("passed to `{name}`"));
                self.diagnostics.push(d);
                continue;
            }
            if let Some(expected) = expected {
                self.expect(arg.span, &found, &expected);
            }
        }
        ret
    }

    /// `len` takes a `List<T>` or a `String`.
    fn len_call(&mut self, arg: &Expr) -> Ty<'db> {
        let t = self.infer(arg, None);
        match self.shallow(&t) {
            Ty::String | Ty::List(_) | Ty::Error | Ty::Never => {}
            _ => {
                let elem = self.fresh(false);
                if !self.unify(&t, &Ty::List(Box::new(elem))) {
                    let d = diag::mismatch(self.item, arg.span, "List<_>", &self.display(&t))
                        .with_help("`len` takes a `List` or a `String`");
                    self.diagnostics.push(d);
                }
            }
        }
        Ty::I64
    }

    /// `contains(text, part)` on strings, `contains(xs, x)` on lists.
    fn contains_call(&mut self, whole: &Expr, part: &Expr) -> Ty<'db> {
        let t = self.infer(whole, None);
        let part_ty = match self.shallow(&t) {
            Ty::String => Ty::String,
            Ty::Error | Ty::Never => Ty::Error,
            _ => {
                let elem = self.fresh(false);
                if !self.unify(&t, &Ty::List(Box::new(elem.clone()))) {
                    let d = diag::mismatch(self.item, whole.span, "List<_>", &self.display(&t))
                        .with_help("`contains` takes a `List` and an element, or two `String`s");
                    self.diagnostics.push(d);
                }
                elem
            }
        };
        let u = self.infer(part, Some(&part_ty));
        self.expect(part.span, &u, &part_ty);
        Ty::Bool
    }

    fn select(&mut self, span: Span, arms: &[ast::SelectArm], hint: Option<&Ty<'db>>) -> Ty<'db> {
        self.use_context(span, "`select`");
        if arms.len() == 1 {
            self.diagnostics.push(diag::one_arm_select(self.item, span));
        }
        let mut result: Option<(Ty<'db>, Span)> = None;
        for arm in arms {
            let call_ty = match &arm.call.kind {
                ExprKind::Call { callee, args } => self.call(&arm.call, callee, args, true),
                ExprKind::MethodCall {
                    receiver,
                    method,
                    args,
                } => match self.resolver.lookup_value(&method.name) {
                    Some(def) => {
                        self.refer(method.span, Self::value_target(def));
                        let mut all: Vec<&Expr> = vec![receiver];
                        all.extend(args);
                        self.call_resolved(&arm.call, def, &method.name, &all, true)
                    }
                    None => {
                        self.diagnostics.push(diag::no_method(
                            self.item,
                            method.span,
                            &method.name,
                        ));
                        Ty::Error
                    }
                },
                _ => Ty::Error,
            };
            self.expr_types
                .insert(arm.call.id, (arm.call.span, call_ty.clone()));
            self.push_scope();
            if let Some(binding) = &arm.binding {
                let local = self.declare(&binding.name, call_ty, binding.span, LocalKind::Let);
                self.declared.insert(arm.call.id, local);
            }
            let expected = hint
                .cloned()
                .or_else(|| result.as_ref().map(|r| r.0.clone()));
            let t = self.infer(&arm.body, expected.as_ref());
            self.pop_scope();
            match &result {
                None => result = Some((t, arm.body.span)),
                Some((first, first_span)) => {
                    let (first, first_span) = (first.clone(), *first_span);
                    if !self.unify(&t, &first) {
                        let d = diag::select_arms(
                            self.item,
                            arm.body.span,
                            &self.display(&first),
                            &self.display(&t),
                            first_span,
                        );
                        self.diagnostics.push(d);
                    }
                }
            }
        }
        result.map_or(Ty::Error, |r| r.0)
    }

    // ------------------------------------------------------------ finishing

    /// A type after inference, with unknowns as `Error`.
    fn resolve_final(&self, t: &Ty<'db>) -> Ty<'db> {
        let t = self.resolve(t);
        if matches!(t, Ty::Var(_)) {
            Ty::Error
        } else {
            t
        }
    }

    fn refer(&mut self, span: Span, target: Target<'db>) {
        self.references.push(Reference { span, target });
    }

    fn refer_local(&mut self, span: Span, id: usize) {
        let target = Target::Local {
            local: LocalId(id as u32),
            decl: self.locals[id].span,
        };
        self.refer(span, target);
    }

    fn value_resolution(def: ValueDef<'db>) -> Resolution<'db> {
        match def {
            ValueDef::Item(item) => Resolution::Item(item),
            ValueDef::Builtin(b) => Resolution::Builtin(b),
        }
    }

    fn value_target(def: ValueDef<'db>) -> Target<'db> {
        match def {
            ValueDef::Item(item) => Target::Item(item),
            ValueDef::Builtin(b) => Target::Builtin(b),
        }
    }

    /// At the completion marker: remember what is in scope.
    fn completion_here(&mut self, receiver: Option<Ty<'db>>) {
        let locals = self
            .scopes
            .iter()
            .flatten()
            .map(|&id| LocalInfo {
                name: self.locals[id].name.clone(),
                ty: self.locals[id].ty.clone(),
                decl: self.locals[id].span,
            })
            .collect();
        self.completion = Some(CompletionSite { locals, receiver });
    }

    fn finish(mut self, params: &[ast::Param], is_llm_function: bool) -> BodyResult<'db> {
        let _ = params;
        // Parameters are in the outermost scope.
        self.pop_scope();
        // Integer literals: unconstrained ones are `i32`; every one must fit its type.
        for i in 0..self.vars.len() {
            if self.vars[i].int_only && self.shallow(&Ty::Var(i as u32)) == Ty::Var(i as u32) {
                self.vars[i].binding = Some(Ty::I32);
            }
        }
        for (t, n, negated, span) in std::mem::take(&mut self.pending_ints) {
            let (name, max) = match self.resolve(&t) {
                Ty::I32 => ("i32", i32::MAX as u64),
                Ty::I64 => ("i64", i64::MAX as u64),
                _ => continue,
            };
            let limit = if negated { max + 1 } else { max };
            if n > limit {
                self.diagnostics
                    .push(diag::int_range(self.item, span, name));
            }
        }
        for (t, span) in std::mem::take(&mut self.pending_lists) {
            if let Ty::Var(_) = self.resolve(&t) {
                let d = diag::mismatch(self.item, span, "List<T>", "List<_>")
                    .with_help("the element type of this empty list cannot be inferred; write `let xs: List<String> = []`");
                self.diagnostics.push(d);
            }
        }
        for (t, span) in std::mem::take(&mut self.pending_nones) {
            if let Ty::Var(_) = self.resolve(&t) {
                let d = diag::mismatch(self.item, span, "Option<T>", "Option<_>")
                    .with_help("the type of this `None` cannot be inferred; write `let x: Option<String> = None`");
                self.diagnostics.push(d);
            }
        }
        let expr_types = std::mem::take(&mut self.expr_types).map(|(span, t)| ExprType {
            span,
            ty: self.resolve_final(&t),
        });
        let locals = self
            .locals
            .iter()
            .map(|l| LocalData {
                name: l.name.clone(),
                ty: self.resolve_final(&l.ty),
                decl: l.span,
            })
            .collect();
        let completion = self.completion.take().map(|c| CompletionSite {
            locals: c
                .locals
                .into_iter()
                .map(|l| LocalInfo {
                    ty: self.resolve_final(&l.ty),
                    ..l
                })
                .collect(),
            receiver: c.receiver.map(|t| self.resolve_final(&t)),
        });
        let mut diagnostics = self.diagnostics;
        diagnostics.sort_by_key(|d| (d.diagnostic.span.start, d.diagnostic.span.end));
        BodyResult {
            diagnostics,
            expr_types,
            locals,
            resolutions: self.resolutions,
            callees: self.callees,
            declared: self.declared,
            assigned: self.assigned,
            shorthands: self.shorthands,
            captures: self.captures,
            facts: self.facts,
            is_llm_function,
            references: self.references,
            completion,
        }
    }
}

fn instantiate<'db>(t: &Ty<'db>, vars: &[Ty<'db>]) -> Ty<'db> {
    match t {
        Ty::Param(i) => vars[*i as usize].clone(),
        Ty::List(inner) => Ty::List(Box::new(instantiate(inner, vars))),
        Ty::Option(inner) => Ty::Option(Box::new(instantiate(inner, vars))),
        other => other.clone(),
    }
}

fn is_builtin_type(name: &str) -> bool {
    matches!(
        name,
        "i32"
            | "i64"
            | "f64"
            | "Boolean"
            | "bool"
            | "String"
            | "Json"
            | "Tool"
            | "Context"
            | "List"
            | "Option"
    )
}

/// The block's final expression, when it is one that gives the block its value.
fn block_tail(block: &ast::Block) -> Option<&Expr> {
    match block.stmts.last().map(|s| &s.kind) {
        Some(StmtKind::Expr(e)) if !matches!(e.kind, ExprKind::Inject(_)) => Some(e),
        _ => None,
    }
}

/// An `if` without `else` has no value: a function ending with one can end without one.
fn is_valueless_if(e: &Expr) -> bool {
    matches!(
        &e.kind,
        ExprKind::If {
            else_block: None,
            ..
        }
    )
}

/// `"text"!` as a statement: the literal and its span.
fn injected_literal(stmt: &Stmt) -> Option<(&str, Span)> {
    match &stmt.kind {
        StmtKind::Expr(Expr {
            kind: ExprKind::Inject(inner),
            span,
            ..
        }) => match &inner.kind {
            ExprKind::Str(s) => Some((s.as_str(), *span)),
            _ => None,
        },
        _ => None,
    }
}

/// A `while` condition that also compares numbers (`steps < 10 && …`) is bounded by the
/// program, not only by the model.
fn has_deterministic_bound(cond: &Expr) -> bool {
    match &cond.kind {
        ExprKind::Binary {
            op: BinaryOp::And,
            lhs,
            rhs,
        } => has_deterministic_bound(lhs) || has_deterministic_bound(rhs),
        ExprKind::Binary {
            op: BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge,
            ..
        } => true,
        ExprKind::Paren(inner) => has_deterministic_bound(inner),
        _ => false,
    }
}
