//! The extern functions a host provides (the calculator's, and any an embedder
//! registers), and the check of a program's `extern fn` declarations against them and
//! against the table of standard externs.

use std::collections::HashMap;
use std::sync::Arc;

use builtins::SigType;
use ir::{Builtin, Module, Type};
use runtime::Value;

use super::ExecError;

/// An extern function: arguments in, a value or an error message out.
pub type ExternFn = Arc<dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync>;

/// Decides whether a declared signature fits a registered extern.
pub type SignatureCheck = Arc<dyn Fn(&[Type], &Type) -> bool + Send + Sync>;

/// `i64::checked_add` and its kin.
type CheckedOp = fn(i64, i64) -> Option<i64>;

/// Extern functions the host provides, by name.
#[derive(Clone, Default)]
pub struct Externs {
    functions: HashMap<String, (String, SignatureCheck, ExternFn)>,
}

impl Externs {
    /// Registers `f` for programs that declare exactly `params -> ret`.
    pub fn register(&mut self, name: &str, params: Vec<Type>, ret: Type, f: ExternFn) {
        let shown = format!(
            "({}) -> {}",
            params.iter().map(show_type).collect::<Vec<_>>().join(", "),
            show_type(&ret)
        );
        let check: SignatureCheck =
            Arc::new(move |p: &[Type], r: &Type| p == params.as_slice() && *r == ret);
        self.functions.insert(name.to_owned(), (shown, check, f));
    }

    /// Registers `f` with a custom signature check (`shown` describes it in errors).
    pub fn register_with(&mut self, name: &str, shown: &str, check: SignatureCheck, f: ExternFn) {
        self.functions
            .insert(name.to_owned(), (shown.to_owned(), check, f));
    }

    pub fn get(&self, name: &str) -> Option<&ExternFn> {
        self.functions.get(name).map(|(_, _, f)| f)
    }

    /// The arithmetic tools of the seed's calculators: `add`, `subtract`, `multiply`,
    /// `divide`, on `i32` or `i64` as the program declares them.
    pub fn with_calculator(mut self) -> Externs {
        let int_binary: SignatureCheck = Arc::new(
            |p: &[Type], r: &Type| matches!(p, [a, b] if a == b && a == r && matches!(r, Type::I32 | Type::I64)),
        );
        let ops: [(&str, CheckedOp); 4] = [
            ("add", i64::checked_add),
            ("subtract", i64::checked_sub),
            ("multiply", i64::checked_mul),
            ("divide", i64::checked_div),
        ];
        for (name, op) in ops {
            let f: ExternFn = Arc::new(move |args: &[Value]| match args {
                [Value::Int(a), Value::Int(b)] => op(*a, *b).map(Value::Int).ok_or_else(|| {
                    if *b == 0 && name == "divide" {
                        "division by zero".to_owned()
                    } else {
                        "integer overflow".to_owned()
                    }
                }),
                _ => Err(format!("`{name}` takes two integers")),
            });
            self.register_with(
                name,
                "(i32, i32) -> i32 or (i64, i64) -> i64",
                int_binary.clone(),
                f,
            );
        }
        self
    }

    /// Checks the module's extern declarations against what is registered.
    pub fn check(&self, module: &Module) -> Result<(), ExecError> {
        // A bound extern's tool is found when it is first called; a Python function is
        // the host's, like an unbound extern.
        let served = |e: &&ir::Extern| matches!(e.binding, None | Some(ir::Binding::Python { .. }));
        for e in module.externs.iter().filter(served) {
            let at = |message: String| ExecError::new(message, e.span);
            let params: Vec<Type> = e.params.iter().map(|p| p.ty.clone()).collect();
            if !self.functions.contains_key(&e.name)
                && let Some(b) = standard_extern(&e.name)
            {
                // A declaration of a standard extern: it must say what the standard says.
                if !standard_signature_fits(b, &params, &e.ret) {
                    return Err(at(format!(
                        "`extern fn {}` is declared as ({}) -> {}, which is not the signature of the standard `{}`",
                        e.name,
                        params.iter().map(show_type).collect::<Vec<_>>().join(", "),
                        show_type(&e.ret),
                        e.name
                    )));
                }
                continue;
            }
            match self.functions.get(&e.name) {
                None if e.binding.is_some() => {
                    return Err(at(format!(
                        "`extern \"python\" fn {}` is served by the Python application that loads the program (`saplang.load(…, externs={{\"{}\": …}})`), and this host is not one",
                        e.name, e.name
                    )));
                }
                None => {
                    return Err(at(format!(
                        "the program declares `extern fn {}`, but this host provides no extern of that name",
                        e.name
                    )));
                }
                Some((shown, check, _)) if !check(&params, &e.ret) => {
                    let declared = format!(
                        "({}) -> {}",
                        params.iter().map(show_type).collect::<Vec<_>>().join(", "),
                        show_type(&e.ret)
                    );
                    return Err(at(format!(
                        "`extern fn {}` is declared as {declared}, but the host's `{}` is {shown}",
                        e.name, e.name
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// The standard extern a declared extern of that name stands for.
pub fn standard_extern(name: &str) -> Option<Builtin> {
    builtins::lookup(name)
}

/// Whether a declaration matches one of a standard extern's forms in the table; its
/// type parameter stands for one type throughout a form.
fn standard_signature_fits(b: Builtin, params: &[Type], ret: &Type) -> bool {
    b.entry().forms().any(|form| {
        let mut t = None;
        form.params.len() == params.len()
            && form
                .params
                .iter()
                .zip(params)
                .all(|((_, want), have)| type_fits(*want, have, &mut t))
            && type_fits(form.ret, ret, &mut t)
    })
}

/// Whether `have` is `want`, binding the type parameter to the first type it meets.
fn type_fits(want: SigType, have: &Type, t: &mut Option<Type>) -> bool {
    match (want, have) {
        (SigType::T, _) => match t {
            Some(bound) => bound == have,
            None => {
                *t = Some(have.clone());
                true
            }
        },
        (SigType::List(w), Type::List(h)) | (SigType::Option(w), Type::Option(h)) => {
            type_fits(*w, h, t)
        }
        (SigType::Unit, Type::Unit)
        | (SigType::Bool, Type::Bool)
        | (SigType::I64, Type::I64)
        | (SigType::F64, Type::F64)
        | (SigType::String, Type::Str)
        | (SigType::Json, Type::Json)
        | (SigType::Tool, Type::Tool) => true,
        _ => false,
    }
}

pub fn show_type(t: &Type) -> String {
    match t {
        Type::Unit => "()".to_owned(),
        Type::Bool => "Boolean".to_owned(),
        Type::I32 => "i32".to_owned(),
        Type::I64 => "i64".to_owned(),
        Type::F64 => "f64".to_owned(),
        Type::Str => "String".to_owned(),
        Type::Json => "Json".to_owned(),
        Type::Tool => "Tool".to_owned(),
        Type::Context => "Context".to_owned(),
        Type::List(e) => format!("List<{}>", show_type(e)),
        Type::Option(e) => format!("Option<{}>", show_type(e)),
        Type::Struct(id) | Type::Enum(id) => format!("t{id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }

    #[test]
    fn redeclared_standard_externs_are_checked_against_the_table() {
        use Type::{Bool, I32, I64, Str, Unit};
        let fits = |b, params: &[Type], ret: Type| standard_signature_fits(b, params, &ret);
        assert!(fits(Builtin::Print, &[Str], Unit));
        assert!(!fits(Builtin::Print, &[I32], Unit));
        assert!(fits(Builtin::Push, &[list(I32), I32], list(I32)));
        // The type parameter stands for one type throughout.
        assert!(!fits(Builtin::Push, &[list(I32), I64], list(I32)));
        assert!(!fits(Builtin::Push, &[list(I32), I32], list(I64)));
        // The other forms of `len` and `contains`.
        assert!(fits(Builtin::Len, &[Str], I64));
        assert!(fits(Builtin::Len, &[list(Bool)], I64));
        assert!(fits(Builtin::Contains, &[Str, Str], Bool));
        assert!(fits(Builtin::Contains, &[list(Str), Str], Bool));
        assert!(!fits(Builtin::Contains, &[Str, I32], Bool));
        assert!(!fits(Builtin::Split, &[Str], list(Str)));
        assert!(fits(Builtin::Toposort, &[list(list(I64))], list(list(I64))));
    }
}
