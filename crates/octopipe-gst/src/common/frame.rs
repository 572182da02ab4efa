//! A [`Frame`] made of a buffer passing through an element: the decoded format and colorimetry
//! read from the caps as the sources read them, the frame's place in its stream by
//! presentation time (its running time at the caps' frame rate, as `octopipe run` numbers a
//! file's frames), and, for the elements that look at pixels, the planes copied once into a
//! pooled buffer, or, for frames in CUDA memory, the decoder's own buffer mapped in place.

use std::sync::Arc;
use std::time::Duration;

use gstreamer as gst;
use gstreamer_video as gst_video;
use octopipe_core::frame::{BufferPool, Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};
use octopipe_sources::plugin::{
    colorimetry, copy_frame, interval_of, is_cuda_caps, pixel_format, video_default, Origin,
    SharedCuda, Timeline,
};

/// Makes the frames of one stream of buffers with the same caps (made again when they change).
pub(crate) struct Framer {
    info: gst_video::VideoInfo,
    format: PixelFormat,
    colorimetry: Colorimetry,
    interval: Option<Duration>,
    timeline: Timeline,
    /// A flushing seek happened: frames are placed by stream time.
    seeked: bool,
    pool: BufferPool,
    /// The frames are in CUDA memory of this context's GPU, read in place.
    cuda: Option<Arc<SharedCuda>>,
}

/// Whether the pixels of buffers of `caps` are in CUDA memory.
pub(crate) fn in_cuda_memory(caps: &gst::CapsRef) -> bool {
    is_cuda_caps(caps)
}

impl Framer {
    /// A framer for buffers of `caps`, whose pixels are read when `pixels` (else only the
    /// size and rate, whatever the format and memory): from the host, or, when the caps say CUDA
    /// memory, on the GPU of `cuda` (given then). The error says what in the caps cannot be read.
    pub(crate) fn new(
        caps: &gst::CapsRef,
        pixels: bool,
        cuda: Option<Arc<SharedCuda>>,
    ) -> Result<Self, String> {
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|e| format!("caps {caps} are not raw video: {e}"))?;
        let cuda = match (pixels && is_cuda_caps(caps), cuda) {
            (false, _) => None,
            (true, Some(cuda)) if info.format() == gst_video::VideoFormat::Nv12 => Some(cuda),
            (true, Some(_)) => {
                return Err(format!(
                    "format {} in CUDA memory is not one octopipe reads (NV12)",
                    info.format()
                ))
            }
            (true, None) => return Err("frames in CUDA memory need a CUDA context".into()),
        };
        let format = match pixel_format(info.format()) {
            Some(format) => format,
            // Only the frame's size is read: any layout stands for it.
            None if !pixels => PixelFormat::I420,
            None => {
                return Err(format!(
                    "format {} is not one octopipe reads (I420, NV12, RGB, BGR, RGBA, BGRA, RGBx, BGRx)",
                    info.format()
                ))
            }
        };
        let colorimetry = colorimetry(&info, caps, video_default(info.height()));
        let rate = info.fps();
        Ok(Framer {
            interval: interval_of(rate.numer(), rate.denom()),
            info,
            format,
            colorimetry,
            timeline: Timeline::new(Origin::Zero),
            seeked: false,
            pool: BufferPool::new(),
            cuda,
        })
    }

    /// The caps' video info (format, size, planes).
    pub(crate) fn info(&self) -> &gst_video::VideoInfo {
        &self.info
    }

    /// The time between frames the caps give, if they give a rate.
    pub(crate) fn interval(&self) -> Option<Duration> {
        self.interval
    }

    /// Go on numbering frames where `before` (the framer of the caps before a renegotiation)
    /// left off: a new picture size or format is the same stream.
    pub(crate) fn continue_from(&mut self, before: Framer) {
        self.timeline = before.timeline;
        self.seeked = before.seeked;
        self.pool = before.pool;
    }

    /// Number frames again after a flushing seek: the running time starts over, so from here
    /// on a frame's place is its stream time (its position in the file), which the seek's
    /// segment gives.
    pub(crate) fn restart(&mut self) {
        self.timeline = Timeline::new(Origin::Zero);
        self.seeked = true;
    }

    /// The frame of `buffer` in `segment`, of stream `stream`, named `source`; its planes are
    /// read only when `pixels` (the elements that crop or detect: copied from system memory,
    /// mapped in place in CUDA memory, the mapping holding the buffer until the frame releases
    /// its pixels), else the frame holds none.
    pub(crate) fn frame(
        &mut self,
        buffer: &gst::BufferRef,
        segment: &gst::FormattedSegment<gst::ClockTime>,
        stream: u32,
        source: &Arc<str>,
        pixels: bool,
    ) -> Result<Frame, String> {
        let mut layout = FrameLayout::packed(self.format, self.info.width(), self.info.height());
        let mut device = None;
        let planes = if let Some(cuda) = self.cuda.as_ref().filter(|_| pixels) {
            let (planes, mapped) = cuda.device_frame(buffer, &self.info)?;
            layout = mapped;
            device = Some(planes);
            PooledBuf::unpooled(Vec::new())
        } else if pixels {
            // A frame the system refuses memory for is this element's error, not an abort.
            let mut planes = self.pool.try_take(layout.size()).map_err(|e| {
                format!("a {}x{} frame: {e}", self.info.width(), self.info.height())
            })?;
            copy_frame(buffer, &self.info, &layout, &mut planes)?;
            planes
        } else {
            PooledBuf::unpooled(Vec::new())
        };
        // Running time, as `octopipe run` numbers a file's frames (it starts at zero whatever
        // the file's first timestamp); stream time after a seek.
        let time = buffer
            .pts()
            .and_then(|pts| match self.seeked {
                true => segment.to_stream_time(pts),
                false => segment.to_running_time(pts),
            })
            .or(buffer.pts())
            .map(|t| Duration::from_nanos(t.nseconds()));
        let seq = self.timeline.place(time, self.interval);
        let mut frame = match device {
            Some(device) => Frame::on_device(stream, seq, source, layout, self.colorimetry, device),
            None => Frame::new(stream, seq, source, layout, self.colorimetry, planes),
        };
        frame.source = source.clone();
        frame.pts = buffer.pts().map(|t| Duration::from_nanos(t.nseconds()));
        if !pixels {
            frame.release_pixels();
        }
        Ok(frame)
    }
}

/// The URI of the source upstream of `pad` (a sink pad), as the URI query gives it (`filesrc`,
/// `rtspsrc`, `uridecodebin` answer it, and decoders, parsers, queues and tees pass it up), with
/// the credentials and secrets a URI may carry hidden; `None` when nothing upstream answers, or
/// the answer is no `scheme://` URI (GStreamer 1.22's `multifilesrc` answers `multifle:/...`).
pub(crate) fn upstream_uri(pad: &gst::Pad) -> Option<String> {
    use gstreamer::prelude::*;
    let mut q = gst::query::Uri::new();
    if !pad.peer_query(&mut q) {
        return None;
    }
    let uri = q.uri().filter(|u| u.contains("://"))?;
    Some(octopipe_core::redact::credentials(&uri).into_owned())
}
