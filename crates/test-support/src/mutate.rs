//! Random edits of programs for property tests: deletions, duplications and insertions of
//! fragments that tend to break parsers and checkers.

use proptest::prelude::*;

/// Fragments that tend to break parsers: unbalanced brackets, string and comment
/// openers, keywords, operators, multi-byte characters.
pub const FRAGMENTS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "\"\"\"",
    "/*",
    "*/",
    "//",
    "///",
    "\\",
    "!",
    "!=",
    "_",
    "fn ",
    "select {",
    "parallel for ",
    " as ",
    "=>",
    "->",
    "::",
    ",",
    ";",
    "let ",
    "if ",
    "else ",
    "while ",
    "return ",
    "é",
    "日本",
    "🎉",
    "\u{FEFF}",
    "\0",
    "\n",
    "1e999",
    "99999999999999999999",
    "\\u{",
    "x.",
    "Context::new()",
];

#[derive(Debug, Clone)]
pub enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, fragment: usize },
    Duplicate { at: usize, len: usize },
}

pub fn apply(text: &str, edits: &[Edit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for edit in edits {
        let n = bytes.len().max(1);
        match *edit {
            Edit::Delete { at, len } => {
                let at = at % n;
                let end = (at + len).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            Edit::Insert { at, fragment } => {
                let at = at % (bytes.len() + 1);
                let f = FRAGMENTS[fragment % FRAGMENTS.len()].as_bytes();
                bytes.splice(at..at, f.iter().copied());
            }
            Edit::Duplicate { at, len } => {
                let at = at % n;
                let end = (at + len).min(bytes.len());
                let slice: Vec<u8> = bytes[at.min(end)..end].to_vec();
                bytes.splice(end..end, slice);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), any::<usize>()).prop_map(|(at, fragment)| Edit::Insert { at, fragment }),
        (any::<usize>(), 0usize..200).prop_map(|(at, len)| Edit::Duplicate { at, len }),
    ]
}
