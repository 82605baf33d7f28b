//! One schema emitter per target. The portable schema (see the parent module) says
//! everything sap knows about an answer's shape; each server enforces a different part
//! of JSON Schema, and some reject a keyword they do not know. [`emit`] rewrites the
//! portable schema into the target's dialect, keeping only what that target enforces,
//! and lists the constraints it had to leave out ([`Gap`]s): those are still checked
//! when the answer comes back, and `sapc check --target` warns about them at the call
//! site.
//!
//! | target | dialect | constraints it cannot carry |
//! |---|---|---|
//! | `openai` | strict `json_schema` | string lengths |
//! | `anthropic` | strict tool input | numeric ranges, lengths, item counts |
//! | `llamacpp` | llama.cpp's JSON-Schema-to-grammar subset | ranges of non-integers |
//! | `ollama` | `format` (llama.cpp's converter) | as `llamacpp` |
//! | `gemini` | `responseSchema` (an OpenAPI subset) | integer enums, `const`, recursion by `$ref` |
//!
//! For grammar-constrained targets (llama.cpp, Ollama, and the strict dialect as sent to
//! any OpenAI-compatible server other than OpenAI's) a list is capped at [`LIST_CAP`] elements ([`NESTED_LIST_CAP`]
//! inside another list): a small model can keep adding elements until the output limit
//! and never write the fields after the list.
//!
//! A `select` becomes what the target can constrain: for llama.cpp and Ollama a
//! top-level `anyOf` of closed objects, each tagged with a `const` option number (the
//! answer reader takes it with or without the `choice` wrapper); for Gemini, which
//! chooses by function calling (see `provider::gemini`), the `anyOf` of each clause's
//! arguments, in order.

use serde_json::{Map, Value as JsonValue, json};

use super::type_name;

/// A server dialect of JSON Schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    OpenAi,
    /// An OpenAI-compatible server that is not OpenAI's (vLLM, llama-server or
    /// llama-cpp-python behind `--provider openai`, LM Studio): the strict dialect, which
    /// they all take, with lists capped as for `llamacpp`, since they decode by grammar.
    Compatible,
    Anthropic,
    LlamaCpp,
    Ollama,
    Gemini,
}

/// A constraint of the portable schema the target's dialect leaves out. The answer is
/// still validated against it, and re-asked when it does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Where in the answer: `value`, `items[].price`, … (empty for the whole answer).
    pub path: String,
    /// What is left out, as prose: "the `i32` range".
    pub what: String,
}

/// The schema to send, and what it leaves out.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    pub schema: JsonValue,
    pub gaps: Vec<Gap>,
}

/// The most elements a list may have where decoding follows a grammar (llama.cpp,
/// Ollama), and a list inside a list.
pub const LIST_CAP: u64 = 64;
pub const NESTED_LIST_CAP: u64 = 16;

const BOUNDS: [&str; 4] = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
const LENGTHS: [&str; 2] = ["minLength", "maxLength"];
const COUNTS: [&str; 2] = ["minItems", "maxItems"];

impl Target {
    pub const ALL: [Target; 5] = [
        Target::OpenAi,
        Target::Anthropic,
        Target::LlamaCpp,
        Target::Ollama,
        Target::Gemini,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::OpenAi => "openai",
            Target::Compatible => "openai-compatible",
            Target::Anthropic => "anthropic",
            Target::LlamaCpp => "llamacpp",
            Target::Ollama => "ollama",
            Target::Gemini => "gemini",
        }
    }

    pub fn parse(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether the target enforces `keyword` on a value of JSON type `ty`.
    fn enforces(self, keyword: &str, ty: &str) -> bool {
        let bound = BOUNDS.contains(&keyword);
        let length = LENGTHS.contains(&keyword) || keyword == "pattern";
        let count = COUNTS.contains(&keyword);
        match self {
            Target::OpenAi | Target::Compatible => bound || count || keyword == "pattern",
            Target::Anthropic => false,
            // llama.cpp's grammar converter bounds integers only.
            Target::LlamaCpp | Target::Ollama => (bound && ty == "integer") || length || count,
            Target::Gemini => bound || length || count,
        }
    }
}

/// The portable schema in `target`'s dialect.
pub fn emit(portable: &JsonValue, target: Target) -> Emitted {
    let mut gaps = Vec::new();
    let schema = match (target, select_branches(portable)) {
        (Target::LlamaCpp | Target::Ollama, Some(branches)) => {
            let branches = branches
                .iter()
                .map(|b| rewrite(&tag_as_const(b), target, "choice", &mut gaps))
                .collect();
            json!({ "anyOf": JsonValue::Array(branches) })
        }
        // Gemini chooses by function calling: one declaration per clause, whose
        // parameters are that clause's arguments (the option is the function's name).
        (Target::Gemini, Some(branches)) => {
            let branches = branches
                .iter()
                .map(|b| {
                    let arguments = b
                        .pointer("/properties/arguments")
                        .unwrap_or(&JsonValue::Null);
                    rewrite(arguments, target, "arguments", &mut gaps)
                })
                .collect();
            json!({ "anyOf": JsonValue::Array(branches) })
        }
        _ => rewrite(portable, target, "", &mut gaps),
    };
    let mut seen = Vec::new();
    gaps.retain(|g| {
        let new = !seen.contains(g);
        if new {
            seen.push(g.clone());
        }
        new
    });
    Emitted { schema, gaps }
}

/// The schema as shown in a prompt, to a model nothing constrains: the bounds every
/// `i32` carries are noise there (the answer is validated against them anyway).
pub fn for_prompt(portable: &JsonValue) -> JsonValue {
    let mut gaps = Vec::new();
    rewrite(portable, Target::Anthropic, "", &mut gaps)
}

/// The branches of a `select`'s schema (`{"choice": {"anyOf": [...]}}`).
pub fn select_branches(schema: &JsonValue) -> Option<&Vec<JsonValue>> {
    let properties = schema.get("properties")?.as_object()?;
    if properties.len() != 1 {
        return None;
    }
    properties.get("choice")?.get("anyOf")?.as_array()
}

/// `"option": {"enum": [i]}` as `"option": {"const": i}`, the tag llama.cpp matches.
fn tag_as_const(branch: &JsonValue) -> JsonValue {
    let mut branch = branch.clone();
    if let Some(option) = branch.pointer_mut("/properties/option")
        && let Some(i) = option.get("enum").and_then(|e| e.get(0)).cloned()
    {
        *option = json!({ "const": i });
    }
    branch
}

fn is_i32_range(map: &Map<String, JsonValue>) -> bool {
    map.get("minimum").and_then(JsonValue::as_i64) == Some(i32::MIN.into())
        && map.get("maximum").and_then(JsonValue::as_i64) == Some(i32::MAX.into())
}

fn join(path: &str, part: &str) -> String {
    if path.is_empty() {
        part.to_owned()
    } else if part.starts_with('[') {
        format!("{path}{part}")
    } else {
        format!("{path}.{part}")
    }
}

fn rewrite(schema: &JsonValue, target: Target, path: &str, gaps: &mut Vec<Gap>) -> JsonValue {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let ty = type_name(map).to_owned();
    let mut out = Map::new();
    let mut dropped_range = false;
    for (key, value) in map {
        let constraint = BOUNDS.contains(&key.as_str())
            || LENGTHS.contains(&key.as_str())
            || COUNTS.contains(&key.as_str())
            || key == "pattern";
        if constraint && !target.enforces(key, &ty) {
            // Lengths are sap's own bounds on short texts (a decision's reason): a
            // target that cannot carry them loses nothing the program relies on.
            if BOUNDS.contains(&key.as_str()) {
                dropped_range = true;
            } else if key != "maxLength" {
                gaps.push(Gap {
                    path: path.to_owned(),
                    what: format!("`{key}`"),
                });
            }
            continue;
        }
        let value = match key.as_str() {
            "properties" => match value.as_object() {
                Some(props) => JsonValue::Object(
                    props
                        .iter()
                        .map(|(k, v)| (k.clone(), rewrite(v, target, &join(path, k), gaps)))
                        .collect(),
                ),
                None => value.clone(),
            },
            "items" => rewrite(value, target, &join(path, "[]"), gaps),
            "anyOf" | "oneOf" => match value.as_array() {
                Some(branches) => JsonValue::Array(
                    branches
                        .iter()
                        .map(|b| rewrite(b, target, path, gaps))
                        .collect(),
                ),
                None => value.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if dropped_range {
        gaps.push(Gap {
            path: path.to_owned(),
            what: if is_i32_range(map) {
                "the `i32` range".to_owned()
            } else {
                "the number's range".to_owned()
            },
        });
    }
    if ty == "object" && !map.contains_key("properties") {
        gaps.push(Gap {
            path: path.to_owned(),
            what: format!(
                "the shape of {} nested in itself (described by name only)",
                map.get("description")
                    .and_then(JsonValue::as_str)
                    .unwrap_or("a recursive type")
            ),
        });
    }
    // Grammar-constrained decoding follows the schema token by token, and a small model
    // can keep adding list elements until the output limit, never reaching the fields
    // after the list: a cap makes it finish the answer.
    if matches!(
        target,
        Target::LlamaCpp | Target::Ollama | Target::Compatible
    ) && ty == "array"
        && !out.contains_key("maxItems")
    {
        let most = if path.contains("[]") {
            NESTED_LIST_CAP
        } else {
            LIST_CAP
        };
        out.insert("maxItems".to_owned(), json!(most));
    }
    let mut out = JsonValue::Object(out);
    if target == Target::Gemini {
        out = gemini_dialect(out, path, gaps);
    }
    out
}

/// Gemini's `responseSchema` is an OpenAPI 3.0 subset: `nullable` instead of a `null`
/// type, string enums only, no `additionalProperties` or `const`, and properties are
/// produced in alphabetical order unless `propertyOrdering` says otherwise (sap puts a
/// decision's reason before its answer).
fn gemini_dialect(schema: JsonValue, path: &str, gaps: &mut Vec<Gap>) -> JsonValue {
    let JsonValue::Object(mut map) = schema else {
        return schema;
    };
    if let Some(JsonValue::Array(types)) = map.get("type").cloned() {
        let named: Vec<&JsonValue> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        if let Some(t) = named.first() {
            map.insert("type".to_owned(), (*t).clone());
        }
        if named.len() < types.len() {
            map.insert("nullable".to_owned(), json!(true));
        }
    }
    // `anyOf: [X, {"type": "null"}]` is X, nullable.
    if let Some(JsonValue::Array(branches)) = map.get("anyOf").cloned() {
        let (nulls, rest): (Vec<_>, Vec<_>) = branches
            .into_iter()
            .partition(|b| b.get("type").and_then(JsonValue::as_str) == Some("null"));
        if !nulls.is_empty() && rest.len() == 1 {
            map.remove("anyOf");
            if let JsonValue::Object(inner) = &rest[0] {
                for (k, v) in inner {
                    map.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            map.insert("nullable".to_owned(), json!(true));
        }
    }
    map.remove("additionalProperties");
    if let Some(c) = map.remove("const") {
        match c {
            JsonValue::String(_) => {
                map.insert("enum".to_owned(), json!([c]));
            }
            _ => gaps.push(Gap {
                path: path.to_owned(),
                what: "a non-text `const`".to_owned(),
            }),
        }
    }
    if let Some(values) = map.get("enum").and_then(JsonValue::as_array)
        && !values.iter().all(JsonValue::is_string)
    {
        map.remove("enum");
        gaps.push(Gap {
            path: path.to_owned(),
            what: "an enum of non-text values".to_owned(),
        });
    }
    if let Some(JsonValue::Object(props)) = map.get("properties") {
        let order: Vec<JsonValue> = props.keys().map(|k| json!(k)).collect();
        if props.is_empty() {
            // Gemini refuses an object without properties: the value is JSON text.
            map.remove("properties");
            map.remove("required");
            map.insert("type".to_owned(), json!("string"));
        } else {
            map.insert("propertyOrdering".to_owned(), JsonValue::Array(order));
        }
    } else if map.get("type").and_then(JsonValue::as_str) == Some("object") {
        map.insert("type".to_owned(), json!("string"));
    }
    JsonValue::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ArmDesc, choice_schema, decision_schema, schema_of, value_schema};
    use crate::types::tests::point;
    use crate::types::{ParamDesc, TypeDesc};

    #[test]
    fn openai_keeps_ranges_and_drops_lengths() {
        let e = emit(&decision_schema(), Target::OpenAi);
        assert!(e.schema.pointer("/properties/reason/maxLength").is_none());
        assert!(e.gaps.is_empty(), "{:?}", e.gaps);
        let e = emit(&schema_of(&point()), Target::OpenAi);
        assert_eq!(
            e.schema.pointer("/properties/x/maximum"),
            Some(&json!(i32::MAX))
        );
        assert!(e.gaps.is_empty());
    }

    #[test]
    fn anthropic_names_the_i32_range_it_cannot_carry() {
        let e = emit(&schema_of(&point()), Target::Anthropic);
        assert!(e.schema.pointer("/properties/x/minimum").is_none());
        assert_eq!(
            e.gaps,
            vec![Gap {
                path: "x".into(),
                what: "the `i32` range".into()
            }]
        );
    }

    #[test]
    fn llamacpp_keeps_lengths_and_integer_ranges_but_not_float_ranges() {
        let e = emit(&decision_schema(), Target::LlamaCpp);
        assert_eq!(
            e.schema.pointer("/properties/reason/maxLength"),
            Some(&json!(crate::schema::REASON_LENGTH))
        );
        let float = json!({"type": "number", "minimum": 0.5});
        let e = emit(&float, Target::LlamaCpp);
        assert!(e.schema.get("minimum").is_none());
        assert_eq!(e.gaps[0].what, "the number's range");
    }

    #[test]
    fn a_select_for_llamacpp_is_a_top_level_any_of_tagged_by_const() {
        let arms = vec![
            ArmDesc {
                tool: "search".into(),
                doc: None,
                binding: None,
                params: vec![ParamDesc {
                    name: "query".into(),
                    doc: None,
                    ty: TypeDesc::String,
                }],
            },
            ArmDesc {
                tool: "stop".into(),
                doc: None,
                binding: None,
                params: vec![],
            },
        ];
        let e = emit(&choice_schema(&arms), Target::LlamaCpp);
        let branches = e.schema["anyOf"].as_array().unwrap();
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[1]["properties"]["option"], json!({"const": 1}));
        assert_eq!(branches[0]["additionalProperties"], json!(false));
        // Other targets keep the wrapper.
        assert!(
            emit(&choice_schema(&arms), Target::OpenAi)
                .schema
                .pointer("/properties/choice/anyOf")
                .is_some()
        );
    }

    #[test]
    fn gemini_speaks_openapi() {
        let (schema, _) = value_schema(&TypeDesc::Option(Box::new(point())));
        let e = emit(&schema, Target::Gemini);
        let value = &e.schema["properties"]["value"];
        assert_eq!(value["nullable"], json!(true));
        assert_eq!(value["type"], json!("object"));
        assert!(value.get("anyOf").is_none());
        assert!(value.get("additionalProperties").is_none());
        assert_eq!(value["properties"]["label"]["type"], json!("string"));
        assert_eq!(value["properties"]["label"]["nullable"], json!(true));
        assert_eq!(value["propertyOrdering"], json!(["x", "label"]));
        let e = emit(&decision_schema(), Target::Gemini);
        assert_eq!(e.schema["propertyOrdering"], json!(["reason", "answer"]));
    }

    #[test]
    fn a_recursive_type_is_a_gap_everywhere() {
        let tree = json!({"type": "object", "properties": {"child": {"type": "object", "description": "a Tree"}}});
        for t in Target::ALL {
            let e = emit(&tree, t);
            assert!(
                e.gaps
                    .iter()
                    .any(|g| g.path == "child" && g.what.contains("a Tree")),
                "{t:?}: {:?}",
                e.gaps
            );
        }
    }

    #[test]
    fn grammar_targets_cap_lists() {
        let nested = json!({"type": "object", "properties": {
            "rows": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        }});
        let e = emit(&nested, Target::LlamaCpp);
        assert_eq!(
            e.schema.pointer("/properties/rows/maxItems"),
            Some(&json!(LIST_CAP))
        );
        assert_eq!(
            e.schema.pointer("/properties/rows/items/maxItems"),
            Some(&json!(NESTED_LIST_CAP))
        );
        assert!(e.gaps.is_empty());
        let e = emit(&nested, Target::OpenAi);
        assert!(e.schema.pointer("/properties/rows/maxItems").is_none());
        let e = emit(&nested, Target::Compatible);
        assert_eq!(
            e.schema.pointer("/properties/rows/maxItems"),
            Some(&json!(LIST_CAP))
        );
    }
}
