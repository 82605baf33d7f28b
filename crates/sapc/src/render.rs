//! Diagnostics for people (miette), for machines (JSON lines) and for CI (GitHub
//! workflow commands).

use std::fmt;
use std::io::Write;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use syntax::{Diagnostic, LineIndex, Severity, Span};

use crate::Format;

/// One input file: its name, its text, and a line index for positions.
pub struct SourceText {
    pub name: String,
    pub text: String,
    /// Where decoding as UTF-8 failed, if it did; the text is then the valid prefix.
    pub invalid_utf8_at: Option<usize>,
    pub lines: LineIndex,
    /// The text again, with the name, as miette wants it.
    named: CharColumns,
}

/// A file's text for miette, whose `file:line:column` counts characters, as the JSON
/// and GitHub formats and editors do (miette's own counts bytes), and not a leading
/// byte-order mark.
#[derive(Debug)]
pub struct CharColumns {
    pub name: String,
    pub text: String,
}

impl SourceCode for CharColumns {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let inner = self.text.read_span(span, before, after)?;
        let at = span.offset().min(self.text.len());
        let column = match self.text.get(..at) {
            // Without context lines the column is the span's; with them, 0.
            Some(head) if before == 0 && inner.column() > 0 => match head.rfind('\n') {
                Some(i) => head[i + 1..].chars().count(),
                // Only the file's first line can start with a byte-order mark.
                None => head
                    .strip_prefix('\u{feff}')
                    .unwrap_or(head)
                    .chars()
                    .count(),
            },
            _ => inner.column(),
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line(),
            column,
            inner.line_count(),
        )))
    }
}

impl SourceText {
    pub fn new(name: String, bytes: Vec<u8>) -> SourceText {
        let (text, invalid_utf8_at) = match String::from_utf8(bytes) {
            Ok(text) => (text, None),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(at);
                (String::from_utf8(bytes).unwrap_or_default(), Some(at))
            }
        };
        let lines = LineIndex::new(&text);
        let named = CharColumns {
            name: name.clone(),
            text: text.clone(),
        };
        SourceText {
            name,
            text,
            invalid_utf8_at,
            lines,
            named,
        }
    }

    /// The one diagnostic of a file that is not UTF-8.
    pub fn utf8_diagnostics(&self) -> Vec<Diagnostic> {
        let at = self.invalid_utf8_at.unwrap_or(0);
        vec![
            Diagnostic::error("E0009", Span::new(at, at), "this file is not valid UTF-8")
                .with_label(format!("invalid byte at offset {at}"))
                .with_help("sap source files must be UTF-8 text"),
        ]
    }

    /// One-based line and column of a byte offset (a leading byte-order mark is not a
    /// column).
    fn position(&self, offset: u32) -> (u32, u32) {
        let lc = self.lines.line_col(&self.text, offset);
        let bom = lc.line == 0 && lc.col > 0 && self.text.starts_with('\u{feff}');
        (lc.line + 1, lc.col + 1 - u32::from(bom))
    }
}

pub struct Printer {
    format: Format,
    handler: GraphicalReportHandler,
}

impl Printer {
    pub fn new(format: Format) -> Printer {
        let color = std::env::var_os("NO_COLOR").is_none()
            && std::io::IsTerminal::is_terminal(&std::io::stderr());
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        Printer {
            format,
            handler: GraphicalReportHandler::new_themed(theme).with_context_lines(1),
        }
    }

    pub fn print(&mut self, source: &SourceText, diagnostics: &[Diagnostic]) {
        match self.format {
            Format::Human => {
                let mut err = std::io::stderr().lock();
                for d in diagnostics {
                    let _ = writeln!(err, "{}", self.human(source, d));
                }
            }
            Format::Json => {
                let mut out = std::io::stdout().lock();
                for d in diagnostics {
                    let _ = writeln!(out, "{}", json(source, d));
                }
            }
            Format::Github => {
                let mut out = std::io::stdout().lock();
                for d in diagnostics {
                    let _ = writeln!(out, "{}", github(source, d));
                }
            }
        }
    }

    pub fn human(&self, source: &SourceText, d: &Diagnostic) -> String {
        let report = Report {
            source,
            diagnostic: d,
        };
        let mut out = String::new();
        if self.handler.render_report(&mut out, &report).is_err() {
            // Rendering can only fail on a span outside the text; fall back to one line.
            let (line, col) = source.position(d.span.start);
            out = format!(
                "{}[{}]: {} at {}:{line}:{col}",
                d.severity.as_str(),
                d.code,
                d.message,
                source.name
            );
        }
        out
    }
}

/// A diagnostic with its source, in the shape miette renders.
struct Report<'a> {
    source: &'a SourceText,
    diagnostic: &'a Diagnostic,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

impl std::error::Error for Report<'_> {}

fn source_span(span: Span) -> SourceSpan {
    SourceSpan::new((span.start as usize).into(), span.len())
}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diagnostic
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source.named as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let d = self.diagnostic;
        let primary = LabeledSpan::new_primary_with_span(
            (!d.label.is_empty()).then(|| d.label.clone()),
            source_span(d.span),
        );
        let secondary = d
            .secondary
            .iter()
            .map(|l| LabeledSpan::new_with_span(Some(l.message.clone()), source_span(l.span)));
        Some(Box::new(std::iter::once(primary).chain(secondary)))
    }
}

fn json(source: &SourceText, d: &Diagnostic) -> String {
    let (line, column) = source.position(d.span.start);
    let (end_line, end_column) = source.position(d.span.end);
    let labels: Vec<serde_json::Value> = d
        .secondary
        .iter()
        .map(|l| {
            let (line, column) = source.position(l.span.start);
            serde_json::json!({
                "range": { "start": l.span.start, "end": l.span.end },
                "line": line,
                "column": column,
                "message": l.message,
            })
        })
        .collect();
    serde_json::json!({
        "file": source.name,
        "range": { "start": d.span.start, "end": d.span.end },
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "severity": d.severity.as_str(),
        "code": d.code,
        "message": d.message,
        "label": d.label,
        "labels": labels,
        "help": d.help,
    })
    .to_string()
}

/// A GitHub Actions workflow command, e.g.
/// `::error file=a.sap,line=3,col=5,endLine=3,endColumn=9,title=E0001::expected …`.
fn github(source: &SourceText, d: &Diagnostic) -> String {
    let (line, col) = source.position(d.span.start);
    let (end_line, end_col) = source.position(d.span.end);
    let kind = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut message = d.message.clone();
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    format!(
        "::{kind} file={},line={line},col={col},endLine={end_line},endColumn={end_col},title={}::{}",
        escape_property(&source.name),
        d.code,
        escape_data(&message)
    )
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}
