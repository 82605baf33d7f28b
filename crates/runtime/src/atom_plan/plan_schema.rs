//! The JSON Schema the model writes a plan against, derived from the offered tools.

use serde_json::{Value as JsonValue, json};

use super::*;
use llm::schema;

/// The JSON Schema of a plan over `tools`: each tool atom names one of the tools and
/// gives its arguments, each a value of the parameter's type or a `<result_of_N>`
/// reference; one final atom reports.
pub fn plan_schema(tools: &[ToolSig]) -> JsonValue {
    let reference = json!({
        "type": "string",
        "pattern": "^<result_of_[0-9]+>$",
        "description": "The result of an earlier atom, by its id.",
    });
    let id = json!({"type": "integer", "description": "A unique number for this atom."});
    let depends = json!({
        "type": "array",
        "items": {"type": "integer"},
        "description": "The ids of the atoms whose results this atom uses.",
    });
    let mut variants: Vec<JsonValue> = tools
        .iter()
        .map(|t| {
            let args: Vec<(String, JsonValue)> = t
                .params
                .iter()
                .map(|p| {
                    let mut s = schema::schema_of(&p.ty);
                    if let (Some(doc), JsonValue::Object(map)) = (&p.doc, &mut s) {
                        map.insert("description".into(), JsonValue::String(doc.clone()));
                    }
                    (p.name.clone(), json!({"anyOf": [s, reference.clone()]}))
                })
                .collect();
            let mut atom = schema::object(vec![
                ("id".into(), id.clone()),
                ("kind".into(), json!({"type": "string", "enum": ["tool"]})),
                ("name".into(), json!({"type": "string", "enum": [t.name]})),
                // What it depends on first: a model that has written `[1]` goes on to
                // write `<result_of_1>` among the arguments (docs/QUALITY.md).
                ("dependsOn".into(), depends.clone()),
                ("input".into(), schema::object(args)),
            ]);
            if let (Some(doc), JsonValue::Object(map)) = (&t.doc, &mut atom) {
                map.insert("description".into(), JsonValue::String(doc.clone()));
            }
            atom
        })
        .collect();
    let mut report = schema::object(vec![
        ("id".into(), id),
        ("kind".into(), json!({"type": "string", "enum": ["final"]})),
        ("name".into(), json!({"type": "string", "enum": ["report"]})),
        ("dependsOn".into(), depends),
    ]);
    if let JsonValue::Object(map) = &mut report {
        map.insert(
            "description".into(),
            "The last atom: reports the result of the atom it depends on.".into(),
        );
    }
    variants.push(report);
    schema::object(vec![(
        "atoms".into(),
        json!({
            "type": "array",
            "items": {"anyOf": variants},
            "description": "The atoms, each one tool call, ending with the final atom.",
        }),
    )])
}
