//! The types a property's value may have: how each is read from its text.

use crate::frame::PixelFormat;
use crate::tensor::{DType, Layout};

use super::parse::{parse_bool, parse_floats3, parse_size};
use super::{PropType, PropValue};

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
