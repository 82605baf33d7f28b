//! The diagnostics of `given` in tests: where it may stand, and what it may script.

use syntax::Span;

use super::*;
use crate::items::Item;

pub fn given_outside_test<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    error(
        base,
        GIVEN_OUTSIDE_TEST,
        span,
        "`given` scripts the model's answers only in a test".to_owned(),
        "in a function",
    )
    .with_help("move it into a `test \"name\" { … }` item")
}

pub fn given_not_model<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    why: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        GIVEN_NOT_MODEL,
        span,
        format!("the model does not answer `{name}`: {why}"),
        "no model answer to script",
    )
    .with_help("script an LLM function (one whose body can end without a value), or the `select` and `fill` decisions made in a function")
}

pub fn given_params<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    expected: usize,
    found: usize,
) -> HirDiagnostic<'db> {
    error(
        base,
        GIVEN_PARAMS,
        span,
        format!(
            "`{name}` has {expected} parameter{}, but the answer names {found}",
            if expected == 1 { "" } else { "s" }
        ),
        "one name (or `_`) per parameter",
    )
}

pub fn given_no_site<'db>(
    base: Item<'db>,
    span: Span,
    message: String,
    help: String,
) -> HirDiagnostic<'db> {
    error(base, GIVEN_NO_SITE, span, message, "no such decision").with_help(help)
}
