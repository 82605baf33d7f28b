//! Tests (`sapc test`): a `test "name" { … }` becomes a function of no parameters; its
//! `assert`s stop it with both sides of a failed comparison; its `given`s hand the host
//! scripted answers (a stub is outlined as a function of the LLM function's
//! parameters); and, in a module lowered for tests, every LLM function asks the host
//! for a scripted answer before it asks the model.

use hir::Item;
use hir::defs::fn_signature;
use syntax::ast::{self, BinaryOp, Expr, ExprKind};

use super::{FnLower, ModuleLower};
use ir::*;

impl<'a, 'db> FnLower<'a, 'db> {
    pub(super) fn lower_test(m: &'a mut ModuleLower<'db>, item: Item<'db>, file: u32) -> Function {
        let db = m.db;
        let ast::ItemKind::Test(t) = &item.ast(db).kind else {
            unreachable!("lower_test of a non-test")
        };
        let span = SrcSpan {
            file,
            start: item.offset(db),
            end: item.offset(db) + item.ast(db).span.end,
        };
        let function = Function::new(
            format!("test {:?}", t.name),
            Vec::new(),
            Type::Unit,
            Effect::Contextual,
            span,
        );
        let mut lx = FnLower::new(m, item, file, function);
        let v = lx.lower_block(&t.body);
        let unit = if lx.terminated() { v } else { lx.unit() };
        lx.terminate(Terminator::Return(unit));
        lx.f
    }

    /// `assert cond, message`: when `cond` is false the run stops at the assertion, with
    /// the message and, for a comparison, both sides.
    pub(super) fn lower_assert(&mut self, span: syntax::Span, cond: &Expr, message: Option<&Expr>) {
        let (passed, sides) = match &cond.kind {
            ExprKind::Binary { op, lhs, rhs }
                if matches!(
                    op,
                    BinaryOp::Eq
                        | BinaryOp::Ne
                        | BinaryOp::Lt
                        | BinaryOp::Le
                        | BinaryOp::Gt
                        | BinaryOp::Ge
                ) =>
            {
                let operand_ty = self.type_of(lhs);
                let (l, r) = (self.expr(lhs), self.expr(rhs));
                let bin = match op {
                    BinaryOp::Eq => BinOp::Eq,
                    BinaryOp::Ne => BinOp::Ne,
                    BinaryOp::Lt => BinOp::Lt,
                    BinaryOp::Le => BinOp::Le,
                    BinaryOp::Gt => BinOp::Gt,
                    _ => BinOp::Ge,
                };
                let passed = self.emit(Op::Binary(bin, operand_ty, l, r), Type::Bool, None);
                (passed, Some((l, r)))
            }
            _ => (self.expr(cond), None),
        };
        let failed = self.new_block();
        let ok = self.new_block();
        self.terminate(Terminator::Branch(passed, ok, failed));
        self.switch_to(failed);
        let message = match message {
            Some(m) => self.expr(m),
            None => self.emit(Op::Const(Const::Str(String::new())), Type::Str, None),
        };
        let (left, right) = match sides {
            Some((l, r)) => (
                self.emit(Op::CallBuiltin(Builtin::ToString, vec![l]), Type::Str, None),
                self.emit(Op::CallBuiltin(Builtin::ToString, vec![r]), Type::Str, None),
            ),
            None => {
                let empty = self.emit(Op::Const(Const::Str(String::new())), Type::Str, None);
                (empty, empty)
            }
        };
        self.emit(
            Op::CallBuiltin(Builtin::AssertFailed, vec![message, left, right]),
            Type::Unit,
            Some(self.src(span)),
        );
        self.terminate(Terminator::Jump(ok));
        self.switch_to(ok);
    }

    /// `given f(…) => answer` and `given f { … }`: the answers handed to the host.
    pub(super) fn lower_given(&mut self, g: &ast::Given) {
        match &g.answers {
            ast::GivenAnswers::Stub { answer, .. } => {
                let stub = self.body.given_stubs.get(answer.id).unwrap_or_else(|| {
                    panic!(
                        "internal error: hir did not check the answer at {:?}",
                        answer.span
                    )
                });
                let function = self.m.funcs[&stub.function];
                let outlined = self.outline_stub(stub.function, &stub.params, answer);
                let f = self.int(function as i64);
                let tool = self.emit(
                    Op::Const(Const::Tool {
                        name: g.function.text(),
                        function: Some(outlined),
                    }),
                    Type::Tool,
                    None,
                );
                self.emit(
                    Op::CallBuiltin(Builtin::Given, vec![f, tool]),
                    Type::Unit,
                    None,
                );
            }
            ast::GivenAnswers::Script(answers) => {
                for a in answers {
                    let e = match a {
                        ast::Scripted::Value(e)
                        | ast::Scripted::Select(e)
                        | ast::Scripted::Fill(e) => e,
                    };
                    let Some(&function) = self.body.given_scripts.get(e.id) else {
                        continue;
                    };
                    let f = self.int(self.m.funcs[&function] as i64);
                    let mut args = vec![f];
                    match a {
                        ast::Scripted::Value(e) => {
                            args.push(self.str("value"));
                            args.push(self.str(""));
                            args.push(self.strings(&[]));
                            args.push(self.expr(e));
                        }
                        ast::Scripted::Select(e) | ast::Scripted::Fill(e) => {
                            let kind = if matches!(a, ast::Scripted::Select(_)) {
                                "select"
                            } else {
                                "fill"
                            };
                            let callee_name =
                                syntax::visit::callee_name(e).unwrap_or_default().to_owned();
                            let all: Vec<&Expr> = match &e.kind {
                                ExprKind::Call { args, .. } => args.iter().collect(),
                                ExprKind::MethodCall { receiver, args, .. } => {
                                    std::iter::once(&**receiver).chain(args).collect()
                                }
                                _ => Vec::new(),
                            };
                            let names: Vec<String> = match self.body.callees.get(e.id) {
                                Some(&callee) => self
                                    .callee_params(callee)
                                    .0
                                    .into_iter()
                                    .map(|p| p.name)
                                    .collect(),
                                None => Vec::new(),
                            };
                            args.push(self.str(kind));
                            args.push(self.str(&callee_name));
                            args.push(self.strings(&names));
                            for a in all {
                                args.push(self.expr(a));
                            }
                        }
                    }
                    self.emit(Op::CallBuiltin(Builtin::Script, args), Type::Unit, None);
                }
            }
        }
    }

    /// The answer of a stub as a function of the LLM function's parameters.
    fn outline_stub(
        &mut self,
        function: Item<'db>,
        bound: &[Option<hir::body::LocalId>],
        answer: &Expr,
    ) -> FuncId {
        let db = self.m.db;
        let sig = fn_signature(db, function);
        let params: Vec<Param> = sig
            .params
            .iter()
            .map(|p| Param {
                name: p.name.clone(),
                doc: None,
                ty: self.m.ty(&p.ty),
                trusted: false,
            })
            .collect();
        let ret = self.m.ty(&sig.ret);
        let id = self.m.module.functions.len() as FuncId;
        let stub = Function::new(
            format!("{}::given {}", self.f.name, function.name(db)),
            params.clone(),
            ret,
            Effect::Contextual,
            self.src(answer.span),
        );
        self.m.module.functions.push(stub.clone());
        let mut inner = FnLower::new(&mut *self.m, self.item, self.file, stub);
        for p in &params {
            inner.new_local(&p.name, p.ty.clone());
        }
        for (i, local) in bound.iter().enumerate() {
            if let Some(local) = local {
                inner.locals.insert(*local, i as LocalId);
            }
        }
        let v = inner.expr(answer);
        inner.terminate(Terminator::Return(v));
        let lowered = inner.f;
        self.m.module.functions[id as usize] = lowered;
        id
    }

    /// In a module lowered for tests: before an LLM function asks the model for its
    /// result, the host's scripted answer, if the test gave one. Returns the `Option`
    /// of the result.
    pub(super) fn scripted_result(&mut self, site: SiteId, ret: &Type) -> ValueId {
        let db = self.m.db;
        let function = self.m.funcs[&self.item];
        let mut args = vec![self.int(site as i64), self.int(function as i64)];
        let sig = fn_signature(db, self.item);
        for (i, p) in sig.params.iter().enumerate() {
            if p.ty == hir::Ty::Context {
                continue;
            }
            let ty = self.m.ty(&p.ty);
            args.push(self.emit(Op::Load(i as LocalId), ty, None));
        }
        self.emit(
            Op::CallBuiltin(Builtin::Stubbed, args),
            Type::Option(Box::new(ret.clone())),
            None,
        )
    }

    fn int(&mut self, n: i64) -> ValueId {
        self.emit(Op::Const(Const::Int(n)), Type::I64, None)
    }

    fn str(&mut self, s: &str) -> ValueId {
        self.emit(Op::Const(Const::Str(s.to_owned())), Type::Str, None)
    }

    fn strings(&mut self, items: &[String]) -> ValueId {
        let values: Vec<ValueId> = items.iter().map(|s| self.str(s)).collect();
        self.emit(Op::List(values), Type::List(Box::new(Type::Str)), None)
    }
}
