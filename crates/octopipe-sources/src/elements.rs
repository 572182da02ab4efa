//! The GStreamer helpers every kind of input uses: initialising GStreamer once, making an element
//! (or the error naming the package that provides it), the error for a pipeline that would not
//! link, enum properties by nick, and the settings every source checks alike.

use std::sync::OnceLock;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::SourceError;

pub(super) const PLUGINS_BASE: &str = "gstreamer1.0-plugins-base";
pub(super) const PLUGINS_GOOD: &str = "gstreamer1.0-plugins-good";

/// Names of every installed element factory.
pub(crate) fn element_names() -> Vec<String> {
    if init().is_err() {
        return Vec::new();
    }
    gst::Registry::get()
        .features(gst::ElementFactory::static_type())
        .into_iter()
        .map(|f| f.name().to_string())
        .collect()
}

/// Whether an element factory `name` is installed.
pub(crate) fn element_exists(name: &str) -> bool {
    init().is_ok() && gst::ElementFactory::find(name).is_some()
}

/// Initialise GStreamer once per process.
pub(super) fn init() -> Result<(), SourceError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| gst::init().map_err(|e| e.to_string()))
        .clone()
        .map_err(SourceError::Init)
}

/// The error for an element that is not installed, naming the package that provides it.
pub(super) fn missing(element: &str, package: &str) -> SourceError {
    SourceError::MissingElement {
        element: element.to_string(),
        package: package.to_string(),
    }
}

/// A new `element`, or the error naming `package` when it is not installed.
pub(super) fn make(element: &str, package: &str) -> Result<gst::Element, SourceError> {
    gst::ElementFactory::make(element)
        .build()
        .map_err(|_| missing(element, package))
}

/// The error for a pipeline of input `what` whose elements would not link.
pub(super) fn link_error(what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Stream {
        source_name: octopipe_core::redact::credentials(what).into_owned(),
        message: format!("cannot link the pipeline: {e}"),
        debug: None,
    }
}

/// The frame rate of image sequences and the test source: above 0 and at most 1000.
pub(super) fn check_framerate(framerate: f64) -> Result<(), SourceError> {
    if framerate.is_finite() && framerate > 0.0 && framerate <= 1000.0 {
        Ok(())
    } else {
        Err(SourceError::Setting {
            setting: "framerate".into(),
            value: framerate.to_string(),
            expected: "frames per second, above 0 and at most 1000".into(),
        })
    }
}

/// The value of enum property `property` of `element` named `nick` (or its full name); the error
/// lists the accepted nicks.
pub(super) fn enum_value(
    element: &gst::Element,
    property: &str,
    nick: &str,
) -> Result<gst::glib::Value, String> {
    let class = element
        .find_property(property)
        .and_then(|p| gst::glib::EnumClass::with_type(p.value_type()))
        .ok_or_else(|| format!("no enum property {property}"))?;
    class
        .to_value_by_nick(nick)
        .or_else(|| class.to_value_by_name(nick))
        .ok_or_else(|| {
            let nicks: Vec<_> = class.values().iter().map(|v| v.nick()).collect();
            format!("one of {}", nicks.join(", "))
        })
}
