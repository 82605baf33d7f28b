//! Which modules an item names: the first segment of a `use` path and of every
//! qualified path (`m::f`, `m::Type`, `Enum::Variant` too, since syntax cannot tell an
//! enum from a module). A module file beside a program, or a prelude module, is part of
//! the program exactly when one of its files names it; both the checker and `sapc`'s
//! loader ask this one question (through `hir::named_modules`). Comments and strings
//! name nothing.

use std::collections::BTreeSet;

use crate::ast::*;

/// Adds the modules `item` names to `out`.
pub fn module_names(item: &Item, out: &mut BTreeSet<String>) {
    let mut names = Names(out);
    match &item.kind {
        ItemKind::Fn(f) => {
            names.params(&f.params);
            names.opt_ty(f.ret.as_ref());
            names.block(&f.body);
        }
        ItemKind::ExternFn(f) => {
            names.params(&f.params);
            names.opt_ty(f.ret.as_ref());
        }
        ItemKind::Struct(s) => s.fields.iter().for_each(|f| names.ty(&f.ty)),
        ItemKind::Enum(_) => {}
        ItemKind::TypeAlias(t) => names.ty(&t.ty),
        ItemKind::Use(u) => {
            if let Some(first) = u.path.segments.first() {
                names.0.insert(first.name.clone());
            }
        }
        ItemKind::Test(t) => names.block(&t.body),
    }
}

struct Names<'a>(&'a mut BTreeSet<String>);

impl Names<'_> {
    fn path(&mut self, path: &Path) {
        if let [first, _, ..] = path.segments.as_slice() {
            self.0.insert(first.name.clone());
        }
    }

    fn params(&mut self, params: &[Param]) {
        for p in params {
            self.opt_ty(p.ty.as_ref());
        }
    }

    fn opt_ty(&mut self, ty: Option<&TypeExpr>) {
        if let Some(ty) = ty {
            self.ty(ty);
        }
    }

    fn ty(&mut self, ty: &TypeExpr) {
        if let TypeExprKind::Named { path, args } = &ty.kind {
            self.path(path);
            args.iter().for_each(|a| self.ty(a));
        }
    }

    fn block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Let { ty, init, .. } => {
                    self.opt_ty(ty.as_ref());
                    self.expr(init);
                }
                StmtKind::Assign { value, .. } => self.expr(value),
                StmtKind::Return(value) => value.iter().for_each(|v| self.expr(v)),
                StmtKind::Break | StmtKind::Continue => {}
                StmtKind::While { cond, body } => {
                    self.expr(cond);
                    self.block(body);
                }
                StmtKind::For { iter, body, .. } => {
                    self.expr(iter);
                    self.block(body);
                }
                StmtKind::Expr(e) => self.expr(e),
                StmtKind::Assert { cond, message } => {
                    self.expr(cond);
                    message.iter().for_each(|m| self.expr(m));
                }
                StmtKind::Given(g) => {
                    self.path(&g.function);
                    match &g.answers {
                        GivenAnswers::Stub { answer, .. } => self.expr(answer),
                        GivenAnswers::Script(answers) => {
                            for a in answers {
                                match a {
                                    Scripted::Value(e)
                                    | Scripted::Select(e)
                                    | Scripted::Fill(e) => self.expr(e),
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Expressions nest at most `MAX_EXPR_DEPTH` deep (the parser's invariant), so the
    /// recursion is bounded.
    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Unit
            | ExprKind::Placeholder => {}
            ExprKind::List(items) => items.iter().for_each(|i| self.expr(i)),
            ExprKind::StructLit { path, fields } => {
                self.path(path);
                fields
                    .iter()
                    .filter_map(|f| f.value.as_ref())
                    .for_each(|v| self.expr(v));
            }
            ExprKind::Path(path) => self.path(path),
            ExprKind::Call { callee, args } => {
                self.expr(callee);
                args.iter().for_each(|a| self.expr(a));
            }
            ExprKind::MethodCall { receiver, args, .. } => {
                self.expr(receiver);
                args.iter().for_each(|a| self.expr(a));
            }
            ExprKind::Field { base, .. } => self.expr(base),
            ExprKind::Index { base, index } => {
                self.expr(base);
                self.expr(index);
            }
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Inject(inner) | ExprKind::Paren(inner) => self.expr(inner),
            ExprKind::Block(block) => self.block(block),
            ExprKind::If {
                branches,
                else_block,
            } => {
                for b in branches {
                    self.expr(&b.cond);
                    self.block(&b.body);
                }
                else_block.iter().for_each(|b| self.block(b));
            }
            ExprKind::Select { arms } => {
                for arm in arms {
                    self.expr(&arm.call);
                    self.expr(&arm.body);
                }
            }
            ExprKind::ParallelFor { iter, body, .. } => {
                self.expr(iter);
                self.block(body);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    fn names(src: &str) -> Vec<String> {
        let parse = crate::parse(src);
        assert!(parse.diagnostics.is_empty(), "{:?}", parse.diagnostics);
        let mut out = BTreeSet::new();
        for item in &parse.file.items {
            super::module_names(item, &mut out);
        }
        out.into_iter().collect()
    }

    #[test]
    fn uses_and_qualified_paths_name_modules() {
        assert_eq!(
            names(
                "use aot\nuse shapes::{circle}\nstruct S { p: geo::Point }\n\
                 fn main() -> () { let x = helpers::triple(4)\n let c = Color::Red\n \
                 let q = parallel for i in [1] { deep::f(i) } }"
            ),
            ["Color", "aot", "deep", "geo", "helpers", "shapes"]
        );
    }

    #[test]
    fn comments_strings_and_plain_names_name_nothing() {
        assert_eq!(
            names(
                "// use aot, got::solve\nfn main() -> () { print(\"anot::rank\")\n let aot = 1 }"
            ),
            Vec::<String>::new()
        );
    }
}
