//! A GBNF grammar (llama.cpp's grammar format) from an answer's schema, for the
//! in-process model (`--provider local`): decoding follows it token by token, so an
//! answer always has the shape its type asks for.
//!
//! The schemas come from sap types (`schema::for_type`: objects with every field
//! required, in declaration order; string enums; nullable unions; integers with the
//! `i32` range; lists; a `select`'s `anyOf` of its clauses) or from a program
//! (`produce_matching`: any JSON Schema). What the generator does not know becomes any
//! JSON value, which validation then checks. The JSON is compact but for one optional
//! space after each `:` and `,`: models trained on JSON written `{"a": 1, "b": 2}`
//! (Qwen2.5) choose a token holding that space next (` "`), and where the grammar
//! refused it, took the best token it allowed instead — `",` — and wrote field names
//! such as `,BestNights`. The space costs no token where it is merged with the next
//! one, and one space at most cannot run away.

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
object ::= "{" (string ":" sp value ("," sp string ":" sp value){0,63})? "}"
array ::= "[" (value ("," sp value){0,63})? "]"
sp ::= " "?
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
                // Exactly the range: the bounds of the schema, or an `i64`'s when it
                // gives none, so no answer is ever out of range.
                let bound = |k: &str| map.get(k).and_then(JsonValue::as_i64);
                let lo = bound("minimum").unwrap_or(i64::MIN);
                let hi = bound("maximum").unwrap_or(i64::MAX);
                if lo > hi {
                    return "int".to_owned();
                }
                integer_range(i128::from(lo), i128::from(hi))
            }
            "number" => "number".to_owned(),
            "string" => {
                if let Some(rule) = map
                    .get("pattern")
                    .and_then(JsonValue::as_str)
                    .and_then(pattern)
                {
                    return rule;
                }
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
                let rest = format!(
                    "(\",\" sp {item}){{{},{}}}",
                    least.saturating_sub(1),
                    most - 1
                );
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
                        "{} \":\" sp {rule}",
                        literal(&JsonValue::String(key.clone()))
                    ));
                }
                if parts.is_empty() {
                    return "\"{}\"".to_owned();
                }
                format!("\"{{\" {} \"}}\"", parts.join(" \",\" sp "))
            }
            _ => "value".to_owned(),
        }
    }
}

/// A string matching a `pattern` as a grammar, for the patterns made of literal
/// characters, character classes and `\\d`, each optionally repeated (`?`, `*`, `+`,
/// `{n}`, `{n,m}`), anchored at both ends: what sap's own schemas use (an `aot` plan's
/// `^<result_of_[0-9]+>$`). Anything else is `None`: any string, which validation then
/// checks against the pattern.
fn pattern(regex: &str) -> Option<String> {
    let body = regex.strip_prefix('^')?.strip_suffix('$')?;
    let chars: Vec<char> = body.chars().collect();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    let plain = |c: char| c.is_ascii_alphanumeric() || "<>_-:/ ,;=@#%&'!~`".contains(c);
    while i < chars.len() {
        let c = chars[i];
        let atom = match c {
            '[' => {
                let end = i + chars[i..].iter().position(|&c| c == ']')?;
                let class: String = chars[i + 1..end].iter().collect();
                // A negated class could admit a quote or a control character.
                if class.is_empty() || class.starts_with('^') || class.contains(['\\', '"', '[']) {
                    return None;
                }
                i = end;
                format!("[{class}]")
            }
            '\\' => {
                i += 1;
                match chars.get(i)? {
                    'd' => "[0-9]".to_owned(),
                    c if "./()[]{}?*+|^$-".contains(*c) => format!("\"{c}\""),
                    _ => return None,
                }
            }
            '.' => "char".to_owned(),
            c if plain(c) => format!("\"{c}\""),
            _ => return None,
        };
        i += 1;
        let quantifier = match chars.get(i) {
            Some(q @ ('?' | '*' | '+')) => {
                i += 1;
                q.to_string()
            }
            Some('{') => {
                let end = i + chars[i..].iter().position(|&c| c == '}')?;
                let counts: String = chars[i + 1..end].iter().collect();
                if counts.is_empty() || !counts.chars().all(|c| c.is_ascii_digit() || c == ',') {
                    return None;
                }
                i = end + 1;
                format!("{{{counts}}}")
            }
            _ => String::new(),
        };
        parts.push(format!("{atom}{quantifier}"));
    }
    Some(format!("\"\\\"\" {} \"\\\"\"", parts.join(" ")))
}

/// The integers from `lo` to `hi` (inclusive), written without leading zeros.
fn integer_range(lo: i128, hi: i128) -> String {
    let mut alternatives = Vec::new();
    if lo < 0 {
        // The negative part: a minus sign and a magnitude of at least 1.
        let magnitudes = natural_range((-hi).max(1) as u128, lo.unsigned_abs());
        alternatives.push(format!("\"-\" {magnitudes}"));
    }
    if hi >= 0 {
        alternatives.push(natural_range(lo.max(0) as u128, hi as u128));
    }
    group(&alternatives)
}

/// The natural numbers from `lo` to `hi` (`lo <= hi`), without leading zeros: for each
/// length of numeral between theirs, the numerals of that length in range.
fn natural_range(lo: u128, hi: u128) -> String {
    let (lo, hi) = (lo.to_string(), hi.to_string());
    let mut alternatives = Vec::new();
    for length in lo.len()..=hi.len() {
        let least = if length == lo.len() {
            lo.clone()
        } else {
            format!("1{}", "0".repeat(length - 1))
        };
        let most = if length == hi.len() {
            hi.clone()
        } else {
            "9".repeat(length)
        };
        alternatives.push(same_length(least.as_bytes(), most.as_bytes()));
    }
    group(&alternatives)
}

/// The digit strings from `lo` to `hi` (inclusive), both of the same length: for
/// strings of one length, numeric order is the order of their digits.
fn same_length(lo: &[u8], hi: &[u8]) -> String {
    let n = lo.len();
    if n == 0 {
        return "\"\"".to_owned();
    }
    if lo.iter().all(|&d| d == b'0') && hi.iter().all(|&d| d == b'9') {
        return format!("[0-9]{{{n}}}");
    }
    let (a, b) = (lo[0], hi[0]);
    let rest = |x: &[u8], y: &[u8]| -> String {
        if x.is_empty() {
            String::new()
        } else {
            format!(" {}", same_length(x, y))
        }
    };
    if a == b {
        return format!("\"{}\"{}", a as char, rest(&lo[1..], &hi[1..]));
    }
    let nines = vec![b'9'; n - 1];
    let zeros = vec![b'0'; n - 1];
    let mut alternatives = vec![format!("\"{}\"{}", a as char, rest(&lo[1..], &nines))];
    if b - a > 1 {
        let any = if n > 1 {
            format!(" [0-9]{{{}}}", n - 1)
        } else {
            String::new()
        };
        alternatives.push(format!("[{}-{}]{any}", (a + 1) as char, (b - 1) as char));
    }
    alternatives.push(format!("\"{}\"{}", b as char, rest(&zeros, &hi[1..])));
    group(&alternatives)
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
            g.contains(r#"r0 ::= "{" "\"bugs\"" ":" sp r1 "," sp "\"severity\"" ":" sp r3 "," sp "\"count\"" ":" sp r4 "," sp "\"note\"" ":" sp r5 "}""#),
            "{g}"
        );
        assert!(
            g.contains(r#"r1 ::= "[" (r2 ("," sp r2){0,63})? "]""#),
            "{g}"
        );
        assert!(g.contains("r2 ::= string\n"), "{g}");
        assert!(g.contains(r#"r3 ::= ("\"Low\"" | "\"High\"")"#), "{g}");
        assert!(g.contains(r#"r4 ::= ("-" ("#), "{g}");
        // A nullable string: the string rule, or null.
        assert!(g.contains("r5 ::= (r2 | r6)"), "{g}");
        assert!(g.contains("r6 ::= \"null\""), "{g}");
    }

    /// A regular expression for a range rule (the rules it makes use only literals,
    /// digit classes, counts, groups and alternatives), anchored.
    fn as_regex(rule: &str) -> regex::Regex {
        let text: String = rule.replace([' ', '"'], "");
        regex::Regex::new(&format!("^(?:{text})$")).unwrap()
    }

    #[test]
    fn an_integer_range_is_exact() {
        let ranges: &[(i128, i128)] = &[
            (0, 0),
            (0, 9),
            (0, 10),
            (1, 100),
            (7, 7),
            (-5, 5),
            (-100, -3),
            (13, 4021),
            (-999, 1000),
            (998, 1002),
        ];
        for &(lo, hi) in ranges {
            let re = as_regex(&integer_range(lo, hi));
            for n in -1200..=4100 {
                let inside = lo <= n && n <= hi;
                assert_eq!(re.is_match(&n.to_string()), inside, "{n} in [{lo}, {hi}]");
            }
            // No leading zeros, no minus zero.
            assert!(!re.is_match("01") && !re.is_match("-0") && !re.is_match("007"));
        }
        // The edges of `i32` and `i64`.
        let i32_edges: &[(i128, bool)] = &[
            (i32::MAX.into(), true),
            (i128::from(i32::MAX) + 1, false),
            (i32::MIN.into(), true),
            (i128::from(i32::MIN) - 1, false),
            (9_999_999_999, false),
            (-1_000_000_000, true),
            (1_999_999_999, true),
        ];
        let i64_edges: &[(i128, bool)] = &[
            (i64::MAX.into(), true),
            (i128::from(i64::MAX) + 1, false),
            (i64::MIN.into(), true),
            (i128::from(i64::MIN) - 1, false),
            (0, true),
        ];
        for (lo, hi, edges) in [
            (i128::from(i32::MIN), i128::from(i32::MAX), i32_edges),
            (i64::MIN.into(), i64::MAX.into(), i64_edges),
        ] {
            let re = as_regex(&integer_range(lo, hi));
            for &(n, inside) in edges {
                assert_eq!(re.is_match(&n.to_string()), inside, "{n}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_range_admits_exactly_its_members(
            a in -100_000i128..100_000,
            b in -100_000i128..100_000,
            n in -200_000i128..200_000,
        ) {
            let (lo, hi) = (a.min(b), a.max(b));
            let re = as_regex(&integer_range(lo, hi));
            proptest::prop_assert_eq!(re.is_match(&n.to_string()), lo <= n && n <= hi);
            proptest::prop_assert!(re.is_match(&lo.to_string()) && re.is_match(&hi.to_string()));
        }
    }

    #[test]
    fn a_simple_pattern_is_followed() {
        let rule = pattern("^<result_of_[0-9]+>$").unwrap();
        assert_eq!(
            rule,
            r#""\"" "<" "r" "e" "s" "u" "l" "t" "_" "o" "f" "_" [0-9]+ ">" "\"""#
        );
        let g = grammar(&json!({ "type": "string", "pattern": "^\\d{3}-[a-z]?$" }));
        assert!(g.contains(r#"r0 ::= "\"" [0-9]{3} "-" [a-z]? "\"""#), "{g}");
        // Unanchored, grouped or escaped beyond the subset: any string.
        for p in ["<result_of_[0-9]+>", "^(a|b)$", "^\\w+$", "^[^\"]$"] {
            assert_eq!(pattern(p), None, "{p}");
            let g = grammar(&json!({ "type": "string", "pattern": p }));
            assert!(g.starts_with("root ::= r0\nr0 ::= string\n"), "{g}");
        }
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
        assert!(g.contains(r#"r0 ::= "[" r1 ("," sp r1){1,2} "]""#), "{g}");
        // A schema it does not know is any JSON value.
        let g = grammar(&json!({ "not": { "type": "string" } }));
        assert!(g.starts_with("root ::= r0\nr0 ::= value\n"), "{g}");
    }
}
