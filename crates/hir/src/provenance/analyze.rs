//! The walk over one function's body: each value's trust, joined over branches and
//! iterated over loops, checked at every call against the callee's `trusted`
//! parameters and summary.

use std::borrow::Cow;

use syntax::Span;
use syntax::ast::{self, Block, Expr, ExprKind, Stmt, StmtKind};
use syntax::binding::ExternBinding;

use super::taint::{Params, Taint};
use super::{Step, Summary, extern_summary, fn_summary, show_path};
use crate::Db;
use crate::body::{Callee, LocalId, Resolution};
use crate::builtins::Builtin;
use crate::defs::fn_signature;
use crate::diagnostics::{self as diag, HirDiagnostic};
use crate::infer::{BodyResult, check_body};
use crate::items::{Item, ItemKind, SourceFile};

struct Analyzer<'db> {
    db: &'db dyn Db,
    item: Item<'db>,
    name: &'db str,
    file: SourceFile,
    /// The function's name, for the steps its analysis records.
    item_name: std::sync::Arc<str>,
    body: &'db BodyResult<'db>,
    locals: Vec<Taint>,
    /// The context the function's injections go to and its model calls see.
    ctx: Option<LocalId>,
    /// Control dependence: what decided that the code here runs.
    pc: Taint,
    /// What decided a `return`, `break` or `continue` seen so far: the code after it
    /// runs only if that did not leave, so everything from there on depends on it.
    exits: Taint,
    /// Function references handed straight to a call as its arguments (`[pay]` in
    /// `aot::solve(ctx, task, [pay])`), checked there; any other use of a function with
    /// `trusted` parameters as a value is refused.
    handed: std::collections::HashSet<ast::ExprId>,
    ret: Taint,
    summary: Summary,
    diagnostics: Vec<HirDiagnostic<'db>>,
}

pub(super) fn analyze<'db>(db: &'db dyn Db, item: Item<'db>) -> (Summary, Vec<HirDiagnostic<'db>>) {
    let ast::ItemKind::Fn(f) = &item.ast(db).kind else {
        return Default::default();
    };
    let sig = fn_signature(db, item);
    let body = check_body(db, item);
    let mut a = Analyzer {
        db,
        item,
        name: item.name(db),
        file: item.file(db),
        item_name: item.name(db).as_str().into(),
        body,
        locals: vec![Taint::default(); body.locals.len()],
        ctx: sig.context_param.map(|i| LocalId(i as u32)),
        pc: Taint::default(),
        exits: Taint::default(),
        handed: Default::default(),
        ret: Taint::default(),
        summary: Summary::default(),
        diagnostics: Vec::new(),
    };
    // Each parameter starts as itself; a `trusted` one is a sink of its own.
    for (i, p) in sig.params.iter().enumerate() {
        if let Some(t) = a.locals.get_mut(i) {
            t.params = Params::one(i as u32);
        }
        if p.trusted {
            let sink = format!("`{}({}:)`", a.name, p.name);
            a.summary
                .sink_params
                .insert(i as u32, (Vec::new(), sink.clone()));
            a.summary.any_sink.get_or_insert((Vec::new(), sink));
        }
    }
    let tail = a.block(&f.body);
    a.ret.join(&tail.joined(&a.pc));
    if body.is_llm_function {
        // The model writes the result, from what its context holds.
        if let Some(ctx) = a.ctx {
            let answer = a.local(ctx);
            if !answer.is_clean() {
                let step = a.step(format!("the answer of `{}`", a.name), f.name.span);
                a.ret.join(&answer.then(&step));
            }
        }
    }
    let ret = std::mem::take(&mut a.ret);
    a.summary.ret_source = ret.source;
    a.summary.ret_params = ret.params;
    // A loop's body is walked until nothing changes: report each violation once.
    let mut seen = std::collections::HashSet::new();
    a.diagnostics.retain(|d| {
        seen.insert((
            d.diagnostic.span.start,
            d.diagnostic.code,
            d.diagnostic.message.clone(),
        ))
    });
    (a.summary, a.diagnostics)
}

impl<'db> Analyzer<'db> {
    fn step(&self, what: impl Into<Cow<'static, str>>, span: Span) -> Step {
        Step {
            what: what.into(),
            file: self.file,
            item: self.item_name.clone(),
            offset: span.start,
        }
    }

    fn local(&self, id: LocalId) -> Taint {
        self.locals.get(id.0 as usize).cloned().unwrap_or_default()
    }

    fn set(&mut self, id: LocalId, t: Taint) {
        if let Some(slot) = self.locals.get_mut(id.0 as usize) {
            *slot = t;
        }
    }

    fn ctx_taint(&self) -> Taint {
        self.ctx.map(|c| self.local(c)).unwrap_or_default()
    }

    fn block(&mut self, b: &Block) -> Taint {
        let mut value = Taint::default();
        for (i, stmt) in b.stmts.iter().enumerate() {
            let v = self.stmt(stmt);
            if i + 1 == b.stmts.len() {
                value = v;
            }
        }
        value
    }

    fn stmt(&mut self, s: &Stmt) -> Taint {
        match &s.kind {
            StmtKind::Let { init, .. } => {
                let t = self.expr(init).joined(&self.pc);
                if let Some(&local) = self.body.declared.get(init.id) {
                    self.set(local, t);
                }
                Taint::default()
            }
            StmtKind::Assign { op, value, .. } => {
                let t = self.expr(value).joined(&self.pc);
                if let Some(&local) = self.body.assigned.get(value.id) {
                    let t = if *op == ast::AssignOp::Assign {
                        t
                    } else {
                        self.local(local).joined(&t)
                    };
                    self.set(local, t);
                }
                Taint::default()
            }
            StmtKind::Return(e) => {
                let t = match e {
                    Some(e) => self.expr(e),
                    None => Taint::default(),
                };
                self.ret.join(&t.joined(&self.pc));
                self.leave_early("`return`", s.span);
                Taint::default()
            }
            StmtKind::Break => {
                self.leave_early("`break`", s.span);
                Taint::default()
            }
            StmtKind::Continue => {
                self.leave_early("`continue`", s.span);
                Taint::default()
            }
            // Tests are not analyzed (only functions are), and an assertion passes
            // nothing on.
            StmtKind::Assert { cond, .. } => {
                self.expr(cond);
                Taint::default()
            }
            StmtKind::Given(_) => Taint::default(),
            StmtKind::While { cond, body } => {
                self.repeat(|a| {
                    let c = a.expr(cond);
                    let step = a.step("decides a `while` loop", cond.span);
                    a.under(c.then_source(&step), |a| {
                        a.block(body);
                    });
                });
                Taint::default()
            }
            StmtKind::For { iter, body, .. } => {
                let t = self.expr(iter);
                let step = self.step("decides a `for` loop", iter.span);
                let var = self.body.declared.get(iter.id).copied();
                self.repeat(|a| {
                    if let Some(var) = var {
                        a.set(var, t.clone().joined(&a.pc));
                    }
                    a.under(t.clone().then_source(&step), |a| {
                        a.block(body);
                    });
                });
                Taint::default()
            }
            StmtKind::Expr(e) => self.expr(e),
        }
    }

    /// Runs `f` with `decided` added to what decides that code runs.
    fn under(&mut self, decided: Taint, f: impl FnOnce(&mut Self)) {
        let saved = self.pc.clone();
        self.pc.join(&decided);
        f(self);
        self.pc = saved.joined(&self.exits);
    }

    /// A `return`, `break` or `continue` here: if untrusted data decided that it runs,
    /// it decides whether the code after it runs, up to the end of the function
    /// (conservatively: a `break` only decides the rest of its loop and what follows).
    fn leave_early(&mut self, what: &str, span: Span) {
        if self.pc.is_clean() {
            return;
        }
        let step = self.step(format!("decides whether {what} leaves early"), span);
        let decided = self.pc.clone().then_source(&step);
        self.exits.join(&decided);
    }

    /// A loop: its body until the locals stop changing, each iteration's injections
    /// dropped at its end (a loop iteration is a context frame of its own).
    fn repeat(&mut self, mut f: impl FnMut(&mut Self)) {
        let ctx_at_entry = self.ctx_taint();
        for _ in 0..16 {
            let before = self.locals.clone();
            f(self);
            if let Some(ctx) = self.ctx {
                self.set(ctx, ctx_at_entry.clone());
            }
            // Joined with what the loop started from: zero iterations are possible.
            for (now, was) in self.locals.iter_mut().zip(&before) {
                now.join(was);
            }
            if self
                .locals
                .iter()
                .zip(&before)
                .all(|(a, b)| a.same_shape(b))
            {
                break;
            }
        }
    }

    /// Runs each branch from the same state and joins what they leave.
    /// Runs each of `n` branches from the same state and joins what they leave;
    /// `exhaustive`: one of them always runs (else the state before counts too).
    fn branches(
        &mut self,
        n: usize,
        exhaustive: bool,
        mut run: impl FnMut(&mut Self, usize) -> Taint,
    ) -> Taint {
        let start = self.locals.clone();
        let mut joined: Option<Vec<Taint>> = (!exhaustive).then(|| start.clone());
        let mut value = Taint::default();
        for i in 0..n {
            if i > 0 || joined.is_some() {
                self.locals.clone_from(&start);
            }
            value.join(&run(self, i));
            joined = Some(match joined {
                None => std::mem::take(&mut self.locals),
                Some(mut acc) => {
                    for (a, b) in acc.iter_mut().zip(&self.locals) {
                        a.join(b);
                    }
                    acc
                }
            });
        }
        self.locals = joined.unwrap_or(start);
        value
    }

    fn expr(&mut self, e: &Expr) -> Taint {
        match &e.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Unit
            | ExprKind::Placeholder => Taint::default(),
            ExprKind::List(items) => {
                let mut t = Taint::default();
                for item in items {
                    t.join(&self.expr(item));
                }
                t
            }
            ExprKind::StructLit { fields, .. } => {
                let mut t = Taint::default();
                for f in fields {
                    if let Some(v) = &f.value {
                        t.join(&self.expr(v));
                    }
                }
                if let Some(shorthands) = self.body.shorthands.get(e.id) {
                    for (_, r) in shorthands {
                        if let Resolution::Local(l) = r {
                            t.join(&self.local(*l));
                        }
                    }
                }
                t
            }
            ExprKind::Path(_) => match self.body.resolutions.get(e.id) {
                Some(Resolution::Local(l)) => self.local(*l),
                Some(Resolution::Item(g)) => {
                    if !self.handed.contains(&e.id)
                        && let Some(sink) = self.tool_sink(*g)
                    {
                        let name: &str = g.name(self.db);
                        self.diagnostics
                            .push(diag::stored_trusted_tool(self.item, e.span, name, &sink));
                    }
                    Taint::default()
                }
                _ => Taint::default(),
            },
            ExprKind::Call { args, .. } => self.call(e, None, args),
            ExprKind::MethodCall { receiver, args, .. } => self.call(e, Some(receiver), args),
            ExprKind::Field { base, .. } => self.expr(base),
            ExprKind::Index { base, index } => {
                let b = self.expr(base);
                b.joined(&self.expr(index))
            }
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                let l = self.expr(lhs);
                l.joined(&self.expr(rhs))
            }
            ExprKind::Paren(inner) => self.expr(inner),
            ExprKind::Inject(inner) => {
                if !matches!(inner.kind, ExprKind::Str(_)) {
                    let t = self.expr(inner).joined(&self.pc);
                    if let Some(ctx) = self.ctx
                        && !t.is_clean()
                    {
                        let step =
                            self.step(format!("injected into `{}`'s context", self.name), e.span);
                        let now = self.local(ctx).joined(&t.then(&step));
                        self.set(ctx, now);
                    }
                }
                Taint::default()
            }
            ExprKind::Block(b) => self.block(b),
            ExprKind::If {
                branches,
                else_block,
            } => {
                // Each condition is evaluated only if the ones before it were false: it
                // runs under them, and so does every later branch.
                let mut decided = Taint::default();
                let mut conds = Vec::with_capacity(branches.len());
                for br in branches {
                    let c = self.under_value(decided.clone(), |a| a.expr(&br.cond));
                    if !c.is_clean() {
                        let step = self.step("decides an `if`", br.cond.span);
                        decided.join(&c.then_source(&step));
                    }
                    conds.push(decided.clone());
                }
                let n = branches.len() + usize::from(else_block.is_some());
                let value = self.branches(n, else_block.is_some(), |a, i| match branches.get(i) {
                    Some(br) => a.under_value(conds[i].clone(), |a| a.block(&br.body)),
                    None => a.under_value(decided.clone(), |a| match else_block {
                        Some(b) => a.block(b),
                        None => Taint::default(),
                    }),
                });
                value.joined(&decided)
            }
            ExprKind::Select { arms } => {
                let step = self.step("`select`", e.span);
                let choice = self.ctx_taint().then(&step);
                let value = self.branches(arms.len(), true, |a, i| {
                    let arm = &arms[i];
                    a.under_value(choice.clone(), |a| {
                        let r = a.expr(&arm.call);
                        if let Some(&local) = a.body.declared.get(arm.call.id) {
                            let t = r.joined(&a.pc);
                            a.set(local, t);
                        }
                        a.expr(&arm.body)
                    })
                });
                value.joined(&choice)
            }
            ExprKind::ParallelFor { iter, body, .. } => {
                let t = self.expr(iter);
                let step = self.step("decides a `parallel for`", iter.span);
                let var = self.body.declared.get(iter.id).copied();
                let mut value = Taint::default();
                self.repeat(|a| {
                    if let Some(var) = var {
                        a.set(var, t.clone().joined(&a.pc));
                    }
                    let v = a.under_value(t.clone().then_source(&step), |a| a.block(body));
                    value.join(&v);
                });
                value.joined(&t)
            }
        }
    }

    fn under_value(&mut self, decided: Taint, f: impl FnOnce(&mut Self) -> Taint) -> Taint {
        let saved = self.pc.clone();
        self.pc.join(&decided);
        let v = f(self).joined(&self.pc);
        self.pc = saved.joined(&self.exits);
        v
    }

    /// An argument's trust; a `_` is the model's answer from the current context.
    fn arg(&mut self, a: &Expr) -> Taint {
        if matches!(a.kind, ExprKind::Placeholder) {
            let t = self.ctx_taint();
            if t.is_clean() {
                return t;
            }
            let step = self.step("`_` filled by the model", a.span);
            t.then(&step)
        } else {
            self.expr(a)
        }
    }

    /// A call: the arguments' trust checked against the callee's `trusted` parameters
    /// (and against its sinks when an untrusted value decided that it runs); its
    /// result's trust.
    fn call(&mut self, e: &Expr, receiver: Option<&Expr>, rest: &[Expr]) -> Taint {
        let callee = self.body.callees.get(e.id).copied();
        let args = || receiver.into_iter().chain(rest);
        // A builtin's result is its arguments' (but for the two below): no need to keep
        // them apart.
        if !matches!(callee, Some(Callee::Item(_))) {
            let tools = self.hand_tools(args());
            let mut joined = Taint::default();
            let mut taints = Vec::new();
            for a in args() {
                let t = self.arg(a);
                joined.join(&t);
                taints.push(t);
            }
            self.check_tools(e, &tools, &taints);
            return match callee {
                Some(Callee::Builtin(Builtin::Trust)) => Taint::default(),
                Some(Callee::Builtin(Builtin::ReadFile)) => {
                    Taint::source(self.step("`read_file`", e.span))
                }
                _ => joined,
            };
        }
        let tools = self.hand_tools(args());
        let taints: Vec<Taint> = args().map(|a| self.arg(a)).collect();
        self.check_tools(e, &tools, &taints);
        let db = self.db;
        match callee {
            None | Some(Callee::Builtin(_)) => unreachable!("handled above"),
            Some(Callee::Item(g)) => {
                let sig = fn_signature(db, g);
                let gname: &str = g.name(db);
                let summary: Cow<'_, Summary> = if sig.is_extern {
                    Cow::Owned(extern_summary(sig, gname))
                } else if g.kind(db) == ItemKind::Fn {
                    Cow::Borrowed(fn_summary(db, g))
                } else {
                    Cow::Owned(Summary::default())
                };
                // Arguments into parameters that reach a `trusted` one; what decided that
                // the call runs counts as part of every argument.
                let mut reported = false;
                for (i, t) in taints.iter().enumerate() {
                    let Some((suffix, sink)) = summary.sink_params.get(&(i as u32)) else {
                        continue;
                    };
                    let Some(arg) = args().nth(i) else { continue };
                    let pname = sig.params.get(i).map_or("", |p| p.name.as_str());
                    let path = if suffix.is_empty() {
                        vec![self.step(sink.clone(), arg.span)]
                    } else {
                        let mut p =
                            vec![self.step(format!("passed to `{gname}({pname}:)`"), arg.span)];
                        p.extend_from_slice(suffix);
                        p
                    };
                    let t = t.clone().joined(&self.pc);
                    reported |=
                        self.flow_to_sink(&t, &path, sink, arg.span, "this argument is untrusted");
                }
                // A call that runs because of an untrusted value, to a function that
                // reaches a sink whatever its arguments.
                if let Some((suffix, sink)) = &summary.any_sink {
                    let mut path = vec![self.step(format!("`{gname}` runs because of it"), e.span)];
                    path.extend_from_slice(suffix);
                    if !reported {
                        let pc = self.pc.clone();
                        self.flow_to_sink(
                            &pc,
                            &path,
                            sink,
                            e.span,
                            "this call runs because of untrusted data",
                        );
                    }
                    if self.summary.any_sink.is_none() {
                        let mut p = vec![self.step(format!("calls `{gname}`"), e.span)];
                        p.extend_from_slice(suffix);
                        self.summary.any_sink = Some((p, sink.clone()));
                    }
                }
                // The result.
                let mut out = Taint::default();
                if let Some(path) = &summary.ret_source {
                    let mut p = path.clone();
                    if sig.is_extern {
                        // Named as the program would: `inbox::read_mail`, `fs::read`.
                        let shown = match &sig.binding {
                            Some(ExternBinding::Mcp { server, .. }) => {
                                format!("`{server}::{gname}`")
                            }
                            Some(ExternBinding::Std { module, .. }) => {
                                format!("`{module}::{gname}`")
                            }
                            Some(ExternBinding::Python) => {
                                format!("`{gname}` (a Python function)")
                            }
                            None => format!("`{gname}`"),
                        };
                        p = vec![self.step(shown, e.span)];
                    } else {
                        p.push(self.step(format!("returned by `{gname}`"), e.span));
                    }
                    out.source = Some(p);
                }
                for (i, inside) in summary.ret_params.iter() {
                    let Some(t) = taints.get(i as usize).filter(|t| !t.is_clean()) else {
                        continue;
                    };
                    let t = if sig.is_extern {
                        t.clone()
                    } else {
                        let t = t.clone().then_path(inside);
                        if t.source.is_some() {
                            let ret = self.step(format!("returned by `{gname}`"), e.span);
                            t.then_source(&ret)
                        } else {
                            t
                        }
                    };
                    out.join(&t);
                }
                out
            }
        }
    }

    /// The `trusted` parameter a function value would expose to whoever calls it (the
    /// model, for a tool): its first sink, if it has one.
    fn tool_sink(&self, g: Item<'db>) -> Option<String> {
        let sig = fn_signature(self.db, g);
        if sig.is_extern {
            extern_summary(sig, g.name(self.db))
                .any_sink
                .map(|(_, sink)| sink)
        } else if g.kind(self.db) == ItemKind::Fn {
            fn_summary(self.db, g)
                .any_sink
                .as_ref()
                .map(|(_, sink)| sink.clone())
        } else {
            None
        }
    }

    /// The functions with `trusted` parameters handed straight to this call, as an
    /// argument or in a list literal argument: by argument, each with its sink.
    fn hand_tools<'e>(
        &mut self,
        args: impl Iterator<Item = &'e Expr>,
    ) -> Vec<(usize, Item<'db>, Span, String)> {
        let mut found = Vec::new();
        for (i, a) in args.enumerate() {
            let refs: &[Expr] = match &a.kind {
                ExprKind::List(items) => items,
                _ => std::slice::from_ref(a),
            };
            for r in refs {
                if matches!(r.kind, ExprKind::Path(_))
                    && let Some(Resolution::Item(g)) = self.body.resolutions.get(r.id)
                    && let Some(sink) = self.tool_sink(*g)
                {
                    self.handed.insert(r.id);
                    found.push((i, *g, r.span, sink));
                }
            }
        }
        found
    }

    /// A function with `trusted` parameters handed to a call as a tool: whoever calls it
    /// there (the model, in a plan) writes its arguments from what the call is given, so
    /// every other argument, and what decided that the call runs, must be trusted.
    fn check_tools(
        &mut self,
        e: &Expr,
        tools: &[(usize, Item<'db>, Span, String)],
        taints: &[Taint],
    ) {
        if tools.is_empty() {
            return;
        }
        let mut given = self.pc.clone();
        for (i, t) in taints.iter().enumerate() {
            if !tools.iter().any(|(arg, ..)| *arg == i) {
                given.join(t);
            }
        }
        if given.is_clean() {
            return;
        }
        let callee = match self.body.callees.get(e.id) {
            Some(Callee::Item(g)) => format!("`{}`", g.name(self.db)),
            _ => "the call".to_owned(),
        };
        for (_, g, span, sink) in tools {
            let name: &str = g.name(self.db);
            let path = vec![self.step(
                format!("`{name}` handed to {callee} as a tool, whose arguments the model writes"),
                *span,
            )];
            self.flow_to_sink(
                &given,
                &path,
                sink,
                *span,
                "this tool's arguments would come from untrusted data",
            );
        }
    }

    /// Untrusted `t` reaching `sink` by `path`: a violation for a source, a summary
    /// entry for a parameter. Whether a violation was reported.
    fn flow_to_sink(
        &mut self,
        t: &Taint,
        path: &[Step],
        sink: &str,
        span: Span,
        label: &str,
    ) -> bool {
        for (p, inside) in t.params.iter() {
            let mut whole = inside.to_vec();
            whole.extend_from_slice(path);
            self.summary
                .sink_params
                .entry(p)
                .or_insert_with(|| (whole, sink.to_owned()));
        }
        let Some(source) = &t.source else {
            return false;
        };
        let mut whole = source.clone();
        whole.extend_from_slice(path);
        let shown = show_path(self.db, self.file, &whole);
        self.diagnostics.push(diag::untrusted_argument(
            self.item, span, sink, &shown, label,
        ));
        true
    }
}
