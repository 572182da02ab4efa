//! `octoboxes`: annotation replay (VisDrone DET or MOT) or the synthetic generator, the `boxes`
//! stage's own code, its boxes added to each buffer as ROI metas.
//!
//! ```text
//! gst-launch-1.0 multifilesrc location=frames/%05d.jpg index=1 caps=image/jpeg,framerate=30/1 ! jpegdec \
//!   ! octoboxes format=det location=annotations ! octojsonl location=objects.jsonl ! fakesink
//! ```
//!
//! Frames are numbered by presentation time at the caps' frame rate (frame 0 at running time
//! zero), as `octopipe run` numbers a file's frames. MOT rows go to frame index `number + 1`.
//! A buffer has no file name, so DET files are matched by position: the frame numbered N takes
//! the Nth annotation file of the folder in name order (the order `images` and an image
//! sequence in name order play them); a frame past the last file is an error naming the folder.

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;

mod imp;

glib::wrapper! {
    /// The `octoboxes` element.
    pub struct OctoBoxes(ObjectSubclass<imp::OctoBoxesImp>) @extends gstreamer_base::BaseTransform, gst::Element, gst::Object;
}

/// Register `octoboxes` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "octoboxes",
        gst::Rank::NONE,
        OctoBoxes::static_type(),
    )
}
