//! JSON as models write it when nothing constrains them: single-quoted strings, bare
//! keys, trailing or missing commas, `//` and `/* */` comments, Python's `True`,
//! `False` and `None`, raw line breaks inside strings, and answers cut short, whose open
//! strings, arrays and objects are closed (a key left without a value is dropped, and
//! so is a half-written number or word). Each kind of repair is reported once, so the
//! trace says what was read differently; nothing is invented — a cut-off answer gives
//! what it had written, and the validator decides whether that is enough.
//!
//! It is a byte-level recursive descent, linear in the answer's length, bounded in
//! depth ([`MAX_DEPTH`]) so that no answer can exhaust the stack.

use serde_json::{Map, Number, Value as JsonValue};

/// How deeply arrays and objects may nest before the answer is refused.
pub const MAX_DEPTH: usize = 256;

/// Reads the JSON value that starts at the beginning of `text` (after whitespace and
/// comments), with the repairs it needed. `None` when nothing there reads as a value.
pub fn parse(text: &str) -> Option<(JsonValue, Vec<&'static str>)> {
    parse_prefix(text).map(|(v, repairs, _)| (v, repairs))
}

/// [`parse`], and where in `text` the value ended.
pub fn parse_prefix(text: &str) -> Option<(JsonValue, Vec<&'static str>, usize)> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        at: 0,
        repairs: Vec::new(),
    };
    p.skip();
    let v = p.value(0)?;
    Some((v, p.repairs, p.at))
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    at: usize,
    repairs: Vec<&'static str>,
}

impl Parser<'_> {
    fn repair(&mut self, what: &'static str) {
        if !self.repairs.contains(&what) {
            self.repairs.push(what);
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn at_end(&self) -> bool {
        self.at >= self.s.len()
    }

    /// Skips whitespace and comments.
    fn skip(&mut self) {
        loop {
            while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                self.at += 1;
            }
            if self.s[self.at.min(self.s.len())..].starts_with(b"//") {
                self.repair("comments removed");
                while self.peek().is_some_and(|c| c != b'\n') {
                    self.at += 1;
                }
            } else if self.s[self.at.min(self.s.len())..].starts_with(b"/*") {
                self.repair("comments removed");
                match self.text[self.at + 2..].find("*/") {
                    Some(end) => self.at += 2 + end + 2,
                    None => self.at = self.s.len(),
                }
            } else {
                return;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<JsonValue> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' | b'\'' => self.string().map(JsonValue::String),
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.number(),
            c if c.is_ascii_alphabetic() || c == b'_' => self.word(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<JsonValue> {
        self.at += 1;
        let mut map = Map::new();
        while !self.container_ends(b'}') {
            let key = match self.peek()? {
                b'"' | b'\'' => self.string()?,
                c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => self.bare_key(),
                _ => return None,
            };
            self.skip();
            match self.peek() {
                Some(b':') => self.at += 1,
                None => {
                    self.repair("cut-off answer closed");
                    break;
                }
                _ => return None,
            }
            self.skip();
            let Some(value) = self.element(depth)? else {
                break;
            };
            map.insert(key, value);
            self.after_element(b'}');
        }
        Some(JsonValue::Object(map))
    }

    fn array(&mut self, depth: usize) -> Option<JsonValue> {
        self.at += 1;
        let mut items = Vec::new();
        while !self.container_ends(b']') {
            let Some(item) = self.element(depth)? else {
                break;
            };
            items.push(item);
            self.after_element(b']');
        }
        Some(JsonValue::Array(items))
    }

    /// Before an element of an object or array: whether the container ends here — at
    /// `close`, or cut off. Extra commas are skipped.
    fn container_ends(&mut self, close: u8) -> bool {
        loop {
            self.skip();
            match self.peek() {
                None => {
                    self.repair("cut-off answer closed");
                    return true;
                }
                Some(c) if c == close => {
                    self.at += 1;
                    return true;
                }
                Some(b',') => {
                    self.at += 1;
                    self.repair("extra commas removed");
                }
                Some(_) => return false,
            }
        }
    }

    /// An element's value: `Some(None)` when the answer ends inside it (the container
    /// is closed without it), `None` when it is not JSON.
    fn element(&mut self, depth: usize) -> Option<Option<JsonValue>> {
        match self.value(depth + 1) {
            Some(v) => Some(Some(v)),
            None if self.at_end() => {
                self.repair("cut-off answer closed");
                Some(None)
            }
            None => None,
        }
    }

    /// After an element: its comma (a trailing one is noted), or a missing one.
    fn after_element(&mut self, close: u8) {
        self.skip();
        match self.peek() {
            Some(b',') => {
                self.at += 1;
                self.skip();
                if self.peek() == Some(close) {
                    self.repair("extra commas removed");
                }
            }
            Some(c) if c == close => {}
            None => {}
            Some(_) => self.repair("missing commas added"),
        }
    }

    /// A key written without quotes.
    fn bare_key(&mut self) -> String {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
        {
            self.at += 1;
        }
        self.repair("bare keys quoted");
        self.text[start..self.at].to_owned()
    }

    /// A string in double or single quotes, with JSON's escapes (and `\'`). A string
    /// the answer ends inside is closed; a raw line break is kept as one.
    fn string(&mut self) -> Option<String> {
        let quote = self.s[self.at];
        if quote == b'\'' {
            self.repair("single quotes read as double");
        }
        self.at += 1;
        let mut out = String::new();
        loop {
            // Copy the run up to the next quote, backslash or control character at once.
            let start = self.at;
            while self
                .peek()
                .is_some_and(|c| c != quote && c != b'\\' && c >= 0x20)
            {
                self.at += 1;
            }
            out.push_str(&self.text[start..self.at]);
            match self.peek() {
                None => {
                    self.repair("cut-off answer closed");
                    return Some(out);
                }
                Some(c) if c == quote => {
                    self.at += 1;
                    return Some(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let Some(e) = self.peek() else {
                        self.repair("cut-off answer closed");
                        return Some(out);
                    };
                    self.at += 1;
                    match e {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'u' => out.push(self.unicode_escape()),
                        // `\"`, `\\`, `\/`, `\'` and any other escaped character: itself.
                        _ => {
                            let ch = self.text[self.at - 1..]
                                .chars()
                                .next()
                                .unwrap_or('\u{fffd}');
                            self.at += ch.len_utf8() - 1;
                            out.push(ch);
                        }
                    }
                }
                Some(c) => {
                    // A control character (a raw line break, a tab) inside the string.
                    self.repair("line breaks in strings kept");
                    out.push(c as char);
                    self.at += 1;
                }
            }
        }
    }

    /// The four hex digits after `\u` (a surrogate pair when two follow each other);
    /// what cannot be read becomes U+FFFD.
    fn unicode_escape(&mut self) -> char {
        let hex = |p: &mut Self| -> Option<u32> {
            let digits = p.text.get(p.at..p.at + 4)?;
            let n = u32::from_str_radix(digits, 16).ok()?;
            p.at += 4;
            Some(n)
        };
        let Some(first) = hex(self) else {
            return '\u{fffd}';
        };
        if (0xd800..0xdc00).contains(&first) && self.text[self.at..].starts_with("\\u") {
            let save = self.at;
            self.at += 2;
            if let Some(second) = hex(self)
                && (0xdc00..0xe000).contains(&second)
            {
                let code = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                return char::from_u32(code).unwrap_or('\u{fffd}');
            }
            self.at = save;
        }
        char::from_u32(first).unwrap_or('\u{fffd}')
    }

    /// A number; a leading `+` or a bare `.5` is read as a number too. A number the
    /// answer ends inside (`1.`, `-`, `2e`) is not a value.
    fn number(&mut self) -> Option<JsonValue> {
        let start = self.at;
        if self.peek() == Some(b'+') {
            self.at += 1;
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.at += 1;
        }
        let written = self.text[start..self.at].trim_start_matches('+');
        if let Ok(n) = written.parse::<i64>() {
            return Some(JsonValue::Number(n.into()));
        }
        if let Ok(n) = written.parse::<u64>() {
            return Some(JsonValue::Number(n.into()));
        }
        let x: f64 = written.parse().ok()?;
        if written.starts_with('.') || written.ends_with('.') || self.s[start] == b'+' {
            self.repair("numbers written loosely");
        }
        Number::from_f64(x).map(JsonValue::Number)
    }

    /// `true`, `false`, `null`, and Python's `True`, `False`, `None`.
    fn word(&mut self) -> Option<JsonValue> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.at += 1;
        }
        match &self.text[start..self.at] {
            "true" => Some(JsonValue::Bool(true)),
            "false" => Some(JsonValue::Bool(false)),
            "null" => Some(JsonValue::Null),
            "True" => {
                self.repair("Python literals read as JSON");
                Some(JsonValue::Bool(true))
            }
            "False" => {
                self.repair("Python literals read as JSON");
                Some(JsonValue::Bool(false))
            }
            "None" => {
                self.repair("Python literals read as JSON");
                Some(JsonValue::Null)
            }
            // A literal the answer ends inside is no value, and the answer is cut off
            // there (the caller closes what is open).
            word if self.at_end()
                && ["true", "false", "null", "True", "False", "None"]
                    .iter()
                    .any(|w| w.starts_with(word)) =>
            {
                None
            }
            _ => {
                self.at = start;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::parse;

    fn read(text: &str) -> (serde_json::Value, Vec<&'static str>) {
        parse(text).unwrap_or_else(|| panic!("not read: {text}"))
    }

    #[test]
    fn strict_json_needs_no_repair() {
        let text = r#"{"a": [1, -2.5, 3e2, true, null], "b": "x\"y\u00e9\ud83d\ude00"}"#;
        let (v, repairs) = read(text);
        assert_eq!(v, serde_json::from_str::<serde_json::Value>(text).unwrap());
        assert!(repairs.is_empty(), "{repairs:?}");
    }

    #[test]
    fn the_ways_people_write_json() {
        let (v, r) = read("{name: 'Ada', 'tags': ['a', 'b',], // why\n n: +3, ok: True, x: None,}");
        assert_eq!(
            v,
            json!({"name": "Ada", "tags": ["a", "b"], "n": 3, "ok": true, "x": null})
        );
        for repair in [
            "bare keys quoted",
            "single quotes read as double",
            "extra commas removed",
            "comments removed",
            "Python literals read as JSON",
        ] {
            assert!(r.contains(&repair), "{repair} missing from {r:?}");
        }
        let (v, r) = read("[1 2 3]");
        assert_eq!(v, json!([1, 2, 3]));
        assert_eq!(r, ["missing commas added"]);
        let (v, _) = read("{\"text\": \"two\nlines\", /* c */ \"it's\": 'don\\'t'}");
        assert_eq!(v, json!({"text": "two\nlines", "it's": "don't"}));
    }

    #[test]
    fn an_answer_cut_short_is_closed_with_what_it_had() {
        let (v, r) = read(r#"{"bugs": ["Division by zero", "Unchecked inp"#);
        assert_eq!(v, json!({"bugs": ["Division by zero", "Unchecked inp"]}));
        assert_eq!(r, ["cut-off answer closed"]);
        assert_eq!(read(r#"{"a": 1, "b": "#).0, json!({"a": 1}));
        assert_eq!(read(r#"{"a": 1, "b""#).0, json!({"a": 1}));
        assert_eq!(read(r#"{"a": [1, 2, 3"#).0, json!({"a": [1, 2, 3]}));
        assert_eq!(read(r#"{"a": tr"#).0, json!({}));
        assert_eq!(read(r#"[1, 2, -"#).0, json!([1, 2]));
    }

    #[test]
    fn what_is_not_json_is_not_read() {
        assert!(parse("I cannot answer that").is_none());
        assert!(parse("{\"a\": @}").is_none());
        assert!(parse("").is_none());
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).is_none(), "nesting is bounded");
    }

    proptest::proptest! {
        /// Any text, and any cut of a JSON-ish text, reads or is refused: never a panic.
        #[test]
        fn never_panics(text in "\\PC{0,200}", cut in 0usize..400) {
            let _ = parse(&text);
            let sample = "{a: ['x\\u00e9\\n', 1.5e3, True,], 'b': {\"c\": null /* c */}, d: \"\\ud83d\\ude00\"}";
            let mut end = cut.min(sample.len());
            while !sample.is_char_boundary(end) {
                end -= 1;
            }
            let _ = parse(&sample[..end]);
        }
    }
}
