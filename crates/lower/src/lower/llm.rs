//! The LLM sites: an LLM function's result (`Produce`, or `Decide` for a Boolean), a
//! call's `_` arguments (one `Fill`), and `select` (one `Choose` and a `Switch` to the
//! arms); with the calls they wrap, each resolved by hir.

use hir::ItemKind;
use hir::Ty;
use hir::body::Callee;
use hir::defs::fn_signature;
use syntax::Span;
use syntax::ast::{self, Expr, ExprKind};

use super::FnLower;
use ir::*;

impl<'a, 'db> FnLower<'a, 'db> {
    /// The result of an LLM function, whose body ends without a value: the model
    /// produces it (`Produce`), or decides it when it is a Boolean (`Decide`).
    pub(super) fn model_result(&mut self, body: &ast::Block, ret: &Ty<'db>) -> ValueId {
        let name = self.f.name.clone();
        let doc = self.f.doc.clone();
        let ret_ty = self.m.ty(ret);
        let span = Span {
            start: body.span.end.saturating_sub(1),
            end: body.span.end,
        };
        if ret_ty == Type::Bool {
            let site = self.site(&name, doc, SiteKind::Decide, span);
            let decide = |lx: &mut Self| {
                let ctx = lx.context();
                lx.emit(Op::Decide { site, ctx }, Type::Bool, Some(lx.src(span)))
            };
            if self.m.for_tests {
                return self.scripted_or(site, &ret_ty, decide);
            }
            decide(self)
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
            let schema_param = fn_signature(self.m.db, self.item).answer_schema_param();
            let produce = move |lx: &mut Self| {
                let ctx = lx.context();
                let schema =
                    schema_param.map(|local| lx.emit(Op::Load(local as LocalId), Type::Json, None));
                let ty = lx.m.ty(ret);
                lx.emit(Op::Produce { site, ctx, schema }, ty, Some(lx.src(span)))
            };
            if self.m.for_tests {
                return self.scripted_or(site, &ret_ty, produce);
            }
            produce(self)
        }
    }

    /// The test's scripted answer for this site if it has one, else `ask`'s.
    fn scripted_or(
        &mut self,
        site: SiteId,
        ret: &Type,
        ask: impl FnOnce(&mut Self) -> ValueId,
    ) -> ValueId {
        let scripted = self.scripted_result(site, ret);
        let result = self.new_local("answer", ret.clone());
        let has = self.emit(
            Op::CallBuiltin(Builtin::IsSome, vec![scripted]),
            Type::Bool,
            None,
        );
        let (given, asked, join) = (self.new_block(), self.new_block(), self.new_block());
        self.terminate(Terminator::Branch(has, given, asked));
        self.switch_to(given);
        let v = self.emit(
            Op::CallBuiltin(Builtin::Unwrap, vec![scripted]),
            ret.clone(),
            None,
        );
        self.emit_void(Op::Store(result, v), None);
        self.terminate(Terminator::Jump(join));
        self.switch_to(asked);
        let v = ask(self);
        self.emit_void(Op::Store(result, v), None);
        self.terminate(Terminator::Jump(join));
        self.switch_to(join);
        self.emit(Op::Load(result), ret.clone(), None)
    }

    pub(super) fn context(&mut self) -> ValueId {
        let local = self
            .f
            .context
            .expect("hir checked that a context exists here");
        self.emit(Op::Load(local), Type::Context, None)
    }

    pub(super) fn site(
        &mut self,
        subject: &str,
        doc: Option<String>,
        kind: SiteKind,
        span: Span,
    ) -> SiteId {
        let site = LlmSite {
            function: self.f.name.clone(),
            owner: self.m.funcs.get(&self.item).copied().unwrap_or(0),
            subject: subject.to_owned(),
            doc,
            kind,
            span: self.src(span),
        };
        self.m.module.sites.push(site);
        self.m.module.sites.len() as SiteId - 1
    }

    /// What hir resolved the call `e` to.
    pub(super) fn callee(&self, e: &Expr) -> Callee<'db> {
        *self.body.callees.get(e.id).unwrap_or_else(|| {
            panic!(
                "internal error: hir did not resolve the call at {:?}",
                e.span
            )
        })
    }

    /// A call of `name` (as written) with every argument, the receiver first; its `_`
    /// arguments are filled by the model in one request.
    pub(super) fn call(&mut self, e: &Expr, name: &str, all: Vec<&Expr>, ty: Type) -> ValueId {
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

    pub(super) fn callee_params(&mut self, callee: Callee<'db>) -> (Vec<Param>, Option<String>) {
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
                        trusted: p.trusted,
                    })
                    .collect();
                (params, sig.doc.clone())
            }
            Callee::Builtin(b) => {
                let sig = hir::builtins::signature(b);
                let params = sig
                    .params
                    .iter()
                    .map(|(n, t)| Param {
                        name: (*n).to_owned(),
                        doc: None,
                        ty: self.m.ty(t),
                        trusted: false,
                    })
                    .collect();
                (params, None)
            }
        }
    }

    /// Evaluates the arguments (reading `_`s from `filled`) and emits the call.
    pub(super) fn finish_call(
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

    pub(super) fn lower_select(&mut self, e: &Expr, arms: &[ast::SelectArm], ty: Type) -> ValueId {
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
            let guarded = matches!(callee, Callee::Item(item) if fn_signature(self.m.db, item).params.iter().any(|p| p.trusted));
            site_arms.push(SiteArm {
                tool: name.clone(),
                doc,
                binding: arm.binding.as_ref().map(|b| b.name.clone()),
                params: wanted,
                guarded,
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
            self.join_with(result, body, join);
            self.switch_to(resume);
        }
        self.terminate(Terminator::Switch(index, targets));
        self.switch_to(join);
        match result {
            Some(result) => self.emit(Op::Load(result), ty, None),
            None => self.unit(),
        }
    }
}
