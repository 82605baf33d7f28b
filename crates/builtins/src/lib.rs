//! The standard externs (REFERENCE.md, "The standard externs"): the one table of their
//! names, signatures and documentation. The checker (`hir`) derives its types from it,
//! the IR names a builtin by its [`Builtin`], and the backend checks an `extern fn`
//! that redeclares a standard one against it; adding a builtin means adding one line
//! here and its meaning in the host. Nothing here knows of salsa, the IR or the
//! runtime.

#![forbid(unsafe_code)]

/// A type in a builtin's signature: the language's types, with `T` for the one type
/// parameter a generic builtin has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigType {
    Unit,
    Bool,
    I64,
    F64,
    String,
    Json,
    Tool,
    /// The type parameter `T`.
    T,
    List(&'static SigType),
    Option(&'static SigType),
}

impl SigType {
    /// Whether `T` occurs in the type.
    pub fn is_generic(self) -> bool {
        match self {
            SigType::T => true,
            SigType::List(inner) | SigType::Option(inner) => inner.is_generic(),
            _ => false,
        }
    }
}

/// One way to call a builtin: named parameters and a result.
#[derive(Debug, PartialEq, Eq)]
pub struct Form {
    pub params: &'static [(&'static str, SigType)],
    pub ret: SigType,
}

impl Form {
    /// Whether the form has a type parameter.
    pub fn is_generic(&self) -> bool {
        self.ret.is_generic() || self.params.iter().any(|(_, t)| t.is_generic())
    }
}

/// A row of the table.
#[derive(Debug)]
pub struct Entry {
    pub builtin: Builtin,
    /// The name a program calls it by.
    pub name: &'static str,
    /// What it does, shown on hover.
    pub doc: &'static str,
    /// The signature the checker states; the checker types a call by it.
    pub main: Form,
    /// Other forms the checker accepts (`len` of a `String`), checked by dedicated rules.
    pub also: &'static [Form],
    /// Whether it is called (`None` is a value, not a function).
    pub callable: bool,
}

impl Entry {
    /// Whether only the compiler calls it (lowering emits it; no program can name it).
    pub fn is_internal(&self) -> bool {
        self.name.starts_with("sap::")
    }

    /// Every form, the main one first.
    pub fn forms(&self) -> impl Iterator<Item = &Form> {
        std::iter::once(&self.main).chain(self.also)
    }
}

use SigType::{Bool, F64, I64, Json, T, Tool, Unit};

const STR: SigType = SigType::String;
const LIST_T: SigType = SigType::List(&T);
const OPTION_T: SigType = SigType::Option(&T);
const STRINGS: SigType = SigType::List(&STR);
const TOOLS: SigType = SigType::List(&Tool);

/// Declares the enum and the table from one list, in the same order, so that a
/// builtin's entry is `TABLE[builtin as usize]`.
macro_rules! builtins {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $name:literal ($($param:ident: $ty:expr),* $(,)?) -> $ret:expr
        $(, also ($($aparam:ident: $aty:expr),* $(,)?) -> $aret:expr)?
        $(, value $($value:ident)?)?
        ;
    )*) => {
        /// A standard extern.
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum Builtin {
            $($variant),*
        }

        /// Every standard extern, in the order of [`Builtin`].
        pub const TABLE: &[Entry] = &[$(
            Entry {
                builtin: Builtin::$variant,
                name: $name,
                doc: concat!($($doc, "\n"),*),
                main: Form { params: &[$((stringify!($param), $ty)),*], ret: $ret },
                also: &[$(Form { params: &[$((stringify!($aparam), $aty)),*], ret: $aret })?],
                callable: builtins!(@callable $(value $($value)?)?),
            },
        )*];
    };
    (@callable) => { true };
    (@callable value) => { false };
}

builtins! {
    /// Writes the text and a newline to the program's output.
    Print "print"(value: STR) -> Unit;
    /// Reads one line from standard input, without its line ending.
    Input "input"() -> STR;
    /// The value as text, as `print` shows it.
    ToString "to_string"(value: T) -> STR;
    /// The number of elements of a list, or of characters of a text.
    Len "len"(xs: LIST_T) -> I64, also (text: STR) -> I64;
    /// The list with `x` appended.
    Push "push"(xs: LIST_T, x: T) -> LIST_T;
    /// A copy of `xs` with element `index` replaced by `x`.
    Set "set"(xs: LIST_T, index: I64, x: T) -> LIST_T;
    /// The text of a file; a relative path resolves against the working directory.
    ReadFile "read_file"(path: STR) -> STR;
    /// Writes the text to a file, replacing it.
    WriteFile "write_file"(path: STR, content: STR) -> Unit;
    /// Parses JSON text.
    JsonParse "json_parse"(text: STR) -> Json;
    /// The value at a path like `items[0].name` or `items[*].attributes`.
    JsonGet "json_get"(value: Json, path: STR) -> Json;
    /// `deps[i]` lists the nodes node `i` depends on; the result is the layers of nodes
    /// that can run together, in order.
    Toposort "toposort"(deps: SigType::List(&SigType::List(&I64))) -> SigType::List(&SigType::List(&I64));
    /// The value as JSON.
    ToJson "to_json"(value: T) -> Json;
    /// The signatures of tools as JSON text: what a planner is shown.
    ToolSignatures "tool_signatures"(tools: TOOLS) -> STR;
    /// The defects of an Atom-of-Thought plan against the tools, one line each.
    AotCheck "aot_check"(plan: Json, tools: TOOLS) -> STRINGS;
    /// Runs an Atom-of-Thought plan and gives the final atom's report. `undo` pairs a
    /// tool with the tool that reverses it: `[[book, cancel]]`.
    AotExecute "aot_execute"(plan: Json, tools: TOOLS, retries: I64, undo: SigType::List(&TOOLS)) -> Json;
    /// An Atom-of-Thought plan as a Graphviz DOT graph.
    AotDot "aot_dot"(plan: Json) -> STR;
    /// An Atom-of-Thought plan as a Mermaid flowchart.
    AotMermaid "aot_mermaid"(plan: Json) -> STR;
    /// Whether a value exists at the path.
    JsonHas "json_has"(value: Json, path: STR) -> Bool;
    /// The number of elements of an array, keys of an object or characters of a string
    /// (0 for `null`, 1 for any other value).
    JsonLen "json_len"(value: Json) -> I64;
    /// The keys of an object, in order.
    JsonKeys "json_keys"(value: Json) -> STRINGS;
    /// What kind of JSON value it is: `object`, `array`, `string`, `number`, `boolean`
    /// or `null`.
    JsonKind "json_kind"(value: Json) -> STR;
    /// The elements of an array.
    JsonItems "json_items"(value: Json) -> SigType::List(&Json);
    /// The lines of a text.
    Lines "lines"(text: STR) -> STRINGS;
    /// The text cut to at most `max` characters, with `…` where it was cut.
    Truncate "truncate"(text: STR, max: I64) -> STR;
    /// Adds an event to the run's trace.
    Trace "trace"(event: STR, data: Json) -> Unit;
    /// Counts one more iteration of a `while` whose condition the model decides: more
    /// than the run's limit for such loops is an error at the loop.
    ModelLoop "sap::model_loop"(iteration: I64) -> Unit;
    /// In a test, before the model is asked for an LLM function's result: the test's
    /// scripted answer (`given`), if it has one. Followed by the function's arguments
    /// (its context left out); gives an `Option` of the function's result type.
    Stubbed "sap::stubbed"(site: I64, function: I64) -> Unit;
    /// `given f(…) => answer`: every call of the LLM function `function` is answered by
    /// calling `stub` with its arguments.
    Given "sap::given"(function: I64, stub: Tool) -> Unit;
    /// `given f { … }`: one scripted decision of `function`, queued: `kind` is `value`
    /// (then the value follows), `select` or `fill` (then the callee's parameter names,
    /// and its arguments follow).
    Script "sap::script"(function: I64, kind: STR, callee: STR, names: STRINGS) -> Unit;
    /// A failed `assert`: stops the run with the message and, for a comparison, both
    /// sides as text.
    AssertFailed "sap::assert_failed"(message: STR, left: STR, right: STR) -> Unit;
    /// Milliseconds since the program started.
    ClockMs "clock_ms"() -> I64;
    /// A JSON number as an integer.
    JsonInt "json_int"(value: Json) -> I64;
    /// A JSON string's text.
    JsonStr "json_str"(value: Json) -> STR;
    /// The JSON Schema of an Atom-of-Thought plan over these tools.
    AotSchema "aot_schema"(tools: TOOLS) -> Json;
    /// The absent value of an `Option`.
    None "None"() -> OPTION_T, value;
    /// A present value of an `Option`.
    Some "Some"(value: T) -> OPTION_T;
    /// Whether the option holds a value.
    IsSome "is_some"(option: OPTION_T) -> Bool;
    /// Whether the option is `None`.
    IsNone "is_none"(option: OPTION_T) -> Bool;
    /// The value, or `default` for `None`.
    UnwrapOr "unwrap_or"(option: OPTION_T, default: T) -> T;
    /// The value; `None` is a runtime error.
    Unwrap "unwrap"(option: OPTION_T) -> T;
    /// The value, declared trusted (declassified) for the reason given, a string
    /// literal: it may then reach a `trusted` parameter. Recorded in the trace.
    Trust "trust"(value: T, reason: STR) -> T;
    /// Whether the list holds `x`, or the text holds `part`.
    Contains "contains"(xs: LIST_T, x: T) -> Bool, also (text: STR, part: STR) -> Bool;
    /// Whether the text starts with `prefix`.
    StartsWith "starts_with"(text: STR, prefix: STR) -> Bool;
    /// Whether the text ends with `suffix`.
    EndsWith "ends_with"(text: STR, suffix: STR) -> Bool;
    /// The parts of the text between separators; an empty separator is an error.
    Split "split"(text: STR, separator: STR) -> STRINGS;
    /// The parts joined with the separator between them.
    Join "join"(parts: STRINGS, separator: STR) -> STR;
    /// The text without whitespace at either end.
    Trim "trim"(text: STR) -> STR;
    /// The text with every `from` replaced by `to`; an empty `from` is an error.
    Replace "replace"(text: STR, from: STR, to: STR) -> STR;
    /// The text in lower case.
    ToLower "to_lower"(text: STR) -> STR;
    /// The text in upper case.
    ToUpper "to_upper"(text: STR) -> STR;
    /// The integer the whole text (spaces around it aside) spells, if it does.
    ParseInt "parse_int"(text: STR) -> SigType::Option(&I64);
    /// The number the whole text (spaces around it aside) spells, if it does.
    ParseFloat "parse_float"(text: STR) -> SigType::Option(&F64);
}

impl Builtin {
    pub fn entry(self) -> &'static Entry {
        &TABLE[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.entry().name
    }
}

/// The callable builtin of that name (`None` is a value, found by the checker itself).
/// The compiler's own builtins (named `sap::…`, which no program can spell) are not
/// found.
pub fn lookup(name: &str) -> Option<Builtin> {
    TABLE
        .iter()
        .find(|e| e.callable && !e.is_internal() && e.name == name)
        .map(|e| e.builtin)
}

/// The names of the callable builtins a program can call, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    TABLE
        .iter()
        .filter(|e| e.callable && !e.is_internal())
        .map(|e| e.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order_matches_the_enum() {
        for (i, e) in TABLE.iter().enumerate() {
            assert_eq!(e.builtin as usize, i, "{}", e.name);
        }
    }

    #[test]
    fn names_are_unique_and_none_is_not_callable() {
        let mut seen = std::collections::HashSet::new();
        for e in TABLE {
            assert!(seen.insert(e.name), "{} twice", e.name);
        }
        assert_eq!(lookup("None"), Option::None);
        assert_eq!(lookup("len"), Some(Builtin::Len));
        assert_eq!(Builtin::None.name(), "None");
        assert!(!names().any(|n| n == "None"));
    }

    #[test]
    fn generic_forms_are_recognised() {
        assert!(Builtin::Push.entry().main.is_generic());
        assert!(!Builtin::Split.entry().main.is_generic());
        assert!(!Builtin::Len.entry().also[0].is_generic());
        assert!(Builtin::Toposort.entry().also.is_empty());
    }
}
