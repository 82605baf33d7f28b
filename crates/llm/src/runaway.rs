//! A model that repeats itself: small models, unconstrained or constrained only to JSON,
//! fall into loops (`1+1+1+…`, the same list element again and again) and write until
//! the output limit, which on a small machine takes minutes. Read as the answer streams
//! in, [`repeats_itself`] tells such a tail early; the provider then stops reading
//! (closing the connection stops the server), and the answer is treated as cut off, with
//! the repetition trimmed to one copy by [`trim`].
//!
//! A model can also go on writing inside one string: it has ended the answer in its
//! mind (`"]\n}\n\nThe meeting note was summarized…`), but the JSON grammar holds it
//! inside the string, where any text is allowed, until the output limit. [`Texts`]
//! follows the answer's strings as it streams in and tells when one has run past what
//! a text of the answer may take (`LlmRequest::max_text_tokens`).

/// The shortest repeating tail that counts, in bytes: long enough that no answer a model
/// means to give ends this way (a list of 150 zeros would, and is asked again).
const TAIL: usize = 600;
/// The longest period looked for, in bytes (a repeated list element with its
/// indentation fits).
const PERIOD: usize = 64;

/// The period of the repeating tail of `text`, if its last [`TAIL`] bytes repeat one.
fn period(text: &[u8]) -> Option<usize> {
    if text.len() < TAIL + PERIOD {
        return None;
    }
    let tail = text.len() - TAIL;
    (1..=PERIOD).find(|&p| (tail..text.len()).all(|i| text[i] == text[i - p]))
}

/// Whether `text` ends in one short pattern repeated for [`TAIL`] bytes.
pub fn repeats_itself(text: &str) -> bool {
    period(text.as_bytes()).is_some()
}

/// `text` up to the end of the first copy of its repeating tail (all of it when it has
/// none), cut at a character boundary.
pub fn trim(text: &str) -> &str {
    let bytes = text.as_bytes();
    let Some(p) = period(bytes) else {
        return text;
    };
    // Walk back while the text still repeats with period `p`.
    let mut start = bytes.len() - TAIL;
    while start > 0 && bytes[start - 1] == bytes[start - 1 + p] {
        start -= 1;
    }
    let mut end = (start + p).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    &text[..end]
}

/// The strings of a JSON answer as it streams in: whether the one being written has
/// run past its budget.
#[derive(Clone, Copy)]
pub struct Texts {
    /// What a string may hold: characters (four a token), or pieces (tokens) when fed
    /// one token at a time ([`Texts::per_token`]).
    limit: usize,
    per_piece: bool,
    inside: bool,
    escaped: bool,
    /// Characters of the string being written.
    run: usize,
}

impl Texts {
    pub fn new(max_text_tokens: u32) -> Texts {
        Texts {
            limit: max_text_tokens as usize * 4,
            per_piece: false,
            inside: false,
            escaped: false,
            run: 0,
        }
    }

    /// Counting tokens rather than characters: each piece fed is one token (a generator
    /// in this process, which sees them).
    pub fn per_token(max_text_tokens: u32) -> Texts {
        Texts {
            limit: max_text_tokens as usize,
            per_piece: true,
            ..Texts::new(max_text_tokens)
        }
    }

    /// Whether `piece`, written next, would take the string being written past the
    /// limit (a generator that can still choose the next token closes the string
    /// instead). Changes nothing.
    pub fn would_run_on(&self, piece: &str) -> bool {
        let mut next = *self;
        next.feed(piece)
    }

    /// Follows `piece`, the answer's next text; true when the string being written has
    /// run past the limit (the answer is then stopped, as cut off).
    pub fn feed(&mut self, piece: &str) -> bool {
        let before = self.run;
        let mut opened = false;
        for c in piece.chars() {
            if !self.inside {
                if c == '"' {
                    self.inside = true;
                    self.run = 0;
                    opened = true;
                }
            } else if self.escaped {
                self.escaped = false;
                self.run += 1;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.inside = false;
            } else {
                self.run += 1;
            }
        }
        if self.per_piece && self.inside {
            // The piece is one token of the string, unless it opened the string.
            self.run = if opened { 0 } else { before + 1 };
        }
        self.inside && self.run > self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_are_found_and_trimmed_to_one_copy() {
        let text = format!("{{\"steps\": [\"2019-01-27 {}", "1+".repeat(400));
        assert!(repeats_itself(&text));
        assert_eq!(trim(&text), "{\"steps\": [\"2019-01-27 1+");
        let lines = format!("{{\"fields\": [{}", "\n    \"items_list_List\",".repeat(40));
        assert!(repeats_itself(&lines));
        assert_eq!(trim(&lines), "{\"fields\": [\n    \"items_list_List\",");
    }

    #[test]
    fn a_text_counted_in_tokens_is_told_at_its_token_budget() {
        let mut texts = Texts::per_token(3);
        assert!(!texts.feed("{\"coffee\": \""));
        assert!(!texts.feed("The Review"));
        assert!(!texts.feed(": 1,"));
        assert!(!texts.feed(" The"));
        assert!(texts.would_run_on(" Review"));
        assert!(!texts.would_run_on("\""), "a closing quote ends it");
        assert!(
            !texts.would_run_on("\", \""),
            "and a new string starts afresh"
        );
    }

    #[test]
    fn a_text_that_runs_on_is_told_and_a_long_answer_of_short_texts_is_not() {
        let mut texts = Texts::new(10);
        assert!(!texts.feed(r#"{"topic": "notes", "decisions": ["#));
        assert!(!texts.feed(&format!(r#""{}", "#, "word ".repeat(7))));
        // Escapes count once, and a quote escaped does not end the string.
        assert!(!texts.feed(r#""he said \"no\" to "#));
        assert!(texts.feed(&"and on ".repeat(4)));
        let mut many = Texts::new(10);
        for _ in 0..100 {
            assert!(!many.feed(r#""a short one", "#));
        }
    }

    #[test]
    fn ordinary_answers_do_not_count() {
        let prose: String = (0..200)
            .map(|i| format!("step {i} adds {} to the total. ", i * 7))
            .collect();
        assert!(!repeats_itself(&prose));
        assert!(!repeats_itself(&"ab".repeat(100)), "too short to tell");
        assert_eq!(trim("no loop here"), "no loop here");
        let multibyte = format!("«{}", "é…".repeat(400));
        assert!(repeats_itself(&multibyte));
        assert!(trim(&multibyte).len() < 12);
    }
}
