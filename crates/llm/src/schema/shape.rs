//! A schema as the shape of its answer, for a prompt: `{"bugs": [string], "severity":
//! "Low" | "Medium" | "High"}`, with each field's doc comment after it. A model reads
//! what to write from it in fewer tokens than from the JSON Schema, where a grammar
//! already enforces every keyword (`--provider local`); a keyword without a short form
//! is written as JSON.

use serde_json::{Map, Value as JsonValue};

/// Objects whose one-line form is longer than this are written a field per line.
const LINE: usize = 72;

/// The shape of the answers `schema` admits.
pub fn shape(schema: &JsonValue) -> String {
    let mut out = String::new();
    write(schema, 0, &mut out);
    out
}

fn write(schema: &JsonValue, indent: usize, out: &mut String) {
    let Some(map) = schema.as_object() else {
        // `true` admits anything.
        out.push_str(if schema == &JsonValue::Bool(false) {
            "nothing"
        } else {
            "any JSON value"
        });
        return;
    };
    if let Some(c) = map.get("const") {
        out.push_str(&c.to_string());
        return;
    }
    if let Some(JsonValue::Array(values)) = map.get("enum") {
        let names: Vec<String> = values.iter().map(JsonValue::to_string).collect();
        out.push_str(&names.join(" | "));
        return;
    }
    if let Some(JsonValue::Array(branches)) = map.get("anyOf").or_else(|| map.get("oneOf")) {
        alternatives(branches, indent, out);
        return;
    }
    match map.get("type") {
        Some(JsonValue::String(t)) => typed(t, map, indent, out),
        Some(JsonValue::Array(types)) => {
            // `"type": ["string", "null"]`: each type with the rest of the keywords.
            let branches: Vec<JsonValue> = types
                .iter()
                .map(|t| {
                    let mut one = map.clone();
                    one.insert("type".to_owned(), t.clone());
                    JsonValue::Object(one)
                })
                .collect();
            alternatives(&branches, indent, out);
        }
        _ if map.contains_key("properties") => typed("object", map, indent, out),
        _ => {
            let mut rest = map.clone();
            rest.remove("description");
            if rest.is_empty() {
                out.push_str("any JSON value");
            } else {
                out.push_str(&JsonValue::Object(rest).to_string());
            }
        }
    }
}

fn typed(t: &str, map: &Map<String, JsonValue>, indent: usize, out: &mut String) {
    let int = |key: &str| map.get(key).and_then(JsonValue::as_i64);
    match t {
        "object" => object(map, indent, out),
        "array" => {
            out.push('[');
            match map.get("items") {
                Some(items) => write(items, indent, out),
                None => out.push_str("any JSON value"),
            }
            out.push(']');
            let (min, max) = (int("minItems"), int("maxItems"));
            range(out, min, max, "items");
        }
        "string" => {
            out.push_str("string");
            if let Some(JsonValue::String(p)) = map.get("pattern") {
                out.push_str(&format!(" matching /{p}/"));
            }
            range(out, int("minLength"), int("maxLength"), "characters");
        }
        "integer" | "number" => {
            out.push_str(t);
            let (min, max) = (int("minimum"), int("maximum"));
            let i32_range = min == Some(i32::MIN.into()) && max == Some(i32::MAX.into());
            if !i32_range {
                match (min, max) {
                    (Some(a), Some(b)) => out.push_str(&format!(" from {a} to {b}")),
                    (Some(a), None) => out.push_str(&format!(" ≥ {a}")),
                    (None, Some(b)) => out.push_str(&format!(" ≤ {b}")),
                    (None, None) => {}
                }
            }
        }
        "boolean" => out.push_str("true | false"),
        other => out.push_str(other),
    }
}

fn range(out: &mut String, min: Option<i64>, max: Option<i64>, what: &str) {
    match (min, max) {
        (Some(a), Some(b)) if a == b => out.push_str(&format!(" ({a} {what})")),
        (Some(a), Some(b)) => out.push_str(&format!(" ({a} to {b} {what})")),
        (Some(a), None) if a > 0 => out.push_str(&format!(" (at least {a} {what})")),
        (None, Some(b)) => out.push_str(&format!(" (at most {b} {what})")),
        _ => {}
    }
}

fn object(map: &Map<String, JsonValue>, indent: usize, out: &mut String) {
    let Some(JsonValue::Object(properties)) = map.get("properties") else {
        out.push_str("object");
        return;
    };
    if properties.is_empty() {
        out.push_str("{}");
        return;
    }
    let required: Vec<&str> = map
        .get("required")
        .and_then(JsonValue::as_array)
        .map(|r| r.iter().filter_map(JsonValue::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<(String, Option<&str>)> = properties
        .iter()
        .map(|(name, s)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let mut value = String::new();
            write(s, indent + 1, &mut value);
            let doc = s.get("description").and_then(JsonValue::as_str);
            (
                format!("{}{optional}: {value}", JsonValue::String(name.clone())),
                doc,
            )
        })
        .collect();
    let one_line = format!(
        "{{{}}}",
        fields
            .iter()
            .map(|(f, _)| f.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if fields
        .iter()
        .all(|(f, doc)| doc.is_none() && !f.contains('\n'))
        && one_line.len() <= LINE
    {
        out.push_str(&one_line);
        return;
    }
    let pad = "  ".repeat(indent + 1);
    out.push_str("{\n");
    let last = fields.len() - 1;
    for (i, (field, doc)) in fields.iter().enumerate() {
        out.push_str(&pad);
        out.push_str(field);
        if i < last {
            out.push(',');
        }
        if let Some(doc) = doc {
            out.push_str("  // ");
            out.push_str(&doc.replace('\n', " "));
        }
        out.push('\n');
    }
    out.push_str(&"  ".repeat(indent));
    out.push('}');
}

fn alternatives(branches: &[JsonValue], indent: usize, out: &mut String) {
    // A branch written on lines of its own starts two levels in, after its `| `.
    let parts: Vec<(String, Option<&str>)> = branches
        .iter()
        .map(|b| {
            let mut s = String::new();
            write(b, indent + 2, &mut s);
            let doc = b
                .get("description")
                .and_then(JsonValue::as_str)
                .filter(|_| b.get("properties").is_some());
            (s, doc)
        })
        .collect();
    let multi_line = parts
        .iter()
        .any(|(p, doc)| p.contains('\n') || doc.is_some());
    if !multi_line {
        let all: Vec<&str> = parts.iter().map(|(p, _)| p.as_str()).collect();
        out.push_str(&all.join(" | "));
        return;
    }
    let pad = "  ".repeat(indent + 1);
    out.push_str("one of:\n");
    for (i, (part, doc)) in parts.iter().enumerate() {
        out.push_str(&pad);
        out.push_str(if i == 0 { "  " } else { "| " });
        if let Some(doc) = doc {
            out.push_str(&format!("// {}\n{pad}  ", doc.replace('\n', " ")));
        }
        out.push_str(part);
        if i + 1 < parts.len() {
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_struct_is_its_fields_with_their_docs() {
        let schema = json!({"type": "object", "properties": {
            "bugs": {"type": "array", "items": {"type": "string"}, "description": "One sentence per bug found."},
            "severity": {"type": "string", "enum": ["Low", "Medium", "High"], "description": "How bad the worst bug is."}},
            "required": ["bugs", "severity"], "additionalProperties": false,
            "description": "What the model found in the code."});
        assert_eq!(
            shape(&schema),
            "{\n  \"bugs\": [string],  // One sentence per bug found.\n  \"severity\": \"Low\" | \"Medium\" | \"High\"  // How bad the worst bug is.\n}"
        );
    }

    #[test]
    fn ranges_options_and_lengths_and_a_long_object_a_field_per_line() {
        let schema = json!({"type": "object", "properties": {
            "value": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 5}, {"type": "null"}]},
            "why": {"type": "string", "maxLength": 200},
            "n": {"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX},
            "tag": {"type": "string", "pattern": "^<result_of_[0-9]+>$"}},
            "required": ["value", "why", "n"]});
        assert_eq!(
            shape(&schema),
            "{\n  \"value\": integer from 1 to 5 | null,\n  \"why\": string (at most 200 characters),\n  \"n\": integer,\n  \"tag\"?: string matching /^<result_of_[0-9]+>$/\n}"
        );
        assert_eq!(
            shape(
                &json!({"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]})
            ),
            "{\"value\": string}"
        );
    }

    #[test]
    fn alternatives_of_objects_are_listed_with_their_docs() {
        let schema = json!({"type": "array", "items": {"anyOf": [
            {"type": "object", "properties": {"name": {"const": "add"}}, "required": ["name"], "description": "Adds."},
            {"type": "object", "properties": {"name": {"type": "string", "enum": ["report"]}}, "required": ["name"]}]}});
        assert_eq!(
            shape(&schema),
            "[one of:\n    // Adds.\n    {\"name\": \"add\"}\n  | {\"name\": \"report\"}]"
        );
    }

    #[test]
    fn a_keyword_without_a_short_form_is_written_as_json() {
        assert_eq!(
            shape(&json!({"not": {"type": "null"}})),
            "{\"not\":{\"type\":\"null\"}}"
        );
        assert_eq!(shape(&json!({})), "any JSON value");
        assert_eq!(shape(&json!({"type": ["string", "null"]})), "string | null");
    }
}
