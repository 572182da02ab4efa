//! A source stage's settings: what to decode, which decoder, how it is paced and watched.

use std::time::Duration;

use octopipe_core::frame::PixelFormat;
use octopipe_core::stage::PropChoice;

use super::damage::OnDamaged;
use super::watch::Watch;

/// Default frame rate for image sequences and the test source.
pub const DEFAULT_FRAMERATE: f64 = 30.0;
/// Default number of times an image sequence is played.
pub const DEFAULT_LOOPS: u32 = 1;

/// What to decode.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
        /// The fragment ends in the encoded stream (`... ! rtph264depay ! h264parse`) and
        /// octopipe decodes it (`decodebin`, by [`SourceConfig::decoder`]: NVDEC into CUDA
        /// memory too); false: the fragment decodes itself.
        decode: bool,
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

/// Which decoders a `media` source uses (`decoder=cpu|nvdec|auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum Decoder {
    /// Software decoders, never NVIDIA's: frames in host memory, read by every stage.
    #[default]
    Cpu,
    /// NVIDIA's NVDEC decoders (GStreamer's `nvcodec` plugin) only: frames stay in CUDA memory
    /// (NV12) and go to the preprocess kernel with no copy. For GPU pipelines
    /// (`preprocess backend=cuda`): the CPU backend refuses device frames. An error naming the
    /// input where NVDEC, a GPU or `libgstcuda-1.0` is missing.
    Nvdec,
    /// `nvdec` when it can run here, else `cpu` (one log line says why).
    Auto,
}

/// Which decoder an `images` source's JPEG files go through (`decoder=cpu|nvjpeg|auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum ImageDecoder {
    /// GStreamer's `jpegdec`/`pngdec` on the CPU: frames in host memory, read by every stage.
    #[default]
    Cpu,
    /// NVIDIA's nvJPEG (the GPU's JPEG engines where it has them): JPEG files decoded in batches
    /// over every stream into CUDA memory (I420), read in place by `preprocess backend=cuda`
    /// (the CPU backend refuses device frames). Files it does not take (progressive, grey,
    /// CMYK, not 4:2:0, damaged) decode on the CPU, counted. An error naming the input where
    /// `libnvjpeg` or a GPU is missing, or the files are PNG.
    Nvjpeg,
    /// `nvjpeg` when it can run here, else `cpu` (one log line says why).
    Auto,
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
    /// Silence, stalls and reconnects.
    pub watch: Watch,
    /// For a GStreamer head (`head framerate=F`): the frame rate to number frames by
    /// (`Frame::seq`) when the decoded caps carry none, as an RTP stream whose encoder wrote no
    /// timing in its SPS, or MJPEG over RTP. `None`: such frames are numbered as they come (a
    /// warning says so), so a lost frame would move the boxes keyed by frame number after it.
    pub head_framerate: Option<f64>,
    /// Which decoders a media file or URI goes through.
    pub decoder: Decoder,
    /// With `decoder=nvdec`: the CUDA device whose NVDEC decodes (its frames are in its memory);
    /// with an image sequence's `decoder=nvjpeg`, the one whose nvJPEG decodes.
    pub device: usize,
    /// Which decoder an image sequence's JPEG files go through.
    pub image_decoder: ImageDecoder,
    /// For a live test source (`testsrc live=true epoch=T`): the UNIX time in seconds at which
    /// its frame 0 was due. The source starts at the frame due when it opens (numbered as on
    /// that timeline, `num-buffers` counted from frame 0), so a stream restarted, or moved to
    /// another process, goes on with its frame numbers.
    pub epoch: Option<f64>,
    /// What the source does with a damaged frame (a cut or corrupt image file, a frame the
    /// video decoder concealed errors in): by default images skip it, video keeps it; either
    /// way it is counted in the report (`damaged input`) and named in a log line.
    pub on_damaged: OnDamaged,
}

impl SourceConfig {
    /// A source of `kind` with default settings.
    pub fn new(kind: SourceKind) -> Self {
        let on_damaged = match kind {
            SourceKind::Images { .. } => OnDamaged::Skip,
            _ => OnDamaged::Keep,
        };
        SourceConfig {
            kind,
            framerate: DEFAULT_FRAMERATE,
            live: false,
            stream: 0,
            loops: DEFAULT_LOOPS,
            watch: Watch::default(),
            head_framerate: None,
            decoder: Decoder::Cpu,
            device: 0,
            image_decoder: ImageDecoder::Cpu,
            epoch: None,
            on_damaged,
        }
    }

    /// Whether the runner releases frames at their presentation time: a live file or image
    /// sequence, or the test source; a live GStreamer head (`udpsrc`, ...) brings its own clock.
    pub fn paced(&self) -> bool {
        self.live && !matches!(self.kind, SourceKind::Launch { .. })
    }

    /// A short description for reports: the location, fragment or test pattern.
    /// Credentials in a URI are hidden ([`octopipe_core::redact`]).
    pub fn describe(&self) -> String {
        let text = match &self.kind {
            SourceKind::Media { location } | SourceKind::Images { location } => location,
            SourceKind::Launch { fragment, .. } => fragment,
            SourceKind::Test { pattern, .. } => return format!("videotestsrc pattern={pattern}"),
        };
        octopipe_core::redact::credentials(text).into_owned()
    }

    /// Nominal time between frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.framerate)
    }
}

/// The `head` pseudo-stage: how the GStreamer head before it is watched and reconnected.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct HeadSettings {
    /// Timeouts and reconnects of the head.
    pub watch: Watch,
    /// The stream's frame rate when its decoded caps carry none (`framerate`): see
    /// [`SourceConfig::head_framerate`](crate::SourceConfig::head_framerate).
    pub framerate: Option<f64>,
    /// `decoder=`: octopipe decodes the head's encoded stream with this decoder (unset: the
    /// head decodes itself).
    pub decoder: Option<Decoder>,
    /// `device=`: the GPU that decodes with `decoder=nvdec`.
    pub device: usize,
}
