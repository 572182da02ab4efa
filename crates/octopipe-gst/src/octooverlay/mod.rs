//! `octooverlay`: draws each object of the buffer (any element's ROI metas) onto the frame in
//! place: its box in its class's colour, and a caption of its track id, label and score, as
//! `octopipe run --annotate` draws them (the same renderer, `octopipe_observe::draw_objects`).
//!
//! ```text
//! gst-launch-1.0 filesrc location=flight.mp4 ! decodebin ! octodetect model=det.onnx labels=coco \
//!   ! octotrack ! octooverlay ! x264enc tune=zerolatency ! mp4mux ! filesink location=drawn.mp4
//! ```
//!
//! Properties: `labels`, `scores`, `tracks` (what the caption shows), `line-width` and
//! `font-scale` (0: by the frame's width, as `--annotate`). Frames in system memory: I420, NV12,
//! RGB, BGR, RGBx, BGRx, RGBA, BGRA; NV12 in CUDA memory (`nvh264dec`'s) is drawn where it is
//! by a kernel, without a download, byte-identical to the same frame drawn in system memory.

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;

mod gpu;
mod imp;

glib::wrapper! {
    /// The `octooverlay` element.
    pub struct OctoOverlay(ObjectSubclass<imp::OctoOverlayImp>) @extends gstreamer_base::BaseTransform, gst::Element, gst::Object;
}

/// Register `octooverlay` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "octooverlay",
        gst::Rank::NONE,
        OctoOverlay::static_type(),
    )
}
