//! Runtime errors: what went wrong, at which call site, with the model's last answer.

use std::fmt;

/// Where an LLM call is in the source, for errors and traces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallSite {
    /// The sap function the call is in.
    pub function: String,
    pub file: String,
    /// One-based.
    pub line: u32,
    /// One-based.
    pub column: u32,
    /// Byte range in the file.
    pub span: (u32, u32),
    /// The functions whose frames the call's context is made of, outermost first.
    pub path: Vec<String>,
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{} in `{}`",
            self.file, self.line, self.column, self.function
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The provider could not be reached or answered with an error.
    Provider,
    /// The answers never fitted the schema, after repairs and re-asks.
    InvalidAnswer,
    /// The model refused.
    Refusal,
    /// The answer was cut off at the token limit.
    Truncated,
    /// A budget of the run was exceeded.
    Budget,
    /// The replay transcript has no answer for the request.
    NotRecorded,
    /// The program asked for an answer against a schema that is not a JSON Schema.
    BadSchema,
    /// The run's journal (`--journal`) could not be used, or no longer matches.
    Journal,
    /// The run was cancelled by its caller (an editor's `session/cancel`, Ctrl-C in
    /// Python) while it waited for a model or a tool.
    Cancelled,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    pub kind: ErrorKind,
    /// Boxed: the error stays small on the paths that return it.
    pub site: Option<Box<CallSite>>,
    pub message: String,
    /// The model's last answer, when there was one.
    pub raw_answer: Option<String>,
}

impl RuntimeError {
    pub fn new(
        kind: ErrorKind,
        site: Option<&CallSite>,
        message: impl Into<String>,
    ) -> RuntimeError {
        RuntimeError {
            kind,
            site: site.cloned().map(Box::new),
            message: message.into(),
            raw_answer: None,
        }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(site) = &self.site {
            write!(f, " (at {site})")?;
        }
        if let Some(answer) = &self.raw_answer {
            let shown: String = answer.chars().take(500).collect();
            write!(f, "\nthe model's last answer: {shown}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuntimeError {}

/// `text` cut to at most `most` characters, with `…` where it was cut: a long answer or
/// tool result quoted in a message.
pub fn shorten(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
