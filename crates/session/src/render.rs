//! Diagnostics for people (miette), for machines (JSON lines) and for CI (GitHub
//! workflow commands).

use std::fmt;
use std::io::Write;

use codegen_jit::ExecError;
use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use syntax::{Diagnostic, LineIndex, Severity, Span};

/// One input file: its name, its text, and a line index for positions.
#[derive(Clone, Debug)]
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
#[derive(Clone, Debug)]
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

/// How diagnostics are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Rendered for people, on standard error.
    Human,
    /// One JSON object per diagnostic per line, on standard output.
    Json,
    /// GitHub Actions workflow commands, on standard output.
    Github,
}

pub struct Printer {
    format: Format,
    handler: GraphicalReportHandler,
}

impl Printer {
    pub fn new(format: Format) -> Printer {
        let theme = if stderr_color() {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        Printer {
            format,
            handler: GraphicalReportHandler::new_themed(theme).with_context_lines(1),
        }
    }

    /// Renders for people, without colour: the text of an error a library caller gets.
    pub fn plain() -> Printer {
        Printer {
            format: Format::Human,
            handler: GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
                .with_context_lines(1),
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

/// Whether what goes to standard error may be coloured: it is a terminal and `NO_COLOR`
/// is not set.
pub fn stderr_color() -> bool {
    std::env::var_os("NO_COLOR").is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// `9990` → `9,990`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A runtime error as a diagnostic at its span, with the sap call stack.
pub fn render_error(files: &[Option<(String, String)>], e: &ExecError, color: bool) -> String {
    let file = |i: u32| files.get(i as usize).and_then(Option::as_ref);
    let position = |span: ir::SrcSpan| match file(span.file) {
        Some((name, text)) => {
            let lc = syntax::LineIndex::new(text).line_col(text, span.start);
            format!("{name}:{}:{}", lc.line + 1, lc.col + 1)
        }
        None => "an unknown place".to_owned(),
    };
    // Runs of the same frame (deep recursion) are folded, so that a stack overflow
    // prints a screenful: the first two calls, then how many more.
    let mut stack = String::new();
    let frames = &e.stack;
    let mut i = 0;
    while i < frames.len() {
        let same = frames[i..]
            .iter()
            .take_while(|f| f.function == frames[i].function && f.span == frames[i].span)
            .count();
        let shown = if same > 4 { 2 } else { same };
        for frame in &frames[i..i + shown] {
            stack.push_str(&format!("\n    in `{}`", frame.function));
            if let Some(span) = frame.span {
                stack.push_str(&format!(" at {}", position(span)));
            }
        }
        if shown < same {
            let more = same - shown;
            stack.push_str(&format!(
                "\n    … {} more call{} of `{}`",
                thousands(more),
                if more == 1 { "" } else { "s" },
                frames[i].function
            ));
        }
        i += same;
    }
    // An error before the program ran (a declaration the host cannot serve) has no stack.
    let mut help = if stack.is_empty() {
        String::new()
    } else {
        format!("sap call stack (innermost first):{stack}")
    };
    if let Some(answer) = &e.raw_answer {
        let shown: String = answer.chars().take(300).collect();
        help.push_str(&format!("\nthe model's last answer: {shown}"));
    }
    let (name, text) = e
        .span
        .and_then(|s| file(s.file))
        .or_else(|| {
            files
                .iter()
                .flatten()
                .find(|(n, _)| hir::prelude_source(n).is_none())
        })
        .cloned()
        .unwrap_or_default();
    let report = RunReport {
        message: e.message.clone(),
        span: e
            .span
            .filter(|s| file(s.file).is_some())
            .map(|s| (s.start as usize, (s.end - s.start) as usize)),
        help,
        source: CharColumns { name, text },
    };
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    if GraphicalReportHandler::new_themed(theme)
        .render_report(&mut out, &report)
        .is_err()
    {
        out = format!("runtime error: {}\n{}", e.message, report.help);
    }
    out
}

#[derive(Debug)]
struct RunReport {
    message: String,
    span: Option<(usize, usize)>,
    help: String,
    source: CharColumns,
}

impl std::fmt::Display for RunReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "runtime error: {}", self.message)
    }
}

impl std::error::Error for RunReport {}

impl miette::Diagnostic for RunReport {
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        (!self.help.is_empty()).then(|| Box::new(&self.help) as Box<dyn std::fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let (start, len) = self.span?;
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(
                Some("here".to_owned()),
                SourceSpan::new(start.into(), len),
            ),
        )))
    }
}
