//! Name resolution of items: a module's own definitions, then its imports, then the
//! standard externs. Locals are resolved by the body checker.

use std::collections::BTreeMap;

use syntax::ast::{self, Path, UseKind};

use crate::Db;
use crate::builtins::{self, Builtin};
use crate::diagnostics::{self as diag, HirDiagnostic};
use crate::items::{Item, ItemKind, ModuleScope, SourceFile, module_scope, workspace_modules};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef<'db> {
    Item(Item<'db>),
    Builtin(Builtin),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeDef<'db> {
    Item(Item<'db>),
}

pub struct Resolver<'db> {
    pub db: &'db dyn Db,
    scope: &'db ModuleScope<'db>,
    modules: &'db BTreeMap<String, SourceFile>,
}

impl<'db> Resolver<'db> {
    pub fn new(db: &'db dyn Db, file: SourceFile) -> Resolver<'db> {
        let modules = workspace_modules(db, db.workspace());
        Resolver {
            db,
            scope: module_scope(db, file),
            modules,
        }
    }

    fn module(&self, name: &str) -> Option<&'db ModuleScope<'db>> {
        let file = *self.modules.get(name)?;
        Some(module_scope(self.db, file))
    }

    /// Looks `name` up in one namespace: own items, named imports, glob imports.
    fn lookup(
        &self,
        name: &str,
        namespace: fn(&'db ModuleScope<'db>) -> &'db BTreeMap<String, Item<'db>>,
    ) -> Option<Item<'db>> {
        if let Some(&item) = namespace(self.scope).get(name) {
            return Some(item);
        }
        let mut globbed = None;
        for &use_item in &self.scope.uses {
            let ast::ItemKind::Use(u) = &use_item.ast(self.db).kind else {
                continue;
            };
            let module_name = &u.path.segments[0].name;
            match &u.kind {
                UseKind::Single
                    if u.path.segments.len() == 2 && u.path.segments[1].name == name =>
                {
                    if let Some(&item) = self
                        .module(module_name)
                        .and_then(|m| namespace(m).get(name))
                    {
                        return Some(item);
                    }
                }
                UseKind::Group(names)
                    if u.path.segments.len() == 1 && names.iter().any(|n| n.name == name) =>
                {
                    if let Some(&item) = self
                        .module(module_name)
                        .and_then(|m| namespace(m).get(name))
                    {
                        return Some(item);
                    }
                }
                UseKind::Glob if u.path.segments.len() == 1 && globbed.is_none() => {
                    globbed = self
                        .module(module_name)
                        .and_then(|m| namespace(m).get(name))
                        .copied();
                }
                _ => {}
            }
        }
        globbed
    }

    pub fn lookup_value(&self, name: &str) -> Option<ValueDef<'db>> {
        if let Some(item) = self.lookup(name, |s| &s.values) {
            return Some(ValueDef::Item(item));
        }
        builtins::lookup(name).map(ValueDef::Builtin)
    }

    /// `f` or `module::f`.
    pub fn lookup_value_path(&self, path: &Path) -> Option<ValueDef<'db>> {
        match path.segments.as_slice() {
            [one] => self.lookup_value(&one.name),
            [module, name] => self
                .module(&module.name)?
                .values
                .get(&name.name)
                .map(|&i| ValueDef::Item(i)),
            _ => None,
        }
    }

    pub fn lookup_type_path(&self, path: &Path) -> Option<TypeDef<'db>> {
        match path.segments.as_slice() {
            [one] => self.lookup(&one.name, |s| &s.types).map(TypeDef::Item),
            [module, name] => self
                .module(&module.name)?
                .types
                .get(&name.name)
                .map(|&i| TypeDef::Item(i)),
            _ => None,
        }
    }

    /// Whether `name` is an item of this module that failed to parse.
    pub fn is_broken(&self, name: &str) -> bool {
        self.scope.broken.iter().any(|b| b == name)
    }

    pub fn is_module(&self, name: &str) -> bool {
        self.modules.contains_key(name)
    }

    /// The value of module `module` named most like `name`.
    pub fn similar_in_module(&self, module: &str, name: &str) -> Option<String> {
        let scope = self.module(module)?;
        closest(name, scope.values.keys().map(String::as_str))
    }

    /// The module named most like `name`.
    pub fn similar_module(&self, name: &str) -> Option<String> {
        closest(name, self.modules.keys().map(String::as_str))
    }

    pub fn similar_type_names(&self, name: &str) -> Option<String> {
        let builtin = [
            "i32", "i64", "f64", "Boolean", "String", "Json", "Tool", "Context", "List", "Option",
        ];
        let candidates = self.scope.types.keys().map(String::as_str).chain(builtin);
        closest(name, candidates)
    }

    pub fn similar_value_names(&self, name: &str, locals: &[&str]) -> Option<String> {
        let mut candidates: Vec<&str> = self.scope.values.keys().map(String::as_str).collect();
        for builtin in builtins::names() {
            candidates.push(builtin);
        }
        candidates.extend(locals.iter().copied());
        closest(name, candidates.into_iter())
    }

    /// Problems with the `use` items of this module, reported at the `use`.
    pub fn use_diagnostics(&self) -> Vec<HirDiagnostic<'db>> {
        let mut out = Vec::new();
        for &use_item in &self.scope.uses {
            let ast::ItemKind::Use(u) = &use_item.ast(self.db).kind else {
                continue;
            };
            if u.path.segments.len() > 2
                || (u.path.segments.len() > 1 && !matches!(u.kind, UseKind::Single))
            {
                out.push(diag::nested_use(use_item, u.path.span));
                continue;
            }
            let module = &u.path.segments[0];
            let Some(scope) = self.module(&module.name) else {
                let known: Vec<&str> = self.modules.keys().map(String::as_str).collect();
                out.push(diag::unknown_module(
                    use_item,
                    module.span,
                    &module.name,
                    closest(&module.name, known.into_iter()),
                ));
                continue;
            };
            let names: Vec<&ast::Ident> = match &u.kind {
                UseKind::Single => u.path.segments[1..].iter().collect(),
                UseKind::Group(names) => names.iter().collect(),
                UseKind::Glob => Vec::new(),
            };
            if u.path.segments.len() > 2
                || (u.path.segments.len() > 1 && !matches!(u.kind, UseKind::Single))
            {
                out.push(diag::nested_use(use_item, u.path.span));
                continue;
            }
            for n in names {
                if !scope.values.contains_key(&n.name) && !scope.types.contains_key(&n.name) {
                    out.push(diag::unknown_import(
                        use_item,
                        n.span,
                        &n.name,
                        &module.name,
                    ));
                }
            }
        }
        out
    }
}

impl<'db> Item<'db> {
    pub fn is_callable(self, db: &'db dyn Db) -> bool {
        matches!(self.kind(db), ItemKind::Fn | ItemKind::ExternFn)
    }
}

/// The candidate closest to `name` by edit distance, if it is close enough to be a typo.
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .filter(|c| *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, c)| c.to_owned())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}
