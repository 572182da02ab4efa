//! Source stage: decoded frames from GStreamer.
//!
//! ```text
//! images location=../shared/data/visdrone/clip-9999999/images framerate=30 ! ...
//! media location=flight.mp4 ! ...
//! testsrc width=1280 height=720 num-buffers=60 ! ...
//! ```
//!
//! Sources decoded by GStreamer (`images`, `media`, `testsrc`, or any GStreamer launch fragment
//! as the head of a branch, with its settings on a `head` stage after it), or fed by the
//! application (`app`, [`AppSource`]).
//!
//! ```text
//! udpsrc port=5000 caps=... ! rtph264depay ! avdec_h264 ! head timeout=2 timeout-action=fail ! ...
//! ```
//!
//! GStreamer sources watch each wait for a frame ([`Watch`]): a live or network source that goes
//! quiet says so or fails (`timeout`, `timeout-action`), a file's decoder has `start-timeout` for
//! its first frame and `stall-timeout` after it, and a network source rebuilds its pipeline after
//! an error or end of stream (`retry`, `retry-interval`), counted in the report.
//!
//! Frames are numbered by presentation time (`Frame::seq`), so a frame lost on the way leaves a
//! gap: a file's from time zero, a GStreamer head's from its first frame, a head with an RTP
//! depayloader by the sender's RTP timestamps (whatever the packets' arrival), at the frame rate
//! of the decoded caps or, when they give none, the head's `framerate`:
//!
//! ```text
//! udpsrc port=5000 caps=... ! rtpjitterbuffer latency=0 ! rtph264depay ! avdec_h264 ! head framerate=30 ! ...
//! ```
//!
//! Four kinds of input (media files, image sequences, GStreamer launch fragments, the test source),
//! all decoded by GStreamer and delivered in the decoder's own format (I420 or NV12 for video,
//! whatever the image decoder gives for pictures): colour conversion happens in the preprocess
//! stage. Each frame's planes are copied once into a pooled buffer, except with NVDEC
//! (`media decoder=nvdec`, [`Decoder`]): the decoder's CUDA memory is the frame, read in place by
//! the CUDA preprocess backend:
//!
//! ```text
//! media location=flight.mp4 decoder=nvdec ! boxes format=synthetic ! batch ! preprocess backend=cuda ! ...
//! ```

mod app;
mod caps;
mod config;
mod damage;
mod dylib;
mod elements;
mod gst;
mod head;
mod header;
mod images;
mod launch;
mod media;
mod nvdec;
mod nvjpeg;
mod open;
mod pace;
mod pixels;
mod probe;
mod props;
mod rtp;
mod rtpsrc;
mod test;
mod timeline;
mod watch;

pub use app::{AppBox, AppFrame, AppSource, AppSourceSettings, BadBox, PushError, APP};
pub use config::{
    Decoder, HeadSettings, ImageDecoder, SourceConfig, SourceKind, DEFAULT_FRAMERATE, DEFAULT_LOOPS,
};
pub use damage::OnDamaged;
pub use gst::{pipelines_stopping, stream_stopping, GstSource};
pub use head::HEAD;
pub use images::IMAGES;
pub use media::MEDIA;
pub use nvdec::NvdecError;
pub use nvjpeg::NvjpegError;
pub use octopipe_core::stage::source::{FrameSource, SourceError, StartGate};
pub use open::open;
pub use probe::{
    element_exists, element_names, fragment_is_live, gst_cuda_library, image_files,
    nvdec_available, nvjpeg_available,
};
pub use rtpsrc::RTP;

/// How the sources read a decoded GStreamer buffer (its format, colorimetry, planes and place in
/// its stream, and NVDEC's frames in CUDA memory, read in place), shared with the GStreamer
/// plugin (`octopipe-gst`), whose elements make frames of the buffers passing through them the
/// same way.
#[doc(hidden)]
pub mod plugin {
    pub use crate::caps::{colorimetry, copy_frame, pixel_format, video_default};
    pub use crate::nvdec::{
        answer_context_query, is_cuda_caps, SharedCuda, CONTEXT_TYPE, CUDA_MEMORY,
    };
    pub use crate::timeline::{interval_of, Origin, Timeline};
}
pub use test::TESTSRC;
pub use watch::{
    TimeoutAction, Watch, DEFAULT_NETWORK_RETRY, DEFAULT_RETRY_INTERVAL, DEFAULT_STALL_TIMEOUT,
    DEFAULT_START_TIMEOUT, DEFAULT_STREAM_START_TIMEOUT, DEFAULT_TIMEOUT, MAX_RETRY_INTERVAL,
};

/// Entry points for the fuzz targets (`fuzz/`): the readers of what a file or a server hands a
/// source, with the properties each keeps. Built only under `--cfg fuzzing`, which cargo-fuzz
/// sets (and for the unit tests, which check the same properties on generated inputs).
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
