//! Expressions: constants, operators (`&&`/`||` short-circuit), fields, indexing, struct
//! literals, names as hir resolved them, `if`, and context injection.

use hir::body::Resolution;
use syntax::ast::{self, BinaryOp, Expr, ExprKind, UnaryOp};

use super::FnLower;
use ir::*;

impl<'a, 'db> FnLower<'a, 'db> {
    pub(super) fn expr(&mut self, e: &Expr) -> ValueId {
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
                    let slot = defs
                        .iter()
                        .position(|d| d.name == f.name.name)
                        .expect("hir checked the field names");
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
                            let field_ty = defs[slot].ty.clone();
                            self.resolved_value(resolution, &f.name.name, field_ty)
                        }
                    };
                    values[slot] = Some(v);
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
                        // What a tool returned is labelled with the tool, not the function;
                        // the rest with the function the source names, never the name of a
                        // `parallel for` body, whose offset would change the prompt at
                        // every edit above it.
                        let function = self.tool_origin(inner).unwrap_or_else(|| {
                            let name = &self.f.name;
                            name.split("::parallel_for@")
                                .next()
                                .unwrap_or(name)
                                .to_owned()
                        });
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

    /// The tool a value comes from, when it is a bound extern's result or a variable
    /// that only ever held one (`let text = notes::read_file(p)`).
    pub(super) fn tool_origin(&self, e: &Expr) -> Option<String> {
        match &e.kind {
            // A field of what a tool returned is still the tool's data.
            ExprKind::Paren(inner) | ExprKind::Field { base: inner, .. } => self.tool_origin(inner),
            ExprKind::Call { .. } => match self.body.callees.get(e.id)? {
                hir::body::Callee::Item(item) => self.m.origins.get(item).cloned(),
                hir::body::Callee::Builtin(_) => None,
            },
            ExprKind::Path(_) => match self.body.resolutions.get(e.id)? {
                Resolution::Local(local) => {
                    let local = *self.locals.get(local)?;
                    self.tool_values.get(&local).cloned()
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// How an injected value is labelled: its name, or `result of f`.
    pub(super) fn label(&self, e: &Expr) -> String {
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
    pub(super) fn resolved_value(
        &mut self,
        resolution: &Resolution<'db>,
        name: &str,
        ty: Type,
    ) -> ValueId {
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
                // An extern is called by its lowered name (`SERVER::name` when bound).
                let name = match resolution {
                    Resolution::Item(item) => self.m.externs.get(item).cloned(),
                    _ => None,
                }
                .unwrap_or_else(|| name.to_owned());
                let tool = Const::Tool { name, function };
                self.emit(Op::Const(tool), Type::Tool, None)
            }
        }
    }

    pub(super) fn lower_if(
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
            self.join_with(result, v, join);
            self.switch_to(next);
        }
        match else_block {
            Some(block) => {
                let v = self.lower_block(block);
                self.join_with(result, v, join);
            }
            None => self.terminate(Terminator::Jump(join)),
        }
        self.switch_to(join);
        match result {
            Some(result) => self.emit(Op::Load(result), ty, None),
            None => self.unit(),
        }
    }
}
