//! The owned syntax tree. Every node carries its byte [`Span`]; doc comments stay on the
//! item, parameter, field or variant they document. The tree is plain data: later layers
//! read the fields directly.

use crate::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct SourceFile {
    pub items: Vec<Item>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// `a::b::c`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Path {
    pub segments: Vec<Ident>,
    pub span: Span,
}

impl Path {
    /// The segments joined with `::`.
    pub fn text(&self) -> String {
        let names: Vec<&str> = self.segments.iter().map(|s| s.name.as_str()).collect();
        names.join("::")
    }

    pub fn last(&self) -> &Ident {
        self.segments
            .last()
            .expect("a path has at least one segment")
    }
}

/// The text of consecutive `///` lines, one leading space removed from each line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Doc {
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub doc: Option<Doc>,
    pub kind: ItemKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    Fn(Fn),
    ExternFn(ExternFn),
    Struct(Struct),
    Enum(Enum),
    TypeAlias(TypeAlias),
    Use(Use),
    Test(Test),
}

/// `test "name" { … }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Test {
    /// The name, decoded.
    pub name: String,
    pub name_span: Span,
    pub body: Block,
}

impl Item {
    /// The name the item declares; `None` for `use`.
    pub fn name(&self) -> Option<&Ident> {
        match &self.kind {
            ItemKind::Fn(f) => Some(&f.name),
            ItemKind::ExternFn(f) => Some(&f.name),
            ItemKind::Struct(s) => Some(&s.name),
            ItemKind::Enum(e) => Some(&e.name),
            ItemKind::TypeAlias(t) => Some(&t.name),
            ItemKind::Use(_) | ItemKind::Test(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fn {
    /// `export fn`: offered as a tool by `sapc mcp serve`.
    pub exported: bool,
    pub name: Ident,
    pub params: Vec<Param>,
    /// `None` when the signature has no `->`: the function returns `()`.
    pub ret: Option<TypeExpr>,
    pub body: Block,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExternFn {
    /// `trusted extern fn`: what it returns is trusted.
    pub trusted: bool,
    /// `idempotent extern fn`: safe to call again when a journaled run stopped during
    /// a call of it.
    pub idempotent: bool,
    /// The string of `extern "mcp:notes" fn`: where the tool lives, with its span.
    pub binding: Option<(String, Span)>,
    pub name: Ident,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub doc: Option<Doc>,
    /// The span of `trusted` in `trusted name: T`.
    pub trusted: Option<Span>,
    pub name: Ident,
    /// `None` for the slides' shorthand `fn f(Context, code)`; `hir` decides its meaning.
    pub ty: Option<TypeExpr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Struct {
    pub name: Ident,
    pub fields: Vec<Field>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub doc: Option<Doc>,
    pub name: Ident,
    pub ty: TypeExpr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Enum {
    pub name: Ident,
    pub variants: Vec<Variant>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub doc: Option<Doc>,
    pub name: Ident,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TypeAlias {
    pub name: Ident,
    pub ty: TypeExpr,
}

/// `use a::b`, `use a::*`, `use a::{b, c}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Use {
    pub path: Path,
    pub kind: UseKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum UseKind {
    /// The path names one item (or a module).
    Single,
    Glob,
    Group(Vec<Ident>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub kind: TypeExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeExprKind {
    Unit,
    /// `i32`, `List<T>`, `aot::Plan`.
    Named {
        path: Path,
        args: Vec<TypeExpr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Let {
        name: Ident,
        ty: Option<TypeExpr>,
        init: Expr,
    },
    /// `x = e`, `x += e`, …
    Assign {
        target: Ident,
        op: AssignOp,
        value: Expr,
    },
    Return(Option<Expr>),
    Break,
    Continue,
    While {
        cond: Expr,
        body: Block,
    },
    For {
        var: Ident,
        iter: Expr,
        body: Block,
    },
    Expr(Expr),
    /// `assert cond` or `assert cond, message`.
    Assert {
        cond: Expr,
        message: Option<Expr>,
    },
    /// `given f(a, b) => answer` or `given f { … }`, in a test.
    Given(Given),
}

/// Scripted model answers for the LLM calls of one function, in a test.
#[derive(Clone, Debug, PartialEq)]
pub struct Given {
    pub function: Path,
    pub answers: GivenAnswers,
}

#[derive(Clone, Debug, PartialEq)]
pub enum GivenAnswers {
    /// `given f(a, _) => expr`: every call of the LLM function `f` is answered with
    /// `expr`, over its parameters (a `_` leaves one unnamed).
    Stub {
        params: Vec<Option<Ident>>,
        answer: Expr,
    },
    /// `given f { … }`: the decisions made in `f`, in the order they are asked.
    Script(Vec<Scripted>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Scripted {
    /// A value of `f`'s result.
    Value(Expr),
    /// `select g(…)`: the clause calling `g`, with its arguments.
    Select(Expr),
    /// `fill g(…)`: the `_` arguments of a call of `g`, given as the whole call.
    Fill(Expr),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AssignOp {
    Assign,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    pub id: ExprId,
}

/// An expression's id, unique within its item: the builder numbers an item's expressions
/// as it finishes them (children before their parent), from 0. Later layers keep
/// per-expression facts by id, not by span, so they never have to guess.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// Integer literals keep their magnitude; `-` is a unary operator, so the largest
    /// literal is `2^63` (for `-9223372036854775808`) and `hir` checks the range.
    Int(u64),
    Float(f64),
    Str(String),
    Bool(bool),
    Unit,
    List(Vec<Expr>),
    StructLit {
        path: Path,
        fields: Vec<FieldInit>,
    },
    Path(Path),
    /// `_`, only ever a direct call argument (the builder rejects it elsewhere).
    Placeholder,
    Call {
        callee: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `receiver.method(args)`, sugar for `method(receiver, args)`.
    MethodCall {
        receiver: Box<Expr>,
        method: Ident,
        args: Vec<Expr>,
    },
    Field {
        base: Box<Expr>,
        name: Ident,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// Postfix `e!`: add `e` to the current context.
    Inject(Box<Expr>),
    Paren(Box<Expr>),
    Block(Block),
    If {
        branches: Vec<IfBranch>,
        else_block: Option<Block>,
    },
    Select {
        arms: Vec<SelectArm>,
    },
    /// The body is boxed to keep `ExprKind` (and the parser's stack frames) small.
    ParallelFor {
        var: Ident,
        iter: Box<Expr>,
        body: Box<Block>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct FieldInit {
    pub name: Ident,
    /// `None` for the shorthand `Name { x }`.
    pub value: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct IfBranch {
    pub cond: Expr,
    pub body: Block,
}

/// `call as name => body`.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectArm {
    /// A call or method call; its `_` arguments are filled by the model.
    pub call: Expr,
    pub binding: Option<Ident>,
    pub body: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }
}

impl UnaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Not => "!",
        }
    }
}

impl AssignOp {
    pub fn as_str(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
            AssignOp::Div => "/=",
            AssignOp::Rem => "%=",
        }
    }
}
