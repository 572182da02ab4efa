//! Opening a source stage: its element, paced when live, and the pool its frames are copied into.

use std::time::Duration;

use octopipe_core::error::Error;
use octopipe_core::files::RunPath;
use octopipe_core::frame::{BufferPool, PixelFormat};
use octopipe_core::stage::source::{FrameSource, SourceError};
use octopipe_core::stage::{Caps, Element, OpenContext, PageLocked, Running};

use super::config::{Decoder, SourceConfig, SourceKind};
use super::gst::GstSource;
use super::pace::{Joined, Paced};
use super::{images, media};

/// Open the GStreamer pipeline for `config`; frames' planes come from `pool`.
pub fn open(config: &SourceConfig, pool: BufferPool) -> Result<Box<dyn FrameSource>, SourceError> {
    Ok(Box::new(GstSource::open(config, pool)?))
}

impl Element for SourceConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let mut config = *self;
        let interval = config.frame_interval();
        let joined = config.epoch.map(|epoch| Joined::now(epoch, interval));
        // A live source whose first frame is due past its `start-timeout` would hold its slot
        // (a stream of a station) until then, however far: it fails now, as one that gave no
        // first frame by then would.
        if let Some(j) = &joined {
            let start = config.watch.limits(true).start;
            if j.wait() > start {
                return Err(SourceError::Stalled {
                    source_name: config.describe(),
                    message: format!(
                        "epoch={}: the first frame is due in {} s, after start-timeout={} s",
                        config.epoch.unwrap_or_default(),
                        octopipe_core::stage::source::secs(j.wait()),
                        octopipe_core::stage::source::secs(start)
                    ),
                }
                .into());
            }
        }
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
            SourceKind::Images { location } => images::inputs(location),
            SourceKind::Media { location } => media::local_path(location)
                .map(|path| RunPath::file("media location", path))
                .into_iter()
                .collect(),
            // A launch fragment's own file elements are not looked into.
            SourceKind::Launch { .. } | SourceKind::Test { .. } => Vec::new(),
        }
    }
}

/// The pool a source's host frames are copied into: page-locked when a stage downstream asked
/// for page-locked frames in the caps ([`PageLocked`]: a CUDA preprocess stage that may pull
/// crop rectangles straight out of them, `preprocess gather=auto|device`), and the source may
/// give host frames (not `decoder=nvdec`); pageable otherwise, or where page-locked memory
/// cannot be had (one debug line says why; with `gather=device` the preprocess stage then names
/// the frame).
fn host_pool(config: &SourceConfig, caps: &Caps) -> BufferPool {
    let device = caps.get::<PageLocked>().map(|p| p.device);
    match device {
        Some(device) if config.decoder != Decoder::Nvdec => BufferPool::page_locked(device)
            .unwrap_or_else(|why| {
                tracing::debug!("{}: pageable frames: {why}", config.describe());
                BufferPool::new()
            }),
        _ => BufferPool::new(),
    }
}
