//! Pest pairs → owned AST. Operator precedence is resolved here with pest's Pratt parser;
//! literal values (escapes, numbers, multi-line strings) are decoded in `literals`, and the few
//! rules a PEG cannot express well are checked here with located diagnostics.

use std::cell::{Cell, RefCell};

use pest::iterators::Pair;
use pest::pratt_parser::{Assoc, Op, PrattParser};

use crate::Span;
use crate::ast::*;
use crate::diagnostic::Diagnostic;
use crate::grammar::Rule;

mod literals;

/// How deep the expression tree may grow along one path (operators, postfix chains and
/// nested blocks all count). Bounds every later recursive walk of the tree.
pub(crate) const MAX_EXPR_DEPTH: u32 = 512;

pub(crate) struct Builder<'s> {
    src: &'s str,
    /// Pair spans are relative to the item's start, `offset` bytes into the file.
    offset: usize,
    pratt: &'s PrattParser<Rule>,
    pub diagnostics: RefCell<Vec<Diagnostic>>,
    depth: Cell<u32>,
    depth_reported: Cell<bool>,
    /// The next expression id; a builder builds one item.
    next_expr: Cell<u32>,
}

pub(crate) fn pratt() -> PrattParser<Rule> {
    PrattParser::new()
        .op(Op::infix(Rule::or, Assoc::Left))
        .op(Op::infix(Rule::and, Assoc::Left))
        .op(Op::infix(Rule::eq, Assoc::Left) | Op::infix(Rule::ne, Assoc::Left))
        .op(Op::infix(Rule::lt, Assoc::Left)
            | Op::infix(Rule::le, Assoc::Left)
            | Op::infix(Rule::gt, Assoc::Left)
            | Op::infix(Rule::ge, Assoc::Left))
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left)
            | Op::infix(Rule::div, Assoc::Left)
            | Op::infix(Rule::rem, Assoc::Left))
        .op(Op::prefix(Rule::neg) | Op::prefix(Rule::not))
}

impl<'s> Builder<'s> {
    pub fn new(src: &'s str, offset: usize, pratt: &'s PrattParser<Rule>) -> Builder<'s> {
        Builder {
            src,
            offset,
            pratt,
            diagnostics: RefCell::new(Vec::new()),
            depth: Cell::new(0),
            depth_reported: Cell::new(false),
            next_expr: Cell::new(0),
        }
    }

    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        Span::new(self.offset + s.start(), self.offset + s.end())
    }

    fn error(&self, diagnostic: Diagnostic) {
        self.diagnostics.borrow_mut().push(diagnostic);
    }

    // ------------------------------------------------------------ items

    pub fn item(&self, pair: Pair<'_, Rule>) -> Item {
        let span = self.span(&pair);
        let mut inner = pair.into_inner().peekable();
        let doc = self.docs(&mut inner);
        let body = inner.next().expect("grammar: item has a body");
        let kind = match body.as_rule() {
            Rule::test_item => {
                let mut it = body.into_inner();
                let name = it.next().unwrap();
                let name_span = self.span(&name);
                ItemKind::Test(Test {
                    name: self.string(name),
                    name_span,
                    body: self.block(it.next().unwrap()),
                })
            }
            Rule::fn_item => {
                let mut it = body.into_inner().peekable();
                let exported = it.next_if(|p| p.as_rule() == Rule::kw_export).is_some();
                let name = self.ident(it.next().unwrap());
                let params = self.params(it.next().unwrap());
                let mut ret = None;
                let mut block = None;
                for p in it {
                    match p.as_rule() {
                        Rule::type_expr => ret = Some(self.type_expr(p)),
                        _ => block = Some(self.block(p)),
                    }
                }
                ItemKind::Fn(Fn {
                    exported,
                    name,
                    params,
                    ret,
                    body: block.unwrap(),
                })
            }
            Rule::extern_fn => {
                let mut it = body.into_inner().peekable();
                let trusted = it.next_if(|p| p.as_rule() == Rule::kw_trusted).is_some();
                let idempotent = it.next_if(|p| p.as_rule() == Rule::kw_idempotent).is_some();
                let mut it = it.filter(|p| p.as_rule() != Rule::kw_fn).peekable();
                let binding = it
                    .next_if(|p| p.as_rule() == Rule::extern_binding)
                    .map(|p| {
                        let span = self.span(&p);
                        (self.string(p.into_inner().next().unwrap()), span)
                    });
                let name = self.ident(it.next().unwrap());
                let params = self.params(it.next().unwrap());
                let ret = it.next().map(|p| self.type_expr(p));
                ItemKind::ExternFn(ExternFn {
                    trusted,
                    idempotent,
                    binding,
                    name,
                    params,
                    ret,
                })
            }
            Rule::struct_item => {
                let mut it = body.into_inner();
                let name = self.ident(it.next().unwrap());
                let fields = it
                    .map(|f| {
                        let span = self.span(&f);
                        let mut fi = f.into_inner().peekable();
                        let doc = self.docs(&mut fi);
                        let name = self.ident(fi.next().unwrap());
                        let ty = self.type_expr(fi.next().unwrap());
                        Field {
                            doc,
                            name,
                            ty,
                            span,
                        }
                    })
                    .collect();
                ItemKind::Struct(Struct { name, fields })
            }
            Rule::enum_item => {
                let mut it = body.into_inner();
                let name = self.ident(it.next().unwrap());
                let variants = it
                    .map(|v| {
                        let mut vi = v.into_inner().peekable();
                        let doc = self.docs(&mut vi);
                        Variant {
                            doc,
                            name: self.ident(vi.next().unwrap()),
                        }
                    })
                    .collect();
                ItemKind::Enum(Enum { name, variants })
            }
            Rule::alias_item => {
                let mut it = body.into_inner();
                let name = self.ident(it.next().unwrap());
                let ty = self.type_expr(it.next().unwrap());
                ItemKind::TypeAlias(TypeAlias { name, ty })
            }
            Rule::use_item => {
                let mut it = body.into_inner();
                let path = self.path(it.next().unwrap());
                let kind = match it.next() {
                    None => UseKind::Single,
                    Some(p) if p.as_rule() == Rule::use_glob => UseKind::Glob,
                    Some(p) => UseKind::Group(p.into_inner().map(|i| self.ident(i)).collect()),
                };
                ItemKind::Use(Use { path, kind })
            }
            r => unreachable!("grammar: unexpected item rule {r:?}"),
        };
        Item { doc, kind, span }
    }

    /// Consumes leading `doc_comment` pairs and joins them.
    fn docs<'i>(
        &self,
        it: &mut std::iter::Peekable<impl Iterator<Item = Pair<'i, Rule>>>,
    ) -> Option<Doc> {
        let mut text = String::new();
        let mut span: Option<Span> = None;
        while let Some(p) = it.next_if(|p| p.as_rule() == Rule::doc_comment) {
            let line = &p.as_str()[3..];
            let line = line
                .strip_prefix(' ')
                .unwrap_or(line)
                .trim_end_matches('\r');
            if span.is_some() {
                text.push('\n');
            }
            text.push_str(line);
            let s = self.span(&p);
            span = Some(span.map_or(s, |old| old.to(s)));
        }
        span.map(|span| Doc { text, span })
    }

    fn params(&self, pair: Pair<'_, Rule>) -> Vec<Param> {
        pair.into_inner()
            .map(|p| {
                let span = self.span(&p);
                let mut it = p.into_inner().peekable();
                let doc = self.docs(&mut it);
                let trusted = it
                    .next_if(|p| p.as_rule() == Rule::kw_trusted)
                    .map(|p| self.span(&p));
                let name = self.ident(it.next().unwrap());
                let ty = it.next().map(|t| self.type_expr(t));
                Param {
                    doc,
                    trusted,
                    name,
                    ty,
                    span,
                }
            })
            .collect()
    }

    fn ident(&self, pair: Pair<'_, Rule>) -> Ident {
        Ident {
            name: pair.as_str().to_owned(),
            span: self.span(&pair),
        }
    }

    fn path(&self, pair: Pair<'_, Rule>) -> Path {
        let span = self.span(&pair);
        Path {
            segments: pair.into_inner().map(|i| self.ident(i)).collect(),
            span,
        }
    }

    fn type_expr(&self, pair: Pair<'_, Rule>) -> TypeExpr {
        // pest's span of `path ~ type_args?` takes in the whitespace skipped before the
        // absent `type_args`; the type ends where its last token does.
        let span = self.span(&pair);
        let trimmed = pair.as_str().trim_end().len();
        let span = Span::new(span.start as usize, span.start as usize + trimmed);
        let inner = pair.into_inner().next().unwrap();
        let kind = match inner.as_rule() {
            Rule::unit_type => TypeExprKind::Unit,
            _ => {
                let mut it = inner.into_inner();
                let path = self.path(it.next().unwrap());
                let args = match it.next() {
                    Some(a) => a.into_inner().map(|t| self.type_expr(t)).collect(),
                    None => Vec::new(),
                };
                TypeExprKind::Named { path, args }
            }
        };
        TypeExpr { kind, span }
    }

    // ------------------------------------------------------------ statements

    fn block(&self, pair: Pair<'_, Rule>) -> Block {
        let span = self.span(&pair);
        let Some(_guard) = self.enter(1, span) else {
            return Block {
                stmts: Vec::new(),
                span,
            };
        };
        let stmts = pair.into_inner().map(|s| self.stmt(s)).collect();
        Block { stmts, span }
    }

    fn stmt(&self, pair: Pair<'_, Rule>) -> Stmt {
        let mut it = pair.into_inner().peekable();
        while let Some(doc) = it.next_if(|p| p.as_rule() == Rule::stmt_doc) {
            self.error(
                Diagnostic::warning(
                    "W0001",
                    self.span(&doc),
                    "this doc comment documents nothing",
                )
                .with_help(
                    "doc comments describe items, parameters, fields and variants; use `//` here",
                ),
            );
        }
        let inner = it.next().expect("grammar: statement has a body");
        let span = self.span(&inner);
        let kind = match inner.as_rule() {
            Rule::let_stmt => {
                let mut it = inner.into_inner();
                let name = self.ident(it.next().unwrap());
                let next = it.next().unwrap();
                let (ty, init) = if next.as_rule() == Rule::type_expr {
                    (Some(self.type_expr(next)), self.expr(it.next().unwrap()))
                } else {
                    (None, self.expr(next))
                };
                StmtKind::Let { name, ty, init }
            }
            Rule::assign_stmt => {
                let mut it = inner.into_inner();
                let target = self.ident(it.next().unwrap());
                let op = match it.next().unwrap().as_str() {
                    "+=" => AssignOp::Add,
                    "-=" => AssignOp::Sub,
                    "*=" => AssignOp::Mul,
                    "/=" => AssignOp::Div,
                    "%=" => AssignOp::Rem,
                    _ => AssignOp::Assign,
                };
                StmtKind::Assign {
                    target,
                    op,
                    value: self.expr(it.next().unwrap()),
                }
            }
            Rule::return_stmt => StmtKind::Return(inner.into_inner().next().map(|e| self.expr(e))),
            Rule::break_stmt => StmtKind::Break,
            Rule::continue_stmt => StmtKind::Continue,
            Rule::while_stmt => {
                let mut it = inner.into_inner();
                let cond = self.expr(it.next().unwrap());
                StmtKind::While {
                    cond,
                    body: self.block(it.next().unwrap()),
                }
            }
            Rule::for_stmt => {
                let mut it = children(inner);
                let var = self.ident(it.next().unwrap());
                let iter = self.expr(it.next().unwrap());
                StmtKind::For {
                    var,
                    iter,
                    body: self.block(it.next().unwrap()),
                }
            }
            Rule::expr_stmt => StmtKind::Expr(self.expr(inner.into_inner().next().unwrap())),
            Rule::assert_stmt => {
                let mut it = inner.into_inner();
                let cond = self.expr(it.next().unwrap());
                let message = it.next().map(|m| self.expr(m));
                // The statement ends with its last expression (the grammar's optional
                // `, message` may have taken the whitespace after it).
                let end = message.as_ref().map_or(cond.span.end, |m| m.span.end);
                return Stmt {
                    kind: StmtKind::Assert { cond, message },
                    span: Span::new(span.start as usize, end as usize),
                };
            }
            Rule::given_stmt => {
                let mut it = inner.into_inner();
                let function = self.path(it.next().unwrap());
                let answers = it.next().unwrap();
                let answers = match answers.as_rule() {
                    Rule::given_stub => {
                        let mut params = Vec::new();
                        let mut answer = None;
                        for p in answers.into_inner() {
                            match p.as_rule() {
                                Rule::given_param => {
                                    let p = p.into_inner().next().unwrap();
                                    params.push(match p.as_rule() {
                                        Rule::ident => Some(self.ident(p)),
                                        _ => None,
                                    });
                                }
                                _ => answer = Some(self.expr(p)),
                            }
                        }
                        GivenAnswers::Stub {
                            params,
                            answer: answer.expect("grammar: a stub has an answer"),
                        }
                    }
                    _ => GivenAnswers::Script(
                        answers
                            .into_inner()
                            .map(|a| {
                                let a = a.into_inner().next().unwrap();
                                match a.as_rule() {
                                    Rule::given_select => {
                                        Scripted::Select(self.term(a.into_inner().next().unwrap()))
                                    }
                                    Rule::given_fill => {
                                        Scripted::Fill(self.term(a.into_inner().nth(1).unwrap()))
                                    }
                                    _ => Scripted::Value(self.expr(a)),
                                }
                            })
                            .collect(),
                    ),
                };
                StmtKind::Given(Given { function, answers })
            }
            r => unreachable!("grammar: unexpected statement rule {r:?}"),
        };
        Stmt { kind, span }
    }

    // ------------------------------------------------------------ expressions

    /// Records `cost` more levels of tree depth for the duration of the guard; `None`
    /// (with one diagnostic per item) when that exceeds [`MAX_EXPR_DEPTH`].
    fn enter(&self, cost: u32, span: Span) -> Option<DepthGuard<'_>> {
        let depth = self.depth.get() + cost;
        if depth > MAX_EXPR_DEPTH {
            if !self.depth_reported.replace(true) {
                self.error(
                    Diagnostic::error("E0004", span, "nesting too deep")
                        .with_label(format!(
                            "this expression nests more than {MAX_EXPR_DEPTH} levels deep"
                        ))
                        .with_help("split the expression into smaller functions or `let` bindings"),
                );
            }
            return None;
        }
        self.depth.set(depth);
        Some(DepthGuard {
            cell: &self.depth,
            cost,
        })
    }

    /// A finished expression, with the next id of the item.
    fn node(&self, kind: ExprKind, span: Span) -> Expr {
        let id = ExprId(self.next_expr.get());
        self.next_expr.set(id.0 + 1);
        Expr { kind, span, id }
    }

    fn unit(&self, span: Span) -> Expr {
        self.node(ExprKind::Unit, span)
    }

    /// An `expr` or `expr_nostruct` pair: operands and operators in sequence.
    fn expr(&self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.span(&pair);
        let operators = pair
            .clone()
            .into_inner()
            .filter(|p| !is_term(p.as_rule()))
            .count();
        let Some(_guard) = self.enter(operators as u32 + 1, span) else {
            return self.unit(span);
        };
        self.pratt
            .map_primary(|term| self.term(term))
            .map_prefix(|op, operand| {
                let op_span = self.span(&op);
                let op = if op.as_rule() == Rule::neg {
                    UnaryOp::Neg
                } else {
                    UnaryOp::Not
                };
                let span = op_span.to(operand.span);
                self.node(
                    ExprKind::Unary {
                        op,
                        operand: Box::new(operand),
                    },
                    span,
                )
            })
            .map_infix(|lhs, op_pair, rhs| {
                if op_pair.as_rule() == Rule::sub {
                    self.check_line_leading_minus(&lhs, self.span(&op_pair));
                }
                let op = match op_pair.as_rule() {
                    Rule::or => BinaryOp::Or,
                    Rule::and => BinaryOp::And,
                    Rule::eq => BinaryOp::Eq,
                    Rule::ne => BinaryOp::Ne,
                    Rule::lt => BinaryOp::Lt,
                    Rule::le => BinaryOp::Le,
                    Rule::gt => BinaryOp::Gt,
                    Rule::ge => BinaryOp::Ge,
                    Rule::add => BinaryOp::Add,
                    Rule::sub => BinaryOp::Sub,
                    Rule::mul => BinaryOp::Mul,
                    Rule::div => BinaryOp::Div,
                    _ => BinaryOp::Rem,
                };
                let span = lhs.span.to(rhs.span);
                self.node(
                    ExprKind::Binary {
                        op,
                        lhs: Box::new(lhs),
                        rhs: Box::new(rhs),
                    },
                    span,
                )
            })
            .parse(pair.into_inner())
    }

    /// `a` on one line and `-b` on the next is one subtraction, as in Rust; people who
    /// leave out semicolons may have meant two statements, so say so.
    fn check_line_leading_minus(&self, lhs: &Expr, op: Span) {
        let gap = &self.src[lhs.span.end as usize..op.start as usize];
        let after = self.src[op.end as usize..].chars().next();
        if gap.contains('\n') && after.is_some_and(|c| !c.is_whitespace()) {
            self.error(
                Diagnostic::warning("W0002", op, "this `-` continues the expression on the line above")
                    .with_label("subtraction, not negation")
                    .with_help("write `;` at the end of the line above for a new statement, or `- ` with a space to keep the subtraction"),
            );
        }
    }

    /// A primary followed by postfix operations, folded left to right.
    fn term(&self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.span(&pair);
        let mut it = pair.into_inner().peekable();
        let postfix_count = it.len().saturating_sub(1);
        let Some(_guard) = self.enter(postfix_count as u32, span) else {
            return self.unit(span);
        };
        let mut expr = self.primary(it.next().expect("grammar: term has a primary"));
        for post in it {
            let post_span = self.span(&post);
            let span = expr.span.to(post_span);
            expr = match post.as_rule() {
                Rule::call_args => {
                    let args = self.args(post);
                    let kind = match expr.kind {
                        ExprKind::Field { base, name } => ExprKind::MethodCall {
                            receiver: base,
                            method: name,
                            args,
                        },
                        kind => ExprKind::Call {
                            callee: Box::new(Expr {
                                kind,
                                span: expr.span,
                                id: expr.id,
                            }),
                            args,
                        },
                    };
                    self.node(kind, span)
                }
                Rule::index => {
                    let index = self.expr(post.into_inner().next().unwrap());
                    self.node(
                        ExprKind::Index {
                            base: Box::new(expr),
                            index: Box::new(index),
                        },
                        span,
                    )
                }
                Rule::inject => self.node(ExprKind::Inject(Box::new(expr)), span),
                Rule::field_access => {
                    let name = self.ident(post.into_inner().next().unwrap());
                    self.node(
                        ExprKind::Field {
                            base: Box::new(expr),
                            name,
                        },
                        span,
                    )
                }
                r => unreachable!("grammar: unexpected postfix rule {r:?}"),
            };
        }
        expr
    }

    /// Call arguments: the only place a placeholder `_` may stand.
    fn args(&self, pair: Pair<'_, Rule>) -> Vec<Expr> {
        pair.into_inner()
            .map(|arg| {
                if is_bare_placeholder(&arg) {
                    self.node(ExprKind::Placeholder, self.span(&arg))
                } else {
                    self.expr(arg)
                }
            })
            .collect()
    }

    fn primary(&self, pair: Pair<'_, Rule>) -> Expr {
        let span = self.span(&pair);
        let kind = match pair.as_rule() {
            Rule::int_lit => self.int(pair.as_str(), span),
            Rule::float_lit => match pair.as_str().replace('_', "").parse::<f64>() {
                Ok(f) if f.is_finite() => ExprKind::Float(f),
                _ => {
                    self.error(
                        Diagnostic::error("E0006", span, "this number is too large for `f64`")
                            .with_label("out of range"),
                    );
                    ExprKind::Float(0.0)
                }
            },
            Rule::bool_lit => ExprKind::Bool(pair.as_str() == "true"),
            Rule::string_lit => ExprKind::Str(self.string(pair.into_inner().next().unwrap())),
            Rule::unit_lit => ExprKind::Unit,
            Rule::paren => ExprKind::Paren(Box::new(self.expr(pair.into_inner().next().unwrap()))),
            Rule::list_lit => ExprKind::List(pair.into_inner().map(|e| self.expr(e)).collect()),
            Rule::block => ExprKind::Block(self.block(pair)),
            Rule::path => ExprKind::Path(self.path(pair)),
            Rule::placeholder => {
                self.error(
                    Diagnostic::error(
                        "E0007",
                        span,
                        "`_` can only stand for an argument of a call",
                    )
                    .with_label("placeholder outside a call's arguments")
                    .with_help(
                        "the model fills `_` arguments, as in `analyze_code(ctx, _)`; \
                             anywhere else write a value",
                    ),
                );
                ExprKind::Placeholder
            }
            Rule::struct_lit => {
                let mut it = pair.into_inner();
                let path = self.path(it.next().unwrap());
                let fields = it
                    .map(|f| {
                        let mut fi = f.into_inner();
                        let name = self.ident(fi.next().unwrap());
                        FieldInit {
                            name,
                            value: fi.next().map(|e| self.expr(e)),
                        }
                    })
                    .collect();
                ExprKind::StructLit { path, fields }
            }
            Rule::if_expr => {
                let mut branches = Vec::new();
                let mut else_block = None;
                let mut it = pair.into_inner();
                let cond = self.expr(it.next().unwrap());
                branches.push(IfBranch {
                    cond,
                    body: self.block(it.next().unwrap()),
                });
                for p in it {
                    let rule = p.as_rule();
                    let mut pi = children(p);
                    if rule == Rule::else_if {
                        let cond = self.expr(pi.next().unwrap());
                        branches.push(IfBranch {
                            cond,
                            body: self.block(pi.next().unwrap()),
                        });
                    } else {
                        else_block = Some(self.block(pi.next().unwrap()));
                    }
                }
                ExprKind::If {
                    branches,
                    else_block,
                }
            }
            Rule::select_expr => {
                let arms = pair.into_inner().map(|arm| self.select_arm(arm)).collect();
                ExprKind::Select { arms }
            }
            Rule::parallel_for => {
                let mut it = children(pair);
                let var = self.ident(it.next().unwrap());
                let iter = Box::new(self.expr(it.next().unwrap()));
                ExprKind::ParallelFor {
                    var,
                    iter,
                    body: Box::new(self.block(it.next().unwrap())),
                }
            }
            r => unreachable!("grammar: unexpected primary rule {r:?}"),
        };
        self.node(kind, span)
    }

    fn select_arm(&self, pair: Pair<'_, Rule>) -> SelectArm {
        let span = self.span(&pair);
        let mut it = children(pair);
        let call = self.term(it.next().unwrap());
        if !matches!(
            call.kind,
            ExprKind::Call { .. } | ExprKind::MethodCall { .. }
        ) {
            self.error(
                Diagnostic::error("E0008", call.span, "a `select` arm must start with a call")
                    .with_label("not a call")
                    .with_help(
                        "write the tool the model may choose, as in `add(_, _) as sum => sum`",
                    ),
            );
        }
        let next = it.next().unwrap();
        let (binding, body) = if next.as_rule() == Rule::ident {
            (Some(self.ident(next)), self.expr(it.next().unwrap()))
        } else {
            (None, self.expr(next))
        };
        SelectArm {
            call,
            binding,
            body,
            span,
        }
    }
}

struct DepthGuard<'a> {
    cell: &'a Cell<u32>,
    cost: u32,
}

impl Drop for DepthGuard<'_> {
    fn drop(&mut self) {
        self.cell.set(self.cell.get() - self.cost);
    }
}

/// The inner pairs without the keyword tokens (`kw_in`, …), which carry no meaning.
fn children(pair: Pair<'_, Rule>) -> impl Iterator<Item = Pair<'_, Rule>> {
    pair.into_inner().filter(|p| {
        !matches!(
            p.as_rule(),
            Rule::kw_fn | Rule::kw_if | Rule::kw_in | Rule::kw_as | Rule::kw_for | Rule::kw_export
        )
    })
}

fn is_term(rule: Rule) -> bool {
    matches!(rule, Rule::term | Rule::term_nostruct)
}

/// An argument that is exactly `_` (an `expr` holding one term holding a placeholder).
fn is_bare_placeholder(arg: &Pair<'_, Rule>) -> bool {
    let mut it = arg.clone().into_inner();
    match (it.next(), it.next()) {
        (Some(term), None) if is_term(term.as_rule()) => {
            let mut t = term.into_inner();
            matches!((t.next(), t.next()), (Some(p), None) if p.as_rule() == Rule::placeholder)
        }
        _ => false,
    }
}
