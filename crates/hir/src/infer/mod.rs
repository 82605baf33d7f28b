//! Checking one function body: name resolution of locals, type inference (bidirectional,
//! with unification for integer literals, empty lists and the generic standard externs),
//! and the context rules (REFERENCE.md, "Context rules"). One tracked query per function,
//! so an edit inside one body re-checks only that body.
//!
//! This module holds the query, its result and the checker's state; the checker's work
//! is split by concern: `unify` (type variables), `scope` (locals and what a name
//! means), `stmt` (blocks and statements), `expr` (expressions), `call` (calls and
//! `select`), `context_rules` (where a context is needed, LLM functions, bounded loops)
//! and `ide` (references and completion, for the language server).

mod call;
mod context_rules;
mod expr;
mod ide;
mod scope;
mod stmt;
mod unify;

use syntax::Span;
use syntax::ast::{self, Expr, ExprKind, StmtKind};

use crate::Db;
pub use crate::body::Callee;
use crate::body::{ExprId, ExprMap, LocalData, LocalId, Resolution};
use crate::defs::fn_signature;
use crate::diagnostics::{self as diag, HirDiagnostic};
use crate::items::Item;
use crate::resolve::Resolver;
use crate::ty::Ty;
pub use ide::{COMPLETION_MARKER, CompletionSite, LocalInfo, Reference, Target};

#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct BodyFacts<'db> {
    /// Every function, extern and standard extern the body calls, once each.
    pub calls: Vec<Callee<'db>>,
    /// The body calls `Context::new()`.
    pub creates_context: bool,
}

impl<'db> BodyFacts<'db> {
    fn add_call(&mut self, callee: Callee<'db>) {
        if !self.calls.contains(&callee) {
            self.calls.push(callee);
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct ExprType<'db> {
    pub span: Span,
    pub ty: Ty<'db>,
}

/// What checking one function body found. Per-expression facts are indexed by the
/// expression's id, per-local ones by [`LocalId`]; spans are relative to the item.
#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct BodyResult<'db> {
    pub diagnostics: Vec<HirDiagnostic<'db>>,
    /// The type of every expression, with its span (for the IDE).
    pub expr_types: ExprMap<ExprType<'db>>,
    /// Every local binding of the body, by id.
    pub locals: Vec<LocalData<'db>>,
    /// What each path expression names.
    pub resolutions: ExprMap<Resolution<'db>>,
    /// What each call and method call (a `select` arm's included) calls.
    pub callees: ExprMap<Callee<'db>>,
    /// The local a `let`, `for`, `parallel for` or `select` arm declares, by the
    /// expression whose value it binds: the initializer, the iterable, the arm's call.
    pub declared: ExprMap<LocalId>,
    /// The local an assignment (`x = e`, `x += e`) writes, by the assigned value `e`.
    pub assigned: ExprMap<LocalId>,
    /// For a struct literal with shorthand fields (`Name { x }`), what each names, by
    /// the field's position in the literal.
    pub shorthands: ExprMap<Vec<(u32, Resolution<'db>)>>,
    /// For each `parallel for`, the locals visible at it (a shadowed one left out), in
    /// the order they were declared: its body is given their values.
    pub captures: ExprMap<Vec<LocalId>>,
    pub facts: BodyFacts<'db>,
    /// The conditions of the `while` loops the model decides and nothing else bounds
    /// (W0102): lowering counts their iterations against the run's limit for them.
    pub model_loops: Vec<ExprId>,
    /// The body can end without a value, so the model produces the result.
    pub is_llm_function: bool,
    /// Every resolved name, in source order.
    pub references: Vec<Reference<'db>>,
    /// Set when the body holds [`COMPLETION_MARKER`].
    pub completion: Option<CompletionSite<'db>>,
    /// In a test, for each `given f(a, b) => answer`, by the answer's id: what `f` is,
    /// and the locals its parameters are bound to (`None` for `_`).
    pub given_stubs: ExprMap<GivenStub<'db>>,
    /// In a test, the function each `given f { … }` scripts, by each answer's id.
    pub given_scripts: ExprMap<Item<'db>>,
}

/// `given f(a, _) => answer`: the LLM function answered, and the locals of the test its
/// parameters are bound to while the answer is computed (`None` for `_`).
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct GivenStub<'db> {
    pub function: Item<'db>,
    pub params: Vec<Option<LocalId>>,
}

#[salsa::tracked(returns(ref))]
pub fn check_body<'db>(db: &'db dyn Db, item: Item<'db>) -> BodyResult<'db> {
    let f = match &item.ast(db).kind {
        ast::ItemKind::Fn(f) => f,
        ast::ItemKind::Test(t) => return check_test(db, item, t),
        _ => return BodyResult::default(),
    };
    let resolver = Resolver::new(db, item.file(db));
    let sig = fn_signature(db, item);
    let mut cx = Checker::new(
        db,
        item,
        &resolver,
        f.name.name.clone(),
        sig.ret.clone(),
        sig.context_param.is_some(),
    );
    cx.schema_param = sig.answer_schema_param();
    for (i, p) in sig.params.iter().enumerate() {
        let is_context = sig.context_param == Some(i);
        let span = f.params[i].name.span;
        cx.declare(&p.name, p.ty.clone(), span, LocalKind::Param { is_context });
    }
    let is_llm_function = cx.check_fn_body(&f.body);
    cx.finish(is_llm_function)
}

/// A test's body: a function of no parameters returning `()`, where `given` may script
/// the model's answers.
fn check_test<'db>(db: &'db dyn Db, item: Item<'db>, t: &ast::Test) -> BodyResult<'db> {
    let resolver = Resolver::new(db, item.file(db));
    let mut cx = Checker::new(
        db,
        item,
        &resolver,
        format!("test {:?}", t.name),
        Ty::Unit,
        false,
    );
    cx.in_test = true;
    cx.check_fn_body(&t.body);
    cx.finish(false)
}

impl<'a, 'db> Checker<'a, 'db> {
    fn new(
        db: &'db dyn Db,
        item: Item<'db>,
        resolver: &'a Resolver<'db>,
        fn_name: String,
        ret: Ty<'db>,
        has_context: bool,
    ) -> Checker<'a, 'db> {
        Checker {
            db,
            item,
            resolver,
            fn_name,
            ret,
            has_context,
            in_test: false,
            schema_param: None,
            context_used_implicitly: false,
            vars: Vec::new(),
            locals: Vec::new(),
            scopes: vec![Vec::new()],
            loops: Vec::new(),
            parallel_depth: 0,
            pending_ints: Vec::new(),
            pending_lists: Vec::new(),
            pending_nones: Vec::new(),
            expr_types: ExprMap::default(),
            resolutions: ExprMap::default(),
            callees: ExprMap::default(),
            declared: ExprMap::default(),
            assigned: ExprMap::default(),
            shorthands: ExprMap::default(),
            captures: ExprMap::default(),
            model_loops: Vec::new(),
            diagnostics: Vec::new(),
            facts: BodyFacts::default(),
            llm_bool_calls: 0,
            loop_exits: 0,
            references: Vec::new(),
            completion: None,
            given_stubs: ExprMap::default(),
            given_scripts: ExprMap::default(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LocalKind {
    Param { is_context: bool },
    Let,
}

struct Local<'db> {
    name: String,
    ty: Ty<'db>,
    span: Span,
    used: bool,
    kind: LocalKind,
    /// How many `parallel for` bodies enclose the declaration.
    parallel_depth: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LoopKind {
    Sequential,
    Parallel,
}

struct Var<'db> {
    binding: Option<Ty<'db>>,
    /// Only an integer type may bind it (the type of an integer literal).
    int_only: bool,
}

struct Checker<'a, 'db> {
    db: &'db dyn Db,
    item: Item<'db>,
    resolver: &'a Resolver<'db>,
    fn_name: String,
    ret: Ty<'db>,
    has_context: bool,
    /// Checking a test: `given` is allowed.
    in_test: bool,
    context_used_implicitly: bool,
    /// The `schema: Json` parameter an LLM function's answer is asked against.
    schema_param: Option<usize>,
    vars: Vec<Var<'db>>,
    locals: Vec<Local<'db>>,
    scopes: Vec<Vec<usize>>,
    loops: Vec<LoopKind>,
    parallel_depth: usize,
    /// Integer literals whose range is checked once their type is known.
    pending_ints: Vec<(Ty<'db>, u64, bool, Span)>,
    /// `[]` literals whose element type must be inferred.
    pending_lists: Vec<(Ty<'db>, Span)>,
    /// Each `None`'s value type, which must be known by the end.
    pending_nones: Vec<(Ty<'db>, Span)>,
    expr_types: ExprMap<(Span, Ty<'db>)>,
    resolutions: ExprMap<Resolution<'db>>,
    callees: ExprMap<Callee<'db>>,
    declared: ExprMap<LocalId>,
    assigned: ExprMap<LocalId>,
    shorthands: ExprMap<Vec<(u32, Resolution<'db>)>>,
    captures: ExprMap<Vec<LocalId>>,
    model_loops: Vec<ExprId>,
    diagnostics: Vec<HirDiagnostic<'db>>,
    facts: BodyFacts<'db>,
    /// Calls to Boolean functions that take a context: conditions the model decides.
    llm_bool_calls: usize,
    /// `break`s and `return`s seen, to tell bounded loops.
    loop_exits: usize,
    references: Vec<Reference<'db>>,
    completion: Option<CompletionSite<'db>>,
    given_stubs: ExprMap<GivenStub<'db>>,
    given_scripts: ExprMap<Item<'db>>,
}

impl<'a, 'db> Checker<'a, 'db> {
    /// Settles what inference left open (integer literals, empty lists, `None`s) and
    /// gives the result, every type resolved.
    fn finish(mut self, is_llm_function: bool) -> BodyResult<'db> {
        // Parameters are in the outermost scope.
        self.pop_scope();
        // Integer literals: unconstrained ones are `i32`; every one must fit its type.
        for i in 0..self.vars.len() {
            if self.vars[i].int_only && self.shallow(&Ty::Var(i as u32)) == Ty::Var(i as u32) {
                self.vars[i].binding = Some(Ty::I32);
            }
        }
        for (t, n, negated, span) in std::mem::take(&mut self.pending_ints) {
            let (name, max) = match self.resolve(&t) {
                Ty::I32 => ("i32", i32::MAX as u64),
                Ty::I64 => ("i64", i64::MAX as u64),
                _ => continue,
            };
            let limit = if negated { max + 1 } else { max };
            if n > limit {
                self.diagnostics
                    .push(diag::int_range(self.item, span, name));
            }
        }
        for (t, span) in std::mem::take(&mut self.pending_lists) {
            if let Ty::Var(_) = self.resolve(&t) {
                let d = diag::mismatch(self.item, span, "List<T>", "List<_>")
                    .with_help("the element type of this empty list cannot be inferred; write `let xs: List<String> = []`");
                self.diagnostics.push(d);
            }
        }
        for (t, span) in std::mem::take(&mut self.pending_nones) {
            if let Ty::Var(_) = self.resolve(&t) {
                let d = diag::mismatch(self.item, span, "Option<T>", "Option<_>")
                    .with_help("the type of this `None` cannot be inferred; write `let x: Option<String> = None`");
                self.diagnostics.push(d);
            }
        }
        let expr_types = std::mem::take(&mut self.expr_types).map(|(span, t)| ExprType {
            span,
            ty: self.resolve_final(&t),
        });
        let locals = self
            .locals
            .iter()
            .map(|l| LocalData {
                name: l.name.clone(),
                ty: self.resolve_final(&l.ty),
                decl: l.span,
            })
            .collect();
        let completion = self.completion.take().map(|c| CompletionSite {
            locals: c
                .locals
                .into_iter()
                .map(|l| LocalInfo {
                    ty: self.resolve_final(&l.ty),
                    ..l
                })
                .collect(),
            receiver: c.receiver.map(|t| self.resolve_final(&t)),
        });
        let mut diagnostics = self.diagnostics;
        diagnostics.sort_by_key(|d| (d.diagnostic.span.start, d.diagnostic.span.end));
        BodyResult {
            diagnostics,
            expr_types,
            locals,
            resolutions: self.resolutions,
            callees: self.callees,
            declared: self.declared,
            assigned: self.assigned,
            shorthands: self.shorthands,
            captures: self.captures,
            model_loops: self.model_loops,
            facts: self.facts,
            is_llm_function,
            references: self.references,
            completion,
            given_stubs: self.given_stubs,
            given_scripts: self.given_scripts,
        }
    }
}

/// The block's final expression, when it is one that gives the block its value.
fn block_tail(block: &ast::Block) -> Option<&Expr> {
    match block.stmts.last().map(|s| &s.kind) {
        Some(StmtKind::Expr(e)) if !matches!(e.kind, ExprKind::Inject(_)) => Some(e),
        _ => None,
    }
}

/// An `if` without `else` has no value: a function ending with one can end without one.
fn is_valueless_if(e: &Expr) -> bool {
    matches!(
        &e.kind,
        ExprKind::If {
            else_block: None,
            ..
        }
    )
}
