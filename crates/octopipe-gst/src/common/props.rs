//! An element's GObject properties, made from its stages' declared property tables
//! ([`StageDecl::props`]): no second list. Each [`PropSpec`] becomes one `GParamSpec` with the
//! declared name, doc, range and default, and the values an application sets are kept as the
//! text a description would hold, handed to [`StageDecl::element`] when the element starts, so
//! a value is checked by the same code that checks `octopipe run`'s.
//!
//! | declared type | GParamSpec |
//! | --- | --- |
//! | int (with a numeric default) | `gint64`, the declared range |
//! | float (with a numeric default) | `gdouble`, the declared range |
//! | bool | `gboolean` |
//! | int or float whose default is `auto` or `-`; choice, string, path, size, list, 3 floats, list of int | `gchararray`: the text, the accepted values in the blurb |
//!
//! A string property left unset (`NULL`) or set to its declared default text is not passed to the
//! stage, which then takes its declared default.

use std::collections::BTreeMap;

use gstreamer::glib;
use gstreamer::prelude::*;
use octopipe_core::stage::{parse_bool, PropSpec, PropType, StageDecl};

/// The GParamSpec shape of a declared property.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Shape {
    /// `gint64` in `min..=max`.
    Int { min: i64, max: i64, default: i64 },
    /// `gdouble` in `min..=max`.
    Float { min: f64, max: f64, default: f64 },
    /// `gboolean`.
    Bool(bool),
    /// `gchararray`; the default text (`None`: unset).
    Text(Option<&'static str>),
}

/// The shape of `p`: numbers and booleans whose declared default is a value of their type keep
/// their type; everything else is text.
pub(crate) fn shape(p: &PropSpec) -> Shape {
    match p.ty {
        PropType::Int { min, max } => match p.default.parse::<i64>() {
            Ok(default) => Shape::Int { min, max, default },
            Err(_) => text_shape(p),
        },
        PropType::Float { min, max, .. } => match p.default.parse::<f64>() {
            // GLib wants finite bounds; the largest double stands for "no upper bound".
            Ok(default) => Shape::Float {
                min: if min.is_finite() { min } else { f64::MIN },
                max: if max.is_finite() { max } else { f64::MAX },
                default,
            },
            Err(_) => text_shape(p),
        },
        PropType::Bool => match parse_bool(p.default) {
            Some(b) => Shape::Bool(b),
            None => text_shape(p),
        },
        _ => text_shape(p),
    }
}

fn text_shape(p: &PropSpec) -> Shape {
    Shape::Text((p.default != "-").then_some(p.default))
}

/// The properties of an element made of `decls`, in their order; a name declared by several
/// (the GPU `device` of the preprocess and classify stages) is one property whose value goes to
/// each. Renamed properties (kept only to point at their new name) are left out.
pub(crate) fn table(decls: &[&'static StageDecl]) -> Vec<PropSpec> {
    let mut specs: Vec<PropSpec> = Vec::new();
    for decl in decls {
        for p in decl.props {
            if matches!(p.ty, PropType::Renamed { .. }) || specs.iter().any(|s| s.name == p.name) {
                continue;
            }
            specs.push(*p);
        }
    }
    specs
}

/// The GParamSpec of `p` (settable in NULL and READY: the stage reads its settings when the
/// element starts).
pub(crate) fn param_spec(p: &PropSpec) -> glib::ParamSpec {
    let blurb = match shape(p) {
        Shape::Text(_) if !matches!(p.ty, PropType::Str | PropType::Path) => {
            format!("{} ({})", p.doc, accepted(p))
        }
        _ => p.doc.to_string(),
    };
    match shape(p) {
        Shape::Int { min, max, default } => glib::ParamSpecInt64::builder(p.name)
            .blurb(&blurb)
            .minimum(min)
            .maximum(max)
            .default_value(default)
            .mutable_ready()
            .build(),
        Shape::Float { min, max, default } => glib::ParamSpecDouble::builder(p.name)
            .blurb(&blurb)
            .minimum(min)
            .maximum(max)
            .default_value(default)
            .mutable_ready()
            .build(),
        Shape::Bool(default) => glib::ParamSpecBoolean::builder(p.name)
            .blurb(&blurb)
            .default_value(default)
            .mutable_ready()
            .build(),
        Shape::Text(default) => glib::ParamSpecString::builder(p.name)
            .blurb(&blurb)
            .default_value(default)
            .mutable_ready()
            .build(),
    }
}

/// What a text property accepts, for its blurb: the declared type's words, and its default
/// word (`auto`) where that is not a value of the type.
fn accepted(p: &PropSpec) -> String {
    let expected = p.ty.expected();
    match p.default {
        "-" => expected,
        d if p.ty.accepts(d) => expected,
        d => format!("{expected}, or {d}"),
    }
}

/// The text of a value set on property `p` (`None`: unset).
pub(crate) fn text_of(p: &PropSpec, value: &glib::Value) -> Option<String> {
    match shape(p) {
        Shape::Int { .. } => value.get::<i64>().ok().map(|v| v.to_string()),
        Shape::Float { .. } => value.get::<f64>().ok().map(|v| v.to_string()),
        Shape::Bool(_) => value.get::<bool>().ok().map(|v| v.to_string()),
        Shape::Text(_) => value.get::<Option<String>>().ok().flatten(),
    }
}

/// The GValue of property `p` holding `text` (its default when unset or not readable).
pub(crate) fn value_of(p: &PropSpec, text: Option<&str>) -> glib::Value {
    use glib::prelude::ToValue;
    match shape(p) {
        Shape::Int { default, .. } => text
            .and_then(|t| t.parse::<i64>().ok())
            .unwrap_or(default)
            .to_value(),
        Shape::Float { default, .. } => text
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(default)
            .to_value(),
        Shape::Bool(default) => text.and_then(parse_bool).unwrap_or(default).to_value(),
        Shape::Text(default) => text.or(default).to_value(),
    }
}

/// The values an application set, as text, by property name.
#[derive(Debug, Default, Clone)]
pub(crate) struct Values(BTreeMap<&'static str, String>);

impl Values {
    /// Set `p` from `value`; unset (back to the declared default) when it is `NULL` or the
    /// declared default's own text. A property declared without a default (`-`) keeps `-` as
    /// set: it is a value there (`octojsonl location=-`, stdout).
    pub(crate) fn set(&mut self, p: &PropSpec, value: &glib::Value) {
        match text_of(p, value) {
            Some(t) if t != p.default || p.default == "-" => {
                self.0.insert(p.name, t);
            }
            _ => {
                self.0.remove(p.name);
            }
        }
    }

    /// The GValue of `p`: what was set, or the declared default.
    pub(crate) fn get(&self, p: &PropSpec) -> glib::Value {
        value_of(p, self.0.get(p.name).map(String::as_str))
    }

    /// The values set that `decl` declares, as `(key, value)` for [`StageDecl::element`] (not
    /// those it declares only as renamed: `classify threads` is now `ort-threads`, while the
    /// `preprocess` stage's `threads` is its own).
    pub(crate) fn pairs(&self, decl: &StageDecl) -> Vec<(&'static str, &str)> {
        self.0
            .iter()
            .filter(|(k, _)| {
                decl.props
                    .iter()
                    .any(|p| p.name == **k && !matches!(p.ty, PropType::Renamed { .. }))
            })
            .map(|(k, v)| (*k, v.as_str()))
            .collect()
    }

    /// The first property whose value differs between `self` and `other` (set on one, or set
    /// otherwise), if any.
    pub(crate) fn differs(&self, other: &Values) -> Option<&'static str> {
        let names = self.0.keys().chain(other.0.keys());
        names.copied().find(|k| self.0.get(k) != other.0.get(k))
    }

    /// The text set on `name`, if any.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_range_and_auto_defaults_become_text() {
        let p = PropSpec::new(
            "overlap",
            PropType::Float {
                min: 0.0,
                max: 0.9,
                open_min: false,
            },
            "0.2",
            "d",
        );
        assert_eq!(
            shape(&p),
            Shape::Float {
                min: 0.0,
                max: 0.9,
                default: 0.2
            }
        );
        let p = PropSpec::new("max-batch", PropType::POSITIVE, "64", "d");
        assert_eq!(
            shape(&p),
            Shape::Int {
                min: 1,
                max: i64::MAX,
                default: 64
            }
        );
        let p = PropSpec::new(
            "max-wait-ms",
            PropType::Float {
                min: 0.0,
                max: f64::INFINITY,
                open_min: false,
            },
            "auto",
            "d",
        );
        assert_eq!(shape(&p), Shape::Text(Some("auto")));
        let p = PropSpec::new("model", PropType::Path, "-", "d");
        assert_eq!(shape(&p), Shape::Text(None));
    }

    #[test]
    fn a_value_set_to_its_default_text_is_unset() {
        gstreamer::init().unwrap();
        use glib::prelude::ToValue;
        let p = PropSpec::new(
            "decoder",
            PropType::Choice(&["auto", "yolov8"]),
            "auto",
            "d",
        );
        let mut v = Values::default();
        v.set(&p, &"yolov8".to_value());
        assert_eq!(v.text("decoder"), Some("yolov8"));
        v.set(&p, &"auto".to_value());
        assert_eq!(v.text("decoder"), None);
        assert_eq!(v.get(&p).get::<String>().unwrap(), "auto");
        // Without a default, `-` is a value (stdout for a sink's location).
        let p = PropSpec::new("location", PropType::Path, "-", "d");
        v.set(&p, &"-".to_value());
        assert_eq!(v.text("location"), Some("-"));
        v.set(&p, &None::<String>.to_value());
        assert_eq!(v.text("location"), None);
    }
}
