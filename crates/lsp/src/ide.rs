//! Editor features as plain functions of the database and a byte offset: hover, go to
//! definition, completion, document symbols and signature help. Nothing here knows the
//! protocol; `server.rs` converts positions and shapes the answers.

use hir::defs::{alias_def, enum_def, fn_signature, name_span, struct_def};
use hir::infer::{COMPLETION_MARKER, Target, check_body};
use hir::items::{ItemKind, SourceFile, module_scope};
use hir::{Builtin, Database, Item, Ty};
use syntax::Span;
use syntax::ast::{self, ItemKind as AstKind};

/// A location in some file, byte offsets.
#[derive(Clone, Debug, PartialEq)]
pub struct Location {
    pub file: SourceFile,
    pub span: Span,
}

fn shift(span: Span, by: u32) -> Span {
    Span {
        start: span.start + by,
        end: span.end + by,
    }
}

fn contains(span: Span, offset: u32) -> bool {
    span.start <= offset && offset <= span.end
}

/// The item whose text holds `offset`, and the offset relative to it.
pub fn item_at(db: &Database, file: SourceFile, offset: u32) -> Option<(Item<'_>, u32)> {
    hir::file_items(db, file).items.iter().find_map(|&item| {
        let span = shift(item.ast(db).span, item.offset(db));
        contains(span, offset).then(|| (item, offset - item.offset(db)))
    })
}

/// `fn name(a: T, b: U) -> R` for a function or extern.
pub fn fn_label(db: &Database, item: Item<'_>) -> String {
    let sig = fn_signature(db, item);
    let params: Vec<String> = sig
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, p.ty.display(db)))
        .collect();
    let keyword = if sig.is_extern { "extern fn" } else { "fn" };
    format!(
        "{keyword} {}({}) -> {}",
        item.name(db),
        params.join(", "),
        sig.ret.display(db)
    )
}

/// A builtin's documentation from the table, for hover and completion.
fn builtin_doc(b: Builtin) -> Option<String> {
    let doc = b.entry().doc.trim_end();
    (!doc.is_empty()).then(|| doc.to_owned())
}

pub fn builtin_label(db: &Database, b: Builtin) -> String {
    let sig = hir::builtins::signature(b);
    if b == Builtin::None {
        return format!("None: {}", sig.ret.display(db));
    }
    let params: Vec<String> = sig
        .params
        .iter()
        .map(|(n, t)| format!("{n}: {}", t.display(db)))
        .collect();
    format!(
        "extern fn {}({}) -> {}",
        b.name(),
        params.join(", "),
        sig.ret.display(db)
    )
}

fn doc_of(db: &Database, item: Item<'_>) -> Option<String> {
    item.ast(db).doc.as_ref().map(|d| d.text.clone())
}

/// The declaration of an item, as code, and its doc comment.
pub fn describe_item(db: &Database, item: Item<'_>) -> (String, Option<String>) {
    let code = match item.kind(db) {
        ItemKind::Fn | ItemKind::ExternFn => fn_label(db, item),
        ItemKind::Struct => {
            let fields: Vec<String> = struct_def(db, item)
                .fields
                .iter()
                .map(|f| format!("    {}: {},", f.name, f.ty.display(db)))
                .collect();
            format!("struct {} {{\n{}\n}}", item.name(db), fields.join("\n"))
        }
        ItemKind::Enum => {
            let variants: Vec<&str> = enum_def(db, item)
                .variants
                .iter()
                .map(|(v, _)| v.as_str())
                .collect();
            format!("enum {} {{ {} }}", item.name(db), variants.join(", "))
        }
        ItemKind::TypeAlias => format!(
            "type {} = {}",
            item.name(db),
            alias_def(db, item).0.display(db)
        ),
        ItemKind::Use => format!("use {}", item.name(db)),
        ItemKind::Test => format!("test {:?}", item.name(db)),
    };
    (code, doc_of(db, item))
}

pub struct HoverInfo {
    pub markdown: String,
    pub span: Span,
}

fn markdown(code: &str, doc: Option<&str>) -> String {
    let mut out = format!("```sap\n{code}\n```");
    if let Some(doc) = doc {
        out.push_str("\n\n");
        out.push_str(doc);
    }
    out
}

/// What the name or expression at `offset` is.
pub fn hover(db: &Database, file: SourceFile, offset: u32) -> Option<HoverInfo> {
    let (item, rel) = item_at(db, file, offset)?;
    let base = item.offset(db);
    // The item's own name.
    let name = name_span(db, item);
    if contains(name, rel) {
        let (code, doc) = describe_item(db, item);
        return Some(HoverInfo {
            markdown: markdown(&code, doc.as_deref()),
            span: shift(name, base),
        });
    }
    // Type names in signatures and fields.
    let type_refs = match item.kind(db) {
        ItemKind::Fn | ItemKind::ExternFn => fn_signature(db, item).type_refs.clone(),
        ItemKind::Struct => struct_def(db, item).type_refs.clone(),
        _ => Vec::new(),
    };
    if let Some(r) = type_refs.iter().find(|r| contains(r.span, rel)) {
        let (code, doc) = describe_item(db, r.item);
        return Some(HoverInfo {
            markdown: markdown(&code, doc.as_deref()),
            span: shift(r.span, base),
        });
    }
    if item.kind(db) == ItemKind::Fn {
        let sig = fn_signature(db, item);
        if let Some(p) = sig.params.iter().find(|p| contains(p.span, rel)) {
            let code = format!("{}: {}", p.name, p.ty.display(db));
            return Some(HoverInfo {
                markdown: markdown(&code, p.doc.as_deref()),
                span: shift(p.span, base),
            });
        }
    }
    // A function's or a test's body.
    if matches!(item.kind(db), ItemKind::Fn | ItemKind::Test) {
        let body = check_body(db, item);
        let type_at = |span: Span| {
            body.expr_types
                .iter()
                .map(|(_, e)| e)
                .find(|e| e.span == span)
                .map(|e| e.ty.display(db))
        };
        if let Some(r) = body
            .references
            .iter()
            .filter(|r| contains(r.span, rel))
            .min_by_key(|r| r.span.len())
        {
            let (code, doc) = match &r.target {
                Target::Item(i) => describe_item(db, *i),
                Target::Builtin(b) => (builtin_label(db, *b), builtin_doc(*b)),
                Target::Local { .. } => {
                    let text = ast_text(db, item, r.span);
                    (
                        format!(
                            "{text}: {}",
                            type_at(r.span).unwrap_or_else(|| "{unknown}".to_owned())
                        ),
                        None,
                    )
                }
                Target::Field { owner, name } => {
                    let field = struct_def(db, *owner)
                        .fields
                        .iter()
                        .find(|f| &f.name == name)
                        .cloned();
                    match field {
                        Some(f) => (
                            format!("{}.{}: {}", owner.name(db), f.name, f.ty.display(db)),
                            f.doc,
                        ),
                        None => (name.clone(), None),
                    }
                }
                Target::Variant { owner, name } => {
                    let doc = enum_def(db, *owner)
                        .variants
                        .iter()
                        .find(|(v, _)| v == name)
                        .and_then(|(_, d)| d.clone());
                    (format!("{}::{name}", owner.name(db)), doc)
                }
            };
            return Some(HoverInfo {
                markdown: markdown(&code, doc.as_deref()),
                span: shift(r.span, base),
            });
        }
        // Any other expression: its type.
        let e = body
            .expr_types
            .iter()
            .map(|(_, e)| e)
            .filter(|e| contains(e.span, rel))
            .min_by_key(|e| e.span.len())?;
        return Some(HoverInfo {
            markdown: markdown(&e.ty.display(db), None),
            span: shift(e.span, base),
        });
    }
    None
}

/// The text of `span` in an item.
fn ast_text(db: &Database, item: Item<'_>, span: Span) -> String {
    let text = item.file(db).text(db);
    let base = item.offset(db) as usize;
    text.get(base + span.start as usize..base + span.end as usize)
        .unwrap_or("")
        .to_owned()
}

/// Where the name at `offset` is defined.
pub fn definition(db: &Database, file: SourceFile, offset: u32) -> Option<Location> {
    let (item, rel) = item_at(db, file, offset)?;
    let base = item.offset(db);
    let item_location = |i: Item<'_>| Location {
        file: i.file(db),
        span: shift(name_span(db, i), i.offset(db)),
    };
    let type_refs = match item.kind(db) {
        ItemKind::Fn | ItemKind::ExternFn => fn_signature(db, item).type_refs.clone(),
        ItemKind::Struct => struct_def(db, item).type_refs.clone(),
        _ => Vec::new(),
    };
    if let Some(r) = type_refs.iter().find(|r| contains(r.span, rel)) {
        return Some(item_location(r.item));
    }
    if !matches!(item.kind(db), ItemKind::Fn | ItemKind::Test) {
        return None;
    }
    let body = check_body(db, item);
    let r = body
        .references
        .iter()
        .filter(|r| contains(r.span, rel))
        .min_by_key(|r| r.span.len())?;
    match &r.target {
        Target::Local { decl, .. } => Some(Location {
            file,
            span: shift(*decl, base),
        }),
        Target::Item(i) => Some(item_location(*i)),
        Target::Field { owner, name } => {
            let ast::ItemKind::Struct(s) = &owner.ast(db).kind else {
                return None;
            };
            let field = s.fields.iter().find(|f| &f.name.name == name)?;
            Some(Location {
                file: owner.file(db),
                span: shift(field.name.span, owner.offset(db)),
            })
        }
        Target::Variant { owner, name } => {
            let ast::ItemKind::Enum(e) = &owner.ast(db).kind else {
                return None;
            };
            let variant = e.variants.iter().find(|v| &v.name.name == name)?;
            Some(Location {
                file: owner.file(db),
                span: shift(variant.name.span, owner.offset(db)),
            })
        }
        Target::Builtin(_) => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    Function,
    Variable,
    Field,
    Keyword,
    Struct,
    Enum,
    Snippet,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub label: String,
    pub kind: CompletionKind,
    pub detail: Option<String>,
    pub documentation: Option<String>,
}

const KEYWORDS: &[&str] = &[
    "let", "if", "else", "while", "for", "in", "return", "break", "continue", "select", "parallel",
    "true", "false", "assert", "given",
];

/// Completions at `offset` of `text` (the document as the editor has it). The text is
/// checked with [`COMPLETION_MARKER`] in place of the word being typed, in `scratch`, a
/// file outside the workspace so other files are not re-checked.
pub fn completions(
    db: &mut Database,
    scratch: SourceFile,
    text: &str,
    offset: usize,
) -> Vec<Completion> {
    let offset = offset.min(text.len());
    let prefix_start = text[..offset]
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() || c == '_')
        .last()
        .map_or(offset, |(i, _)| i);
    let patched = format!(
        "{}{COMPLETION_MARKER}{}",
        &text[..prefix_start],
        &text[offset..]
    );
    db.set_text(scratch, patched);
    let db: &Database = db;
    let marker_at = prefix_start as u32;
    let mut out = Vec::new();
    // After `m::`: the items of module `m`; after `E::`: the variants of enum `E`.
    if let Some(qualifier) = text[..prefix_start]
        .strip_suffix("::")
        .map(|before| {
            let start = before
                .char_indices()
                .rev()
                .take_while(|&(_, c)| c.is_alphanumeric() || c == '_')
                .last()
                .map_or(before.len(), |(i, _)| i);
            &before[start..]
        })
        .filter(|q| !q.is_empty())
    {
        path_completions(db, scratch, qualifier, &mut out);
        return out;
    }
    let site = item_at(db, scratch, marker_at)
        .filter(|(item, _)| item.kind(db) == ItemKind::Fn)
        .and_then(|(item, _)| check_body(db, item).completion.clone());
    match site {
        Some(site) => match site.receiver {
            Some(receiver) => {
                if let Ty::Struct(s) = &receiver {
                    for f in &struct_def(db, *s).fields {
                        out.push(Completion {
                            label: f.name.clone(),
                            kind: CompletionKind::Field,
                            detail: Some(f.ty.display(db)),
                            documentation: f.doc.clone(),
                        });
                    }
                }
                // Method sugar: every function whose first parameter takes the receiver.
                method_completions(db, scratch, &receiver, &mut out);
            }
            None => {
                for local in site.locals.iter().rev() {
                    if local.name == COMPLETION_MARKER
                        || out.iter().any(|c: &Completion| c.label == local.name)
                    {
                        continue;
                    }
                    out.push(Completion {
                        label: local.name.clone(),
                        kind: CompletionKind::Variable,
                        detail: Some(local.ty.display(db)),
                        documentation: None,
                    });
                }
                item_completions(db, scratch, &mut out);
                keyword_completions(&mut out);
            }
        },
        None => {
            item_completions(db, scratch, &mut out);
            keyword_completions(&mut out);
        }
    }
    out
}

fn path_completions(db: &Database, file: SourceFile, qualifier: &str, out: &mut Vec<Completion>) {
    let modules = hir::items::workspace_modules(db, hir::Db::workspace(db));
    if let Some(&module) = modules.get(qualifier).filter(|&&m| m != file) {
        own_item_completions(db, module, out);
        return;
    }
    if let Some(&item) = module_scope(db, file).types.get(qualifier)
        && item.kind(db) == ItemKind::Enum
    {
        for (variant, doc) in &enum_def(db, item).variants {
            out.push(Completion {
                label: variant.clone(),
                kind: CompletionKind::Enum,
                detail: Some(format!("{qualifier}::{variant}")),
                documentation: doc.clone(),
            });
        }
    }
}

fn keyword_completions(out: &mut Vec<Completion>) {
    for kw in KEYWORDS {
        out.push(Completion {
            label: (*kw).to_owned(),
            kind: CompletionKind::Keyword,
            detail: None,
            documentation: None,
        });
    }
    out.push(Completion {
        label: "Context::new()".to_owned(),
        kind: CompletionKind::Snippet,
        detail: Some("a new, empty context".to_owned()),
        documentation: Some("Starts an isolated context for a sub-agent.".to_owned()),
    });
}

fn item_completions(db: &Database, file: SourceFile, out: &mut Vec<Completion>) {
    own_item_completions(db, file, out);
    out.push(Completion {
        label: "None".to_owned(),
        kind: CompletionKind::Variable,
        detail: Some(builtin_label(db, Builtin::None)),
        documentation: Some(
            "The absent value of an `Option`; `Some(x)` is a present one.".to_owned(),
        ),
    });
    for b in hir::builtins::names().filter_map(hir::builtins::lookup) {
        out.push(Completion {
            label: b.name().to_owned(),
            kind: CompletionKind::Function,
            detail: Some(builtin_label(db, b)),
            documentation: builtin_doc(b),
        });
    }
}

/// The functions and types a module defines (what `m::` reaches).
fn own_item_completions(db: &Database, file: SourceFile, out: &mut Vec<Completion>) {
    let scope = module_scope(db, file);
    for (name, &item) in &scope.values {
        out.push(Completion {
            label: name.clone(),
            kind: CompletionKind::Function,
            detail: Some(fn_label(db, item)),
            documentation: doc_of(db, item),
        });
    }
    for (name, &item) in &scope.types {
        let kind = if item.kind(db) == ItemKind::Enum {
            CompletionKind::Enum
        } else {
            CompletionKind::Struct
        };
        out.push(Completion {
            label: name.clone(),
            kind,
            detail: Some(describe_item(db, item).0),
            documentation: doc_of(db, item),
        });
    }
}

fn method_completions(
    db: &Database,
    file: SourceFile,
    receiver: &Ty<'_>,
    out: &mut Vec<Completion>,
) {
    let scope = module_scope(db, file);
    for (name, &item) in &scope.values {
        let sig = fn_signature(db, item);
        if sig.params.first().is_some_and(|p| &p.ty == receiver) {
            out.push(Completion {
                label: name.clone(),
                kind: CompletionKind::Function,
                detail: Some(fn_label(db, item)),
                documentation: doc_of(db, item),
            });
        }
    }
    // A builtin is offered when one of its forms takes the receiver first; a type
    // parameter takes anything.
    let generic_first = |b: Builtin| {
        hir::builtins::signatures(b)
            .iter()
            .any(|sig| match sig.params.first().map(|p| &p.1) {
                Some(Ty::Param(_)) => true,
                Some(Ty::List(e)) if matches!(**e, Ty::Param(_)) => matches!(receiver, Ty::List(_)),
                Some(Ty::Option(e)) if matches!(**e, Ty::Param(_)) => {
                    matches!(receiver, Ty::Option(_))
                }
                Some(t) => t == receiver,
                None => false,
            })
    };
    if *receiver != Ty::Context {
        for b in hir::builtins::names()
            .filter_map(hir::builtins::lookup)
            .filter(|&b| generic_first(b))
        {
            out.push(Completion {
                label: b.name().to_owned(),
                kind: CompletionKind::Function,
                detail: Some(builtin_label(db, b)),
                documentation: builtin_doc(b),
            });
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Symbol {
    pub name: String,
    pub detail: Option<String>,
    pub kind: SymbolKind,
    /// The whole item.
    pub span: Span,
    /// Its name.
    pub selection: Span,
    pub children: Vec<Symbol>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Function,
    Struct,
    Field,
    Enum,
    Variant,
    TypeAlias,
    Module,
}

pub fn document_symbols(db: &Database, file: SourceFile) -> Vec<Symbol> {
    let mut out = Vec::new();
    for &item in &hir::file_items(db, file).items {
        let base = item.offset(db);
        let ast_item = item.ast(db);
        let span = shift(ast_item.span, base);
        let selection = shift(name_span(db, item), base);
        let (kind, detail, children) = match &ast_item.kind {
            AstKind::Fn(_) | AstKind::ExternFn(_) => {
                (SymbolKind::Function, Some(fn_label(db, item)), Vec::new())
            }
            AstKind::Struct(s) => {
                let children = s
                    .fields
                    .iter()
                    .map(|f| Symbol {
                        name: f.name.name.clone(),
                        detail: None,
                        kind: SymbolKind::Field,
                        span: shift(f.span, base),
                        selection: shift(f.name.span, base),
                        children: Vec::new(),
                    })
                    .collect();
                (SymbolKind::Struct, None, children)
            }
            AstKind::Enum(e) => {
                let children = e
                    .variants
                    .iter()
                    .map(|v| Symbol {
                        name: v.name.name.clone(),
                        detail: None,
                        kind: SymbolKind::Variant,
                        span: shift(v.name.span, base),
                        selection: shift(v.name.span, base),
                        children: Vec::new(),
                    })
                    .collect();
                (SymbolKind::Enum, None, children)
            }
            AstKind::TypeAlias(_) => (
                SymbolKind::TypeAlias,
                Some(describe_item(db, item).0),
                Vec::new(),
            ),
            AstKind::Use(_) => (SymbolKind::Module, None, Vec::new()),
            AstKind::Test(_) => (SymbolKind::Function, Some("test".to_owned()), Vec::new()),
        };
        out.push(Symbol {
            name: item.name(db).clone(),
            detail,
            kind,
            span,
            selection,
            children,
        });
    }
    out
}

/// A parameter as shown: name, type, doc.
type ParamText = (String, String, Option<String>);

pub struct SignatureHelp {
    pub label: String,
    pub documentation: Option<String>,
    /// Each parameter's byte range in `label`, and its documentation.
    pub parameters: Vec<((u32, u32), Option<String>)>,
    pub active_parameter: u32,
}

/// Signature help for the call whose argument list holds `offset`. Works on the text, so
/// it helps while the call is still unfinished and does not parse.
pub fn signature_help(
    db: &Database,
    file: SourceFile,
    text: &str,
    offset: usize,
) -> Option<SignatureHelp> {
    let offset = offset.min(text.len());
    let bytes = text.as_bytes();
    // The innermost `(` still open before the cursor, counting commas at its level.
    let mut depth = 0i32;
    let mut commas = 0u32;
    let mut open = None;
    let mut i = offset;
    while i > 0 {
        i -= 1;
        match bytes[i] {
            b')' | b']' | b'}' => depth += 1,
            b'(' | b'[' | b'{' if depth > 0 => depth -= 1,
            b'(' => {
                open = Some(i);
                break;
            }
            b'[' | b'{' => return None,
            b',' if depth == 0 => commas += 1,
            b'\n' if text[i..offset].matches('\n').count() > 20 => return None,
            _ => {}
        }
    }
    let open = open?;
    let head = text[..open].trim_end();
    let name_start = head
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() || c == '_')
        .last()
        .map(|(i, _)| i)?;
    let name = &head[name_start..];
    let is_method = head[..name_start].ends_with('.');
    // The arguments written so far, to mark the placeholders.
    let mut args = Vec::new();
    let mut depth = 0;
    let mut start = open + 1;
    for (j, c) in text[open + 1..].char_indices() {
        let at = open + 1 + j;
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => {
                args.push(text[start..at].trim().to_owned());
                break;
            }
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                args.push(text[start..at].trim().to_owned());
                start = at + 1;
            }
            '\n' if j > 2000 => break,
            _ => {}
        }
    }
    let scope = module_scope(db, file);
    let (params, ret, doc): (Vec<ParamText>, String, Option<String>) = match scope.values.get(name)
    {
        Some(&item) => {
            let sig = fn_signature(db, item);
            (
                sig.params
                    .iter()
                    .map(|p| (p.name.clone(), p.ty.display(db), p.doc.clone()))
                    .collect(),
                sig.ret.display(db),
                sig.doc.clone(),
            )
        }
        None => {
            let b = hir::builtins::lookup(name)?;
            let sig = hir::builtins::signature(b);
            (
                sig.params
                    .iter()
                    .map(|(n, t)| ((*n).to_owned(), t.display(db), None))
                    .collect(),
                sig.ret.display(db),
                None,
            )
        }
    };
    let mut label = format!("{name}(");
    let mut parameters = Vec::new();
    let offset_args = usize::from(is_method);
    for (k, (pname, pty, pdoc)) in params.iter().enumerate() {
        if k > 0 {
            label.push_str(", ");
        }
        let start = label.len() as u32;
        label.push_str(&format!("{pname}: {pty}"));
        let end = label.len() as u32;
        let written = if k >= offset_args {
            args.get(k - offset_args)
        } else {
            None
        };
        let mut doc = pdoc.clone();
        if written.is_some_and(|a| a == "_") {
            let note = "filled by the model (`_`)".to_owned();
            doc = Some(match doc {
                Some(d) => format!("{d}\n\n{note}"),
                None => note,
            });
        } else if k < offset_args {
            let note = "the receiver of the method call".to_owned();
            doc = Some(doc.map_or(note.clone(), |d| format!("{d}\n\n{note}")));
        }
        parameters.push(((start, end), doc));
    }
    label.push_str(&format!(") -> {ret}"));
    Some(SignatureHelp {
        label,
        documentation: doc,
        parameters,
        active_parameter: commas + offset_args as u32,
    })
}

/// A test of a file: its name and the span of its `test "name"` head.
pub struct TestLens {
    pub name: String,
    pub span: Span,
}

/// The tests of a file, for the "run test" code lens.
pub fn tests(db: &Database, file: SourceFile) -> Vec<TestLens> {
    hir::file_items(db, file)
        .items
        .iter()
        .filter_map(|&item| {
            let ast_item = item.ast(db);
            let syntax::ast::ItemKind::Test(t) = &ast_item.kind else {
                return None;
            };
            let base = item.offset(db);
            Some(TestLens {
                name: t.name.clone(),
                span: shift(
                    Span::new(ast_item.span.start as usize, t.name_span.end as usize),
                    base,
                ),
            })
        })
        .collect()
}
