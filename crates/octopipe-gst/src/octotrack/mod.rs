//! `octotrack`: the `track` stage (ByteTrack, per stream) on the objects of each buffer, any
//! element's ROI metas; each object's track id goes into its `object_id` structure.
//!
//! ```text
//! gst-launch-1.0 filesrc location=flight.mp4 ! decodebin ! octodetect model=det.onnx labels=coco \
//!   ! octotrack ! octojsonl location=objects.jsonl ! fakesink
//! ```
//!
//! As `track` after `detect` in `octopipe run`, it follows the score threshold of the
//! `octodetect` before it (which the frame meta carries) unless `high` is set.
//!
//! On a frame the detector skipped (`octodetect interval=N`) the tracks' predicted boxes become
//! the frame's objects.

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;

mod imp;

glib::wrapper! {
    /// The `octotrack` element.
    pub struct OctoTrack(ObjectSubclass<imp::OctoTrackImp>) @extends gstreamer_base::BaseTransform, gst::Element, gst::Object;
}

/// Register `octotrack` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "octotrack",
        gst::Rank::NONE,
        OctoTrack::static_type(),
    )
}
