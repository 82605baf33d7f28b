//! Reading an answer: safe repairs, validation against the schema, decoding by the
//! type, and the messages a wrong answer is sent back with.

use std::sync::Arc;

use serde_json::{Map, Value as JsonValue, json};

use super::{AnswerShape, CallKind, Interpreted, Runtime, WRAPPER};
use crate::repair;
use crate::value::{self, DecodeError, Value};
use llm::schema;
use llm::types::TypeDesc;

impl Runtime {
    pub(super) fn validator(
        &self,
        schema: &JsonValue,
    ) -> Result<Arc<jsonschema::Validator>, String> {
        let key = schema.to_string();
        let mut cache = self.validators.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache.get(&key) {
            return Ok(v.clone());
        }
        let v = Arc::new(
            jsonschema::validator_for(schema).map_err(|e| format!("invalid schema: {e}"))?,
        );
        cache.insert(key, v.clone());
        Ok(v)
    }

    /// Repairs, validates and decodes one answer. The error says what to fix.
    pub fn interpret(&self, text: &str, shape: &AnswerShape) -> Result<Interpreted, String> {
        let Some((json, mut repairs)) = repair::extract_json(text) else {
            return Err("the answer is not JSON".to_owned());
        };
        let json = match shape.kind {
            CallKind::Produce => {
                let wrapped = matches!(&shape.root, TypeDesc::Struct(d) if d.name == WRAPPER);
                let json = repair::fix_wrapping(json, wrapped, &mut repairs);
                repair::coerce(&shape.root, json, &mut repairs)
            }
            CallKind::Decide => {
                // A bare `true` is a decision without its reason; a reason longer than
                // asked for is cut (the program never reads it).
                let json = match json {
                    JsonValue::Bool(b) => {
                        repairs.push("bare Boolean wrapped as a decision");
                        json!({ "reason": "", "answer": b })
                    }
                    JsonValue::Object(mut map) => {
                        if let Some(JsonValue::String(reason)) = map.get_mut("reason")
                            && reason.chars().count() > schema::REASON_LENGTH as usize
                        {
                            *reason = reason
                                .chars()
                                .take(schema::REASON_LENGTH as usize)
                                .collect();
                            repairs.push("decision reason cut to its length");
                        }
                        JsonValue::Object(map)
                    }
                    other => other,
                };
                repair::coerce(&shape.root, json, &mut repairs)
            }
            CallKind::FillArgs => repair::coerce(&shape.root, json, &mut repairs),
            CallKind::Choose => coerce_choice(json, &shape.arms, &mut repairs),
        };
        let validator = self.validator(&shape.schema)?;
        if let Some(error) = validator.iter_errors(&json).next() {
            // "not valid under any of the schemas listed in 'anyOf'" says nothing a model
            // can act on: for a `select`, what is wrong with the clause it chose.
            if shape.kind == CallKind::Choose
                && let Some(precise) = self.choice_error(&json, shape)
            {
                return Err(precise);
            }
            let at = error.instance_path().to_string();
            return Err(if at.is_empty() {
                format!("{error}")
            } else {
                format!("at `{at}`: {error}")
            });
        }
        if shape.kind == CallKind::Choose {
            let option = json
                .pointer("/choice/option")
                .and_then(JsonValue::as_u64)
                .unwrap_or(0) as usize;
            let args = json
                .pointer("/choice/arguments")
                .cloned()
                .unwrap_or(JsonValue::Null);
            let ty = shape
                .arms
                .get(option)
                .ok_or_else(|| format!("there is no option {option}"))?;
            let value = value::decode(ty, &args).map_err(|e| prefix("choice.arguments", e))?;
            return Ok(Interpreted {
                value,
                arm: Some(option),
                repairs,
            });
        }
        let value = value::decode(&shape.root, &json).map_err(|e| e.to_string())?;
        // A wrapped scalar is the value inside `{"value": …}`.
        let value = match (shape.kind, value) {
            (CallKind::Produce, Value::Struct(s)) if s.ty.name == WRAPPER => s.fields[0].clone(),
            (_, value) => value,
        };
        Ok(Interpreted {
            value,
            arm: None,
            repairs,
        })
    }

    /// The first defect of a `select` answer against the clause it names.
    fn choice_error(&self, json: &JsonValue, shape: &AnswerShape) -> Option<String> {
        let choice = json.get("choice")?;
        let option = choice.get("option")?.as_u64()?;
        let branch = shape
            .schema
            .pointer(&format!("/properties/choice/anyOf/{option}"))?;
        let validator = self.validator(branch).ok()?;
        let error = validator.iter_errors(choice).next()?;
        Some(format!("at `/choice{}`: {error}", error.instance_path()))
    }
}

fn prefix(path: &str, e: DecodeError) -> String {
    if e.path.is_empty() {
        format!("at `{path}`: {}", e.message)
    } else {
        format!("at `{path}.{}`: {}", e.path, e.message)
    }
}

/// A wrong answer as it is sent back with its correction: a long one (a model that ran
/// on) is cut, so the re-ask stays within the model's context window.
pub(super) fn echoed(raw: &str) -> String {
    crate::error::shorten(raw, 1500)
}

/// Repairs in a `select` answer: `option` written as a string, and the chosen arm's
/// arguments respelled by their types.
fn coerce_choice(json: JsonValue, arms: &[TypeDesc], repairs: &mut Vec<&'static str>) -> JsonValue {
    let JsonValue::Object(mut root) = json else {
        return json;
    };
    // The targets that constrain a `select` as a top-level `anyOf` (llama.cpp) answer
    // without the `choice` wrapper: the shape they were asked for, not a repair.
    if !root.contains_key("choice") && root.contains_key("option") {
        root = Map::from_iter([("choice".to_owned(), JsonValue::Object(root))]);
    }
    let Some(JsonValue::Object(mut choice)) = root.remove("choice") else {
        return JsonValue::Object(root);
    };
    if let Some(JsonValue::String(s)) = choice.get("option")
        && let Ok(n) = s.trim().parse::<u64>()
    {
        repairs.push("number written as a string");
        choice.insert("option".to_owned(), json!(n));
    }
    let option = choice
        .get("option")
        .and_then(JsonValue::as_u64)
        .unwrap_or(u64::MAX) as usize;
    if let (Some(ty), Some(args)) = (arms.get(option), choice.remove("arguments")) {
        choice.insert("arguments".to_owned(), repair::coerce(ty, args, repairs));
    }
    root.insert("choice".to_owned(), JsonValue::Object(choice));
    JsonValue::Object(root)
}
