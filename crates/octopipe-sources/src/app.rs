//! The application's own frames: a source the application feeds from any thread.
//!
//! ```text
//! app name=cam framerate=30 ! batch ! preprocess ! classify model=m.onnx ! appsink
//! ```
//!
//! The application takes the stage's [`AppSource`] handle from the built pipeline
//! (`Pipeline::app_source`), pushes [`AppFrame`]s (host planes in any [`PixelFormat`] with
//! their strides and colorimetry, or a CUDA device pointer) with their pts and their own boxes
//! ([`AppBox`]: x, y, w, h, optional class, label, score, track), then closes it. Every push is
//! checked: a wrong plane size or stride, a box outside the frame or a push after close is a
//! [`PushError`] naming the frame and what is wrong, never a panic or a silent zero. A push waits
//! while the pipeline is busy (file-like, `live=false`), or, with `live=true`, the pipeline's
//! edges drop the oldest frame instead (counted in the report). Budget, late policy,
//! multi-stream batching and the report apply as to decoded frames.

pub use octopipe_core::error::{BadBox, PushError};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{
    bounded, Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError,
};

use super::{FrameSource, SourceError};
use octopipe_core::error::Error;
use octopipe_core::frame::clip_box;
use octopipe_core::frame::{
    BoxOrigin, Colorimetry, Detection, DeviceFrame, Frame, FrameLayout, PixelFormat, PooledBuf,
    SkipReason,
};
use octopipe_core::stage::{Element, OpenContext, Properties, Role, Running, StageDecl};

/// How long a blocked push or a waiting source looks again at whether the other side is gone.
const POLL: Duration = Duration::from_millis(50);

/// The `app` source's properties, declared once ([`APP`]).
#[derive(Debug, Clone, Copy, PartialEq, Properties)]
pub(crate) struct AppProps {
    /// nominal frames per second; sets the budget (1/framerate)
    #[prop(default = super::config::DEFAULT_FRAMERATE, positive)]
    pub framerate: f64,
    /// a live feed: the edges drop the oldest frame instead of making push wait
    #[prop(default = false)]
    pub live: bool,
}

/// `app`: frames pushed by the application.
pub const APP: StageDecl = StageDecl {
    name: "app",
    role: Role::Source,
    doc: "frames (and their boxes) pushed by the application: Pipeline::app_source",
    props: AppProps::PROPS,
    needs: &[],
    provides: &[Role::Boxes],
    make: |p| {
        let a = AppProps::from_props(p)?;
        Ok(Box::new(AppSourceSettings::new(
            p.given("name").unwrap_or("app"),
            a.framerate,
            a.live,
        )))
    },
};

/// One box of the application's, in frame pixels: any detector's or tracker's output.
#[derive(Debug, Clone, PartialEq)]
pub struct AppBox {
    /// `[x, y, w, h]`; fractional values are rounded to the nearest pixel edge.
    pub bbox: [f64; 4],
    /// The application's class id.
    pub class_id: Option<u32>,
    /// The application's class name.
    pub label: Option<String>,
    /// The application's score (1 when not given).
    pub score: Option<f32>,
    /// The application's track id.
    pub track: Option<u32>,
}

impl AppBox {
    /// A box at `x, y` of `w` x `h` pixels.
    pub fn new(x: f64, y: f64, w: f64, h: f64) -> Self {
        AppBox {
            bbox: [x, y, w, h],
            class_id: None,
            label: None,
            score: None,
            track: None,
        }
    }

    /// With a class id.
    pub fn class(mut self, id: u32) -> Self {
        self.class_id = Some(id);
        self
    }

    /// With a class name.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// With a score.
    pub fn score(mut self, score: f32) -> Self {
        self.score = Some(score);
        self
    }

    /// With a track id.
    pub fn track(mut self, track: u32) -> Self {
        self.track = Some(track);
        self
    }

    /// The box as a [`Detection`] clipped to a `width` x `height` frame; `Err(reason)` when it
    /// is not a box inside the frame, `Ok(Err(skip))` when what is left is under 2 px.
    pub fn detection(
        &self,
        width: u32,
        height: u32,
    ) -> Result<Result<Detection, SkipReason>, BadBox> {
        let [x, y, w, h] = self.bbox;
        if !self.bbox.iter().all(|v| v.is_finite()) {
            return Err(BadBox::NotFinite);
        }
        if w <= 0.0 || h <= 0.0 {
            return Err(BadBox::NoArea);
        }
        let (x0, y0) = (x.round(), y.round());
        let (x1, y1) = ((x + w).round(), (y + h).round());
        let int = |v: f64| v.clamp(i64::MIN as f64, i64::MAX as f64) as i64;
        let b = [int(x0), int(y0), int(x1 - x0), int(y1 - y0)];
        let bbox = match clip_box(b, width, height) {
            Ok(b) => b,
            Err(SkipReason::OutsideFrame) => return Err(BadBox::Outside { width, height }),
            Err(reason) => return Ok(Err(reason)),
        };
        Ok(Ok(Detection {
            bbox,
            class_id: self.class_id,
            origin: BoxOrigin::Detector,
            label: self.label.as_deref().map(Arc::from),
            score: self.score.unwrap_or(1.0),
            track: self.track,
            classification: None,
            classifications: Vec::new(),
            stats: None,
        }))
    }
}

macro_rules! app_box_from {
    ($($t:ty),*) => {$(
        impl From<[$t; 4]> for AppBox {
            fn from([x, y, w, h]: [$t; 4]) -> Self {
                AppBox::new(x as f64, y as f64, w as f64, h as f64)
            }
        }
    )*};
}
app_box_from!(u32, i32, i64, f32, f64);

/// Where a pushed frame's planes are.
#[derive(Debug)]
pub enum AppPlanes {
    /// Host bytes laid out as the frame's layout says.
    Host(Vec<u8>),
    /// CUDA device memory laid out as the frame's layout says.
    Device(DeviceFrame),
}

/// A frame the application pushes.
#[derive(Debug)]
pub struct AppFrame {
    /// Format, size, plane offsets and strides.
    pub layout: FrameLayout,
    /// YUV to RGB conversion (for YUV formats).
    pub colorimetry: Colorimetry,
    /// The planes.
    pub planes: AppPlanes,
    /// Presentation time.
    pub pts: Option<Duration>,
    /// Its boxes.
    pub boxes: Vec<AppBox>,
    /// A name for results and reports (an image file name, a camera frame id).
    pub name: Option<String>,
}

impl AppFrame {
    /// Host planes, tightly packed, of a `width` x `height` frame in `format`.
    pub fn packed(format: PixelFormat, width: u32, height: u32, data: Vec<u8>) -> Self {
        Self::host(FrameLayout::packed(format, width, height), data)
    }

    /// Host planes laid out as `layout` (offsets and strides of each plane).
    pub fn host(layout: FrameLayout, data: Vec<u8>) -> Self {
        AppFrame {
            layout,
            colorimetry: default_colorimetry(&layout),
            planes: AppPlanes::Host(data),
            pts: None,
            boxes: Vec::new(),
            name: None,
        }
    }

    /// Planes already on a CUDA device, laid out as `layout`.
    pub fn device(layout: FrameLayout, planes: DeviceFrame) -> Self {
        AppFrame {
            layout,
            colorimetry: default_colorimetry(&layout),
            planes: AppPlanes::Device(planes),
            pts: None,
            boxes: Vec::new(),
            name: None,
        }
    }

    /// With a presentation time.
    pub fn pts(mut self, pts: Duration) -> Self {
        self.pts = Some(pts);
        self
    }

    /// With the frame's boxes (any type that converts into [`AppBox`]).
    pub fn boxes<B: Into<AppBox>>(mut self, boxes: impl IntoIterator<Item = B>) -> Self {
        self.boxes = boxes.into_iter().map(Into::into).collect();
        self
    }

    /// With a colorimetry other than the default (BT.709 limited for YUV of 720 rows and more,
    /// BT.601 limited below).
    pub fn colorimetry(mut self, colorimetry: Colorimetry) -> Self {
        self.colorimetry = colorimetry;
        self
    }

    /// With a name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Check the planes and boxes, and make the pipeline's frame (boxes clipped; boxes under
    /// 2 px after clipping skipped and counted).
    pub fn into_frame(self, source: &str, stream: u32, seq: u64) -> Result<Frame, PushError> {
        let bad = |layout| PushError::Frame {
            source_name: source.to_string(),
            seq,
            layout,
        };
        let held = match &self.planes {
            AppPlanes::Host(data) => Some(data.len()),
            AppPlanes::Device(_) => None,
        };
        self.layout.check(held).map_err(bad)?;
        let (w, h) = (self.layout.width, self.layout.height);
        let mut detections = Vec::with_capacity(self.boxes.len());
        let mut skipped = Vec::new();
        for (index, b) in self.boxes.iter().enumerate() {
            match b.detection(w, h) {
                Ok(Ok(d)) => detections.push(d),
                Ok(Err(reason)) => skipped.push(reason),
                Err(reason) => {
                    return Err(PushError::Box {
                        source_name: source.to_string(),
                        seq,
                        index,
                        bbox: b.bbox,
                        reason,
                    })
                }
            }
        }
        let name = self.name.unwrap_or_else(|| format!("{source}:{seq}"));
        let mut frame = match self.planes {
            AppPlanes::Host(data) => Frame::new(
                stream,
                seq,
                &name,
                self.layout,
                self.colorimetry,
                PooledBuf::unpooled(data),
            ),
            AppPlanes::Device(d) => {
                Frame::on_device(stream, seq, &name, self.layout, self.colorimetry, d)
            }
        };
        frame.pts = self.pts;
        frame.detections = detections;
        for reason in skipped {
            frame.skip(reason);
        }
        Ok(frame)
    }
}

fn default_colorimetry(layout: &FrameLayout) -> Colorimetry {
    if !layout.format.is_yuv() {
        Colorimetry::default()
    } else if layout.height >= 720 {
        Colorimetry::BT709
    } else {
        Colorimetry::BT601
    }
}

enum Msg {
    Frame(Box<Frame>),
    Close,
}

/// State shared by the handles and the source thread.
struct Shared {
    name: String,
    stream: AtomicU32,
    seq: AtomicU64,
    closed: AtomicBool,
    /// The pipeline's side is gone (ended, failed, stopped).
    stopped: AtomicBool,
    /// Held by a push from its check to its send, and by close.
    turn: Mutex<()>,
}

/// The application's handle on an `app` source: push frames, then close. Cheap to clone and
/// send to other threads; frames from several threads are numbered in the order they enter the
/// pipeline.
#[derive(Clone)]
pub struct AppSource {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
}

impl AppSource {
    /// The source's name (its `name=`, or `app`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The stream id its frames carry (its place among the description's sources).
    pub fn stream(&self) -> u32 {
        self.shared.stream.load(Ordering::SeqCst)
    }

    /// Check and push one frame; waits while the pipeline is busy (unless `live=true`).
    pub fn push(&self, frame: AppFrame) -> Result<(), PushError> {
        self.push_while(frame, || true)
    }

    /// Check and push one frame if the pipeline takes it at once; [`PushError::Full`] if not.
    pub fn try_push(&self, frame: AppFrame) -> Result<(), PushError> {
        self.push_while(frame, || false)
    }

    /// Check and push one frame, waiting while the pipeline is busy for as long as
    /// `keep_waiting` says: it is asked each time the pipeline was found full (every 50 ms while
    /// it stays full), and a `false` ends the push with [`PushError::Full`]. For a caller that
    /// must look at something else while it waits (an interpreter's signals).
    pub fn push_while(
        &self,
        frame: AppFrame,
        keep_waiting: impl FnMut() -> bool,
    ) -> Result<(), PushError> {
        let s = &self.shared;
        // One push at a time from check to send: frames enter the pipeline in the order they are
        // numbered, and a close cannot come between a push's check and its send.
        let _turn = s.turn.lock().unwrap_or_else(|e| e.into_inner());
        if s.closed.load(Ordering::SeqCst) {
            return Err(PushError::Closed {
                source_name: s.name.clone(),
            });
        }
        // A frame that is refused (or not sent) takes no number: the next frame takes it.
        let seq = s.seq.load(Ordering::SeqCst);
        let frame = frame.into_frame(&s.name, s.stream.load(Ordering::SeqCst), seq)?;
        self.send(Msg::Frame(Box::new(frame)), keep_waiting)?;
        s.seq.store(seq + 1, Ordering::SeqCst);
        Ok(())
    }

    /// End the stream: the pipeline finishes the frames pushed so far (waiting for a push under
    /// way on another thread). Later pushes fail.
    pub fn close(&self) {
        self.close_while(|| true);
    }

    /// [`AppSource::close`], waiting while the pipeline is busy for as long as `keep_waiting`
    /// says (as [`AppSource::push_while`]). Later pushes fail either way; false when the end
    /// of the stream was not handed over (the pipeline then ends the stream when it is
    /// stopped).
    pub fn close_while(&self, keep_waiting: impl FnMut() -> bool) -> bool {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return true;
        }
        // Pushes that take their turn from now on see `closed`; one under way finishes first.
        let _turn = self.shared.turn.lock().unwrap_or_else(|e| e.into_inner());
        !matches!(
            self.send(Msg::Close, keep_waiting),
            Err(PushError::Full { .. })
        )
    }

    /// Hand `msg` over, asking `keep_waiting` whenever the channel is full.
    fn send(&self, mut msg: Msg, mut keep_waiting: impl FnMut() -> bool) -> Result<(), PushError> {
        let name = || self.shared.name.clone();
        loop {
            if self.shared.stopped.load(Ordering::SeqCst) {
                return Err(PushError::Stopped {
                    source_name: name(),
                });
            }
            match self.tx.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(_)) => {
                    return Err(PushError::Stopped {
                        source_name: name(),
                    })
                }
                Err(TrySendError::Full(back)) => msg = back,
            }
            if !keep_waiting() {
                return Err(PushError::Full {
                    source_name: name(),
                });
            }
            match self.tx.send_timeout(msg, POLL) {
                Ok(()) => return Ok(()),
                Err(SendTimeoutError::Timeout(back)) => msg = back,
                Err(SendTimeoutError::Disconnected(_)) => {
                    return Err(PushError::Stopped {
                        source_name: name(),
                    })
                }
            }
        }
    }
}

/// The `app` stage's settings; it makes the handle the application pushes with.
#[derive(Debug)]
pub struct AppSourceSettings {
    name: String,
    framerate: f64,
    live: bool,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Frame(_) => "Frame",
            Msg::Close => "Close",
        })
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AppSource({})", self.name)
    }
}

impl AppSourceSettings {
    /// An application source called `name`, nominally at `framerate`.
    pub fn new(name: &str, framerate: f64, live: bool) -> Self {
        let (tx, rx) = bounded(1);
        AppSourceSettings {
            name: name.to_string(),
            framerate,
            live,
            tx,
            rx,
            shared: Arc::new(Shared {
                name: name.to_string(),
                stream: AtomicU32::new(0),
                seq: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                turn: Mutex::new(()),
            }),
        }
    }

    /// A handle that pushes into this source.
    pub fn handle(&self) -> AppSource {
        AppSource {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl Element for AppSourceSettings {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::source(Box::new(AppReceiver {
            rx: self.rx,
            shared: self.shared,
        })))
    }
    fn is_live(&self) -> bool {
        self.live
    }
    fn frame_interval(&self) -> Option<Duration> {
        Some(Duration::from_secs_f64(1.0 / self.framerate))
    }
    fn describe_source(&self) -> Option<String> {
        Some(format!("app {}", self.name))
    }
    fn set_stream(&mut self, stream: u32) {
        self.shared.stream.store(stream, Ordering::SeqCst);
    }
}

/// The pipeline's end of an `app` source.
struct AppReceiver {
    rx: Receiver<Msg>,
    shared: Arc<Shared>,
}

impl FrameSource for AppReceiver {
    fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        loop {
            if self.shared.stopped.load(Ordering::SeqCst) {
                // Interrupted (a stop, the stream removed): a push under way finishes first, and
                // a frame a push handed over still enters, so that every push that succeeded is
                // counted.
                let _turn = self.shared.turn.lock().unwrap_or_else(|e| e.into_inner());
                return Ok(match self.rx.try_recv() {
                    Ok(Msg::Frame(frame)) => Some(*frame),
                    _ => None,
                });
            }
            match self.rx.recv_timeout(POLL) {
                // Its budget started when it was pushed.
                Ok(Msg::Frame(frame)) => return Ok(Some(*frame)),
                Ok(Msg::Close) => return Ok(None),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }

    fn stop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }

    fn interrupter(&self) -> Box<dyn Fn() + Send + Sync> {
        let shared = self.shared.clone();
        Box::new(move || shared.stopped.store(true, Ordering::SeqCst))
    }
}

impl Drop for AppReceiver {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }
}
