//! An element's settings ([`Settings`]): its stages' declared properties, and the properties it
//! has of its own ([`Own`]): `stream` (every element: the stream number of the frames it is the
//! first octopipe element of), and, for the elements that can share their stage, `shared` and
//! `in-flight`.

use gstreamer::glib;
use gstreamer::prelude::*;
use octopipe_core::stage::PropSpec;

use super::flight::{in_flight_param_spec, DEFAULT_IN_FLIGHT};
use super::props::{self, Values};
use super::shared::shared_param_spec;

/// The values of the element's own properties.
#[derive(Debug, Default, Clone)]
pub(crate) struct Own {
    /// `shared`: the instance this element joins (unset: its own stage).
    pub(crate) shared: Option<String>,
    /// `in-flight` (unset: the default).
    in_flight: Option<u32>,
    /// `stream`: the stream number of the frames this element numbers first.
    pub(crate) stream: u32,
}

/// The `stream` property.
fn stream_param_spec() -> glib::ParamSpec {
    glib::ParamSpecUInt::builder("stream")
        .blurb(
            "the stream number of the frames this element is the first octopipe element of (its \
             branch): the tracker keeps tracks per stream, and octojsonl writes it as `stream`; \
             the elements after the first take it from the frame",
        )
        .default_value(0)
        .mutable_ready()
        .build()
}

/// The element's own GParamSpecs, after its stages' ones: `shared` and `in-flight` when it
/// can share its stage, then `stream`.
pub(crate) fn param_specs(shareable: bool) -> Vec<glib::ParamSpec> {
    let mut specs = Vec::new();
    if shareable {
        specs.push(shared_param_spec());
        specs.push(in_flight_param_spec());
    }
    specs.push(stream_param_spec());
    specs
}

impl Own {
    /// Set property `name` from `value`; `false` when it is not one of the element's own.
    pub(crate) fn set(&mut self, name: &str, value: &glib::Value) -> bool {
        match name {
            "shared" => self.shared = value.get::<Option<String>>().ok().flatten(),
            "in-flight" => self.in_flight = value.get::<u32>().ok(),
            "stream" => self.stream = value.get::<u32>().unwrap_or(0),
            _ => return false,
        }
        true
    }

    /// The value of property `name`, when it is one of the element's own.
    pub(crate) fn get(&self, name: &str) -> Option<glib::Value> {
        Some(match name {
            "shared" => self.shared.to_value(),
            "in-flight" => self.in_flight().to_value(),
            "stream" => self.stream.to_value(),
            _ => return None,
        })
    }

    /// How many buffers the element keeps in a shared stage at once.
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.unwrap_or(DEFAULT_IN_FLIGHT)
    }
}

/// What an application set on an element, in one place: its stages' (and its own declared)
/// properties as the text a description holds ([`Values`]), and its own properties ([`Own`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Settings {
    /// The declared properties' values, by name.
    pub(crate) values: Values,
    /// `stream`, `shared`, `in-flight`.
    pub(crate) own: Own,
}

/// The element's GParamSpecs: `specs` (its stages' declared properties, then those it declares
/// itself), then its own ([`param_specs`]).
pub(crate) fn element_param_specs(specs: &[PropSpec], shareable: bool) -> Vec<glib::ParamSpec> {
    let mut all: Vec<_> = specs.iter().map(props::param_spec).collect();
    all.extend(param_specs(shareable));
    all
}

impl Settings {
    /// Set property `name` from `value`: one of the element's own, or the declared one of
    /// `specs`; `false` when it is neither.
    pub(crate) fn set(&mut self, specs: &[PropSpec], name: &str, value: &glib::Value) -> bool {
        if self.own.set(name, value) {
            return true;
        }
        match specs.iter().find(|s| s.name == name) {
            Some(spec) => {
                self.values.set(spec, value);
                true
            }
            None => false,
        }
    }

    /// The value of property `name` (one of the element's own, or the declared one of `specs`:
    /// what was set, or its default).
    pub(crate) fn get(&self, specs: &[PropSpec], name: &str) -> Option<glib::Value> {
        self.own.get(name).or_else(|| {
            let spec = specs.iter().find(|s| s.name == name)?;
            Some(self.values.get(spec))
        })
    }
}
