//! Source stage: decoded frames from GStreamer.
//!
//! ```text
//! images location=../shared/data/visdrone/clip-9999999/images framerate=30 ! ...
//! media location=flight.mp4 ! ...
//! testsrc width=1280 height=720 num-buffers=60 ! ...
//! ```
//!
//! Four kinds of input (media files, image sequences, GStreamer launch fragments, the test source),
//! all decoded by GStreamer and delivered in the decoder's own format (I420 or NV12 for video,
//! whatever the image decoder gives for pictures): colour conversion happens in the preprocess
//! stage. Each frame's planes are copied once into a pooled buffer.

mod caps;
mod gst;
mod images;
mod launch;
mod media;
mod test;

use std::time::Duration;

use crate::frame::{BufferPool, Frame, PixelFormat};

pub use gst::GstSource;

/// Default frame rate for image sequences and the test source.
pub const DEFAULT_FRAMERATE: f64 = 30.0;
/// Default width and height of the test source.
pub const DEFAULT_TEST_SIZE: (u32, u32) = (1280, 720);
/// Default number of frames of the test source.
pub const DEFAULT_NUM_BUFFERS: u32 = 90;
/// Default number of times an image sequence is played.
pub const DEFAULT_LOOPS: u32 = 1;

/// What to decode.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    /// Any media file (mp4, mkv, raw h264, ...) or URI, through `uridecodebin`.
    Media {
        /// A path or a URI.
        location: String,
    },
    /// JPEG or PNG images played in file-name order.
    Images {
        /// A folder (all `.jpg`/`.jpeg`/`.png` files in it) or a glob such as `dir/*.jpg`.
        location: String,
    },
    /// Any GStreamer launch fragment ending in raw or decodable video, e.g.
    /// `udpsrc port=5000 caps=application/x-rtp,... ! rtph264depay ! avdec_h264`; octopipe appends
    /// `videoconvert ! appsink` (I420/NV12).
    Launch {
        /// The fragment, as gst-launch-1.0 would take it.
        fragment: String,
    },
    /// GStreamer `videotestsrc`.
    Test {
        /// `videotestsrc` pattern name (e.g. `smpte`, `ball`, `snow`).
        pattern: String,
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// Number of frames before end of stream.
        num_buffers: u32,
        /// Pixel format to request.
        format: PixelFormat,
    },
}

/// Settings of a source stage.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceConfig {
    /// What to decode.
    pub kind: SourceKind,
    /// Frames per second for image sequences and the test source (media files use their own).
    pub framerate: f64,
    /// Release frames at their presentation time (a live-rate stream) instead of as fast as possible.
    pub live: bool,
    /// Stream id stamped on every frame.
    pub stream: u32,
    /// Times an image sequence is played, pts and frame numbers continuing (at least 1; other
    /// sources only take 1).
    pub loops: u32,
}

impl SourceConfig {
    /// A source of `kind` with default settings.
    pub fn new(kind: SourceKind) -> Self {
        SourceConfig {
            kind,
            framerate: DEFAULT_FRAMERATE,
            live: false,
            stream: 0,
            loops: DEFAULT_LOOPS,
        }
    }

    /// Whether the runner releases frames at their presentation time: a live file or image
    /// sequence, or the test source; a live GStreamer head (`udpsrc`, ...) brings its own clock.
    pub fn paced(&self) -> bool {
        self.live && !matches!(self.kind, SourceKind::Launch { .. })
    }

    /// A short description for reports: the location, fragment or test pattern.
    pub fn describe(&self) -> String {
        match &self.kind {
            SourceKind::Media { location } | SourceKind::Images { location } => location.clone(),
            SourceKind::Launch { fragment } => fragment.clone(),
            SourceKind::Test { pattern, .. } => format!("videotestsrc pattern={pattern}"),
        }
    }

    /// Nominal time between frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.framerate)
    }
}

/// Errors of the source stage. Each names the input it is about.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// GStreamer could not be initialised.
    #[error("GStreamer could not be initialised: {0}")]
    Init(String),
    /// A file or folder does not exist or cannot be read.
    #[error("{path}: {reason}")]
    Input {
        /// The offending path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A GStreamer element is not installed.
    #[error("GStreamer element '{element}' is missing: install {package}")]
    MissingElement {
        /// Element factory name.
        element: String,
        /// Debian package that provides it.
        package: String,
    },
    /// An error posted on the GStreamer bus.
    #[error("{source_name}: {message}{}", debug.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Stream {
        /// The input (file, URI or element) the error is about.
        source_name: String,
        /// GStreamer's message.
        message: String,
        /// GStreamer's debug detail.
        debug: Option<String>,
    },
    /// A setting the source cannot use (an unknown test pattern, a framerate of 0, ...).
    #[error("invalid {setting} '{value}': expected {expected}")]
    Setting {
        /// Property name, as in the pipeline text.
        setting: String,
        /// The value given.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// The decoder produced a format octopipe cannot read.
    #[error("{source_name}: unsupported decoded format {format}")]
    Format {
        /// The input.
        source_name: String,
        /// The caps or format name.
        format: String,
    },
}

/// A producer of decoded frames.
pub trait FrameSource: Send {
    /// The next frame, `Ok(None)` at end of stream.
    fn next_frame(&mut self) -> Result<Option<Frame>, SourceError>;
    /// Stop producing (end of stream comes next); idempotent.
    fn stop(&mut self);
    /// A function another thread may call to end the stream while [`FrameSource::next_frame`]
    /// is blocked waiting for a frame (e.g. a live source that has gone quiet).
    fn interrupter(&self) -> Box<dyn Fn() + Send + Sync>;
}

/// Whether GStreamer has an element factory called `name` (GStreamer is initialised if needed;
/// false when it cannot be).
pub fn element_exists(name: &str) -> bool {
    gst::element_exists(name)
}

/// Names of every installed GStreamer element (empty when GStreamer cannot be initialised).
pub fn element_names() -> Vec<String> {
    gst::element_names()
}

/// Whether a GStreamer launch fragment holds a live source (it is parsed, never started).
pub fn fragment_is_live(fragment: &str) -> bool {
    launch::fragment_is_live(fragment)
}

/// Open the GStreamer pipeline for `config`; frames' planes come from `pool`.
pub fn open(config: &SourceConfig, pool: BufferPool) -> Result<Box<dyn FrameSource>, SourceError> {
    Ok(Box::new(GstSource::open(config, pool)?))
}
