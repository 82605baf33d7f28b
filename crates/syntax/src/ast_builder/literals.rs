//! Literal values: integers (range-checked), strings with their escapes, and `"""`
//! strings with their common indentation removed.

use pest::iterators::Pair;

use super::Builder;
use crate::Span;
use crate::ast::ExprKind;
use crate::diagnostic::Diagnostic;
use crate::grammar::Rule;

impl Builder<'_> {
    pub(super) fn int(&self, text: &str, span: Span) -> ExprKind {
        let digits: String = text.chars().filter(|&c| c != '_').collect();
        match digits.parse::<u64>() {
            Ok(n) if n <= 1 << 63 => ExprKind::Int(n),
            _ => {
                self.error(
                    Diagnostic::error("E0006", span, "this integer literal is too large")
                        .with_label("larger than any integer type")
                        .with_help("the largest integer type is `i64`, up to 9223372036854775807"),
                );
                ExprKind::Int(0)
            }
        }
    }

    /// Decodes a `plain_string` or `triple_string` pair.
    pub(super) fn string(&self, pair: Pair<'_, Rule>) -> String {
        let raw = pair.as_str();
        let start = self.span(&pair).start as usize;
        if pair.as_rule() == Rule::triple_string {
            let body = &raw[3..raw.len() - 3];
            let body_start = start + 3;
            self.unescape_lines(&dedent(body), body, body_start)
        } else {
            self.unescape(&raw[1..raw.len() - 1], start + 1)
        }
    }

    /// Unescapes dedented text; escape errors point into the original body, located by
    /// searching for the offending escape (dedent only removes leading spaces).
    fn unescape_lines(&self, text: &str, original: &str, original_start: usize) -> String {
        let before = self.diagnostics.borrow().len();
        let out = self.unescape(text, original_start);
        // Re-anchor spans of escape errors found in the dedented text.
        let mut diags = self.diagnostics.borrow_mut();
        for d in &mut diags[before..] {
            let rel = d.span.start as usize - original_start;
            let escape = &text[rel..(rel + d.span.len()).min(text.len())];
            if let Some(pos) = original.find(escape) {
                d.span = Span::new(original_start + pos, original_start + pos + escape.len());
            }
        }
        out
    }

    fn unescape(&self, text: &str, start: usize) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((j, e)) = chars.next() else { break };
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                '\'' => out.push('\''),
                '\n' => {
                    // A line continuation: the newline and the next line's indentation go.
                    while chars.next_if(|&(_, c)| c == ' ' || c == '\t').is_some() {}
                }
                'u' => {
                    let rest = &text[j + 1..];
                    let decoded = rest
                        .strip_prefix('{')
                        .and_then(|r| r.find('}').map(|end| &r[..end]))
                        .filter(|hex| !hex.is_empty() && hex.len() <= 6)
                        .and_then(|hex| u32::from_str_radix(hex, 16).ok().map(|v| (hex.len(), v)));
                    match decoded.and_then(|(len, v)| char::from_u32(v).map(|c| (len, c))) {
                        Some((len, ch)) => {
                            out.push(ch);
                            for _ in 0..len + 2 {
                                chars.next();
                            }
                        }
                        None => self.error(
                            Diagnostic::error(
                                "E0005",
                                Span::new(start + i, start + j + 1),
                                "invalid unicode escape",
                            )
                            .with_label("expected `\\u{…}` with 1 to 6 hex digits of a valid character"),
                        ),
                    }
                }
                other => self.error(
                    Diagnostic::error(
                        "E0005",
                        Span::new(start + i, start + j + other.len_utf8()),
                        format!("unknown escape `\\{other}` in a string"),
                    )
                    .with_label("unknown escape")
                    .with_help(r#"the escapes are \n \t \r \0 \\ \" \' and \u{…}; write \\ for a backslash"#),
                ),
            }
        }
        out
    }
}

/// The text of a `"""` string: a first line that is empty is dropped, a last line that is
/// only indentation is dropped, and the common indentation of the other lines is removed.
fn dedent(body: &str) -> String {
    let body = body
        .strip_prefix("\r\n")
        .or_else(|| body.strip_prefix('\n'))
        .unwrap_or(body);
    let mut lines: Vec<&str> = body.split('\n').collect();
    if lines.len() > 1 && lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    let stripped: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect();
    stripped.join("\n")
}

#[cfg(test)]
mod tests {
    use super::dedent;

    #[test]
    fn dedent_removes_common_indentation_and_delimiter_lines() {
        assert_eq!(dedent("\n    a\n      b\n    "), "a\n  b");
        assert_eq!(dedent("one line"), "one line");
        assert_eq!(dedent("\n  a\n\n  b\n"), "a\n\nb");
    }
}
