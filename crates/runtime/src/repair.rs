//! Safe repairs of the model's answers before they are validated: the answer's JSON is
//! found (code fences, prose around it), a scalar is wrapped or unwrapped to the shape
//! the schema asks for, and values spelled as strings become what the type says
//! (`"true"` → `true`, `"42"` → `42`, `"high"` → `"High"`, one value where a list is
//! due → a list of it). JSON written loosely or cut short is read by `lenient`. A
//! repair never invents data: each one reads what the model wrote in another spelling.

use serde_json::{Map, Value as JsonValue};

use llm::types::TypeDesc;

/// Finds the JSON in an answer. Returns it and the names of the repairs applied.
pub fn extract_json(text: &str) -> Option<(JsonValue, Vec<&'static str>)> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Some((v, Vec::new()));
    }
    let mut repairs = Vec::new();
    let mut body = trimmed;
    if let Some(inner) = strip_fences(trimmed) {
        repairs.push("code fence removed");
        body = inner;
        if let Ok(v) = serde_json::from_str(body.trim()) {
            return Some((v, repairs));
        }
    }
    // The first JSON object or array in the text, read leniently (single quotes, bare
    // keys, trailing commas, comments, an answer cut short: see `lenient`). Each try
    // reads from one bracket and stops at the end of its value or its first misstep,
    // so a bracket in the prose before the JSON costs little.
    for (start, c) in body.char_indices() {
        if c != '{' && c != '[' {
            continue;
        }
        if let Some((v, lenient, end)) = crate::lenient::parse_prefix(&body[start..]) {
            if !body[..start].trim().is_empty() || !body[start + end..].trim().is_empty() {
                repairs.push("prose around the JSON removed");
            }
            repairs.extend(lenient);
            return Some((v, repairs));
        }
    }
    // A bare scalar, as in `true` or `42` with a trailing period.
    let word = body.trim().trim_end_matches('.').trim();
    if let Ok(v) = serde_json::from_str::<JsonValue>(word)
        && !v.is_object()
        && !v.is_array()
    {
        repairs.push("prose around the JSON removed");
        return Some((v, repairs));
    }
    None
}

fn strip_fences(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    // Skip a language tag such as `json`.
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(&body[..end])
}

/// Puts the answer in the shape of the schema: `{"value": …}` around a scalar when the
/// schema wraps it, and removes a `{"value": …}` the schema does not ask for.
pub fn fix_wrapping(json: JsonValue, wrapped: bool, repairs: &mut Vec<&'static str>) -> JsonValue {
    match (wrapped, json) {
        (true, JsonValue::Object(map)) if map.len() == 1 && map.contains_key("value") => {
            JsonValue::Object(map)
        }
        (true, other) => {
            repairs.push("scalar wrapped in {\"value\": …}");
            let mut map = Map::new();
            map.insert("value".to_owned(), other);
            JsonValue::Object(map)
        }
        (false, JsonValue::Object(mut map))
            if map.len() == 1 && map.get("value").is_some_and(JsonValue::is_object) =>
        {
            repairs.push("{\"value\": …} unwrapped");
            map.remove("value").unwrap_or(JsonValue::Null)
        }
        (false, other) => other,
    }
}

/// Respells values the type reads differently. Walks the type and the answer together.
pub fn coerce(ty: &TypeDesc, json: JsonValue, repairs: &mut Vec<&'static str>) -> JsonValue {
    match (ty, json) {
        (TypeDesc::Bool, JsonValue::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => {
                repairs.push("Boolean written as a string");
                JsonValue::Bool(true)
            }
            "false" | "no" => {
                repairs.push("Boolean written as a string");
                JsonValue::Bool(false)
            }
            _ => JsonValue::String(s),
        },
        (TypeDesc::I32 | TypeDesc::I64, JsonValue::String(s)) => match s.trim().parse::<i64>() {
            Ok(n) => {
                repairs.push("number written as a string");
                JsonValue::from(n)
            }
            Err(_) => JsonValue::String(s),
        },
        (TypeDesc::F64, JsonValue::String(s)) => match s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            Some(n) => {
                repairs.push("number written as a string");
                JsonValue::Number(n)
            }
            None => JsonValue::String(s),
        },
        (TypeDesc::Enum(desc), JsonValue::String(s)) => {
            if desc.variants.iter().any(|v| v.name == s) {
                return JsonValue::String(s);
            }
            let wanted = normalize(&s);
            match desc.variants.iter().find(|v| normalize(&v.name) == wanted) {
                Some(v) => {
                    repairs.push("enum variant spelled differently");
                    JsonValue::String(v.name.clone())
                }
                None => JsonValue::String(s),
            }
        }
        (TypeDesc::List(elem), JsonValue::Array(items)) => JsonValue::Array(
            items
                .into_iter()
                .map(|i| coerce(elem, i, repairs))
                .collect(),
        ),
        // One value where a list is due is a list of that one value.
        (TypeDesc::List(elem), json) if !json.is_null() => {
            repairs.push("single value made a list");
            JsonValue::Array(vec![coerce(elem, json, repairs)])
        }
        (TypeDesc::Option(inner), json) if !json.is_null() => coerce(inner, json, repairs),
        (TypeDesc::Struct(desc), JsonValue::Object(mut map)) => {
            for field in &desc.fields {
                match map.remove(&field.name) {
                    Some(v) => {
                        let v = coerce(&field.ty, v, repairs);
                        map.insert(field.name.clone(), v);
                    }
                    // An option the answer leaves out is `None` (the schema lists every
                    // field as required, as strict servers want, with `null` allowed).
                    None if matches!(field.ty, TypeDesc::Option(_)) => {
                        repairs.push("missing option field read as None");
                        map.insert(field.name.clone(), JsonValue::Null);
                    }
                    None => {}
                }
            }
            JsonValue::Object(map)
        }
        (_, json) => json,
    }
}

/// `"high"`, `"HIGH"`, `" High "` and `"high_priority"` all read as `HighPriority`'s
/// spelling once case, spaces, `_` and `-` are ignored.
fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_json_in_fences_and_prose() {
        let (v, r) = extract_json("```json\n{\"a\": 1}\n```").unwrap();
        assert_eq!(v, serde_json::json!({"a": 1}));
        assert_eq!(r, ["code fence removed"]);
        let (v, r) = extract_json("Sure! Here it is: {\"a\": [1, 2]} Hope that helps.").unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, 2]}));
        assert_eq!(r, ["prose around the JSON removed"]);
        assert_eq!(extract_json("true.").unwrap().0, JsonValue::Bool(true));
        assert!(extract_json("I cannot answer that").is_none());
        let (v, r) =
            extract_json("Here you go:\n{bugs: ['b may be 0',], severity: 'High'}").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"bugs": ["b may be 0"], "severity": "High"})
        );
        assert!(r.contains(&"prose around the JSON removed") && r.contains(&"bare keys quoted"));
    }

    #[test]
    fn a_missing_option_field_is_none() {
        use llm::types::{FieldDesc, StructDesc};
        let ty = TypeDesc::Struct(std::sync::Arc::new(StructDesc {
            name: "Person".to_owned(),
            doc: None,
            fields: vec![
                FieldDesc {
                    name: "name".to_owned(),
                    ty: TypeDesc::String,
                    doc: None,
                },
                FieldDesc {
                    name: "nickname".to_owned(),
                    ty: TypeDesc::Option(Box::new(TypeDesc::String)),
                    doc: None,
                },
            ],
        }));
        let mut repairs = Vec::new();
        let v = coerce(&ty, serde_json::json!({"name": "Al"}), &mut repairs);
        assert_eq!(v, serde_json::json!({"name": "Al", "nickname": null}));
        assert_eq!(repairs, ["missing option field read as None"]);
        // A missing field that is not an option stays missing, for the validator.
        let mut repairs = Vec::new();
        let v = coerce(&ty, serde_json::json!({"nickname": "A"}), &mut repairs);
        assert_eq!(v, serde_json::json!({"nickname": "A"}));
        assert!(repairs.is_empty());
    }

    #[test]
    fn one_value_where_a_list_is_due() {
        let mut repairs = Vec::new();
        let ty = TypeDesc::List(Box::new(TypeDesc::I64));
        let v = coerce(&ty, serde_json::json!("7"), &mut repairs);
        assert_eq!(v, serde_json::json!([7]));
        assert_eq!(
            repairs,
            ["single value made a list", "number written as a string"]
        );
    }
}
