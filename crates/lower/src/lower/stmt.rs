//! Blocks and statements: `let` and assignment (`xs = push(xs, x)` and
//! `xs = set(xs, i, x)` in place), `return`, `break`/`continue`, and the loops, each
//! iteration of which is a context frame of its own.

use hir::Ty;
use hir::body::{Callee, Resolution};
use syntax::ast::{self, Expr, ExprKind, Stmt, StmtKind};

use super::{FnLower, LoopTarget};
use ir::*;

/// An assignment that updates the list it reads (see `FnLower::update_of`).
enum Update<'e> {
    /// `xs = push(xs, x)`.
    Push(&'e Expr),
    /// `xs = set(xs, i, x)`.
    Set(&'e Expr, &'e Expr),
}

impl<'a, 'db> FnLower<'a, 'db> {
    pub(super) fn lower_body(&mut self, body: &ast::Block, ret: &Ty<'db>) {
        let ends_with_value = matches!(body.stmts.last().map(|s| &s.kind), Some(StmtKind::Expr(e)) if !matches!(e.kind, ExprKind::Inject(_)) && !matches!(&e.kind, ExprKind::If { else_block: None, .. }));
        let value = self.lower_block(body);
        if self.terminated() {
            return;
        }
        let is_unit = matches!(ret, Ty::Unit | Ty::Error | Ty::Never);
        let result = if ends_with_value || is_unit {
            if is_unit { self.unit() } else { value }
        } else {
            self.model_result(body, ret)
        };
        self.terminate(Terminator::Return(result));
    }

    /// Lowers a block; its value (the tail expression's, else unit).
    pub(super) fn lower_block(&mut self, block: &ast::Block) -> ValueId {
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

    pub(super) fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Assert { cond, message } => {
                self.lower_assert(stmt.span, cond, message.as_ref());
            }
            StmtKind::Given(g) => self.lower_given(g),
            StmtKind::Let { name, init, .. } => {
                let ty = self.type_of(init);
                let origin = self.tool_origin(init);
                let v = self.expr(init);
                let local = self.declare(init, &name.name, ty);
                match origin {
                    Some(origin) => self.tool_values.insert(local, origin),
                    None => self.tool_values.remove(&local),
                };
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
                // The variable keeps its tool's label only while every value it is
                // given comes from that tool.
                if self.tool_origin(value) != self.tool_values.get(&local).cloned()
                    || *op != ast::AssignOp::Assign
                {
                    self.tool_values.remove(&local);
                }
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
                    _ if target.continue_iterates => {
                        Terminator::Loop(target.continue_to, target.span)
                    }
                    _ => Terminator::Jump(target.continue_to),
                };
                self.restore_context(saved);
                self.terminate(term);
            }
            StmtKind::While { cond, body } => {
                let span = self.src(stmt.span);
                let before = self.block;
                let head = self.new_block();
                let body_block = self.new_block();
                let exit = self.new_block();
                self.terminate(Terminator::Jump(head));
                self.switch_to(head);
                let c = self.expr(cond);
                let model_decided = self.body.model_loops.contains(&cond.id);
                self.terminate(Terminator::Branch(c, body_block, exit));
                // A loop the model decides, and nothing else bounds, counts its
                // iterations against the run's limit for such loops, from zero each time
                // the loop starts.
                let counter = model_decided.then(|| {
                    let counter = self.new_local("model loop iterations", Type::I64);
                    self.switch_to(before);
                    let zero = self.emit(Op::Const(Const::Int(0)), Type::I64, None);
                    self.emit_void(Op::Store(counter, zero), None);
                    counter
                });
                self.switch_to(body_block);
                if let Some(counter) = counter {
                    let at = Some(self.src(cond.span));
                    let n = self.emit(Op::Load(counter), Type::I64, None);
                    let one = self.emit(Op::Const(Const::Int(1)), Type::I64, None);
                    let n = self.emit(Op::Binary(BinOp::Add, Type::I64, n, one), Type::I64, at);
                    self.emit_void(Op::Store(counter, n), None);
                    self.emit_void(Op::CallBuiltin(Builtin::ModelLoop, vec![n]), at);
                }
                let saved = self.enter_iteration();
                self.loops.push(LoopTarget {
                    continue_to: head,
                    continue_iterates: true,
                    break_to: exit,
                    span,
                    saved_context: saved,
                });
                self.lower_block(body);
                self.loops.pop();
                self.restore_context(saved);
                self.terminate(Terminator::Loop(head, span));
                self.switch_to(exit);
            }
            StmtKind::For { var, iter, body } if self.unrollable(iter, body) => {
                let ExprKind::List(elements) = &iter.kind else {
                    unreachable!("only a list literal is unrolled")
                };
                self.unrolled_for(var, iter, elements, body, self.src(stmt.span));
            }
            StmtKind::For { var, iter, body } => {
                let span = self.src(stmt.span);
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
                self.for_body(body, saved, step, exit, span);
                let i = self.emit(Op::Load(index), Type::I64, None);
                let one = self.emit(Op::Const(Const::Int(1)), Type::I64, None);
                let next = self.emit(Op::Binary(BinOp::Add, Type::I64, i, one), Type::I64, None);
                self.emit_void(Op::Store(index, next), None);
                self.terminate(Terminator::Loop(head, span));
                self.switch_to(exit);
                self.emit_void(Op::Release(list), None);
            }
            StmtKind::Expr(e) => {
                self.expr(e);
            }
        }
    }

    /// Whether `for v in iter { body }` runs as one copy of `body` per element: `iter`
    /// is a list literal of a few scalars (`[a, 0, n]`) and `body` is small and asks the
    /// model nothing at its own sites (no `_`, `select`, `parallel for` or `!`), so
    /// copying it changes nothing but the code: no list is made, and the compiler sees
    /// straight-line code. Loops inside are not copied.
    fn unrollable(&mut self, iter: &Expr, body: &ast::Block) -> bool {
        /// Elements of a literal unrolled at most.
        const MOST_ELEMENTS: usize = 8;
        /// Expressions and statements of all copies together at most.
        const MOST_WORK: usize = 64;
        let ExprKind::List(elements) = &iter.kind else {
            return false;
        };
        if elements.is_empty() || elements.len() > MOST_ELEMENTS {
            return false;
        }
        match self.type_of(iter) {
            Type::List(element) if !element.is_heap() => {}
            _ => return false,
        }
        let mut work = 0;
        self.copyable_block(body, &mut work) && work * elements.len() <= MOST_WORK
    }

    fn copyable_block(&mut self, block: &ast::Block, work: &mut usize) -> bool {
        block.stmts.iter().all(|stmt| {
            *work += 1;
            match &stmt.kind {
                // A copy's `let` is a local of its own: a scalar one needs no release.
                StmtKind::Let { init, .. } => {
                    !self.type_of(init).is_heap() && self.copyable_expr(init, work)
                }
                StmtKind::Assign { value, .. } => self.copyable_expr(value, work),
                StmtKind::Expr(e) => self.copyable_expr(e, work),
                StmtKind::Return(value) => value.iter().all(|e| self.copyable_expr(e, work)),
                StmtKind::Assert { cond, message } => {
                    self.copyable_expr(cond, work)
                        && message.iter().all(|e| self.copyable_expr(e, work))
                }
                StmtKind::Break | StmtKind::Continue => true,
                StmtKind::While { .. } | StmtKind::For { .. } | StmtKind::Given(_) => false,
            }
        })
    }

    fn copyable_expr(&mut self, e: &Expr, work: &mut usize) -> bool {
        *work += 1;
        match &e.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Unit
            | ExprKind::Path(_) => true,
            ExprKind::List(items) => items.iter().all(|i| self.copyable_expr(i, work)),
            ExprKind::StructLit { fields, .. } => fields
                .iter()
                .all(|f| f.value.as_ref().is_none_or(|v| self.copyable_expr(v, work))),
            ExprKind::Call { callee, args } => {
                self.copyable_expr(callee, work) && args.iter().all(|a| self.copyable_expr(a, work))
            }
            ExprKind::MethodCall { receiver, args, .. } => {
                self.copyable_expr(receiver, work)
                    && args.iter().all(|a| self.copyable_expr(a, work))
            }
            ExprKind::Field { base, .. } => self.copyable_expr(base, work),
            ExprKind::Index { base, index } => {
                self.copyable_expr(base, work) && self.copyable_expr(index, work)
            }
            ExprKind::Unary { operand, .. } => self.copyable_expr(operand, work),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.copyable_expr(lhs, work) && self.copyable_expr(rhs, work)
            }
            ExprKind::Paren(inner) => self.copyable_expr(inner, work),
            ExprKind::Block(block) => self.copyable_block(block, work),
            ExprKind::If {
                branches,
                else_block,
            } => {
                branches.iter().all(|b| {
                    self.copyable_expr(&b.cond, work) && self.copyable_block(&b.body, work)
                }) && else_block
                    .as_ref()
                    .is_none_or(|b| self.copyable_block(b, work))
            }
            ExprKind::Placeholder
            | ExprKind::Inject(_)
            | ExprKind::Select { .. }
            | ExprKind::ParallelFor { .. } => false,
        }
    }

    /// `for v in [a, b, c] { body }` as `body` with `v = a`, then with `v = b`, then with
    /// `v = c`: the elements are evaluated first, in order, as the list's would be; each
    /// copy is an iteration, counted against the budget, with its own context frame;
    /// `continue` goes to the next copy and `break` past the last.
    fn unrolled_for(
        &mut self,
        var: &ast::Ident,
        iter: &Expr,
        elements: &[Expr],
        body: &ast::Block,
        span: SrcSpan,
    ) {
        let ty = match self.type_of(iter) {
            Type::List(element) => *element,
            _ => Type::Unit,
        };
        let mut slots = Vec::with_capacity(elements.len());
        for element in elements {
            let value = self.expr(element);
            let slot = self.new_local("for element", ty.clone());
            self.emit_void(Op::Store(slot, value), None);
            slots.push(slot);
        }
        let var_local = self.declare(iter, &var.name, ty.clone());
        let exit = self.new_block();
        let mut copy = self.new_block();
        self.terminate(Terminator::Jump(copy));
        for (k, slot) in slots.iter().enumerate() {
            let next = if k + 1 < slots.len() {
                self.new_block()
            } else {
                exit
            };
            let step = self.new_block();
            self.switch_to(copy);
            let saved = self.enter_iteration();
            let value = self.emit(Op::Load(*slot), ty.clone(), None);
            self.emit_void(Op::Store(var_local, value), None);
            self.for_body(body, saved, step, exit, span);
            self.terminate(Terminator::Loop(next, span));
            copy = next;
        }
        self.switch_to(exit);
    }

    /// A `for` iteration's body, its variable bound: `continue` goes to `step` (which
    /// starts the next iteration), `break` to `exit`; ends in `step`, the iteration's
    /// context frame left.
    fn for_body(
        &mut self,
        body: &ast::Block,
        saved: Option<(LocalId, LocalId)>,
        step: BlockId,
        exit: BlockId,
        span: SrcSpan,
    ) {
        self.loops.push(LoopTarget {
            continue_to: step,
            continue_iterates: false,
            break_to: exit,
            span,
            saved_context: saved,
        });
        self.lower_block(body);
        self.loops.pop();
        self.restore_context(saved);
        self.terminate(Terminator::Jump(step));
        self.switch_to(step);
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
}
