//! Locals and block scopes (unused-variable warnings when a scope closes), and what a
//! path names: a local, an item, a standard extern, an enum variant.

use syntax::Span;
use syntax::ast;

use super::ide::{COMPLETION_MARKER, Target};
use super::{Checker, Local, LocalKind};
use crate::body::{LocalId, Resolution};
use crate::defs::{alias_def, enum_def};
use crate::diagnostics as diag;
use crate::items::ItemKind;
use crate::resolve::{TypeDef, ValueDef, closest};
use crate::ty::Ty;

impl<'a, 'db> Checker<'a, 'db> {
    pub(super) fn declare(
        &mut self,
        name: &str,
        ty: Ty<'db>,
        span: Span,
        kind: LocalKind,
    ) -> LocalId {
        self.locals.push(Local {
            name: name.to_owned(),
            ty,
            span,
            used: false,
            kind,
            parallel_depth: self.parallel_depth,
        });
        let id = self.locals.len() - 1;
        self.scopes.last_mut().expect("a scope is open").push(id);
        LocalId(id as u32)
    }

    pub(super) fn lookup_local(&self, name: &str) -> Option<usize> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .copied()
            .find(|&id| self.locals[id].name == name)
    }

    pub(super) fn push_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    pub(super) fn pop_scope(&mut self) {
        let scope = self.scopes.pop().unwrap_or_default();
        for id in scope {
            let local = &self.locals[id];
            if local.used || local.name.starts_with('_') {
                continue;
            }
            let d = match local.kind {
                LocalKind::Param { is_context: true } => {
                    if self.context_used_implicitly {
                        continue;
                    }
                    diag::unused_context(self.item, local.span, &local.name)
                }
                _ => diag::unused_variable(self.item, local.span, &local.name),
            };
            self.diagnostics.push(d);
        }
    }

    /// The locals a name could reach here: every one in scope but a shadowed one, in the
    /// order they were declared.
    pub(super) fn visible_local_ids(&self) -> Vec<LocalId> {
        let mut visible: Vec<usize> = Vec::new();
        for &id in self.scopes.iter().flatten() {
            visible.retain(|&v| self.locals[v].name != self.locals[id].name);
            visible.push(id);
        }
        visible.into_iter().map(|id| LocalId(id as u32)).collect()
    }

    pub(super) fn visible_locals(&self) -> Vec<&str> {
        self.scopes
            .iter()
            .flatten()
            .map(|&id| self.locals[id].name.as_str())
            .collect()
    }

    /// Whether `path` is the value `None`: the name, unless a local or an item takes it.
    pub(super) fn names_none(&self, path: &ast::Path) -> bool {
        matches!(path.segments.as_slice(), [one] if one.name == "None")
            && self.lookup_local("None").is_none()
            && self.resolver.lookup_value("None").is_none()
    }

    /// The type of the value `path` names and what it names; `None` (reported here) when
    /// it names nothing.
    pub(super) fn path_value(&mut self, path: &ast::Path) -> Option<(Ty<'db>, Resolution<'db>)> {
        let db = self.db;
        if let [one] = path.segments.as_slice() {
            if one.name == COMPLETION_MARKER {
                self.completion_here(None);
                return None;
            }
            if let Some(id) = self.lookup_local(&one.name) {
                self.locals[id].used = true;
                self.refer_local(one.span, id);
                return Some((
                    self.locals[id].ty.clone(),
                    Resolution::Local(LocalId(id as u32)),
                ));
            }
            match self.resolver.lookup_value(&one.name) {
                Some(def) => {
                    self.refer(one.span, Self::value_target(def));
                    return Some((Ty::Tool, Self::value_resolution(def)));
                }
                None if self.resolver.is_broken(&one.name) => return None,
                None => {
                    if self.resolver.lookup_type_path(path).is_some() || is_builtin_type(&one.name)
                    {
                        let d = diag::not_a_value(
                            self.item,
                            path.span,
                            &format!("the type `{}`", one.name),
                        );
                        self.diagnostics.push(d);
                        return None;
                    }
                    let locals: Vec<&str> = self.visible_locals();
                    let similar = self.resolver.similar_value_names(&one.name, &locals);
                    let d = diag::unresolved_name(self.item, one.span, &one.name, similar);
                    self.diagnostics.push(d);
                    return None;
                }
            }
        }
        // `Enum::Variant`, `module::Enum::Variant`.
        if let [owner @ .., second] = path.segments.as_slice()
            && (1..=2).contains(&owner.len())
        {
            let first = owner.last().expect("one or two segments");
            let enum_path = ast::Path {
                segments: owner.to_vec(),
                span: owner[0].span.to(first.span),
            };
            if let Some(TypeDef::Item(item)) = self.resolver.lookup_type_path(&enum_path) {
                let enum_item = match item.kind(db) {
                    ItemKind::Enum => Some(item),
                    ItemKind::TypeAlias => match &alias_def(db, item).0 {
                        Ty::Enum(e) => Some(*e),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(enum_item) = enum_item {
                    self.refer(first.span, Target::Item(item));
                    let def = enum_def(db, enum_item);
                    if let Some(index) = def.variants.iter().position(|(v, _)| *v == second.name) {
                        let target = Target::Variant {
                            owner: enum_item,
                            name: second.name.clone(),
                        };
                        self.refer(second.span, target);
                        let resolution = Resolution::Variant {
                            owner: enum_item,
                            index: index as u32,
                        };
                        return Some((Ty::Enum(enum_item), resolution));
                    }
                    let similar =
                        closest(&second.name, def.variants.iter().map(|(v, _)| v.as_str()));
                    let d = diag::no_variant(
                        self.item,
                        second.span,
                        enum_item.name(db),
                        &second.name,
                        similar,
                    );
                    self.diagnostics.push(d);
                    return None;
                }
            }
        }
        // `module::function`.
        if let [first, second] = path.segments.as_slice() {
            if first.name == "Context" {
                let d =
                    diag::not_a_value(self.item, path.span, &format!("`Context::{}`", second.name))
                        .with_help("create a context with `Context::new()`");
                self.diagnostics.push(d);
                return None;
            }
            if self.resolver.is_module(&first.name) {
                if let Some(def) = self.resolver.lookup_value_path(path) {
                    self.refer(second.span, Self::value_target(def));
                    return Some((Ty::Tool, Self::value_resolution(def)));
                }
                let d = diag::unresolved_name(self.item, second.span, &path.text(), None);
                self.diagnostics.push(d);
                return None;
            }
        }
        let d = diag::unresolved_name(self.item, path.span, &path.text(), None);
        self.diagnostics.push(d);
        None
    }

    pub(super) fn value_resolution(def: ValueDef<'db>) -> Resolution<'db> {
        match def {
            ValueDef::Item(item) => Resolution::Item(item),
            ValueDef::Builtin(b) => Resolution::Builtin(b),
        }
    }
}

pub(super) fn is_builtin_type(name: &str) -> bool {
    matches!(
        name,
        "i32"
            | "i64"
            | "f64"
            | "Boolean"
            | "bool"
            | "String"
            | "Json"
            | "Tool"
            | "Context"
            | "List"
            | "Option"
    )
}
