//! A program's types and functions as a Python module (`sapc gen python`): Pydantic v2
//! models for its structs, `enum.Enum`s for its enums, and a `Program` class whose
//! methods call its functions through `saplang` and return those models, so `mypy` and
//! `pyright` check a caller's code.

use std::fmt::Write;

use ir::{Module, Type, TypeDef};

/// Python's reserved words: a sap name that is one gets a trailing `_` (and the field
/// its sap name as its alias).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

fn python_name(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_owned()
    }
}

/// A Python string literal.
fn literal(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// A docstring's text, safe inside `"""…"""`.
fn docstring(text: &str) -> String {
    text.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"")
}

fn annotation(module: &Module, ty: &Type) -> String {
    match ty {
        Type::Unit => "None".to_owned(),
        Type::Bool => "bool".to_owned(),
        Type::I32 | Type::I64 => "int".to_owned(),
        Type::F64 => "float".to_owned(),
        Type::Str => "str".to_owned(),
        Type::Json | Type::Tool | Type::Context => "Any".to_owned(),
        Type::List(inner) => format!("list[{}]", annotation(module, inner)),
        Type::Option(inner) => format!("Optional[{}]", annotation(module, inner)),
        Type::Struct(id) | Type::Enum(id) => match &module.types[*id as usize] {
            TypeDef::Struct { name, .. } | TypeDef::Enum { name, .. } => name.clone(),
        },
    }
}

/// Whether a function is one of the program's own (not the prelude's) that Python can
/// name.
fn offered(module: &Module, f: &ir::Function) -> bool {
    let own_file = module
        .files
        .get(f.span.file as usize)
        .is_some_and(|name| hir::prelude_source(name).is_none());
    own_file
        && !f.name.is_empty()
        && f.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !f.name.starts_with(|c: char| c.is_ascii_digit())
}

/// The module's text. `program` is the path `load()` opens by default.
pub fn python_module(module: &Module, program: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\"\"\"The types and functions of {}, for Python.\n\nWritten by `sapc gen python`; \
         do not edit: generate it again when the program changes.\n\"\"\"\n",
        docstring(program)
    );
    out.push_str(
        "from __future__ import annotations\n\nimport enum\nfrom typing import Any, Optional\n\n\
         from pydantic import BaseModel, ConfigDict, Field\n\nimport saplang\n\n",
    );
    let _ = writeln!(out, "PROGRAM = {}\n", literal(program));
    // Enums first: the structs' fields name them.
    let mut defs: Vec<&TypeDef> = module.types.iter().collect();
    defs.sort_by_key(|d| matches!(d, TypeDef::Struct { .. }));
    for def in defs {
        match def {
            TypeDef::Enum {
                name,
                doc,
                variants,
            } => {
                let _ = writeln!(out, "\nclass {name}(str, enum.Enum):");
                if let Some(doc) = doc {
                    let _ = writeln!(out, "    \"\"\"{}\"\"\"\n", docstring(doc));
                }
                for (variant, _) in variants {
                    let _ = writeln!(out, "    {} = {}", python_name(variant), literal(variant));
                }
                if variants.is_empty() {
                    out.push_str("    pass\n");
                }
                out.push('\n');
            }
            TypeDef::Struct { name, doc, fields } => {
                let _ = writeln!(out, "\nclass {name}(BaseModel):");
                if let Some(doc) = doc {
                    let _ = writeln!(out, "    \"\"\"{}\"\"\"\n", docstring(doc));
                }
                out.push_str(
                    "    model_config = ConfigDict(extra=\"forbid\", populate_by_name=True)\n\n",
                );
                for field in fields {
                    let ty = annotation(module, &field.ty);
                    let mut args = Vec::new();
                    if python_name(&field.name) != field.name {
                        args.push(format!("alias={}", literal(&field.name)));
                    }
                    if let Some(doc) = &field.doc {
                        args.push(format!("description={}", literal(doc)));
                    }
                    if args.is_empty() {
                        let _ = writeln!(out, "    {}: {ty}", python_name(&field.name));
                    } else {
                        let _ = writeln!(
                            out,
                            "    {}: {ty} = Field({})",
                            python_name(&field.name),
                            args.join(", ")
                        );
                    }
                }
                if fields.is_empty() {
                    out.push_str("    pass\n");
                }
                out.push('\n');
            }
        }
    }
    out.push_str(
        "\nclass Program:\n    \"\"\"The program's functions, typed: each returns the model of its \
         result.\"\"\"\n\n    def __init__(self, native: saplang.Program) -> None:\n        \
         self.native = native\n",
    );
    for f in module.functions.iter().filter(|f| offered(module, f)) {
        let params: Vec<&ir::Param> = f.params.iter().filter(|p| p.ty != Type::Context).collect();
        // A function with a `Context` takes one as the keyword `ctx` (a new one if none).
        let context = f.params.iter().find(|p| p.ty == Type::Context);
        let mut signature: String = params
            .iter()
            .map(|p| format!(", {}: {}", python_name(&p.name), annotation(module, &p.ty)))
            .collect();
        if context.is_some() {
            signature.push_str(", *, ctx: saplang.Context | None = None");
        }
        let arguments: Vec<String> = params
            .iter()
            .map(|p| format!("{}: {}", literal(&p.name), python_name(&p.name)))
            .collect();
        let ret = annotation(module, &f.ret);
        let doc = f
            .doc
            .as_deref()
            .map(|d| format!("        \"\"\"{}\"\"\"\n", docstring(d)))
            .unwrap_or_default();
        let name = python_name(&f.name);
        let mut body = format!(
            "        arguments: dict[str, Any] = {{{}}}\n",
            arguments.join(", ")
        );
        if let Some(p) = context {
            let _ = writeln!(
                body,
                "        if ctx is not None:\n            arguments[{}] = ctx",
                literal(&p.name)
            );
        }
        let call = format!("\"{}\", arguments", f.name);
        let _ = write!(
            out,
            "\n    def {name}(self{signature}) -> {ret}:\n{doc}{body}        \
             result: {ret} = saplang.validate({ret}, self.native.call_with({call}))\n        \
             return result\n\n    \
             async def {name}_async(self{signature}) -> {ret}:\n{doc}{body}        \
             result: {ret} = saplang.validate({ret}, await self.native.acall_with({call}))\n        \
             return result\n"
        );
    }
    out.push_str(
        "\n\ndef load(path: str = PROGRAM, **options: Any) -> Program:\n    \"\"\"Checks and \
         compiles the program (options as `saplang.load`'s) and returns its typed \
         functions.\"\"\"\n    return Program(saplang.load(path, **options))\n",
    );
    out
}
