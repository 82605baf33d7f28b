//! What the language server reads from a body check: every name resolved to its target
//! (for go-to-definition and hover) and what is in scope at the completion marker.

use syntax::Span;

use super::Checker;
use crate::body::LocalId;
use crate::builtins::Builtin;
use crate::items::Item;
use crate::resolve::ValueDef;
use crate::ty::Ty;

/// What a name in the source refers to, for go-to-definition and hover.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub enum Target<'db> {
    /// A parameter or `let` (or loop, `select` binding) of the same function, declared
    /// at `decl` (relative to the item).
    Local {
        local: LocalId,
        decl: Span,
    },
    /// A function, extern, struct, enum or alias.
    Item(Item<'db>),
    Field {
        owner: Item<'db>,
        name: String,
    },
    Variant {
        owner: Item<'db>,
        name: String,
    },
    Builtin(Builtin),
}

#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct Reference<'db> {
    /// The name as written, relative to the item.
    pub span: Span,
    pub target: Target<'db>,
}

/// A local visible at some point of a body.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct LocalInfo<'db> {
    pub name: String,
    pub ty: Ty<'db>,
    pub decl: Span,
}

/// The name an editor inserts at the cursor to ask what could be written there (a
/// completion request on code that is being typed).
pub const COMPLETION_MARKER: &str = "sapCompletionMarker";

/// What the checker saw at the completion marker.
#[derive(Clone, Debug, Default, PartialEq, Eq, salsa::SalsaValue)]
pub struct CompletionSite<'db> {
    /// The locals in scope there.
    pub locals: Vec<LocalInfo<'db>>,
    /// For `receiver.marker`, the receiver's type.
    pub receiver: Option<Ty<'db>>,
}

impl<'a, 'db> Checker<'a, 'db> {
    pub(super) fn refer(&mut self, span: Span, target: Target<'db>) {
        self.references.push(Reference { span, target });
    }

    pub(super) fn refer_local(&mut self, span: Span, id: usize) {
        let target = Target::Local {
            local: LocalId(id as u32),
            decl: self.locals[id].span,
        };
        self.refer(span, target);
    }

    pub(super) fn value_target(def: ValueDef<'db>) -> Target<'db> {
        match def {
            ValueDef::Item(item) => Target::Item(item),
            ValueDef::Builtin(b) => Target::Builtin(b),
        }
    }

    /// At the completion marker: remember what is in scope.
    pub(super) fn completion_here(&mut self, receiver: Option<Ty<'db>>) {
        let locals = self
            .scopes
            .iter()
            .flatten()
            .map(|&id| LocalInfo {
                name: self.locals[id].name.clone(),
                ty: self.locals[id].ty.clone(),
                decl: self.locals[id].span,
            })
            .collect();
        self.completion = Some(CompletionSite { locals, receiver });
    }
}
