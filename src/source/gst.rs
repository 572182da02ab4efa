//! [`GstSource`]: the three kinds of input as GStreamer pipelines ending in an `appsink`.
//!
//! ```text
//! media:  uridecodebin uri=file:///data/flight.mp4 ! videoconvert
//!           ! video/x-raw,format={I420,NV12} ! appsink
//! images: appsrc (one file per buffer) ! jpegdec idct-method=islow (or pngdec) ! videoconvert
//!           ! video/x-raw,format={I420,NV12,RGB,BGR,RGBA,BGRA,RGBx,BGRx} ! appsink
//! test:   videotestsrc pattern=smpte num-buffers=90
//!           ! video/x-raw,format=I420,width=1280,height=720,framerate=30/1 ! appsink
//! ```
//!
//! The same decodes by hand (`appsink` becomes `fakesink`, `appsrc` a `multifilesrc`):
//!
//! ```text
//! gst-launch-1.0 uridecodebin uri=file://$PWD/flight.mp4 ! videoconvert ! "video/x-raw,format={I420,NV12}" ! fakesink
//! gst-launch-1.0 multifilesrc location=img_%03d.jpg caps=image/jpeg,framerate=30/1 ! jpegdec idct-method=islow ! videoconvert ! fakesink
//! gst-launch-1.0 videotestsrc pattern=smpte num-buffers=90 ! video/x-raw,format=I420,width=1280,height=720 ! fakesink
//! ```
//!
//! `videoconvert` passes the decoder's output through untouched when it is already in one of the
//! accepted formats (JPEG 4:2:0 comes out as I420, PNG as RGB or RGBA), so no colour conversion happens
//! in GStreamer. Each sample's caps are read (image sizes may change from file to file) and its planes
//! are copied once, tightly packed, into a pooled buffer.
//!
//! Image files are read by a feeder thread that pushes one file per buffer with `pts = index /
//! framerate`; `appsrc` holds at most [`IMAGE_QUEUE`] files, so memory stays bounded whatever the size
//! of the folder. With a time segment `jpegdec` and `pngdec` decode each buffer as one picture, and
//! each decoded frame is mapped back to its file through its pts.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use super::{FrameSource, SourceConfig, SourceError, SourceKind};
use crate::frame::{
    BufferPool, ChromaSite, Colorimetry, Frame, FrameLayout, FrameTimes, Matrix, PixelFormat,
    Range,
};

/// Decoded frames the `appsink` may hold before the decoder waits.
const SINK_QUEUE: u32 = 3;
/// Image files the `appsrc` may hold before the feeder thread waits.
const IMAGE_QUEUE: u64 = 2;
/// How long [`GstSource::next_frame`](FrameSource::next_frame) waits for a sample between two looks
/// at the bus.
const POLL: gst::ClockTime = gst::ClockTime::from_mseconds(50);
/// A file input that gives neither a frame nor end of stream nor an error for this long has
/// stalled (seen with truncated MP4s, where a demuxer waits for data that never comes).
const STALL: Duration = Duration::from_secs(10);

const PLUGINS_BASE: &str = "gstreamer1.0-plugins-base";
const PLUGINS_GOOD: &str = "gstreamer1.0-plugins-good";
/// Where a decoder that `decodebin` could not find usually lives.
const DECODER_PACKAGES: &str =
    "a decoder for it (gstreamer1.0-libav, gstreamer1.0-plugins-bad or gstreamer1.0-plugins-ugly)";

/// A [`FrameSource`] backed by a GStreamer pipeline.
///
/// Errors name the input: the file or URI, or for image sequences the image the decoder failed on
/// (a picture the decoder drops without a word is an error too, so frames never shift to the wrong
/// file name).
///
/// ```no_run
/// use octopipe::frame::BufferPool;
/// use octopipe::source::{FrameSource, GstSource, SourceConfig, SourceKind};
///
/// let config = SourceConfig::new(SourceKind::Images {
///     location: "clip/images/*.jpg".into(),
/// });
/// let mut source = GstSource::open(&config, BufferPool::new())?;
/// while let Some(frame) = source.next_frame()? {
///     println!("{} {}x{} {}", frame.source, frame.layout.width, frame.layout.height, frame.layout.format);
/// }
/// # Ok::<(), octopipe::source::SourceError>(())
/// ```
pub struct GstSource {
    pipeline: gst::Pipeline,
    appsink: gst_app::AppSink,
    bus: gst::Bus,
    pool: BufferPool,
    input: Input,
    stream: u32,
    seq: u64,
    /// End of stream, stop or error seen: only `Ok(None)` from now on.
    done: bool,
    /// Last warning on the bus, kept as detail for an image that produced no frame.
    warning: Option<String>,
    /// `missing-plugin` message seen on the bus: (description, caps).
    missing: Option<(String, String)>,
    feeder: Option<Feeder>,
    /// Decoded samples still queued in the `appsink` when an error ended the stream: handed out
    /// before the error, so the frames before the damage are kept.
    held: VecDeque<gst::Sample>,
    /// The error that ended the stream, returned once `held` is empty.
    pending: Option<SourceError>,
    /// End (pts + duration) of the last frame, to tell a truncated file from a complete one.
    last_end: Option<gst::ClockTime>,
    /// Set by the interrupter: the end of stream that follows is ours, not the file's end.
    interrupted: Arc<AtomicBool>,
}

/// What the pipeline reads, and how to name it.
enum Input {
    /// A media file or URI: `name` as the user wrote it (for errors), `uri` for frames.
    Media { name: String, uri: Arc<str> },
    /// An image sequence.
    Images(Images),
    /// `videotestsrc`, described as `videotestsrc pattern=..`.
    Test { name: Arc<str> },
    /// A GStreamer launch fragment, named by its text.
    Launch { name: Arc<str> },
}

struct Images {
    location: String,
    files: Arc<[PathBuf]>,
    /// File names, shared by every frame of the file.
    names: Vec<Arc<str>>,
    kind: ImageKind,
    framerate: f64,
    /// Index of the next image expected from the decoder.
    next: usize,
    /// Index (buffer offset) of the image the decoder is working on, `u64::MAX` before the first:
    /// an error on the bus is about this file.
    decoding: Arc<AtomicU64>,
    /// Times the sequence is played; image `index` of the stream is file `index % files.len()`.
    loops: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageKind {
    Jpeg,
    Png,
}

impl ImageKind {
    fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "jpg" | "jpeg" => Some(ImageKind::Jpeg),
            "png" => Some(ImageKind::Png),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ImageKind::Jpeg => "JPEG",
            ImageKind::Png => "PNG",
        }
    }

    fn decoder(self) -> &'static str {
        match self {
            ImageKind::Jpeg => "jpegdec",
            ImageKind::Png => "pngdec",
        }
    }

    fn caps(self) -> gst::Caps {
        match self {
            ImageKind::Jpeg => gst::Caps::new_empty_simple("image/jpeg"),
            ImageKind::Png => gst::Caps::new_empty_simple("image/png"),
        }
    }

    /// Whether `bytes` start like a file of this kind.
    fn has_magic(self, bytes: &[u8]) -> bool {
        match self {
            ImageKind::Jpeg => bytes.starts_with(&[0xFF, 0xD8]),
            ImageKind::Png => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        }
    }
}

/// The thread that pushes image files into `appsrc`.
struct Feeder {
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// A file the feeder could not use; reported once the frames before it are out.
    error: Arc<Mutex<Option<SourceError>>>,
}

impl Feeder {
    fn take_error(&self) -> Option<SourceError> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the feeder thread owns.
struct ImageFeed {
    appsrc: gst_app::AppSrc,
    files: Arc<[PathBuf]>,
    loops: u32,
    kind: ImageKind,
    framerate: f64,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<SourceError>>>,
}

impl ImageFeed {
    /// Push every file as one buffer, then end of stream. A file that cannot be read ends the stream
    /// early (the frames before it still come out) and is left in `error`, set before the end of
    /// stream so that whoever sees the end finds it.
    fn run(self) {
        let total = self.files.len() * self.loops as usize;
        for index in 0..total {
            let path = &self.files[index % self.files.len()];
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let bytes = match std::fs::read(path) {
                Ok(bytes) if self.kind.has_magic(&bytes) => Ok(bytes),
                Ok(_) => Err(format!("not a {} file", self.kind.name())),
                Err(e) => Err(e.to_string()),
            };
            let bytes = match bytes {
                Ok(bytes) => bytes,
                Err(reason) => {
                    if let Ok(mut slot) = self.error.lock() {
                        *slot = Some(SourceError::Input {
                            path: path.display().to_string(),
                            reason,
                        });
                    }
                    let _ = self.appsrc.end_of_stream();
                    return;
                }
            };
            let mut buffer = gst::Buffer::from_mut_slice(bytes);
            if let Some(b) = buffer.get_mut() {
                b.set_pts(image_pts(index, self.framerate));
                b.set_duration(
                    image_pts(index + 1, self.framerate) - image_pts(index, self.framerate),
                );
                b.set_offset(index as u64);
            }
            if self.appsrc.push_buffer(buffer).is_err() {
                return; // flushing: the pipeline is stopping
            }
        }
        let _ = self.appsrc.end_of_stream();
    }
}

/// Nice value of the decoder threads of file and image sources (see `GstSource::open`).
const DECODER_NICE: libc::c_int = 10;

impl GstSource {
    /// Build and start the pipeline for `config`; frames' planes are taken from `pool`.
    ///
    /// Paths are checked before any GStreamer work: a missing file or folder, an empty folder or a
    /// folder mixing JPEG and PNG files is a [`SourceError::Input`].
    pub fn open(config: &SourceConfig, pool: BufferPool) -> Result<Self, SourceError> {
        // Check what we can before touching GStreamer.
        if config.loops == 0
            || (config.loops > 1 && !matches!(config.kind, SourceKind::Images { .. }))
        {
            return Err(SourceError::Setting {
                setting: "loop".into(),
                value: config.loops.to_string(),
                expected: "a count of at least 1 (only image sequences play more than once)".into(),
            });
        }
        let plan = match &config.kind {
            SourceKind::Media { location } => Plan::Media(media_uri(location)?),
            SourceKind::Images { location } => {
                check_framerate(config.framerate)?;
                Plan::Images(list_images(location)?)
            }
            SourceKind::Launch { fragment } => Plan::Launch(fragment),
            SourceKind::Test {
                pattern,
                width,
                height,
                num_buffers,
                format,
            } => {
                check_framerate(config.framerate)?;
                Plan::Test(TestSettings {
                    pattern,
                    width: *width,
                    height: *height,
                    num_buffers: *num_buffers,
                    format: *format,
                    framerate: config.framerate,
                })
            }
        };
        init()?;

        let pipeline = gst::Pipeline::new();
        let appsink = make("appsink", PLUGINS_BASE)?
            .downcast::<gst_app::AppSink>()
            .map_err(|_| missing("appsink", PLUGINS_BASE))?;
        appsink.set_max_buffers(SINK_QUEUE);
        appsink.set_drop(false);
        // As fast as the consumer pulls: live-rate pacing is the runner's (`runner::run_source`).
        appsink.set_sync(false);
        appsink.set_property("enable-last-sample", false);

        let mut feeder = None;
        let input = match plan {
            Plan::Media((name, uri)) => {
                build_media(&pipeline, &appsink, &uri)?;
                Input::Media {
                    name,
                    uri: uri.into(),
                }
            }
            Plan::Images((location, files, kind)) => {
                let images = Images {
                    names: files.iter().map(|f| file_name(f).into()).collect(),
                    location,
                    files: files.into(),
                    kind,
                    framerate: config.framerate,
                    next: 0,
                    decoding: Arc::new(AtomicU64::new(u64::MAX)),
                    loops: config.loops,
                };
                feeder = Some(build_images(&pipeline, &appsink, &images)?);
                Input::Images(images)
            }
            Plan::Launch(fragment) => {
                build_launch(&pipeline, &appsink, fragment)?;
                Input::Launch {
                    name: fragment.as_str().into(),
                }
            }
            Plan::Test(test) => {
                build_test(&pipeline, &appsink, &test)?;
                Input::Test {
                    name: format!("videotestsrc pattern={}", test.pattern).into(),
                }
            }
        };

        let bus = pipeline
            .bus()
            .ok_or_else(|| SourceError::Init("pipeline has no bus".into()))?;
        if !matches!(config.kind, SourceKind::Launch { .. }) {
            // Files and image sequences are decoded ahead of need: their decoder threads run at a
            // lower priority, so that they yield the cores to the stages working on due frames.
            // (A live head's decoder is on the critical path and keeps its priority.)
            bus.set_sync_handler(|_, msg| {
                if let gst::MessageView::StreamStatus(s) = msg.view() {
                    if s.get().0 == gst::StreamStatusType::Enter {
                        // SAFETY: setpriority on the calling thread (who = 0) only changes its nice value.
                        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, DECODER_NICE) };
                    }
                }
                gst::BusSyncReply::Pass
            });
        }
        let mut source = GstSource {
            pipeline,
            appsink,
            bus,
            pool,
            input,
            stream: config.stream,
            seq: 0,
            done: false,
            warning: None,
            missing: None,
            feeder,
            held: VecDeque::new(),
            pending: None,
            last_end: None,
            interrupted: Arc::new(AtomicBool::new(false)),
        };
        if source.pipeline.set_state(gst::State::Playing).is_err() {
            // The reason is on the bus.
            source.poll_bus()?;
            return Err(source.stream_error("could not start the pipeline".into(), None));
        }
        Ok(source)
    }

    /// How errors name this input.
    fn name(&self) -> &str {
        match &self.input {
            Input::Media { name, .. } => name,
            Input::Images(images) => &images.location,
            Input::Test { name } | Input::Launch { name } => name,
        }
    }

    fn stream_error(&self, message: String, debug: Option<String>) -> SourceError {
        SourceError::Stream {
            source_name: self.name().to_string(),
            message,
            debug,
        }
    }

    /// Handle what is waiting on the bus; the first error ends the stream.
    fn poll_bus(&mut self) -> Result<(), SourceError> {
        use gst::MessageType as T;
        while let Some(msg) = self.bus.pop_filtered(&[T::Error, T::Warning, T::Element]) {
            match msg.view() {
                gst::MessageView::Element(element) => {
                    if let Some(s) = element.structure().filter(|s| s.name() == "missing-plugin") {
                        let name = s.get::<String>("name").unwrap_or_default();
                        let detail = s
                            .get::<gst::Caps>("detail")
                            .map(|c| c.to_string())
                            .or_else(|_| s.get::<String>("detail"))
                            .unwrap_or_default();
                        self.missing.get_or_insert((name, detail));
                    }
                }
                gst::MessageView::Warning(w) => {
                    let debug = w.debug().map(|d| format!(" ({d})")).unwrap_or_default();
                    self.warning = Some(format!("{}{debug}", w.error()));
                }
                gst::MessageView::Error(err) => {
                    // Frames decoded before the error are kept: take them before the flush.
                    while let Some(sample) = self.appsink.try_pull_sample(gst::ClockTime::ZERO) {
                        self.held.push_back(sample);
                    }
                    self.finish();
                    if let Some(feeder_error) = self.feeder.as_ref().and_then(Feeder::take_error) {
                        return Err(feeder_error);
                    }
                    let not_found = err.error().matches(gst::StreamError::CodecNotFound)
                        || err.error().matches(gst::CoreError::MissingPlugin);
                    if let Some((name, detail)) = self.missing.take().filter(|_| not_found) {
                        let element = match (name.is_empty(), detail.is_empty()) {
                            (false, _) => name,
                            (true, false) => format!("decoder for {detail}"),
                            (true, true) => "decoder".to_string(),
                        };
                        return Err(SourceError::MissingElement {
                            element,
                            package: DECODER_PACKAGES.to_string(),
                        });
                    }
                    // A decoder often warns with the real reason before the generic flow error.
                    let debug = match (err.debug(), self.warning.take()) {
                        (Some(d), Some(w)) => Some(format!("{d}; after warning: {w}")),
                        (d, w) => d.map(|d| d.to_string()).or(w),
                    };
                    let (source_name, message) = match &self.input {
                        // jpegdec fails some broken files with a bare flow error: say what failed.
                        Input::Images(images) => (
                            images.decoding_name(),
                            format!(
                                "cannot decode this {} file: {}",
                                images.kind.name(),
                                err.error()
                            ),
                        ),
                        _ => (self.name().to_string(), err.error().to_string()),
                    };
                    return Err(SourceError::Stream {
                        source_name,
                        message,
                        debug,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Stop the pipeline and the feeder; the stream is over.
    fn finish(&mut self) {
        self.done = true;
        if let Some(feeder) = &self.feeder {
            feeder.stop.store(true, Ordering::SeqCst);
        }
        let _ = self.pipeline.set_state(gst::State::Null);
    }

    /// At end of stream: an image that produced no frame, or a file the feeder could not use.
    fn check_end(&mut self) -> Result<(), SourceError> {
        if let Some(error) = self.feeder.as_ref().and_then(Feeder::take_error) {
            return Err(error);
        }
        if let Input::Images(images) = &self.input {
            if images.next < images.total() {
                return Err(images.no_frame(images.next, self.warning.clone()));
            }
        }
        Ok(())
    }

    /// At end of stream of a media file whose container declares its length: a stream that stops
    /// well short of it is a truncated file. Call before the pipeline is stopped.
    fn check_length(&self) -> Result<(), SourceError> {
        if !matches!(self.input, Input::Media { .. }) || self.interrupted.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Containers whose header states the duration (a raw H.264 stream's is only an estimate).
        let declares = self
            .pipeline
            .iterate_recurse()
            .into_iter()
            .flatten()
            .any(|e| {
                e.factory().is_some_and(|f| {
                    matches!(f.name().as_str(), "qtdemux" | "matroskademux" | "avidemux")
                })
            });
        let duration = self.pipeline.query_duration::<gst::ClockTime>();
        let (Some(duration), true) = (duration, declares) else {
            return Ok(());
        };
        let end = self.last_end.unwrap_or(gst::ClockTime::ZERO);
        let slack = (duration / 20).max(gst::ClockTime::from_mseconds(200));
        if end + slack < duration {
            return Err(self.stream_error(
                format!(
                    "the stream ends after {} frames at {:.2} s but the file declares {:.2} s: truncated file?",
                    self.seq,
                    end.nseconds() as f64 / 1e9,
                    duration.nseconds() as f64 / 1e9
                ),
                None,
            ));
        }
        Ok(())
    }

    /// The frame in `sample`; `asked` is when the caller asked for it (its arrival).
    /// The instant at which a buffer of a live pipeline was captured or received: its running time
    /// on the pipeline clock, seen from now. `None` when the pipeline has no clock yet.
    fn arrival(&self, sample: &gst::Sample, pts: Option<gst::ClockTime>) -> Option<Instant> {
        let clock = self.pipeline.clock()?;
        let segment = sample.segment()?.downcast_ref::<gst::ClockTime>()?;
        let running = segment.to_running_time(pts?)?;
        let at = self.pipeline.base_time()? + running;
        let age = clock.time().checked_sub(at).unwrap_or(gst::ClockTime::ZERO);
        // A stamp from the future or from long ago is not an arrival time.
        (age < gst::ClockTime::from_seconds(10))
            .then(|| Instant::now() - Duration::from_nanos(age.nseconds()))
    }

    fn frame(&mut self, sample: gst::Sample, asked: Instant) -> Result<Frame, SourceError> {
        let (caps, buffer) = match (sample.caps(), sample.buffer()) {
            (Some(caps), Some(buffer)) => (caps, buffer),
            _ => return Err(self.stream_error("sample without caps or buffer".into(), None)),
        };
        let info = gst_video::VideoInfo::from_caps(caps).map_err(|_| SourceError::Format {
            source_name: self.name().to_string(),
            format: caps.to_string(),
        })?;
        let format = pixel_format(info.format()).ok_or_else(|| SourceError::Format {
            source_name: self.name().to_string(),
            format: info.format().to_str().to_string(),
        })?;
        let pts = buffer.pts().map(|t| Duration::from_nanos(t.nseconds()));
        if let Some(p) = buffer.pts() {
            self.last_end = Some(p + buffer.duration().unwrap_or(gst::ClockTime::ZERO));
        }

        let (source, fallback) = match &mut self.input {
            Input::Media { uri, .. } => (uri.clone(), video_default(info.height())),
            Input::Test { name } | Input::Launch { name } => {
                (name.clone(), video_default(info.height()))
            }
            Input::Images(images) => {
                let index = images.index_of(buffer.pts())?;
                images.next = index + 1;
                // jpegdec 1.22 puts `colorimetry=1:4:0:0` (full range, BT.601) and
                // `chroma-site=jpeg` in its caps, which maps to Colorimetry::JPEG; what the caps leave
                // unknown (e.g. after videoconvert turned a 4:4:4 or grey JPEG into I420) defaults to
                // JFIF's own definition, which is Colorimetry::JPEG too.
                (
                    images.names[index % images.names.len()].clone(),
                    Colorimetry::JPEG,
                )
            }
        };
        let colorimetry = colorimetry(&info, caps, fallback);

        let layout = FrameLayout::packed(format, info.width(), info.height());
        let mut pixels = self.pool.take(layout.size());
        let video =
            gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info).map_err(|e| {
                SourceError::Stream {
                    source_name: source.to_string(),
                    message: format!("cannot map the decoded frame: {e}"),
                    debug: None,
                }
            })?;
        copy_planes(&video, &layout, &mut pixels).map_err(|message| SourceError::Stream {
            source_name: source.to_string(),
            message,
            debug: None,
        })?;

        // The decode stage: waiting for the decoder, plus the copy. A live GStreamer head stamps
        // buffers with the running time they were captured or received at: the frame arrived then.
        let arrival = match &self.input {
            Input::Launch { .. } => self.arrival(&sample, buffer.pts()).unwrap_or(asked),
            _ => asked,
        };
        let seq = self.seq;
        self.seq += 1;
        let mut frame = Frame::new(self.stream, seq, &source, layout, colorimetry, pixels);
        frame.pts = pts;
        frame.times = FrameTimes::new(arrival);
        Ok(frame)
    }
}

impl FrameSource for GstSource {
    fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        let asked = Instant::now();
        loop {
            // Frames decoded before an error come out first, then the error.
            if let Some(sample) = self.held.pop_front() {
                return self.frame(sample, asked).map(Some).inspect_err(|_| {
                    self.held.clear();
                    self.pending = None;
                });
            }
            if let Some(e) = self.pending.take() {
                return Err(e);
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
            if let Some(sample) = self.appsink.try_pull_sample(POLL) {
                return self
                    .frame(sample, asked)
                    .map(Some)
                    .inspect_err(|_| self.finish());
            }
            // A live head may wait for its sender as long as it likes; files may not.
            if !matches!(self.input, Input::Launch { .. }) && asked.elapsed() > STALL {
                self.finish();
                return Err(self.stream_error(
                    format!(
                        "decoding stalled: no frame, no end of stream and no error for {} s (a damaged or truncated file?)",
                        STALL.as_secs()
                    ),
                    None,
                ));
            }
            if self.appsink.is_eos() {
                let length = self.check_length();
                self.finish();
                self.check_end()?;
                length?;
            }
        }
    }

    fn stop(&mut self) {
        if !self.done {
            self.finish();
        }
    }

    fn interrupter(&self) -> Box<dyn Fn() + Send + Sync> {
        // A flag `next_frame` reads between waits of at most POLL. Not an EOS event sent into the
        // pipeline: `send_event` from another thread blocked (on a full appsink) against the
        // source thread's `set_state(Null)` and hung the run on SIGTERM.
        let interrupted = self.interrupted.clone();
        Box::new(move || interrupted.store(true, Ordering::SeqCst))
    }
}

impl Drop for GstSource {
    fn drop(&mut self) {
        self.finish();
        if let Some(feeder) = &mut self.feeder {
            feeder.stop_and_join();
        }
    }
}

/// Presentation time of image `index` of a sequence played at `framerate`.
fn image_pts(index: usize, framerate: f64) -> gst::ClockTime {
    gst::ClockTime::from_nseconds((index as f64 * 1e9 / framerate).round() as u64)
}

impl Images {
    /// The image a decoded frame came from, checked against the pts the feeder gave it.
    fn index_of(&self, pts: Option<gst::ClockTime>) -> Result<usize, SourceError> {
        let stray = || SourceError::Stream {
            source_name: self.location.clone(),
            message: format!("decoded frame with pts {pts:?} matches no image"),
            debug: None,
        };
        let pts = pts.ok_or_else(stray)?;
        let index = (pts.nseconds() as f64 * self.framerate / 1e9).round() as usize;
        if index >= self.total() || image_pts(index, self.framerate) != pts || index < self.next {
            return Err(stray());
        }
        if index > self.next {
            // jpegdec and pngdec drop a picture they cannot decode (with at most a warning).
            return Err(self.no_frame(self.next, None));
        }
        Ok(index)
    }

    /// Images in the stream: every file, `loops` times.
    fn total(&self) -> usize {
        self.files.len() * self.loops as usize
    }

    /// The file the decoder was working on (the folder or glob before the first).
    fn decoding_name(&self) -> String {
        let index = self.decoding.load(Ordering::SeqCst);
        let file = usize::try_from(index)
            .ok()
            .filter(|i| *i < self.total())
            .and_then(|i| self.files.get(i % self.files.len()));
        match file {
            Some(path) => path.display().to_string(),
            None => self.location.clone(),
        }
    }

    fn no_frame(&self, index: usize, debug: Option<String>) -> SourceError {
        SourceError::Stream {
            source_name: self.files[index % self.files.len()].display().to_string(),
            message: format!(
                "{} produced no picture from this file (corrupt {}?)",
                self.kind.decoder(),
                self.kind.name()
            ),
            debug,
        }
    }
}

/// What `open` checked before building the pipeline.
enum Plan<'a> {
    /// (name for errors, URI)
    Media((String, String)),
    /// (location, files in name order, their kind)
    Images((String, Vec<PathBuf>, ImageKind)),
    Test(TestSettings<'a>),
    /// A GStreamer launch fragment.
    Launch(&'a String),
}

struct TestSettings<'a> {
    pattern: &'a str,
    width: u32,
    height: u32,
    num_buffers: u32,
    format: PixelFormat,
    framerate: f64,
}

/// Initialise GStreamer once per process.
/// Whether a launch fragment holds a live source (`udpsrc`, `rtspsrc`, a live `videotestsrc`, ...).
/// The fragment is parsed but never started; false when it does not parse.
pub(crate) fn fragment_is_live(fragment: &str) -> bool {
    use gst::prelude::*;
    if init().is_err() {
        return false;
    }
    let Ok(bin) = gst::parse::bin_from_description(fragment, false) else {
        return false;
    };
    bin.iterate_recurse()
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.downcast::<gstreamer_base::BaseSrc>().ok())
        .any(|src| src.is_live())
        || fragment.split_whitespace().next().is_some_and(|first| {
            // Bins that create their live source only when started.
            matches!(
                first,
                "rtspsrc" | "srtsrc" | "srtclientsrc" | "srtserversrc" | "ristsrc" | "webrtcbin"
            )
        })
}

/// Names of every installed element factory.
pub(crate) fn element_names() -> Vec<String> {
    if init().is_err() {
        return Vec::new();
    }
    gst::Registry::get()
        .features(gst::ElementFactory::static_type())
        .into_iter()
        .map(|f| f.name().to_string())
        .collect()
}

/// Whether an element factory `name` is installed.
pub(crate) fn element_exists(name: &str) -> bool {
    init().is_ok() && gst::ElementFactory::find(name).is_some()
}

fn init() -> Result<(), SourceError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| gst::init().map_err(|e| e.to_string()))
        .clone()
        .map_err(SourceError::Init)
}

fn missing(element: &str, package: &str) -> SourceError {
    SourceError::MissingElement {
        element: element.to_string(),
        package: package.to_string(),
    }
}

fn make(element: &str, package: &str) -> Result<gst::Element, SourceError> {
    gst::ElementFactory::make(element)
        .build()
        .map_err(|_| missing(element, package))
}

fn link_error(what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Stream {
        source_name: what.to_string(),
        message: format!("cannot link the pipeline: {e}"),
        debug: None,
    }
}

fn check_framerate(framerate: f64) -> Result<(), SourceError> {
    if framerate.is_finite() && framerate > 0.0 && framerate <= 1000.0 {
        Ok(())
    } else {
        Err(SourceError::Setting {
            setting: "framerate".into(),
            value: framerate.to_string(),
            expected: "frames per second, above 0 and at most 1000".into(),
        })
    }
}

/// (name for errors, URI) of a media location; local files must exist and be readable.
fn media_uri(location: &str) -> Result<(String, String), SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::Input {
        path: path.display().to_string(),
        reason,
    };
    let path = if is_uri(location) {
        if !location.starts_with("file:") {
            return Ok((location.to_string(), location.to_string()));
        }
        let (path, _) = gst::glib::filename_from_uri(location)
            .map_err(|e| input_error(Path::new(location), e.to_string()))?;
        path
    } else {
        PathBuf::from(location)
    };
    let meta = std::fs::metadata(&path).map_err(|e| input_error(&path, e.to_string()))?;
    if meta.is_dir() {
        return Err(input_error(
            &path,
            "is a folder, not a media file (use `images` for a folder of pictures)".into(),
        ));
    }
    std::fs::File::open(&path).map_err(|e| input_error(&path, e.to_string()))?;
    let absolute = std::fs::canonicalize(&path).map_err(|e| input_error(&path, e.to_string()))?;
    let uri = gst::glib::filename_to_uri(&absolute, None)
        .map_err(|e| input_error(&path, e.to_string()))?;
    Ok((location.to_string(), uri.to_string()))
}

/// `scheme://...` with a plausible scheme.
fn is_uri(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => {
            scheme.len() > 1
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// The image files of a folder or glob, in file-name order, all of one kind.
fn list_images(location: &str) -> Result<(String, Vec<PathBuf>, ImageKind), SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::Input {
        path: path.display().to_string(),
        reason,
    };
    let path = Path::new(location);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (dir, pattern) = if name.contains(['*', '?']) {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        (dir, Some(name))
    } else {
        (path, None)
    };
    let entries = std::fs::read_dir(dir).map_err(|e| input_error(dir, e.to_string()))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| input_error(dir, e.to_string()))?;
        let file = entry.path();
        let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let wanted = match pattern {
            Some(pattern) => glob_match(pattern, name),
            None => ImageKind::of(&file).is_some(),
        };
        if wanted && file.is_file() {
            files.push(file);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));

    let Some(first) = files.first() else {
        return Err(SourceError::Input {
            path: location.to_string(),
            reason: "no .jpg, .jpeg or .png files".into(),
        });
    };
    let kind = ImageKind::of(first)
        .ok_or_else(|| input_error(first, "not a .jpg, .jpeg or .png file".into()))?;
    if let Some(odd) = files.iter().find(|f| ImageKind::of(f) != Some(kind)) {
        let reason = match ImageKind::of(odd) {
            Some(other) => format!(
                "is {} but {} starts a {} sequence: mixed image formats are not supported",
                other.name(),
                file_name(first),
                kind.name()
            ),
            None => "not a .jpg, .jpeg or .png file".into(),
        };
        return Err(input_error(odd, reason));
    }
    Ok((location.to_string(), files, kind))
}

/// Shell-style match of a file name: `*` any run of characters, `?` one character.
fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic greedy matcher with backtracking to the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// `uridecodebin ! videoconvert ! appsink`; pads other than raw video go to a `fakesink`.
/// Decoded frames reach `appsink` as I420 or NV12 (the kernels convert the colour; decoding to RGB
/// costs the decoder about twice the time).
fn ask_for_yuv(appsink: &gst_app::AppSink) {
    appsink.set_caps(Some(
        &gst_video::VideoCapsBuilder::new()
            .format_list([gst_video::VideoFormat::I420, gst_video::VideoFormat::Nv12])
            .build(),
    ));
}

fn build_media(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    uri: &str,
) -> Result<(), SourceError> {
    let decode = make("uridecodebin", PLUGINS_BASE)?;
    decode.set_property("uri", uri);
    let convert = make("videoconvert", PLUGINS_BASE)?;
    ask_for_yuv(appsink);
    pipeline
        .add_many([&decode, &convert, appsink.upcast_ref()])
        .and_then(|_| convert.link(appsink))
        .map_err(|e| link_error(uri, e))?;

    let video_sink = convert.static_pad("sink");
    let bin = pipeline.downgrade();
    decode.connect_pad_added(move |_, pad| {
        let is_video = pad
            .current_caps()
            .and_then(|c| c.structure(0).map(|s| s.name().starts_with("video/")))
            .unwrap_or(false);
        if let Some(sink) = video_sink.as_ref().filter(|s| is_video && !s.is_linked()) {
            let _ = pad.link(sink);
            return;
        }
        // Audio, subtitles or a second video stream: consume and ignore.
        let (Some(bin), Ok(fake)) = (bin.upgrade(), gst::ElementFactory::make("fakesink").build())
        else {
            return;
        };
        fake.set_property("sync", false);
        fake.set_property("async", false);
        if bin.add(&fake).is_ok() {
            let _ = fake.sync_state_with_parent();
            if let Some(sink) = fake.static_pad("sink") {
                let _ = pad.link(&sink);
            }
        }
    });
    let video_sink = convert.static_pad("sink");
    decode.connect_no_more_pads(move |decode| {
        if video_sink.as_ref().is_some_and(|s| !s.is_linked()) {
            let msg = gst::message::Error::builder(
                gst::StreamError::WrongType,
                "no video stream in this input",
            )
            .src(decode)
            .build();
            let _ = decode.post_message(msg);
        }
    });
    Ok(())
}

/// `FRAGMENT ! videoconvert ! appsink`: any GStreamer launch fragment whose last element has an
/// unlinked video source pad (e.g. `udpsrc ... ! rtph264depay ! avdec_h264`).
fn build_launch(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    fragment: &str,
) -> Result<(), SourceError> {
    let head = gst::parse::bin_from_description(fragment, true).map_err(|e| {
        let missing = e.kind::<gst::ParseError>() == Some(gst::ParseError::NoSuchElement);
        SourceError::Stream {
            source_name: fragment.to_string(),
            message: if missing {
                format!("{e} (gst-inspect-1.0 lists the installed elements)")
            } else {
                format!("not a valid GStreamer launch fragment: {e}")
            },
            debug: None,
        }
    })?;
    let convert = make("videoconvert", PLUGINS_BASE)?;
    ask_for_yuv(appsink);
    pipeline
        .add_many([head.upcast_ref(), &convert, appsink.upcast_ref()])
        .and_then(|_| head.link(&convert))
        .and_then(|_| convert.link(appsink))
        .map_err(|e| link_error(fragment, e))
}

/// `appsrc ! jpegdec|pngdec ! videoconvert ! appsink`, fed by a thread.
fn build_images(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    images: &Images,
) -> Result<Feeder, SourceError> {
    use gst_video::VideoFormat as F;
    let appsrc = make("appsrc", PLUGINS_BASE)?
        .downcast::<gst_app::AppSrc>()
        .map_err(|_| missing("appsrc", PLUGINS_BASE))?;
    appsrc.set_caps(Some(&images.kind.caps()));
    appsrc.set_format(gst::Format::Time);
    appsrc.set_block(true);
    appsrc.set_max_buffers(IMAGE_QUEUE);
    appsrc.set_max_bytes(0);
    appsrc.set_max_time(gst::ClockTime::ZERO);
    let decoder = make(images.kind.decoder(), PLUGINS_GOOD)?;
    if images.kind == ImageKind::Jpeg {
        // jpegdec defaults to libjpeg's fast, less accurate IDCT; the accurate one (libjpeg's own
        // default, used by OpenCV and PIL) costs under 5% more with libjpeg-turbo.
        if let Ok(islow) = enum_value(&decoder, "idct-method", "islow") {
            decoder.set_property_from_value("idct-method", &islow);
        }
    }
    let convert = make("videoconvert", PLUGINS_BASE)?;
    appsink.set_caps(Some(
        &gst_video::VideoCapsBuilder::new()
            .format_list([
                F::I420,
                F::Nv12,
                F::Rgb,
                F::Bgr,
                F::Rgba,
                F::Bgra,
                F::Rgbx,
                F::Bgrx,
            ])
            .build(),
    ));
    let elements = [
        appsrc.upcast_ref(),
        &decoder,
        &convert,
        appsink.upcast_ref(),
    ];
    pipeline
        .add_many(elements)
        .and_then(|_| gst::Element::link_many(elements))
        .map_err(|e| link_error(&images.location, e))?;
    // Note which file enters the decoder (the feeder sets each buffer's offset to its index).
    if let Some(pad) = decoder.static_pad("sink") {
        let decoding = images.decoding.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(buffer) = info.buffer() {
                decoding.store(buffer.offset(), Ordering::SeqCst);
            }
            gst::PadProbeReturn::Ok
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let error = Arc::new(Mutex::new(None));
    let feed = ImageFeed {
        appsrc,
        files: images.files.clone(),
        loops: images.loops,
        kind: images.kind,
        framerate: images.framerate,
        stop: stop.clone(),
        error: error.clone(),
    };
    let thread = std::thread::Builder::new()
        .name("octopipe-images".into())
        .spawn(move || feed.run())
        .map_err(|e| SourceError::Init(format!("cannot start the image feeder thread: {e}")))?;
    Ok(Feeder {
        thread: Some(thread),
        stop,
        error,
    })
}

/// `videotestsrc ! appsink` with the requested caps.
fn build_test(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    test: &TestSettings,
) -> Result<(), SourceError> {
    let src = make("videotestsrc", PLUGINS_BASE)?;
    src.set_property(
        "num-buffers",
        i32::try_from(test.num_buffers).unwrap_or(i32::MAX),
    );
    let pattern =
        enum_value(&src, "pattern", test.pattern).map_err(|expected| SourceError::Setting {
            setting: "pattern".into(),
            value: test.pattern.to_string(),
            expected,
        })?;
    src.set_property_from_value("pattern", &pattern);
    let fps = gst::Fraction::approximate_f64(test.framerate).unwrap_or(gst::Fraction::new(30, 1));
    let caps = gst_video::VideoCapsBuilder::new()
        .format(gst_format(test.format))
        .width(i32::try_from(test.width).unwrap_or(i32::MAX))
        .height(i32::try_from(test.height).unwrap_or(i32::MAX))
        .framerate(fps)
        .build();
    appsink.set_caps(Some(&caps));
    pipeline
        .add_many([&src, appsink.upcast_ref()])
        .and_then(|_| src.link(appsink))
        .map_err(|e| link_error("videotestsrc", e))
}

/// The value of enum property `property` of `element` named `nick` (or its full name); the error
/// lists the accepted nicks.
fn enum_value(
    element: &gst::Element,
    property: &str,
    nick: &str,
) -> Result<gst::glib::Value, String> {
    let class = element
        .find_property(property)
        .and_then(|p| gst::glib::EnumClass::with_type(p.value_type()))
        .ok_or_else(|| format!("no enum property {property}"))?;
    class
        .to_value_by_nick(nick)
        .or_else(|| class.to_value_by_name(nick))
        .ok_or_else(|| {
            let nicks: Vec<_> = class.values().iter().map(|v| v.nick()).collect();
            format!("one of {}", nicks.join(", "))
        })
}

fn gst_format(format: PixelFormat) -> gst_video::VideoFormat {
    use gst_video::VideoFormat as F;
    match format {
        PixelFormat::I420 => F::I420,
        PixelFormat::Nv12 => F::Nv12,
        PixelFormat::Rgb => F::Rgb,
        PixelFormat::Bgr => F::Bgr,
        PixelFormat::Rgba => F::Rgba,
        PixelFormat::Bgra => F::Bgra,
    }
}

/// The octopipe format of a decoded GStreamer format; RGBx/BGRx read as RGBA/BGRA (alpha ignored).
fn pixel_format(format: gst_video::VideoFormat) -> Option<PixelFormat> {
    use gst_video::VideoFormat as F;
    Some(match format {
        F::I420 => PixelFormat::I420,
        F::Nv12 => PixelFormat::Nv12,
        F::Rgb => PixelFormat::Rgb,
        F::Bgr => PixelFormat::Bgr,
        F::Rgba | F::Rgbx => PixelFormat::Rgba,
        F::Bgra | F::Bgrx => PixelFormat::Bgra,
        _ => return None,
    })
}

/// GStreamer's own default for video whose caps say nothing: BT.709 from 720 lines up, else BT.601.
fn video_default(height: u32) -> Colorimetry {
    if height >= 720 {
        Colorimetry::BT709
    } else {
        Colorimetry::BT601
    }
}

/// The colorimetry of `caps` (parsed into `info`), with what they leave unknown taken from `fallback`.
///
/// Matrices octopipe has no coefficients for map to the closest one: FCC to BT.601 (nearly the
/// same), SMPTE 240M and BT.2020 to BT.709 (240M is within 0.2% of it; BT.2020 content is HD
/// material whose nearest supported matrix is 709). Chroma co-sited horizontally (`mpeg2`, `dv`,
/// `cosited`) is `Left`; chroma centred (`jpeg`) is `Center`.
///
/// The `chroma-site` field is read from the caps themselves: GStreamer 1.22's `VideoInfo` overwrites
/// it with its default (centred below 720 lines, co-sited above) whenever the caps carry no
/// `colorimetry`, and leaves it unknown when they carry a colorimetry but no chroma site (H.264 from
/// `avdec_h264`); then `fallback` decides.
fn colorimetry(
    info: &gst_video::VideoInfo,
    caps: &gst::CapsRef,
    fallback: Colorimetry,
) -> Colorimetry {
    use gst_video::{VideoChromaSite as Site, VideoColorMatrix as M, VideoColorRange as R};
    let c = info.colorimetry();
    let matrix = match c.matrix() {
        M::Bt601 | M::Fcc => Matrix::Bt601,
        M::Bt709 | M::Smpte240m | M::Bt2020 => Matrix::Bt709,
        _ => fallback.matrix,
    };
    let range = match c.range() {
        R::Range0_255 => Range::Full,
        R::Range16_235 => Range::Limited,
        _ => fallback.range,
    };
    let site = caps
        .structure(0)
        .and_then(|s| s.get::<&str>("chroma-site").ok())
        .map(Site::from_string)
        .unwrap_or_else(|| info.chroma_site());
    let chroma_site = if site.contains(Site::H_COSITED) {
        ChromaSite::Left
    } else if site.is_empty() {
        fallback.chroma_site
    } else {
        ChromaSite::Center
    };
    Colorimetry {
        matrix,
        range,
        chroma_site,
    }
}

/// Copy each plane's visible rows from the mapped frame into `dst`, laid out as `layout`.
fn copy_planes(
    frame: &gst_video::VideoFrameRef<&gst::BufferRef>,
    layout: &FrameLayout,
    dst: &mut [u8],
) -> Result<(), String> {
    let height = layout.height as usize;
    for plane in 0..layout.format.planes() {
        let rows = if plane == 0 {
            height
        } else {
            height.div_ceil(2)
        };
        let row = layout.strides[plane];
        let src = frame
            .plane_data(plane as u32)
            .map_err(|e| format!("plane {plane}: {e}"))?;
        let stride = usize::try_from(frame.plane_stride()[plane]).unwrap_or(0);
        let dst = &mut dst[layout.offsets[plane]..layout.offsets[plane] + row * rows];
        if rows == 0 || row == 0 {
            continue;
        }
        if stride < row || src.len() < stride * (rows - 1) + row {
            return Err(format!(
                "plane {plane} is {} bytes with stride {stride}, too small for {rows} rows of {row} bytes",
                src.len()
            ));
        }
        if stride == row {
            dst.copy_from_slice(&src[..row * rows]);
        } else {
            for (d, s) in dst.chunks_exact_mut(row).zip(src.chunks(stride)) {
                d.copy_from_slice(&s[..row]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn glob() {
        assert!(glob_match("*.jpg", "a.jpg"));
        assert!(glob_match("img_??.png", "img_01.png"));
        assert!(!glob_match("img_??.png", "img_1.png"));
        assert!(glob_match("*_d_*.jpg", "9999999_00023_d_0000001.jpg"));
        assert!(!glob_match("*.jpg", "a.jpeg"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
    }
}
