//! A tool's arguments from sap values, and its result as a sap value of the declared type.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value as JsonValue};

use llm::types::{ParamDesc, TypeDesc};
use runtime::value::{Value, decode};

/// The arguments object: one member per parameter; a `None` is left out, as MCP servers
/// expect of an optional argument. A single `arguments: Json` parameter is the object.
pub fn arguments(params: &[ParamDesc], args: &[Value]) -> Result<Map<String, JsonValue>, String> {
    if let ([p], [Value::Json(j)]) = (params, args)
        && p.name == "arguments"
        && p.ty == TypeDesc::Json
    {
        return match j.as_ref() {
            JsonValue::Object(map) => Ok(map.clone()),
            other => Err(format!("the arguments must be a JSON object, not {other}")),
        };
    }
    let mut out = Map::new();
    for (p, v) in params.iter().zip(args) {
        if matches!(v, Value::Option(None)) {
            continue;
        }
        out.insert(p.name.clone(), v.to_json());
    }
    Ok(out)
}

/// The text of a result's content: its text blocks, one per line; other kinds of content
/// are named.
pub fn text(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => parts.push(format!("[image: {}]", i.mime_type)),
            ContentBlock::Audio(a) => parts.push(format!("[audio: {}]", a.mime_type)),
            ContentBlock::Resource(_) => parts.push("[embedded resource]".to_owned()),
            ContentBlock::ResourceLink(r) => parts.push(format!("[resource: {}]", r.uri)),
            _ => parts.push("[content]".to_owned()),
        }
    }
    parts.join("\n")
}

/// The result as a value of `ret`: an `isError` result is an error with the tool's
/// message; `String` is the text content (or the structured content as JSON when there
/// is no text); other types decode `structuredContent`, or else the text as JSON.
pub fn value(result: &CallToolResult, ret: &TypeDesc) -> Result<Value, String> {
    if result.is_error == Some(true) {
        let message = text(result);
        return Err(if message.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            format!("the tool reported an error: {message}")
        });
    }
    let structured = result.structured_content.as_ref();
    match ret {
        TypeDesc::Unit => Ok(Value::Unit),
        TypeDesc::String => {
            let t = text(result);
            Ok(match structured {
                Some(s) if t.is_empty() => Value::str(&s.to_string()),
                _ => Value::str(&t),
            })
        }
        TypeDesc::Json => Ok(Value::Json(std::sync::Arc::new(match structured {
            Some(s) => s.clone(),
            None => {
                let t = text(result);
                serde_json::from_str(&t).unwrap_or(JsonValue::String(t))
            }
        }))),
        _ => {
            let json = match structured {
                Some(s) => s.clone(),
                None => {
                    let t = text(result);
                    serde_json::from_str(&t).map_err(|_| {
                        format!(
                            "the tool returned no structured content and its text is not JSON, so it cannot be a `{ret}`: {}",
                            shorten(&t)
                        )
                    })?
                }
            };
            // A server that wraps a non-object result as `{"result": …}` (as FastMCP
            // does) gives the value inside.
            let json = match (&json, ret) {
                (JsonValue::Object(m), t)
                    if !t.is_object() && m.len() == 1 && m.contains_key("result") =>
                {
                    m["result"].clone()
                }
                _ => json,
            };
            decode(ret, &json).map_err(|e| {
                format!(
                    "the result does not fit the declared `{ret}`: {e}; it was {}",
                    shorten(&json.to_string())
                )
            })
        }
    }
}

fn shorten(text: &str) -> String {
    runtime::error::shorten(text, 120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock as Content;
    use serde_json::json;

    use llm::types::{FieldDesc, StructDesc};
    use std::sync::Arc;

    /// `struct Point { x: i32, label: Option<String> }`.
    fn point() -> TypeDesc {
        let field = |name: &str, ty| FieldDesc {
            name: name.into(),
            doc: None,
            ty,
        };
        TypeDesc::Struct(Arc::new(StructDesc {
            name: "Point".into(),
            doc: None,
            fields: vec![
                field("x", TypeDesc::I32),
                field("label", TypeDesc::Option(Box::new(TypeDesc::String))),
            ],
        }))
    }

    #[test]
    fn results_decode_into_the_declared_type() {
        let mut r = CallToolResult::success(vec![Content::text("{\"x\": 1}")]);
        r.structured_content = Some(json!({"x": 3, "label": "a"}));
        let v = value(&r, &point()).unwrap();
        assert_eq!(v.to_json(), json!({"x": 3, "label": "a"}));
        // The text is the `String`; without structured content, the text is parsed.
        assert_eq!(
            value(&r, &TypeDesc::String).unwrap(),
            Value::str("{\"x\": 1}")
        );
        r.structured_content = None;
        assert_eq!(
            value(&r, &point()).unwrap().to_json(),
            json!({"x": 1, "label": null})
        );
        // FastMCP's wrapping of a plain result.
        let mut r = CallToolResult::success(vec![Content::text("5.0")]);
        r.structured_content = Some(json!({"result": 5.0}));
        assert_eq!(value(&r, &TypeDesc::F64).unwrap(), Value::Float(5.0));
    }

    #[test]
    fn errors_and_misfits_say_what_came_back() {
        let r = CallToolResult::error(vec![Content::text("no such file")]);
        assert_eq!(
            value(&r, &TypeDesc::String).unwrap_err(),
            "the tool reported an error: no such file"
        );
        let mut r = CallToolResult::success(vec![Content::text("hello")]);
        assert!(value(&r, &point()).unwrap_err().contains("not JSON"));
        r.structured_content = Some(json!({"x": "three"}));
        let e = value(&r, &point()).unwrap_err();
        assert!(e.contains("does not fit the declared `Point`"), "{e}");
    }

    #[test]
    fn a_none_argument_is_left_out() {
        let params = vec![
            ParamDesc {
                name: "a".into(),
                doc: None,
                ty: TypeDesc::F64,
            },
            ParamDesc {
                name: "note".into(),
                doc: None,
                ty: TypeDesc::Option(Box::new(TypeDesc::String)),
            },
        ];
        let args = arguments(&params, &[Value::Float(1.5), Value::Option(None)]).unwrap();
        assert_eq!(JsonValue::Object(args), json!({"a": 1.5}));
    }
}
