//! Type expressions → [`Ty`]: builtin type names, items found by the resolver, aliases
//! expanded (a cycle reported once, where the alias is declared), and the type names an
//! item refers to, for the IDE.

use syntax::ast::{self, TypeExpr, TypeExprKind};

use crate::diagnostics::{self as diag, HirDiagnostic};
use crate::items::{Item, ItemKind};
use crate::resolve::{Resolver, TypeDef};
use crate::ty::Ty;

/// Resolves type expressions of one item, collecting diagnostics.
pub struct TypeLowering<'a, 'db> {
    pub resolver: &'a Resolver<'db>,
    pub diagnostics: Vec<HirDiagnostic<'db>>,
    /// The item whose spans are being reported.
    pub base: Item<'db>,
    /// An alias expansion came back to an alias already being expanded.
    cycle: bool,
    /// Every type name resolved to an item, with where it is written.
    pub references: Vec<(syntax::Span, Item<'db>)>,
}

impl<'a, 'db> TypeLowering<'a, 'db> {
    pub fn new(resolver: &'a Resolver<'db>, base: Item<'db>) -> Self {
        TypeLowering {
            resolver,
            diagnostics: Vec::new(),
            base,
            cycle: false,
            references: Vec::new(),
        }
    }

    pub fn lower(&mut self, ty: &TypeExpr) -> Ty<'db> {
        let resolver = self.resolver;
        self.lower_in(resolver, ty, &mut Vec::new(), true)
    }

    /// Lowers the target of the alias `alias`, which is being checked itself: a
    /// reference back to it is a cycle.
    pub fn lower_alias_target(&mut self, alias: Item<'db>, ty: &TypeExpr) -> Ty<'db> {
        let resolver = self.resolver;
        let t = self.lower_in(resolver, ty, &mut vec![alias], true);
        if self.cycle {
            let name = alias.name(resolver.db);
            self.diagnostics
                .push(diag::alias_cycle(self.base, ty.span, name));
            return Ty::Error;
        }
        t
    }

    /// `aliases` is the chain of aliases being expanded, to stop on a cycle. Only the
    /// item's own type expressions `report`; an alias expanded on the way reports its
    /// problems where it is declared.
    fn lower_in(
        &mut self,
        resolver: &Resolver<'db>,
        ty: &TypeExpr,
        aliases: &mut Vec<Item<'db>>,
        report: bool,
    ) -> Ty<'db> {
        let db = resolver.db;
        let TypeExprKind::Named { path, args } = &ty.kind else {
            return Ty::Unit;
        };
        let name = path.text();
        let expect_args = |this: &mut Self, n: usize| -> bool {
            if args.len() == n {
                return true;
            }
            if report {
                this.diagnostics.push(diag::wrong_type_arity(
                    this.base,
                    ty.span,
                    &name,
                    n,
                    args.len(),
                ));
            }
            false
        };
        let builtin = match name.as_str() {
            "i32" => Some(Ty::I32),
            "i64" => Some(Ty::I64),
            "f64" => Some(Ty::F64),
            "Boolean" | "bool" => Some(Ty::Bool),
            "String" => Some(Ty::String),
            "Json" => Some(Ty::Json),
            "Tool" => Some(Ty::Tool),
            "Context" => Some(Ty::Context),
            "List" | "Option" => {
                if !expect_args(self, 1) {
                    return Ty::Error;
                }
                let inner = Box::new(self.lower_in(resolver, &args[0], aliases, report));
                return if name == "List" {
                    Ty::List(inner)
                } else {
                    Ty::Option(inner)
                };
            }
            _ => None,
        };
        if let Some(t) = builtin {
            return if expect_args(self, 0) { t } else { Ty::Error };
        }
        let Some(TypeDef::Item(item)) = resolver.lookup_type_path(path) else {
            if report && !resolver.is_broken(&name) {
                let similar = resolver.similar_type_names(&name);
                self.diagnostics
                    .push(diag::unresolved_type(self.base, path.span, &name, similar));
            }
            return Ty::Error;
        };
        if !expect_args(self, 0) {
            return Ty::Error;
        }
        if report {
            self.references.push((path.last().span, item));
        }
        match item.kind(db) {
            ItemKind::Struct => Ty::Struct(item),
            ItemKind::Enum => Ty::Enum(item),
            _ => {
                if aliases.contains(&item) {
                    // Reported once, where the alias is declared (`lower_alias_target`).
                    self.cycle = true;
                    return Ty::Error;
                }
                let ast::ItemKind::TypeAlias(alias) = &item.ast(db).kind else {
                    return Ty::Error;
                };
                aliases.push(item);
                let alias_resolver = Resolver::new(db, item.file(db));
                let t = self.lower_in(&alias_resolver, &alias.ty, aliases, false);
                aliases.pop();
                t
            }
        }
    }
}
