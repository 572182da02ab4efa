//! A [`Frame`] made of a buffer passing through an element: the decoded format and colorimetry
//! read from the caps as the sources read them, the frame's place in its stream by
//! presentation time (its running time at the caps' frame rate, as `octopipe run` numbers a
//! file's frames), and, for the elements that look at pixels, the planes copied once into a
//! pooled buffer.

use std::sync::Arc;
use std::time::Duration;

use gstreamer as gst;
use gstreamer_video as gst_video;
use octopipe_core::frame::{BufferPool, Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};
use octopipe_sources::plugin::{
    colorimetry, copy_frame, interval_of, pixel_format, video_default, Origin, Timeline,
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
}

impl Framer {
    /// A framer for buffers of `caps`, whose pixels are read when `pixels` (else only the
    /// size and rate, whatever the format and memory); the error says what in the caps cannot
    /// be read.
    pub(crate) fn new(caps: &gst::CapsRef, pixels: bool) -> Result<Self, String> {
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|e| format!("caps {caps} are not raw video: {e}"))?;
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
        })
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
    /// copied only when `pixels` (the elements that crop or detect), else the frame holds none.
    pub(crate) fn frame(
        &mut self,
        buffer: &gst::BufferRef,
        segment: &gst::FormattedSegment<gst::ClockTime>,
        stream: u32,
        source: &Arc<str>,
        pixels: bool,
    ) -> Result<Frame, String> {
        let layout = FrameLayout::packed(self.format, self.info.width(), self.info.height());
        let planes = if pixels {
            let mut planes = self.pool.take(layout.size());
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
        let mut frame = Frame::new(stream, seq, source, layout, self.colorimetry, planes);
        frame.source = source.clone();
        frame.pts = buffer.pts().map(|t| Duration::from_nanos(t.nseconds()));
        if !pixels {
            frame.release_pixels();
        }
        Ok(frame)
    }
}
