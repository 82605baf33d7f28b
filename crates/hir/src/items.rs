//! Files, chunks and items: the inputs and the first tracked layer.
//!
//! A file is split into chunks at the lines that start an item (see
//! `syntax::chunk_starts`); each chunk's text is interned, so parsing is memoized by
//! content and an edit re-parses only the chunk it touched. Every item becomes a tracked
//! [`Item`] whose identity is its file, kind and name; its AST (with spans relative to
//! its chunk) and its offset are separate tracked fields, so an edit that only moves an
//! item does not invalidate what was computed from its AST.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use syntax::ast;
use syntax::{Diagnostic, Span};

use crate::Db;

/// A source file; its module name is the file stem.
#[salsa::input(debug)]
pub struct SourceFile {
    #[returns(ref)]
    pub path: String,
    #[returns(ref)]
    pub text: String,
}

impl SourceFile {
    pub fn module_name(self, db: &dyn Db) -> String {
        module_name_of(self.path(db))
    }

    /// Whether this is one of the prelude modules shipped with the compiler.
    pub fn is_prelude(self, db: &dyn Db) -> bool {
        crate::prelude_source(self.path(db)).is_some()
    }
}

pub fn module_name_of(path: &str) -> String {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    file.strip_suffix(".sap").unwrap_or(file).to_owned()
}

/// The files that make up one program; each is a module the others can `use`.
#[salsa::input(debug)]
pub struct Workspace {
    #[returns(ref)]
    pub files: Vec<SourceFile>,
}

/// The text of one chunk, interned: equal texts are one chunk, parsed once.
#[salsa::interned(debug)]
pub struct ChunkText<'db> {
    #[returns(ref)]
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParsedChunk {
    pub items: Vec<AstItem>,
    /// Spans relative to the chunk.
    pub diagnostics: Vec<Diagnostic>,
}

/// A shared AST item; equal when it is the same allocation or structurally equal, so
/// comparing an unchanged item is a pointer comparison.
#[derive(Clone, Debug)]
pub struct AstItem(pub Arc<ast::Item>);

impl PartialEq for AstItem {
    fn eq(&self, other: &AstItem) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl std::ops::Deref for AstItem {
    type Target = ast::Item;
    fn deref(&self) -> &ast::Item {
        &self.0
    }
}

#[salsa::tracked(returns(ref))]
pub fn parse_chunk<'db>(db: &'db dyn Db, chunk: ChunkText<'db>) -> ParsedChunk {
    let parse = syntax::parse(chunk.text(db));
    ParsedChunk {
        items: parse
            .file
            .items
            .into_iter()
            .map(|i| AstItem(Arc::new(i)))
            .collect(),
        diagnostics: parse.diagnostics,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemKind {
    Fn,
    ExternFn,
    Struct,
    Enum,
    TypeAlias,
    Use,
    /// `test "name" { … }`: named by its string, in no namespace.
    Test,
}

/// One top-level item of a file.
#[salsa::tracked(debug)]
pub struct Item<'db> {
    #[returns(copy)]
    pub file: SourceFile,
    #[returns(copy)]
    pub kind: ItemKind,
    #[returns(ref)]
    pub name: String,
    /// The syntax, spans relative to `offset`.
    #[tracked]
    #[returns(ref)]
    pub ast: AstItem,
    /// Where the item's chunk starts in the file.
    #[tracked]
    #[returns(copy)]
    pub offset: u32,
}

#[derive(Clone, Debug, PartialEq, salsa::SalsaValue)]
pub struct FileItems<'db> {
    pub items: Vec<Item<'db>>,
    /// Syntax errors, spans absolute.
    pub syntax_diagnostics: Vec<Diagnostic>,
    /// Names of items that failed to parse: uses of them are not reported again.
    pub broken_names: Vec<String>,
}

#[salsa::tracked(returns(ref))]
pub fn file_items<'db>(db: &'db dyn Db, file: SourceFile) -> FileItems<'db> {
    let text = file.text(db);
    let starts = syntax::chunk_starts(text);
    let mut items = Vec::new();
    let mut syntax_diagnostics = Vec::new();
    let mut broken_names = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let chunk = ChunkText::new(db, text[start..end].to_owned());
        let parsed = parse_chunk(db, chunk);
        for d in &parsed.diagnostics {
            let mut d = shift_diagnostic(d, start as u32);
            // Where a chunk's parser saw the end of its input, the file goes on.
            if end < text.len() {
                let found = format!("found {}", syntax::describe_token_at(text, end));
                d.message = d.message.replace("found the end of the file", &found);
                for l in &mut d.secondary {
                    l.message = l.message.replace("found the end of the file", &found);
                }
            }
            syntax_diagnostics.push(d);
        }
        for ast in &parsed.items {
            let (kind, name) = item_key(ast);
            items.push(Item::new(db, file, kind, name, ast.clone(), start as u32));
        }
        if parsed.items.is_empty() && !parsed.diagnostics.is_empty() {
            broken_names.extend(declared_name(&text[start..end]));
        }
    }
    FileItems {
        items,
        syntax_diagnostics,
        broken_names,
    }
}

/// The name a chunk that failed to parse was declaring, read from its first line that is
/// not a doc comment: `fn name`, `struct Name`, ….
fn declared_name(chunk: &str) -> Option<String> {
    let line = chunk
        .lines()
        .map(str::trim_start)
        .find(|l| !l.starts_with("//") && !l.is_empty())?;
    let mut words = line
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty());
    let mut keyword = words.next()?;
    if keyword == "extern" {
        keyword = words.next()?;
    }
    if !matches!(keyword, "fn" | "struct" | "enum" | "type") {
        return None;
    }
    words.next().map(str::to_owned)
}

fn item_key(item: &ast::Item) -> (ItemKind, String) {
    match &item.kind {
        ast::ItemKind::Fn(f) => (ItemKind::Fn, f.name.name.clone()),
        ast::ItemKind::ExternFn(f) => (ItemKind::ExternFn, f.name.name.clone()),
        ast::ItemKind::Struct(s) => (ItemKind::Struct, s.name.name.clone()),
        ast::ItemKind::Enum(e) => (ItemKind::Enum, e.name.name.clone()),
        ast::ItemKind::TypeAlias(t) => (ItemKind::TypeAlias, t.name.name.clone()),
        ast::ItemKind::Use(u) => (ItemKind::Use, u.path.text()),
        ast::ItemKind::Test(t) => (ItemKind::Test, t.name.clone()),
    }
}

pub(crate) fn shift(span: Span, by: u32) -> Span {
    Span {
        start: span.start + by,
        end: span.end + by,
    }
}

pub(crate) fn shift_diagnostic(d: &Diagnostic, by: u32) -> Diagnostic {
    let mut d = d.clone();
    d.span = shift(d.span, by);
    for l in &mut d.secondary {
        l.span = shift(l.span, by);
    }
    d
}

/// The names one module defines, by namespace.
#[derive(Clone, Debug, Default, PartialEq, salsa::SalsaValue)]
pub struct ModuleScope<'db> {
    /// Functions and externs.
    pub values: BTreeMap<String, Item<'db>>,
    /// Structs, enums and type aliases.
    pub types: BTreeMap<String, Item<'db>>,
    /// `use` items.
    pub uses: Vec<Item<'db>>,
    /// Tests, by name.
    pub tests: BTreeMap<String, Item<'db>>,
    /// Second and later definitions of a name, with the first.
    pub duplicates: Vec<(Item<'db>, Item<'db>)>,
    /// Items that failed to parse; a use of one is not an error of its own.
    pub broken: Vec<String>,
}

#[salsa::tracked(returns(ref))]
pub fn module_scope<'db>(db: &'db dyn Db, file: SourceFile) -> ModuleScope<'db> {
    let mut scope = ModuleScope::default();
    let items = file_items(db, file);
    scope.broken = items.broken_names.clone();
    for &item in &items.items {
        let map = match item.kind(db) {
            ItemKind::Fn | ItemKind::ExternFn => &mut scope.values,
            ItemKind::Struct | ItemKind::Enum | ItemKind::TypeAlias => &mut scope.types,
            ItemKind::Use => {
                scope.uses.push(item);
                continue;
            }
            ItemKind::Test => &mut scope.tests,
        };
        match map.get(item.name(db)) {
            Some(&first) => scope.duplicates.push((item, first)),
            None => {
                map.insert(item.name(db).clone(), item);
            }
        }
    }
    scope
}

/// The modules a file names (`use m`, `m::f`; see `syntax::module_names`): what brings a
/// module beside a program, or a prelude module, into it. `sapc` loads a program's
/// modules by this query, and [`program_files`] keeps the prelude modules by it.
#[salsa::tracked(returns(ref))]
pub fn named_modules(db: &dyn Db, file: SourceFile) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for item in &file_items(db, file).items {
        syntax::module_names(&item.ast(db).0, &mut names);
    }
    names
}

/// The program's files and the prelude modules it uses, directly or through another
/// prelude module, in workspace order. A prelude module nothing names
/// ([`named_modules`]) is neither classified, lowered nor compiled.
#[salsa::tracked(returns(ref))]
pub fn program_files(db: &dyn Db, workspace: Workspace) -> Vec<SourceFile> {
    let all = workspace.files(db);
    let is_prelude = |f: &SourceFile| f.is_prelude(db);
    let mut included: Vec<SourceFile> = all.iter().copied().filter(|f| !is_prelude(f)).collect();
    let mut i = 0;
    while i < included.len() {
        let named = named_modules(db, included[i]);
        for p in all.iter().copied().filter(is_prelude) {
            let name = p.module_name(db);
            // A program's own module of that name shadows the prelude's.
            let shadowed = all
                .iter()
                .any(|f| !is_prelude(f) && f.module_name(db) == name);
            if !shadowed && !included.contains(&p) && named.contains(&name) {
                included.push(p);
            }
        }
        i += 1;
    }
    all.iter()
        .copied()
        .filter(|f| included.contains(f))
        .collect()
}

/// Module name → file, for `use`.
#[salsa::tracked(returns(ref))]
pub fn workspace_modules(db: &dyn Db, workspace: Workspace) -> BTreeMap<String, SourceFile> {
    workspace
        .files(db)
        .iter()
        .map(|&f| (f.module_name(db), f))
        .collect()
}
