//! `sapc mcp import`: an MCP server's tools as a sap module — one `extern "mcp:…" fn`
//! per tool, typed from its JSON Schemas.
//!
//! - `string`, `integer`, `number`, `boolean` → `String`, `i64`, `f64`, `Boolean`;
//! - `array` → `List<T>`; an object with properties → a struct named after the tool and
//!   the parameter; a string `enum` of identifiers → an enum;
//! - a property that is not required, or a type that admits `null` → `Option<T>`;
//! - a local `$ref` (`#/$defs/Name`, `#/definitions/Name`, as Pydantic writes nested
//!   models) → the type of the definition, one declaration per definition, named after
//!   it (a definition that refers to itself is `Json` where it recurs);
//! - anything else (an object without properties, `anyOf` of several types, …) → `Json`;
//! - a result with no `outputSchema` is the tool's text content, a `String`.
//!
//! A tool name that is not a sap identifier is mapped (`get-sum` → `get_sum`) and the
//! original kept in the binding (`extern "mcp:everything/get-sum" fn get_sum`). A tool
//! whose parameter names are not identifiers takes its arguments as one `Json` object.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use rmcp::model::Tool;
use serde_json::{Map, Value as JsonValue};

/// Type names a generated type must not take.
const TYPE_NAMES: &[&str] = &[
    "String", "Boolean", "Json", "Tool", "Context", "List", "Option", "Some", "None",
];

/// One imported tool: its name on the server and its sap declaration's first line.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedTool {
    pub tool: String,
    pub signature: String,
}

/// The module text, and a line per tool.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub text: String,
    pub tools: Vec<ImportedTool>,
}

/// Writes the module for `server`'s `tools`.
pub fn import_module(server: &str, tools: &[Tool]) -> Imported {
    let mut generator = Gen {
        types: String::new(),
        type_names: BTreeSet::new(),
        enums: BTreeMap::new(),
        defs: Map::new(),
        refs: BTreeMap::new(),
    };
    let mut fns = String::new();
    let mut out_tools = Vec::new();
    let mut fn_names = BTreeSet::new();
    for tool in tools {
        let original = tool.name.to_string();
        let name = unique(identifier(&original), &mut fn_names);
        let base = pascal(&name);
        let binding = if name == original {
            format!("mcp:{server}")
        } else {
            format!("mcp:{server}/{original}")
        };
        let input = JsonValue::Object((*tool.input_schema).clone());
        generator.enter_schema(&input);
        let params = generator.params(&base, &input);
        let ret = match &tool.output_schema {
            Some(schema) => {
                let schema = JsonValue::Object((**schema).clone());
                generator.enter_schema(&schema);
                match wrapped_result(&schema) {
                    // `{"result": X}` (how SDKs wrap a plain result) reads as an X.
                    Some(inner) => generator.ty(&format!("{base}Result"), inner, true),
                    None => generator.ty(&format!("{base}Result"), &schema, true),
                }
            }
            None => "String".to_owned(),
        };
        let signature = format!(
            "extern \"{binding}\" fn {name}({}) -> {ret};",
            params
                .iter()
                .map(|p| format!("{}: {}", p.name, p.ty))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(doc) = tool.description.as_deref().or(tool.title.as_deref()) {
            doc_lines(&mut fns, doc, "");
        }
        if params.is_empty() {
            let _ = writeln!(fns, "extern \"{binding}\" fn {name}() -> {ret};\n");
            out_tools.push(ImportedTool {
                tool: original,
                signature,
            });
            continue;
        }
        let _ = writeln!(fns, "extern \"{binding}\" fn {name}(");
        for p in &params {
            if let Some(doc) = &p.doc {
                doc_lines(&mut fns, doc, "    ");
            }
            let _ = writeln!(fns, "    {}: {},", p.name, p.ty);
        }
        let _ = writeln!(fns, ") -> {ret};\n");
        out_tools.push(ImportedTool {
            tool: original,
            signature,
        });
    }
    let mut text = format!(
        "// The tools of MCP server `{server}`, written by `sapc mcp import {server}`.\n\
         // Re-import after the server changes; sap.lock records what this was made from.\n\n"
    );
    text.push_str(&generator.types);
    text.push_str(fns.trim_end());
    text.push('\n');
    Imported {
        text,
        tools: out_tools,
    }
}

struct Param {
    name: String,
    ty: String,
    doc: Option<String>,
}

struct Gen {
    /// The struct and enum declarations written so far.
    types: String,
    type_names: BTreeSet<String>,
    /// Enums written so far, by their values.
    enums: BTreeMap<String, String>,
    /// The definitions (`$defs`, `definitions`) of the schema being read.
    defs: Map<String, JsonValue>,
    /// Definitions already declared, by their text: their sap type, or `None` while
    /// one is being declared (a reference back to it then reads as `Json`).
    refs: BTreeMap<String, Option<(String, bool)>>,
}

impl Gen {
    /// Reads `$ref`s against this schema's definitions from now on.
    fn enter_schema(&mut self, root: &JsonValue) {
        self.defs.clear();
        for key in ["$defs", "definitions"] {
            if let Some(defs) = root.get(key).and_then(JsonValue::as_object) {
                for (name, def) in defs {
                    self.defs.insert(format!("#/{key}/{name}"), def.clone());
                }
            }
        }
    }

    /// The type of a local `$ref`; `None` when `schema` is not one this can follow.
    fn ref_ty(&mut self, schema: &JsonValue) -> Option<(String, bool)> {
        let target = schema.get("$ref")?.as_str()?;
        let def = self.defs.get(target)?.clone();
        let key = def.to_string();
        match self.refs.get(&key) {
            Some(Some(done)) => return Some(done.clone()),
            Some(None) => return Some(("Json".to_owned(), false)),
            None => {}
        }
        self.refs.insert(key.clone(), None);
        let name = pascal(target.rsplit('/').next().unwrap_or("Definition"));
        let ty = self.base_ty(&name, &def);
        self.refs.insert(key, Some(ty.clone()));
        Some(ty)
    }

    fn params(&mut self, base: &str, input: &JsonValue) -> Vec<Param> {
        let props = input.get("properties").and_then(JsonValue::as_object);
        let Some(props) = props else {
            return Vec::new();
        };
        if props.keys().any(|k| !is_identifier(k)) {
            return vec![Param {
                name: "arguments".to_owned(),
                ty: "Json".to_owned(),
                doc: Some("The tool's arguments, as one JSON object (its parameter names are not sap identifiers).".to_owned()),
            }];
        }
        let required = required(input);
        props
            .iter()
            .map(|(name, schema)| {
                let ty = self.ty(
                    &format!("{base}{}", pascal(name)),
                    schema,
                    required.contains(name),
                );
                Param {
                    name: name.clone(),
                    ty,
                    doc: description(schema),
                }
            })
            .collect()
    }

    /// The sap type of `schema`; `required` false makes it an `Option`.
    fn ty(&mut self, name: &str, schema: &JsonValue, required: bool) -> String {
        let (inner, nullable) = self.base_ty(name, schema);
        if nullable || !required {
            if inner.starts_with("Option<") || inner == "Json" {
                inner
            } else {
                format!("Option<{inner}>")
            }
        } else {
            inner
        }
    }

    /// The type without optionality, and whether the schema admits `null`.
    fn base_ty(&mut self, name: &str, schema: &JsonValue) -> (String, bool) {
        if let Some(ty) = self.ref_ty(schema) {
            return ty;
        }
        // `anyOf: [T, {type: null}]` is an optional T; other unions are `Json`.
        for key in ["anyOf", "oneOf"] {
            if let Some(options) = schema.get(key).and_then(JsonValue::as_array) {
                let non_null: Vec<&JsonValue> = options
                    .iter()
                    .filter(|o| o.get("type").and_then(JsonValue::as_str) != Some("null"))
                    .collect();
                let nullable = non_null.len() < options.len();
                return match non_null.as_slice() {
                    [one] => (self.base_ty(name, one).0, nullable),
                    _ => ("Json".to_owned(), nullable),
                };
            }
        }
        let (ty, nullable) = match schema.get("type") {
            Some(JsonValue::String(t)) => (t.as_str(), false),
            Some(JsonValue::Array(types)) => {
                let names: Vec<&str> = types.iter().filter_map(JsonValue::as_str).collect();
                let non_null: Vec<&str> = names.iter().copied().filter(|t| *t != "null").collect();
                match non_null.as_slice() {
                    [one] => (*one, non_null.len() < names.len()),
                    _ => return ("Json".to_owned(), names.contains(&"null")),
                }
            }
            _ if schema.get("properties").is_some() => ("object", false),
            _ if schema.get("enum").is_some() => ("string", false),
            _ => return ("Json".to_owned(), false),
        };
        let sap = match ty {
            "string" => match schema.get("enum").and_then(JsonValue::as_array) {
                Some(values) => self.enum_ty(name, schema, values),
                None => "String".to_owned(),
            },
            "integer" => "i64".to_owned(),
            "number" => "f64".to_owned(),
            "boolean" => "Boolean".to_owned(),
            "array" => match schema.get("items") {
                Some(items) => {
                    let (item, nullable) = self.base_ty(&format!("{name}Item"), items);
                    if nullable && item != "Json" {
                        format!("List<Option<{item}>>")
                    } else {
                        format!("List<{item}>")
                    }
                }
                None => "List<Json>".to_owned(),
            },
            "object" => self.struct_ty(name, schema),
            _ => "Json".to_owned(),
        };
        (sap, nullable)
    }

    fn enum_ty(&mut self, name: &str, schema: &JsonValue, values: &[JsonValue]) -> String {
        let variants: Option<Vec<&str>> = values.iter().map(JsonValue::as_str).collect();
        match variants {
            Some(variants) if !variants.is_empty() && variants.iter().all(|v| is_identifier(v)) => {
                // One enum for one set of values (a parameter and a result field often
                // share it).
                let key = variants.join(",");
                if let Some(existing) = self.enums.get(&key) {
                    return existing.clone();
                }
                let name = self.type_name(name);
                self.enums.insert(key, name.clone());
                if let Some(doc) = description(schema) {
                    doc_lines(&mut self.types, &doc, "");
                }
                let _ = writeln!(self.types, "enum {name} {{ {} }}\n", variants.join(", "));
                name
            }
            _ => "String".to_owned(),
        }
    }

    fn struct_ty(&mut self, name: &str, schema: &JsonValue) -> String {
        let empty = Map::new();
        let props = schema
            .get("properties")
            .and_then(JsonValue::as_object)
            .unwrap_or(&empty);
        if props.is_empty() || props.keys().any(|k| !is_identifier(k)) {
            return "Json".to_owned();
        }
        let name = self.type_name(name);
        let required = required(schema);
        let fields: Vec<(String, String, Option<String>)> = props
            .iter()
            .map(|(field, s)| {
                let ty = self.ty(
                    &format!("{name}{}", pascal(field)),
                    s,
                    required.contains(field),
                );
                (field.clone(), ty, description(s))
            })
            .collect();
        if let Some(doc) = description(schema) {
            doc_lines(&mut self.types, &doc, "");
        }
        let _ = writeln!(self.types, "struct {name} {{");
        for (field, ty, doc) in fields {
            if let Some(doc) = doc {
                doc_lines(&mut self.types, &doc, "    ");
            }
            let _ = writeln!(self.types, "    {field}: {ty},");
        }
        let _ = writeln!(self.types, "}}\n");
        name
    }

    fn type_name(&mut self, wanted: &str) -> String {
        let mut name = wanted.to_owned();
        if TYPE_NAMES.contains(&name.as_str()) {
            name.push_str("Value");
        }
        unique(name, &mut self.type_names)
    }
}

/// The schema of `result` when `schema` is an object with that one property, required.
fn wrapped_result(schema: &JsonValue) -> Option<&JsonValue> {
    let props = schema.get("properties")?.as_object()?;
    let only = props.get("result")?;
    (props.len() == 1 && required(schema).contains("result")).then_some(only)
}

/// The names a schema's `required` lists.
pub(crate) fn required(schema: &JsonValue) -> BTreeSet<String> {
    schema
        .get("required")
        .and_then(JsonValue::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn description(schema: &JsonValue) -> Option<String> {
    schema
        .get("description")
        .and_then(JsonValue::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
}

fn doc_lines(out: &mut String, doc: &str, indent: &str) {
    for line in doc.trim().lines() {
        let line = line.trim_end();
        if line.is_empty() {
            let _ = writeln!(out, "{indent}///");
        } else {
            let _ = writeln!(out, "{indent}/// {line}");
        }
    }
}

/// Whether `s` is a sap identifier (ASCII letters, digits and `_`, not a keyword).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let first_ok = match chars.next() {
        Some(c) => c.is_ascii_alphabetic() || (c == '_' && s.len() > 1),
        None => false,
    };
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && !syntax::is_keyword(s)
}

/// A sap identifier for a tool name: other characters become `_`.
pub fn identifier(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) || out == "_" {
        out.insert_str(0, "tool_");
    }
    if syntax::is_keyword(&out) {
        out.push('_');
    }
    out
}

fn unique(name: String, taken: &mut BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// `get_sum` → `GetSum`.
fn pascal(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            match cs.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, description: &str, input: JsonValue, output: Option<JsonValue>) -> Tool {
        let mut t = Tool::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(input.as_object().unwrap().clone()),
        );
        t.output_schema = output.map(|o| Arc::new(o.as_object().unwrap().clone()));
        t
    }

    #[test]
    fn names_are_mapped_to_identifiers_and_kept_in_the_binding() {
        assert_eq!(identifier("get-sum"), "get_sum");
        assert_eq!(identifier("2fa"), "tool_2fa");
        assert_eq!(identifier("select"), "select_");
        assert_eq!(identifier("export"), "export_");
        assert!(!is_identifier("trusted") && is_identifier("trusted_party"));
        assert!(is_identifier("read_text_file"));
        assert!(!is_identifier("get-sum") && !is_identifier("fn") && !is_identifier(""));
        let m = import_module(
            "everything",
            &[
                tool(
                    "get-sum",
                    "Returns the sum of two numbers",
                    json!({"type": "object", "properties": {"a": {"type": "number", "description": "First number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                    None,
                ),
                tool(
                    "echo",
                    "Echoes back the input",
                    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                    None,
                ),
            ],
        );
        assert_eq!(
            m.tools[0].signature,
            "extern \"mcp:everything/get-sum\" fn get_sum(a: f64, b: f64) -> String;"
        );
        assert_eq!(
            m.tools[1].signature,
            "extern \"mcp:everything\" fn echo(message: String) -> String;"
        );
        assert!(m.text.contains("/// Returns the sum of two numbers\nextern \"mcp:everything/get-sum\" fn get_sum(\n    /// First number\n    a: f64,\n    b: f64,\n) -> String;"), "{}", m.text);
    }

    #[test]
    fn schemas_become_structs_enums_options_and_lists() {
        let m = import_module(
            "py",
            &[tool(
                "describe",
                "",
                json!({"type": "object", "properties": {
                    "name": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "level": {"enum": ["low", "high"], "type": "string"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                    "extra": {"type": "object"},
                    "count": {"type": ["integer", "null"]}
                }, "required": ["name", "tags", "level"]}),
                Some(json!({"type": "object", "properties": {
                    "summary": {"type": "string", "description": "One line."},
                    "score": {"type": "integer"},
                    "parts": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}}
                }, "required": ["summary", "score", "parts"]})),
            )],
        );
        assert_eq!(
            m.tools[0].signature,
            "extern \"mcp:py\" fn describe(name: String, tags: List<String>, level: DescribeLevel, note: Option<String>, extra: Json, count: Option<i64>) -> DescribeResult;"
        );
        assert!(
            m.text.contains("enum DescribeLevel { low, high }"),
            "{}",
            m.text
        );
        assert!(
            m.text
                .contains("struct DescribeResultPartsItem {\n    k: String,\n}"),
            "{}",
            m.text
        );
        assert!(m.text.contains("struct DescribeResult {\n    /// One line.\n    summary: String,\n    score: i64,\n    parts: List<DescribeResultPartsItem>,\n}"), "{}", m.text);
    }

    #[test]
    fn parameter_names_that_are_not_identifiers_make_one_json_argument() {
        let m = import_module(
            "s",
            &[tool(
                "q",
                "",
                json!({"type": "object", "properties": {"max-results": {"type": "integer"}}}),
                None,
            )],
        );
        assert_eq!(
            m.tools[0].signature,
            "extern \"mcp:s\" fn q(arguments: Json) -> String;"
        );
    }

    /// Pydantic writes a nested model as a `$ref` into `$defs` (mcp-server-time's
    /// `convert_time`): each definition becomes one struct, named after it, shared by
    /// every field and tool that refers to it; one that refers to itself recurs as `Json`.
    #[test]
    fn local_refs_are_followed_to_one_declaration_per_definition() {
        let time_result = json!({"type": "object", "properties": {
            "timezone": {"type": "string"}, "is_dst": {"type": "boolean"}},
            "required": ["timezone", "is_dst"]});
        let m = import_module(
            "time",
            &[
                tool(
                    "convert_time",
                    "",
                    json!({"type": "object", "properties": {"time": {"type": "string"}}, "required": ["time"]}),
                    Some(json!({"type": "object", "properties": {
                        "source": {"$ref": "#/$defs/TimeResult"},
                        "target": {"$ref": "#/$defs/TimeResult"},
                        "tree": {"$ref": "#/definitions/Node"}},
                        "required": ["source", "target"],
                        "$defs": {"TimeResult": time_result},
                        "definitions": {"Node": {"type": "object", "properties": {
                            "label": {"type": "string"},
                            "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}},
                            "required": ["label", "children"]}}})),
                ),
                tool(
                    "get_current_time",
                    "",
                    json!({"type": "object", "properties": {}}),
                    Some(
                        json!({"$ref": "#/$defs/TimeResult", "$defs": {"TimeResult": time_result}}),
                    ),
                ),
            ],
        );
        assert_eq!(
            m.tools[0].signature,
            "extern \"mcp:time\" fn convert_time(time: String) -> ConvertTimeResult;"
        );
        assert!(
            m.text
                .contains("struct TimeResult {\n    timezone: String,\n    is_dst: Boolean,\n}"),
            "{}",
            m.text
        );
        assert!(
            m.text.contains(
                "    source: TimeResult,\n    target: TimeResult,\n    tree: Option<Node>,"
            ),
            "{}",
            m.text
        );
        assert!(
            m.text
                .contains("struct Node {\n    label: String,\n    children: List<Json>,\n}"),
            "{}",
            m.text
        );
        assert_eq!(
            m.tools[1].signature,
            "extern \"mcp:time\" fn get_current_time() -> TimeResult;"
        );
        assert_eq!(m.text.matches("struct TimeResult").count(), 1, "{}", m.text);
    }
}
