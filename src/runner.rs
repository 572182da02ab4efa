//! The runner: one thread per stage, bounded channels between them, timestamps and shutdown.
//!
//! ```text
//! source --q0--> boxes --q1--> batch --q2--> preprocess --q3--> classify --q4--> sink --> report
//! ```
//!
//! Stage code implements [`Stage`] and never touches a channel: the runner receives, calls
//! [`Stage::process`], stamps the outputs with the stage's [`Mark`] and sends them on. Every
//! edge is a bounded channel (capacity per edge, default [`DEFAULT_QUEUE`]), so a slow stage
//! makes the source wait (backpressure): file input never drops a frame. When a stage fails it
//! returns, which drops its channel ends: upstream stages see their sends fail and stop,
//! downstream stages drain what they already have and finish, so no stage blocks forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};

use crate::batch::{Assembler, BatchConfig, CropBatch, Downstream, AREA_INPUT_PER_BLOCK};
use crate::budget::{Budget, Report, Tally};
use crate::classify::{Classifier, ClassifyConfig};
use crate::detect::{DetectConfig, Detector};
use crate::frame::{BufferPool, Frame, Mark};
use crate::preprocess::{self, Backend, Interpolation, PreprocessConfig};
use crate::sink::{JsonlConfig, JsonlSink, Object};
use crate::source::{self, FrameSource, SourceConfig};
use crate::Error;

/// Default capacity of every edge of a file pipeline.
pub const DEFAULT_QUEUE: usize = 4;

/// Default capacity of the edges of a live pipeline: a live frame must not wait behind others.
pub const DEFAULT_LIVE_QUEUE: usize = 1;

/// What an edge does when it is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EdgePolicy {
    /// The upstream stage waits (file input: nothing is lost).
    #[default]
    Block,
    /// The oldest item on the edge is dropped, and its frames counted (live input: the freshest
    /// frames go on, latency cannot pile up).
    DropOldest,
}

/// One edge between two stages: its capacity and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Items it holds before the policy applies.
    pub size: usize,
    /// What happens when it is full.
    pub policy: EdgePolicy,
}

impl Queue {
    /// The default edge of a file pipeline: 4 items, block.
    pub const FILE: Queue = Queue {
        size: DEFAULT_QUEUE,
        policy: EdgePolicy::Block,
    };
    /// The default edge of a live pipeline: 1 item, drop the oldest.
    pub const LIVE: Queue = Queue {
        size: DEFAULT_LIVE_QUEUE,
        policy: EdgePolicy::DropOldest,
    };
}

/// One input stream: a source and its boxes.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchConfig {
    /// The source stage (its `stream` is the branch's index).
    pub source: SourceConfig,
    /// The detect stage.
    pub detect: DetectConfig,
    /// The edges source -> boxes and boxes -> batch.
    pub queues: [Queue; 2],
}

/// Everything a pipeline needs, as built from a description.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// The input streams, all feeding the one batch stage.
    pub branches: Vec<BranchConfig>,
    /// The batch stage.
    pub batch: BatchConfig,
    /// The preprocess stage.
    pub preprocess: PreprocessConfig,
    /// The classify stage.
    pub classify: ClassifyConfig,
    /// The JSONL sink (`None` when results are only read in code, see [`Pipeline::results`]).
    pub sink: Option<JsonlConfig>,
    /// Per-frame budget (default: the shortest frame interval of the sources).
    pub budget: Duration,
    /// The edges batch -> preprocess -> classify -> sink.
    pub queues: [Queue; 3],
}

impl PipelineConfig {
    /// A one-stream pipeline with default batch and preprocess settings.
    pub fn new(
        source: SourceConfig,
        detect: DetectConfig,
        classify: ClassifyConfig,
        sink: Option<JsonlConfig>,
    ) -> Self {
        PipelineConfig {
            budget: source.frame_interval(),
            branches: vec![BranchConfig {
                source,
                detect,
                queues: [Queue::FILE; 2],
            }],
            batch: BatchConfig::default(),
            preprocess: PreprocessConfig::default(),
            classify,
            sink,
            queues: [Queue::FILE; 3],
        }
    }
}

/// Something a stage emits that carries frame timestamps.
pub trait Stamp {
    /// Record that every frame in it passed `mark` at `at`.
    fn stamp(&mut self, mark: Mark, at: Instant);
}

impl Stamp for Frame {
    fn stamp(&mut self, mark: Mark, at: Instant) {
        self.times.mark(mark, at);
    }
}

impl Stamp for CropBatch {
    fn stamp(&mut self, mark: Mark, at: Instant) {
        for f in &mut self.frames {
            f.times.mark(mark, at);
        }
    }
}

/// One step of the pipeline. The runner owns its thread and channels.
pub trait Stage: Send + 'static {
    /// What it receives.
    type In: Send + 'static;
    /// What it emits.
    type Out: Stamp + Send + 'static;
    /// The mark stamped on its outputs.
    const MARK: Mark;
    /// Handle one input, pushing any outputs.
    fn process(&mut self, input: Self::In, out: &mut Vec<Self::Out>) -> Result<(), Error>;
    /// When [`Stage::timeout`] must run if no input comes first.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// Called at the deadline.
    fn timeout(&mut self, _out: &mut Vec<Self::Out>) -> Result<(), Error> {
        Ok(())
    }
    /// Called once at end of stream: push what is still held.
    fn finish(&mut self, _out: &mut Vec<Self::Out>) -> Result<(), Error> {
        Ok(())
    }
}

/// The detector, and where its end-of-run notes go.
struct DetectStage(Detector, Tally);

impl Stage for DetectStage {
    type In = Frame;
    type Out = Frame;
    const MARK: Mark = Mark::Boxes;
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.0.attach(&mut frame)?;
        out.push(frame);
        Ok(())
    }
    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Error> {
        let notes = self.0.end_notes();
        self.1
            .with(|t| notes.into_iter().for_each(|n| t.add_line(n)));
        Ok(())
    }
}

struct BatchStage(Assembler);

impl Stage for BatchStage {
    type In = Frame;
    type Out = CropBatch;
    const MARK: Mark = Mark::Batched;
    fn process(&mut self, frame: Frame, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.0.push(frame, out);
        Ok(())
    }
    fn deadline(&self) -> Option<Instant> {
        self.0.deadline()
    }
    fn timeout(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.extend(self.0.flush());
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        out.extend(self.0.flush());
        Ok(())
    }
}

/// The backend, and whether frames keep their pixels after it.
struct PreprocessStage(Box<dyn Backend>, bool);

impl Stage for PreprocessStage {
    type In = CropBatch;
    type Out = CropBatch;
    const MARK: Mark = Mark::Preprocessed;
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.0.run(&mut batch)?;
        if !self.1 {
            batch.release_pixels();
        }
        out.push(batch);
        Ok(())
    }
}

struct ClassifyStage(Classifier);

impl Stage for ClassifyStage {
    type In = CropBatch;
    type Out = CropBatch;
    const MARK: Mark = Mark::Classified;
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.0.classify(&mut batch)?;
        out.push(batch);
        Ok(())
    }
}

struct SinkStage(Option<JsonlSink>);

impl Stage for SinkStage {
    type In = CropBatch;
    type Out = CropBatch;
    const MARK: Mark = Mark::Emitted;
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        if let Some(sink) = &mut self.0 {
            sink.write(&batch)?;
        }
        out.push(batch);
        Ok(())
    }
}

/// Shared by all threads of a run: the first error, the stop flag, and the sources' interrupters.
#[derive(Default)]
struct Control {
    stop: AtomicBool,
    error: Mutex<Option<Error>>,
    interrupters: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl Control {
    fn fail(&self, e: Error) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
    }
}

/// Asks a running pipeline to stop: sources end their stream, the rest drains.
#[derive(Clone)]
pub struct StopHandle(Arc<Control>);

impl StopHandle {
    /// Request the stop: sources end their streams (also when blocked waiting for a frame),
    /// the other stages drain what is in flight.
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::SeqCst);
        if let Ok(interrupters) = self.0.interrupters.lock() {
            interrupters.iter().for_each(|interrupt| interrupt());
        }
    }
}

/// The result of a run: the report, and the first error if a stage failed.
pub struct Outcome {
    /// Budget report (frames, latencies, accounting).
    pub report: Report,
    /// The first error, if any stage failed.
    pub error: Option<Error>,
    /// Name of the preprocess backend that ran.
    pub backend: &'static str,
}

/// Watches a run from the collector thread: every finished batch (frames with their timestamps
/// and detections, the crops' tensor and results; pixels only with [`Pipeline::keep_pixels`]),
/// then the report. Progress lines, metrics, plots and annotated output are observers.
pub trait Observer: Send {
    /// A batch reached the end of the pipeline.
    fn batch(&mut self, _batch: &CropBatch, _budget: Duration) {}
    /// The run is over: add to the report (lines in `report.extra`) or write files.
    fn finish(&mut self, _report: &mut Report) {}
}

/// Sends every classified object to a channel.
struct ResultsObserver {
    tx: Sender<Object>,
    labels: Vec<String>,
}

impl Observer for ResultsObserver {
    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        for object in Object::all(batch, &self.labels) {
            // A reader that went away stops listening; the run goes on.
            if self.tx.send(object).is_err() {
                return;
            }
        }
    }
}

/// A built pipeline: every stage opened and checked, no thread started yet.
pub struct Pipeline {
    observers: Vec<Box<dyn Observer>>,
    keep_pixels: bool,
    config: PipelineConfig,
    sources: Vec<Box<dyn FrameSource>>,
    detectors: Vec<Detector>,
    backend: Box<dyn Backend>,
    classifier: Classifier,
    sink: Option<JsonlSink>,
    labels: Vec<String>,
    control: Arc<Control>,
}

impl Pipeline {
    /// Open every stage: the model is loaded and checked, the crop size settled, the backend
    /// chosen, the sources and sink opened. Nothing runs yet.
    pub fn build(mut config: PipelineConfig) -> Result<Pipeline, Error> {
        let detectors = config
            .branches
            .iter()
            .map(|b| Detector::new(b.detect.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let classifier = Classifier::new(
            config.classify.clone(),
            config.preprocess.layout,
            config.preprocess.size,
        )?;
        config.preprocess.size = Some(classifier.size());
        let backend = preprocess::create_backend(&config.preprocess)?;
        let labels: Vec<String> = (0..64).map(|i| classifier.label(i)).collect();
        let sink = config
            .sink
            .as_ref()
            .map(|s| JsonlSink::new(s, labels.clone()))
            .transpose()?;
        let sources = config
            .branches
            .iter()
            .map(|b| source::open(&b.source, BufferPool::new()))
            .collect::<Result<Vec<_>, _>>()?;
        let control = Arc::new(Control::default());
        if let Ok(mut i) = control.interrupters.lock() {
            i.extend(sources.iter().map(|s| s.interrupter()));
        }
        Ok(Pipeline {
            observers: Vec::new(),
            keep_pixels: false,
            config,
            sources,
            detectors,
            backend,
            classifier,
            sink,
            labels,
            control,
        })
    }

    /// A channel of every classified object, in pipeline order (each stream's frames in order).
    /// The channel holds `capacity` objects; a reader that falls behind holds the pipeline back.
    pub fn results(&mut self, capacity: usize) -> Receiver<Object> {
        let (tx, rx) = bounded(capacity.max(1));
        self.observe(Box::new(ResultsObserver {
            tx,
            labels: self.labels.clone(),
        }));
        rx
    }

    /// Replace the preprocess backend chosen from the settings with `backend` (your own
    /// preprocessing, or a test double). It must fill `batch.tensor` as [`Backend::run`] says.
    pub fn set_backend(&mut self, backend: Box<dyn Backend>) {
        self.backend = backend;
    }

    /// Add an observer of finished batches and of the report.
    pub fn observe(&mut self, observer: Box<dyn Observer>) {
        self.observers.push(observer);
    }

    /// Keep frames' pixels until the end of the pipeline (for observers that draw on frames);
    /// by default they go back to their pool right after preprocessing.
    pub fn keep_pixels(&mut self, keep: bool) {
        self.keep_pixels = keep;
    }

    /// A handle that stops the run from another thread (e.g. on Ctrl-C).
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.control.clone())
    }

    /// The settings in force (the crop size is settled by now).
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// Run to end of stream (or the first error, or a stop request) and report.
    pub fn run(self) -> Outcome {
        let Pipeline {
            mut observers,
            keep_pixels,
            config,
            sources,
            detectors,
            backend,
            classifier,
            sink,
            control,
            ..
        } = self;
        let backend_name = backend.name();
        let tally = Tally::new(Budget::new(config.budget));
        for b in &config.branches {
            tally.with(|t| t.name_stream(b.source.stream, &b.source.describe()));
        }
        let downstream = Arc::new(Downstream::new(config.budget * 2));
        let live = config.branches.iter().any(|b| b.source.live);
        let mut batch_config = config.batch.clone();
        if config.preprocess.interpolation == Interpolation::Area {
            batch_config
                .input_per_block
                .get_or_insert(AREA_INPUT_PER_BLOCK);
        }
        let assembler = Assembler::new(
            batch_config,
            config.preprocess.out_size(),
            config.budget,
            downstream.clone(),
            live.then(|| {
                config
                    .branches
                    .iter()
                    .map(|b| b.source.frame_interval())
                    .min()
            })
            .flatten(),
            tally.clone(),
        );
        let q = config.queues;
        let (tx2, rx2) = Edge::<CropBatch>::new(q[0], "batch -> preprocess", &tally);
        let (tx3, rx3) = Edge::<CropBatch>::new(q[1], "preprocess -> classify", &tally);
        let (tx4, rx4) = Edge::<CropBatch>::new(q[2], "classify -> sink", &tally);
        let (tx5, rx5) = Edge::<CropBatch>::new(Queue::FILE, "sink -> report", &tally);
        thread::scope(|s| {
            let ctl = &control;
            let mut batch_inputs = Vec::new();
            for ((branch, mut source), detector) in
                config.branches.iter().zip(sources).zip(detectors)
            {
                let (tx0, rx0) = Edge::<Frame>::new(branch.queues[0], "source -> boxes", &tally);
                let edge = SourceEdge {
                    tx: tx0,
                    tally: tally.clone(),
                    paced: branch.source.paced(),
                    interval: branch.source.frame_interval(),
                };
                let name = format!("octopipe-source-{}", branch.source.stream);
                thread::Builder::new()
                    .name(name)
                    .spawn_scoped(s, move || run_source(source.as_mut(), edge, ctl))
                    .expect("spawn source thread");
                // Each branch has its own edge into the batch stage, which serves them in turn.
                let (txb, rxb) = Edge::<Frame>::new(branch.queues[1], "boxes -> batch", &tally);
                batch_inputs.push(rxb);
                spawn(
                    s,
                    "octopipe-boxes",
                    DetectStage(detector, tally.clone()),
                    Inbox::new(vec![rx0]),
                    txb,
                    ctl,
                );
            }
            spawn(
                s,
                "octopipe-batch",
                BatchStage(assembler),
                Inbox::new(batch_inputs),
                tx2,
                ctl,
            );
            spawn(
                s,
                "octopipe-preprocess",
                PreprocessStage(backend, keep_pixels),
                Inbox::new(vec![rx2]),
                tx3,
                ctl,
            );
            spawn(
                s,
                "octopipe-classify",
                ClassifyStage(classifier),
                Inbox::new(vec![rx3]),
                tx4,
                ctl,
            );
            spawn(
                s,
                "octopipe-sink",
                SinkStage(sink),
                Inbox::new(vec![rx4]),
                tx5,
                ctl,
            );
            for batch in rx5 {
                if let Some(f) = batch.frames.first() {
                    if let (Some(b), Some(e)) =
                        (f.times.get(Mark::Batched), f.times.get(Mark::Emitted))
                    {
                        downstream.observe(e.saturating_duration_since(b), batch.crops.len());
                    }
                }
                tally.with(|t| batch.frames.iter().for_each(|f| t.record(f)));
                for o in &mut observers {
                    o.batch(&batch, config.budget);
                }
            }
        });
        let error = control.error.lock().ok().and_then(|mut e| e.take());
        let mut report = tally
            .with(|t| t.finish())
            .unwrap_or_else(|| Budget::new(config.budget).finish());
        for o in &mut observers {
            o.finish(&mut report);
        }
        Outcome {
            report,
            error,
            backend: backend_name,
        }
    }
}

/// Something that travels on an edge and can be dropped there: its frames are counted.
trait Counted {
    /// Count the frames (and their boxes) of a dropped item.
    fn count_drop(&self, tally: &Tally, reason: &str);
}

impl Counted for Frame {
    fn count_drop(&self, tally: &Tally, reason: &str) {
        tally.with(|t| t.drop_frame(self.stream, reason, self.detections.len() as u64));
    }
}

impl Counted for CropBatch {
    fn count_drop(&self, tally: &Tally, reason: &str) {
        for f in &self.frames {
            f.count_drop(tally, reason);
        }
    }
}

/// The sending end of an edge, with its policy.
struct Edge<T> {
    tx: Sender<T>,
    /// Drop-oldest edges only: the receiving end, to take out the oldest item when full.
    oldest: Option<Receiver<T>>,
    reason: Arc<str>,
    tally: Tally,
}

impl<T> Clone for Edge<T> {
    fn clone(&self) -> Self {
        Edge {
            tx: self.tx.clone(),
            oldest: self.oldest.clone(),
            reason: self.reason.clone(),
            tally: self.tally.clone(),
        }
    }
}

impl<T: Counted> Edge<T> {
    /// A bounded edge called `name` (e.g. `batch -> preprocess`) and its receiving end.
    fn new(queue: Queue, name: &str, tally: &Tally) -> (Edge<T>, Receiver<T>) {
        let (tx, rx) = bounded(queue.size.max(1));
        let oldest = (queue.policy == EdgePolicy::DropOldest).then(|| rx.clone());
        let edge = Edge {
            tx,
            oldest,
            reason: format!("live: oldest dropped at {name}").into(),
            tally: tally.clone(),
        };
        (edge, rx)
    }

    /// Send by the edge's policy; false when the receiving stage is gone.
    fn send(&self, mut item: T) -> bool {
        loop {
            match self.tx.try_send(item) {
                Ok(()) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => match &self.oldest {
                    None => return self.tx.send(back).is_ok(),
                    Some(rx) => {
                        if let Ok(old) = rx.try_recv() {
                            old.count_drop(&self.tally, &self.reason);
                        }
                        item = back;
                    }
                },
            }
        }
    }
}

/// The source end of a branch.
struct SourceEdge {
    tx: Edge<Frame>,
    tally: Tally,
    /// Release frames at their presentation time (files played as a live stream).
    paced: bool,
    interval: Duration,
}

/// The source thread: pull frames, pace them in live mode, send them on. File input blocks when
/// the edge is full (backpressure, no drops); live input never waits: the oldest queued frame is
/// dropped (and counted) to make room.
fn run_source(source: &mut dyn FrameSource, edge: SourceEdge, ctl: &Control) {
    let _span =
        tracing::info_span!("stage", name = thread::current().name().unwrap_or("?")).entered();
    // The live clock starts with the first frame: frame k is due at start + pts_k.
    let mut start: Option<(Instant, Duration)> = None;
    let mut n: u32 = 0;
    while !ctl.stop.load(Ordering::SeqCst) {
        match source.next_frame() {
            Ok(Some(mut frame)) => {
                if edge.paced {
                    // Release each frame at its presentation time; its budget starts then.
                    let pts = frame.pts.unwrap_or(edge.interval * n);
                    let (t0, pts0) = *start.get_or_insert((Instant::now(), pts));
                    let due = t0 + pts.saturating_sub(pts0);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        thread::sleep(wait);
                    }
                    frame.times.arrival = due;
                    frame.times.mark(Mark::Decoded, Instant::now().max(due));
                }
                edge.tally.with(|t| t.add_in(frame.stream));
                n += 1;
                if !edge.tx.send(frame) {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                ctl.fail(e.into());
                break;
            }
        }
    }
    source.stop();
}

/// Start `stage` on its own thread between `rx` and `tx`.
fn spawn<'s, 'e, S: Stage>(
    scope: &'s thread::Scope<'s, 'e>,
    name: &str,
    mut stage: S,
    mut rx: Inbox<S::In>,
    tx: Edge<S::Out>,
    ctl: &'e Control,
) where
    S::Out: Counted,
{
    let body = move || {
        let _span =
            tracing::info_span!("stage", name = thread::current().name().unwrap_or("?")).entered();
        let mut out = Vec::new();
        let result = (|| -> Result<(), Error> {
            loop {
                let next = rx.recv(stage.deadline());
                match next {
                    Ok(item) => stage.process(item, &mut out)?,
                    Err(RecvTimeoutError::Timeout) => stage.timeout(&mut out)?,
                    Err(RecvTimeoutError::Disconnected) => {
                        stage.finish(&mut out)?;
                        send_all(&mut out, &tx, S::MARK);
                        return Ok(());
                    }
                }
                if !send_all(&mut out, &tx, S::MARK) {
                    return Ok(());
                }
            }
        })();
        if let Err(e) = result {
            ctl.fail(e);
        }
    };
    thread::Builder::new()
        .name(name.into())
        .spawn_scoped(scope, body)
        .expect("spawn stage thread");
}

/// The receiving end of a stage: one edge, or several (the batch stage's branches) served in turn.
struct Inbox<T> {
    edges: Vec<Receiver<T>>,
    /// The edge to try first next time: after an item, the one after it.
    next: usize,
}

impl<T> Inbox<T> {
    fn new(edges: Vec<Receiver<T>>) -> Self {
        Inbox { edges, next: 0 }
    }

    /// The next item, taking edges round-robin so that no branch waits behind another; waits
    /// until `deadline` (if any). `Disconnected` once every edge is closed and empty.
    fn recv(&mut self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        loop {
            let n = self.edges.len();
            if n == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            for k in 0..n {
                let i = (self.next + k) % n;
                match self.edges[i].try_recv() {
                    Ok(item) => {
                        self.next = (i + 1) % n;
                        return Ok(item);
                    }
                    Err(crossbeam_channel::TryRecvError::Empty) => {}
                    Err(crossbeam_channel::TryRecvError::Disconnected) => {
                        self.edges.remove(i);
                        self.next = 0;
                        break;
                    }
                }
            }
            if self.edges.len() < n {
                continue;
            }
            // Nothing ready: wait for whichever edge has something first.
            let mut sel = crossbeam_channel::Select::new();
            for e in &self.edges {
                sel.recv(e);
            }
            let op = match deadline {
                Some(d) => sel
                    .select_deadline(d)
                    .map_err(|_| RecvTimeoutError::Timeout)?,
                None => sel.select(),
            };
            let i = op.index();
            match op.recv(&self.edges[i]) {
                Ok(item) => {
                    self.next = (i + 1) % self.edges.len();
                    return Ok(item);
                }
                Err(_) => {
                    self.edges.remove(i);
                    self.next = 0;
                }
            }
        }
    }
}

/// Stamp and send `out`'s items; false when downstream is gone.
fn send_all<T: Stamp + Counted>(out: &mut Vec<T>, tx: &Edge<T>, mark: Mark) -> bool {
    let now = Instant::now();
    for mut item in out.drain(..) {
        item.stamp(mark, now);
        if !tx.send(item) {
            return false;
        }
    }
    true
}
