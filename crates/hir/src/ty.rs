//! Types: the representation and how types print. Type expressions become types in
//! [`crate::type_lowering`].

use std::fmt::Write;

use crate::Db;
use crate::items::Item;

#[derive(Clone, Debug, PartialEq, Eq, Hash, salsa::SalsaValue)]
pub enum Ty<'db> {
    I32,
    I64,
    F64,
    Bool,
    String,
    Unit,
    Json,
    Tool,
    Context,
    List(Box<Ty<'db>>),
    Option(Box<Ty<'db>>),
    Struct(Item<'db>),
    Enum(Item<'db>),
    /// An inference variable, only inside one body's inference.
    Var(u32),
    /// A type parameter of a standard extern (`len(xs: List<T>)`).
    Param(u32),
    /// The type of `return`, `break` and `continue`: no value, control leaves.
    Never,
    /// Unknown after an error; compatible with everything so errors do not cascade.
    Error,
}

impl<'db> Ty<'db> {
    pub fn is_numeric(&self) -> bool {
        matches!(self, Ty::I32 | Ty::I64 | Ty::F64)
    }

    /// Whether `Context` appears anywhere inside.
    pub fn contains_context(&self) -> bool {
        match self {
            Ty::Context => true,
            Ty::List(t) | Ty::Option(t) => t.contains_context(),
            _ => false,
        }
    }

    pub fn display(&self, db: &'db dyn Db) -> String {
        let mut out = String::new();
        self.write(db, &mut out);
        out
    }

    fn write(&self, db: &'db dyn Db, out: &mut String) {
        match self {
            Ty::I32 => out.push_str("i32"),
            Ty::I64 => out.push_str("i64"),
            Ty::F64 => out.push_str("f64"),
            Ty::Bool => out.push_str("Boolean"),
            Ty::String => out.push_str("String"),
            Ty::Unit => out.push_str("()"),
            Ty::Json => out.push_str("Json"),
            Ty::Tool => out.push_str("Tool"),
            Ty::Context => out.push_str("Context"),
            Ty::List(t) => {
                out.push_str("List<");
                t.write(db, out);
                out.push('>');
            }
            Ty::Option(t) => {
                out.push_str("Option<");
                t.write(db, out);
                out.push('>');
            }
            Ty::Struct(item) | Ty::Enum(item) => out.push_str(item.name(db)),
            Ty::Var(_) => out.push('_'),
            Ty::Param(i) => {
                let _ = write!(out, "{}", ["T", "U", "V"].get(*i as usize).unwrap_or(&"T"));
            }
            Ty::Never => out.push('!'),
            Ty::Error => out.push_str("{unknown}"),
        }
    }
}
