//! A property's declaration: its type and range ([`PropType`]), default and doc ([`PropSpec`]).

use super::parse::{parse_bool, parse_floats3, parse_size, BOOL_SPELLINGS};

/// The largest size of a number any property takes (`1e11`: seconds are three thousand years,
/// milliseconds three years): past it, or below [`MIN_FLOAT`] and not 0, a value is refused
/// whatever the property's own range, so that no number becomes a `Duration`, a count or a
/// product that overflows (`timeout=1e300`, `framerate=1e-300`: a period of 1e300 s).
pub const MAX_FLOAT: f64 = 1e11;
/// The smallest size of a number other than 0 any property takes.
pub const MIN_FLOAT: f64 = 1e-9;

/// Whether `x` is a number a property may take at all: finite, 0 or between [`MIN_FLOAT`] and
/// [`MAX_FLOAT`] in size.
pub fn in_float_bounds(x: f64) -> bool {
    x.is_finite() && (x == 0.0 || (MIN_FLOAT..=MAX_FLOAT).contains(&x.abs()))
}

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
    /// `WIDTHxHEIGHT`, both from 1 to `max`.
    Size {
        /// Longest side.
        max: u32,
    },
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
    /// Not a property any more: renamed `to` (its old name now means something else, or
    /// nothing). Any value is refused with a message naming `to`; `inspect` leaves it out.
    Renamed {
        /// The property's name now.
        to: &'static str,
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
            PropType::Size { .. } => "WxH".into(),
            PropType::Floats3 { .. } => "3 floats".into(),
            PropType::List => "list".into(),
            PropType::Ints { .. } => "list of int".into(),
            PropType::Renamed { .. } => "renamed".into(),
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
            PropType::Bool => format!("a boolean: {BOOL_SPELLINGS}"),
            PropType::Str | PropType::Path => "text".into(),
            PropType::Choice([a, b]) => format!("{a} or {b}"),
            PropType::Choice(c) => format!("one of {}", c.join(", ")),
            PropType::Size { max } => {
                format!("WIDTHxHEIGHT with both from 1 to {max}, e.g. 64x64")
            }
            PropType::Floats3 { positive: false } => "three comma-separated numbers".into(),
            PropType::Floats3 { positive: true } => "three comma-separated positive numbers".into(),
            PropType::List => "a comma-separated list".into(),
            PropType::Ints { max } => format!("a comma-separated list of integers 0..{max}"),
            PropType::Renamed { to } => format!("written {to}=..."),
        }
    }

    /// Whether `v` is a value of this type.
    pub fn accepts(&self, v: &str) -> bool {
        match *self {
            PropType::Int { min, max } => v.parse::<i64>().is_ok_and(|n| n >= min && n <= max),
            PropType::Float { min, max, open_min } => v.parse::<f64>().is_ok_and(|x| {
                in_float_bounds(x) && x <= max && (x > min || (!open_min && x == min))
            }),
            PropType::Bool => parse_bool(v).is_some(),
            PropType::Str | PropType::Path | PropType::List => true,
            PropType::Choice(c) => c.contains(&v),
            PropType::Size { max } => parse_size(v).is_some_and(|(w, h)| w <= max && h <= max),
            // Each number as written (an f32 reads 1e-300 as 0).
            PropType::Floats3 { positive } => {
                parse_floats3(v).is_some_and(|f| !positive || f.iter().all(|x| *x > 0.0))
                    && v.split(',')
                        .all(|x| x.trim().parse::<f64>().is_ok_and(in_float_bounds))
            }
            PropType::Ints { max } => {
                v.is_empty()
                    || v.split(',').all(|x| {
                        x.trim()
                            .parse::<i64>()
                            .is_ok_and(|n| (0..=max).contains(&n))
                    })
            }
            PropType::Renamed { .. } => false,
        }
    }

    /// This type with the bounds of `range = A..=B` (each `(as i64, as f64)`; `None`: open): an
    /// integer's or a number's bounds, a list of integers' largest. Other types are unchanged.
    #[doc(hidden)]
    pub const fn with_range(self, min: Option<(i64, f64)>, max: Option<(i64, f64)>) -> Self {
        match self {
            PropType::Int { min: lo, max: hi } => PropType::Int {
                min: match min {
                    Some((v, _)) => v,
                    None => lo,
                },
                max: match max {
                    Some((v, _)) => v,
                    None => hi,
                },
            },
            PropType::Float {
                min: lo,
                max: hi,
                open_min,
            } => PropType::Float {
                min: match min {
                    Some((_, v)) => v,
                    None => lo,
                },
                max: match max {
                    Some((_, v)) => v,
                    None => hi,
                },
                open_min,
            },
            PropType::Ints { max: hi } => PropType::Ints {
                max: match max {
                    Some((v, _)) => v,
                    None => hi,
                },
            },
            PropType::Size { max: hi } => PropType::Size {
                max: match max {
                    Some((v, _)) if v >= 1 && v <= hi as i64 => v as u32,
                    _ => hi,
                },
            },
            other => other,
        }
    }

    /// The range `inspect` shows after the type (`1..=256`), where the type has one short of
    /// its Rust type's whole range: an integer's (bounded above), a list of integers', a
    /// `WxH`'s per side. Numbers' ranges are left out.
    pub fn range(&self) -> Option<String> {
        match *self {
            PropType::Int { min, max } if max < i64::MAX => Some(format!("{min}..={max}")),
            PropType::Ints { max } if max < i64::MAX => Some(format!("0..={max}")),
            PropType::Size { max } => Some(format!("1..={max}")),
            _ => None,
        }
    }

    /// This type above 0: an integer from 1, a number above 0 (`0` itself refused), three
    /// positive numbers. Other types are unchanged.
    #[doc(hidden)]
    pub const fn positive(self) -> Self {
        match self {
            PropType::Int { min, max } => PropType::Int {
                min: if min < 1 { 1 } else { min },
                max,
            },
            PropType::Float { min, max, open_min } => PropType::Float {
                min: if min < 0.0 { 0.0 } else { min },
                max,
                open_min: open_min || min <= 0.0,
            },
            PropType::Floats3 { .. } => PropType::Floats3 { positive: true },
            other => other,
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

/// The `name` property every stage takes besides its own (`NAME.` ends a branch feeding the
/// stage so named): in no stage's table; `inspect` shows it last.
pub const NAME_PROP: PropSpec = PropSpec::new(
    "name",
    PropType::Str,
    "-",
    "a name, for references: `NAME.` ends a branch feeding it",
);
