//! Runtime values of every sap type, and their conversion to and from JSON: decoding the
//! model's answer checks it against the type, including what a provider may not enforce
//! (an `i32` out of range, an enum spelled differently, a missing field).

use std::fmt::Write;
use std::sync::Arc;

use serde_json::Value as JsonValue;

use llm::types::{EnumDesc, StructDesc, TypeDesc};

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Unit,
    Bool(bool),
    /// Both `i32` and `i64`; the type says which range applies.
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    List(Arc<Vec<Value>>),
    /// `None` or `Some(value)`.
    Option(Option<Box<Value>>),
    Struct(Arc<StructValue>),
    Enum {
        ty: Arc<EnumDesc>,
        variant: u32,
    },
    Json(Arc<JsonValue>),
    /// A function or extern used as a value.
    Tool(ToolRef),
}

/// What a `Tool` value refers to: the name the model sees, and for a sap function its
/// index in the program, so two modules' functions of the same name stay apart
/// (externs are found by name).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRef {
    pub name: Arc<str>,
    pub function: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StructValue {
    pub ty: Arc<StructDesc>,
    /// In declaration order.
    pub fields: Vec<Value>,
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Arc::from(s))
    }

    /// Writes the value as JSON: struct fields in declaration order, so rendering is
    /// byte-stable and reads in the order the program declares.
    pub fn write_json(&self, out: &mut String) {
        match self {
            Value::Unit => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Float(x) => match serde_json::Number::from_f64(*x) {
                Some(n) => {
                    let _ = write!(out, "{n}");
                }
                None => out.push_str("null"),
            },
            Value::Str(s) => write_json_string(s, out),
            Value::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Value::Option(None) => out.push_str("null"),
            Value::Option(Some(v)) => v.write_json(out),
            Value::Struct(s) => {
                out.push('{');
                for (i, (field, value)) in s.ty.fields.iter().zip(&s.fields).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_string(&field.name, out);
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
            Value::Enum { ty, variant } => {
                write_json_string(&ty.variants[*variant as usize].name, out);
            }
            Value::Json(j) => out.push_str(&j.to_string()),
            Value::Tool(tool) => write_json_string(&tool.name, out),
        }
    }

    pub fn to_json_string(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    pub fn to_json(&self) -> JsonValue {
        serde_json::from_str(&self.to_json_string()).unwrap_or(JsonValue::Null)
    }
}

fn write_json_string(s: &str, out: &mut String) {
    // serde_json's escaping is the reference; a `String` cannot fail to serialize.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// Why an answer does not fit its type, with the JSON path to the problem.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "at `{}`: {}", self.path, self.message)
        }
    }
}

fn err(path: &str, message: impl Into<String>) -> DecodeError {
    DecodeError {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn kind(json: &JsonValue) -> &'static str {
    match json {
        JsonValue::Null => "null",
        JsonValue::Bool(_) => "a Boolean",
        JsonValue::Number(_) => "a number",
        JsonValue::String(_) => "a string",
        JsonValue::Array(_) => "an array",
        JsonValue::Object(_) => "an object",
    }
}

/// Decodes `json` as a value of `ty`. Strict: no coercions (repairs happen before).
pub fn decode(ty: &TypeDesc, json: &JsonValue) -> Result<Value, DecodeError> {
    decode_at(ty, json, "")
}

fn decode_at(ty: &TypeDesc, json: &JsonValue, path: &str) -> Result<Value, DecodeError> {
    match ty {
        TypeDesc::Unit => match json {
            JsonValue::Null => Ok(Value::Unit),
            other => Err(err(path, format!("expected null, found {}", kind(other)))),
        },
        TypeDesc::Bool => match json {
            JsonValue::Bool(b) => Ok(Value::Bool(*b)),
            other => Err(err(
                path,
                format!("expected a Boolean, found {}", kind(other)),
            )),
        },
        TypeDesc::I32 | TypeDesc::I64 => {
            let n = match json {
                JsonValue::Number(n) => n,
                other => {
                    return Err(err(
                        path,
                        format!("expected an integer, found {}", kind(other)),
                    ));
                }
            };
            let value = n.as_i64().or_else(|| {
                // `3.0` is an integer written as a float; accept it exactly.
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            });
            let Some(value) = value else {
                return Err(err(path, format!("expected an integer, found {n}")));
            };
            if matches!(ty, TypeDesc::I32) && i32::try_from(value).is_err() {
                return Err(err(path, format!("{value} is outside the range of i32")));
            }
            Ok(Value::Int(value))
        }
        TypeDesc::F64 => match json.as_f64() {
            Some(f) => Ok(Value::Float(f)),
            None => Err(err(
                path,
                format!("expected a number, found {}", kind(json)),
            )),
        },
        TypeDesc::String => match json {
            JsonValue::String(s) => Ok(Value::str(s)),
            other => Err(err(
                path,
                format!("expected a string, found {}", kind(other)),
            )),
        },
        // In schemas a `Json` value travels as JSON text (see `schema.rs`).
        TypeDesc::Json => match json {
            JsonValue::String(s) => Ok(Value::Json(Arc::new(
                serde_json::from_str(s).unwrap_or_else(|_| json.clone()),
            ))),
            other => Ok(Value::Json(Arc::new(other.clone()))),
        },
        TypeDesc::List(elem) => match json {
            JsonValue::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    out.push(decode_at(elem, item, &format!("{path}[{i}]"))?);
                }
                Ok(Value::List(Arc::new(out)))
            }
            other => Err(err(
                path,
                format!("expected an array, found {}", kind(other)),
            )),
        },
        TypeDesc::Option(inner) => match json {
            JsonValue::Null => Ok(Value::Option(None)),
            other => Ok(Value::Option(Some(Box::new(decode_at(
                inner, other, path,
            )?)))),
        },
        TypeDesc::Struct(desc) => {
            let JsonValue::Object(map) = json else {
                return Err(err(
                    path,
                    format!("expected an object ({}), found {}", desc.name, kind(json)),
                ));
            };
            let mut fields = Vec::with_capacity(desc.fields.len());
            for field in &desc.fields {
                let field_path = if path.is_empty() {
                    field.name.clone()
                } else {
                    format!("{path}.{}", field.name)
                };
                match map.get(&field.name) {
                    Some(v) => fields.push(decode_at(&field.ty, v, &field_path)?),
                    // A missing optional field is `None`; any other is an error.
                    None if matches!(field.ty, TypeDesc::Option(_)) => {
                        fields.push(Value::Option(None))
                    }
                    None => return Err(err(&field_path, "this required field is missing")),
                }
            }
            if let Some(extra) = map
                .keys()
                .find(|k| !desc.fields.iter().any(|f| &f.name == *k))
            {
                return Err(err(
                    path,
                    format!("unexpected field `{extra}` in {}", desc.name),
                ));
            }
            Ok(Value::Struct(Arc::new(StructValue {
                ty: desc.clone(),
                fields,
            })))
        }
        TypeDesc::Enum(desc) => {
            let JsonValue::String(s) = json else {
                return Err(err(
                    path,
                    format!("expected one of {}, found {}", variants(desc), kind(json)),
                ));
            };
            match desc.variants.iter().position(|v| v.name == *s) {
                Some(i) => Ok(Value::Enum {
                    ty: desc.clone(),
                    variant: i as u32,
                }),
                None => Err(err(path, format!("`{s}` is not one of {}", variants(desc)))),
            }
        }
    }
}

fn variants(desc: &EnumDesc) -> String {
    let names: Vec<String> = desc
        .variants
        .iter()
        .map(|v| format!("\"{}\"", v.name))
        .collect();
    names.join(", ")
}
