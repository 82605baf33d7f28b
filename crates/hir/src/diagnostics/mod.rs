//! Every diagnostic `hir` reports, constructed here so the wording stays consistent.
//! Spans are relative to an item (its chunk); `absolute` places them in the file.

use syntax::{Diagnostic, Label, Span};

use crate::Db;
use crate::items::{Item, shift};

mod given;
mod provenance;

pub use given::*;
pub use provenance::*;

/// A diagnostic whose spans are relative to items: the primary span to `base`, each
/// secondary label to the item beside it.
#[derive(Clone, Debug, PartialEq, Eq, salsa::SalsaValue)]
pub struct HirDiagnostic<'db> {
    pub diagnostic: Diagnostic,
    pub base: Item<'db>,
    pub secondary_bases: Vec<Item<'db>>,
}

impl<'db> HirDiagnostic<'db> {
    fn new(base: Item<'db>, diagnostic: Diagnostic) -> Self {
        HirDiagnostic {
            diagnostic,
            base,
            secondary_bases: Vec::new(),
        }
    }

    pub fn with_secondary(
        mut self,
        item: Item<'db>,
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        self.diagnostic.secondary.push(Label {
            span,
            message: message.into(),
        });
        self.secondary_bases.push(item);
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.diagnostic.help = Some(help.into());
        self
    }

    /// The diagnostic with file offsets. Labels in other files are left out.
    pub fn absolute(&self, db: &'db dyn Db) -> Diagnostic {
        let mut d = self.diagnostic.clone();
        d.span = shift(d.span, self.base.offset(db));
        let file = self.base.file(db);
        let mut secondary = Vec::new();
        for (label, item) in d.secondary.iter().zip(&self.secondary_bases) {
            if item.file(db) == file {
                secondary.push(Label {
                    span: shift(label.span, item.offset(db)),
                    message: label.message.clone(),
                });
            }
        }
        d.secondary = secondary;
        d
    }
}

fn error<'db>(
    base: Item<'db>,
    code: &'static str,
    span: Span,
    message: String,
    label: impl Into<String>,
) -> HirDiagnostic<'db> {
    HirDiagnostic::new(
        base,
        Diagnostic::error(code, span, message).with_label(label),
    )
}

fn warning<'db>(
    base: Item<'db>,
    code: &'static str,
    span: Span,
    message: String,
    label: impl Into<String>,
) -> HirDiagnostic<'db> {
    HirDiagnostic::new(
        base,
        Diagnostic::warning(code, span, message).with_label(label),
    )
}

fn did_you_mean(similar: Option<String>) -> Option<String> {
    similar.map(|s| format!("a similar name exists: `{s}`"))
}

pub const UNRESOLVED_NAME: &str = "E0100";
pub const UNRESOLVED_TYPE: &str = "E0101";
pub const DUPLICATE: &str = "E0102";
pub const MISMATCH: &str = "E0103";
pub const ARITY: &str = "E0104";
pub const NOT_CALLABLE: &str = "E0105";
pub const NO_FIELD: &str = "E0106";
pub const NO_METHOD: &str = "E0107";
pub const CONDITION: &str = "E0108";
pub const SELECT_ARMS: &str = "E0109";
pub const CONTEXT_PLACEHOLDER: &str = "E0110";
pub const ASSIGN_UNDECLARED: &str = "E0111";
pub const PARALLEL_ASSIGN: &str = "E0112";
pub const CONTEXT_INJECTED: &str = "E0113";
pub const CONTEXT_MISUSE: &str = "E0114";
pub const TWO_CONTEXTS: &str = "E0115";
pub const NO_CONTEXT: &str = "E0116";
pub const MISSING_RETURN: &str = "E0117";
pub const LOOP_CONTROL: &str = "E0118";
pub const OPERATOR: &str = "E0119";
pub const TYPE_ARITY: &str = "E0120";
pub const UNKNOWN_MODULE: &str = "E0121";
pub const INT_RANGE: &str = "E0122";
pub const STRUCT_LITERAL: &str = "E0123";
pub const FIELD_ACCESS: &str = "E0124";
pub const INDEXING: &str = "E0125";
pub const NO_VARIANT: &str = "E0126";
pub const ALIAS_CYCLE: &str = "E0127";
pub const EXTERN_CONTEXT: &str = "E0128";
pub const UNKNOWN_IMPORT: &str = "E0129";
pub const NOT_A_VALUE: &str = "E0130";
pub const EXTERN_BINDING: &str = "E0131";
pub const TRUSTED_CONTEXT: &str = "E0132";
pub const TRUST_REASON: &str = "E0133";
pub const UNTRUSTED_ARGUMENT: &str = "E0134";
pub const GIVEN_OUTSIDE_TEST: &str = "E0135";
pub const GIVEN_NOT_MODEL: &str = "E0136";
pub const GIVEN_PARAMS: &str = "E0137";
pub const GIVEN_NO_SITE: &str = "E0138";
pub const STORED_TRUSTED_TOOL: &str = "E0139";
pub const STRUCT_HOLDS_ITSELF: &str = "E0140";

pub const UNUSED_VARIABLE: &str = "W0100";
pub const UNUSED_CONTEXT: &str = "W0101";
pub const UNBOUNDED_WHILE: &str = "W0102";
pub const DUPLICATE_INJECTION: &str = "W0103";
pub const ONE_ARM_SELECT: &str = "W0104";
pub const UNREACHABLE: &str = "W0105";
pub const DROPPED_IF_VALUE: &str = "W0106";

/// Every code `hir` reports, for the fixture test that checks each is covered.
pub const ALL_CODES: &[&str] = &[
    UNRESOLVED_NAME,
    UNRESOLVED_TYPE,
    DUPLICATE,
    MISMATCH,
    ARITY,
    NOT_CALLABLE,
    NO_FIELD,
    NO_METHOD,
    CONDITION,
    SELECT_ARMS,
    CONTEXT_PLACEHOLDER,
    ASSIGN_UNDECLARED,
    PARALLEL_ASSIGN,
    CONTEXT_INJECTED,
    CONTEXT_MISUSE,
    TWO_CONTEXTS,
    NO_CONTEXT,
    MISSING_RETURN,
    LOOP_CONTROL,
    OPERATOR,
    TYPE_ARITY,
    UNKNOWN_MODULE,
    INT_RANGE,
    STRUCT_LITERAL,
    FIELD_ACCESS,
    INDEXING,
    NO_VARIANT,
    STRUCT_HOLDS_ITSELF,
    ALIAS_CYCLE,
    EXTERN_CONTEXT,
    UNKNOWN_IMPORT,
    NOT_A_VALUE,
    EXTERN_BINDING,
    TRUSTED_CONTEXT,
    TRUST_REASON,
    UNTRUSTED_ARGUMENT,
    STORED_TRUSTED_TOOL,
    UNUSED_VARIABLE,
    UNUSED_CONTEXT,
    UNBOUNDED_WHILE,
    DUPLICATE_INJECTION,
    ONE_ARM_SELECT,
    UNREACHABLE,
    DROPPED_IF_VALUE,
];

pub fn unresolved_name<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    similar: Option<String>,
) -> HirDiagnostic<'db> {
    let d = error(
        base,
        UNRESOLVED_NAME,
        span,
        format!("cannot find `{name}` in this scope"),
        "not found",
    );
    match did_you_mean(similar) {
        Some(h) => d.with_help(h),
        // A path names an item of a module, or a variant of an enum.
        None if name.contains("::") => d.with_help(
            "a path is `module::item`, `Enum::Variant` or `module::Enum::Variant`, of a module the file `use`s",
        ),
        None => d.with_help(format!(
            "declare it with `let {name} = …`, or define a function `{name}`"
        )),
    }
}

pub fn unresolved_type<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    similar: Option<String>,
) -> HirDiagnostic<'db> {
    let d = error(
        base,
        UNRESOLVED_TYPE,
        span,
        format!("cannot find type `{name}`"),
        "unknown type",
    );
    match did_you_mean(similar) {
        Some(h) => d.with_help(h),
        None => d.with_help(format!(
            "declare it, e.g. `struct {name} {{ … }}`, or import it with `use`"
        )),
    }
}

pub fn duplicate<'db>(
    item: Item<'db>,
    span: Span,
    name: &str,
    first: Item<'db>,
    first_span: Span,
) -> HirDiagnostic<'db> {
    error(
        item,
        DUPLICATE,
        span,
        format!("`{name}` is defined more than once"),
        "defined again here",
    )
    .with_secondary(first, first_span, "first defined here")
    .with_help("rename one of them")
}

pub fn mismatch<'db>(
    base: Item<'db>,
    span: Span,
    expected: &str,
    found: &str,
) -> HirDiagnostic<'db> {
    let d = error(
        base,
        MISMATCH,
        span,
        format!("expected `{expected}`, found `{found}`"),
        format!("this is `{found}`"),
    );
    let help = match (expected, found) {
        ("f64", "i32" | "i64") => {
            Some("write a float literal such as `1.0`; there are no implicit conversions")
        }
        ("i64", "i32") | ("i32", "i64") => {
            Some("integer types do not convert implicitly; declare both with the same type")
        }
        ("String", _) if found != "String" => Some("convert it with `to_string(…)`"),
        _ => None,
    };
    match help {
        Some(h) => d.with_help(h),
        None => d,
    }
}

pub fn mismatch_because<'db>(
    base: Item<'db>,
    span: Span,
    expected: &str,
    found: &str,
    reason_item: Item<'db>,
    reason_span: Span,
    reason: &str,
) -> HirDiagnostic<'db> {
    mismatch(base, span, expected, found).with_secondary(reason_item, reason_span, reason)
}

pub fn arity<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    expected: usize,
    found: usize,
) -> HirDiagnostic<'db> {
    let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
    error(
        base,
        ARITY,
        span,
        format!(
            "`{name}` takes {expected} {}, but {found} {} given",
            plural(expected),
            if found == 1 { "was" } else { "were" }
        ),
        format!("{found} {}", plural(found)),
    )
}

pub fn not_callable<'db>(base: Item<'db>, span: Span, what: &str) -> HirDiagnostic<'db> {
    error(
        base,
        NOT_CALLABLE,
        span,
        format!("{what} cannot be called"),
        "not a function",
    )
    .with_help("only functions and externs can be called")
}

pub fn no_field<'db>(
    base: Item<'db>,
    span: Span,
    ty: &str,
    field: &str,
    similar: Option<String>,
) -> HirDiagnostic<'db> {
    let d = error(
        base,
        NO_FIELD,
        span,
        format!("`{ty}` has no field `{field}`"),
        "unknown field",
    );
    match did_you_mean(similar) {
        Some(h) => d.with_help(h),
        None => d,
    }
}

pub fn no_method<'db>(base: Item<'db>, span: Span, method: &str) -> HirDiagnostic<'db> {
    error(
        base,
        NO_METHOD,
        span,
        format!("there is no function `{method}` to call as a method"),
        "not found",
    )
    .with_help(format!(
        "`x.{method}(…)` calls a function `{method}(x, …)`; define one or check the name"
    ))
}

pub fn condition<'db>(base: Item<'db>, span: Span, found: &str) -> HirDiagnostic<'db> {
    error(
        base,
        CONDITION,
        span,
        format!("a condition must be a `Boolean`, found `{found}`"),
        format!("this is `{found}`"),
    )
    .with_help("compare it, e.g. `x > 0`, or call a function that returns `Boolean`")
}

pub fn select_arms<'db>(
    base: Item<'db>,
    span: Span,
    expected: &str,
    found: &str,
    first: Span,
) -> HirDiagnostic<'db> {
    error(
        base,
        SELECT_ARMS,
        span,
        format!("the arms of this `select` disagree: `{expected}` and `{found}`"),
        format!("this arm gives `{found}`"),
    )
    .with_secondary(base, first, format!("the first arm gives `{expected}`"))
    .with_help("every arm of a `select` must produce a value of the same type")
}

pub fn context_placeholder<'db>(base: Item<'db>, span: Span, param: &str) -> HirDiagnostic<'db> {
    error(
        base,
        CONTEXT_PLACEHOLDER,
        span,
        format!("`_` cannot stand for the context parameter `{param}`"),
        "the model cannot produce a context",
    )
    .with_help("pass a context: `ctx` or `Context::new()`")
}

pub fn assign_undeclared<'db>(base: Item<'db>, span: Span, name: &str) -> HirDiagnostic<'db> {
    error(
        base,
        ASSIGN_UNDECLARED,
        span,
        format!("cannot assign to `{name}`: no variable of that name is in scope"),
        "not declared",
    )
    .with_help(format!("declare it first with `let {name} = …`"))
}

pub fn parallel_assign<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    declared: Span,
) -> HirDiagnostic<'db> {
    error(base, PARALLEL_ASSIGN, span, format!("`parallel for` iterations cannot assign to `{name}`, which is declared outside the loop"), "assigned in a parallel iteration")
        .with_secondary(base, declared, "declared here")
        .with_help("return the value from the iteration instead: `parallel for` gives the list of iteration values")
}

pub fn context_injected<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    error(
        base,
        CONTEXT_INJECTED,
        span,
        "a context cannot be injected".to_owned(),
        "this is a `Context`",
    )
    .with_help("inject values; a context is where injections go")
}

pub fn context_misuse<'db>(base: Item<'db>, span: Span, what: &str) -> HirDiagnostic<'db> {
    error(
        base,
        CONTEXT_MISUSE,
        span,
        format!("a `Context` cannot be {what}"),
        "`Context` is a capability, not data",
    )
    .with_help(
        "a context can be passed to functions, kept in a `let`, and created with `Context::new()`",
    )
}

pub fn struct_holds_itself<'db>(base: Item<'db>, span: Span, name: &str) -> HirDiagnostic<'db> {
    error(
        base,
        STRUCT_HOLDS_ITSELF,
        span,
        format!("`{name}` holds a `{name}` in itself"),
        "no value of it could ever be made",
    )
    .with_help(format!(
        "make it `Option<{name}>` (it may be `None`) or `List<{name}>` (it may be empty)"
    ))
}

pub fn two_contexts<'db>(base: Item<'db>, span: Span, first: Span) -> HirDiagnostic<'db> {
    error(
        base,
        TWO_CONTEXTS,
        span,
        "a function can have only one `Context` parameter".to_owned(),
        "second context parameter",
    )
    .with_secondary(base, first, "the first one")
    .with_help("take one context; create others inside with `Context::new()`")
}

pub fn no_context<'db>(
    base: Item<'db>,
    span: Span,
    what: &str,
    fn_name: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        NO_CONTEXT,
        span,
        format!("{what} needs a context, but `{fn_name}` has no `Context` parameter"),
        "no current context here",
    )
    .with_help(format!(
        "add `ctx: Context` to the parameters of `{fn_name}`"
    ))
}

pub fn missing_return<'db>(
    base: Item<'db>,
    span: Span,
    fn_name: &str,
    ret: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        MISSING_RETURN,
        span,
        format!("missing return: `{fn_name}` returns `{ret}` but its body can end without a value"),
        "the body can end here without a value",
    )
    .with_help(format!(
        "end with a value or `return …`, or add `ctx: Context` so the model produces the `{ret}`"
    ))
}

pub fn loop_control<'db>(
    base: Item<'db>,
    span: Span,
    keyword: &str,
    why: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        LOOP_CONTROL,
        span,
        format!("`{keyword}` {why}"),
        format!("`{keyword}` here"),
    )
}

pub fn operator<'db>(
    base: Item<'db>,
    span: Span,
    op: &str,
    lhs: &str,
    rhs: Option<&str>,
) -> HirDiagnostic<'db> {
    let message = match rhs {
        Some(rhs) => format!("`{op}` cannot be applied to `{lhs}` and `{rhs}`"),
        None => format!("`{op}` cannot be applied to `{lhs}`"),
    };
    let help = match op {
        "+" | "-" | "*" | "/" | "%" => {
            "arithmetic needs two numbers of the same type (`+` also joins two `String`s)"
        }
        "<" | "<=" | ">" | ">=" => {
            "ordering compares two numbers of the same type, or two `String`s"
        }
        "==" | "!=" => "`==` compares numbers, Booleans, strings and enum values of the same type",
        "&&" | "||" | "!" => "logical operators take `Boolean`s",
        _ => "negation takes a number",
    };
    error(base, OPERATOR, span, message, "here").with_help(help)
}

pub fn wrong_type_arity<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    expected: usize,
    found: usize,
) -> HirDiagnostic<'db> {
    let message = if expected == 0 {
        format!("`{name}` takes no type arguments")
    } else {
        format!("`{name}` takes {expected} type argument, but {found} were given")
    };
    error(base, TYPE_ARITY, span, message, "here").with_help(match name {
        "List" => "write `List<T>`, e.g. `List<String>`",
        "Option" => "write `Option<T>`, e.g. `Option<i32>`",
        _ => "remove the `<…>`",
    })
}

pub fn unknown_module<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    similar: Option<String>,
) -> HirDiagnostic<'db> {
    let d = error(
        base,
        UNKNOWN_MODULE,
        span,
        format!("there is no module `{name}`"),
        "unknown module",
    );
    match did_you_mean(similar) {
        Some(h) => d.with_help(h),
        None => d.with_help("each `.sap` file checked together is a module named after the file"),
    }
}

pub fn nested_use<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    error(
        base,
        UNKNOWN_MODULE,
        span,
        "modules do not nest: a `use` path is `module` or `module::name`".to_owned(),
        "too many segments",
    )
}

pub fn unknown_import<'db>(
    base: Item<'db>,
    span: Span,
    name: &str,
    module: &str,
) -> HirDiagnostic<'db> {
    error(
        base,
        UNKNOWN_IMPORT,
        span,
        format!("module `{module}` has no item `{name}`"),
        "not found",
    )
}

pub fn int_range<'db>(base: Item<'db>, span: Span, ty: &str) -> HirDiagnostic<'db> {
    let range = if ty == "i32" {
        "-2147483648 to 2147483647"
    } else {
        "-9223372036854775808 to 9223372036854775807"
    };
    error(
        base,
        INT_RANGE,
        span,
        format!("this literal does not fit in `{ty}`"),
        format!("`{ty}` holds {range}"),
    )
    .with_help(if ty == "i32" {
        "declare it as `i64`"
    } else {
        "use a smaller number"
    })
}

pub fn struct_literal<'db>(
    base: Item<'db>,
    span: Span,
    message: String,
    label: &str,
) -> HirDiagnostic<'db> {
    error(base, STRUCT_LITERAL, span, message, label)
}

pub fn field_access<'db>(base: Item<'db>, span: Span, ty: &str) -> HirDiagnostic<'db> {
    error(
        base,
        FIELD_ACCESS,
        span,
        format!("`{ty}` has no fields"),
        "not a struct",
    )
    .with_help(if ty == "Json" {
        "read JSON with `json_get(value, \"path\")`"
    } else {
        "fields belong to structs"
    })
}

pub fn indexing<'db>(base: Item<'db>, span: Span, ty: &str) -> HirDiagnostic<'db> {
    error(
        base,
        INDEXING,
        span,
        format!("`{ty}` cannot be indexed"),
        "not a list",
    )
    .with_help(if ty == "Json" {
        "read JSON with `json_get(value, \"items[0]\")`"
    } else {
        "only a `List` can be indexed, with an integer"
    })
}

pub fn no_variant<'db>(
    base: Item<'db>,
    span: Span,
    enum_name: &str,
    variant: &str,
    similar: Option<String>,
) -> HirDiagnostic<'db> {
    let d = error(
        base,
        NO_VARIANT,
        span,
        format!("`{enum_name}` has no variant `{variant}`"),
        "unknown variant",
    );
    match did_you_mean(similar) {
        Some(h) => d.with_help(h),
        None => d,
    }
}

pub fn alias_cycle<'db>(base: Item<'db>, span: Span, name: &str) -> HirDiagnostic<'db> {
    error(
        base,
        ALIAS_CYCLE,
        span,
        format!("the type alias `{name}` refers to itself"),
        "cycle here",
    )
    .with_help("a type alias must end in a concrete type; use a `struct` for recursive data")
}

pub fn extern_context<'db>(base: Item<'db>, span: Span, name: &str) -> HirDiagnostic<'db> {
    error(
        base,
        EXTERN_CONTEXT,
        span,
        format!("the extern `{name}` cannot take a `Context`"),
        "externs run on the host, without the model",
    )
    .with_help("remove the parameter; only sap functions take a context")
}

pub fn extern_binding<'db>(base: Item<'db>, span: Span, why: String) -> HirDiagnostic<'db> {
    error(base, EXTERN_BINDING, span, why, "this binding")
        .with_help("bind to an MCP server of sap.toml: `extern \"mcp:SERVER\" fn …`")
}

pub fn not_a_value<'db>(base: Item<'db>, span: Span, what: &str) -> HirDiagnostic<'db> {
    error(
        base,
        NOT_A_VALUE,
        span,
        format!("{what} is not a value"),
        "not a value",
    )
}

pub fn unused_variable<'db>(base: Item<'db>, span: Span, name: &str) -> HirDiagnostic<'db> {
    warning(
        base,
        UNUSED_VARIABLE,
        span,
        format!("unused variable `{name}`"),
        "never read",
    )
    .with_help(format!("if this is intentional, name it `_{name}`"))
}

pub fn unused_context<'db>(base: Item<'db>, span: Span, name: &str) -> HirDiagnostic<'db> {
    warning(base, UNUSED_CONTEXT, span, format!("the context parameter `{name}` is never used"), "unused")
        .with_help("remove it, or name it `_ctx`; a function that never injects, fills `_` or lets the model answer needs no context")
}

pub fn unbounded_while<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    warning(base, UNBOUNDED_WHILE, span, "this loop runs for as long as the model says so".to_owned(), "the model decides this condition")
        .with_help("bound it, e.g. `while steps < 10 && keep_going(ctx)`, or `break` after a limit; otherwise the run stops it after `--max-model-iterations` (100) iterations")
}

pub fn duplicate_injection<'db>(base: Item<'db>, span: Span, first: Span) -> HirDiagnostic<'db> {
    warning(
        base,
        DUPLICATE_INJECTION,
        span,
        "the same text is injected twice in a row".to_owned(),
        "injected again",
    )
    .with_secondary(base, first, "first injected here")
    .with_help("remove one: the model sees both")
}

pub fn empty_select<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    error(
        base,
        SELECT_ARMS,
        span,
        "this `select` has no arms".to_owned(),
        "nothing for the model to choose",
    )
    .with_help("write one arm per call the model may choose: `select { f(ctx, _), g(ctx, _) }`")
}

pub fn one_arm_select<'db>(base: Item<'db>, span: Span) -> HirDiagnostic<'db> {
    warning(
        base,
        ONE_ARM_SELECT,
        span,
        "this `select` has only one arm".to_owned(),
        "nothing to choose",
    )
    .with_help("call the function directly; its `_` arguments are still filled by the model")
}

pub fn dropped_if_value<'db>(base: Item<'db>, span: Span, ty: &str) -> HirDiagnostic<'db> {
    warning(
        base,
        DROPPED_IF_VALUE,
        span,
        format!("this `{ty}` is dropped: an `if` without `else` has no value"),
        "goes nowhere",
    )
    .with_help("add an `else` with a value of the same type, or `return` it")
}

pub fn unreachable<'db>(base: Item<'db>, span: Span, cause: Span) -> HirDiagnostic<'db> {
    warning(
        base,
        UNREACHABLE,
        span,
        "unreachable code".to_owned(),
        "never runs",
    )
    .with_secondary(base, cause, "control leaves here")
}
