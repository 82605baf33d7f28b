//! The parse driver: pre-scan, then one pest parse per top-level item, with recovery at
//! the next line that starts an item.

use pest::Parser;

use crate::ast::SourceFile;
use crate::ast_builder::{Builder, pratt};
use crate::diagnostic::Diagnostic;
use crate::grammar::{Rule, SapParser};
use crate::{Span, errors, scan};

/// How deeply brackets may nest. Deeper input gets a "nesting too deep" error instead of
/// exhausting the parser's stack.
pub const MAX_NESTING: usize = 128;

/// The result of parsing one file: always a tree, plus every problem found.
#[derive(Clone, Debug)]
pub struct Parse {
    pub file: SourceFile,
    pub diagnostics: Vec<Diagnostic>,
}

impl Parse {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// A warning at each bidirectional control character: in a string or a comment it can
/// make the code display otherwise than it runs ("Trojan Source", CVE-2021-42574), which
/// a reviewer of an agent's program must not be shown.
fn bidi_controls(src: &str) -> impl Iterator<Item = Diagnostic> + '_ {
    src.match_indices(|c| matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'))
        .map(|(at, c)| {
            let code = c.chars().next().map_or(0, |c| c as u32);
            Diagnostic::warning(
                "W0003",
                Span::new(at, at + c.len()),
                format!(
                    "a bidirectional control character (U+{code:04X}): the code may display otherwise than it runs"
                ),
            )
            .with_label("reorders the text around it")
            .with_help("delete it; write `\\u{...}` in a string if the character is meant")
        })
}

pub fn parse(src: &str) -> Parse {
    let file_span = Span::new(0, src.len());
    if src.len() > u32::MAX as usize {
        let d = Diagnostic::error("E0001", Span::new(0, 0), "this file is larger than 4 GiB");
        return Parse {
            file: SourceFile {
                items: Vec::new(),
                span: Span::new(0, 0),
            },
            diagnostics: vec![d],
        };
    }
    let scan = scan::scan(src, MAX_NESTING);
    let pratt = pratt();
    let mut items = Vec::new();
    let mut diagnostics: Vec<Diagnostic> =
        scan.poisons.iter().map(|p| p.diagnostic.clone()).collect();

    // Chunks start at the lines that start an item; an error ends its chunk, and the
    // next chunk is parsed afresh. `hir` parses the same chunks one by one, so both give
    // the same items and errors.
    let starts = scan::chunk_starts_of(src, &scan);
    for (n, &chunk_start) in starts.iter().enumerate() {
        let chunk_end = starts.get(n + 1).copied().unwrap_or(src.len());
        let mut pos = skip_trivia(src, chunk_start).min(chunk_end);
        while pos < chunk_end {
            // Never parse into a region the pre-scan ruled out.
            let poison = scan
                .poisons
                .iter()
                .find(|p| p.resume > pos && p.start < chunk_end);
            let limit = poison.map_or(chunk_end, |p| p.start.max(pos));
            if limit == pos {
                break;
            }
            match SapParser::parse(Rule::item_entry, &src[pos..limit]) {
                Ok(mut pairs) => {
                    let pair = pairs.next().expect("grammar: item_entry yields an item");
                    let end = pos + pair.as_span().end();
                    let builder = Builder::new(src, pos, &pratt);
                    items.push(builder.item(pair));
                    diagnostics.extend(builder.diagnostics.into_inner());
                    pos = skip_trivia(src, end).min(chunk_end);
                }
                Err(_) => {
                    let error = detailed_error(&src[pos..limit]);
                    let at = pos + errors::error_offset(&error);
                    // An item cut short by a poisoned region is explained by that
                    // region's error.
                    if poison.is_none() || at < limit {
                        diagnostics.push(errors::syntax_error(src, pos, at, &error));
                    }
                    break;
                }
            }
        }
    }
    diagnostics.extend(bidi_controls(src));
    diagnostics.sort_by_key(|d| (d.span.start, d.span.end));
    Parse {
        file: SourceFile {
            items,
            span: file_span,
        },
        diagnostics,
    }
}

/// Parses a failed item again with pest's tracking of the tokens it tried, which makes
/// the error message precise but costs over half the parse time when always on.
///
/// The switch is process-wide. A parse that is not looking for detail only gains it, but
/// two detailed parses at once would race: the first to finish would switch detail off
/// under the other, whose error would then be placed elsewhere (CI saw it as a chunked
/// parse disagreeing with the whole one). So detailed parses take turns; errors are rare,
/// and the turn costs nothing when no other thread is reporting one.
fn detailed_error(item: &str) -> pest::error::Error<Rule> {
    static DETAIL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let turn = DETAIL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    pest::set_error_detail(true);
    let result = SapParser::parse(Rule::item_entry, item);
    pest::set_error_detail(false);
    drop(turn);
    match result {
        Err(error) => error,
        Ok(_) => unreachable!("the same input parsed differently"),
    }
}

/// Skips whitespace and comments (not doc comments) from `pos`; clamps to the end.
fn skip_trivia(src: &str, mut pos: usize) -> usize {
    let bytes = src.as_bytes();
    pos = pos.min(bytes.len());
    loop {
        while pos < bytes.len() && matches!(bytes[pos], b' ' | b'\t' | b'\r' | b'\n') {
            pos += 1;
        }
        let rest = &bytes[pos..];
        if rest.starts_with("\u{FEFF}".as_bytes()) {
            pos += 3;
        } else if is_plain_comment(rest) {
            while pos < bytes.len() && bytes[pos] != b'\n' {
                pos += 1;
            }
        } else if rest.starts_with(b"/*") {
            match src[pos + 2..].find("*/") {
                Some(n) => pos += 2 + n + 2,
                None => return bytes.len(),
            }
        } else {
            return pos;
        }
    }
}

/// `//` and `////…` are comments; `///` is a doc comment, which the grammar sees.
fn is_plain_comment(rest: &[u8]) -> bool {
    let doc = rest.starts_with(b"///") && !rest.starts_with(b"////");
    rest.starts_with(b"//") && !doc
}
