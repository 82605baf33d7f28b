//! Byte offset ↔ line/column conversion. Columns are counted in Unicode scalar values
//! (what people and most editors call a column); the language server converts to UTF-16
//! itself.

#[derive(Clone, Debug)]
pub struct LineIndex {
    /// Byte offset of the start of every line.
    line_starts: Vec<u32>,
}

/// Zero-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineCol {
    pub line: u32,
    pub col: u32,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        LineIndex { line_starts }
    }

    /// The line and column of `offset`, which is clamped to the text.
    pub fn line_col(&self, text: &str, offset: u32) -> LineCol {
        let offset = (offset as usize).min(text.len());
        let line = self.line_starts.partition_point(|&s| s as usize <= offset) - 1;
        let start = self.line_starts[line] as usize;
        // An offset inside a multi-byte character counts as that character's column.
        let col = text[start..]
            .char_indices()
            .take_while(|&(i, _)| start + i < offset)
            .count();
        LineCol {
            line: line as u32,
            col: col as u32,
        }
    }

    /// Byte offset of the start of a zero-based line, or the end of the text.
    pub fn line_start(&self, line: u32) -> Option<u32> {
        self.line_starts.get(line as usize).copied()
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }
}
