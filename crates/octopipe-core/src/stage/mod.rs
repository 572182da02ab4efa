//! Stages: what each kind of stage declares about itself, and the registry that holds them.
//!
//! A stage kind lives in its own module and declares itself once, as a [`StageDecl`]: its name,
//! its [`Role`] in the pipeline, its properties ([`PropSpec`]: type, default, range, doc) and a
//! constructor that turns checked properties into an [`Element`] (its validated settings). That
//! one declaration drives parsing and validation of descriptions, `octopipe inspect` and the
//! docs, as a GStreamer element's ParamSpecs do. The [`Registry`] lists the declarations: the
//! built-in ones (`Registry::builtin()`, from the `octopipe` package, which knows the stages:
//! `use octopipe::Builtin;`) plus any an application registers, each with one line (here on an
//! empty registry, as a crate that has only this one can write it):
//!
//! ```
//! # use octopipe_core::stage::*;
//! # use octopipe_core::frame::Frame;
//! # use octopipe_core::Error;
//! /// Counts frames and passes them on.
//! #[derive(Debug)]
//! struct Count;
//!
//! struct Counting(u64);
//!
//! impl Stage<Frame, Frame> for Counting {
//!     fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
//!         self.0 += 1;
//!         out.push(frame);
//!         Ok(())
//!     }
//! }
//!
//! impl Element for Count {
//!     fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
//!         Ok(Running::stage(Box::new(Counting(0))))
//!     }
//! }
//!
//! const COUNT: StageDecl = StageDecl {
//!     name: "count",
//!     role: Role::Filter(Item::FRAMES),
//!     doc: "counts frames",
//!     props: &[],
//!     needs: &[],
//!     provides: &[],
//!     make: |_| Ok(Box::new(Count)),
//! };
//!
//! let mut registry = Registry::empty();
//! registry.register(COUNT);
//! ```
//!
//! At run time every stage runs on its own thread as a [`Stage`]; the runner owns the thread,
//! the channels, the timestamps and the shutdown. What travels between stages is an open set
//! ([`Item`], [`Payload`]): frames and batches, or a payload type of the application's own,
//! which its stages take and give ([`Role::Convert`]) with no change here or in the runner.

pub mod caps;
mod downstream;
#[doc(hidden)]
pub mod edge;
mod inspect;
pub mod limits;
mod pool;
mod port;
mod props;
#[cfg(test)]
mod props_tests;
mod reinfer;
mod running;
pub mod source;
mod threads;

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::budget::Tally;
use crate::files::RunPath;
use crate::Error;

pub use caps::{Caps, PageLocked};
pub use downstream::Downstream;
pub use inspect::INSPECT_WIDTH;
pub use octopipe_props_derive::{PropChoice, Properties};
pub use port::{Item, Payload};
pub use props::{parse_bool, BOOL_SPELLINGS};
#[doc(hidden)]
pub use props::{prop_default, props_concat, props_len, Shown, ShownText};
pub use props::{
    ChoiceError, PropChoice, PropSpec, PropType, PropValue, Properties, Props, NAME_PROP,
};
pub use reinfer::{CropPlan, Reinfer, TrackLabels, REINFER_MAX_RESIZE};
pub use running::Running;
#[doc(hidden)]
pub use running::Wires;
#[doc(hidden)]
pub use threads::{slow_call, spawn_error, wiring, working, Fail, SLOW_CALL};

/// A stage's place in a pipeline. The role fixes what a stage takes and gives ([`Role::input`],
/// [`Role::output`]) and the order stages must come in ([`Role::rank`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Makes frames: decoders, an application's frames.
    Source,
    /// Attaches boxes to frames: annotation replay, a detector.
    Boxes,
    /// Follows boxes from frame to frame.
    Track,
    /// Collects frames' crops into ragged batches.
    Batch,
    /// Makes a batch's tensor: crop + resize + normalize.
    Preprocess,
    /// Runs a model on a batch's tensor.
    Infer,
    /// Writes results out; ends a chain.
    Sink,
    /// Passes its items on (frames, batches or any other [`Payload`]), anywhere they travel
    /// (counters, filters, taps).
    Filter(Item),
    /// Takes one item and gives another, anywhere its input travels: a stage of an
    /// application's own payload ([`Item::of`]), such as embeddings made from frames
    /// (`input: Item::FRAMES`) or consumed into batches for a sink (`output: Item::BATCHES`).
    /// It has no rank: what may come before and after it is what it takes and gives.
    Convert {
        /// What it takes.
        input: Item,
        /// What it gives.
        output: Item,
    },
    /// Not a stage: sets the capacity and policy of the edge it stands on (`queue`).
    Edge,
    /// Not a stage: settings of the GStreamer head before it (`head`: timeouts, reconnects).
    Head,
}

impl Role {
    /// What the stage takes (`None`: nothing, a source).
    pub fn input(self) -> Option<Item> {
        match self {
            Role::Source | Role::Edge | Role::Head => None,
            Role::Boxes | Role::Track | Role::Batch => Some(Item::FRAMES),
            Role::Preprocess | Role::Infer | Role::Sink => Some(Item::BATCHES),
            Role::Filter(item) | Role::Convert { input: item, .. } => Some(item),
        }
    }

    /// What the stage gives.
    pub fn output(self) -> Option<Item> {
        match self {
            Role::Edge | Role::Head => None,
            Role::Source | Role::Boxes | Role::Track => Some(Item::FRAMES),
            Role::Batch | Role::Preprocess | Role::Infer | Role::Sink => Some(Item::BATCHES),
            Role::Filter(item) | Role::Convert { output: item, .. } => Some(item),
        }
    }

    /// Order within a chain: a stage may not follow one of a higher rank. Filters, converters
    /// and edges stand anywhere their items travel.
    pub fn rank(self) -> Option<u8> {
        match self {
            Role::Source => Some(0),
            Role::Boxes => Some(1),
            Role::Track => Some(2),
            Role::Batch => Some(3),
            Role::Preprocess => Some(4),
            Role::Infer => Some(5),
            Role::Sink => Some(6),
            Role::Filter(_) | Role::Convert { .. } | Role::Edge | Role::Head => None,
        }
    }

    /// Lower-case name, as `octopipe inspect` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Boxes => "boxes",
            Role::Track => "track",
            Role::Batch => "batch",
            Role::Preprocess => "preprocess",
            Role::Infer => "infer",
            Role::Sink => "sink",
            Role::Filter(_) => "filter",
            Role::Convert { .. } => "convert",
            Role::Edge => "edge",
            Role::Head => "head",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A stage kind's declaration: everything parsing, validation, `inspect` and the runner need.
#[derive(Clone, Copy)]
pub struct StageDecl {
    /// Name as written in descriptions.
    pub name: &'static str,
    /// Its role.
    pub role: Role,
    /// What it does, in one line.
    pub doc: &'static str,
    /// Its properties (besides `name`, which every stage has).
    pub props: &'static [PropSpec],
    /// Roles that must come before it on its way from the source. A missing batch or preprocess
    /// stage is put in with its defaults; another missing role is an error naming this stage.
    pub needs: &'static [Role],
    /// Roles it does the job of (an application source whose frames bring their own boxes
    /// provides [`Role::Boxes`]).
    pub provides: &'static [Role],
    /// Make the stage's settings from its checked properties. No GStreamer, CUDA or ONNX Runtime
    /// work here: that happens in [`Element::open`].
    pub make: fn(&Props) -> Result<Box<dyn Element>, crate::description::DescribeError>,
}

impl fmt::Debug for StageDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageDecl")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl StageDecl {
    /// The stage's settings from `props` (`key`, `value`, as a description writes them; the
    /// others take their declared defaults), checked as the description builder checks them:
    /// for opening a stage outside a pipeline (a GStreamer element wrapper, a Python object,
    /// a test) with an [`OpenContext::new`].
    ///
    /// ```
    /// # use octopipe_core::stage::*;
    /// # use octopipe_core::frame::Frame;
    /// # use octopipe_core::Error;
    /// # #[derive(Debug)]
    /// # struct Pass;
    /// # impl Stage<Frame, Frame> for Pass {
    /// #     fn process(&mut self, f: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
    /// #         out.push(f);
    /// #         Ok(())
    /// #     }
    /// # }
    /// # impl Element for Pass {
    /// #     fn open(self: Box<Self>, _: &mut OpenContext) -> Result<Running, Error> {
    /// #         Ok(Running::stage(self))
    /// #     }
    /// # }
    /// # const PASS: StageDecl = StageDecl {
    /// #     name: "pass", role: Role::Filter(Item::FRAMES), doc: "", props: &[],
    /// #     needs: &[], provides: &[], make: |_| Ok(Box::new(Pass)),
    /// # };
    /// let mut caps = Caps::default();
    /// let mut ctx = OpenContext::new(&mut caps);
    /// let running = PASS.element(&[])?.open(&mut ctx)?;
    /// let mut stage = running.into_stage::<Frame, Frame>().ok().unwrap();
    /// let mut out = Vec::new();
    /// stage.finish(&mut out)?;
    /// assert!(PASS.element(&[("every", "3")]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn element(
        &self,
        props: &[(&str, &str)],
    ) -> Result<Box<dyn Element>, crate::description::DescribeError> {
        let desc = crate::description::Description::single("<element>", self.name, props);
        let props = Props::new(&desc, &desc.stages[0], self);
        props.check()?;
        (self.make)(&props)
    }
}

/// The stage kinds a description may use.
#[derive(Debug, Clone)]
pub struct Registry {
    decls: Vec<StageDecl>,
}

impl Registry {
    /// No stages at all.
    pub fn empty() -> Self {
        Registry { decls: Vec::new() }
    }

    /// Add a stage kind (replacing one of the same name).
    pub fn register(&mut self, decl: StageDecl) -> &mut Self {
        self.decls.retain(|d| d.name != decl.name);
        self.decls.push(decl);
        self
    }

    /// The stage called `name`.
    pub fn get(&self, name: &str) -> Option<&StageDecl> {
        self.decls.iter().find(|d| d.name == name)
    }

    /// Every declaration, in registration order.
    pub fn decls(&self) -> &[StageDecl] {
        &self.decls
    }

    /// Every stage name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.decls.iter().map(|d| d.name)
    }
}

/// One step of a running pipeline: takes `I`, gives `O`. The runner owns its thread and
/// channels, stamps its outputs with the time and sends them on.
pub trait Stage<I, O>: Send {
    /// Handle one input, pushing any outputs.
    fn process(&mut self, input: I, out: &mut Vec<O>) -> Result<(), Error>;
    /// When [`Stage::timeout`] must run if no input comes first.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// Called at the deadline.
    fn timeout(&mut self, _out: &mut Vec<O>) -> Result<(), Error> {
        Ok(())
    }
    /// Called once at end of stream: push what is still held.
    fn finish(&mut self, _out: &mut Vec<O>) -> Result<(), Error> {
        Ok(())
    }
}

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
    /// ([`limits::MAX_FRAME_PIXELS`]). A stream's memory estimate reads it.
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
    /// [`Stage::finish`] to tell a stream that ended from one that was stopped early.
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
