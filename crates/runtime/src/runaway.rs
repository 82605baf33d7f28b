//! A model that repeats itself: small models, unconstrained or constrained only to JSON,
//! fall into loops (`1+1+1+…`, the same list element again and again) and write until
//! the output limit, which on a small machine takes minutes. Read as the answer streams
//! in, [`repeats_itself`] tells such a tail early; the provider then stops reading
//! (closing the connection stops the server), and the answer is treated as cut off, with
//! the repetition trimmed to one copy by [`trim`].

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
