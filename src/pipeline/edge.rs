//! Edges: bounded channels between stages, with their capacity and policy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use crate::batch::CropBatch;
use crate::budget::Tally;
use crate::description::DescribeError;
use crate::frame::{Frame, StageSlot};
use crate::stage::{Element, OpenContext, PropSpec, PropType, Props, Role, Running, StageDecl};
use crate::Error;

/// Default capacity of every edge of a file pipeline.
pub const DEFAULT_QUEUE: usize = 4;

/// Default capacity of the frame edges of a live pipeline: a live frame must not wait behind
/// others of its stream.
pub const DEFAULT_LIVE_QUEUE: usize = 1;

/// Default capacity of a live frame edge into a collector (a shared `detect`): it takes frames
/// of many streams into calls, so a stream's frame may wait out the call in flight as well as
/// its own; with one slot, every call longer than a frame interval dropped a frame (measured on
/// the H100, 16 streams at `interval=2`: 17 of 3,840 frames with calls of ~20 ms, p99 34 ms).
/// Two frames keep the added wait under one frame interval.
pub const DEFAULT_LIVE_COLLECTOR_QUEUE: usize = 2;

/// Default capacity of the batch edges of a live pipeline, which block when full. A batch holds
/// frames of every stream: dropping one on a momentary stall of a later stage (a GPU call that
/// takes 20 ms once) threw away frames of every stream that were on time (measured on the H100:
/// 71 of 1,200 frames of 4 live streams with one-batch edges, 2 of 2,400 of 8 streams with
/// four-batch ones, every stage's p99 under 6 ms). Blocking pushes a stall back to the frame edges
/// at the entrance, which drop a stream's frame only when its next one is due (a stall longer
/// than a frame interval); frames that will be late are the batch stage's `late` policy's.
pub const DEFAULT_LIVE_BATCH_QUEUE: usize = 4;

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
    /// The default frame edge of a live pipeline: 1 frame, drop the oldest.
    pub const LIVE: Queue = Queue {
        size: DEFAULT_LIVE_QUEUE,
        policy: EdgePolicy::DropOldest,
    };
    /// The default frame edge of a live pipeline into a collector: 2 frames, drop the oldest.
    pub const LIVE_INTO_COLLECTOR: Queue = Queue {
        size: DEFAULT_LIVE_COLLECTOR_QUEUE,
        policy: EdgePolicy::DropOldest,
    };
    /// The default batch edge of a live pipeline: 4 batches, block.
    pub const LIVE_BATCHES: Queue = Queue {
        size: DEFAULT_LIVE_BATCH_QUEUE,
        policy: EdgePolicy::Block,
    };
}

/// The `queue` stage's settings: what it sets on the edge it stands on (unset: the pipeline's
/// file or live default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueSettings {
    /// Capacity.
    pub size: Option<usize>,
    /// Policy.
    pub policy: Option<EdgePolicy>,
}

impl QueueSettings {
    /// The edge these settings give, on a pipeline whose edges default to `default`.
    pub fn resolve(self, default: Queue) -> Queue {
        Queue {
            size: self.size.unwrap_or(default.size),
            policy: self.policy.unwrap_or(default.policy),
        }
    }
}

impl Element for QueueSettings {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Err(crate::error::PipelineError::NotAStage("queue").into())
    }
}

/// `queue size=N policy=block|drop-oldest` between two stages.
pub const QUEUE: StageDecl = StageDecl {
    name: "queue",
    role: Role::Edge,
    doc: "sets the capacity and policy of the edge it stands on (between two stages)",
    props: &[
        PropSpec::new(
            "size",
            PropType::POSITIVE,
            "4 (live: 1 frame; batches 4)",
            "frames or batches the edge holds before its policy applies",
        ),
        PropSpec::new(
            "policy",
            PropType::Choice(&["block", "drop-oldest"]),
            "block (live frames: drop-oldest)",
            "when full: the upstream stage waits, or the oldest item is dropped and counted",
        ),
    ],
    needs: &[],
    provides: &[],
    make: make_queue,
};

fn make_queue(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    Ok(Box::new(QueueSettings {
        size: p.usize("size"),
        policy: p.str("policy").map(|s| match s {
            "drop-oldest" => EdgePolicy::DropOldest,
            _ => EdgePolicy::Block,
        }),
    }))
}

/// Something that travels on an edge: it carries frame timestamps, and when it is dropped there
/// its frames are counted.
pub(crate) trait Travels: Send + 'static {
    /// Record that every frame in it passed stage `slot` at `at`.
    fn stamp(&mut self, slot: StageSlot, at: Instant);
    /// Count the frames (and their boxes) of a dropped item.
    fn count_drop(&self, tally: &Tally, reason: &str);
}

impl Travels for Frame {
    fn stamp(&mut self, slot: StageSlot, at: Instant) {
        self.times.mark(slot, at);
    }
    fn count_drop(&self, tally: &Tally, reason: &str) {
        let boxes = self.detections.len() as u64;
        // A frame in parts is counted once, by its last part; an earlier part's boxes are skipped.
        tally.with(|t| match self.part.is_last() {
            true => t.drop_frame(self.stream, reason, boxes),
            false => t.drop_boxes(reason, boxes),
        });
    }
}

impl Travels for CropBatch {
    fn stamp(&mut self, slot: StageSlot, at: Instant) {
        for f in &mut self.frames {
            f.times.mark(slot, at);
        }
    }
    fn count_drop(&self, tally: &Tally, reason: &str) {
        for f in &self.frames {
            f.count_drop(tally, reason);
        }
    }
}

/// The report's reason for frames of a stream removed with `mode=drop` that had not reached the
/// batch stage.
pub const STREAM_REMOVED: &str = "stream removed";

/// The sending end of an edge, with its policy.
pub(crate) struct Edge<T> {
    tx: Sender<T>,
    /// Drop-oldest edges only: the receiving end, to take out the oldest item when full.
    oldest: Option<Receiver<T>>,
    reason: Arc<str>,
    tally: Tally,
    /// Set when the stream this edge carries was removed with `mode=drop`: what comes is dropped
    /// and counted instead of sent.
    discard: Option<Arc<AtomicBool>>,
}

impl<T: Travels> Edge<T> {
    /// A bounded edge called `name` (e.g. `batch -> preprocess`) and its receiving end.
    pub(crate) fn new(queue: Queue, name: &str, tally: &Tally) -> (Edge<T>, Receiver<T>) {
        let (tx, rx) = bounded(queue.size.max(1));
        let oldest = (queue.policy == EdgePolicy::DropOldest).then(|| rx.clone());
        let edge = Edge {
            tx,
            oldest,
            reason: format!("live: oldest dropped at {name}").into(),
            tally: tally.clone(),
            discard: None,
        };
        (edge, rx)
    }

    /// Drop and count what comes once `flag` is set (a stream removed with `mode=drop`).
    pub(crate) fn discard_when(&mut self, flag: Arc<AtomicBool>) {
        self.discard = Some(flag);
    }

    /// The run's report, where drops are counted.
    pub(crate) fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Send by the edge's policy; false when the receiving stage is gone.
    pub(crate) fn send(&self, mut item: T) -> bool {
        if self
            .discard
            .as_ref()
            .is_some_and(|d| d.load(Ordering::SeqCst))
        {
            item.count_drop(&self.tally, STREAM_REMOVED);
            return true;
        }
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

    /// Stamp `out`'s items with `slot` and send them; false when downstream is gone.
    pub(crate) fn send_all(&self, out: &mut Vec<T>, slot: StageSlot) -> bool {
        let now = Instant::now();
        for mut item in out.drain(..) {
            item.stamp(slot, now);
            if !self.send(item) {
                return false;
            }
        }
        true
    }
}

/// The receiving end of a stage: one edge, or several (branches feeding one stage) served in turn.
pub(crate) struct Inbox<T> {
    edges: Vec<Receiver<T>>,
    /// The edge to try first next time: after an item, the one after it.
    next: usize,
    /// Edges of branches added while running (streams joining the batch stage), until closed.
    joins: Option<Receiver<Receiver<T>>>,
}

impl<T> Inbox<T> {
    pub(crate) fn new(edges: Vec<Receiver<T>>, joins: Option<Receiver<Receiver<T>>>) -> Self {
        Inbox {
            edges,
            next: 0,
            joins,
        }
    }

    /// Take the edges of branches that joined since the last look.
    fn take_joins(&mut self) {
        let Some(joins) = &self.joins else { return };
        loop {
            match joins.try_recv() {
                Ok(edge) => self.edges.push(edge),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.joins = None;
                    return;
                }
            }
        }
    }

    /// The next item, taking edges round-robin so that no branch waits behind another; waits
    /// until `deadline` (if any). `Disconnected` once every edge is closed and empty and no
    /// branch can join any more.
    pub(crate) fn recv(&mut self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        loop {
            self.take_joins();
            let n = self.edges.len();
            if n == 0 && self.joins.is_none() {
                return Err(RecvTimeoutError::Disconnected);
            }
            for k in 0..n {
                let i = (self.next + k) % n;
                match self.edges[i].try_recv() {
                    Ok(item) => {
                        self.next = (i + 1) % n;
                        return Ok(item);
                    }
                    Err(TryRecvError::Empty) => {}
                    Err(TryRecvError::Disconnected) => {
                        self.edges.remove(i);
                        self.next = 0;
                        break;
                    }
                }
            }
            if self.edges.len() < n {
                continue;
            }
            // Nothing ready: wait for whichever edge has something first, or a branch joining.
            let mut sel = crossbeam_channel::Select::new();
            for e in &self.edges {
                sel.recv(e);
            }
            let joining = self.joins.as_ref().map(|j| sel.recv(j));
            let op = match deadline {
                Some(d) => sel
                    .select_deadline(d)
                    .map_err(|_| RecvTimeoutError::Timeout)?,
                None => sel.select(),
            };
            let i = op.index();
            if Some(i) == joining {
                if let Some(joins) = &self.joins {
                    match op.recv(joins) {
                        Ok(edge) => self.edges.push(edge),
                        Err(_) => self.joins = None,
                    }
                }
                continue;
            }
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
