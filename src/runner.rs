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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use crate::batch::{Assembler, BatchConfig, CropBatch};
use crate::budget::{Budget, Report, DEFAULT_BUDGET};
use crate::classify::{Classifier, ClassifyConfig};
use crate::detect::{DetectConfig, Detector};
use crate::frame::{BufferPool, Frame, Mark};
use crate::preprocess::{self, Backend, PreprocessConfig};
use crate::sink::{JsonlConfig, JsonlSink};
use crate::source::{self, FrameSource, SourceConfig};
use crate::Error;

/// Default capacity of every edge.
pub const DEFAULT_QUEUE: usize = 4;

/// Everything a pipeline needs, as built from a description.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// The source stage.
    pub source: SourceConfig,
    /// The detect stage.
    pub detect: DetectConfig,
    /// The batch stage.
    pub batch: BatchConfig,
    /// The preprocess stage.
    pub preprocess: PreprocessConfig,
    /// The classify stage.
    pub classify: ClassifyConfig,
    /// The sink.
    pub sink: JsonlConfig,
    /// Per-frame budget (default: one frame interval of the source).
    pub budget: Duration,
    /// Capacities of the five edges, source to sink.
    pub queues: [usize; 5],
}

impl PipelineConfig {
    /// A pipeline with default batch and preprocess settings.
    pub fn new(
        source: SourceConfig,
        detect: DetectConfig,
        classify: ClassifyConfig,
        sink: JsonlConfig,
    ) -> Self {
        PipelineConfig {
            budget: DEFAULT_BUDGET,
            source,
            detect,
            batch: BatchConfig::default(),
            preprocess: PreprocessConfig::default(),
            classify,
            sink,
            queues: [DEFAULT_QUEUE; 5],
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

struct DetectStage(Detector);

impl Stage for DetectStage {
    type In = Frame;
    type Out = Frame;
    const MARK: Mark = Mark::Boxes;
    fn process(&mut self, mut frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.0.attach(&mut frame)?;
        out.push(frame);
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

struct PreprocessStage(Box<dyn Backend>);

impl Stage for PreprocessStage {
    type In = CropBatch;
    type Out = CropBatch;
    const MARK: Mark = Mark::Preprocessed;
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.0.run(&mut batch)?;
        batch.release_pixels();
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

struct SinkStage(JsonlSink);

impl Stage for SinkStage {
    type In = CropBatch;
    type Out = CropBatch;
    const MARK: Mark = Mark::Emitted;
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.0.write(&batch)?;
        out.push(batch);
        Ok(())
    }
}

/// Shared by all threads of a run: the first error and the stop flag.
#[derive(Default)]
struct Control {
    stop: AtomicBool,
    error: Mutex<Option<Error>>,
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
    /// Request the stop.
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::SeqCst);
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

/// A built pipeline: every stage opened and checked, no thread started yet.
pub struct Pipeline {
    config: PipelineConfig,
    source: Box<dyn FrameSource>,
    detector: Detector,
    backend: Box<dyn Backend>,
    classifier: Classifier,
    sink: JsonlSink,
    control: Arc<Control>,
}

impl Pipeline {
    /// Open every stage: the model is loaded and checked, the crop size settled, the backend
    /// chosen, the source and sink opened. Nothing runs yet.
    pub fn build(mut config: PipelineConfig) -> Result<Pipeline, Error> {
        let detector = Detector::new(config.detect.clone())?;
        let classifier = Classifier::new(
            config.classify.clone(),
            config.preprocess.layout,
            config.preprocess.size,
        )?;
        config.preprocess.size = Some(classifier.size());
        let backend = preprocess::create_backend(&config.preprocess)?;
        let labels = (0..64).map(|i| classifier.label(i)).collect();
        let sink = JsonlSink::new(&config.sink, labels)?;
        let source = source::open(&config.source, BufferPool::new())?;
        Ok(Pipeline {
            config,
            source,
            detector,
            backend,
            classifier,
            sink,
            control: Arc::new(Control::default()),
        })
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
            config,
            mut source,
            detector,
            backend,
            classifier,
            sink,
            control,
        } = self;
        let backend_name = backend.name();
        let q = config.queues;
        let downstream = Arc::new(AtomicU64::new(0));
        let assembler = Assembler::new(
            config.batch.clone(),
            config.preprocess.out_size(),
            config.budget,
            downstream.clone(),
            config.source.live.then(|| config.source.frame_interval()),
        );
        let mut budget = Budget::new(config.budget);
        let frames_in = Arc::new(AtomicU64::new(0));
        let (tx0, rx0) = bounded::<Frame>(q[0]);
        let (tx1, rx1) = bounded::<Frame>(q[1]);
        let (tx2, rx2) = bounded::<CropBatch>(q[2]);
        let (tx3, rx3) = bounded::<CropBatch>(q[3]);
        let (tx4, rx4) = bounded::<CropBatch>(q[4]);
        let (tx5, rx5) = bounded::<CropBatch>(q[4]);
        thread::scope(|s| {
            let ctl = &control;
            let counted = &frames_in;
            let live = config.source.live;
            let interval = config.source.frame_interval();
            thread::Builder::new()
                .name("octopipe-source".into())
                .spawn_scoped(s, move || {
                    run_source(source.as_mut(), tx0, ctl, counted, live, interval)
                })
                .expect("spawn source thread");
            spawn(s, "octopipe-boxes", DetectStage(detector), rx0, tx1, ctl);
            spawn(s, "octopipe-batch", BatchStage(assembler), rx1, tx2, ctl);
            spawn(
                s,
                "octopipe-preprocess",
                PreprocessStage(backend),
                rx2,
                tx3,
                ctl,
            );
            spawn(
                s,
                "octopipe-classify",
                ClassifyStage(classifier),
                rx3,
                tx4,
                ctl,
            );
            spawn(s, "octopipe-sink", SinkStage(sink), rx4, tx5, ctl);
            for batch in rx5 {
                if let (Some(b), Some(e)) = (
                    batch
                        .frames
                        .first()
                        .and_then(|f| f.times.get(Mark::Batched)),
                    batch
                        .frames
                        .first()
                        .and_then(|f| f.times.get(Mark::Emitted)),
                ) {
                    // Exponential moving average of batch-to-sink time, read by the batch stage.
                    let now = e.saturating_duration_since(b).as_nanos() as u64;
                    let old = downstream.load(Ordering::Relaxed);
                    let new = if old == 0 { now } else { (old * 7 + now) / 8 };
                    downstream.store(new, Ordering::Relaxed);
                }
                for f in &batch.frames {
                    budget.record(f);
                }
            }
        });
        budget.add_in(frames_in.load(Ordering::SeqCst));
        let error = control.error.lock().ok().and_then(|mut e| e.take());
        Outcome {
            report: budget.finish(),
            error,
            backend: backend_name,
        }
    }
}

/// The source thread: pull frames, pace them in live mode, send them on (blocking: backpressure).
fn run_source(
    source: &mut dyn FrameSource,
    tx: Sender<Frame>,
    ctl: &Control,
    frames_in: &AtomicU64,
    live: bool,
    interval: Duration,
) {
    // The live clock starts with the first frame: frame k is due at start + pts_k.
    let mut start: Option<(Instant, Duration)> = None;
    let mut n: u32 = 0;
    while !ctl.stop.load(Ordering::SeqCst) {
        match source.next_frame() {
            Ok(Some(mut frame)) => {
                if live {
                    // Release each frame at its presentation time; its budget starts then.
                    let pts = frame.pts.unwrap_or(interval * n);
                    let (t0, pts0) = *start.get_or_insert((Instant::now(), pts));
                    let due = t0 + pts.saturating_sub(pts0);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        thread::sleep(wait);
                    }
                    frame.times.arrival = due;
                    frame.times.mark(Mark::Decoded, Instant::now().max(due));
                }
                frames_in.fetch_add(1, Ordering::SeqCst);
                n += 1;
                if tx.send(frame).is_err() {
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
    rx: Receiver<S::In>,
    tx: Sender<S::Out>,
    ctl: &'e Control,
) {
    let body = move || {
        let mut out = Vec::new();
        let result = (|| -> Result<(), Error> {
            loop {
                let next = match stage.deadline() {
                    Some(d) => rx.recv_deadline(d),
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                };
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

/// Stamp and send `out`'s items; false when downstream is gone.
fn send_all<T: Stamp>(out: &mut Vec<T>, tx: &Sender<T>, mark: Mark) -> bool {
    let now = Instant::now();
    for mut item in out.drain(..) {
        item.stamp(mark, now);
        if tx.send(item).is_err() {
            return false;
        }
    }
    true
}
