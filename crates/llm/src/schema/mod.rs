//! JSON Schemas from sap types, in a portable profile that OpenAI strict mode,
//! Anthropic, vLLM, llama.cpp and Ollama all accept: an object at the root (scalars are
//! wrapped in `{"value": …}`), every property required, `additionalProperties: false`,
//! nullable as a type union, enums as string `enum`s, doc comments as `description`s.
//!
//! `Json` values travel as a string holding JSON text: strict mode cannot describe "any
//! value", and a string can hold one.
//!
//! This portable schema is what the runtime validates answers against and what
//! transcripts record. What goes on the wire is [`target::emit`]'s rewrite of it for the
//! server's dialect, which keeps only the keywords that target enforces; and
//! [`output_budget`] derives from it how many tokens an answer may take.

pub mod gbnf;
pub mod shape;
pub mod target;

use serde_json::{Map, Value as JsonValue, json};

use crate::types::{ParamDesc, TypeDesc};

/// The schema of one type, not necessarily an object.
pub fn schema_of(ty: &TypeDesc) -> JsonValue {
    let mut visiting = Vec::new();
    schema_in(ty, &mut visiting)
}

fn with_description(mut schema: JsonValue, doc: Option<&str>) -> JsonValue {
    if let (Some(doc), JsonValue::Object(map)) = (doc, &mut schema) {
        map.insert("description".to_owned(), JsonValue::String(doc.to_owned()));
    }
    schema
}

fn schema_in(ty: &TypeDesc, visiting: &mut Vec<String>) -> JsonValue {
    match ty {
        TypeDesc::I32 => {
            json!({ "type": "integer", "minimum": i32::MIN, "maximum": i32::MAX })
        }
        TypeDesc::I64 => json!({ "type": "integer" }),
        TypeDesc::F64 => json!({ "type": "number" }),
        TypeDesc::Bool => json!({ "type": "boolean" }),
        TypeDesc::String => json!({ "type": "string" }),
        TypeDesc::Unit => json!({ "type": "null" }),
        TypeDesc::Json => {
            json!({ "type": "string", "description": "a JSON document, written as JSON text" })
        }
        TypeDesc::List(elem) => json!({ "type": "array", "items": schema_in(elem, visiting) }),
        TypeDesc::Option(inner) => {
            let inner = schema_in(inner, visiting);
            // A scalar becomes `"type": ["string", "null"]`; anything else an `anyOf`.
            match inner.get("type").and_then(JsonValue::as_str) {
                Some(t) if !matches!(t, "object" | "array") && inner.get("enum").is_none() => {
                    let mut map = inner.as_object().cloned().unwrap_or_default();
                    map.insert("type".to_owned(), json!([t, "null"]));
                    JsonValue::Object(map)
                }
                _ => json!({ "anyOf": [inner, { "type": "null" }] }),
            }
        }
        TypeDesc::Struct(desc) => {
            if visiting.contains(&desc.name) {
                // Recursive data: the model cannot produce an infinite value; a nested
                // occurrence is described by name and must be null-terminated by an
                // `Option` or an empty `List` in the type.
                return json!({ "type": "object", "description": format!("a {}", desc.name) });
            }
            visiting.push(desc.name.clone());
            let mut properties = Map::new();
            for field in &desc.fields {
                let schema = with_description(schema_in(&field.ty, visiting), field.doc.as_deref());
                properties.insert(field.name.clone(), schema);
            }
            visiting.pop();
            let required: Vec<&str> = desc.fields.iter().map(|f| f.name.as_str()).collect();
            with_description(
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                }),
                desc.doc.as_deref(),
            )
        }
        TypeDesc::Enum(desc) => {
            let names: Vec<&str> = desc.variants.iter().map(|v| v.name.as_str()).collect();
            let mut doc = desc.doc.clone().unwrap_or_default();
            for v in desc.variants.iter().filter(|v| v.doc.is_some()) {
                if !doc.is_empty() {
                    doc.push('\n');
                }
                doc.push_str(&format!("{}: {}", v.name, v.doc.as_deref().unwrap_or("")));
            }
            let schema = json!({ "type": "string", "enum": names });
            with_description(schema, (!doc.is_empty()).then_some(doc.as_str()))
        }
    }
}

/// An object schema with one required property per entry.
pub fn object(properties: Vec<(String, JsonValue)>) -> JsonValue {
    let required: Vec<String> = properties.iter().map(|(k, _)| k.clone()).collect();
    let map: Map<String, JsonValue> = properties.into_iter().collect();
    json!({
        "type": "object",
        "properties": map,
        "required": required,
        "additionalProperties": false,
    })
}

/// The root schema for producing a value of `ty`, and whether it is wrapped in
/// `{"value": …}`.
pub fn value_schema(ty: &TypeDesc) -> (JsonValue, bool) {
    if ty.is_object() {
        (schema_of(ty), false)
    } else {
        let inner = with_description(schema_of(ty), ty.doc());
        (object(vec![("value".to_owned(), inner)]), true)
    }
}

/// The schema for filling the missing arguments of a call.
pub fn arguments_schema(params: &[ParamDesc]) -> JsonValue {
    object(
        params
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    with_description(schema_of(&p.ty), p.doc.as_deref()),
                )
            })
            .collect(),
    )
}

/// The longest reason a decision may give, in characters (where the target enforces it).
pub const REASON_LENGTH: u32 = 200;

/// The schema for a Boolean decision: a short reason first, then the answer.
pub fn decision_schema() -> JsonValue {
    object(vec![
        (
            "reason".to_owned(),
            json!({ "type": "string", "description": "one short sentence", "maxLength": REASON_LENGTH }),
        ),
        ("answer".to_owned(), json!({ "type": "boolean" })),
    ])
}

/// One arm a `select` offers.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmDesc {
    /// The function the arm calls.
    pub tool: String,
    pub doc: Option<String>,
    /// The `as` binding, shown to the model as what the result is used for.
    pub binding: Option<String>,
    /// The arguments the model must fill (the call's `_`s).
    pub params: Vec<ParamDesc>,
}

/// The schema for a `select`: `{"choice": {"option": i, "arguments": {…}}}`, one
/// `anyOf` branch per arm.
pub fn choice_schema(arms: &[ArmDesc]) -> JsonValue {
    let branches: Vec<JsonValue> = arms
        .iter()
        .enumerate()
        .map(|(i, arm)| {
            let mut description = format!("call `{}`", arm.tool);
            if let Some(doc) = &arm.doc {
                description.push_str(": ");
                description.push_str(doc);
            }
            let branch = object(vec![
                (
                    "option".to_owned(),
                    json!({ "type": "integer", "enum": [i] }),
                ),
                ("arguments".to_owned(), arguments_schema(&arm.params)),
            ]);
            with_description(branch, Some(&description))
        })
        .collect();
    object(vec![("choice".to_owned(), json!({ "anyOf": branches }))])
}

/// Output tokens one text of an answer may take, given the prompt it answers (its
/// context and instruction, `prompt_chars` characters): a text an answer gives restates,
/// summarizes or derives from what it was shown, so it gets what the prompt holds (at
/// about four characters a token) plus 256 tokens for what it adds, and never more than
/// 1,024. A program that wants longer texts sets `max_output_tokens` in sap.toml.
pub fn text_budget(prompt_chars: usize) -> u32 {
    (prompt_chars / 4 + 256).min(1024) as u32
}

/// Output tokens an answer to `schema` may take, sent as the request's `max_tokens`: a
/// model that repeats itself is cut off after about what the type can hold, and the cut
/// answer is closed into a value or re-asked, instead of running to the server's limit.
/// Generous for every answer a model means to give: a string may take `text` tokens
/// ([`text_budget`]), a list 16 elements' worth (a list inside a list, 4; a text in a
/// list a quarter of `text`), a choice its largest clause; the total is kept between
/// 256 and 4,096.
pub fn output_budget(schema: &JsonValue, text: u32) -> u32 {
    (budget_in(schema, 0, 0, u64::from(text)) + 16).clamp(256, 4096) as u32
}

/// `depth` bounds the walk; `lists` counts the lists the value is inside; `string` is
/// what a text may take.
fn budget_in(schema: &JsonValue, depth: usize, lists: u32, string: u64) -> u64 {
    if depth > 16 {
        return 0;
    }
    let Some(map) = schema.as_object() else {
        return 0;
    };
    let branches = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| map.get(*k)?.as_array())
        .flatten()
        .map(|b| budget_in(b, depth + 1, lists, string))
        .max();
    if let Some(b) = branches {
        return b;
    }
    if let Some(values) = map.get("enum").and_then(JsonValue::as_array) {
        let longest = values
            .iter()
            .map(|v| v.to_string().len())
            .max()
            .unwrap_or(0);
        return 4 + longest as u64 / 2;
    }
    match type_name(map) {
        "string" => match map.get("maxLength").and_then(JsonValue::as_u64) {
            Some(chars) => 4 + chars / 2,
            // A text inside a list is one of many.
            None if lists > 0 => string / 4,
            None => string,
        },
        "integer" | "number" | "boolean" | "null" => 12,
        "array" => {
            let items = map
                .get("items")
                .map_or(string, |i| budget_in(i, depth + 1, lists + 1, string));
            let most = if lists == 0 { 16 } else { 4 };
            let count = map
                .get("maxItems")
                .and_then(JsonValue::as_u64)
                .unwrap_or(most);
            4 + count.min(most) * (items + 2)
        }
        "object" => match map.get("properties").and_then(JsonValue::as_object) {
            Some(properties) => properties
                .iter()
                .map(|(k, v)| 4 + k.len() as u64 / 3 + budget_in(v, depth + 1, lists, string))
                .sum(),
            // An object described by name only (recursive data): room for a few levels.
            None => 4 * string,
        },
        _ => string,
    }
}

/// The JSON type a schema object names; of `["string", "null"]`, the first non-null one.
pub(crate) fn type_name(map: &Map<String, JsonValue>) -> &str {
    match map.get("type") {
        Some(JsonValue::String(t)) => t,
        Some(JsonValue::Array(ts)) => ts
            .iter()
            .filter_map(JsonValue::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_gets_what_the_prompt_holds_and_256_tokens_more_up_to_1024() {
        assert_eq!(text_budget(0), 256);
        assert_eq!(text_budget(1000), 506);
        assert_eq!(text_budget(100_000), 1024);
        let note = json!({
            "type": "object",
            "properties": {
                "topic": { "type": "string" },
                "decisions": { "type": "array", "items": { "type": "string" } },
            },
        });
        // A short prompt: the topic 256 tokens, each decision 64 of sixteen.
        let short = output_budget(&note, text_budget(0));
        let long = output_budget(&note, text_budget(100_000));
        assert!(short < long, "{short} {long}");
        assert!((1300..1500).contains(&short), "{short}");
        assert_eq!(long, 4096, "the total stays within 4,096");
    }
}
