//! `octodetect`: the `detect` stage (an ONNX detector on the whole frame or on overlapping
//! tiles, per-class NMS, `interval`), its own code, its boxes added to each buffer as ROI metas.
//!
//! ```text
//! gst-launch-1.0 filesrc location=flight.mp4 ! decodebin \
//!   ! octodetect model=coco-centernet-512.onnx labels=coco scale=1 tiles=640x640 overlap=0.15 \
//!   ! octotrack ! octojsonl location=objects.jsonl ! fakesink
//! ```
//!
//! Each buffer is detected before it leaves (the stage's collector closes at once: in one
//! branch there is no other frame to add to a call). With `interval=N` the frames between get
//! no boxes and are marked predicted for an `octotrack` after it, which gives them the tracks'
//! predicted boxes.

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;

mod imp;

glib::wrapper! {
    /// The `octodetect` element.
    pub struct OctoDetect(ObjectSubclass<imp::OctoDetectImp>) @extends gstreamer_base::BaseTransform, gst::Element, gst::Object;
}

/// Register `octodetect` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "octodetect",
        gst::Rank::NONE,
        OctoDetect::static_type(),
    )
}
