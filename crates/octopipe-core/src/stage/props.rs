//! Properties: their declared type, default, range and doc, and typed access to a stage's values.
//!
//! A value is checked against its [`PropType`] before the stage's constructor sees it, and a
//! property left out takes its declared default (when the default is a value of its type; `-`
//! means none, `auto` means the stage derives it), so the declaration is the one place a default
//! lives.

use crate::description::{closest, DescribeError, Description, StageDesc};

use super::StageDecl;

/// A property's type, with its range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PropType {
    /// An integer in `min..=max`.
    Int {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
    },
    /// A finite number in `min..=max` (`min` excluded when `open_min`).
    Float {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
        /// Whether `min` itself is refused.
        open_min: bool,
    },
    /// `true`/`false` (also `1`/`0`, `yes`/`no`).
    Bool,
    /// Any text.
    Str,
    /// A file or folder path.
    Path,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// `WIDTHxHEIGHT`, both at least 1.
    Size,
    /// Three comma-separated numbers (`positive`: each above 0).
    Floats3 {
        /// Whether each must be above 0.
        positive: bool,
    },
    /// Comma-separated words.
    List,
    /// Comma-separated integers in `0..=max`.
    Ints {
        /// Largest value.
        max: i64,
    },
}

impl PropType {
    /// A positive integer.
    pub const POSITIVE: PropType = PropType::Int {
        min: 1,
        max: i64::MAX,
    };
    /// A non-negative integer.
    pub const COUNT: PropType = PropType::Int {
        min: 0,
        max: i64::MAX,
    };
    /// A positive number.
    pub const POSITIVE_FLOAT: PropType = PropType::Float {
        min: 0.0,
        max: f64::INFINITY,
        open_min: true,
    };

    /// The type as `inspect` shows it.
    pub fn name(&self) -> String {
        match self {
            PropType::Int { .. } => "int".into(),
            PropType::Float { .. } => "float".into(),
            PropType::Bool => "bool".into(),
            PropType::Str => "string".into(),
            PropType::Path => "path".into(),
            PropType::Choice(c) => c.join("|"),
            PropType::Size => "WxH".into(),
            PropType::Floats3 { .. } => "3 floats".into(),
            PropType::List => "list".into(),
            PropType::Ints { .. } => "list of int".into(),
        }
    }

    /// What a value must be, for messages: `a positive integer`, `nchw or nhwc`, ...
    pub fn expected(&self) -> String {
        match *self {
            PropType::Int { min: 1, max } if max == i64::MAX => "a positive integer".into(),
            PropType::Int { min: 0, max } if max == i64::MAX => "a non-negative integer".into(),
            PropType::Int { min, max } => format!("an integer from {min} to {max}"),
            PropType::Float { min, max, open_min } if min == 0.0 && max.is_infinite() => {
                if open_min {
                    "a positive number".into()
                } else {
                    "a non-negative number".into()
                }
            }
            PropType::Float { min, max, .. } => format!("a number from {min} to {max}"),
            PropType::Bool => "true or false".into(),
            PropType::Str | PropType::Path => "text".into(),
            PropType::Choice([a, b]) => format!("{a} or {b}"),
            PropType::Choice(c) => format!("one of {}", c.join(", ")),
            PropType::Size => "WIDTHxHEIGHT with both at least 1, e.g. 64x64".into(),
            PropType::Floats3 { positive: false } => "three comma-separated numbers".into(),
            PropType::Floats3 { positive: true } => "three comma-separated positive numbers".into(),
            PropType::List => "a comma-separated list".into(),
            PropType::Ints { max } => format!("a comma-separated list of integers 0..{max}"),
        }
    }

    /// Whether `v` is a value of this type.
    pub fn accepts(&self, v: &str) -> bool {
        match *self {
            PropType::Int { min, max } => v.parse::<i64>().is_ok_and(|n| n >= min && n <= max),
            PropType::Float { min, max, open_min } => v
                .parse::<f64>()
                .is_ok_and(|x| x.is_finite() && x <= max && (x > min || (!open_min && x == min))),
            PropType::Bool => parse_bool(v).is_some(),
            PropType::Str | PropType::Path | PropType::List => true,
            PropType::Choice(c) => c.contains(&v),
            PropType::Size => parse_size(v).is_some(),
            PropType::Floats3 { positive } => {
                parse_floats3(v).is_some_and(|f| !positive || f.iter().all(|x| *x > 0.0))
            }
            PropType::Ints { max } => {
                v.is_empty()
                    || v.split(',').all(|x| {
                        x.trim()
                            .parse::<i64>()
                            .is_ok_and(|n| (0..=max).contains(&n))
                    })
            }
        }
    }
}

/// One property of a stage kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropSpec {
    /// Name as written in descriptions (kebab-case).
    pub name: &'static str,
    /// Type and range.
    pub ty: PropType,
    /// Default: a value of the type, or `-` (none: required, or off) or `auto` (derived).
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
}

impl PropSpec {
    /// A property declaration.
    pub const fn new(
        name: &'static str,
        ty: PropType,
        default: &'static str,
        doc: &'static str,
    ) -> Self {
        PropSpec {
            name,
            ty,
            default,
            doc,
        }
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.split_once('x')?;
    Some((
        w.parse::<u32>().ok().filter(|v| *v > 0)?,
        h.parse::<u32>().ok().filter(|v| *v > 0)?,
    ))
}

fn parse_floats3(s: &str) -> Option<[f32; 3]> {
    let v: Vec<f32> = s
        .split(',')
        .map(|x| x.trim().parse().ok().filter(|f: &f32| f.is_finite()))
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

/// One stage's properties as written, checked against its declaration; values by type.
pub struct Props<'a> {
    desc: &'a Description,
    stage: &'a StageDesc,
    decl: &'a StageDecl,
}

impl<'a> Props<'a> {
    /// The properties of `stage` (of kind `decl`) in `desc`.
    pub fn new(desc: &'a Description, stage: &'a StageDesc, decl: &'a StageDecl) -> Self {
        Props { desc, stage, decl }
    }

    /// The stage's declaration.
    pub fn decl(&self) -> &StageDecl {
        self.decl
    }

    /// Refuse unknown properties (suggesting the closest name) and values not of their type.
    pub fn check(&self) -> Result<(), DescribeError> {
        for p in &self.stage.props {
            if p.key == "name" {
                continue;
            }
            let Some(spec) = self.spec(&p.key) else {
                let names = self.decl.props.iter().map(|s| s.name);
                let hint = closest(&p.key, names.clone())
                    .map(|c| format!(" (did you mean '{c}'?)"))
                    .unwrap_or_else(|| {
                        format!(" (properties: {})", names.collect::<Vec<_>>().join(", "))
                    });
                return Err(self.desc.error(
                    p.key_span,
                    format!(
                        "stage '{}' has no property '{}'{hint}",
                        self.decl.name, p.key
                    ),
                ));
            };
            if !spec.ty.accepts(&p.value) {
                return Err(self.desc.error(
                    p.value_span,
                    format!(
                        "{}: {} must be {}, found '{}'",
                        self.decl.name,
                        p.key,
                        spec.ty.expected(),
                        p.value
                    ),
                ));
            }
        }
        Ok(())
    }

    fn spec(&self, key: &str) -> Option<&PropSpec> {
        self.decl.props.iter().find(|s| s.name == key)
    }

    /// The value as written, if given.
    pub fn given(&self, key: &str) -> Option<&'a str> {
        self.stage
            .props
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    /// The value as written, or the declared default when that is a value of the type.
    fn value(&self, key: &str) -> Option<&'a str> {
        debug_assert!(
            key == "name" || self.spec(key).is_some(),
            "{}: undeclared property {key}",
            self.decl.name
        );
        self.given(key).or_else(|| {
            self.decl
                .props
                .iter()
                .find(|s| s.name == key)
                .filter(|s| s.ty.accepts(s.default) && !matches!(s.default, "-" | "auto"))
                .map(|s| s.default)
        })
    }

    /// A text value (or its default).
    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.value(key)
    }

    /// A required text value: an error naming the stage when missing or empty.
    pub fn required(&self, key: &str) -> Result<&'a str, DescribeError> {
        match self.stage.props.iter().find(|p| p.key == key) {
            Some(p) if !p.value.is_empty() => Ok(&p.value),
            Some(p) => Err(self
                .desc
                .error(p.value_span, format!("{}: {key} is empty", self.decl.name))),
            None => Err(self.desc.error(
                self.stage.span,
                format!("stage '{}' needs {key}=...", self.decl.name),
            )),
        }
    }

    /// An integer value (checked against its range).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.value(key).and_then(|v| v.parse().ok())
    }

    /// A non-negative integer value as `usize`.
    pub fn usize(&self, key: &str) -> Option<usize> {
        self.int(key).and_then(|v| usize::try_from(v).ok())
    }

    /// A number.
    pub fn float(&self, key: &str) -> Option<f64> {
        self.value(key).and_then(|v| v.parse().ok())
    }

    /// A boolean.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.value(key).and_then(parse_bool)
    }

    /// `WIDTHxHEIGHT`.
    pub fn size(&self, key: &str) -> Option<(u32, u32)> {
        self.value(key).and_then(parse_size)
    }

    /// Three numbers.
    pub fn floats3(&self, key: &str) -> Option<[f32; 3]> {
        self.value(key).and_then(parse_floats3)
    }

    /// Comma-separated words, trimmed.
    pub fn list(&self, key: &str) -> Option<Vec<String>> {
        self.value(key)
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
    }

    /// Comma-separated integers.
    pub fn ints(&self, key: &str) -> Option<Vec<i64>> {
        self.value(key).map(|v| {
            v.split(',')
                .filter(|s| !s.trim().is_empty())
                .filter_map(|s| s.trim().parse().ok())
                .collect()
        })
    }

    /// An error about the characters `chars` (0-based) of `key`'s value, the caret under them
    /// where the value is written as it is (plain or in quotes), else under the whole value.
    pub fn error_in(
        &self,
        key: &str,
        chars: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> DescribeError {
        let Some(p) = self.stage.props.iter().find(|p| p.key == key) else {
            return self.error(key, message);
        };
        let span = p.value_span;
        let raw = self
            .desc
            .text
            .get(span.start..span.start + span.len)
            .unwrap_or("");
        let quoted = raw.len() >= 2 && raw.starts_with(['"', '\'']) && raw.ends_with(&raw[..1]);
        let inner = if quoted { &raw[1..raw.len() - 1] } else { raw };
        let byte = |c: usize| inner.char_indices().nth(c).map_or(inner.len(), |(i, _)| i);
        if inner != p.value {
            return self.desc.error(span, message);
        }
        let start = span.start + usize::from(quoted) + byte(chars.start);
        let len = (byte(chars.end) + usize::from(quoted) + span.start).saturating_sub(start);
        self.desc.error(
            crate::description::Span {
                start,
                len: len.max(1),
            },
            message,
        )
    }

    /// An error about `key`'s value (or the stage, when `key` is not given).
    pub fn error(&self, key: &str, message: impl Into<String>) -> DescribeError {
        let span = self
            .stage
            .props
            .iter()
            .find(|p| p.key == key)
            .map_or(self.stage.span, |p| p.value_span);
        self.desc.error(span, message)
    }
}
