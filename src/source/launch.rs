//! GStreamer launch fragments as the head of the pipeline:
//!
//! ```text
//! FRAGMENT ! videoconvert ! video/x-raw,format={I420,NV12} ! appsink
//! ```
//!
//! `FRAGMENT ! videoconvert` is parsed as one description by GStreamer's own parser, so anything
//! gst-launch-1.0 accepts works as a head: a demuxer's or decodebin's pads, which appear only once
//! the stream is playing, are linked when they appear, as gst-launch-1.0 links them.

use std::sync::Arc;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_base::prelude::*;

use super::caps::ask_for_yuv;
use super::elements::{init, link_error, missing, PLUGINS_BASE};
use super::rtp::RtpTimes;
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

/// The name of the `videoconvert` appended to a head.
const CONVERT: &str = "octopipe-convert";

/// `FRAGMENT ! videoconvert ! appsink`: any GStreamer launch fragment ending in video (e.g.
/// `udpsrc ... ! rtph264depay ! avdec_h264`, `filesrc location=a.mp4 ! qtdemux ! h264parse !
/// avdec_h264`, `filesrc location=a.mp4 ! decodebin`). A head with one RTP depayloader also
/// gives its frames' RTP timestamps ([`RtpTimes`]).
pub(super) fn build_launch(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    fragment: &str,
) -> Result<Option<Arc<RtpTimes>>, SourceError> {
    // One description: the parser links pads that appear later (demuxers, decodebin) itself.
    // Unlinked pads are not ghosted: a pad waiting for a delayed link must stay free for it.
    let description = format!("{fragment} ! videoconvert name={CONVERT}");
    let head = gst::parse::bin_from_description(&description, false).map_err(|e| {
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
    let convert = head
        .by_name(CONVERT)
        .ok_or_else(|| missing("videoconvert", PLUGINS_BASE))?;
    ask_for_yuv(appsink);
    let rtp = RtpTimes::watch(&head);
    pipeline
        .add_many([head.upcast_ref::<gst::Element>(), appsink.upcast_ref()])
        .and_then(|_| convert.link(appsink))
        .map_err(|e| link_error(fragment, e))?;
    Ok(rtp)
}
