//! Calls: what a call names, its arguments against the signature (generic standard
//! externs instantiated; `len` and `contains` take two shapes), `_` placeholders, and
//! `select`, whose arms are calls the model chooses between.

use syntax::Span;
use syntax::ast::{self, Expr, ExprKind};

use super::unify::instantiate;
use super::{Callee, Checker, LocalKind};
use crate::builtins::Builtin;
use crate::defs::fn_signature;
use crate::diagnostics as diag;
use crate::resolve::ValueDef;
use crate::ty::Ty;

impl<'a, 'db> Checker<'a, 'db> {
    pub(super) fn method_call(
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
    pub(super) fn call(
        &mut self,
        call: &Expr,
        callee: &Expr,
        args: &[Expr],
        in_select: bool,
    ) -> Ty<'db> {
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
            let first_is_type = path.segments.len() == 2
                && self
                    .resolver
                    .lookup_type_path(&ast::Path {
                        segments: path.segments[..1].to_vec(),
                        span: path.segments[0].span,
                    })
                    .is_some();
            if let [module, name] = path.segments.as_slice()
                && !first_is_type
                && !super::scope::is_builtin_type(&module.name)
            {
                // `m::f` naming nothing: say which part is missing.
                let d = if self.resolver.is_module(&module.name) {
                    let similar = self.resolver.similar_in_module(&module.name, &name.name);
                    diag::unresolved_name(self.item, name.span, &text, similar)
                } else {
                    let similar = self.resolver.similar_module(&module.name);
                    diag::unknown_module(self.item, module.span, &module.name, similar)
                };
                self.diagnostics.push(d);
            } else if self.resolver.lookup_type_path(path).is_some() || path.segments.len() == 2 {
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
    pub(super) fn call_resolved(
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
                if b == Builtin::Trust {
                    // A declassification says why, where it is written.
                    let reason = args.get(1).map(|a| &a.kind);
                    if !matches!(reason, Some(ExprKind::Str(s)) if !s.trim().is_empty()) {
                        let at = args.get(1).map_or(span, |a| a.span);
                        self.diagnostics.push(diag::trust_reason(self.item, at));
                    }
                }
                let sig = crate::builtins::signature(b);
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
    pub(super) fn len_call(&mut self, arg: &Expr) -> Ty<'db> {
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
    pub(super) fn contains_call(&mut self, whole: &Expr, part: &Expr) -> Ty<'db> {
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

    pub(super) fn select(
        &mut self,
        span: Span,
        arms: &[ast::SelectArm],
        hint: Option<&Ty<'db>>,
    ) -> Ty<'db> {
        self.use_context(span, "`select`");
        match arms.len() {
            0 => self.diagnostics.push(diag::empty_select(self.item, span)),
            1 => self.diagnostics.push(diag::one_arm_select(self.item, span)),
            _ => {}
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
}
