//! The pipeline: a [`Graph`] of stages opened, then run with one thread per stage and bounded
//! channels between them.
//!
//! ```text
//! source --> boxes --+
//! source --> boxes --+--> batch --> preprocess --> classify --> sink --> report
//! ```
//!
//! Stage code implements [`Stage`](crate::stage::Stage) and never touches a channel: the runner
//! receives, calls `process`, stamps the outputs with the stage's report row and the time, and
//! sends them on. Every edge is a bounded channel with its [`Queue`] (capacity and policy), so a
//! slow stage makes the source wait (backpressure) or, live, drops the oldest item (counted).
//! When a stage fails it returns, which drops its channel ends: upstream stages see their sends
//! fail and stop, downstream stages drain what they already have and finish, so no stage blocks
//! forever. Nothing here knows what a stage does: only what it takes and gives.

mod admit;
mod collect;
mod handles;
mod memory;
mod paths;
mod streams;
mod threads;
mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::appinfer::AppInfer;
use crate::batch::{CropBatch, Downstream};
use crate::budget::{Budget, Report, Tally};
use crate::frame::{Frame, StageSlot};
use crate::sink::Object;
use crate::source::{AppSource, FrameSource, StartGate};
use crate::stage::{Caps, Item, OpenContext, Role, Running};
use crate::Error;

pub use crate::describe::{
    EdgePolicy, Graph, Node, Queue, QueueSettings, DEFAULT_LIVE_BATCH_QUEUE, DEFAULT_LIVE_QUEUE,
    DEFAULT_QUEUE, QUEUE,
};
pub use crate::error::PipelineError;
pub use crate::files::RunPath;
pub use crate::stage::edge::STREAM_REMOVED;
pub use admit::{AUTO_IDS, REMOVE_DEADLINE, SHOWN_REASON, SHOWN_SOURCE};
pub use memory::DEFAULT_MAX_STREAM_MEMORY;
pub use paths::check as check_paths;
pub use streams::{Added, RemoveMode, StreamInfo, StreamState, Streams};

use collect::{announce, expected_frames, finish, Collector};
use handles::AppHandles;
use wire::{join, spawn, wire, StageThread};

/// What the batch stage takes and gives: frames in, batches out (the batch or tiles stage, whose
/// row the collector's estimates of the time downstream start from, and which streams added
/// while running join).
const BATCHER: (Option<Item>, Item) = (Some(Item::FRAMES), Item::BATCHES);

/// How long a stopped run waits for the work in flight before it gives up on it, by default.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(1);

/// The report's reason for frames still in flight when a stopped run gave up waiting for them.
pub const IN_FLIGHT_AT_STOP: &str = "in flight at stop";

/// How often the runner looks whether the stage threads have ended.
const JOIN_POLL: Duration = Duration::from_millis(10);

/// Shared by all threads of a run: the first error, the stop request, the sources' interrupters
/// and the report.
struct Control {
    /// Set by a stop request or a failure: sources stop producing (shared with the stages, which
    /// read it at the end of their stream: [`OpenContext::stopped_early`]).
    stop: Arc<AtomicBool>,
    /// When a stop was requested ([`StopHandle::stop`]): the work in flight has until this plus
    /// the grace.
    stopped_at: Mutex<Option<Instant>>,
    /// Wakes the collector when a stop is requested.
    wake: (Sender<()>, Receiver<()>),
    error: Mutex<Option<Error>>,
    interrupters: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// Sources that reached their end, torn down when the run is over: tearing down a GPU
    /// decoder frees device memory, which waits for the whole GPU, and stalled the frames of
    /// every other stream for 100-250 ms when 32 NVDEC streams ended together (H100).
    retired: Mutex<Vec<Box<dyn FrameSource>>>,
    tally: Tally,
    /// While the pipeline takes streams ([`Pipeline::streams`]): where a stream added while
    /// running hands the batch stage its edge. Taken (closed) on a stop, a failure or
    /// [`Streams::close`]: the batch stage then ends with the streams it has.
    joins: Mutex<Option<Sender<Receiver<Frame>>>>,
    /// The first error that ended a stream alone (its source failed after its retries): the
    /// run's error at the end, when nothing else failed.
    stream_error: Mutex<Option<Error>>,
    /// Set when a stream failed alone ([`OpenContext::stream_failed`]).
    failed: Arc<AtomicBool>,
}

/// A stream's fate, shared by its threads and the book of streams: whether it ended, and why it
/// failed when it did.
#[derive(Clone, Default)]
pub(crate) struct Fate {
    ended: Arc<AtomicBool>,
    failure: Arc<Mutex<Option<String>>>,
    /// Stops the stream's source, once it is open: a stream whose own stage failed ends (a live
    /// source would otherwise go on into an edge that drops what it holds).
    interrupt: Arc<Mutex<Option<Interrupt>>>,
}

/// What stops a source, shared.
type Interrupt = Arc<dyn Fn() + Send + Sync>;

impl Fate {
    /// Why the stream failed, if it did.
    fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

impl Control {
    fn new(tally: Tally) -> Self {
        Control {
            stop: Arc::new(AtomicBool::new(false)),
            stopped_at: Mutex::new(None),
            wake: bounded(1),
            error: Mutex::new(None),
            interrupters: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
            tally,
            joins: Mutex::new(None),
            stream_error: Mutex::new(None),
            failed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Stream `stream` failed with `e` (its source after its retries, or a stage of its own):
    /// it ends alone, with its reason in its fate, the log and the report; the run and the other
    /// streams go on, and the run's exit says so at the end.
    fn stream_failed(&self, stream: u32, fate: &Fate, e: Error) {
        // What is kept of a failed stream is bounded: its reason is cut (a URI of 60 KiB
        // would otherwise stay in its record and the report's lines for the whole run).
        let reason = admit::cut(&e.to_string(), admit::SHOWN_REASON);
        // While the pipeline takes streams it runs on: say so as it happens. Else the report
        // and the run's error at the end say it (once).
        if self.joins.lock().is_ok_and(|j| j.is_some()) {
            tracing::error!("stream {stream} failed: {reason}");
        } else {
            tracing::info!("stream {stream} failed: {reason}");
        }
        self.tally.with(|t| {
            t.source_event(stream, "failed");
            t.add_line(format!("stream {stream} failed: {reason}"));
        });
        if let Ok(mut f) = fate.failure.lock() {
            f.get_or_insert(reason);
        }
        let interrupt = fate.interrupt.lock().ok().and_then(|i| i.clone());
        if let Some(interrupt) = interrupt {
            interrupt();
        }
        if let Ok(mut first) = self.stream_error.lock() {
            first.get_or_insert(e);
        }
        self.failed.store(true, Ordering::SeqCst);
    }

    fn fail(&self, e: Error) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        self.stop.store(true, Ordering::SeqCst);
        self.close_joins();
        // Sources blocked waiting for their next frame (an `app` source whose application
        // still holds it open, a live stream) end too, so that a failed run ends.
        if let Ok(interrupters) = self.interrupters.lock() {
            interrupters.iter().for_each(|interrupt| interrupt());
        }
    }

    /// Take no more streams.
    fn close_joins(&self) {
        if let Ok(mut joins) = self.joins.lock() {
            joins.take();
        }
    }

    /// After a stop request: when the runner stops waiting for the work in flight.
    fn stop_deadline(&self, grace: Duration) -> Option<Instant> {
        self.stopped_at
            .lock()
            .ok()
            .and_then(|at| *at)
            .map(|at| at + grace)
    }
}

/// Asks a running pipeline to stop: sources end their stream, the rest drains for a grace time
/// ([`Pipeline::set_stop_grace`]), then the run ends whatever is still in flight.
#[derive(Clone)]
pub struct StopHandle(Arc<Control>);

impl StopHandle {
    /// Request the stop: sources end their streams (also when blocked waiting for a frame), the
    /// other stages drain what is in flight. [`Pipeline::run`] returns at most the stop grace
    /// later: frames still in flight then are counted as dropped ([`IN_FLIGHT_AT_STOP`]) and
    /// stages still busy are left to end on their own threads.
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::SeqCst);
        self.0.close_joins();
        if let Ok(mut at) = self.0.stopped_at.lock() {
            at.get_or_insert_with(Instant::now);
        }
        let _ = self.0.wake.0.try_send(());
        if let Ok(interrupters) = self.0.interrupters.lock() {
            interrupters.iter().for_each(|interrupt| interrupt());
        }
    }

    /// The report so far, with every frame not yet through counted as [`IN_FLIGHT_AT_STOP`]:
    /// for a program that must exit now (a second Ctrl-C) and still say what happened.
    pub fn report(&self) -> Report {
        let mut budget = self
            .0
            .tally
            .with(|b| b.clone())
            .unwrap_or_else(|| Budget::new(crate::budget::DEFAULT_BUDGET, Vec::new()));
        budget.drop_in_flight(IN_FLIGHT_AT_STOP);
        budget.finish()
    }
}

/// The result of a run: the report, and the first error if a stage failed.
pub struct Outcome {
    /// Budget report (frames, latencies, accounting).
    pub report: Report,
    /// The first error, if any stage failed.
    pub error: Option<Error>,
    /// Stages still busy when a stopped run gave up waiting for them (their threads end on
    /// their own); empty when every stage ended.
    pub abandoned: Vec<String>,
}

/// Watches a run from the collector thread: every finished batch (frames with their timestamps
/// and detections and classifications, the crops' tensor; pixels only with
/// [`Pipeline::keep_pixels`]), then the report. Progress lines, metrics, plots and annotated
/// output are observers.
pub trait Observer: Send {
    /// The run starts; `stages` are the report rows a frame's marks refer to (by index).
    fn start(&mut self, _stages: &[String]) {}
    /// The sources will give `total` frames in all. Called once, as soon as every source knows
    /// its length (image sequences and test sources when they open, a media file declaring its
    /// duration once its first frame decoded); never when one cannot tell (a live or an
    /// application stream).
    fn expected_frames(&mut self, _total: u64) {}
    /// A batch reached the end of the pipeline.
    fn batch(&mut self, _batch: &CropBatch, _budget: Duration) {}
    /// The run is over: add to the report (lines in `report.extra`) or write files.
    fn finish(&mut self, _report: &mut Report) {}
}

/// Sends every classified object to a channel.
struct ResultsObserver(Sender<Object>);

impl Observer for ResultsObserver {
    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        for object in Object::all(batch) {
            // A reader that went away stops listening; the run goes on.
            if self.0.send(object).is_err() {
                return;
            }
        }
    }
}

/// The frames each source expects to give, as they learn it (`UNKNOWN` until then).
struct Expected(Vec<AtomicU64>);

impl Expected {
    const UNKNOWN: u64 = u64::MAX;

    /// All sources' frames, once every source knows its own.
    fn total(&self) -> Option<u64> {
        self.0.iter().try_fold(0u64, |sum, n| {
            let n = n.load(Ordering::Relaxed);
            (n != Self::UNKNOWN).then(|| sum.saturating_add(n))
        })
    }

    /// Ask source `i` for its length, until it tells.
    fn learn(&self, i: usize, source: &dyn FrameSource) {
        let Some(slot) = self.0.get(i) else { return };
        if slot.load(Ordering::Relaxed) == Self::UNKNOWN {
            if let Some(n) = source.expected_frames() {
                slot.store(n.min(Self::UNKNOWN - 1), Ordering::Relaxed);
            }
        }
    }
}

/// One opened node, waiting for its thread.
struct Ready {
    kind: &'static str,
    running: Running,
    output: Option<usize>,
    queue: Queue,
    /// Its report row, and the row's index.
    row: String,
    slot: StageSlot,
    /// `source` for sources, else the kind: how edges are named in drop reasons.
    label: &'static str,
    /// For a source: its place in the run's [`Expected`] frames.
    source: Option<usize>,
    /// For a source: what happens at its end.
    end: SourceEnd,
    /// The stream the node belongs to alone (a source; a stage of a stream added while
    /// running): its failure ends that stream, not the run.
    stream: Option<(u32, Fate)>,
}

/// A source's end: where the source goes.
struct SourceEnd {
    /// Kept until the run is over (see `Control::retired`); a stream added while running is torn
    /// down as it ends instead: a run that takes streams for good cannot keep every ended
    /// stream's decoder.
    retire: bool,
}

impl Ready {
    /// Open node `n`, whose report row is among `rows`, of `stream` when it belongs to one alone.
    fn open(
        n: Node,
        rows: &[String],
        ctx: &mut OpenContext,
        stream: Option<(u32, Fate)>,
    ) -> Result<Ready, Error> {
        let slot = rows.iter().position(|r| *r == n.row).unwrap_or(0) as StageSlot;
        Ok(Ready {
            kind: n.kind,
            running: n.element.open(ctx)?,
            output: n.output,
            queue: n.queue,
            row: n.row,
            slot,
            label: if n.role == Role::Source {
                "source"
            } else {
                n.kind
            },
            source: None,
            end: SourceEnd { retire: true },
            stream,
        })
    }
}

/// A built pipeline: every stage opened and checked, no thread started yet.
pub struct Pipeline {
    observers: Vec<Box<dyn Observer>>,
    keep_pixels: Arc<AtomicBool>,
    nodes: Vec<Ready>,
    rows: Vec<String>,
    budget: Duration,
    frame_interval: Option<Duration>,
    live: bool,
    caps: Caps,
    apps: AppHandles,
    batches: Option<Sender<CropBatch>>,
    tally: Tally,
    control: Arc<Control>,
    expected: Arc<Expected>,
    stop_grace: Duration,
    downstream: Arc<Downstream>,
    /// The streams of the description: id, source, fate.
    sources: Vec<(u32, String, Fate)>,
    /// Once [`Pipeline::streams`] was asked for: the streams added while running, the end of
    /// the channel their edges come on, and the node it goes to.
    streams: Option<(Arc<streams::Book>, Receiver<Receiver<Frame>>, usize)>,
}

impl Pipeline {
    /// Open every stage of `graph`: models are loaded and checked, the crop size settled, the
    /// backends chosen, the sources and sinks opened. Nothing runs yet. First of all, an output
    /// of a stage that resolves to an input of the run (or to another output) is refused
    /// ([`Graph::check_paths`]), so nothing is created or truncated.
    pub fn build(graph: Graph) -> Result<Pipeline, Error> {
        // Before any stage opens (a sink creates its file when it opens).
        graph.check_paths(&[])?;
        let rows = graph.rows();
        let live = graph.is_live();
        let frame_interval = graph.frame_interval();
        let Graph {
            mut nodes,
            budget,
            overwrite,
        } = graph;
        let mut caps = Caps::default();
        for n in &mut nodes {
            if n.role == Role::Source {
                caps.begin_branch();
            }
            n.element.configure(&mut caps);
        }
        let mut report = Budget::new(budget, rows.clone());
        report.set_live(live);
        let tally = Tally::new(report);
        let apps = AppHandles::collect(&nodes);
        let mut sources = Vec::new();
        for (stream, n) in nodes.iter().filter(|n| n.role == Role::Source).enumerate() {
            let stream = stream as u32;
            let name = n.element.describe_source().unwrap_or_default();
            tally.with(|t| t.name_stream(stream, &name));
            sources.push((stream, name, Fate::default()));
        }
        let keep_pixels = Arc::new(AtomicBool::new(false));
        let control = Arc::new(Control::new(tally.clone()));
        // The batch stage predicts from it; the collector feeds it.
        let downstream = Arc::new(Downstream::new(budget * 2));
        let mut ctx = OpenContext {
            caps: &mut caps,
            tally: tally.clone(),
            budget,
            live_interval: frame_interval.filter(|_| live),
            downstream: downstream.clone(),
            keep_pixels: keep_pixels.clone(),
            stopped_early: control.stop.clone(),
            stream_failed: control.failed.clone(),
            start: Arc::new(StartGate::new()),
            overwrite,
        };
        // Sink to source: a model's input size is known before the stages that make its tensors.
        let mut ready = Vec::with_capacity(nodes.len());
        let mut ends = sources.iter().rev().map(|s| (s.0, s.2.clone()));
        for n in nodes.into_iter().rev() {
            let stream = match n.role {
                Role::Source => ends.next(),
                _ => None,
            };
            ready.push(Ready::open(n, &rows, &mut ctx, stream)?);
        }
        ready.reverse();
        let expected = expected_frames(&mut ready);
        if let Ok(mut i) = control.interrupters.lock() {
            for n in &ready {
                if let Some(s) = n.running.as_source() {
                    i.push(s.interrupter());
                }
            }
        }
        Ok(Pipeline {
            observers: Vec::new(),
            keep_pixels,
            nodes: ready,
            rows,
            budget,
            frame_interval,
            live,
            caps,
            apps,
            batches: None,
            tally,
            control,
            expected,
            stop_grace: DEFAULT_STOP_GRACE,
            downstream,
            sources,
            streams: None,
        })
    }

    /// Parse a description (as `octopipe run` takes it; `${name}` from `vars`), check it against
    /// the built-in stages and build it.
    pub fn from_description(
        text: &str,
        vars: &std::collections::HashMap<String, String>,
    ) -> Result<Pipeline, Error> {
        let desc = crate::describe::parse("<description>", text, vars)?;
        Pipeline::build(crate::describe::build(&desc)?)
    }

    /// A channel of every classified object, in pipeline order (each stream's frames in order).
    /// The channel holds `capacity` objects; a reader that falls behind holds the pipeline back.
    pub fn results(&mut self, capacity: usize) -> Receiver<Object> {
        let (tx, rx) = bounded(capacity.max(1));
        self.observe(Box::new(ResultsObserver(tx)));
        rx
    }

    /// A channel of every finished batch, after the observers saw it: its frames (boxes,
    /// classifications, timestamps), crops and the preprocessed tensor, for applications that run
    /// their own model. The channel holds `capacity` batches; a reader that falls behind holds the
    /// pipeline back. Asking again replaces the earlier channel.
    pub fn batches(&mut self, capacity: usize) -> Receiver<CropBatch> {
        let (tx, rx) = bounded(capacity.max(1));
        self.batches = Some(tx);
        rx
    }

    /// The handle that feeds the application source named `name` (`app name=NAME`), or the
    /// first application source when `name` is `None`.
    pub fn app_source(&self, name: Option<&str>) -> Option<AppSource> {
        self.apps.source(name)
    }

    /// The handles of every application source, in stream order (each says its
    /// [name](AppSource::name) and [stream](AppSource::stream)).
    pub fn app_sources(&self) -> Vec<AppSource> {
        self.apps.sources()
    }

    /// The handle that takes the batches of the `appinfer` stage named `name` (the first one
    /// when `name` is `None`) and sends their labels back.
    pub fn app_infer(&self, name: Option<&str>) -> Option<AppInfer> {
        self.apps.infer(name)
    }

    /// Add an observer of finished batches and of the report.
    pub fn observe(&mut self, observer: Box<dyn Observer>) {
        self.observers.push(observer);
    }

    /// Keep frames' pixels until the end of the pipeline (for observers that draw on frames);
    /// by default they go back to their pool right after preprocessing.
    pub fn keep_pixels(&mut self, keep: bool) {
        self.keep_pixels.store(keep, Ordering::Relaxed);
    }

    /// A handle that stops the run from another thread (e.g. on Ctrl-C).
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.control.clone())
    }

    /// What the stages settled when they opened: the preprocess settings (with the model's
    /// input size) and the classifier's class names.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// The report rows (stage names), in pipeline order.
    pub fn stage_names(&self) -> &[String] {
        &self.rows
    }

    /// How long a stopped run waits for the work in flight ([`DEFAULT_STOP_GRACE`]).
    pub fn set_stop_grace(&mut self, grace: Duration) {
        self.stop_grace = grace;
    }

    /// The per-frame budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The shortest nominal time between frames of the sources.
    pub fn frame_interval(&self) -> Option<Duration> {
        self.frame_interval
    }

    /// Whether a source is live.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The frames the sources will give in all, if each knows its length now (image sequences
    /// and test sources do once open; a media file's duration may only be known once it
    /// decodes: observers hear of it then, [`Observer::expected_frames`]).
    pub fn expected_frames(&self) -> Option<u64> {
        self.expected.total()
    }

    /// Run to end of stream (or the first error, or a stop request) and report.
    ///
    /// After a stop request the run ends within the stop grace whatever is in flight: a stage
    /// blocked in its work cannot be interrupted, so the runner stops waiting for it.
    pub fn run(self) -> Outcome {
        let Pipeline {
            mut observers,
            nodes,
            rows,
            budget,
            batches,
            tally,
            control,
            apps,
            expected,
            stop_grace,
            downstream,
            streams,
            ..
        } = self;
        // The application holds the handles it took: when it drops its last one without closing,
        // the `app` source sees the end of its stream instead of waiting for ever on ours (and an
        // `appinfer` stage passes its batches on unlabelled).
        drop(apps);
        for o in &mut observers {
            o.start(&rows);
        }
        // The wall clock of the report covers the run, not the opening of the stages.
        tally.with(|t| t.start_now());
        let mut announced = false;
        announce(&expected, &mut announced, &mut observers);
        let batch_slot = nodes
            .iter()
            .find(|n| n.running.items() == BATCHER)
            .map(|n| n.slot);
        let (ends, end_rx) = match wire(&nodes, &tally) {
            Ok(w) => w,
            Err(e) => {
                control.fail(e);
                return finish(observers, &tally, budget, &control, Vec::new());
            }
        };
        let (book, mut joins, joined) = match streams {
            Some((book, joins, at)) => (Some(book), Some(joins), Some(at)),
            None => (None, None, None),
        };
        let mut threads = Vec::new();
        for (i, (n, (inputs, output))) in nodes.into_iter().zip(ends).enumerate() {
            // Streams added while running join their stage.
            let joins = joins.take_if(|_| joined == Some(i));
            match spawn(n, inputs, output, joins, &control, &expected) {
                Ok(thread) => threads.push(thread),
                Err(e) => control.fail(e),
            }
        }
        let mut collector = Collector {
            observers,
            batches,
            tally: &tally,
            budget,
            batch_slot,
            downstream,
            expected,
            announced,
        };
        let gave_up = collector.collect(&end_rx, &control, stop_grace);
        // Whatever is still queued for the collector is in flight from here on.
        drop(end_rx);
        control.close_joins();
        if let Some(book) = book {
            threads.extend(book.take_threads());
        }
        let abandoned = join(threads, &control, stop_grace);
        if gave_up || !abandoned.is_empty() {
            tally.with(|t| {
                t.drop_in_flight(IN_FLIGHT_AT_STOP);
                if !abandoned.is_empty() {
                    t.add_line(format!(
                        "stopped: did not wait for {} (still busy {:.1} s after the stop)",
                        abandoned.join(", "),
                        stop_grace.as_secs_f64()
                    ));
                }
            });
        }
        let outcome = finish(collector.observers, &tally, budget, &control, abandoned);
        let retired = control.retired.lock().map(|mut r| std::mem::take(&mut *r));
        for mut source in retired.unwrap_or_default() {
            source.stop();
        }
        outcome
    }
}
