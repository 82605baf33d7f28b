//! The lexical pre-scan. One linear pass over the bytes, before pest runs, that:
//!
//! - finds unterminated strings and block comments (pest would only say "expected …" at
//!   the end of the file);
//! - bounds bracket nesting, so the recursive-descent parser never overflows the stack;
//! - lists the places where the parser can resume after an error: lines that start, in
//!   column 0 and outside strings and comments, with an item keyword or a doc comment.
//!
//! The error reporter reuses the same lexer to find the unclosed brackets around an error.

use crate::Span;
use crate::diagnostic::Diagnostic;

/// A region the parser must not enter, with the error that explains it.
pub(crate) struct Poison {
    pub diagnostic: Diagnostic,
    /// The first byte the parser must not read.
    pub start: usize,
    /// Where it may resume looking for the next item.
    pub resume: usize,
}

pub(crate) struct Scan {
    pub poisons: Vec<Poison>,
    pub recovery_points: Vec<usize>,
}

/// What the lexer reports to its caller.
pub(crate) enum Event {
    Open(usize, u8),
    Close(usize),
    /// A string or block comment that runs to the end of the input.
    Unterminated {
        start: usize,
        what: Unterminated,
    },
    /// The start of a line in column 0, outside strings and comments.
    LineStart(usize),
    /// The end of a token that is not a bracket (only when asked for).
    TokenEnd(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unterminated {
    String,
    BlockComment,
}

/// Walks `src[from..to]`, calling `on` for every bracket and line start, and for the end
/// of every other token when `token_ends` is set. Strings (including `"""` strings) and
/// comments are skipped as wholes.
pub(crate) fn lex(
    src: &str,
    from: usize,
    to: usize,
    token_ends: bool,
    mut on: impl FnMut(Event) -> bool,
) {
    let bytes = &src.as_bytes()[..to];
    let mut i = from;
    if i == 0 && !on(Event::LineStart(0)) {
        return;
    }
    while i < bytes.len() {
        let b = bytes[i];
        let keep_going = match b {
            b'\n' => {
                i += 1;
                on(Event::LineStart(i))
            }
            b'(' | b'[' | b'{' => {
                i += 1;
                on(Event::Open(i - 1, b))
            }
            b')' | b']' | b'}' => {
                i += 1;
                on(Event::Close(i - 1))
            }
            b'"' => {
                let start = i;
                let triple = bytes[i..].starts_with(b"\"\"\"");
                i += if triple { 3 } else { 1 };
                let mut closed = false;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 2,
                        b'"' if !triple => {
                            i += 1;
                            closed = true;
                            break;
                        }
                        b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                            i += 3;
                            closed = true;
                            break;
                        }
                        _ => i += 1,
                    }
                }
                if closed {
                    !token_ends || on(Event::TokenEnd(i))
                } else {
                    i = bytes.len();
                    on(Event::Unterminated {
                        start,
                        what: Unterminated::String,
                    })
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                true
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let start = i;
                i += 2;
                match find(&bytes[i..], b"*/") {
                    Some(n) => {
                        // Line starts inside the comment are not recovery points.
                        i += n + 2;
                        true
                    }
                    None => {
                        i = bytes.len();
                        on(Event::Unterminated {
                            start,
                            what: Unterminated::BlockComment,
                        })
                    }
                }
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                true
            }
            _ => {
                i += 1;
                !token_ends || on(Event::TokenEnd(i))
            }
        };
        if !keep_going {
            return;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

const ITEM_STARTS: &[&str] = &[
    "fn",
    "extern",
    "struct",
    "enum",
    "type",
    "use",
    "export",
    "trusted",
    "idempotent",
    "test",
];

fn starts_item(rest: &str) -> bool {
    if rest.starts_with("///") {
        return true;
    }
    ITEM_STARTS.iter().any(|kw| {
        rest.starts_with(kw)
            && rest[kw.len()..]
                .chars()
                .next()
                .is_some_and(|c| c == ' ' || c == '\t')
    })
}

pub(crate) fn scan(src: &str, max_nesting: usize) -> Scan {
    let mut poisons = Vec::new();
    let mut recovery_points = Vec::new();
    // Open brackets; when nesting is too deep we keep counting without recording, to find
    // where the deep region ends.
    let mut stack: Vec<(usize, u8)> = Vec::new();
    let mut too_deep: Option<(usize, usize)> = None; // (bracket offset, depth before it)
    lex(src, 0, src.len(), false, |event| {
        match event {
            Event::LineStart(at) => {
                if too_deep.is_none() && starts_item(&src[at..]) {
                    recovery_points.push(at);
                }
            }
            Event::Open(at, b) => {
                if stack.len() >= max_nesting && too_deep.is_none() {
                    too_deep = Some((at, stack.len()));
                }
                stack.push((at, b));
            }
            Event::Close(at) => {
                stack.pop();
                if let Some((start, depth)) = too_deep
                    && stack.len() <= depth
                {
                    poisons.push(nesting_poison(start, at + 1, max_nesting));
                    too_deep = None;
                }
            }
            Event::TokenEnd(_) => {}
            Event::Unterminated { start, what } => {
                let diagnostic = match what {
                    Unterminated::String => Diagnostic::error(
                        "E0002",
                        Span::new(start, start + 1),
                        "this string is never closed",
                    )
                    .with_label("the string starts here and runs to the end of the file")
                    .with_help("add a closing `\"`"),
                    Unterminated::BlockComment => Diagnostic::error(
                        "E0003",
                        Span::new(start, start + 2),
                        "this block comment is never closed",
                    )
                    .with_label("the comment starts here and runs to the end of the file")
                    .with_help("add `*/` where the comment should end"),
                };
                poisons.push(Poison {
                    diagnostic,
                    start,
                    resume: src.len(),
                });
            }
        }
        true
    });
    if let Some((start, _)) = too_deep {
        poisons.push(nesting_poison(start, src.len(), max_nesting));
    }
    poisons.sort_by_key(|p| p.start);
    Scan {
        poisons,
        recovery_points,
    }
}

fn nesting_poison(start: usize, resume: usize, max_nesting: usize) -> Poison {
    let diagnostic = Diagnostic::error("E0004", Span::new(start, start + 1), "nesting too deep")
        .with_label(format!(
            "this bracket is nested more than {max_nesting} levels deep"
        ))
        .with_help("split the expression into smaller functions or `let` bindings");
    Poison {
        diagnostic,
        start,
        resume,
    }
}

/// Where the independent top-level chunks of a file start: the recovery points that are
/// not a continuation of the doc comment above them. `parse` parses chunk by chunk, and
/// parsing each chunk's text on its own gives the same items and errors, which is what
/// lets `hir` re-parse only the chunk an edit touched.
pub fn chunk_starts(src: &str) -> Vec<usize> {
    chunk_starts_of(src, &scan(src, crate::MAX_NESTING))
}

pub(crate) fn chunk_starts_of(src: &str, scan: &Scan) -> Vec<usize> {
    let mut starts = vec![0];
    let mut previous_was_doc = false;
    for &point in &scan.recovery_points {
        let is_doc = src[point..].starts_with("///");
        if !previous_was_doc && point > 0 {
            starts.push(point);
        }
        previous_was_doc = is_doc;
    }
    starts
}
