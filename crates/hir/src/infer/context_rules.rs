//! The context rules (REFERENCE.md, "Context rules") that are not local to one
//! expression: where an implicit context is needed, which functions are LLM functions (a
//! body that can end without a value), and which `while` loops the model alone would
//! bound.

use syntax::Span;
use syntax::ast::{self, BinaryOp, Expr, ExprKind};

use super::{Checker, block_tail, is_valueless_if};
use crate::diagnostics as diag;
use crate::ty::Ty;

impl<'a, 'db> Checker<'a, 'db> {
    pub(super) fn use_context(&mut self, span: Span, what: &str) {
        if self.has_context {
            self.context_used_implicitly = true;
        } else {
            let d = diag::no_context(self.item, span, what, &self.fn_name);
            self.diagnostics.push(d);
        }
    }

    /// Checks the function body; returns whether it is an LLM function.
    pub(super) fn check_fn_body(&mut self, body: &ast::Block) -> bool {
        let ret = self.ret.clone();
        let ends_with_value = block_tail(body).is_some_and(|tail| !is_valueless_if(tail));
        let (value, diverges) = self.check_block_inner(body, Some(&ret));
        if diverges {
            return false;
        }
        if ends_with_value {
            let tail = block_tail(body).expect("checked above");
            self.expect(tail.span, &value, &ret);
            return false;
        }
        if matches!(self.shallow(&ret), Ty::Unit | Ty::Error) {
            return false;
        }
        let end = Span {
            start: body.span.end.saturating_sub(1),
            end: body.span.end,
        };
        if self.has_context {
            self.context_used_implicitly = true;
            // The model is asked against the `schema` parameter: it is used. (Parameters
            // are the first locals, in order.)
            if let Some(i) = self.schema_param {
                self.locals[i].used = true;
            }
            true
        } else {
            let d = diag::missing_return(self.item, end, &self.fn_name, &self.display(&ret));
            self.diagnostics.push(d);
            false
        }
    }
}

/// A `while` condition that also compares numbers (`steps < 10 && …`) is bounded by the
/// program, not only by the model.
pub(super) fn has_deterministic_bound(cond: &Expr) -> bool {
    match &cond.kind {
        ExprKind::Binary {
            op: BinaryOp::And,
            lhs,
            rhs,
        } => has_deterministic_bound(lhs) || has_deterministic_bound(rhs),
        ExprKind::Binary {
            op: BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge,
            ..
        } => true,
        ExprKind::Paren(inner) => has_deterministic_bound(inner),
        _ => false,
    }
}
