//! The sap surface syntax: a pest grammar and an owned AST with byte spans.
//!
//! `parse` never panics and always returns a [`ast::SourceFile`], together with every
//! syntax diagnostic it found. Items that fail to parse are left out of the file and the
//! parser resumes at the next line that starts an item, so one broken function does not
//! hide the others. No pest type appears in the public API.

#![forbid(unsafe_code)]

// pest_derive, built without its `std` feature (whose per-rule stack probe costs a quarter
// of parse time; `scan` bounds nesting instead), refers to `alloc` by path.
extern crate alloc;

pub mod ast;
mod ast_builder;
pub mod binding;
mod diagnostic;
mod errors;
mod grammar;
mod line_index;
mod module_names;
mod parse;
mod scan;
pub mod sexpr;
pub mod visit;

pub use diagnostic::{Diagnostic, Label, Severity};
pub use line_index::{LineCol, LineIndex};
pub use module_names::module_names;
pub use parse::{MAX_NESTING, Parse, parse};
pub use scan::chunk_starts;

/// Whether `word` is one of the words the grammar reserves (`fn`, `select`, `trusted`, …).
pub fn is_keyword(word: &str) -> bool {
    use pest::Parser;
    grammar::SapParser::parse(grammar::Rule::keyword, word)
        .is_ok_and(|pairs| pairs.as_str().len() == word.len())
}

/// How an error message names the token at a byte offset: "`fn`", "a string", ….
pub fn describe_token_at(src: &str, at: usize) -> String {
    errors::found(src, at).0
}

/// A byte range in one source file. Offsets are `u32`: sap files are limited to 4 GiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}
