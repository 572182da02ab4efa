//! Media files and URIs, decoded by `uridecodebin`:
//!
//! ```text
//! uridecodebin uri=file:///data/flight.mp4 ! videoconvert ! video/x-raw,format={I420,NV12} ! appsink
//! ```
//!
//! With `decoder=nvdec` only NVIDIA's decoders are tried, and their CUDA memory goes straight to
//! the `appsink` (no `videoconvert`; see `nvdec`):
//!
//! ```text
//! uridecodebin uri=file:///data/flight.mp4 ! video/x-raw(memory:CUDAMemory),format=NV12 ! appsink
//! ```
//!
//! With `decoder=cpu` NVIDIA's decoders are never tried. Local files are checked (exist, are
//! files, can be read) before any GStreamer work. Pads other than the first video stream go to a
//! `fakesink`; an input without video is an error.

use std::path::{Path, PathBuf};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use super::caps::ask_for_yuv;
use super::elements::{link_error, make, PLUGINS_BASE};
use super::nvdec::{self, SharedCuda};
use super::props::MediaProps;
use super::SourceError;
use octopipe_core::stage::{Properties, Role, StageDecl};

/// (name for errors, URI) of a media location; local files must exist and be readable.
pub(super) fn media_uri(location: &str) -> Result<(String, String), SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::input(path.display(), reason);
    let io_error = |path: &Path, e: std::io::Error| SourceError::io(path.display(), e);
    let path = if is_uri(location) {
        if !location.starts_with("file:") {
            return Ok((location.to_string(), location.to_string()));
        }
        let (path, _) = gst::glib::filename_from_uri(location)
            .map_err(|e| input_error(Path::new(location), e.to_string()))?;
        path
    } else {
        PathBuf::from(location)
    };
    let meta = std::fs::metadata(&path).map_err(|e| io_error(&path, e))?;
    if meta.is_dir() {
        return Err(input_error(
            &path,
            "is a folder, not a media file (use `images` for a folder of pictures)".into(),
        ));
    }
    std::fs::File::open(&path).map_err(|e| io_error(&path, e))?;
    let absolute = std::fs::canonicalize(&path).map_err(|e| io_error(&path, e))?;
    let uri = gst::glib::filename_to_uri(&absolute, None)
        .map_err(|e| input_error(&path, e.to_string()))?;
    Ok((location.to_string(), uri.to_string()))
}

/// The local file a media location reads (`None` for a URI of another scheme, or a `file:` URI
/// that does not parse).
pub(super) fn local_path(location: &str) -> Option<PathBuf> {
    if !is_uri(location) {
        return Some(PathBuf::from(location));
    }
    location
        .starts_with("file:")
        .then(|| {
            gst::glib::filename_from_uri(location)
                .ok()
                .map(|(path, _)| path)
        })
        .flatten()
}

/// Frames a media file will give, from the duration its container declares and the frame rate
/// of the decoded stream; `None` while either is unknown (before the pipeline prerolled, a
/// stream without a declared duration, a variable frame rate).
pub(super) fn expected_frames(pipeline: &gst::Pipeline, appsink: &gst_app::AppSink) -> Option<u64> {
    let duration = pipeline.query_duration::<gst::ClockTime>()?;
    let caps = appsink.static_pad("sink")?.current_caps()?;
    let rate = caps.structure(0)?.get::<gst::Fraction>("framerate").ok()?;
    let (num, den) = (rate.numer(), rate.denom());
    if num <= 0 || den <= 0 {
        return None;
    }
    let frames = duration.nseconds() as f64 / 1e9 * num as f64 / den as f64;
    Some(frames.round() as u64)
}

/// `scheme://...` with a plausible scheme.
fn is_uri(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => {
            scheme.len() > 1
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// `uridecodebin ! videoconvert ! appsink` (software decoders), or with `nvdec` (the shared CUDA
/// context) `uridecodebin ! appsink` with NVIDIA's decoders into CUDA memory; pads other than raw
/// video go to a `fakesink`.
pub(super) fn build_media(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    uri: &str,
    nvdec: Option<&std::sync::Arc<SharedCuda>>,
) -> Result<(), SourceError> {
    let decode = make("uridecodebin", PLUGINS_BASE)?;
    decode.set_property("uri", uri);
    pipeline.add(&decode).map_err(|e| link_error(uri, e))?;
    decode_into(pipeline, &decode, appsink, nvdec, uri)
}

/// Wire `decode` (a `uridecodebin` or `decodebin` in `pipeline`, directly or inside a bin of it)
/// to `appsink`: its raw video pad through `videoconvert` (software decoders), or with `nvdec`
/// straight into the appsink (NVIDIA's decoders, CUDA memory); other pads go to a `fakesink`.
/// `what` names the input in errors.
pub(super) fn decode_into(
    pipeline: &gst::Pipeline,
    decode: &gst::Element,
    appsink: &gst_app::AppSink,
    nvdec: Option<&std::sync::Arc<SharedCuda>>,
    what: &str,
) -> Result<(), SourceError> {
    choose_decoders(decode, nvdec.as_ref().map(|s| s.device()));
    let video_sink = match nvdec {
        Some(shared) => {
            appsink.set_caps(Some(&nvdec::cuda_nv12_caps()));
            pipeline.add(appsink).map_err(|e| link_error(what, e))?;
            answer_queries(decode, appsink, shared.clone());
            appsink.static_pad("sink")
        }
        None => {
            let convert = make("videoconvert", PLUGINS_BASE)?;
            ask_for_yuv(appsink);
            pipeline
                .add_many([&convert, appsink.upcast_ref()])
                .and_then(|_| convert.link(appsink))
                .map_err(|e| link_error(what, e))?;
            convert.static_pad("sink")
        }
    };
    let no_video_sink = video_sink.clone();
    let bin = pipeline.downgrade();
    decode.connect_pad_added(move |_, pad| {
        let is_video = pad
            .current_caps()
            .and_then(|c| c.structure(0).map(|s| s.name().starts_with("video/")))
            .unwrap_or(false);
        if let Some(sink) = video_sink.as_ref().filter(|s| is_video && !s.is_linked()) {
            // Ghost pads where `decode` sits in a bin of its own (a launch head).
            let _ = pad.link_maybe_ghosting(sink);
            return;
        }
        // Audio, subtitles or a second video stream: consume and ignore.
        let (Some(bin), Ok(fake)) = (bin.upgrade(), gst::ElementFactory::make("fakesink").build())
        else {
            return;
        };
        fake.set_property("sync", false);
        fake.set_property("async", false);
        if bin.add(&fake).is_ok() {
            let _ = fake.sync_state_with_parent();
            if let Some(sink) = fake.static_pad("sink") {
                let _ = pad.link_maybe_ghosting(&sink);
            }
        }
    });
    decode.connect_no_more_pads(move |decode| {
        if no_video_sink.as_ref().is_some_and(|s| !s.is_linked()) {
            let msg = gst::message::Error::builder(
                gst::StreamError::WrongType,
                "no video stream in this input",
            )
            .src(decode)
            .build();
            let _ = decode.post_message(msg);
        }
    });
    Ok(())
}

/// Restrict the video decoders `decode` tries: NVIDIA's of CUDA device `nvdec` only, or (`None`)
/// never NVIDIA's. Demuxers, parsers and audio decoders are left alone.
fn choose_decoders(decode: &gst::Element, nvdec: Option<usize>) {
    decode.connect("autoplug-select", false, move |args| {
        let factory = args
            .get(3)
            .and_then(|v| v.get::<gst::ElementFactory>().ok());
        let wanted = factory.is_none_or(|f| {
            !nvdec::is_video_decoder(&f)
                || match nvdec {
                    Some(device) => nvdec::decodes_on(&f, device),
                    None => !nvdec::is_nv_decoder(&f),
                }
        });
        // GST_AUTOPLUG_SELECT_TRY or _SKIP.
        nvdec::autoplug_select_result(if wanted { 0 } else { 2 })
    });
}

/// Answer the queries decodebin forwards for a decoder whose pad is not linked yet: caps as the
/// `appsink` would (so an NVIDIA decoder sees that CUDA memory is wanted and outputs it, as
/// playbin answers for its sink) and the CUDA context (the one octopipe shares).
fn answer_queries(
    decode: &gst::Element,
    appsink: &gst_app::AppSink,
    shared: std::sync::Arc<SharedCuda>,
) {
    let sink = appsink.static_pad("sink");
    decode.connect("autoplug-query", false, move |args| {
        let query = args.get(3)?;
        // SAFETY: decodebin passes a live, writable GstQuery for the duration of the signal;
        // it is answered in place, as the signal expects.
        let query = unsafe {
            let ptr = gst::glib::gobject_ffi::g_value_get_boxed(
                gst::glib::translate::ToGlibPtr::to_glib_none(query).0,
            ) as *mut gst::ffi::GstQuery;
            if ptr.is_null() {
                return Some(false.to_value());
            }
            gst::QueryRef::from_mut_ptr(ptr)
        };
        let answered = match query.view_mut() {
            gst::QueryViewMut::Caps(_) => sink.as_ref().is_some_and(|s| s.query(query)),
            _ => nvdec::answer_context_query(query, &shared),
        };
        Some(answered.to_value())
    });
}

/// At end of stream of a media file whose container declares its length: a stream that stops well
/// short of it (after `frames` frames, the last ending at `last_end`) is a truncated file; the
/// message says so. Call before the pipeline is stopped.
pub(super) fn truncation(
    pipeline: &gst::Pipeline,
    last_end: Option<gst::ClockTime>,
    frames: u64,
) -> Option<String> {
    // Containers whose header states the duration (a raw H.264 stream's is only an estimate).
    let declares = pipeline.iterate_recurse().into_iter().flatten().any(|e| {
        e.factory()
            .is_some_and(|f| matches!(f.name().as_str(), "qtdemux" | "matroskademux" | "avidemux"))
    });
    let duration = pipeline.query_duration::<gst::ClockTime>();
    let (Some(duration), true) = (duration, declares) else {
        return None;
    };
    let end = last_end.unwrap_or(gst::ClockTime::ZERO);
    let slack = (duration / 20).max(gst::ClockTime::from_mseconds(200));
    (end + slack < duration).then(|| {
        format!(
            "the stream ends after {frames} frames at {:.2} s but the file declares {:.2} s: truncated file?",
            end.nseconds() as f64 / 1e9,
            duration.nseconds() as f64 / 1e9
        )
    })
}

/// `media location=FILE|URI`: any media through decodebin.
pub const MEDIA: StageDecl = StageDecl {
    name: "media",
    role: Role::Source,
    doc: "any media file or URI through GStreamer's decodebin, delivered as I420/NV12 \
          (decoder=nvdec: NV12 in CUDA memory)",
    props: MediaProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(MediaProps::from_props(p)?.config())),
};
