//! The properties an element has of its own, beside its stages' declared ones: `stream` (every
//! element: the stream number of the frames it is the first octopipe element of), and, for the
//! elements that can share their stage, `shared` and `in-flight`.

use gstreamer::glib;
use gstreamer::prelude::*;

use super::flight::{in_flight_param_spec, DEFAULT_IN_FLIGHT};
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
