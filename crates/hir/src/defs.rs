//! Item-level facts, one tracked query per item: function signatures, struct fields,
//! enum variants, alias targets — each with the diagnostics found at the declaration.

use std::collections::HashMap;

use syntax::Span;
use syntax::ast;
use syntax::binding::ExternBinding;

use crate::Db;
use crate::diagnostics::{self as diag, HirDiagnostic};
use crate::items::{Item, SourceFile, module_scope};
use crate::resolve::Resolver;
use crate::ty::Ty;
use crate::type_lowering::TypeLowering;

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct ParamSig<'db> {
    pub name: String,
    /// `trusted name: T`: only trusted arguments.
    pub trusted: bool,
    pub ty: Ty<'db>,
    pub span: Span,
    pub doc: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct Signature<'db> {
    pub params: Vec<ParamSig<'db>>,
    pub ret: Ty<'db>,
    /// The return type as written, or the function name when there is none.
    pub ret_span: Span,
    /// The index of the `Context` parameter, if there is one.
    pub context_param: Option<usize>,
    pub doc: Option<String>,
    pub is_extern: bool,
    /// Where an `extern "…" fn` lives; `None` for the host's externs and for functions.
    pub binding: Option<ExternBinding>,
    /// `trusted extern fn`: its results are trusted.
    pub trusted: bool,
    /// `idempotent extern fn`: safe to run again after a crash stopped a call of it.
    pub idempotent: bool,
    pub diagnostics: Vec<HirDiagnostic<'db>>,
    /// Type names in the signature and the items they name.
    pub type_refs: Vec<TypeRef<'db>>,
}

impl Signature<'_> {
    /// For a function returning `Json`: the index of its `schema: Json` parameter, the
    /// JSON Schema the model's answer must match when the function is an LLM function
    /// (REFERENCE.md, "Context rules" 2).
    pub fn answer_schema_param(&self) -> Option<usize> {
        if self.ret != Ty::Json {
            return None;
        }
        self.params
            .iter()
            .position(|p| p.name == "schema" && p.ty == Ty::Json)
    }
}

/// A type name resolved to an item, written at `span` (relative to the item).
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct TypeRef<'db> {
    pub span: Span,
    pub item: Item<'db>,
}

fn type_refs<'db>(lowering: &TypeLowering<'_, 'db>) -> Vec<TypeRef<'db>> {
    lowering
        .references
        .iter()
        .map(|&(span, item)| TypeRef { span, item })
        .collect()
}

#[salsa::tracked(returns(ref))]
pub fn fn_signature<'db>(db: &'db dyn Db, item: Item<'db>) -> Signature<'db> {
    let ast_item = item.ast(db);
    let (name, params, ret, is_extern) = match &ast_item.kind {
        ast::ItemKind::Fn(f) => (&f.name, &f.params, &f.ret, false),
        ast::ItemKind::ExternFn(f) => (&f.name, &f.params, &f.ret, true),
        _ => unreachable!("fn_signature of a non-function item"),
    };
    let resolver = Resolver::new(db, item.file(db));
    let mut lowering = TypeLowering::new(&resolver, item);
    let mut sig_params = Vec::new();
    let mut context_param: Option<usize> = None;
    for (i, p) in params.iter().enumerate() {
        // The slides write `fn analyze_code(Context, code)`: a bare `Context` is an
        // unnamed context parameter, and any other untyped parameter is a `String`.
        let ty = match &p.ty {
            Some(t) => lowering.lower(t),
            None if p.name.name == "Context" => Ty::Context,
            None => Ty::String,
        };
        if ty == Ty::Context {
            if is_extern {
                lowering
                    .diagnostics
                    .push(diag::extern_context(item, p.span, &name.name));
            } else if let Some(first) = context_param {
                lowering
                    .diagnostics
                    .push(diag::two_contexts(item, p.span, params[first].span));
            } else {
                context_param = Some(i);
            }
        } else if ty.contains_context() {
            lowering.diagnostics.push(diag::context_misuse(
                item,
                p.span,
                "put in a `List` or an `Option`",
            ));
        }
        if let (Some(at), Ty::Context) = (p.trusted, &ty) {
            lowering.diagnostics.push(diag::trusted_context(item, at));
        }

        sig_params.push(ParamSig {
            name: p.name.name.clone(),
            trusted: p.trusted.is_some(),
            ty,
            span: p.span,
            doc: p.doc.as_ref().map(|d| d.text.clone()),
        });
    }
    let binding = match &ast_item.kind {
        ast::ItemKind::ExternFn(ast::ExternFn {
            binding: Some((text, span)),
            ..
        }) => match ExternBinding::parse(text) {
            Ok(b) => Some(b),
            Err(why) => {
                lowering
                    .diagnostics
                    .push(diag::extern_binding(item, *span, why));
                None
            }
        },
        _ => None,
    };
    let (ret_ty, ret_span) = match ret {
        Some(t) => (lowering.lower(t), t.span),
        None => (Ty::Unit, name.span),
    };
    if ret_ty.contains_context() {
        lowering
            .diagnostics
            .push(diag::context_misuse(item, ret_span, "returned"));
    }
    Signature {
        params: sig_params,
        ret: ret_ty,
        ret_span,
        context_param,
        doc: ast_item.doc.as_ref().map(|d| d.text.clone()),
        is_extern,
        binding,
        trusted: matches!(&ast_item.kind, ast::ItemKind::ExternFn(f) if f.trusted),
        idempotent: matches!(&ast_item.kind, ast::ItemKind::ExternFn(f) if f.idempotent),
        type_refs: type_refs(&lowering),
        diagnostics: lowering.diagnostics,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct FieldDef<'db> {
    pub name: String,
    pub ty: Ty<'db>,
    pub span: Span,
    pub doc: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct StructDef<'db> {
    pub fields: Vec<FieldDef<'db>>,
    pub diagnostics: Vec<HirDiagnostic<'db>>,
    pub type_refs: Vec<TypeRef<'db>>,
}

#[salsa::tracked(returns(ref))]
pub fn struct_def<'db>(db: &'db dyn Db, item: Item<'db>) -> StructDef<'db> {
    let ast::ItemKind::Struct(s) = &item.ast(db).kind else {
        return StructDef {
            fields: Vec::new(),
            diagnostics: Vec::new(),
            type_refs: Vec::new(),
        };
    };
    let resolver = Resolver::new(db, item.file(db));
    let mut lowering = TypeLowering::new(&resolver, item);
    let mut fields: Vec<FieldDef<'db>> = Vec::new();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for f in &s.fields {
        let ty = lowering.lower(&f.ty);
        if ty.contains_context() {
            lowering
                .diagnostics
                .push(diag::context_misuse(item, f.ty.span, "stored in a struct"));
        }
        if ty == Ty::Struct(item) {
            lowering
                .diagnostics
                .push(diag::struct_holds_itself(item, f.ty.span, &s.name.name));
        }
        if let Some(&first) = seen.get(f.name.name.as_str()) {
            lowering.diagnostics.push(diag::duplicate(
                item,
                f.name.span,
                &f.name.name,
                item,
                first,
            ));
            continue;
        }
        seen.insert(&f.name.name, f.name.span);
        fields.push(FieldDef {
            name: f.name.name.clone(),
            ty,
            span: f.span,
            doc: f.doc.as_ref().map(|d| d.text.clone()),
        });
    }
    StructDef {
        fields,
        type_refs: type_refs(&lowering),
        diagnostics: lowering.diagnostics,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct EnumDef<'db> {
    pub variants: Vec<(String, Option<String>)>,
    pub diagnostics: Vec<HirDiagnostic<'db>>,
}

#[salsa::tracked(returns(ref))]
pub fn enum_def<'db>(db: &'db dyn Db, item: Item<'db>) -> EnumDef<'db> {
    let ast::ItemKind::Enum(e) = &item.ast(db).kind else {
        return EnumDef {
            variants: Vec::new(),
            diagnostics: Vec::new(),
        };
    };
    let mut variants = Vec::new();
    let mut diagnostics = Vec::new();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for v in &e.variants {
        if let Some(&first) = seen.get(v.name.name.as_str()) {
            diagnostics.push(diag::duplicate(
                item,
                v.name.span,
                &v.name.name,
                item,
                first,
            ));
            continue;
        }
        seen.insert(&v.name.name, v.name.span);
        variants.push((v.name.name.clone(), v.doc.as_ref().map(|d| d.text.clone())));
    }
    EnumDef {
        variants,
        diagnostics,
    }
}

/// The type an alias stands for, and the problems in its definition.
#[salsa::tracked(returns(ref))]
pub fn alias_def<'db>(db: &'db dyn Db, item: Item<'db>) -> (Ty<'db>, Vec<HirDiagnostic<'db>>) {
    let ast::ItemKind::TypeAlias(alias) = &item.ast(db).kind else {
        return (Ty::Error, Vec::new());
    };
    let resolver = Resolver::new(db, item.file(db));
    let mut lowering = TypeLowering::new(&resolver, item);
    let ty = lowering.lower_alias_target(item, &alias.ty);
    if ty.contains_context() {
        lowering.diagnostics.push(diag::context_misuse(
            item,
            alias.ty.span,
            "named by a type alias",
        ));
    }
    (ty, lowering.diagnostics)
}

/// Duplicate definitions and bad imports of one module.
#[salsa::tracked(returns(ref))]
pub fn module_diagnostics<'db>(db: &'db dyn Db, file: SourceFile) -> Vec<HirDiagnostic<'db>> {
    let scope = module_scope(db, file);
    let mut out = Vec::new();
    for &(again, first) in &scope.duplicates {
        out.push(diag::duplicate(
            again,
            name_span(db, again),
            again.name(db),
            first,
            name_span(db, first),
        ));
    }
    out.extend(Resolver::new(db, file).use_diagnostics());
    out
}

/// The span of an item's name, relative to the item.
pub fn name_span(db: &dyn Db, item: Item<'_>) -> Span {
    let ast_item = item.ast(db);
    match (ast_item.name(), &ast_item.kind) {
        (Some(n), _) => n.span,
        (None, ast::ItemKind::Test(t)) => t.name_span,
        (None, _) => ast_item.span,
    }
}
