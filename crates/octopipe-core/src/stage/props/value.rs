//! The types a property's value may have ([`PropValue`]; a choice's words, [`PropChoice`]): how
//! each is read from its text.

use crate::frame::PixelFormat;
use crate::tensor::{DType, Layout};

use super::parse::{parse_bool, parse_floats3, parse_size};
use super::spec::PropType;

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
        max: crate::stage::limits::MAX_SIDE,
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
