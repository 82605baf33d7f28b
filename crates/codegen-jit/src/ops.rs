//! What an operation means where both engines must give the same answer, word for word:
//! checked integer arithmetic (and its error messages) and the outcome of a
//! `parallel for`. The evaluator and the native code's runtime both call these.

use ir::{BinOp, SrcSpan, Type};
use runtime::Value;

use crate::host::ExecError;

/// Checked integer arithmetic in the range of `ty`.
pub fn int_op(
    op: BinOp,
    ty: &Type,
    a: i64,
    b: i64,
    span: Option<SrcSpan>,
) -> Result<i64, ExecError> {
    let symbol = match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        _ => "%",
    };
    if matches!(op, BinOp::Div | BinOp::Rem) && b == 0 {
        return Err(ExecError::new(
            format!("division by zero: {a} {symbol} 0"),
            span,
        ));
    }
    let wide = match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        _ => a.checked_rem(b),
    };
    let fits = |n: i64| {
        if *ty == Type::I32 {
            i32::try_from(n).is_ok()
        } else {
            true
        }
    };
    match wide {
        Some(n) if fits(n) => Ok(n),
        _ => Err(ExecError::new(
            format!(
                "integer overflow: {a} {symbol} {b} does not fit in {}",
                if *ty == Type::I32 { "i32" } else { "i64" }
            ),
            span,
        )),
    }
}

/// The values of a `parallel for`, or its first failure in index order.
pub fn collect_iterations(
    results: Vec<Option<Result<Value, ExecError>>>,
) -> Result<Vec<Value>, ExecError> {
    if let Some(e) = results.iter().flatten().find_map(|r| r.as_ref().err()) {
        return Err(e.clone());
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(ExecError::new("a parallel iteration panicked", None))))
        .collect()
}
