//! GStreamer launch fragments as the head of the pipeline:
//!
//! ```text
//! FRAGMENT ! videoconvert ! video/x-raw,format={I420,NV12} ! appsink
//! ```

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_base::prelude::*;

use super::caps::ask_for_yuv;
use super::gst::{init, link_error, make, PLUGINS_BASE};
use super::SourceError;

/// Whether a launch fragment holds a live source (`udpsrc`, `rtspsrc`, a live `videotestsrc`, ...).
/// The fragment is parsed but never started; false when it does not parse.
pub(crate) fn fragment_is_live(fragment: &str) -> bool {
    if init().is_err() {
        return false;
    }
    let Ok(bin) = gst::parse::bin_from_description(fragment, false) else {
        return false;
    };
    bin.iterate_recurse()
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.downcast::<gstreamer_base::BaseSrc>().ok())
        .any(|src| src.is_live())
        || fragment.split_whitespace().next().is_some_and(|first| {
            // Bins that create their live source only when started.
            matches!(
                first,
                "rtspsrc" | "srtsrc" | "srtclientsrc" | "srtserversrc" | "ristsrc" | "webrtcbin"
            )
        })
}

/// `FRAGMENT ! videoconvert ! appsink`: any GStreamer launch fragment whose last element has an
/// unlinked video source pad (e.g. `udpsrc ... ! rtph264depay ! avdec_h264`).
pub(super) fn build_launch(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    fragment: &str,
) -> Result<(), SourceError> {
    let head = gst::parse::bin_from_description(fragment, true).map_err(|e| {
        let missing = e.kind::<gst::ParseError>() == Some(gst::ParseError::NoSuchElement);
        SourceError::Stream {
            source_name: fragment.to_string(),
            message: if missing {
                format!("{e} (gst-inspect-1.0 lists the installed elements)")
            } else {
                format!("not a valid GStreamer launch fragment: {e}")
            },
            debug: None,
        }
    })?;
    let convert = make("videoconvert", PLUGINS_BASE)?;
    ask_for_yuv(appsink);
    pipeline
        .add_many([head.upcast_ref(), &convert, appsink.upcast_ref()])
        .and_then(|_| head.link(&convert))
        .and_then(|_| convert.link(appsink))
        .map_err(|e| link_error(fragment, e))
}
