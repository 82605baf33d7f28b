//! `main`'s arguments: the command line after `sapc run FILE --`, read as the types of
//! `main`'s parameters.

use std::sync::Arc;

use runtime::{TypeDesc, Value};

use super::externs::show_type;
use super::types::desc_of;
use super::{ExecError, Host};

/// The values of `main`'s parameters other than its `Context`, in order, from the
/// command line's arguments (`sapc run FILE -- ARGS`): a `String` takes one as it is, a
/// last `List<String>` all that are left, any other type reads one as JSON.
pub fn main_arguments(host: &Host, main: &ir::Function) -> Result<Vec<Value>, ExecError> {
    let params: Vec<&ir::Param> = main
        .params
        .iter()
        .filter(|p| p.ty != ir::Type::Context)
        .collect();
    let takes = || {
        let all: Vec<String> = params
            .iter()
            .map(|p| format!("{}: {}", p.name, show_type(&p.ty)))
            .collect();
        format!(
            "`main` takes ({}) from the command line: `sapc run FILE -- ARGS`",
            all.join(", ")
        )
    };
    let fail = |message: String| ExecError::new(message, Some(main.span));
    let mut args = host.args.iter();
    let mut values = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let desc = desc_of(&host.types, &p.ty);
        let strings = TypeDesc::List(Box::new(TypeDesc::String));
        if i + 1 == params.len() && desc == strings {
            let rest = args.by_ref().map(|a| Value::Str(a.as_str().into()));
            values.push(Value::List(Arc::new(rest.collect())));
            continue;
        }
        let Some(arg) = args.next() else {
            return Err(fail(format!("no argument for `{}`: {}", p.name, takes())));
        };
        let value = if desc == TypeDesc::String {
            Value::Str(arg.as_str().into())
        } else {
            serde_json::from_str(arg)
                .map_err(|e| e.to_string())
                .and_then(|json| runtime::value::decode(&desc, &json).map_err(|e| e.to_string()))
                .map_err(|why| {
                    fail(format!(
                        "the argument `{arg}` for `{}` is not a {} ({why}): {}",
                        p.name,
                        show_type(&p.ty),
                        takes()
                    ))
                })?
        };
        values.push(value);
    }
    if let Some(extra) = args.next() {
        return Err(fail(format!(
            "an argument too many (`{extra}`): {}",
            takes()
        )));
    }
    Ok(values)
}
