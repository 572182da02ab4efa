//! A decoded sample made into a frame: its caps read, its timing and numbering, its planes copied.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_video as gst_video;

use super::super::caps::{colorimetry, copy_out, pixel_format, video_default};
use super::super::nvdec;
use super::super::pixels::Pixels;
use super::super::test::test_uri;
use super::super::timeline::interval_of;
use super::super::SourceError;
use super::build::Input;
use super::source::GstSource;
use octopipe_core::frame::{Colorimetry, Frame, FrameLayout, FrameTimes, ImageFile, PixelFormat};

/// How a frame names its source, and its URI where it is not the name's own.
pub(super) struct Named {
    name: Arc<str>,
    uri: Option<Arc<str>>,
}

impl GstSource {
    /// The instant at which a buffer of a live pipeline was captured or received: its running time
    /// on the pipeline clock, seen from now. `None` when the pipeline has no clock yet.
    pub(super) fn arrival(
        &self,
        sample: &gst::Sample,
        pts: Option<gst::ClockTime>,
    ) -> Option<Instant> {
        let clock = self.pipeline.clock()?;
        let segment = sample.segment()?.downcast_ref::<gst::ClockTime>()?;
        let running = segment.to_running_time(pts?)?;
        let at = self.pipeline.base_time()? + running;
        let age = clock.time().checked_sub(at).unwrap_or(gst::ClockTime::ZERO);
        // A stamp from the future or from long ago is not an arrival time.
        (age < gst::ClockTime::from_seconds(10))
            .then(|| Instant::now() - Duration::from_nanos(age.nseconds()))
    }

    /// The video info and octopipe format of a sample's caps.
    pub(super) fn video_info(
        &self,
        caps: &gst::CapsRef,
    ) -> Result<(gst_video::VideoInfo, PixelFormat), SourceError> {
        let info = gst_video::VideoInfo::from_caps(caps).map_err(|_| SourceError::Format {
            source_name: self.name().to_string(),
            format: caps.to_string(),
        })?;
        let format = pixel_format(info.format()).ok_or_else(|| SourceError::Format {
            source_name: self.name().to_string(),
            format: info.format().to_str().to_string(),
        })?;
        // The decoders' caps were checked as they came (`guard`); this is the check for a
        // picture that reached the appsink by another way (a launch head's own elements).
        let (w, h) = (u64::from(info.width()), u64::from(info.height()));
        if let Some(why) = octopipe_core::stage::limits::frame_too_large(w, h) {
            return Err(SourceError::input(
                self.name(),
                format!("its pictures are too large: {why}"),
            ));
        }
        Ok((info, format))
    }

    /// How frames name where they came from (the URI, the image file, the fragment or test
    /// pattern), their URI where it is not [`source_uri`](octopipe_core::frame::source_uri) of that name
    /// (an image's `file://`, the test source's `octopipe:videotestsrc?...`), what an image's
    /// file name says, and the colorimetry for what a frame's caps leave unknown.
    pub(super) fn origin(
        &mut self,
        pts: Option<gst::ClockTime>,
        height: u32,
    ) -> Result<(Named, Option<ImageFile>, Colorimetry), SourceError> {
        let named = |name: &Arc<str>, uri| Named {
            name: name.clone(),
            uri,
        };
        match &mut self.input {
            Input::Media { uri, .. } => Ok((named(uri, None), None, video_default(height))),
            Input::Test { name, .. } => {
                let uri = name.strip_prefix("videotestsrc ").map(test_uri);
                Ok((named(name, uri), None, video_default(height)))
            }
            Input::Launch { name, .. } => Ok((named(name, None), None, video_default(height))),
            Input::Images(images) => images.origin(pts).map(|(name, uri, file, colorimetry)| {
                (named(&name, Some(uri)), Some(file), colorimetry)
            }),
        }
    }

    /// The frame interval to number frames by: the decoded caps' frame rate, else the rate the
    /// settings give (an image sequence's `framerate`, which its pts follow; a head's
    /// `framerate`); `None` (frames numbered as they come, with a warning once) when none says.
    pub(super) fn interval(&mut self, info: &gst_video::VideoInfo) -> Option<Duration> {
        let fps = info.fps();
        let stated = match self.input {
            Input::Images(_) => Some(self.config.framerate),
            _ => self.config.head_framerate,
        };
        let interval = interval_of(fps.numer(), fps.denom())
            .or_else(|| stated.map(|f| Duration::from_secs_f64(1.0 / f)));
        if interval.is_none() && !self.told_no_rate {
            self.told_no_rate = true;
            let fix = match self.input {
                Input::Launch { .. } => "; set the stream's rate with head framerate=F",
                _ => " (a variable-rate file)",
            };
            tracing::warn!(
                "{}: the decoded stream gives no frame rate: frames are numbered as they come, so a lost frame moves the boxes keyed by frame number (MOT rows) after it{fix}",
                self.name()
            );
        }
        interval
    }

    /// A video whose picture size changes mid-stream (an encoder restarted, files joined) is
    /// spliced there: its timestamps across the change do not line up (an MPEG-TS demuxer
    /// re-bases them and leaves a gap a frame wide), so frames are numbered on from the last
    /// one. Every frame carries its own size, so the stages after follow the change. Image
    /// sequences are left alone (each picture has its size and its place by file name).
    pub(super) fn follow_picture(&mut self, info: &gst_video::VideoInfo) {
        let size = (info.width(), info.height());
        if matches!(self.input, Input::Images(_)) {
            return;
        }
        if let Some((w, h)) = self.picture.filter(|before| *before != size) {
            tracing::info!(
                "{}: the picture changed from {w}x{h} to {}x{} after {} frames: a splice, frames are numbered on from there",
                self.name(),
                size.0,
                size.1,
                self.seq
            );
            self.timeline.splice();
        }
        self.picture = Some(size);
    }

    /// The frame in `sample`; `asked` is when the caller asked for it (its arrival). The only place
    /// a [`Frame`] is made.
    pub(super) fn frame(
        &mut self,
        sample: gst::Sample,
        asked: Instant,
    ) -> Result<Frame, SourceError> {
        let (caps, buffer) = match (sample.caps(), sample.buffer()) {
            (Some(caps), Some(buffer)) => (caps, buffer),
            _ => return Err(self.stream_error("sample without caps or buffer".into(), None)),
        };
        // nvJPEG's route: the sample is the JPEG file itself, decoded here.
        let jpeg = match (&mut self.nvjpeg, sample.buffer_owned()) {
            (Some(route), Some(file)) if route.takes(caps) => {
                let tally = self.tally.clone();
                let stream = self.stream;
                let input = match &self.input {
                    Input::Images(images) => images.name_at(buffer.offset()),
                    _ => self.config.describe(),
                };
                Some(route.decode(file, buffer.offset(), &input, |event| {
                    if let Some(t) = &tally {
                        t.with(|b| b.source_event(stream, event));
                    }
                })?)
            }
            _ => None,
        };
        let (info, format) = match &jpeg {
            Some((info, _)) => (info.clone(), PixelFormat::I420),
            None => self.video_info(caps)?,
        };
        self.follow_picture(&info);
        let pts = buffer.pts().map(|t| Duration::from_nanos(t.nseconds()));
        if let Some(p) = buffer.pts() {
            self.last_end = Some(p + buffer.duration().unwrap_or(gst::ClockTime::ZERO));
        }
        let (Named { name: source, uri }, image, fallback) =
            self.origin(buffer.pts(), info.height())?;
        self.tell_image_damage(false);
        let colorimetry = match &jpeg {
            Some(_) => Colorimetry::JPEG,
            None => colorimetry(&info, caps, fallback),
        };

        let stream_error = |message| SourceError::Stream {
            source_name: source.to_string(),
            message,
            debug: None,
        };
        let planes = if let Some((_, pixels)) = jpeg {
            pixels
        } else if nvdec::is_cuda_caps(caps) {
            // NVDEC's frame in CUDA memory: no copy, the frame holds the decoder's buffer.
            let shared = self.cuda.as_ref().ok_or_else(|| SourceError::Format {
                source_name: source.to_string(),
                format: caps.to_string(),
            })?;
            let (planes, layout) = shared.device_frame(buffer, &info).map_err(stream_error)?;
            Pixels::Device(planes, layout)
        } else {
            let layout = FrameLayout::packed(format, info.width(), info.height());
            let pixels = copy_out(&self.pool, buffer, &info, &layout, &source, self.seq)?;
            Pixels::Host(pixels, layout)
        };

        // The decode stage: waiting for the decoder, plus the copy. A live GStreamer head stamps
        // buffers with the running time they were captured or received at: the frame arrived then.
        let arrival = match &self.input {
            Input::Launch { .. } => self.arrival(&sample, buffer.pts()).unwrap_or(asked),
            _ => asked,
        };
        // The frame's place in its stream by presentation time (its running time, which starts
        // at zero for a file whatever its timestamps' offset; over RTP the sender's own time,
        // whatever the packets' arrival), against the caps' frame rate.
        let running = sample
            .segment()
            .and_then(|s| s.downcast_ref::<gst::ClockTime>())
            .zip(buffer.pts())
            .and_then(|(segment, pts)| segment.to_running_time(pts))
            .or(buffer.pts())
            .map(|t| Duration::from_nanos(t.nseconds()));
        let time = match &self.input {
            Input::Launch { rtp: Some(rtp), .. } => {
                let sent = buffer.pts().and_then(|pts| rtp.sender_time(pts));
                if sent.is_some_and(|s| s.new_sender) {
                    // A sender that restarted starts a clock of its own: number on from here.
                    self.timeline.restart();
                }
                sent.map(|s| s.time)
            }
            _ => running,
        };
        let interval = self.interval(&info);
        let seq = self.timeline.place(time, interval);
        self.seq += 1;
        let mut frame = match planes {
            Pixels::Host(pixels, layout) => {
                Frame::new(self.stream, seq, &source, layout, colorimetry, pixels)
            }
            Pixels::Device(planes, layout) => {
                Frame::on_device(self.stream, seq, &source, layout, colorimetry, planes)
            }
        };
        frame.pts = pts;
        frame.image = image;
        if let Some(uri) = uri {
            frame.uri = uri;
        }
        if matches!(self.input, Input::Launch { .. }) {
            frame.wall = octopipe_core::frame::wall_time(arrival); // the live head's capture time
        }
        frame.times = FrameTimes::new(arrival);
        Ok(frame)
    }
}
