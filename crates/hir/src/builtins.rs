//! The standard externs, available in every module without a declaration (REFERENCE.md,
//! "The standard externs"), as the checker sees them: their table lives in the
//! `builtins` crate, and their types are derived from it here.

use builtins::{Form, SigType};

use crate::ty::Ty;

pub use builtins::{Builtin, lookup, names};

/// A builtin's signature in the checker's types: parameter names and types, result,
/// and how many type parameters (`Ty::Param`) it has.
pub struct BuiltinSig<'db> {
    pub params: Vec<(&'static str, Ty<'db>)>,
    pub ret: Ty<'db>,
    pub generics: u32,
}

/// The signature the checker types a call of `b` by (its main form).
pub fn signature<'db>(b: Builtin) -> BuiltinSig<'db> {
    of_form(&b.entry().main)
}

/// Every form of `b` (`len` also takes a `String`), the main one first.
pub fn signatures<'db>(b: Builtin) -> Vec<BuiltinSig<'db>> {
    b.entry().forms().map(of_form).collect()
}

fn of_form<'db>(form: &Form) -> BuiltinSig<'db> {
    BuiltinSig {
        params: form.params.iter().map(|&(n, t)| (n, ty(t))).collect(),
        ret: ty(form.ret),
        generics: u32::from(form.is_generic()),
    }
}

fn ty<'db>(t: SigType) -> Ty<'db> {
    match t {
        SigType::Unit => Ty::Unit,
        SigType::Bool => Ty::Bool,
        SigType::I64 => Ty::I64,
        SigType::F64 => Ty::F64,
        SigType::String => Ty::String,
        SigType::Json => Ty::Json,
        SigType::Tool => Ty::Tool,
        SigType::T => Ty::Param(0),
        SigType::List(inner) => Ty::List(Box::new(ty(*inner))),
        SigType::Option(inner) => Ty::Option(Box::new(ty(*inner))),
    }
}
