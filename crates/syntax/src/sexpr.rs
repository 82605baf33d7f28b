//! A compact, stable S-expression rendering of the AST, for snapshot tests and for
//! `sapc check --dump-ast`. Spans are left out so that snapshots survive edits to
//! whitespace; doc comments are kept because they are meaning (the model sees them).

use std::fmt::Write;

use crate::ast::*;

pub fn file(file: &SourceFile) -> String {
    let mut p = Printer {
        out: String::new(),
        indent: 0,
    };
    for item in &file.items {
        p.item(item);
        p.out.push('\n');
    }
    p.out
}

struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line(&mut self) {
        self.out.push('\n');
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
    }

    fn doc(&mut self, doc: &Option<Doc>) {
        if let Some(doc) = doc {
            let _ = write!(self.out, "(doc {:?}) ", doc.text);
        }
    }

    fn item(&mut self, item: &Item) {
        self.doc(&item.doc);
        match &item.kind {
            ItemKind::Test(t) => {
                let _ = write!(self.out, "(test {:?}", t.name);
                self.indent += 1;
                self.line();
                self.block(&t.body);
                self.indent -= 1;
                self.out.push(')');
            }
            ItemKind::Fn(f) => {
                let export = if f.exported { "export-" } else { "" };
                let _ = write!(self.out, "({export}fn {}", f.name.name);
                self.params(&f.params);
                self.ret(&f.ret);
                self.indent += 1;
                self.line();
                self.block(&f.body);
                self.indent -= 1;
                self.out.push(')');
            }
            ItemKind::ExternFn(f) => {
                let trusted = if f.trusted { "trusted-" } else { "" };
                let idempotent = if f.idempotent { "idempotent-" } else { "" };
                let _ = write!(self.out, "({trusted}{idempotent}extern-fn {}", f.name.name);
                if let Some((binding, _)) = &f.binding {
                    let _ = write!(self.out, " (binding {binding:?})");
                }
                self.params(&f.params);
                self.ret(&f.ret);
                self.out.push(')');
            }
            ItemKind::Struct(s) => {
                let _ = write!(self.out, "(struct {}", s.name.name);
                for field in &s.fields {
                    self.out.push(' ');
                    self.doc(&field.doc);
                    let _ = write!(self.out, "({} {})", field.name.name, ty(&field.ty));
                }
                self.out.push(')');
            }
            ItemKind::Enum(e) => {
                let _ = write!(self.out, "(enum {}", e.name.name);
                for v in &e.variants {
                    self.out.push(' ');
                    self.doc(&v.doc);
                    self.out.push_str(&v.name.name);
                }
                self.out.push(')');
            }
            ItemKind::TypeAlias(t) => {
                let _ = write!(self.out, "(type {} {})", t.name.name, ty(&t.ty));
            }
            ItemKind::Use(u) => {
                let _ = write!(self.out, "(use {}", u.path.text());
                match &u.kind {
                    UseKind::Single => {}
                    UseKind::Glob => self.out.push_str(" *"),
                    UseKind::Group(names) => {
                        let names: Vec<&str> = names.iter().map(|n| n.name.as_str()).collect();
                        let _ = write!(self.out, " {{{}}}", names.join(" "));
                    }
                }
                self.out.push(')');
            }
        }
    }

    fn params(&mut self, params: &[Param]) {
        self.out.push_str(" (");
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                self.out.push(' ');
            }
            self.doc(&p.doc);
            let trusted = if p.trusted.is_some() { "trusted " } else { "" };
            match &p.ty {
                Some(t) => {
                    let _ = write!(self.out, "({trusted}{} {})", p.name.name, ty(t));
                }
                None => self.out.push_str(&p.name.name),
            }
        }
        self.out.push(')');
    }

    fn ret(&mut self, ret: &Option<TypeExpr>) {
        if let Some(t) = ret {
            let _ = write!(self.out, " -> {}", ty(t));
        }
    }

    fn block(&mut self, block: &Block) {
        self.out.push_str("(block");
        self.indent += 1;
        for stmt in &block.stmts {
            self.line();
            self.stmt(stmt);
        }
        self.indent -= 1;
        self.out.push(')');
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Let { name, ty: t, init } => {
                let _ = write!(self.out, "(let {}", name.name);
                if let Some(t) = t {
                    let _ = write!(self.out, ": {}", ty(t));
                }
                self.out.push(' ');
                self.expr(init);
                self.out.push(')');
            }
            StmtKind::Assign { target, op, value } => {
                let _ = write!(self.out, "({} {} ", op.as_str(), target.name);
                self.expr(value);
                self.out.push(')');
            }
            StmtKind::Return(e) => {
                self.out.push_str("(return");
                if let Some(e) = e {
                    self.out.push(' ');
                    self.expr(e);
                }
                self.out.push(')');
            }
            StmtKind::Break => self.out.push_str("(break)"),
            StmtKind::Continue => self.out.push_str("(continue)"),
            StmtKind::While { cond, body } => {
                self.out.push_str("(while ");
                self.expr(cond);
                self.out.push(' ');
                self.block(body);
                self.out.push(')');
            }
            StmtKind::For { var, iter, body } => {
                let _ = write!(self.out, "(for {} ", var.name);
                self.expr(iter);
                self.out.push(' ');
                self.block(body);
                self.out.push(')');
            }
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assert { cond, message } => {
                self.out.push_str("(assert ");
                self.expr(cond);
                if let Some(m) = message {
                    self.out.push(' ');
                    self.expr(m);
                }
                self.out.push(')');
            }
            StmtKind::Given(g) => {
                let _ = write!(self.out, "(given {}", g.function.text());
                match &g.answers {
                    GivenAnswers::Stub { params, answer } => {
                        self.out.push_str(" (");
                        let names: Vec<&str> = params
                            .iter()
                            .map(|p| p.as_ref().map_or("_", |p| p.name.as_str()))
                            .collect();
                        self.out.push_str(&names.join(" "));
                        self.out.push_str(") => ");
                        self.expr(answer);
                    }
                    GivenAnswers::Script(answers) => {
                        for a in answers {
                            self.out.push(' ');
                            match a {
                                Scripted::Value(e) => self.expr(e),
                                Scripted::Select(e) => {
                                    self.out.push_str("(select ");
                                    self.expr(e);
                                    self.out.push(')');
                                }
                                Scripted::Fill(e) => {
                                    self.out.push_str("(fill ");
                                    self.expr(e);
                                    self.out.push(')');
                                }
                            }
                        }
                    }
                }
                self.out.push(')');
            }
        }
    }

    fn list(&mut self, head: &str, exprs: &[Expr]) {
        let _ = write!(self.out, "({head}");
        for e in exprs {
            self.out.push(' ');
            self.expr(e);
        }
        self.out.push(')');
    }

    fn expr(&mut self, expr: &Expr) {
        match &expr.kind {
            ExprKind::Int(n) => {
                let _ = write!(self.out, "{n}");
            }
            ExprKind::Float(f) => {
                let _ = write!(self.out, "{f:?}");
            }
            ExprKind::Str(s) => {
                let _ = write!(self.out, "{s:?}");
            }
            ExprKind::Bool(b) => {
                let _ = write!(self.out, "{b}");
            }
            ExprKind::Unit => self.out.push_str("()"),
            ExprKind::List(items) => self.list("list", items),
            ExprKind::StructLit { path, fields } => {
                let _ = write!(self.out, "(new {}", path.text());
                for f in fields {
                    let _ = write!(self.out, " ({}", f.name.name);
                    if let Some(v) = &f.value {
                        self.out.push(' ');
                        self.expr(v);
                    }
                    self.out.push(')');
                }
                self.out.push(')');
            }
            ExprKind::Path(p) => self.out.push_str(&p.text()),
            ExprKind::Placeholder => self.out.push('_'),
            ExprKind::Call { callee, args } => {
                self.out.push_str("(call ");
                self.expr(callee);
                for a in args {
                    self.out.push(' ');
                    self.expr(a);
                }
                self.out.push(')');
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => {
                let _ = write!(self.out, "(method {} ", method.name);
                self.expr(receiver);
                for a in args {
                    self.out.push(' ');
                    self.expr(a);
                }
                self.out.push(')');
            }
            ExprKind::Field { base, name } => {
                self.out.push_str("(. ");
                self.expr(base);
                let _ = write!(self.out, " {})", name.name);
            }
            ExprKind::Index { base, index } => {
                self.out.push_str("(index ");
                self.expr(base);
                self.out.push(' ');
                self.expr(index);
                self.out.push(')');
            }
            ExprKind::Unary { op, operand } => {
                let _ = write!(self.out, "({} ", op.as_str());
                self.expr(operand);
                self.out.push(')');
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let _ = write!(self.out, "({} ", op.as_str());
                self.expr(lhs);
                self.out.push(' ');
                self.expr(rhs);
                self.out.push(')');
            }
            ExprKind::Inject(e) => {
                self.out.push_str("(inject ");
                self.expr(e);
                self.out.push(')');
            }
            ExprKind::Paren(e) => self.expr(e),
            ExprKind::Block(b) => self.block(b),
            ExprKind::If {
                branches,
                else_block,
            } => {
                self.out.push_str("(if");
                self.indent += 1;
                for b in branches {
                    self.line();
                    self.expr(&b.cond);
                    self.out.push(' ');
                    self.block(&b.body);
                }
                if let Some(e) = else_block {
                    self.line();
                    self.out.push_str("else ");
                    self.block(e);
                }
                self.indent -= 1;
                self.out.push(')');
            }
            ExprKind::Select { arms } => {
                self.out.push_str("(select");
                self.indent += 1;
                for arm in arms {
                    self.line();
                    self.out.push_str("(arm ");
                    self.expr(&arm.call);
                    if let Some(b) = &arm.binding {
                        let _ = write!(self.out, " as {}", b.name);
                    }
                    self.out.push_str(" => ");
                    self.expr(&arm.body);
                    self.out.push(')');
                }
                self.indent -= 1;
                self.out.push(')');
            }
            ExprKind::ParallelFor { var, iter, body } => {
                let _ = write!(self.out, "(parallel-for {} ", var.name);
                self.expr(iter);
                self.out.push(' ');
                self.block(body);
                self.out.push(')');
            }
        }
    }
}

fn ty(t: &TypeExpr) -> String {
    match &t.kind {
        TypeExprKind::Unit => "()".to_owned(),
        TypeExprKind::Named { path, args } if args.is_empty() => path.text(),
        TypeExprKind::Named { path, args } => {
            let args: Vec<String> = args.iter().map(ty).collect();
            format!("{}<{}>", path.text(), args.join(", "))
        }
    }
}
