//! The diagnostics of the provenance rules (docs/SECURITY.md): `trusted` where it
//! cannot be, `trust` without a reason, untrusted data reaching a `trusted` parameter.

use syntax::Span;

use super::*;
use crate::items::Item;

pub fn trusted_context<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    error(
        base,
        TRUSTED_CONTEXT,
        span,
        "a `Context` cannot be `trusted`".to_owned(),
        "on a context parameter",
    )
    .with_help("a context is trusted or not by what was injected into it; mark the data parameters instead")
}

pub fn trust_reason<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    error(
        base,
        TRUST_REASON,
        span,
        "`trust` needs its reason, as a string literal".to_owned(),
        "no reason given here",
    )
    .with_help("write why the value may be trusted: `trust(value, \"the user typed it\")`")
}

/// An untrusted value reaches a `trusted` parameter; `path` is the flow from its source.
pub fn untrusted_argument<'db>(
    base: Item<'db>,
    span: Span,
    sink: &str,
    path: &str,
    label: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        UNTRUSTED_ARGUMENT,
        span,
        format!("untrusted data reaches {sink}: {path}"),
        label,
    )
    .with_help("read untrusted data in a sub-agent (`Context::new()`) and pass what it returns only to parameters that are not `trusted`; or declassify with `trust(value, \"why\")`")
}

pub fn stored_trusted_tool<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    sink: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        STORED_TRUSTED_TOOL,
        span,
        format!("`{name}` has a `trusted` parameter ({sink}), so it can be used as a value only as a call's argument"),
        "a tool kept here could be called with untrusted arguments",
    )
    .with_help(format!("hand `{name}` straight to the call that offers it (`aot::solve(ctx, task, [{name}])`), where the checker sees who writes its arguments"))
}
