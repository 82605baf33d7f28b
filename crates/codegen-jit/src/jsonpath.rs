//! JSON paths for `json_get`: `items[0].name`, `items[*].attributes`, `["odd key"]`.
//! `[*]` maps the rest of the path over an array and gives the array of results.

use serde_json::Value;

#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
    All,
}

fn parse(path: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    let mut key = String::new();
    let flush = |key: &mut String, steps: &mut Vec<Step>| {
        if !key.is_empty() {
            steps.push(Step::Key(std::mem::take(key)));
        }
    };
    while i < chars.len() {
        match chars[i] {
            '.' => flush(&mut key, &mut steps),
            '[' => {
                flush(&mut key, &mut steps);
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == ']')
                    .map(|n| i + n)
                    .ok_or_else(|| format!("unclosed `[` in the JSON path `{path}`"))?;
                let inside: String = chars[i + 1..end].iter().collect();
                let inside = inside.trim();
                if inside == "*" {
                    steps.push(Step::All);
                } else if let Some(quoted) =
                    inside.strip_prefix('"').and_then(|s| s.strip_suffix('"'))
                {
                    steps.push(Step::Key(quoted.to_owned()));
                } else {
                    let n = inside.parse::<usize>().map_err(|_| format!("`[{inside}]` in the JSON path `{path}` is not an index, `*` or a quoted key"))?;
                    steps.push(Step::Index(n));
                }
                i = end;
            }
            c => key.push(c),
        }
        i += 1;
    }
    flush(&mut key, &mut steps);
    Ok(steps)
}

fn walk(value: &Value, steps: &[Step]) -> Value {
    let Some((step, rest)) = steps.split_first() else {
        return value.clone();
    };
    match step {
        Step::Key(k) => value.get(k).map_or(Value::Null, |v| walk(v, rest)),
        Step::Index(n) => value.get(*n).map_or(Value::Null, |v| walk(v, rest)),
        Step::All => match value {
            Value::Array(items) => Value::Array(items.iter().map(|v| walk(v, rest)).collect()),
            Value::Object(map) => Value::Array(map.values().map(|v| walk(v, rest)).collect()),
            _ => Value::Null,
        },
    }
}

/// The value at `path`; `null` where the path leads nowhere.
pub fn get(value: &Value, path: &str) -> Result<Value, String> {
    Ok(walk(value, &parse(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        let v = json!({ "items": [{ "name": "a", "attributes": { "wifi": true } }, { "name": "b", "attributes": null }], "odd key": 1 });
        assert_eq!(get(&v, "items[0].name").unwrap(), json!("a"));
        assert_eq!(get(&v, "items[*].name").unwrap(), json!(["a", "b"]));
        assert_eq!(
            get(&v, "items[*].attributes.wifi").unwrap(),
            json!([true, null])
        );
        assert_eq!(get(&v, "[\"odd key\"]").unwrap(), json!(1));
        assert_eq!(get(&v, "missing.deeper").unwrap(), Value::Null);
        assert_eq!(get(&v, "").unwrap(), v);
        assert!(get(&v, "items[x]").is_err());
        assert!(get(&v, "items[0").is_err());
    }
}
