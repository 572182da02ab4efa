//! Properties: their declared type, default, range and doc, and typed access to a stage's values.
//!
//! A value is checked against its [`PropType`] before the stage's constructor sees it, and a
//! property left out takes its declared default (when the default is a value of its type; `-`
//! means none, `auto` means the stage derives it), so the declaration is the one place a default
//! lives.

use crate::description::{closest, DescribeError, Description, StageDesc};
use crate::frame::PixelFormat;
use crate::tensor::{DType, Layout};

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
            PropType::Bool => "true or false".into(),
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
            PropType::Float { min, max, open_min } => v
                .parse::<f64>()
                .is_ok_and(|x| x.is_finite() && x <= max && (x > min || (!open_min && x == min))),
            PropType::Bool => parse_bool(v).is_some(),
            PropType::Str | PropType::Path | PropType::List => true,
            PropType::Choice(c) => c.contains(&v),
            PropType::Size { max } => parse_size(v).is_some_and(|(w, h)| w <= max && h <= max),
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

/// A stage's properties declared once, as a struct: `#[derive(Properties)]` (re-exported here)
/// makes the table, the parsing and `Default` from its fields, their types, doc comments and
/// `#[prop(...)]` attributes (see the derive's crate, `octopipe-props-derive`):
///
/// ```
/// use octopipe_core::stage::{PropChoice, Properties};
///
/// /// How a tile is fitted.
/// #[derive(Debug, Clone, Copy, PartialEq, PropChoice)]
/// pub enum Fit {
///     /// Stretched.
///     Stretch,
///     /// Letterboxed.
///     Letterbox,
/// }
///
/// /// The `fit` stage's properties.
/// #[derive(Debug, Properties)]
/// pub struct FitProps {
///     /// the .onnx model
///     #[prop(required)]
///     pub model: std::path::PathBuf,
///     /// fraction of a tile shared with its neighbours
///     #[prop(default = 0.2, range = 0.0..=0.9)]
///     pub overlap: f64,
///     /// how a tile is fitted to the input
///     #[prop(default = "stretch")]
///     pub fit: Fit,
///     /// tile size (unset: the whole frame)
///     pub tiles: Option<(u32, u32)>,
/// }
///
/// let names: Vec<_> = FitProps::PROPS.iter().map(|p| p.name).collect();
/// assert_eq!(names, ["model", "overlap", "fit", "tiles"]);
/// assert_eq!(FitProps::PROPS[2].ty.name(), "stretch|letterbox");
/// assert_eq!(FitProps::default().overlap, 0.2);
/// ```
///
/// A `StageDecl`'s `props` is `FitProps::PROPS`, its `make` starts with
/// `FitProps::from_props(p)?`; checks across properties follow there.
pub trait Properties: Sized {
    /// The properties, in the order of the fields (a flattened block's where it stands).
    const PROPS: &'static [PropSpec];
    /// The values of checked properties ([`Props::check`]), each left out at its default.
    fn from_props(p: &Props<'_>) -> Result<Self, DescribeError>;
}

/// A Rust type a property's value can have: its [`PropType`] and how a written value is read.
/// Integers are `Int` over their range, `f32`/`f64` `Float`, `bool`, `String` `Str`, `PathBuf`
/// `Path`, `(u32, u32)` `Size`, `[f32; 3]` `Floats3`, `Vec<String>` `List`, `Vec<usize>` and
/// `Vec<i64>` `Ints`; an enum with `#[derive(PropChoice)]` a `Choice`.
pub trait PropValue: Sized {
    /// The type, with the whole range of the Rust type.
    const TYPE: PropType;
    /// The type where `auto` is also a value (meaning none: an `Option` defaulting to `auto`):
    /// a choice lists the word `auto` first.
    const AUTO_TYPE: PropType = Self::TYPE;
    /// The value of `s`, a text [`PropType::accepts`] (`None`: not one).
    fn parse_prop(s: &str) -> Option<Self>;
}

/// An enum property's words, from `#[derive(PropChoice)]` (which also implements [`PropValue`]
/// and `FromStr`): kebab-case of each variant, or its `#[choice(name = "...")]`.
pub trait PropChoice: PropValue + 'static {
    /// The words, in the order of the variants.
    const WORDS: &'static [&'static str];
    /// The word of this value.
    fn as_str(&self) -> &'static str;
}

/// A word that is none of a choice's (`FromStr` of a [`PropChoice`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{found}' is not one of {}", words.join(", "))]
pub struct ChoiceError {
    /// The word given.
    pub found: String,
    /// The words of the choice.
    pub words: &'static [&'static str],
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl PropValue for $t {
            const TYPE: PropType = PropType::Int {
                min: if (<$t>::MIN as i128) < i64::MIN as i128 { i64::MIN } else { <$t>::MIN as i64 },
                max: if (<$t>::MAX as i128) > i64::MAX as i128 { i64::MAX } else { <$t>::MAX as i64 },
            };
            fn parse_prop(s: &str) -> Option<Self> {
                s.parse().ok()
            }
        }
    )*};
}
int_value!(u8, u16, u32, u64, usize, i32, i64);

macro_rules! float_value {
    ($($t:ty),*) => {$(
        impl PropValue for $t {
            const TYPE: PropType = PropType::Float {
                min: f64::NEG_INFINITY,
                max: f64::INFINITY,
                open_min: false,
            };
            fn parse_prop(s: &str) -> Option<Self> {
                s.parse().ok().filter(|v: &$t| v.is_finite())
            }
        }
    )*};
}
float_value!(f32, f64);

impl PropValue for bool {
    const TYPE: PropType = PropType::Bool;
    fn parse_prop(s: &str) -> Option<Self> {
        parse_bool(s)
    }
}

impl PropValue for String {
    const TYPE: PropType = PropType::Str;
    fn parse_prop(s: &str) -> Option<Self> {
        Some(s.to_string())
    }
}

impl PropValue for std::path::PathBuf {
    const TYPE: PropType = PropType::Path;
    fn parse_prop(s: &str) -> Option<Self> {
        Some(s.into())
    }
}

impl PropValue for (u32, u32) {
    const TYPE: PropType = PropType::Size {
        max: super::limits::MAX_SIDE,
    };
    fn parse_prop(s: &str) -> Option<Self> {
        parse_size(s)
    }
}

impl PropValue for [f32; 3] {
    const TYPE: PropType = PropType::Floats3 { positive: false };
    fn parse_prop(s: &str) -> Option<Self> {
        parse_floats3(s)
    }
}

/// The `layout` property.
impl PropValue for Layout {
    const TYPE: PropType = PropType::Choice(&["nchw", "nhwc"]);
    fn parse_prop(s: &str) -> Option<Self> {
        match s {
            "nchw" => Some(Layout::Nchw),
            "nhwc" => Some(Layout::Nhwc),
            _ => None,
        }
    }
}

/// The `dtype` property.
impl PropValue for DType {
    const TYPE: PropType = PropType::Choice(&["f32", "f16"]);
    fn parse_prop(s: &str) -> Option<Self> {
        match s {
            "f32" => Some(DType::F32),
            "f16" => Some(DType::F16),
            _ => None,
        }
    }
}

/// The `format` property of the test source (`testsrc format=`): GStreamer's format name in
/// lower case, `gray8` for `GRAY8` (one 8-bit band), `gray16` for `GRAY16_LE` (one 16-bit band,
/// for tilestats).
impl PropValue for PixelFormat {
    const TYPE: PropType = PropType::Choice(&[
        "i420", "nv12", "rgb", "bgr", "rgba", "bgra", "gray8", "gray16",
    ]);
    fn parse_prop(s: &str) -> Option<Self> {
        match s {
            "i420" => Some(PixelFormat::I420),
            "nv12" => Some(PixelFormat::Nv12),
            "rgb" => Some(PixelFormat::Rgb),
            "bgr" => Some(PixelFormat::Bgr),
            "rgba" => Some(PixelFormat::Rgba),
            "bgra" => Some(PixelFormat::Bgra),
            "gray16" => Some(PixelFormat::Gray16),
            "gray8" => Some(PixelFormat::Gray8),
            _ => None,
        }
    }
}

impl PropValue for Vec<String> {
    const TYPE: PropType = PropType::List;
    fn parse_prop(s: &str) -> Option<Self> {
        Some(s.split(',').map(|s| s.trim().to_string()).collect())
    }
}

macro_rules! ints_value {
    ($($t:ty),*) => {$(
        impl PropValue for Vec<$t> {
            const TYPE: PropType = PropType::Ints { max: i64::MAX };
            fn parse_prop(s: &str) -> Option<Self> {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().ok())
                    .collect()
            }
        }
    )*};
}
ints_value!(usize, i64);

/// The value of a declared default `text` of property `name` (the derive's `Default` and
/// `from_props`); a default that is not a value of its type is a bug of the declaration.
#[doc(hidden)]
pub fn prop_default<T: PropValue>(name: &str, text: &str) -> T {
    T::parse_prop(text).unwrap_or_else(|| {
        panic!("property {name}: the default '{text}' is not a value of its type")
    })
}

/// How many properties `pieces` hold together (the derive's table).
#[doc(hidden)]
pub const fn props_len(pieces: &[&[PropSpec]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < pieces.len() {
        n += pieces[i].len();
        i += 1;
    }
    n
}

/// `pieces` one after the other (the derive's table, a flattened block in its place); a name
/// twice fails the build.
#[doc(hidden)]
pub const fn props_concat<const N: usize>(pieces: &[&[PropSpec]]) -> [PropSpec; N] {
    let mut out = [PropSpec::new("", PropType::Bool, "", ""); N];
    let (mut k, mut i) = (0, 0);
    while i < pieces.len() {
        let mut j = 0;
        while j < pieces[i].len() {
            let mut seen = 0;
            while seen < k {
                if str_eq(out[seen].name, pieces[i][j].name) {
                    panic!("a property is declared twice");
                }
                seen += 1;
            }
            out[k] = pieces[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N, "props_concat: N is not props_len");
    out
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
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
                let names = self
                    .decl
                    .props
                    .iter()
                    .filter(|s| !matches!(s.ty, PropType::Renamed { .. }))
                    .map(|s| s.name);
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
            if let PropType::Renamed { to } = spec.ty {
                let now = self
                    .spec(to)
                    .map_or(String::new(), |s| format!(" ({})", s.doc));
                return Err(self.desc.error(
                    p.key_span,
                    format!(
                        "{}: {} is now called {to}{now}: write {to}={}",
                        self.decl.name, p.key, p.value
                    ),
                ));
            }
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

    /// `v`, the value of `key` as written, read as a `T`; an error naming the stage, the
    /// property and what it must be where it is not one (after [`Props::check`], only where the
    /// declared type takes more than `T` does).
    pub fn parse<T: PropValue>(&self, key: &str, v: &str) -> Result<T, DescribeError> {
        T::parse_prop(v).ok_or_else(|| {
            let expected = self
                .spec(key)
                .map_or_else(|| T::TYPE.expected(), |s| s.ty.expected());
            self.error(
                key,
                format!("{}: {key} must be {expected}, found '{v}'", self.decl.name),
            )
        })
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
