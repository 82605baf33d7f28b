//! Turns a pest failure into a diagnostic that reads as prose: what was expected, in
//! which construct, and what was found instead — never a list of grammar rule names.
//!
//! The construct comes from the innermost bracket left open before the error (found by
//! re-lexing the item): "expected `)` after the arguments of `add`".

use pest::error::{Error, ErrorVariant, InputLocation};

use crate::Span;
use crate::diagnostic::Diagnostic;
use crate::grammar::Rule;
use crate::scan::{Event, lex};

/// Where the error is, relative to the parsed slice: the furthest point any rule or
/// token reached (pest's own location only follows rules, so `let x 5` would point at
/// `let` rather than at `5`).
pub(crate) fn error_offset(error: &Error<Rule>) -> usize {
    match furthest_tokens(error) {
        Some((at, tokens)) if at > rule_offset(error) && !tokens.is_empty() => at,
        _ => rule_offset(error),
    }
}

/// The furthest position pest reached and the tokens it tried there, minus those that
/// say nothing. pest does not export its token type; its `Display` is the token as
/// written, `a..z` for ranges and `BUILTIN_RULE` for builtins.
fn furthest_tokens(error: &Error<Rule>) -> Option<(usize, Vec<String>)> {
    let attempts = error.parse_attempts()?;
    let tokens = attempts
        .expected_tokens()
        .into_iter()
        .map(|t| t.to_string())
        .filter(|t| {
            t.chars().all(|c| c.is_ascii_graphic())
                && t != "BUILTIN_RULE"
                && !(t.len() > 2 && t.contains(".."))
                && !matches!(t.as_str(), "//" | "/*" | "///")
                && !is_keyword_fragment(t)
        })
        .collect();
    Some((attempts.max_position, tokens))
}

/// Words among the tried tokens come from the `keyword` rule's trie (`"e" ~ ("lse" |
/// …)`) behind the `kw` guards: pieces nobody wrote. The keywords a construct expects in
/// its middle are rules of their own (`kw_in`, …) and reach the message that way.
fn is_keyword_fragment(token: &str) -> bool {
    token.chars().all(|c| c.is_ascii_lowercase())
}

fn rule_offset(error: &Error<Rule>) -> usize {
    match error.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    }
}

/// What the parser could have accepted at the error position.
#[derive(Default)]
struct Expected {
    /// Punctuation and keywords, in source spelling.
    tokens: Vec<String>,
    /// Categories: "an expression", "a type", ….
    things: Vec<&'static str>,
    /// The parser was ready to continue what came before (an operator, another
    /// statement, an `else`): so that construct was complete, and its enclosing bracket
    /// could have been closed here.
    may_close: bool,
}

impl Expected {
    fn add_thing(&mut self, thing: &'static str) {
        if !self.things.contains(&thing) {
            self.things.push(thing);
        }
    }

    fn add_token(&mut self, token: &str) {
        if !self.tokens.iter().any(|t| t == token) {
            self.tokens.push(token.to_owned());
        }
    }

    fn has(&self, token: &str) -> bool {
        self.tokens.iter().any(|t| t == token)
    }
}

/// Tokens that only continue an expression; listing them hides what is really missing.
const CONTINUATIONS: &[&str] = &[
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", ".", "(", "[",
    "::", "+=", "-=", "*=", "/=", "%=",
];

fn collect_expected(error: &Error<Rule>) -> Expected {
    let mut expected = Expected::default();
    let mut continues_expression = false;
    let at = error_offset(error);
    if at == rule_offset(error)
        && let ErrorVariant::ParsingError { positives, .. } = &error.variant
    {
        for rule in positives {
            match describe_rule(*rule) {
                Describe::Token(t) => expected.add_token(t),
                Describe::Continuation => {
                    continues_expression = true;
                    expected.may_close = true;
                }
                Describe::Thing(t) => {
                    // After a whole statement the block may end.
                    expected.may_close |= t == "a statement";
                    expected.add_thing(t);
                }
                Describe::Nothing => {}
            }
        }
    }
    if let Some((furthest, tokens)) = furthest_tokens(error)
        && furthest == at
    {
        for token in tokens {
            expected.add_token(&token);
        }
    }
    summarize_tokens(&mut expected);
    // Operators and postfix tokens are only worth naming when nothing else fits.
    let structural: Vec<String> = expected
        .tokens
        .iter()
        .filter(|t| !CONTINUATIONS.contains(&t.as_str()))
        .cloned()
        .collect();
    if !structural.is_empty() || !expected.things.is_empty() {
        expected.tokens = structural;
    } else if continues_expression && expected.tokens.is_empty() {
        expected.add_thing("an operator");
    }
    expected
}

const ITEM_KEYWORDS: &[&str] = &["fn", "extern", "struct", "enum", "type", "use"];
const EXPRESSION_STARTS: &[&str] = &[
    "\"", "\"\"\"", "_", "true", "false", "if", "select", "parallel", "(", "[", "{", "-", "!",
];
const STATEMENT_STARTS: &[&str] = &["let", "return", "break", "continue", "while", "for"];

/// Replaces the tokens that only spell out a category ("`\"`, `_`, `true`, `if`, …") by
/// the category ("an expression").
fn summarize_tokens(expected: &mut Expected) {
    let has = |e: &Expected, set: &[&str]| set.iter().filter(|t| e.has(t)).count();
    if has(expected, ITEM_KEYWORDS) >= 3 {
        expected
            .tokens
            .retain(|t| !ITEM_KEYWORDS.contains(&t.as_str()));
        expected.add_thing("an item (`fn`, `extern fn`, `struct`, `enum`, `type` or `use`)");
    }
    if has(expected, STATEMENT_STARTS) >= 3 {
        expected
            .tokens
            .retain(|t| !STATEMENT_STARTS.contains(&t.as_str()));
        expected.add_thing("a statement");
        expected.may_close = true;
    }
    // Only tokens that cannot also continue an expression show that one may start here.
    if has(expected, &EXPRESSION_STARTS[..8]) >= 3 {
        expected.add_thing("an expression");
    }
    if expected.things.contains(&"an expression") || expected.things.contains(&"a statement") {
        expected
            .tokens
            .retain(|t| !EXPRESSION_STARTS.contains(&t.as_str()));
    }
    if expected.things.contains(&"a statement") {
        expected.things.retain(|t| *t != "an expression");
    }
    if expected.things.contains(&"a name") || expected.things.contains(&"a type") {
        expected.tokens.retain(|t| t != "_");
    }
}

enum Describe {
    Thing(&'static str),
    Token(&'static str),
    Continuation,
    Nothing,
}

fn describe_rule(rule: Rule) -> Describe {
    use Describe::*;
    match rule {
        Rule::ident | Rule::path => Thing("a name"),
        Rule::type_expr | Rule::named_type | Rule::unit_type => Thing("a type"),
        Rule::expr
        | Rule::expr_nostruct
        | Rule::term
        | Rule::term_nostruct
        | Rule::neg
        | Rule::not
        | Rule::if_expr
        | Rule::select_expr
        | Rule::parallel_for
        | Rule::bool_lit
        | Rule::float_lit
        | Rule::int_lit
        | Rule::string_lit
        | Rule::unit_lit
        | Rule::paren
        | Rule::list_lit
        | Rule::struct_lit
        | Rule::placeholder => Thing("an expression"),
        Rule::stmt
        | Rule::let_stmt
        | Rule::assign_stmt
        | Rule::return_stmt
        | Rule::break_stmt
        | Rule::continue_stmt
        | Rule::while_stmt
        | Rule::for_stmt
        | Rule::expr_stmt => Thing("a statement"),
        Rule::item
        | Rule::item_entry
        | Rule::fn_item
        | Rule::extern_fn
        | Rule::struct_item
        | Rule::enum_item
        | Rule::alias_item
        | Rule::use_item => Thing("an item (`fn`, `extern fn`, `struct`, `enum`, `type` or `use`)"),
        Rule::param => Thing("a parameter"),
        Rule::params => Token("("),
        Rule::field => Thing("a field"),
        Rule::variant => Thing("a variant"),
        Rule::field_init => Thing("a field"),
        Rule::select_arm => Thing("a `select` arm"),
        Rule::block => Token("{"),
        Rule::assign_op => Token("="),
        Rule::else_if | Rule::else_block | Rule::type_args => Continuation,
        Rule::kw_fn => Token("fn"),
        Rule::kw_if => Token("if"),
        Rule::kw_in => Token("in"),
        Rule::kw_as => Token("as"),
        Rule::kw_for => Token("for"),
        Rule::use_glob => Token("*"),
        Rule::use_group => Token("{"),
        Rule::or
        | Rule::and
        | Rule::eq
        | Rule::ne
        | Rule::le
        | Rule::ge
        | Rule::lt
        | Rule::gt
        | Rule::add
        | Rule::sub
        | Rule::mul
        | Rule::div
        | Rule::rem
        | Rule::call_args
        | Rule::index
        | Rule::inject
        | Rule::field_access => Continuation,
        _ => Nothing,
    }
}

/// The innermost bracket still open at `at`, lexing from the start of the item.
fn open_bracket(src: &str, item_start: usize, at: usize) -> Option<(usize, u8)> {
    let mut stack = Vec::new();
    lex(src, item_start, at.min(src.len()), false, |event| {
        match event {
            Event::Open(p, b) => stack.push((p, b)),
            Event::Close(_) => {
                stack.pop();
            }
            _ => {}
        }
        true
    });
    stack.pop()
}

/// The end of the last token before `at` (skipping whitespace and comments).
fn last_token_end(src: &str, item_start: usize, at: usize) -> usize {
    let mut end = item_start;
    lex(src, item_start, at.min(src.len()), true, |event| {
        match event {
            Event::TokenEnd(e) => end = e,
            Event::Open(p, _) => end = p + 1,
            Event::Close(p) => end = p + 1,
            _ => {}
        }
        true
    });
    end
}

/// The word that ends just before `end`, skipping whitespace.
fn word_before(src: &str, end: usize) -> Option<&str> {
    let head = src[..end].trim_end();
    let start = head
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() || c == '_')
        .last()
        .map(|(i, _)| i)?;
    Some(&head[start..])
}

/// The start of the word that ends just before `end`.
fn word_start_before(src: &str, end: usize) -> usize {
    let head = src[..end].trim_end();
    head.char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() || c == '_')
        .last()
        .map_or(head.len(), |(i, _)| i)
}

/// Describes the construct an open bracket belongs to: "the arguments of `add`".
fn construct(src: &str, item_start: usize, open: usize, bracket: u8) -> String {
    let name = word_before(src, open);
    let before_name = name.map(|_| word_before(src, word_start_before(src, open)));
    let first_brace = src[item_start..open].find('{').is_none();
    let item_name = || {
        let mut words = src[item_start..].split(|c: char| !(c.is_alphanumeric() || c == '_'));
        words
            .find(|w| !w.is_empty() && !matches!(*w, "fn" | "extern"))
            .map(str::to_owned)
    };
    match bracket {
        b'(' => match (name, before_name.flatten()) {
            (Some(n), Some("fn")) => format!("the parameters of `{n}`"),
            (Some(n), _) if !is_keyword(n) => format!("the arguments of `{n}`"),
            _ => "the parenthesized expression".to_owned(),
        },
        b'[' => match name {
            Some(_) => "the index".to_owned(),
            None => "the list".to_owned(),
        },
        _ => match (name, before_name.flatten()) {
            (Some(n), Some("struct")) => format!("the fields of `{n}`"),
            (Some(n), Some("enum")) => format!("the variants of `{n}`"),
            (Some("select"), _) => "the `select`".to_owned(),
            _ if first_brace
                && src[item_start..]
                    .trim_start_matches(['/', ' '])
                    .contains("fn") =>
            {
                match item_name() {
                    Some(n) => format!("the body of `{n}`"),
                    None => "the function body".to_owned(),
                }
            }
            _ => "this block".to_owned(),
        },
    }
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "fn" | "extern"
            | "struct"
            | "enum"
            | "type"
            | "use"
            | "let"
            | "if"
            | "else"
            | "while"
            | "for"
            | "in"
            | "break"
            | "continue"
            | "return"
            | "select"
            | "parallel"
            | "as"
            | "true"
            | "false"
    )
}

/// A character people paste for one of sap's: its Unicode name and what to write
/// instead (`None`: an invisible character, to delete).
fn lookalike(c: char) -> Option<(&'static str, Option<&'static str>)> {
    Some(match c {
        '\u{2212}' => ("MINUS SIGN", Some("-")),
        '\u{2013}' => ("EN DASH", Some("-")),
        '\u{2014}' => ("EM DASH", Some("-")),
        '\u{00D7}' => ("MULTIPLICATION SIGN", Some("*")),
        '\u{00F7}' => ("DIVISION SIGN", Some("/")),
        '\u{2260}' => ("NOT EQUAL TO", Some("!=")),
        '\u{2264}' => ("LESS-THAN OR EQUAL TO", Some("<=")),
        '\u{2265}' => ("GREATER-THAN OR EQUAL TO", Some(">=")),
        '\u{2192}' => ("RIGHTWARDS ARROW", Some("->")),
        '\u{21D2}' => ("RIGHTWARDS DOUBLE ARROW", Some("=>")),
        '\u{201C}' => ("LEFT DOUBLE QUOTATION MARK", Some("\"")),
        '\u{201D}' => ("RIGHT DOUBLE QUOTATION MARK", Some("\"")),
        '\u{2018}' => ("LEFT SINGLE QUOTATION MARK", Some("\"")),
        '\u{2019}' => ("RIGHT SINGLE QUOTATION MARK", Some("\"")),
        '\u{FF08}' => ("FULLWIDTH LEFT PARENTHESIS", Some("(")),
        '\u{FF09}' => ("FULLWIDTH RIGHT PARENTHESIS", Some(")")),
        '\u{FF0C}' => ("FULLWIDTH COMMA", Some(",")),
        '\u{FF1A}' => ("FULLWIDTH COLON", Some(":")),
        '\u{FF1B}' => ("FULLWIDTH SEMICOLON", Some(";")),
        '\u{FF1D}' => ("FULLWIDTH EQUALS SIGN", Some("=")),
        '\u{00A0}' => ("NO-BREAK SPACE", None),
        '\u{200B}' => ("ZERO WIDTH SPACE", None),
        '\u{200C}' => ("ZERO WIDTH NON-JOINER", None),
        '\u{200D}' => ("ZERO WIDTH JOINER", None),
        '\u{2060}' => ("WORD JOINER", None),
        '\u{FEFF}' => ("ZERO WIDTH NO-BREAK SPACE", None),
        _ => return None,
    })
}

/// A short description of the source at `at`: "`foo`", "a string", "the end of the file".
pub fn found(src: &str, at: usize) -> (String, Span) {
    let rest = &src[at.min(src.len())..];
    let Some(c) = rest.chars().next() else {
        return (
            "the end of the file".to_owned(),
            Span::new(src.len(), src.len()),
        );
    };
    if rest.starts_with("///") {
        let len = rest.find('\n').unwrap_or(rest.len());
        return ("a doc comment".to_owned(), Span::new(at, at + len));
    }
    if c.is_alphanumeric() || c == '_' {
        let len = rest
            .char_indices()
            .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
            .map_or(rest.len(), |(i, _)| i);
        let word = &rest[..len];
        let shown: String = word.chars().take(30).collect();
        let text = if c.is_ascii_digit() {
            format!("the number `{shown}`")
        } else {
            format!("`{shown}`")
        };
        return (text, Span::new(at, at + len));
    }
    if c == '"' {
        return ("a string".to_owned(), Span::new(at, at + 1));
    }
    for op in [
        "==", "!=", "<=", ">=", "&&", "||", "->", "=>", "::", "+=", "-=", "*=", "/=", "%=",
    ] {
        if rest.starts_with(op) {
            return (format!("`{op}`"), Span::new(at, at + 2));
        }
    }
    if c.is_control() || c == '\u{FFFD}' {
        return (
            format!("the character U+{:04X}", c as u32),
            Span::new(at, at + c.len_utf8()),
        );
    }
    (format!("`{c}`"), Span::new(at, at + c.len_utf8()))
}

fn could_start_expression(src: &str, at: usize) -> bool {
    let rest = &src[at.min(src.len())..];
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    match rest.chars().next() {
        Some(c) if c.is_alphanumeric() || c == '_' => {
            !is_keyword(&word)
                || matches!(
                    word.as_str(),
                    "true" | "false" | "if" | "select" | "parallel"
                )
        }
        Some('-') => !rest.starts_with("->"),
        Some('"' | '(' | '[' | '!') => true,
        _ => false,
    }
}

/// Whether the `{` at `open` holds a comma-separated list (struct fields, enum variants,
/// a struct literal) rather than statements.
fn construct_is_list(src: &str, open: usize) -> bool {
    let before_name = word_before(src, word_start_before(src, open));
    matches!(before_name, Some("struct" | "enum"))
        || word_before(src, open).is_some_and(|w| w.starts_with(|c: char| c.is_uppercase()))
}

/// "after `let`" when the token before the error is a keyword that introduces a name.
fn after_keyword(src: &str, at: usize) -> Option<&str> {
    word_before(src, at).filter(|w| {
        matches!(
            *w,
            "let" | "fn" | "struct" | "enum" | "type" | "use" | "for" | "as" | "extern"
        )
    })
}

fn join_or(parts: &[String]) -> String {
    match parts {
        [] => "something else".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

pub(crate) fn syntax_error(
    src: &str,
    item_start: usize,
    at: usize,
    error: &Error<Rule>,
) -> Diagnostic {
    let expected = collect_expected(error);
    if std::env::var_os("SAP_DEBUG_PEST").is_some() {
        eprintln!(
            "{:?} {:?} {:?} {:?}",
            error.variant,
            furthest_tokens(error),
            expected.tokens,
            expected.things
        );
    }
    let (found_text, found_span) = found(src, at);

    // A doc comment with nothing after it to document.
    let before = src[item_start..at.min(src.len())].trim();
    if !before.is_empty() && before.lines().all(|l| l.trim_start().starts_with("///")) {
        let doc = Span::new(item_start, item_start + before.len());
        return Diagnostic::error("E0001", doc, format!("expected an item after this doc comment, found {found_text}"))
            .with_label("this doc comment documents nothing")
            .with_help("doc comments must stand right before the item, parameter, field or variant they describe");
    }

    // `1abc`: a number with letters glued on.
    if at > 0
        && src.as_bytes()[at - 1].is_ascii_digit()
        && src[at..].starts_with(|c: char| c.is_alphabetic())
    {
        let start = src[..at]
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '_')
            .len();
        let span = Span::new(start, found_span.end as usize);
        return Diagnostic::error("E0001", span, format!("invalid number `{}`", &src[span.range()]))
            .with_label("letters directly after a number")
            .with_help("names cannot start with a digit; put an operator or a space between a number and a name");
    }

    // When the unexpected token starts a new line, the problem is at the end of the
    // previous one ("expected `)` here"), which is where people look.
    let prev_end = last_token_end(src, item_start, at);
    let on_new_line = src[prev_end..at.min(src.len())].contains('\n');
    let (primary, found_label) = if on_new_line {
        (
            Span::new(prev_end, prev_end),
            Some((found_span, format!("found {found_text}"))),
        )
    } else {
        (found_span, None)
    };

    // A character that looks like one of sap's (pasted from a document or a chat), or
    // one that cannot be seen at all. At the start of a line, the error stays at the end
    // of the line before, as every other one does.
    if let Some(c) = src[at.min(src.len())..].chars().next()
        && let Some((name, instead)) = lookalike(c)
    {
        let span = Span::new(at, at + c.len_utf8());
        let code = format!("U+{:04X}", c as u32);
        let (message, label, help) = match instead {
            Some(instead) => (
                format!("`{c}` ({code} {name}) is not `{instead}`"),
                "a lookalike character",
                format!("write `{instead}`"),
            ),
            None => (
                format!("an invisible character ({code} {name})"),
                "an invisible character here",
                "delete it".to_owned(),
            ),
        };
        let d = if on_new_line {
            Diagnostic::error("E0001", primary, message)
                .with_label("the line before ends here")
                .with_secondary(span, label)
        } else {
            Diagnostic::error("E0001", span, message).with_label(label)
        };
        return d.with_help(help);
    }

    // Closing the innermost open bracket is the most useful suggestion when it fits.
    if let Some((open, bracket)) = open_bracket(src, item_start, at) {
        let closer = match bracket {
            b'(' => ")",
            b'[' => "]",
            _ => "}",
        };
        let only_closing = expected.tokens.iter().all(|t| t == "," || t == closer);
        if expected.has(closer) || (expected.may_close && only_closing) {
            let what = construct(src, item_start, open, bracket);
            let separated = bracket != b'{' || construct_is_list(src, open);
            let (message, help) = if separated && could_start_expression(src, at) {
                (
                    format!("expected `,` or `{closer}` in {what}, found {found_text}"),
                    "separate the elements with `,`".to_owned(),
                )
            } else {
                let verb = if bracket == b'(' || bracket == b'[' {
                    "after"
                } else {
                    "to close"
                };
                (
                    format!("expected `{closer}` {verb} {what}, found {found_text}"),
                    format!("add `{closer}`"),
                )
            };
            let mut d = Diagnostic::error("E0001", primary, message)
                .with_label(format!("expected `{closer}` here"))
                .with_secondary(
                    Span::new(open, open + 1),
                    format!("`{}` opened here", bracket as char),
                )
                .with_help(help);
            if let Some((span, label)) = found_label {
                d = d.with_secondary(span, label);
            }
            return d;
        }
    }

    let mut parts: Vec<String> = expected.tokens.iter().map(|t| format!("`{t}`")).collect();
    parts.extend(expected.things.iter().map(|t| (*t).to_owned()));
    if parts.len() > 6 {
        parts.truncate(6);
        parts.push("…".to_owned());
    }
    let mut what = join_or(&parts);
    if let Some(keyword) = after_keyword(src, at) {
        what = format!("{what} after `{keyword}`");
    }
    let message = format!("expected {what}, found {found_text}");
    match found_label {
        Some((span, label)) => Diagnostic::error("E0001", primary, message)
            .with_label("expected more here")
            .with_secondary(span, label),
        None => Diagnostic::error("E0001", primary, message)
            .with_label(format!("unexpected {found_text}")),
    }
}
