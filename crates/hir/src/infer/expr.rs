//! Expressions: literals, operators, fields, indexing, `if`, blocks, struct literals and
//! `parallel for`; each expression's type is recorded by its id.

use syntax::Span;
use syntax::ast::{self, BinaryOp, Expr, ExprKind, UnaryOp};

use super::ide::{COMPLETION_MARKER, Target};
use super::{Callee, Checker, LocalKind, LoopKind, block_tail};
use crate::body::Resolution;
use crate::builtins::Builtin;
use crate::defs::{alias_def, struct_def};
use crate::diagnostics as diag;
use crate::items::{Item, ItemKind};
use crate::resolve::{TypeDef, closest};
use crate::ty::Ty;

impl<'a, 'db> Checker<'a, 'db> {
    pub(super) fn infer(&mut self, e: &Expr, hint: Option<&Ty<'db>>) -> Ty<'db> {
        let t = self.infer_inner(e, hint);
        self.expr_types.insert(e.id, (e.span, t.clone()));
        t
    }

    pub(super) fn infer_inner(&mut self, e: &Expr, hint: Option<&Ty<'db>>) -> Ty<'db> {
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
                    } else if !matches!(
                        self.shallow(&t),
                        Ty::Unit | Ty::Never | Ty::Var(_) | Ty::Error
                    ) && let Some(last) = branch.body.stmts.last()
                        && let ast::StmtKind::Expr(value) = &last.kind
                        && !matches!(
                            value.kind,
                            ExprKind::Call { .. } | ExprKind::MethodCall { .. }
                        )
                    {
                        // Without `else` the `if` is `()`: the block's value goes nowhere.
                        // A call's result may be dropped, as anywhere (it is called for
                        // what it does); a literal, a name or an operation only has a
                        // value, so dropping it is a mistake.
                        let shown = self.display(&t);
                        self.diagnostics
                            .push(diag::dropped_if_value(self.item, last.span, &shown));
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
                if matches!(self.shallow(&value), Ty::Context) {
                    self.diagnostics.push(diag::context_misuse(
                        self.item,
                        e.span,
                        "collected into a `List` by `parallel for`",
                    ));
                }
                Ty::List(Box::new(value))
            }
        }
    }

    /// Adds one branch's type to an `if`/`else`'s type; branches must agree.
    pub(super) fn join_branch(
        &mut self,
        result: &mut Option<Ty<'db>>,
        t: Ty<'db>,
        block: &ast::Block,
    ) {
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

    pub(super) fn int_literal(
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

    /// `op` cannot take operands of these types.
    fn operands_mismatch(&mut self, span: Span, op: BinaryOp, l: &Ty<'db>, r: &Ty<'db>) {
        let d = diag::operator(
            self.item,
            span,
            op.as_str(),
            &self.display(l),
            Some(&self.display(r)),
        );
        self.diagnostics.push(d);
    }

    pub(super) fn binary(
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
                    self.operands_mismatch(span, op, &l, &r);
                    return Ty::Bool;
                }
                if !self.equatable(&l, &mut Vec::new()) {
                    self.operands_mismatch(span, op, &l, &r);
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
                    self.operands_mismatch(span, op, &l, &r);
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

    /// Whether `==` and `!=` take values of `t`: scalars, strings, enums and `Json`, and
    /// lists, options and structs of such values, compared structurally. A context or a
    /// tool anywhere inside has no equality. `seen` holds the structs being looked at,
    /// so a struct that holds itself through a list is looked at once.
    fn equatable(&self, t: &Ty<'db>, seen: &mut Vec<Item<'db>>) -> bool {
        match self.shallow(t) {
            Ty::I32
            | Ty::I64
            | Ty::F64
            | Ty::Bool
            | Ty::String
            | Ty::Json
            | Ty::Enum(_)
            | Ty::Unit
            | Ty::Error
            | Ty::Never
            | Ty::Var(_) => true,
            Ty::List(e) | Ty::Option(e) => self.equatable(&e, seen),
            Ty::Struct(item) => {
                if seen.contains(&item) {
                    return true;
                }
                seen.push(item);
                struct_def(self.db, item)
                    .fields
                    .iter()
                    .all(|f| self.equatable(&f.ty, seen))
            }
            Ty::Tool | Ty::Context | Ty::Param(_) => false,
        }
    }

    /// The result type of `l op r` for `+ - * / %`.
    pub(super) fn arithmetic(
        &mut self,
        span: Span,
        op: BinaryOp,
        l: &Ty<'db>,
        r: &Ty<'db>,
    ) -> Ty<'db> {
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

    pub(super) fn struct_literal(
        &mut self,
        e: &Expr,
        path: &ast::Path,
        fields: &[ast::FieldInit],
    ) -> Ty<'db> {
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
}
