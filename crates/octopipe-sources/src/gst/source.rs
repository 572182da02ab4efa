//! [`GstSource`] itself: opening, the pull loop and the end of the stream; the other files of
//! `gst` add what it does with the bus, damaged data and frames.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use super::build::{Input, Parts};
use super::guard::Guard;
use super::teardown;
use crate::config::{SourceConfig, SourceKind};
use crate::images::Feeder;
use crate::media::{expected_frames, truncation};
use crate::nvdec::SharedCuda;
use crate::nvjpeg::JpegRoute;
use crate::timeline::{Origin, Timeline};
use crate::watch::{secs, Limits, Wait};
use crate::{FrameSource, SourceError};
use octopipe_core::budget::Tally;
use octopipe_core::frame::{BufferPool, Frame};
use octopipe_core::redact;

/// How long [`GstSource::next_frame`](FrameSource::next_frame) waits for a sample between two looks
/// at the bus.
pub(super) const POLL: gst::ClockTime = gst::ClockTime::from_mseconds(50);

/// A [`FrameSource`] backed by a GStreamer pipeline.
///
/// Errors name the input: the file or URI, or for image sequences the image the decoder failed on
/// (a picture the decoder drops without a word is an error too, so frames never shift to the wrong
/// file name).
///
/// ```no_run
/// use octopipe_core::frame::BufferPool;
/// use octopipe_sources::{FrameSource, GstSource, SourceConfig, SourceKind};
///
/// let config = SourceConfig::new(SourceKind::Images {
///     location: "clip/images/*.jpg".into(),
/// });
/// let mut source = GstSource::open(&config, BufferPool::new())?;
/// while let Some(frame) = source.next_frame()? {
///     tracing::info!("{} {}x{} {}", frame.source, frame.layout.width, frame.layout.height, frame.layout.format);
/// }
/// # Ok::<(), octopipe_sources::SourceError>(())
/// ```
pub struct GstSource {
    pub(super) pipeline: gst::Pipeline,
    pub(super) appsink: gst_app::AppSink,
    pub(super) bus: gst::Bus,
    pub(super) pool: BufferPool,
    pub(super) input: Input,
    pub(super) stream: u32,
    /// Frames made so far.
    pub(super) seq: u64,
    /// Numbers frames by presentation time (`Frame::seq`), so lost frames leave gaps.
    pub(super) timeline: Timeline,
    /// Whether the warning that frames are numbered as they come (no frame rate known) was given.
    pub(super) told_no_rate: bool,
    /// End of stream, stop or error seen: only `Ok(None)` from now on.
    pub(super) done: bool,
    /// Last warning on the bus, kept as detail for an image that produced no frame.
    pub(super) warning: Option<String>,
    /// `missing-plugin` message seen on the bus: (description, caps).
    pub(super) missing: Option<(String, String)>,
    pub(super) feeder: Option<Feeder>,
    /// Decoded samples still queued in the `appsink` when an error ended the stream: handed out
    /// before the error, so the frames before the damage are kept.
    pub(super) held: VecDeque<gst::Sample>,
    /// The error that ended the stream, returned once `held` is empty.
    pub(super) pending: Option<SourceError>,
    /// End (pts + duration) of the last frame, to tell a truncated file from a complete one.
    pub(super) last_end: Option<gst::ClockTime>,
    /// Set by the interrupter: the end of stream that follows is ours, not the file's end.
    pub(super) interrupted: Arc<AtomicBool>,
    /// The settings, to build the pipeline again on a reconnect.
    pub(super) config: SourceConfig,
    /// Timeouts and reconnects in force.
    pub(super) limits: Limits,
    /// Reconnects since the last frame.
    pub(super) in_a_row: u32,
    /// Where reconnects and silences are counted (the run's report).
    pub(super) tally: Option<Tally>,
    /// When the pipeline was last set playing: the decoder is starting until `start-timeout`
    /// after it.
    pub(super) started: Instant,
    /// The CUDA context shared with NVDEC decoders (`decoder=nvdec`).
    pub(super) cuda: Option<Arc<SharedCuda>>,
    /// An image sequence's JPEG files decoded by nvJPEG (`images decoder=nvjpeg`).
    pub(super) nvjpeg: Option<JpegRoute>,
    /// Why the pipeline refused its input while it played (a picture too large to decode).
    pub(super) guard: Guard,
    /// The size of the last frame's picture (a change is a splice: `follow_picture`).
    pub(super) picture: Option<(u32, u32)>,
    /// When the source was opened: a stream source gives its first frame within
    /// `start-timeout` of it, reconnects included.
    pub(super) opened: Instant,
    /// Damaged data dropped so far (errors and warnings of depayloaders, parsers and
    /// decoders of a stream that went on), the first one's words, and when the last came.
    pub(super) garbage: Garbage,
    /// Damaged frames found so far (`on-damaged`), kept or skipped.
    pub(super) damaged: u64,
    /// Of those, the ones left out ([`FrameSource::skipped`]).
    pub(super) skipped: u64,
    /// A media file's decoder warned about its data: the next frame out is damaged.
    pub(super) decoder_warning: Option<String>,
    /// The pipeline did not stop within [`TEARDOWN_DEADLINE`](teardown::TEARDOWN_DEADLINE): it
    /// is left to stop on a thread of its own, and not asked again.
    pub(super) abandoned: bool,
}

impl GstSource {
    /// Build and start the pipeline for `config`; frames' planes are taken from `pool`.
    ///
    /// Paths are checked before any GStreamer work: a missing file or folder, an empty folder or a
    /// folder mixing JPEG and PNG files is a [`SourceError::Input`].
    pub fn open(config: &SourceConfig, pool: BufferPool) -> Result<Self, SourceError> {
        let parts = Parts::build(config)?;
        let mut limits = config.watch.limits(parts.receives(config));
        // NVDEC sessions starting together (one context, many streams) are slow to start.
        limits.slow_start = parts.cuda.is_some();
        let live_head = matches!(config.kind, SourceKind::Launch { .. });
        let mut source = GstSource {
            pipeline: parts.pipeline,
            appsink: parts.appsink,
            bus: parts.bus,
            pool,
            input: parts.input,
            stream: config.stream,
            seq: 0,
            // A GStreamer head's timestamps start wherever its clock stood; a file's at zero.
            timeline: Timeline::new(if live_head {
                Origin::FirstFrame
            } else {
                Origin::Zero
            }),
            told_no_rate: false,
            done: false,
            warning: None,
            missing: None,
            feeder: parts.feeder,
            held: VecDeque::new(),
            pending: None,
            last_end: None,
            interrupted: Arc::new(AtomicBool::new(false)),
            config: config.clone(),
            limits,
            in_a_row: 0,
            tally: None,
            started: Instant::now(),
            nvjpeg: parts.nvjpeg,
            cuda: parts.cuda,
            guard: parts.guard,
            picture: None,
            opened: Instant::now(),
            garbage: Garbage::default(),
            damaged: 0,
            skipped: 0,
            decoder_warning: None,
            abandoned: false,
        };
        if let Err(e) = source.start() {
            // A network source that cannot connect yet retries from its first wait for a frame.
            if !source.may_retry(Some(&e)) {
                return Err(e);
            }
            source.finish();
            source.pending = Some(e);
        }
        Ok(source)
    }

    /// Count reconnects and silences in `tally` (the run's report), as events of this source's
    /// stream.
    pub(crate) fn report_to(&mut self, tally: Tally) {
        self.tally = Some(tally);
    }

    /// Set the pipeline playing; when it will not start, the reason is on the bus.
    fn start(&mut self) -> Result<(), SourceError> {
        self.started = Instant::now();
        if self.pipeline.set_state(gst::State::Playing).is_err() {
            self.poll_bus()?;
            return Err(self.stream_error("could not start the pipeline".into(), None));
        }
        Ok(())
    }

    /// Tear the pipeline down and build it again (a reconnect); frame numbers go on.
    pub(super) fn rebuild(&mut self) -> Result<(), SourceError> {
        self.finish();
        if let Some(mut feeder) = self.feeder.take() {
            feeder.stop_and_join();
        }
        let parts = Parts::build(&self.config)?;
        self.pipeline = parts.pipeline;
        self.appsink = parts.appsink;
        self.bus = parts.bus;
        self.input = parts.input;
        self.feeder = parts.feeder;
        self.cuda = parts.cuda;
        self.nvjpeg = parts.nvjpeg;
        self.guard = parts.guard;
        self.abandoned = false;
        // A live head's new pipeline stamps on a clock of its own: its frames number on.
        self.timeline.restart();
        self.done = false;
        self.warning = None;
        self.decoder_warning = None;
        self.missing = None;
        self.last_end = None;
        self.start()
    }

    /// How errors name this input.
    pub(super) fn name(&self) -> &str {
        match &self.input {
            Input::Media { name, .. } => name,
            Input::Images(images) => &images.location,
            Input::Test { name, .. } | Input::Launch { name, .. } => name,
        }
    }

    pub(super) fn stream_error(&self, message: String, debug: Option<String>) -> SourceError {
        SourceError::Stream {
            source_name: self.name().to_string(),
            message: redact::credentials(&message).into_owned(),
            debug: debug.map(|d| redact::credentials(&d).into_owned()),
        }
    }

    /// Stop the pipeline and the feeder; the stream is over. A network or live source's
    /// pipeline that does not stop within [`TEARDOWN_DEADLINE`](teardown::TEARDOWN_DEADLINE)
    /// (`rtspsrc` holds its state lock while it reads a server's answer) has its RTSP
    /// connections closed ([`Guard::close_peers`]) and the deadline again; one still not
    /// stopped is left to stop on a thread of its own, counted until it has
    /// ([`teardown::pipelines_stopping`]), so the stream still ends.
    pub(super) fn finish(&mut self) {
        self.end();
        if self.abandoned {
            return;
        }
        match self.limits.stream {
            true => {
                let guard = self.guard.clone();
                let force = move || guard.close_peers();
                let (pipeline, stream) = (&self.pipeline, self.stream);
                self.abandoned = !teardown::stop_within(pipeline, self.name(), stream, &force);
            }
            false => {
                let _ = self.pipeline.set_state(gst::State::Null);
            }
        }
    }

    /// The stream is over (the feeder stops); the pipeline is left as it is until `finish`.
    fn end(&mut self) {
        self.done = true;
        self.tell_garbage();
        if let Some(feeder) = &self.feeder {
            feeder.request_stop();
        }
    }

    /// At end of stream: an image that produced no frame, or a file the feeder could not use;
    /// the damaged files not yet told are counted and logged.
    fn check_end(&mut self) -> Result<(), SourceError> {
        if let Some(error) = self.feeder.as_ref().and_then(Feeder::take_error) {
            self.tell_image_damage(true);
            return Err(error);
        }
        let end = match &mut self.input {
            Input::Images(images) => images.check_end(self.warning.as_deref()),
            _ => Ok(()),
        };
        self.tell_image_damage(true);
        end
    }

    /// At end of stream of a media file whose container declares its length: a stream that stops
    /// well short of it is a truncated file. Call before the pipeline is stopped.
    fn check_length(&self) -> Result<(), SourceError> {
        if !matches!(self.input, Input::Media { .. }) || self.interrupted.load(Ordering::SeqCst) {
            return Ok(());
        }
        match truncation(&self.pipeline, self.last_end, self.seq) {
            Some(message) => Err(self.stream_error(message, None)),
            None => Ok(()),
        }
    }
}

impl GstSource {
    /// The frame in `sample`, at the end of `wait`: the reconnect count starts again, and a
    /// source that was quiet says it is back.
    fn deliver(&mut self, sample: gst::Sample, wait: &Wait) -> Result<Frame, SourceError> {
        let frame = self.frame(sample, wait.asked())?;
        self.in_a_row = 0;
        if wait.warned {
            let what = if self.seq == 1 {
                "first frame after"
            } else {
                "frames again after"
            };
            tracing::warn!("{}: {what} {} s", self.name(), secs(wait.waited()));
        }
        Ok(frame)
    }
}

impl FrameSource for GstSource {
    fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        let mut wait = Wait::new(&self.limits);
        loop {
            // Frames decoded before an error come out first, then the error (or a reconnect).
            if let Some(sample) = self.held.pop_front() {
                let skip = self.judge_damage(&sample).inspect_err(|_| {
                    self.held.clear();
                    self.pending = None;
                })?;
                if skip {
                    continue;
                }
                return self.deliver(sample, &wait).map(Some).inspect_err(|_| {
                    self.held.clear();
                    self.pending = None;
                });
            }
            self.first_frame_overdue()?;
            if let Some(e) = self.pending.take() {
                if self.is_resync(&e) {
                    self.resync(&e);
                    continue;
                }
                if self.may_retry(Some(&e)) {
                    let cause = match &e {
                        SourceError::Stream { message, .. } => message.clone(),
                        other => other.to_string(),
                    };
                    self.reconnect(&cause);
                    continue;
                }
                return Err(self.after_retries(e));
            }
            if self.done {
                return Ok(None);
            }
            if self.interrupted.load(Ordering::SeqCst) {
                // Asked to stop: end the stream here (at most one POLL after the request).
                self.finish();
                return Ok(None);
            }
            if let Err(e) = self.poll_bus() {
                self.pending = Some(e);
                continue;
            }
            self.look_after_damage();
            if let Some(sample) = self.appsink.try_pull_sample(POLL) {
                if self.judge_damage(&sample)? {
                    continue;
                }
                return self
                    .deliver(sample, &wait)
                    .map(Some)
                    .inspect_err(|_| self.finish());
            }
            self.watch(&mut wait)?;
            if self.appsink.is_eos() {
                if self.may_retry(None) {
                    self.finish();
                    self.reconnect("the stream ended");
                    continue;
                }
                let length = self.check_length();
                // The pipeline stays up until `stop`: the runner tears down ended sources when
                // the run is over, since tearing down a GPU decoder stalls the GPU for the
                // streams still running (100-450 ms on an H100 when NVDEC streams ended).
                self.end();
                self.check_end()?;
                length?;
            }
        }
    }

    fn stop(&mut self) {
        self.tell_garbage();
        self.tell_image_damage(true);
        self.finish();
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }

    fn expected_frames(&self) -> Option<u64> {
        match &self.input {
            Input::Images(images) => Some(images.total() as u64),
            Input::Test { frames, .. } => Some(*frames),
            Input::Media { .. } => expected_frames(&self.pipeline, &self.appsink),
            Input::Launch { .. } => None,
        }
    }

    fn interrupter(&self) -> Box<dyn Fn() + Send + Sync> {
        // A flag `next_frame` reads between waits of at most POLL, rather than an EOS event sent
        // into the pipeline from the interrupting thread, which can deadlock against the source
        // thread's `set_state(Null)` (docs/source-notes.md).
        let interrupted = self.interrupted.clone();
        Box::new(move || interrupted.store(true, Ordering::SeqCst))
    }
}

impl Drop for GstSource {
    fn drop(&mut self) {
        self.tell_garbage();
        self.finish();
        if let Some(feeder) = &mut self.feeder {
            feeder.stop_and_join();
        }
    }
}

/// Damaged data a stream source dropped and went on from.
#[derive(Debug, Default)]
pub(super) struct Garbage {
    pub(super) count: u64,
    pub(super) first: Option<String>,
    pub(super) last: Option<Instant>,
    /// Frames delivered when the last damage came.
    pub(super) frames_then: u64,
    /// Packets of others kept out of an RTP stream, as last looked at.
    pub(super) foreign: u64,
    /// Pipelines built again after damage stopped the data flow (no reconnect spent).
    pub(super) resyncs: u64,
    /// Whether the report's line was written.
    pub(super) told: bool,
}
