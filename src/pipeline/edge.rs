//! Edges: bounded channels between stages, with their capacity and policy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use crate::batch::CropBatch;
use crate::budget::Tally;
use crate::describe::{EdgePolicy, Queue};
use crate::frame::{Frame, StageSlot};

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
