//! `octoclassify`: the crop of every object on the buffer (any element's ROI metas), resized and
//! normalized by the `preprocess` stage and labelled by the `classify` stage, their own code
//! (batched by the `batch` stage, one frame a batch); each object gets a structure named after
//! the element with the label and score.
//!
//! ```text
//! gst-launch-1.0 ... ! jpegdec ! octoboxes format=det location=annotations \
//!   ! octoclassify model=visdrone-crops-64.onnx labels=person,two-wheeler,car,large-vehicle \
//!   ! octojsonl location=objects.jsonl ! fakesink
//! ```
//!
//! Its properties are the `classify` stage's and the `preprocess` stage's (`device` is both's).
//! Feed it the decoder's own format (`jpegdec`'s I420, not a `videoconvert` to RGB): octopipe
//! converts JPEG frames with libjpeg's integer arithmetic, as `octopipe run` does.

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;

mod imp;

glib::wrapper! {
    /// The `octoclassify` element.
    pub struct OctoClassify(ObjectSubclass<imp::OctoClassifyImp>) @extends gstreamer_base::BaseTransform, gst::Element, gst::Object;
}

/// Register `octoclassify` with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "octoclassify",
        gst::Rank::NONE,
        OctoClassify::static_type(),
    )
}
