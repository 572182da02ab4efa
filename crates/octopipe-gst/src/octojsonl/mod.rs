//! `octojsonl`: one JSON line per object of each buffer (any element's ROI metas), in the
//! `jsonl` stage's schema and by its own code, to a file; buffers pass through untouched.
//!
//! ```text
//! gst-launch-1.0 ... ! octoclassify model=crops.onnx labels=a,b,c,d ! octojsonl location=objects.jsonl ! fakesink
//! ```
//!
//! `frame`, `stream` and `source` are what the first octopipe element of the pipeline said of
//! the frame (its number by presentation time, its `stream` property, the URI upstream or for
//! `octoboxes format=det` the annotation file), else this element says them. The file is
//! complete at end of stream; an existing file is refused unless `overwrite=true`;
//! `location=-` is stdout.

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;

mod imp;

glib::wrapper! {
    /// The `octojsonl` element.
    pub struct OctoJsonl(ObjectSubclass<imp::OctoJsonlImp>) @extends gstreamer_base::BaseTransform, gst::Element, gst::Object;
}

/// Register `octojsonl` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "octojsonl",
        gst::Rank::NONE,
        OctoJsonl::static_type(),
    )
}
