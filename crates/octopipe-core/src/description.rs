//! A parsed pipeline description (stages, properties, positions) and its error: what the parser
//! (`octopipe::describe`) makes and what a stage's properties are checked against. Data only: it
//! sits under the stage core and the crate's error, which both name it.

use std::fmt;

/// A position in the description text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Byte offset.
    pub start: usize,
    /// Length in bytes (at least 1 when shown).
    pub len: usize,
}

/// One `key=value` property.
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    /// Property name.
    pub key: String,
    /// Value after quotes and variables are resolved.
    pub value: String,
    /// Where the key is.
    pub key_span: Span,
    /// Where the value is.
    pub value_span: Span,
}

/// One element of a description: an octopipe stage, a GStreamer element or caps (at the head of a
/// branch), or a `name.` reference to a named stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageDesc {
    /// Stage kind (`images`, `boxes`, ...), element name, caps text, or the referenced name.
    pub kind: String,
    /// Where the kind is.
    pub span: Span,
    /// Its properties, in order.
    pub props: Vec<Prop>,
    /// Which chain (`a ! b ! c`, separated from the next chain by a stage with no `!` before it).
    pub chain: usize,
    /// Whether this is a `name.` reference.
    pub reference: bool,
    /// Byte offset just past its last property (its text is `text[span.start..end]`).
    pub end: usize,
}

/// A parsed description: the stages in order, each tagged with its chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    /// Where the text came from (a file name or `<command line>`).
    pub origin: String,
    /// The text.
    pub text: String,
    /// Stages in order.
    pub stages: Vec<StageDesc>,
}

/// An error in a description, with its position.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct DescribeError {
    /// Where the text came from.
    pub origin: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// The offending line and a caret under the span.
    pub excerpt: String,
}

impl fmt::Display for DescribeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}\n{}",
            self.origin, self.line, self.column, self.message, self.excerpt
        )
    }
}

impl Description {
    /// A description of one stage `kind` with `props` (`key`, `value`), as if parsed from
    /// `kind key=value ...` (spans point into that text): for making a stage's settings with
    /// no description text ([`StageDecl::element`](crate::stage::StageDecl::element)).
    pub fn single(origin: &str, kind: &str, props: &[(&str, &str)]) -> Description {
        let mut text = kind.to_string();
        let mut parsed = Vec::with_capacity(props.len());
        for (key, value) in props {
            text.push(' ');
            let key_span = Span {
                start: text.len(),
                len: key.len(),
            };
            text.push_str(key);
            text.push('=');
            let value_span = Span {
                start: text.len(),
                len: value.len(),
            };
            text.push_str(value);
            parsed.push(Prop {
                key: key.to_string(),
                value: value.to_string(),
                key_span,
                value_span,
            });
        }
        let stage = StageDesc {
            kind: kind.to_string(),
            span: Span {
                start: 0,
                len: kind.len(),
            },
            props: parsed,
            chain: 0,
            reference: false,
            end: text.len(),
        };
        Description {
            origin: origin.to_string(),
            text,
            stages: vec![stage],
        }
    }

    /// The stages chain by chain, in order.
    #[doc(hidden)]
    pub fn chains(&self) -> impl Iterator<Item = &[StageDesc]> {
        self.stages.chunk_by(|a, b| a.chain == b.chain)
    }

    /// An error at `span` of this description.
    pub fn error(&self, span: Span, message: impl Into<String>) -> DescribeError {
        error_at(&self.origin, &self.text, span, message.into())
    }
}

/// The most characters of a line an error's excerpt shows, and of them the most before the
/// place it points at.
const EXCERPT_WIDTH: usize = 160;
const EXCERPT_BEFORE: usize = 40;

/// The most characters of a word (a stage's name, a value) a message shows.
pub const SHOWN_WORD: usize = 64;

/// `word` as a message shows it: whole when at most [`SHOWN_WORD`] characters, else its
/// start and its length in bytes.
pub fn shown_word(word: &str) -> std::borrow::Cow<'_, str> {
    match word.char_indices().nth(SHOWN_WORD) {
        None => std::borrow::Cow::Borrowed(word),
        Some((at, _)) => format!("{}... ({} bytes)", &word[..at], word.len()).into(),
    }
}

/// An error at `span` of `text` (from `origin`): [`Description::error`] for a description not
/// made yet (the parser's own errors).
#[doc(hidden)]
pub fn error_at(origin: &str, text: &str, span: Span, message: String) -> DescribeError {
    // Spans are byte offsets: keep both ends on character boundaries (fuzzing found a span
    // ending inside a multi-byte character).
    let mut start = span.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[..start].matches('\n').count() + 1;
    let column = text[line_start..start].chars().count() + 1;
    let mut end = start.saturating_add(span.len).min(line_end);
    while !text.is_char_boundary(end) {
        end += 1;
    }
    // A long line is shown as a window around the span, so that an error's size does not
    // grow with what it points at (a megabyte-long word).
    let long = text[line_start..line_end]
        .chars()
        .nth(EXCERPT_WIDTH)
        .is_some();
    let from = match long {
        false => line_start,
        true => text[line_start..start]
            .char_indices()
            .rev()
            .nth(EXCERPT_BEFORE - 1)
            .map_or(line_start, |(i, _)| line_start + i),
    };
    let to = text[from..line_end]
        .char_indices()
        .nth(EXCERPT_WIDTH)
        .map_or(line_end, |(i, _)| from + i);
    let (open, close) = (
        if from > line_start { "..." } else { "" },
        if to < line_end { "..." } else { "" },
    );
    let indent = open.len() + text[from..start].chars().count();
    let width = text[start..end.min(to).max(start)].chars().count().max(1);
    let excerpt = format!(
        "  {open}{}{close}\n  {}{}",
        &text[from..to],
        " ".repeat(indent),
        "^".repeat(width)
    );
    DescribeError {
        origin: origin.to_string(),
        line,
        column,
        message,
        excerpt,
    }
}

/// The candidate closest to `word` by edit distance, if it is close enough to be a likely typo.
/// A candidate whose length alone puts it too far (the distance is at least the difference
/// in length) is not measured: a megabyte-long word costs one pass over it, not a distance
/// to every candidate.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // Only a word at most MAX_HINTED characters long can be near a candidate of one.
    const MAX_HINTED: usize = 256;
    let len = word.chars().take(MAX_HINTED + 1).count();
    if len > MAX_HINTED {
        return None;
    }
    let allowed = |c: &str| (c.len().max(word.len()) / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| c.chars().count().abs_diff(len) <= allowed(c))
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= allowed(c))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edits between `a` and `b`, a swap of two neighbouring characters counting as one (`widht`
/// is one edit from `width`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
            if i > 0 && j > 0 && *ca == b[j - 1] && a[i - 1] == *cb {
                cur[j + 1] = cur[j + 1].min(before[j - 1] + 1);
            }
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}
