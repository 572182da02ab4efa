//! A stage's validated settings, opened into a running stage, and what it gets when it opens.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::caps::Caps;
use super::downstream::Downstream;
use super::running::Running;
use super::source;
use crate::budget::Tally;
use crate::files::RunPath;
use crate::Error;

/// A stage's validated settings, made from its properties when a description is built, and
/// opened (files, models, devices) when the pipeline is built.
pub trait Element: Send + fmt::Debug + Any {
    /// Publish what later stages must know before anything opens, and settle what depends on
    /// earlier stages (called source to sink, a branch's stages in order).
    fn configure(&mut self, _caps: &mut Caps) {}
    /// Open the stage (called sink to source, so that a model's input size is known before the
    /// stages that make its tensors open).
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error>;
    /// Whether it is a live source (its edges then default to drop-oldest).
    fn is_live(&self) -> bool {
        false
    }
    /// A source's nominal time between frames.
    fn frame_interval(&self) -> Option<Duration> {
        None
    }
    /// The most frames the stage may hand on at once (a collector such as a shared `detect`,
    /// whose call covers frames of many streams): a live pipeline's frame edges after it hold
    /// that many and block, instead of keeping only the newest.
    fn burst(&self) -> usize {
        1
    }
    /// A source's most bytes per frame when it knows them before it opens (a test source: its
    /// size and format); `None`: as large as a decoded frame may be
    /// ([`limits::MAX_FRAME_PIXELS`](super::limits::MAX_FRAME_PIXELS)). A stream's memory
    /// estimate reads it.
    fn frame_bytes(&self) -> Option<u64> {
        None
    }
    /// A source's description for the report (its location, fragment or pattern).
    fn describe_source(&self) -> Option<String> {
        None
    }
    /// The stream id a source stamps on its frames (set by the graph builder).
    fn set_stream(&mut self, _stream: u32) {}
    /// The files and folders the stage reads (a model, a labels file, images, annotations): no
    /// output of the run may resolve to one of them, checked before anything opens.
    fn inputs(&self) -> Vec<RunPath> {
        Vec::new()
    }
    /// The files and folders the stage writes (stdout, `-`, is not one: see
    /// [`Element::writes_stdout`]).
    fn outputs(&self) -> Vec<RunPath> {
        Vec::new()
    }
    /// Whether the stage writes to stdout (then nothing else may, such as a JSON report).
    fn writes_stdout(&self) -> bool {
        false
    }
}

impl dyn Element {
    /// The settings as their concrete type, if they are a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }

    /// The settings as their concrete type, to change them before the pipeline is built.
    pub fn downcast_mut<T: Any>(&mut self) -> Option<&mut T> {
        (self as &mut dyn Any).downcast_mut()
    }
}

/// What a stage gets when it opens: the runner's services (the report, the budget, the flags
/// of the run). [`OpenContext::new`] makes one with defaults, for opening a stage with no
/// pipeline around it; a runner sets the fields of its run on it (more may come: it is made
/// only with [`OpenContext::new`]).
#[non_exhaustive]
pub struct OpenContext<'a> {
    /// What stages told each other.
    pub caps: &'a mut Caps,
    /// The run's report: stages add counts and lines.
    pub tally: Tally,
    /// The per-frame budget.
    pub budget: Duration,
    /// For a live pipeline, the shortest time between frames of its sources.
    pub live_interval: Option<Duration>,
    /// Running estimates of the time from batching to the end of the pipeline.
    pub downstream: Arc<Downstream>,
    /// Frames' pixels stay until the end of the pipeline (observers that draw on frames); set by
    /// the application after the stages opened, read while they run.
    pub keep_pixels: Arc<std::sync::atomic::AtomicBool>,
    /// Set once the run is cut short (a stage failed, or a stop was asked for): read in
    /// [`Stage::finish`](super::Stage::finish) to tell a stream that ended from one that was
    /// stopped early.
    pub stopped_early: Arc<std::sync::atomic::AtomicBool>,
    /// Set once a stream of the run failed alone (its source gave up; the run goes on): a
    /// sink that wrote nothing then leaves no empty file, as after a stop.
    pub stream_failed: Arc<std::sync::atomic::AtomicBool>,
    /// Where the run's live-paced sources start their clocks together.
    pub start: Arc<source::StartGate>,
    /// Outputs may replace earlier output (`octopipe run --force`; a sink's own `overwrite`
    /// property says so for that sink alone).
    pub overwrite: bool,
}

impl<'a> OpenContext<'a> {
    /// A context with defaults, for opening a stage outside a pipeline (a GStreamer element
    /// wrapper, a Python object, a test): a report of its own with no rows (its counts and
    /// lines readable through `tally`), the default per-frame budget, no live interval,
    /// nothing stopped or failed, a start gate of its own, and outputs that must not replace
    /// earlier ones. Set a field to change one.
    pub fn new(caps: &'a mut Caps) -> OpenContext<'a> {
        let budget = crate::budget::DEFAULT_BUDGET;
        OpenContext {
            caps,
            tally: Tally::new(crate::budget::Budget::new(budget, Vec::new())),
            budget,
            live_interval: None,
            downstream: Arc::new(Downstream::new(budget * 2)),
            keep_pixels: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            stopped_early: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            stream_failed: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            start: Arc::new(source::StartGate::new()),
            overwrite: false,
        }
    }
}
