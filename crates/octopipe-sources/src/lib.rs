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

// The layers below, under the names the modules here use (`crate::frame`, `crate::preprocess`).
use octopipe_core::{budget, error, files, frame, redact, stage};
use octopipe_stages::{boxes, preprocess};

mod app;
mod caps;
mod damage;
mod elements;
mod gst;
mod header;
mod images;
mod launch;
mod media;
mod nvdec;
mod nvjpeg;
mod pace;
mod pixels;
mod props;
mod rtp;
mod rtpsrc;
mod test;
mod timeline;
mod watch;

use std::time::Duration;

use crate::error::Error;
use crate::files::RunPath;
use crate::frame::{BufferPool, PixelFormat};
use crate::preprocess::PreprocessConfig;
use crate::stage::{Caps, Element, OpenContext, PropChoice, Properties, Role, Running, StageDecl};
use pace::{Joined, Paced};
use props::{HeadProps, ImagesProps, MediaProps, TestProps};
use watch::{RetryProps, StallProps, WaitProps};

pub use crate::stage::source::{FrameSource, SourceError, StartGate};
pub use app::{AppBox, AppFrame, AppSource, AppSourceSettings, BadBox, PushError, APP};
pub use damage::OnDamaged;
pub use gst::GstSource;
pub use nvdec::NvdecError;
pub use nvjpeg::NvjpegError;
pub(crate) use props::DecoderProps;
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
pub use watch::{
    TimeoutAction, Watch, DEFAULT_NETWORK_RETRY, DEFAULT_RETRY_INTERVAL, DEFAULT_STALL_TIMEOUT,
    DEFAULT_START_TIMEOUT, DEFAULT_STREAM_START_TIMEOUT, DEFAULT_TIMEOUT, MAX_RETRY_INTERVAL,
};

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
    /// Credentials in a URI are hidden ([`crate::redact`]).
    pub fn describe(&self) -> String {
        let text = match &self.kind {
            SourceKind::Media { location } | SourceKind::Images { location } => location,
            SourceKind::Launch { fragment, .. } => fragment,
            SourceKind::Test { pattern, .. } => return format!("videotestsrc pattern={pattern}"),
        };
        crate::redact::credentials(text).into_owned()
    }

    /// Nominal time between frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.framerate)
    }
}

/// Whether GStreamer has an element factory called `name` (GStreamer is initialised if needed;
/// false when it cannot be).
pub fn element_exists(name: &str) -> bool {
    elements::element_exists(name)
}

/// Names of every installed GStreamer element (empty when GStreamer cannot be initialised).
pub fn element_names() -> Vec<String> {
    elements::element_names()
}

/// Whether NVDEC decoding into CUDA memory (`decoder=nvdec`) can run here; otherwise why not
/// (no `libgstcuda-1.0`, no GPU, no NVDEC decoder registered by GStreamer's `nvcodec` plugin).
pub fn nvdec_available() -> Result<(), NvdecError> {
    nvdec::available()
}

/// Whether nvJPEG decoding into CUDA memory (`images decoder=nvjpeg`) can run on GPU `device`
/// here: `libnvjpeg` loads, the GPU exists and a decoder starts on it (the one every stream of
/// the process decoding there shares); otherwise why not. `Ok` says which backend decodes
/// (`hardware`: the GPU's JPEG engines; `gpu`: its cores).
pub fn nvjpeg_available(device: usize) -> Result<&'static str, NvjpegError> {
    nvjpeg::available(device).map(|d| d.backend())
}

/// Whether GStreamer's CUDA library (`libgstcuda-1.0`, opened at run time) loads with the
/// functions octopipe calls; otherwise why not.
pub fn gst_cuda_library() -> Result<(), NvdecError> {
    nvdec::library()
}

/// The files an `images location=` (a folder, a glob such as `dir/*.jpg`, or one image) plays,
/// in name order, as the source lists them when it opens (symlinks not resolved): for a check
/// of each file's real path.
pub fn image_files(location: &str) -> Result<Vec<std::path::PathBuf>, SourceError> {
    images::matching_files(location)
}

/// Whether a GStreamer launch fragment holds a live source (it is parsed, never started).
pub fn fragment_is_live(fragment: &str) -> bool {
    launch::fragment_is_live(fragment)
}

/// Open the GStreamer pipeline for `config`; frames' planes come from `pool`.
pub fn open(config: &SourceConfig, pool: BufferPool) -> Result<Box<dyn FrameSource>, SourceError> {
    Ok(Box::new(GstSource::open(config, pool)?))
}

impl Element for SourceConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let mut config = *self;
        let interval = config.frame_interval();
        let joined = config.epoch.map(|epoch| Joined::now(epoch, interval));
        if let (Some(j), SourceKind::Test { num_buffers, .. }) = (&joined, &mut config.kind) {
            *num_buffers = num_buffers.saturating_sub(u32::try_from(j.first).unwrap_or(u32::MAX));
        }
        let mut source = GstSource::open(&config, host_pool(&config, ctx.caps))?;
        source.report_to(ctx.tally.clone());
        let source: Box<dyn FrameSource> = Box::new(source);
        Ok(Running::source(if config.paced() {
            Box::new(Paced::new(source, interval, ctx.start.clone(), joined))
        } else {
            source
        }))
    }
    fn is_live(&self) -> bool {
        self.live
    }
    fn frame_interval(&self) -> Option<Duration> {
        Some(SourceConfig::frame_interval(self))
    }
    fn frame_bytes(&self) -> Option<u64> {
        match &self.kind {
            SourceKind::Test {
                width,
                height,
                format,
                ..
            } => {
                let pixels = u64::from(*width) * u64::from(*height);
                Some(match format {
                    // A luma plane and two quarter-size chroma planes.
                    PixelFormat::I420 | PixelFormat::Nv12 => pixels * 3 / 2 + u64::from(*width),
                    f => pixels * f.packed_bytes() as u64,
                })
            }
            _ => None,
        }
    }
    fn describe_source(&self) -> Option<String> {
        Some(self.describe())
    }
    fn set_stream(&mut self, stream: u32) {
        self.stream = stream;
    }
    fn inputs(&self) -> Vec<RunPath> {
        match &self.kind {
            SourceKind::Images { location } => image_inputs(location),
            SourceKind::Media { location } => media::local_path(location)
                .map(|path| RunPath::file("media location", path))
                .into_iter()
                .collect(),
            // A launch fragment's own file elements are not looked into.
            SourceKind::Launch { .. } | SourceKind::Test { .. } => Vec::new(),
        }
    }
}

/// The pool a source's host frames are copied into: page-locked when a CUDA preprocess stage
/// downstream may pull crop rectangles straight out of them (`preprocess gather=auto|device`),
/// and the source may give host frames (not `decoder=nvdec`); pageable otherwise, or where
/// page-locked memory cannot be had (one debug line says why; with `gather=device` the
/// preprocess stage then names the frame).
fn host_pool(config: &SourceConfig, caps: &Caps) -> BufferPool {
    let device = caps
        .get::<PreprocessConfig>()
        .and_then(PreprocessConfig::page_locked_frames);
    match device {
        Some(device) if config.decoder != Decoder::Nvdec => BufferPool::page_locked(device)
            .unwrap_or_else(|why| {
                tracing::debug!("{}: pageable frames: {why}", config.describe());
                BufferPool::new()
            }),
        _ => BufferPool::new(),
    }
}

/// What an `images` location reads: the folder, the one image, or the files its glob matches (a
/// folder or glob that cannot be read reads nothing; opening the source reports it).
fn image_inputs(location: &str) -> Vec<RunPath> {
    let name = std::path::Path::new(location)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if std::path::Path::new(location).is_file() {
        return vec![RunPath::file("images location", location)];
    }
    if !name.contains(['*', '?']) {
        return vec![RunPath::folder("images location", location)];
    }
    images::matching_files(location)
        .unwrap_or_default()
        .into_iter()
        .map(|file| RunPath::file("images location", file))
        .collect()
}

/// `images location=DIR framerate=30`: JPEG/PNG images in file-name order.
pub const IMAGES: StageDecl = StageDecl {
    name: "images",
    role: Role::Source,
    doc: "JPEG/PNG images in file-name order, decoded by GStreamer",
    props: ImagesProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(ImagesProps::from_props(p)?.config())),
};

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

/// `testsrc`: GStreamer's videotestsrc.
pub const TESTSRC: StageDecl = StageDecl {
    name: "testsrc",
    role: Role::Source,
    doc: "GStreamer videotestsrc",
    props: TestProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| {
        let props = TestProps::from_props(p)?;
        if let Some(why) = crate::stage::limits::frame_too_large(props.width, props.height) {
            // Each side is within its range; together they may still pass a frame's pixels.
            let key = if p.given("height").is_some() {
                "height"
            } else {
                "width"
            };
            return Err(p.error(key, format!("testsrc: width x height: {why}")));
        }
        let config = props.config();
        if config.epoch.is_some() && !config.live {
            return Err(p.error(
                "epoch",
                "epoch needs live=true (frames are released on the clock)",
            ));
        }
        Ok(Box::new(config))
    },
};

/// The `head` pseudo-stage: how the GStreamer head before it is watched and reconnected.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct HeadSettings {
    /// Timeouts and reconnects of the head.
    pub watch: Watch,
    /// The stream's frame rate when its decoded caps carry none (`framerate`): see
    /// [`SourceConfig::head_framerate`].
    pub framerate: Option<f64>,
    /// `decoder=`: octopipe decodes the head's encoded stream with this decoder (unset: the
    /// head decodes itself).
    pub decoder: Option<Decoder>,
    /// `device=`: the GPU that decodes with `decoder=nvdec`.
    pub device: usize,
}

impl Element for HeadSettings {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Err(crate::error::PipelineError::NotAStage("head").into())
    }
}

/// `GSTREAMER ELEMENTS ! head timeout=2 retry=5 ! ...`: the settings of the GStreamer head
/// before it (a launch fragment has no octopipe properties of its own).
pub const HEAD: StageDecl = StageDecl {
    name: "head",
    role: Role::Head,
    doc: "settings of the GStreamer head before it: timeouts, reconnects, frame rate",
    props: HeadProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| Ok(Box::new(HeadProps::from_props(p)?.settings())),
};
