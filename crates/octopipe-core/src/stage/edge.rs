//! Edges: bounded channels between stages, of the payload type that travels on them, with their
//! capacity and policy (block, or drop the oldest and count its frames), and a stage's inbox of
//! one or several edges. The runner makes them; stage code never touches one.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use super::{Item, Payload};
use crate::budget::Tally;
use crate::frame::StageSlot;

/// The report's reason for frames of a stream removed with `mode=drop` that had not reached the
/// batch stage.
pub const STREAM_REMOVED: &str = "stream removed";

/// The sending end of an edge, with its policy.
pub struct Edge<T> {
    tx: Sender<T>,
    /// Drop-oldest edges only: the receiving end, to take out the oldest item when full.
    oldest: Option<Receiver<T>>,
    reason: Arc<str>,
    tally: Tally,
    /// Set when the stream this edge carries was removed with `mode=drop`: what comes is dropped
    /// and counted instead of sent.
    discard: Option<Arc<AtomicBool>>,
}

impl<T: Payload> Edge<T> {
    /// A bounded edge called `name` (e.g. `batch -> preprocess`) of `size` items (at least one)
    /// and its receiving end; when full, a send waits, or with `drop_oldest` takes out the
    /// oldest item and counts its frames.
    pub fn new(
        size: usize,
        drop_oldest: bool,
        name: &str,
        tally: &Tally,
    ) -> (Edge<T>, Receiver<T>) {
        let (tx, rx) = bounded(size.max(1));
        let oldest = drop_oldest.then(|| rx.clone());
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
    pub fn discard_when(&mut self, flag: Arc<AtomicBool>) {
        self.discard = Some(flag);
    }

    /// The run's report, where drops are counted.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Send by the edge's policy; false when the receiving stage is gone.
    pub fn send(&self, mut item: T) -> bool {
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
    pub fn send_all(&self, out: &mut Vec<T>, slot: StageSlot) -> bool {
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
pub struct Inbox<T> {
    edges: Vec<Receiver<T>>,
    /// The edge to try first next time: after an item, the one after it.
    next: usize,
    /// Edges of branches added while running (streams joining the batch stage), until closed.
    joins: Option<Receiver<Receiver<T>>>,
}

impl<T> Inbox<T> {
    pub fn new(edges: Vec<Receiver<T>>, joins: Option<Receiver<Receiver<T>>>) -> Self {
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
    pub fn recv(&mut self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
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

/// Which end of an edge a [`Port`] holds: [`Sending`] or [`Receiving`].
pub trait Side: 'static {
    /// This end of an edge of `T`.
    type End<T: Payload>: Send + 'static;
}

/// The sending end of an edge: an [`Edge`].
pub enum Sending {}

/// The receiving end of an edge: a [`Receiver`].
pub enum Receiving {}

impl Side for Sending {
    type End<T: Payload> = Edge<T>;
}

impl Side for Receiving {
    type End<T: Payload> = Receiver<T>;
}

/// One end of an edge with its payload type erased: what the runner holds between making an
/// edge (by the stage that sends on it, which knows its type) and starting the stages at its
/// ends (which know the types they take and give).
pub struct Port<S: Side> {
    item: Item,
    end: Box<dyn Any + Send>,
    side: PhantomData<fn() -> S>,
}

/// The sending end of an edge with its payload type erased, until the stage that sends on it
/// takes it.
pub type PortTx = Port<Sending>;

/// The receiving end of an edge with its payload type erased, until the stage it feeds (which
/// knows the type it takes) or the end of the pipeline takes it.
pub type PortRx = Port<Receiving>;

impl<S: Side> Port<S> {
    /// `end`, its type erased.
    pub fn new<T: Payload>(end: S::End<T>) -> Self {
        Port {
            item: Item::of::<T>(),
            end: Box::new(end),
            side: PhantomData,
        }
    }

    /// What travels on it.
    pub fn item(&self) -> Item {
        self.item
    }

    /// The end, if `T` travels on it (else the port back).
    pub fn typed<T: Payload>(self) -> Result<S::End<T>, Self> {
        if !self.item.is::<T>() {
            return Err(self);
        }
        let item = self.item;
        self.end.downcast().map(|e| *e).map_err(|end| Port {
            item,
            end,
            side: PhantomData,
        })
    }
}

/// A new edge of `T` (see [`Edge::new`]), both ends' types erased.
pub fn ports<T: Payload>(
    size: usize,
    drop_oldest: bool,
    name: &str,
    tally: &Tally,
) -> (PortTx, PortRx) {
    let (tx, rx) = Edge::<T>::new(size, drop_oldest, name, tally);
    (PortTx::new(tx), PortRx::new(rx))
}
