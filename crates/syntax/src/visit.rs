//! A walk over every expression of a block, in source order: for questions asked of a
//! whole body (which `select` clauses and which calls with `_` a function has).

use crate::ast::*;

/// Calls `f` on every expression of `block`, outer before inner, in source order.
/// Expressions nest at most `MAX_EXPR_DEPTH` deep, so the recursion is bounded.
pub fn walk_block(block: &Block, f: &mut dyn FnMut(&Expr)) {
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Let { init, .. } => walk_expr(init, f),
            StmtKind::Assign { value, .. } => walk_expr(value, f),
            StmtKind::Return(value) => value.iter().for_each(|v| walk_expr(v, f)),
            StmtKind::Break | StmtKind::Continue => {}
            StmtKind::While { cond, body } => {
                walk_expr(cond, f);
                walk_block(body, f);
            }
            StmtKind::For { iter, body, .. } => {
                walk_expr(iter, f);
                walk_block(body, f);
            }
            StmtKind::Expr(e) => walk_expr(e, f),
            StmtKind::Assert { cond, message } => {
                walk_expr(cond, f);
                message.iter().for_each(|m| walk_expr(m, f));
            }
            StmtKind::Given(g) => match &g.answers {
                GivenAnswers::Stub { answer, .. } => walk_expr(answer, f),
                GivenAnswers::Script(answers) => {
                    for a in answers {
                        match a {
                            Scripted::Value(e) | Scripted::Select(e) | Scripted::Fill(e) => {
                                walk_expr(e, f)
                            }
                        }
                    }
                }
            },
        }
    }
}

/// Calls `f` on `e` and every expression inside it, outer before inner.
pub fn walk_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Unit
        | ExprKind::Placeholder
        | ExprKind::Path(_) => {}
        ExprKind::List(items) => items.iter().for_each(|i| walk_expr(i, f)),
        ExprKind::StructLit { fields, .. } => fields
            .iter()
            .filter_map(|x| x.value.as_ref())
            .for_each(|v| walk_expr(v, f)),
        ExprKind::Call { callee, args } => {
            walk_expr(callee, f);
            args.iter().for_each(|a| walk_expr(a, f));
        }
        ExprKind::MethodCall { receiver, args, .. } => {
            walk_expr(receiver, f);
            args.iter().for_each(|a| walk_expr(a, f));
        }
        ExprKind::Field { base, .. } => walk_expr(base, f),
        ExprKind::Index { base, index } => {
            walk_expr(base, f);
            walk_expr(index, f);
        }
        ExprKind::Unary { operand, .. } => walk_expr(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            walk_expr(lhs, f);
            walk_expr(rhs, f);
        }
        ExprKind::Inject(inner) | ExprKind::Paren(inner) => walk_expr(inner, f),
        ExprKind::Block(block) => walk_block(block, f),
        ExprKind::If {
            branches,
            else_block,
        } => {
            for b in branches {
                walk_expr(&b.cond, f);
                walk_block(&b.body, f);
            }
            else_block.iter().for_each(|b| walk_block(b, f));
        }
        ExprKind::Select { arms } => {
            for arm in arms {
                walk_expr(&arm.call, f);
                walk_expr(&arm.body, f);
            }
        }
        ExprKind::ParallelFor { iter, body, .. } => {
            walk_expr(iter, f);
            walk_block(body, f);
        }
    }
}

/// The name a call calls: the last segment of its path, or the method's name.
pub fn callee_name(call: &Expr) -> Option<&str> {
    match &call.kind {
        ExprKind::Call { callee, .. } => match &callee.kind {
            ExprKind::Path(p) => Some(p.last().name.as_str()),
            _ => None,
        },
        ExprKind::MethodCall { method, .. } => Some(method.name.as_str()),
        _ => None,
    }
}

/// The model's decision points in a body by the function they call: the callees of its
/// `select` clauses, and those of its calls with `_` arguments (outside `select`).
pub fn model_sites(block: &Block) -> (Vec<String>, Vec<String>) {
    let mut clauses = Vec::new();
    let mut fills = Vec::new();
    walk_block(block, &mut |e| match &e.kind {
        ExprKind::Select { arms } => {
            for arm in arms {
                clauses.extend(callee_name(&arm.call).map(str::to_owned));
            }
        }
        ExprKind::Call { args, .. } | ExprKind::MethodCall { args, .. }
            if args.iter().any(|a| matches!(a.kind, ExprKind::Placeholder)) =>
        {
            fills.extend(callee_name(e).map(str::to_owned));
        }
        _ => {}
    });
    // A `select` clause's own `_` arguments are not fills.
    for c in &clauses {
        if let Some(i) = fills.iter().position(|f| f == c) {
            fills.remove(i);
        }
    }
    (clauses, fills)
}
