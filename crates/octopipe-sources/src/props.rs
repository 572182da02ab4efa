//! The GStreamer sources' properties, declared once (`#[derive(Properties)]`): `images`,
//! `media`, `testsrc`, the `head` pseudo-stage, and the blocks they share (the decoder, the
//! watch's blocks in `watch.rs`). `rtp` and `app` declare theirs in their own modules.

use std::path::PathBuf;

use super::config::{Decoder, HeadSettings, ImageDecoder, SourceConfig, SourceKind};
use super::damage::OnDamaged;
use super::watch::{RetryProps, StallProps, WaitProps, Watch};
use octopipe_core::frame::PixelFormat;
use octopipe_core::stage::{PropSpec, PropType, Properties};

/// `live=`, as the GStreamer sources word it (`#[prop(spec = LIVE)]`).
pub(super) const LIVE: PropSpec = PropSpec::new(
    "live",
    PropType::Bool,
    "false",
    "release frames at their presentation time (a live-rate stream)",
);

/// [`super::config::DEFAULT_FRAMERATE`] as `inspect` shows it.
const FRAMERATE_TEXT: octopipe_core::stage::ShownText =
    octopipe_core::stage::Shown(super::config::DEFAULT_FRAMERATE).text();

/// `framerate=`, as the image and test sources word it (`#[prop(spec = FRAMERATE)]`).
pub(super) const FRAMERATE: PropSpec = PropSpec::new(
    "framerate",
    PropType::POSITIVE_FLOAT,
    octopipe_core::stage::ShownText::as_str(&FRAMERATE_TEXT),
    "frames per second; also sets the budget (1/framerate)",
);

/// `device=`: the GPU an NVDEC decoder runs on (`media`, `rtp`, `head`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Properties)]
pub(crate) struct DeviceProps {
    /// with decoder=nvdec: the GPU that decodes (frames in its memory)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_DEVICE)]
    pub device: usize,
}

/// `decoder=` and `device=` of the sources that decode (`media`, `rtp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Properties)]
pub(crate) struct DecoderProps {
    /// cpu: software decoders, host frames; nvdec: NVIDIA's decoders, frames stay in CUDA memory
    /// for preprocess backend=cuda (no copy); auto: nvdec when present, else cpu
    #[prop(default = "cpu")]
    pub decoder: Decoder,
    /// `device=`.
    #[prop(flatten)]
    pub device: DeviceProps,
}

/// A count given as an integer of any size, as the `u32` the source takes (saturating).
fn u32_of(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The `images` source's properties ([`IMAGES`](super::IMAGES)).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct ImagesProps {
    /// a folder of .jpg/.jpeg/.png files, a glob such as dir/*.jpg, or one image
    #[prop(required)]
    pub location: PathBuf,
    /// Frames per second.
    #[prop(spec = FRAMERATE)]
    pub framerate: f64,
    /// play the images this many times (pts and frame numbers go on)
    #[prop(name = "loop", default = super::config::DEFAULT_LOOPS, range = 1..=1_000_000)]
    pub loops: u64,
    /// Release frames at their presentation time.
    #[prop(spec = LIVE)]
    pub live: bool,
    /// cpu: jpegdec/pngdec, host frames; nvjpeg: JPEG decoded by nvJPEG in batches over the
    /// streams into CUDA memory for preprocess backend=cuda; auto: nvjpeg when present, else cpu
    #[prop(default = "cpu")]
    pub decoder: ImageDecoder,
    /// with decoder=nvjpeg: the GPU that decodes (frames in its memory)
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_DEVICE)]
    pub device: usize,
    /// a damaged file (a JPEG cut short or with corrupt data, a file that is no image): skip
    /// (left out), keep (decoded as far as it goes) or fail; counted in the report either way
    #[prop(default = "skip")]
    pub on_damaged: OnDamaged,
    /// `timeout=`, `timeout-action=`, `start-timeout=`.
    #[prop(flatten)]
    pub wait: WaitProps,
    /// `stall-timeout=`.
    #[prop(flatten)]
    pub stall: StallProps,
}

impl ImagesProps {
    /// The source's settings.
    pub fn config(self) -> SourceConfig {
        let mut cfg = SourceConfig::new(SourceKind::Images {
            location: self.location.to_string_lossy().into_owned(),
        });
        cfg.framerate = self.framerate;
        // As written: the count's low 32 bits (a count that large plays for ever in practice).
        cfg.loops = self.loops as u32;
        cfg.live = self.live;
        cfg.on_damaged = self.on_damaged;
        cfg.watch = Watch::of(&self.wait, &self.stall, &RetryProps::default());
        cfg.image_decoder = self.decoder;
        cfg.device = self.device;
        cfg
    }
}

/// The `media` source's properties ([`MEDIA`](super::MEDIA)).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct MediaProps {
    /// the file or URI
    #[prop(required)]
    pub location: PathBuf,
    /// `decoder=`, `device=`.
    #[prop(flatten)]
    pub decode: DecoderProps,
    /// Release frames at their presentation time.
    #[prop(spec = LIVE)]
    pub live: bool,
    /// a damaged frame (the decoder concealed errors in it, or warned about its data): keep
    /// (passed on), skip (left out) or fail; counted in the report either way
    #[prop(default = "keep")]
    pub on_damaged: OnDamaged,
    /// `timeout=`, `timeout-action=`, `start-timeout=`.
    #[prop(flatten)]
    pub wait: WaitProps,
    /// `stall-timeout=`.
    #[prop(flatten)]
    pub stall: StallProps,
    /// `retry=`, `retry-interval=`.
    #[prop(flatten)]
    pub retry: RetryProps,
}

impl MediaProps {
    /// The source's settings.
    pub fn config(self) -> SourceConfig {
        let mut cfg = SourceConfig::new(SourceKind::Media {
            location: self.location.to_string_lossy().into_owned(),
        });
        cfg.live = self.live;
        cfg.watch = Watch::of(&self.wait, &self.stall, &self.retry);
        cfg.decoder = self.decode.decoder;
        cfg.on_damaged = self.on_damaged;
        cfg.device = self.decode.device.device;
        cfg
    }
}

/// The `testsrc` source's properties ([`TESTSRC`](super::TESTSRC)).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct TestProps {
    /// videotestsrc pattern (smpte, ball, snow, ...)
    #[prop(default = "smpte")]
    pub pattern: String,
    /// frame width
    #[prop(default = 1280, range = 1..=octopipe_core::stage::limits::MAX_SIDE)]
    pub width: u64,
    /// frame height
    #[prop(default = 720, range = 1..=octopipe_core::stage::limits::MAX_SIDE)]
    pub height: u64,
    /// frames before end of stream
    #[prop(default = 90, range = 1..=i32::MAX)]
    pub num_buffers: u64,
    /// pixel format (gray8: one 8-bit band; gray16: one 16-bit band, for tilestats)
    #[prop(default = "i420")]
    pub format: PixelFormat,
    /// Frames per second.
    #[prop(spec = FRAMERATE)]
    pub framerate: f64,
    /// Release frames at their presentation time.
    #[prop(spec = LIVE)]
    pub live: bool,
    /// with live=true: the UNIX time (s) frame 0 was due; the stream starts at the frame due now
    /// (num-buffers counts from frame 0), so a stream moved to another process keeps its frame
    /// numbers
    #[prop(range = 0.0..=1e11)]
    pub epoch: Option<f64>,
    /// `timeout=`, `timeout-action=`, `start-timeout=`.
    #[prop(flatten)]
    pub wait: WaitProps,
    /// `stall-timeout=`.
    #[prop(flatten)]
    pub stall: StallProps,
}

impl TestProps {
    /// The source's settings (`epoch` without `live` is the stage's to refuse).
    pub fn config(self) -> SourceConfig {
        let mut cfg = SourceConfig::new(SourceKind::Test {
            pattern: self.pattern,
            width: u32_of(self.width),
            height: u32_of(self.height),
            num_buffers: u32_of(self.num_buffers),
            format: self.format,
        });
        cfg.framerate = self.framerate;
        cfg.live = self.live;
        cfg.epoch = self.epoch;
        cfg.watch = Watch::of(&self.wait, &self.stall, &RetryProps::default());
        cfg
    }
}

/// The `head` pseudo-stage's properties ([`HEAD`](super::HEAD)).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct HeadProps {
    /// frames per second when the decoded stream says none: frames are numbered by time at it
    #[prop(positive)]
    pub framerate: Option<f64>,
    /// octopipe decodes the head's encoded stream (it ends in e.g. rtph264depay ! h264parse)
    /// with decodebin: cpu, nvdec (frames stay in CUDA memory) or auto; unset: the head
    /// decodes itself
    pub decoder: Option<Decoder>,
    /// `device=`.
    #[prop(flatten)]
    pub device: DeviceProps,
    /// `timeout=`, `timeout-action=`, `start-timeout=`.
    #[prop(flatten)]
    pub wait: WaitProps,
    /// `stall-timeout=`.
    #[prop(flatten)]
    pub stall: StallProps,
    /// `retry=`, `retry-interval=`.
    #[prop(flatten)]
    pub retry: RetryProps,
}

impl HeadProps {
    /// The head's settings.
    pub fn settings(self) -> HeadSettings {
        HeadSettings {
            watch: Watch::of(&self.wait, &self.stall, &self.retry),
            framerate: self.framerate,
            decoder: self.decoder,
            device: self.device.device,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blocks_defaults_are_the_watch_defaults() {
        let d = Watch::of(
            &WaitProps::default(),
            &StallProps::default(),
            &RetryProps::default(),
        );
        assert_eq!(d, Watch::default());
    }

    #[test]
    fn the_declared_defaults_are_the_source_defaults() {
        use super::super::config::DEFAULT_FRAMERATE;
        let test = TestProps::default().config();
        let SourceKind::Test {
            width,
            height,
            num_buffers,
            format,
            ..
        } = test.kind
        else {
            panic!("a test source");
        };
        assert_eq!((width, height, num_buffers), (1280, 720, 90));
        assert_eq!(format, PixelFormat::I420);
        assert_eq!(test.framerate, DEFAULT_FRAMERATE);
        assert_eq!(
            super::super::app::AppProps::default().framerate,
            DEFAULT_FRAMERATE
        );
        let head = HeadProps::default().settings();
        assert_eq!((head.framerate, head.decoder, head.device), (None, None, 0));
    }
}
