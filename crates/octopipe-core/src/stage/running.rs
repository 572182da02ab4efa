//! An opened stage, ready to run ([`Running`]), and how it runs: each stage on its own thread
//! between typed edges, receiving, calling [`Stage::process`], stamping and sending.
//!
//! A [`Running`] is made by a typed constructor ([`Running::stage`], [`Running::workers`],
//! [`Running::source`]) that keeps the stage's payload types: the runner asks it to make its
//! output edge ([`Running::edge`]) and to start its thread between its edges
//! ([`Running::start`]), so the channels are of the stage's own types and the runner itself
//! names no payload (a source's frames and the end of the pipeline's batches aside). Edges of
//! the wrong type are a [`PipelineError::Wiring`](crate::error::PipelineError::Wiring) naming
//! the stage, what it takes and what it is fed.

use std::any::Any;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::edge::{ports, Edge, Inbox, PortRx, PortTx};
use super::pool;
use super::port::{Item, Payload};
use super::source::FrameSource;
use super::step::Stage;
use super::threads::{slow_call, spawn_error, wiring, working, Fail};
use crate::budget::Tally;
use crate::frame::{Frame, StageSlot};
use crate::Error;

/// An opened stage, ready to run: a source of frames, or a stage (or a pool of workers) taking
/// one payload type and giving another.
pub struct Running(Kind);

enum Kind {
    Source(Box<dyn FrameSource>),
    Stage(Box<dyn Launch>),
}

impl Running {
    /// A source of frames.
    pub fn source(source: Box<dyn FrameSource>) -> Running {
        Running(Kind::Source(source))
    }

    /// A stage taking `I` and giving `O` (frames to frames, frames to batches, batches to
    /// batches, or any [`Payload`] of an application's own).
    pub fn stage<I: Payload, O: Payload>(stage: Box<dyn Stage<I, O>>) -> Running {
        Running(Kind::Stage(Box::new(One(stage))))
    }

    /// One stage run by several workers: each item goes to whichever is free and the items
    /// leave in the order they came (a stage's `workers=N`).
    pub fn workers<T: Payload>(stages: Vec<Box<dyn Stage<T, T>>>) -> Running {
        Running(Kind::Stage(Box::new(Pool(stages))))
    }

    /// What it takes (`None`: nothing, a source) and gives.
    pub fn items(&self) -> (Option<Item>, Item) {
        match &self.0 {
            Kind::Source(_) => (None, Item::FRAMES),
            Kind::Stage(s) => {
                let (input, output) = s.items();
                (Some(input), output)
            }
        }
    }

    /// The source, if it is one.
    pub fn as_source(&self) -> Option<&dyn FrameSource> {
        match &self.0 {
            Kind::Source(s) => Some(s.as_ref()),
            Kind::Stage(_) => None,
        }
    }

    /// The source, if it is one (else itself back).
    pub fn into_source(self) -> Result<Box<dyn FrameSource>, Running> {
        match self.0 {
            Kind::Source(s) => Ok(s),
            kind => Err(Running(kind)),
        }
    }

    /// The stage, if it is one stage taking `I` and giving `O` (else itself back): to drive an
    /// opened stage outside the runner (a GStreamer element, a Python object), calling
    /// [`Stage::process`] and [`Stage::finish`] itself.
    pub fn into_stage<I: Payload, O: Payload>(self) -> Result<Box<dyn Stage<I, O>>, Running> {
        match self.0 {
            Kind::Stage(s) if s.as_any().is::<One<I, O>>() => s
                .into_any()
                .downcast::<One<I, O>>()
                .map(|one| one.0)
                .map_err(|_| unreachable!("checked with `is`")),
            kind => Err(Running(kind)),
        }
    }

    /// Its output edge, called `name`, of `size` items that block or drop the oldest when full
    /// (the runner's; a stage's code never touches an edge).
    #[doc(hidden)]
    pub fn edge(
        &self,
        size: usize,
        drop_oldest: bool,
        name: &str,
        tally: &Tally,
    ) -> (PortTx, PortRx) {
        match &self.0 {
            Kind::Source(_) => ports::<Frame>(size, drop_oldest, name, tally),
            Kind::Stage(s) => s.edge(size, drop_oldest, name, tally),
        }
    }

    /// Start the stage's thread between its edges (the runner's; a source is started by the
    /// runner itself: [`Running::into_source`]).
    #[doc(hidden)]
    pub fn start(self, wires: Wires) -> Result<thread::JoinHandle<()>, Error> {
        match self.0 {
            Kind::Stage(s) => s.start(wires),
            Kind::Source(_) => Err(wiring(wires.kind, "nothing", "an edge")),
        }
    }
}

/// What the runner hands a stage's thread: its edges, its report row and where its failure
/// goes.
#[doc(hidden)]
pub struct Wires {
    /// The stage's kind (for wiring errors).
    pub kind: &'static str,
    /// Its thread's name (`octopipe-KIND`).
    pub thread: String,
    /// Its incoming edges.
    pub inputs: Vec<PortRx>,
    /// For the stage streams join while running: the edges of the streams, as they come.
    pub joins: Option<Receiver<Receiver<Frame>>>,
    /// Its outgoing edge (made by [`Running::edge`]).
    pub output: PortTx,
    /// Its row in the report, stamped on what it sends.
    pub slot: StageSlot,
    /// Set while it is in its own work (a `process` call) rather than waiting on an edge.
    pub busy: Arc<AtomicBool>,
    /// Where its failure goes.
    pub fail: Fail,
}

/// A stage of known payload types, its types erased for the runner.
trait Launch: Send {
    fn items(&self) -> (Item, Item);
    fn edge(&self, size: usize, drop_oldest: bool, name: &str, tally: &Tally) -> (PortTx, PortRx);
    fn start(self: Box<Self>, wires: Wires) -> Result<thread::JoinHandle<()>, Error>;
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

struct One<I, O>(Box<dyn Stage<I, O>>);

struct Pool<T>(Vec<Box<dyn Stage<T, T>>>);

impl<I: Payload, O: Payload> Launch for One<I, O> {
    fn items(&self) -> (Item, Item) {
        (Item::of::<I>(), Item::of::<O>())
    }
    fn edge(&self, size: usize, drop_oldest: bool, name: &str, tally: &Tally) -> (PortTx, PortRx) {
        ports::<O>(size, drop_oldest, name, tally)
    }
    fn start(self: Box<Self>, w: Wires) -> Result<thread::JoinHandle<()>, Error> {
        let rx = inbox::<I>(w.kind, w.inputs, w.joins)?;
        let tx = output::<O>(w.kind, w.output)?;
        run_stage(w.kind, w.thread, self.0, rx, tx, w.slot, w.fail, w.busy)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl<T: Payload> Launch for Pool<T> {
    fn items(&self) -> (Item, Item) {
        (Item::of::<T>(), Item::of::<T>())
    }
    fn edge(&self, size: usize, drop_oldest: bool, name: &str, tally: &Tally) -> (PortTx, PortRx) {
        ports::<T>(size, drop_oldest, name, tally)
    }
    fn start(self: Box<Self>, w: Wires) -> Result<thread::JoinHandle<()>, Error> {
        let rx = inbox::<T>(w.kind, w.inputs, w.joins)?;
        let tx = output::<T>(w.kind, w.output)?;
        pool::run_workers(w.thread, self.0, rx, tx, w.slot, w.fail, w.busy)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The inbox of a stage taking `I`: its edges, and those of streams that join while running
/// (only a stage taking frames). Every edge must carry `I`, and there must be one, or streams.
fn inbox<I: Payload>(
    kind: &str,
    inputs: Vec<PortRx>,
    joins: Option<Receiver<Receiver<Frame>>>,
) -> Result<Inbox<I>, Error> {
    let mut edges = Vec::with_capacity(inputs.len());
    for rx in inputs {
        match rx.typed::<I>() {
            Ok(rx) => edges.push(rx),
            Err(other) => return Err(wiring(kind, I::NAME, other.item().name())),
        }
    }
    let joins = match joins {
        None => None,
        Some(j) => match (Box::new(j) as Box<dyn Any>).downcast::<Receiver<Receiver<I>>>() {
            Ok(j) => Some(*j),
            Err(_) => return Err(wiring(kind, I::NAME, "the frames of streams joining it")),
        },
    };
    if edges.is_empty() && joins.is_none() {
        return Err(wiring(kind, I::NAME, "nothing"));
    }
    Ok(Inbox::new(edges, joins))
}

/// The outgoing edge of a stage giving `O` (made by the stage itself, so of its type).
fn output<O: Payload>(kind: &str, port: PortTx) -> Result<Edge<O>, Error> {
    port.typed::<O>()
        .map_err(|p| wiring(kind, "its role's items", p.item().name()))
}

/// Start `stage` (of kind `kind`) on its own thread between `rx` and `tx`; its error goes to
/// `fail`, and so does a panic in it (`PipelineError::Panic`): a stage of one stream fails that
/// stream alone.
#[allow(clippy::too_many_arguments)]
fn run_stage<I: Payload, O: Payload>(
    kind: &'static str,
    name: String,
    mut stage: Box<dyn Stage<I, O>>,
    mut rx: Inbox<I>,
    tx: Edge<O>,
    slot: StageSlot,
    fail: Fail,
    busy: Arc<AtomicBool>,
) -> Result<thread::JoinHandle<()>, Error> {
    let thread_name = name.clone();
    let stage_name = name.clone();
    let body = move || {
        let _span =
            tracing::info_span!("stage", name = thread::current().name().unwrap_or("?")).entered();
        let mut out = Vec::new();
        let run = std::panic::AssertUnwindSafe(|| -> Result<(), Error> {
            loop {
                let got = rx.recv(stage.deadline());
                let began = Instant::now();
                match got {
                    Ok(mut item) => {
                        item.took(slot, began);
                        working(&busy, || stage.process(item, &mut out))?
                    }
                    Err(RecvTimeoutError::Timeout) => working(&busy, || stage.timeout(&mut out))?,
                    Err(RecvTimeoutError::Disconnected) => {
                        working(&busy, || stage.finish(&mut out))?;
                        tx.send_all(&mut out, slot);
                        return Ok(());
                    }
                }
                let worked = Instant::now();
                tx.tally().with(|t| t.add_busy(slot, worked - began));
                let items = out.len();
                if !tx.send_all(&mut out, slot) {
                    return Ok(());
                }
                slow_call(&stage_name, worked - began, worked.elapsed(), items);
            }
        });
        let result = std::panic::catch_unwind(run)
            .unwrap_or_else(|_| Err(crate::error::PipelineError::Panic(kind.to_string()).into()));
        if let Err(e) = result {
            fail(e);
        }
    };
    thread::Builder::new()
        .name(thread_name)
        .spawn(body)
        .map_err(|e| spawn_error(&name, e))
}
