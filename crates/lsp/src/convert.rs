//! Byte offsets ↔ LSP positions, in the encoding negotiated at `initialize` (UTF-8 when
//! the client offers it, else the protocol's default UTF-16), and diagnostics to LSP.

use serde_json::{Value as JsonValue, json};
use syntax::{Diagnostic, LineIndex, Severity};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

/// A document's text with its line index.
#[derive(Clone, Debug)]
pub struct Text {
    pub text: String,
    pub lines: LineIndex,
}

impl Text {
    pub fn new(text: String) -> Text {
        let lines = LineIndex::new(&text);
        Text { text, lines }
    }

    /// The LSP position of a byte offset.
    pub fn position(&self, offset: u32, encoding: Encoding) -> (u32, u32) {
        let offset = (offset as usize).min(self.text.len());
        let lc = self.lines.line_col(&self.text, offset as u32);
        let start = self.lines.line_start(lc.line).unwrap_or(0) as usize;
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let prefix = &self.text[start..end];
        let character = match encoding {
            Encoding::Utf8 => prefix.len(),
            Encoding::Utf16 => prefix.encode_utf16().count(),
        };
        (lc.line, character as u32)
    }

    /// The byte offset of an LSP position, clamped to the line and the text.
    pub fn offset(&self, line: u32, character: u32, encoding: Encoding) -> usize {
        let Some(start) = self.lines.line_start(line).map(|s| s as usize) else {
            return self.text.len();
        };
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let line_text = &self.text[start..line_end];
        let mut units = 0u32;
        for (i, c) in line_text.char_indices() {
            if units >= character {
                return start + i;
            }
            units += match encoding {
                Encoding::Utf8 => c.len_utf8() as u32,
                Encoding::Utf16 => c.len_utf16() as u32,
            };
        }
        line_end
    }

    pub fn range(&self, start: u32, end: u32, encoding: Encoding) -> JsonValue {
        let (sl, sc) = self.position(start, encoding);
        let (el, ec) = self.position(end, encoding);
        json!({ "start": { "line": sl, "character": sc }, "end": { "line": el, "character": ec } })
    }
}

pub fn diagnostic(text: &Text, uri: &str, d: &Diagnostic, encoding: Encoding) -> JsonValue {
    let mut message = d.message.clone();
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    let related: Vec<JsonValue> = d
        .secondary
        .iter()
        .map(|l| json!({ "location": { "uri": uri, "range": text.range(l.span.start, l.span.end, encoding) }, "message": l.message }))
        .collect();
    let mut out = json!({
        "range": text.range(d.span.start, d.span.end, encoding),
        "severity": match d.severity { Severity::Error => 1, Severity::Warning => 2 },
        "code": d.code,
        "source": "sap",
        "message": message,
    });
    if !related.is_empty() {
        out["relatedInformation"] = JsonValue::Array(related);
    }
    if matches!(d.code, "W0100" | "W0101" | "W0105") {
        // Unused and unreachable code: editors draw it faded.
        out["tags"] = json!([1]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_and_utf8_positions_round_trip() {
        let t = Text::new("let é = \"🎉\"\nx".to_owned());
        let emoji_end = t.text.find('"').unwrap() + 1 + '🎉'.len_utf8();
        assert_eq!(t.position(emoji_end as u32, Encoding::Utf16), (0, 11));
        assert_eq!(t.position(emoji_end as u32, Encoding::Utf8), (0, 14));
        assert_eq!(t.offset(0, 11, Encoding::Utf16), emoji_end);
        assert_eq!(t.offset(0, 14, Encoding::Utf8), emoji_end);
        assert_eq!(t.offset(1, 0, Encoding::Utf16), t.text.len() - 1);
        assert_eq!(
            t.offset(9, 0, Encoding::Utf16),
            t.text.len(),
            "past the end clamps"
        );
        assert_eq!(
            t.offset(0, 999, Encoding::Utf16),
            t.text.find('\n').unwrap(),
            "past the line clamps"
        );
    }
}
