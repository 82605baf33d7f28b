//! The ids of one function body, by which its inference results are indexed: every
//! expression has the [`ExprId`] the parser gave it (unique within the item), every local
//! binding (parameter, `let`, loop variable, `select` binding) a [`LocalId`]. Later layers
//! read a result by id; none of them finds one by source span or resolves a name again.

use syntax::Span;
pub use syntax::ast::ExprId;

use crate::builtins::Builtin;
use crate::items::Item;
use crate::ty::Ty;

/// A local of one function body: an index into [`BodyResult::locals`]. The parameters
/// come first, in order; the other locals follow in the order they are declared.
///
/// [`BodyResult::locals`]: crate::infer::BodyResult::locals
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

/// A local binding: its name, its type after inference, where it is declared (relative to
/// the item).
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct LocalData<'db> {
    pub name: String,
    pub ty: Ty<'db>,
    pub decl: Span,
}

/// Facts about some of a body's expressions, by id.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct ExprMap<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for ExprMap<T> {
    fn default() -> Self {
        ExprMap { slots: Vec::new() }
    }
}

impl<T> ExprMap<T> {
    /// Records `value` for `id`, replacing what was there.
    pub fn insert(&mut self, id: ExprId, value: T) {
        let i = id.0 as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(value);
    }

    pub fn get(&self, id: ExprId) -> Option<&T> {
        self.slots.get(id.0 as usize)?.as_ref()
    }

    /// Every recorded fact, by increasing id.
    pub fn iter(&self) -> impl Iterator<Item = (ExprId, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((ExprId(i as u32), v.as_ref()?)))
    }

    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> ExprMap<U> {
        ExprMap {
            slots: self.slots.into_iter().map(|v| v.map(&mut f)).collect(),
        }
    }
}

/// What a path expression names.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub enum Resolution<'db> {
    Local(LocalId),
    /// A function or extern used as a value (a `Tool`).
    Item(Item<'db>),
    /// A standard extern used as a value, or `None`.
    Builtin(Builtin),
    /// `Enum::Variant`: the variant's position in the enum.
    Variant {
        owner: Item<'db>,
        index: u32,
    },
}

/// What a call resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, salsa::SalsaValue)]
pub enum Callee<'db> {
    Item(Item<'db>),
    Builtin(Builtin),
}
