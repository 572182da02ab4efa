//! The application's own model: `appinfer` hands each batch's tensor to the application and waits
//! for its labels, which then travel with the batch to the sinks.
//!
//! ```text
//! app name=cam ! batch ! preprocess size=64x64 ! appinfer labels=person,car ! jsonl location=objects.jsonl
//! ```
//!
//! The application takes the stage's [`AppInfer`] handle from the built pipeline
//! (`Pipeline::app_infer`) and reads [`AppBatch`]es from it: the preprocessed tensor (host or
//! device memory, as the preprocess stage left it: the application's model takes it where it
//! is), a [`Row`] per crop saying which stream, frame and box it is, and a [`Reply`] to send
//! the [`Labels`] back with (class ids, names, or its model's scores, on which the stage does
//! the classifier's softmax and top-k). The labels are written onto the batch's objects, which
//! go on to the sinks as a classifier's would. The stage stands where `classify` would (it is
//! an inference stage); the preprocess stage takes its crop size from its own `size=`.
//!
//! Up to `in-flight` batches (1 by default) are handed out before the stage waits for the oldest
//! one's labels, and batches leave in the order they came, each as soon as its labels are in. A batch whose reply is dropped unsent, or that the
//! stage could not hand out (the application closed the handle or dropped it), goes on without
//! labels, counted in the report. The tensor belongs to the application once handed out: the
//! batch goes on without it.

mod labels;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{
    bounded, Receiver, RecvTimeoutError, SendTimeoutError, Sender, TryRecvError,
};

use crate::classify::ClassLabels;
use octopipe_core::budget::Tally;
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::frame::Classification;
use octopipe_core::stage::{
    Element, OpenContext, Properties, Props, Role, Running, Stage, StageDecl,
};
use octopipe_core::tensor::Tensor;
use octopipe_stages::batch::CropBatch;

use labels::Classes;
pub use labels::{LabelError, Labels, Reply};

/// How often a waiting stage or handle looks again at whether the other side is gone.
const POLL: Duration = Duration::from_millis(50);

/// With batches handed out and no new batch coming, how often the stage looks whether their
/// labels came (to pass them on without waiting for the next batch).
const ANSWER_POLL: Duration = Duration::from_millis(1);

/// The appinfer stage's properties, declared once ([`APPINFER`]).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct AppInferProps {
    /// class names in class-id order: names for class ids and scores, the names labels must be
    /// one of
    #[prop(value = Vec::new())]
    pub labels: Vec<String>,
    /// classes kept per crop when the application gives scores
    #[prop(default = 1, range = 1..=1000)]
    pub top_k: usize,
    /// batches handed out before the stage waits for the oldest one's labels (more: for an
    /// application that runs several at once)
    #[prop(default = 1, range = 1..=64)]
    pub in_flight: usize,
    /// seconds to wait for a batch's labels before the run fails naming the batch (0: no limit)
    #[prop(default = 0, range = 0.0..)]
    pub timeout: f64,
}

/// `appinfer`: the application's model labels each batch.
pub const APPINFER: StageDecl = StageDecl {
    name: "appinfer",
    role: Role::Infer,
    doc: "the application's own model: hands each batch's tensor out (Pipeline::app_infer) and waits for its labels",
    props: AppInferProps::PROPS,
    needs: &[Role::Boxes, Role::Batch, Role::Preprocess],
    provides: &[],
    make: appinfer_config,
};

fn appinfer_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let a = AppInferProps::from_props(p)?;
    Ok(Box::new(AppInferSettings::new(
        p.given("name").unwrap_or("appinfer"),
        a.labels,
        a.top_k,
        a.in_flight,
        (a.timeout > 0.0).then(|| Duration::from_secs_f64(a.timeout)),
    )))
}

/// Errors of the `appinfer` stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppInferError {
    /// The application did not label a batch in time (`timeout`).
    #[error("appinfer '{stage}': batch {batch} got no labels within {waited:.1} s (timeout)")]
    Timeout {
        /// The stage's name.
        stage: String,
        /// The batch's number.
        batch: u64,
        /// How long it waited.
        waited: f64,
    },
}

impl octopipe_core::error::Kind for AppInferError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        match self {
            AppInferError::Timeout { .. } => octopipe_core::error::ErrorKind::Model,
        }
    }
}

octopipe_core::error::stage_error!(AppInferError);

/// Which crop of which frame a row of a handed-out tensor is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Row {
    /// The frame's stream.
    pub stream: u32,
    /// The frame's number in its stream.
    pub frame: u64,
    /// The frame's source (image file name, the pushed frame's name).
    pub source: Arc<str>,
    /// The box's index among the frame's boxes.
    pub box_index: u32,
    /// The box `[x, y, w, h]` in frame pixels (clipped), as cropped.
    pub bbox: [u32; 4],
    /// The first element of the row's values in the tensor.
    pub offset: usize,
    /// The row's output size, `(width, height)`.
    pub size: (u32, u32),
}

/// One batch for the application's model.
#[derive(Debug)]
#[non_exhaustive]
pub struct AppBatch {
    /// The preprocessed crops (host or device memory), one row per crop; the application's
    /// from now on.
    pub tensor: Tensor,
    /// Which crop each row is.
    pub rows: Vec<Row>,
    /// Where the labels go.
    pub reply: Reply,
}

/// Why [`AppInfer::next_timeout`] gave no batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoBatch {
    /// None came within the time given.
    Timeout,
    /// The stage ended: no more batches will come.
    Ended,
}

/// State shared by the handles and the stage.
#[derive(Debug)]
struct Shared {
    name: String,
    /// The application takes no more batches: the stage passes the rest on unlabelled.
    closed: AtomicBool,
}

/// The application's handle on an `appinfer` stage: take batches, send their labels back.
/// Cheap to clone and send to other threads.
#[derive(Clone, Debug)]
pub struct AppInfer {
    rx: Receiver<AppBatch>,
    shared: Arc<Shared>,
    classes: Arc<Classes>,
}

impl AppInfer {
    /// The stage's name (its `name=`, or `appinfer`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The stage's `labels=` (empty when not given).
    pub fn labels(&self) -> Vec<String> {
        self.classes.labels.iter().map(|l| l.to_string()).collect()
    }

    /// The next batch, waiting for it; `None` once the stage ended.
    pub fn next(&self) -> Option<AppBatch> {
        self.rx.recv().ok()
    }

    /// The next batch, waiting at most `wait`.
    pub fn next_timeout(&self, wait: Duration) -> Result<AppBatch, NoBatch> {
        self.rx.recv_timeout(wait).map_err(|e| match e {
            RecvTimeoutError::Timeout => NoBatch::Timeout,
            RecvTimeoutError::Disconnected => NoBatch::Ended,
        })
    }

    /// Take no more batches: the stage passes the batches it has not handed out on without
    /// labels (those handed out still wait for theirs, or for their reply to be dropped).
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        // Batches handed over but not taken: their replies drop, so they go on unlabelled.
        while self.rx.try_recv().is_ok() {}
    }
}

/// The `appinfer` stage's settings; they make the handle the application reads batches from.
#[derive(Debug)]
pub struct AppInferSettings {
    in_flight: usize,
    timeout: Option<Duration>,
    tx: Sender<AppBatch>,
    handle: AppInfer,
}

impl AppInferSettings {
    /// A stage called `name` with class names `labels` (may be empty), keeping `top_k` classes
    /// of scores, handing out up to `in_flight` batches at once and waiting at most `timeout`
    /// for labels.
    pub fn new(
        name: &str,
        labels: Vec<String>,
        top_k: usize,
        in_flight: usize,
        timeout: Option<Duration>,
    ) -> Self {
        let in_flight = in_flight.max(1);
        let (tx, rx) = bounded(in_flight);
        AppInferSettings {
            in_flight,
            timeout,
            tx,
            handle: AppInfer {
                rx,
                shared: Arc::new(Shared {
                    name: name.to_string(),
                    closed: AtomicBool::new(false),
                }),
                classes: Arc::new(Classes {
                    stage: name.to_string(),
                    labels: labels.into_iter().map(Arc::from).collect(),
                    seen: Mutex::new(Vec::new()),
                    top_k: top_k.max(1),
                }),
            },
        }
    }

    /// The handle that takes this stage's batches.
    pub fn handle(&self) -> AppInfer {
        self.handle.clone()
    }
}

impl Element for AppInferSettings {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        if !self.handle.classes.labels.is_empty() {
            ctx.caps.insert(ClassLabels(self.handle.labels()));
        }
        let AppInferSettings {
            in_flight,
            timeout,
            tx,
            handle,
        } = *self;
        Ok(Running::stage(Box::new(AppInferStage {
            tx,
            shared: handle.shared,
            classes: handle.classes,
            in_flight,
            timeout,
            stopped: ctx.stopped_early.clone(),
            tally: ctx.tally.clone(),
            pending: VecDeque::new(),
            next: 0,
            counts: Counts::default(),
        })))
    }
}

/// A batch the stage holds, in arrival order, with the way its labels come back (none for a
/// batch with no crop, or one not handed out).
struct Pending {
    batch: CropBatch,
    answer: Option<Receiver<Vec<Classification>>>,
    number: u64,
    since: Instant,
}

#[derive(Default)]
struct Counts {
    labelled: u64,
    objects: u64,
    unlabelled: u64,
}

/// The `appinfer` stage at run time.
struct AppInferStage {
    tx: Sender<AppBatch>,
    shared: Arc<Shared>,
    classes: Arc<Classes>,
    in_flight: usize,
    timeout: Option<Duration>,
    stopped: Arc<AtomicBool>,
    tally: Tally,
    pending: VecDeque<Pending>,
    next: u64,
    counts: Counts,
}

impl AppInferStage {
    /// Hand `batch`'s tensor out (unless it has no crop or the application takes no more).
    fn hand_out(&mut self, mut batch: CropBatch) -> Pending {
        let number = self.next;
        self.next += 1;
        let since = Instant::now();
        if batch.crops.is_empty() || self.shared.closed.load(Ordering::SeqCst) {
            self.counts.unlabelled += u64::from(!batch.crops.is_empty());
            return Pending {
                batch,
                answer: None,
                number,
                since,
            };
        }
        let rows = rows(&batch);
        let (tx, rx) = bounded(1);
        let mut out = AppBatch {
            tensor: std::mem::take(&mut batch.tensor),
            reply: Reply {
                tx: Some(tx),
                rows: rows.len(),
                batch: number,
                classes: self.classes.clone(),
            },
            rows,
        };
        loop {
            if self.stopped.load(Ordering::SeqCst) || self.shared.closed.load(Ordering::SeqCst) {
                break;
            }
            match self.tx.send_timeout(out, POLL) {
                Ok(()) => {
                    return Pending {
                        batch,
                        answer: Some(rx),
                        number,
                        since,
                    }
                }
                Err(SendTimeoutError::Timeout(back)) => out = back,
                Err(SendTimeoutError::Disconnected(_)) => break,
            }
        }
        // Not handed out: the application is gone, closed its handle, or the run stops.
        self.counts.unlabelled += 1;
        Pending {
            batch,
            answer: None,
            number,
            since,
        }
    }

    /// Wait for the oldest batch's labels (or for its reply to go away), write them on and pass
    /// it on.
    fn finish_front(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        let Some(mut p) = self.pending.pop_front() else {
            return Ok(());
        };
        let Some(rx) = p.answer.take() else {
            out.push(p.batch);
            return Ok(());
        };
        loop {
            match rx.recv_timeout(POLL) {
                Ok(answer) => {
                    self.counts.labelled += 1;
                    self.counts.objects += answer.len() as u64;
                    write_labels(&mut p.batch, answer);
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.counts.unlabelled += 1;
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {
                    if self.stopped.load(Ordering::SeqCst) {
                        self.counts.unlabelled += 1;
                        break;
                    }
                    if let Some(limit) = self.timeout {
                        if p.since.elapsed() >= limit {
                            return Err(AppInferError::Timeout {
                                stage: self.shared.name.clone(),
                                batch: p.number,
                                waited: p.since.elapsed().as_secs_f64(),
                            }
                            .into());
                        }
                    }
                }
            }
        }
        out.push(p.batch);
        Ok(())
    }

    /// Pass on, in order, the batches at the front whose labels are in (or will not come).
    fn pass_answered(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        while let Some(front) = self.pending.front_mut() {
            if let Some(rx) = &front.answer {
                match rx.try_recv() {
                    Ok(answer) => {
                        self.counts.labelled += 1;
                        self.counts.objects += answer.len() as u64;
                        write_labels(&mut front.batch, answer);
                    }
                    Err(TryRecvError::Disconnected) => self.counts.unlabelled += 1,
                    Err(TryRecvError::Empty) => break,
                }
                front.answer = None;
            }
            self.finish_front(out)?;
        }
        Ok(())
    }
}

impl Stage<CropBatch, CropBatch> for AppInferStage {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        let pending = self.hand_out(batch);
        self.pending.push_back(pending);
        self.pass_answered(out)?;
        while self.pending.len() >= self.in_flight {
            self.finish_front(out)?;
        }
        Ok(())
    }

    fn deadline(&self) -> Option<Instant> {
        (!self.pending.is_empty()).then(|| Instant::now() + ANSWER_POLL)
    }

    fn timeout(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.pass_answered(out)
    }

    fn finish(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        while !self.pending.is_empty() {
            self.finish_front(out)?;
        }
        let c = &self.counts;
        let mut line = format!(
            "appinfer '{}': {} batches labelled by the application ({} objects)",
            self.shared.name, c.labelled, c.objects
        );
        if c.unlabelled > 0 {
            line += &format!(
                "; {} passed on without labels (not taken, reply dropped, or the run stopped)",
                c.unlabelled
            );
        }
        self.tally.with(|t| t.add_line(line));
        Ok(())
    }
}

/// The rows of `batch`'s crops.
fn rows(batch: &CropBatch) -> Vec<Row> {
    batch
        .crops
        .iter()
        .zip(&batch.origins)
        .map(|(c, o)| {
            let frame = &batch.frames[o.frame as usize];
            Row {
                stream: frame.stream,
                frame: frame.seq,
                source: frame.source.clone(),
                box_index: frame.part.first_box + o.detection,
                bbox: [c.x, c.y, c.w, c.h],
                offset: c.out_offset as usize,
                size: (c.out_w, c.out_h),
            }
        })
        .collect()
}

/// Write each crop's answer onto its detection.
fn write_labels(batch: &mut CropBatch, answer: Vec<Classification>) {
    for (origin, c) in batch.origins.iter().zip(answer) {
        if let Some(d) = batch.frames[origin.frame as usize]
            .detections
            .get_mut(origin.detection as usize)
        {
            d.classification = Some(c);
        }
    }
}
