//! A GBNF grammar (llama.cpp's grammar format) from an answer's schema, for the
//! in-process model (`--provider local`): decoding follows it token by token, so an
//! answer always has the shape its type asks for.
//!
//! The schemas come from sap types (`schema::for_type`: objects with every field
//! required, in declaration order; string enums; nullable unions; integers with the
//! `i32` range; lists; a `select`'s `anyOf` of its clauses) or from a program
//! (`produce_matching`: any JSON Schema). What the generator does not know becomes any
//! JSON value, which validation then checks. The JSON is compact: no whitespace
//! between tokens, so the model spends no tokens on layout and cannot run away in it.

use std::collections::HashMap;

use serde_json::Value as JsonValue;

/// Characters a string may hold when its schema gives no `maxLength`: a bound on a
/// model that repeats itself inside a string.
const DEFAULT_MAX_STRING: u64 = 2000;

/// Elements an array may hold when its schema gives no `maxItems`.
const DEFAULT_MAX_ITEMS: u64 = 64;

/// The grammar for `schema`; its root rule is `root`.
pub fn grammar(schema: &JsonValue) -> String {
    let mut g = Grammar::default();
    let root = g.rule_for(schema);
    let mut out = format!("root ::= {root}\n");
    for (name, body) in &g.rules {
        out.push_str(&format!("{name} ::= {body}\n"));
    }
    out.push_str(BASICS);
    out
}

/// The rules every grammar may use: JSON strings, numbers and any JSON value.
const BASICS: &str = r#"char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
int ::= "-"? ([0-9] | [1-9] [0-9]{1,18})
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?
string ::= "\"" char{0,2000} "\""
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" (string ":" value ("," string ":" value){0,63})? "}"
array ::= "[" (value ("," value){0,63})? "]"
"#;

#[derive(Default)]
struct Grammar {
    /// Rules in the order they were made, by name.
    rules: Vec<(String, String)>,
    /// Each schema's rule, by its JSON text: one rule per distinct schema.
    made: HashMap<String, String>,
}

impl Grammar {
    /// The name of the rule matching `schema`, made if needed.
    fn rule_for(&mut self, schema: &JsonValue) -> String {
        let key = schema.to_string();
        if let Some(name) = self.made.get(&key) {
            return name.clone();
        }
        let name = format!("r{}", self.rules.len());
        self.made.insert(key, name.clone());
        // Reserve the slot: a schema refers to its rule before the body is known only
        // through `made`, which is enough since schemas here are trees.
        self.rules.push((name.clone(), String::new()));
        let index = self.rules.len() - 1;
        let body = self.body(schema);
        self.rules[index].1 = body;
        name
    }

    fn body(&mut self, schema: &JsonValue) -> String {
        let Some(map) = schema.as_object() else {
            // `true` or something else that admits any value.
            return "value".to_owned();
        };
        if let Some(c) = map.get("const") {
            return literal(c);
        }
        if let Some(values) = map.get("enum").and_then(JsonValue::as_array) {
            let alternatives: Vec<String> = values.iter().map(literal).collect();
            return group(&alternatives);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(key).and_then(JsonValue::as_array) {
                let alternatives: Vec<String> = branches.iter().map(|b| self.rule_for(b)).collect();
                return group(&alternatives);
            }
        }
        match map.get("type") {
            Some(JsonValue::Array(types)) => {
                let alternatives: Vec<String> = types
                    .iter()
                    .filter_map(JsonValue::as_str)
                    .map(|t| {
                        let mut one = map.clone();
                        one.insert("type".to_owned(), JsonValue::String(t.to_owned()));
                        self.rule_for(&JsonValue::Object(one))
                    })
                    .collect();
                group(&alternatives)
            }
            Some(JsonValue::String(t)) => self.typed(t, map),
            _ => "value".to_owned(),
        }
    }

    fn typed(&mut self, t: &str, map: &serde_json::Map<String, JsonValue>) -> String {
        let number = |k: &str| map.get(k).and_then(JsonValue::as_u64);
        match t {
            "null" => "\"null\"".to_owned(),
            "boolean" => "(\"true\" | \"false\")".to_owned(),
            "integer" => {
                // Digits enough for the range; the range itself is validated after.
                let bound = |k: &str| map.get(k).and_then(JsonValue::as_i64);
                match (bound("minimum"), bound("maximum")) {
                    (Some(lo), Some(hi)) => {
                        let digits = lo.unsigned_abs().max(hi.unsigned_abs()).to_string().len();
                        let sign = if lo < 0 { "\"-\"? " } else { "" };
                        if digits <= 1 {
                            format!("{sign}[0-9]")
                        } else {
                            format!("{sign}([0-9] | [1-9] [0-9]{{1,{}}})", digits - 1)
                        }
                    }
                    _ => "int".to_owned(),
                }
            }
            "number" => "number".to_owned(),
            "string" => {
                let most = number("maxLength").unwrap_or(DEFAULT_MAX_STRING);
                let least = number("minLength").unwrap_or(0).min(most);
                if least == 0 && most == DEFAULT_MAX_STRING {
                    "string".to_owned()
                } else {
                    format!("\"\\\"\" char{{{least},{most}}} \"\\\"\"")
                }
            }
            "array" => {
                let item = match map.get("items") {
                    Some(items) => self.rule_for(items),
                    None => "value".to_owned(),
                };
                let most = number("maxItems").unwrap_or(DEFAULT_MAX_ITEMS);
                let least = number("minItems").unwrap_or(0).min(most);
                if most == 0 {
                    return "\"[]\"".to_owned();
                }
                let rest = format!("(\",\" {item}){{{},{}}}", least.saturating_sub(1), most - 1);
                if least == 0 {
                    format!("\"[\" ({item} {rest})? \"]\"")
                } else {
                    format!("\"[\" {item} {rest} \"]\"")
                }
            }
            "object" => {
                let Some(properties) = map.get("properties").and_then(JsonValue::as_object) else {
                    return "object".to_owned();
                };
                let required: Option<Vec<&str>> = map
                    .get("required")
                    .and_then(JsonValue::as_array)
                    .map(|r| r.iter().filter_map(JsonValue::as_str).collect());
                let mut parts = Vec::new();
                for (key, property) in properties {
                    // Properties that are not required are left out: the answer is
                    // valid without them.
                    if required
                        .as_ref()
                        .is_some_and(|r| !r.contains(&key.as_str()))
                    {
                        continue;
                    }
                    let rule = self.rule_for(property);
                    parts.push(format!(
                        "{} \":\" {rule}",
                        literal(&JsonValue::String(key.clone()))
                    ));
                }
                if parts.is_empty() {
                    return "\"{}\"".to_owned();
                }
                format!("\"{{\" {} \"}}\"", parts.join(" \",\" "))
            }
            _ => "value".to_owned(),
        }
    }
}

/// `(a | b | c)`, or `a` alone.
fn group(alternatives: &[String]) -> String {
    match alternatives {
        [] => "value".to_owned(),
        [one] => one.clone(),
        many => format!("({})", many.join(" | ")),
    }
}

/// A GBNF string literal matching exactly the compact JSON text of `value`.
fn literal(value: &JsonValue) -> String {
    let json = value.to_string();
    let mut out = String::from("\"");
    for c in json.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_struct_is_its_fields_in_order() {
        let g = grammar(&json!({
            "type": "object",
            "properties": {
                "bugs": { "type": "array", "items": { "type": "string" } },
                "severity": { "type": "string", "enum": ["Low", "High"] },
                "count": { "type": "integer", "minimum": i32::MIN, "maximum": i32::MAX },
                "note": { "type": ["string", "null"] }
            },
            "required": ["bugs", "severity", "count", "note"],
            "additionalProperties": false
        }));
        let root = g.lines().next().unwrap();
        assert_eq!(root, "root ::= r0");
        assert!(
            g.contains(r#"r0 ::= "{" "\"bugs\"" ":" r1 "," "\"severity\"" ":" r3 "," "\"count\"" ":" r4 "," "\"note\"" ":" r5 "}""#),
            "{g}"
        );
        assert!(g.contains(r#"r1 ::= "[" (r2 ("," r2){0,63})? "]""#), "{g}");
        assert!(g.contains("r2 ::= string\n"), "{g}");
        assert!(g.contains(r#"r3 ::= ("\"Low\"" | "\"High\"")"#), "{g}");
        assert!(
            g.contains(r#"r4 ::= "-"? ([0-9] | [1-9] [0-9]{1,9})"#),
            "{g}"
        );
        // A nullable string: the string rule, or null.
        assert!(g.contains("r5 ::= (r2 | r6)"), "{g}");
        assert!(g.contains("r6 ::= \"null\""), "{g}");
    }

    #[test]
    fn a_select_is_one_grammar_over_its_clauses() {
        let g = grammar(&json!({
            "type": "object",
            "properties": { "choice": { "anyOf": [
                { "type": "object", "properties": { "tool": { "type": "integer", "enum": [0] }, "x": { "type": "integer" } }, "required": ["tool", "x"] },
                { "type": "object", "properties": { "tool": { "type": "integer", "enum": [1] } }, "required": ["tool"] }
            ] } },
            "required": ["choice"]
        }));
        assert!(g.contains("r1 ::= (r2 | r5)"), "{g}");
        assert!(g.contains(r#"r3 ::= "0""#), "{g}");
        assert!(g.contains(r#"r6 ::= "1""#), "{g}");
    }

    #[test]
    fn lengths_and_counts_bound_the_grammar() {
        let g = grammar(&json!({ "type": "string", "maxLength": 80 }));
        assert!(g.contains(r#"r0 ::= "\"" char{0,80} "\"""#), "{g}");
        let g = grammar(
            &json!({ "type": "array", "items": { "type": "boolean" }, "minItems": 2, "maxItems": 3 }),
        );
        assert!(g.contains(r#"r0 ::= "[" r1 ("," r1){1,2} "]""#), "{g}");
        // A schema it does not know is any JSON value.
        let g = grammar(&json!({ "not": { "type": "string" } }));
        assert!(g.starts_with("root ::= r0\nr0 ::= value\n"), "{g}");
    }
}
