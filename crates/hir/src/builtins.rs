//! The standard externs, available in every module without a declaration (brief §6).
//! Their implementations live in the runtime; here they are signatures.

use crate::ty::Ty;

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Builtin {
    Print,
    Input,
    ToString,
    Len,
    Push,
    Set,
    ReadFile,
    WriteFile,
    JsonParse,
    JsonGet,
    Toposort,
    ToJson,
    ToolSignatures,
    AotCheck,
    AotExecute,
    AotDot,
    AotMermaid,
    JsonHas,
    JsonLen,
    JsonKeys,
    JsonItems,
    Lines,
    Truncate,
    Trace,
    ClockMs,
    JsonInt,
    JsonStr,
    AotSchema,
    /// The value `None` (a name, not a function: not in the table of callables).
    None,
    Some,
    IsSome,
    IsNone,
    UnwrapOr,
    Unwrap,
    Contains,
    StartsWith,
    EndsWith,
    Split,
    Join,
    Trim,
    Replace,
    ToLower,
    ToUpper,
    ParseInt,
    ParseFloat,
}

const ALL: &[(&str, Builtin)] = &[
    ("print", Builtin::Print),
    ("input", Builtin::Input),
    ("to_string", Builtin::ToString),
    ("len", Builtin::Len),
    ("push", Builtin::Push),
    ("set", Builtin::Set),
    ("read_file", Builtin::ReadFile),
    ("write_file", Builtin::WriteFile),
    ("json_parse", Builtin::JsonParse),
    ("json_get", Builtin::JsonGet),
    ("toposort", Builtin::Toposort),
    ("to_json", Builtin::ToJson),
    ("tool_signatures", Builtin::ToolSignatures),
    ("aot_check", Builtin::AotCheck),
    ("aot_execute", Builtin::AotExecute),
    ("aot_dot", Builtin::AotDot),
    ("aot_mermaid", Builtin::AotMermaid),
    ("json_has", Builtin::JsonHas),
    ("json_len", Builtin::JsonLen),
    ("json_keys", Builtin::JsonKeys),
    ("json_items", Builtin::JsonItems),
    ("lines", Builtin::Lines),
    ("truncate", Builtin::Truncate),
    ("trace", Builtin::Trace),
    ("clock_ms", Builtin::ClockMs),
    ("json_int", Builtin::JsonInt),
    ("json_str", Builtin::JsonStr),
    ("aot_schema", Builtin::AotSchema),
    ("Some", Builtin::Some),
    ("is_some", Builtin::IsSome),
    ("is_none", Builtin::IsNone),
    ("unwrap_or", Builtin::UnwrapOr),
    ("unwrap", Builtin::Unwrap),
    ("contains", Builtin::Contains),
    ("starts_with", Builtin::StartsWith),
    ("ends_with", Builtin::EndsWith),
    ("split", Builtin::Split),
    ("join", Builtin::Join),
    ("trim", Builtin::Trim),
    ("replace", Builtin::Replace),
    ("to_lower", Builtin::ToLower),
    ("to_upper", Builtin::ToUpper),
    ("parse_int", Builtin::ParseInt),
    ("parse_float", Builtin::ParseFloat),
];

pub fn lookup(name: &str) -> Option<Builtin> {
    ALL.iter().find(|(n, _)| *n == name).map(|&(_, b)| b)
}

pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|(n, _)| *n)
}

/// A builtin's signature: parameter names and types, result, and how many type
/// parameters (`Ty::Param`) it has.
pub struct BuiltinSig<'db> {
    pub params: Vec<(&'static str, Ty<'db>)>,
    pub ret: Ty<'db>,
    pub generics: u32,
}

impl Builtin {
    pub fn name(self) -> &'static str {
        if self == Builtin::None {
            return "None";
        }
        ALL.iter()
            .find(|(_, b)| *b == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    pub fn signature<'db>(self) -> BuiltinSig<'db> {
        let t = || Ty::Param(0);
        let tools = || Ty::List(Box::new(Ty::Tool));
        let (params, ret, generics) = match self {
            Builtin::Print => (vec![("value", Ty::String)], Ty::Unit, 0),
            Builtin::Input => (vec![], Ty::String, 0),
            Builtin::ToString => (vec![("value", t())], Ty::String, 1),
            // `len` also takes a `String`; the checker special-cases it.
            Builtin::Len => (vec![("xs", Ty::List(Box::new(t())))], Ty::I64, 1),
            Builtin::Push => (
                vec![("xs", Ty::List(Box::new(t()))), ("x", t())],
                Ty::List(Box::new(t())),
                1,
            ),
            // A copy of `xs` with element `index` replaced by `x`.
            Builtin::Set => (
                vec![
                    ("xs", Ty::List(Box::new(t()))),
                    ("index", Ty::I64),
                    ("x", t()),
                ],
                Ty::List(Box::new(t())),
                1,
            ),
            Builtin::ReadFile => (vec![("path", Ty::String)], Ty::String, 0),
            Builtin::WriteFile => (
                vec![("path", Ty::String), ("content", Ty::String)],
                Ty::Unit,
                0,
            ),
            Builtin::JsonParse => (vec![("text", Ty::String)], Ty::Json, 0),
            Builtin::JsonGet => (vec![("value", Ty::Json), ("path", Ty::String)], Ty::Json, 0),
            // `deps[i]` lists the nodes node `i` depends on; the result is the layers of
            // nodes that can run together, in order.
            Builtin::Toposort => {
                let deps = Ty::List(Box::new(Ty::List(Box::new(Ty::I64))));
                (vec![("deps", deps.clone())], deps, 0)
            }
            Builtin::ToJson => (vec![("value", t())], Ty::Json, 1),
            // The signatures of tools as JSON text: what a planner is shown.
            Builtin::ToolSignatures => (vec![("tools", tools())], Ty::String, 0),
            // The defects of an Atom-of-Thought plan against the tools, one line each.
            Builtin::AotCheck => (
                vec![("plan", Ty::Json), ("tools", tools())],
                Ty::List(Box::new(Ty::String)),
                0,
            ),
            // Runs a plan; the final atom's report.
            // `undo` pairs a tool with the tool that reverses it: `[[book, cancel]]`.
            Builtin::AotExecute => (
                vec![
                    ("plan", Ty::Json),
                    ("tools", tools()),
                    ("retries", Ty::I64),
                    ("undo", Ty::List(Box::new(tools()))),
                ],
                Ty::Json,
                0,
            ),
            Builtin::AotDot | Builtin::AotMermaid => (vec![("plan", Ty::Json)], Ty::String, 0),
            Builtin::JsonHas => (vec![("value", Ty::Json), ("path", Ty::String)], Ty::Bool, 0),
            Builtin::JsonLen => (vec![("value", Ty::Json)], Ty::I64, 0),
            Builtin::JsonKeys => (vec![("value", Ty::Json)], Ty::List(Box::new(Ty::String)), 0),
            Builtin::JsonItems => (vec![("value", Ty::Json)], Ty::List(Box::new(Ty::Json)), 0),
            Builtin::Lines => (
                vec![("text", Ty::String)],
                Ty::List(Box::new(Ty::String)),
                0,
            ),
            Builtin::Truncate => (vec![("text", Ty::String), ("max", Ty::I64)], Ty::String, 0),
            Builtin::Trace => (vec![("event", Ty::String), ("data", Ty::Json)], Ty::Unit, 0),
            Builtin::ClockMs => (vec![], Ty::I64, 0),
            Builtin::JsonInt => (vec![("value", Ty::Json)], Ty::I64, 0),
            // The JSON Schema of an Atom-of-Thought plan over these tools.
            Builtin::AotSchema => (vec![("tools", tools())], Ty::Json, 0),
            Builtin::JsonStr => (vec![("value", Ty::Json)], Ty::String, 0),
            Builtin::None => (vec![], Ty::Option(Box::new(t())), 1),
            Builtin::Some => (vec![("value", t())], Ty::Option(Box::new(t())), 1),
            Builtin::IsSome | Builtin::IsNone => {
                (vec![("option", Ty::Option(Box::new(t())))], Ty::Bool, 1)
            }
            // The value, or `default` for `None`.
            Builtin::UnwrapOr => (
                vec![("option", Ty::Option(Box::new(t()))), ("default", t())],
                t(),
                1,
            ),
            // The value; `None` is a runtime error.
            Builtin::Unwrap => (vec![("option", Ty::Option(Box::new(t())))], t(), 1),
            // Also `(text: String, part: String)`; the checker special-cases it.
            Builtin::Contains => (
                vec![("xs", Ty::List(Box::new(t()))), ("x", t())],
                Ty::Bool,
                1,
            ),
            Builtin::StartsWith => (
                vec![("text", Ty::String), ("prefix", Ty::String)],
                Ty::Bool,
                0,
            ),
            Builtin::EndsWith => (
                vec![("text", Ty::String), ("suffix", Ty::String)],
                Ty::Bool,
                0,
            ),
            Builtin::Split => (
                vec![("text", Ty::String), ("separator", Ty::String)],
                Ty::List(Box::new(Ty::String)),
                0,
            ),
            Builtin::Join => (
                vec![
                    ("parts", Ty::List(Box::new(Ty::String))),
                    ("separator", Ty::String),
                ],
                Ty::String,
                0,
            ),
            Builtin::Trim | Builtin::ToLower | Builtin::ToUpper => {
                (vec![("text", Ty::String)], Ty::String, 0)
            }
            Builtin::Replace => (
                vec![
                    ("text", Ty::String),
                    ("from", Ty::String),
                    ("to", Ty::String),
                ],
                Ty::String,
                0,
            ),
            // The number the whole text (spaces around it aside) spells, if it does.
            Builtin::ParseInt => (vec![("text", Ty::String)], Ty::Option(Box::new(Ty::I64)), 0),
            Builtin::ParseFloat => (vec![("text", Ty::String)], Ty::Option(Box::new(Ty::F64)), 0),
        };
        BuiltinSig {
            params,
            ret,
            generics,
        }
    }
}
