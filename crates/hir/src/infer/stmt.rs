//! Blocks and statements: `let`, assignment, `return`, `break`/`continue`, `while`, `for`,
//! unreachable code, and the type of a block's value.

use syntax::Span;
use syntax::ast::{self, BinaryOp, Expr, ExprKind, Stmt, StmtKind};

use super::context_rules::has_deterministic_bound;
use super::ide::Target;
use super::{Checker, LocalKind, LoopKind};
use crate::body::LocalId;
use crate::defs::fn_signature;
use crate::diagnostics as diag;
use crate::infer::check_body;
use crate::items::ItemKind;
use crate::resolve::ValueDef;
use crate::ty::Ty;
use crate::type_lowering::TypeLowering;

impl<'a, 'db> Checker<'a, 'db> {
    /// A block in its own scope; its value type.
    pub(super) fn check_block(&mut self, block: &ast::Block, hint: Option<&Ty<'db>>) -> Ty<'db> {
        self.push_scope();
        let (value, diverges) = self.check_block_inner(block, hint);
        self.pop_scope();
        if diverges { Ty::Never } else { value }
    }

    /// Checks statements in the current scope; returns (tail value type, diverges).
    pub(super) fn check_block_inner(
        &mut self,
        block: &ast::Block,
        hint: Option<&Ty<'db>>,
    ) -> (Ty<'db>, bool) {
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

    pub(super) fn check_stmt(&mut self, stmt: &Stmt) -> Ty<'db> {
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
                    self.model_loops.push(cond.id);
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
            StmtKind::Assert { cond, message } => {
                self.condition(cond);
                if let Some(m) = message {
                    let t = self.infer(m, Some(&Ty::String));
                    self.expect(m.span, &t, &Ty::String);
                }
                Ty::Unit
            }
            StmtKind::Given(g) => {
                self.given(stmt.span, g);
                Ty::Unit
            }
        }
    }

    /// `given f(…) => answer` or `given f { … }`: `f` must be a function whose answers
    /// the model gives, each answer must have the type the model's would, and each
    /// `select`/`fill` must name a decision `f` makes.
    fn given(&mut self, span: Span, g: &ast::Given) {
        let db = self.db;
        if !self.in_test {
            self.diagnostics
                .push(diag::given_outside_test(self.item, span));
            return;
        }
        let name = g.function.text();
        let Some(def) = self.resolver.lookup_value_path(&g.function) else {
            if !self.resolver.is_broken(&name) {
                let similar = self.resolver.similar_value_names(&name, &[]);
                let d = diag::unresolved_name(self.item, g.function.span, &name, similar);
                self.diagnostics.push(d);
            }
            return;
        };
        self.refer(g.function.last().span, Self::value_target(def));
        let function = match def {
            ValueDef::Item(item) if item.kind(db) == ItemKind::Fn => item,
            _ => {
                self.diagnostics.push(diag::given_not_model(
                    self.item,
                    g.function.span,
                    &name,
                    "it is not a sap function (externs and standard externs run on the host)",
                ));
                return;
            }
        };
        let sig = fn_signature(db, function);
        let is_llm = check_body(db, function).is_llm_function;
        let not_llm = |cx: &mut Self, at: Span| {
            cx.diagnostics.push(diag::given_not_model(
                cx.item,
                at,
                &name,
                "its body gives its result on every path",
            ));
        };
        match &g.answers {
            ast::GivenAnswers::Stub { params, answer } => {
                if !is_llm {
                    not_llm(self, g.function.span);
                }
                if params.len() != sig.params.len() {
                    self.diagnostics.push(diag::given_params(
                        self.item,
                        g.function.span.to(answer.span),
                        &name,
                        sig.params.len(),
                        params.len(),
                    ));
                }
                // The answer sees the parameters, and nothing of the test: it is
                // computed when `f` is called.
                let outer = std::mem::replace(&mut self.scopes, vec![Vec::new()]);
                let locals = params
                    .iter()
                    .zip(sig.params.iter().map(Some).chain(std::iter::repeat(None)))
                    .map(|(p, sp)| {
                        let p = p.as_ref()?;
                        let ty = sp.map_or(Ty::Error, |sp| sp.ty.clone());
                        let is_context = ty == Ty::Context;
                        let id = self.declare(&p.name, ty, p.span, LocalKind::Param { is_context });
                        // A stub has no context of its own to use.
                        self.locals[id.0 as usize].used |= is_context;
                        Some(id)
                    })
                    .collect();
                let found = self.infer(answer, Some(&sig.ret));
                self.expect(answer.span, &found, &sig.ret);
                self.pop_scope();
                self.scopes = outer;
                self.given_stubs.insert(
                    answer.id,
                    super::GivenStub {
                        function,
                        params: locals,
                    },
                );
            }
            ast::GivenAnswers::Script(answers) => {
                let ast::ItemKind::Fn(f) = &function.ast(db).kind else {
                    return;
                };
                let (clauses, fills) = syntax::visit::model_sites(&f.body);
                for a in answers {
                    let (e, sites, what) = match a {
                        ast::Scripted::Value(e) => {
                            if !is_llm {
                                not_llm(self, e.span);
                            }
                            let found = self.infer(e, Some(&sig.ret));
                            self.expect(e.span, &found, &sig.ret);
                            self.given_scripts.insert(e.id, function);
                            continue;
                        }
                        ast::Scripted::Select(e) => (e, &clauses, "select"),
                        ast::Scripted::Fill(e) => (e, &fills, "fill"),
                    };
                    self.given_scripts.insert(e.id, function);
                    let Some(callee) = syntax::visit::callee_name(e) else {
                        self.infer(e, None);
                        self.diagnostics.push(diag::given_no_site(
                            self.item,
                            e.span,
                            format!("`{what}` answers with a call: the function the model's choice calls, and its arguments"),
                            format!("write it as `{what} g(…)`"),
                        ));
                        continue;
                    };
                    self.infer(e, None);
                    let resolved = self.callees.get(e.id).is_some();
                    if resolved && !sites.iter().any(|s| s == callee) {
                        let (message, help) = if what == "select" {
                            (
                                format!("`{name}` has no `select` clause calling `{callee}`"),
                                if clauses.is_empty() {
                                    format!("`{name}` makes no `select`")
                                } else {
                                    format!("its clauses call {}", quoted(&clauses))
                                },
                            )
                        } else {
                            (
                                format!("`{name}` makes no call of `{callee}` with `_` arguments"),
                                if fills.is_empty() {
                                    format!("`{name}` leaves no argument to the model")
                                } else {
                                    format!("the model fills arguments of {}", quoted(&fills))
                                },
                            )
                        };
                        self.diagnostics
                            .push(diag::given_no_site(self.item, e.span, message, help));
                    }
                }
            }
        }
    }

    pub(super) fn condition(&mut self, cond: &Expr) {
        let t = self.infer(cond, Some(&Ty::Bool));
        if !self.unify(&t, &Ty::Bool) {
            let d = diag::condition(self.item, cond.span, &self.display(&t));
            self.diagnostics.push(d);
        }
    }

    /// The element type of a `for`/`parallel for` iterable.
    pub(super) fn iterable(&mut self, iter: &Expr) -> Ty<'db> {
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

    pub(super) fn lower_type(&mut self, t: &ast::TypeExpr) -> Ty<'db> {
        let mut lowering = TypeLowering::new(self.resolver, self.item);
        let ty = lowering.lower(t);
        self.diagnostics.extend(lowering.diagnostics);
        for (span, item) in lowering.references {
            self.refer(span, Target::Item(item));
        }
        ty
    }
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

/// `a`, `b` and `c`, each in backquotes, each once.
fn quoted(names: &[String]) -> String {
    let mut unique: Vec<&String> = Vec::new();
    for n in names {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    let items: Vec<String> = unique.iter().map(|n| format!("`{n}`")).collect();
    match items.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
