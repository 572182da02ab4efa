//! GStreamer launch fragments as the head of the pipeline:
//!
//! ```text
//! FRAGMENT ! videoconvert ! video/x-raw,format={I420,NV12} ! appsink
//! FRAGMENT ! decodebin ! ...                (head decoder=cpu|nvdec|auto: decoded as `media` is)
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
use super::media::decode_into;
use super::nvdec::SharedCuda;
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
/// The name of the `decodebin` appended to a head that octopipe decodes (`head decoder=`).
const DECODE: &str = "octopipe-decode";

/// `FRAGMENT ! videoconvert ! appsink`: any GStreamer launch fragment ending in video (e.g.
/// `udpsrc ... ! rtph264depay ! avdec_h264`, `filesrc location=a.mp4 ! qtdemux ! h264parse !
/// avdec_h264`, `filesrc location=a.mp4 ! decodebin`). With `decode`, the fragment ends in the
/// encoded stream (`udpsrc ... ! rtph264depay ! h264parse`) and octopipe decodes it as `media`
/// does: `FRAGMENT ! decodebin`, software decoders, or with `nvdec` NVIDIA's into CUDA memory.
/// A head with one RTP depayloader also gives its frames' RTP timestamps ([`RtpTimes`]).
pub(super) fn build_launch(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    fragment: &str,
    decode: bool,
    nvdec: Option<&Arc<SharedCuda>>,
) -> Result<Option<Arc<RtpTimes>>, SourceError> {
    // One description: the parser links pads that appear later (demuxers, decodebin) itself.
    // Unlinked pads are not ghosted: a pad waiting for a delayed link must stay free for it.
    let description = match decode {
        true => format!("{fragment} ! decodebin name={DECODE}"),
        false => format!("{fragment} ! videoconvert name={CONVERT}"),
    };
    let head = gst::parse::bin_from_description(&description, false).map_err(|e| {
        let missing = e.kind::<gst::ParseError>() == Some(gst::ParseError::NoSuchElement);
        SourceError::Stream {
            source_name: octopipe_core::redact::credentials(fragment).into_owned(),
            message: if missing {
                format!("{e} (gst-inspect-1.0 lists the installed elements)")
            } else {
                format!("not a valid GStreamer launch fragment: {e}")
            },
            debug: None,
        }
    })?;
    let rtp = RtpTimes::watch(&head);
    pipeline.add(&head).map_err(|e| link_error(fragment, e))?;
    if decode {
        let decodebin = head
            .by_name(DECODE)
            .ok_or_else(|| missing("decodebin", PLUGINS_BASE))?;
        decode_into(pipeline, &decodebin, appsink, nvdec, fragment)?;
        return Ok(rtp);
    }
    let convert = head
        .by_name(CONVERT)
        .ok_or_else(|| missing("videoconvert", PLUGINS_BASE))?;
    ask_for_yuv(appsink);
    pipeline
        .add(appsink)
        .and_then(|_| convert.link(appsink))
        .map_err(|e| link_error(fragment, e))?;
    Ok(rtp)
}
