//! The stages' threads: each node's edges wired, its thread started between them, and the
//! threads joined at the end of a run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::batch::CropBatch;
use crate::budget::Tally;
use crate::frame::Frame;
use crate::stage::{Item, Running};
use crate::Error;

use super::edge::{Edge, Inbox};
use super::threads::{run_source, run_stage, spawn_error};
use super::{pool, Control, Expected, PipelineError, Ready, JOIN_POLL};

/// A stage's thread, and whether it is in its own work (a `process` call, or a source waiting
/// for its next frame) rather than waiting on an edge.
pub(super) struct StageThread {
    pub(super) kind: &'static str,
    pub(super) handle: thread::JoinHandle<()>,
    pub(super) working: Arc<AtomicBool>,
}

/// Wait for the stage threads to end; after a stop request only until its deadline. Returns
/// the kinds of the stages still in their own work then (or, if none is, of those still
/// running); their threads are left to end on their own. A stage that panicked is the run's
/// error.
pub(super) fn join(threads: Vec<StageThread>, ctl: &Control, grace: Duration) -> Vec<String> {
    loop {
        if threads.iter().all(|t| t.handle.is_finished()) {
            for t in threads {
                if t.handle.join().is_err() {
                    ctl.fail(PipelineError::Panic(t.kind.to_string()).into());
                }
            }
            return Vec::new();
        }
        if ctl
            .stop_deadline(grace)
            .is_some_and(|d| Instant::now() >= d)
        {
            let running: Vec<&StageThread> =
                threads.iter().filter(|t| !t.handle.is_finished()).collect();
            let busy: Vec<String> = running
                .iter()
                .filter(|t| t.working.load(Ordering::Relaxed))
                .map(|t| t.kind.to_string())
                .collect();
            if !busy.is_empty() {
                return busy;
            }
            return running.iter().map(|t| t.kind.to_string()).collect();
        }
        thread::sleep(JOIN_POLL);
    }
}

/// The sending end of an edge, of the type that travels on it.
pub(super) enum Tx {
    Frames(Edge<Frame>),
    Batches(Edge<CropBatch>),
}

/// A receiving end.
pub(super) enum Rx {
    Frames(Receiver<Frame>),
    Batches(Receiver<CropBatch>),
}

/// Each node's incoming edges and outgoing edge, and the end of the pipeline's receiver.
#[allow(clippy::type_complexity)]
pub(super) fn wire(
    nodes: &[Ready],
    tally: &Tally,
) -> Result<(Vec<(Vec<Rx>, Tx)>, Receiver<CropBatch>), Error> {
    let mut inputs: Vec<Vec<Rx>> = nodes.iter().map(|_| Vec::new()).collect();
    let mut outputs = Vec::with_capacity(nodes.len());
    let mut end = None;
    for n in nodes {
        let to = n.output.map_or("report", |j| nodes[j].label);
        let name = format!("{} -> {to}", n.label);
        let (tx, rx) = match n.running.items().1 {
            Item::Frames => {
                let (tx, rx) = Edge::new(n.queue, &name, tally);
                (Tx::Frames(tx), Rx::Frames(rx))
            }
            Item::Batches => {
                let (tx, rx) = Edge::new(n.queue, &name, tally);
                (Tx::Batches(tx), Rx::Batches(rx))
            }
        };
        match (n.output, rx) {
            (Some(j), rx) => inputs[j].push(rx),
            (None, Rx::Batches(rx)) => end = Some(rx),
            (None, Rx::Frames(_)) => {
                return Err(PipelineError::Wiring {
                    stage: "report".into(),
                    takes: "batches".into(),
                    fed: format!("frames by '{}'", n.kind),
                }
                .into())
            }
        }
        outputs.push(tx);
    }
    let end = end.ok_or_else(|| PipelineError::Wiring {
        stage: "report".into(),
        takes: "batches".into(),
        fed: "nothing".into(),
    })?;
    Ok((inputs.into_iter().zip(outputs).collect(), end))
}

/// Start node `n`'s thread between `inputs` (and, for the batch stage of a pipeline taking
/// streams, the edges of streams `joins` brings) and `output`.
pub(super) fn spawn(
    n: Ready,
    inputs: Vec<Rx>,
    output: Tx,
    joins: Option<Receiver<Receiver<Frame>>>,
    ctl: &Arc<Control>,
    expected: &Arc<Expected>,
) -> Result<StageThread, Error> {
    let kind = n.kind;
    let working = Arc::new(AtomicBool::new(false));
    let handle = start(n, inputs, output, joins, ctl, working.clone(), expected)?;
    Ok(StageThread {
        kind,
        handle,
        working,
    })
}

fn start(
    n: Ready,
    inputs: Vec<Rx>,
    output: Tx,
    joins: Option<Receiver<Receiver<Frame>>>,
    ctl: &Arc<Control>,
    busy: Arc<AtomicBool>,
    expected: &Arc<Expected>,
) -> Result<thread::JoinHandle<()>, Error> {
    let wiring = |takes: &str, fed: &str| -> Error {
        PipelineError::Wiring {
            stage: n.kind.to_string(),
            takes: takes.into(),
            fed: fed.into(),
        }
        .into()
    };
    let name = format!("octopipe-{}", n.kind);
    let slot = n.slot;
    let ctl = ctl.clone();
    let learn = n.source.map(|i| (expected.clone(), i));
    let end = n.end;
    let stream = n.stream;
    match (n.running, output) {
        (Running::Source(source), Tx::Frames(tx)) if inputs.is_empty() => {
            let stream = stream.unwrap_or_default();
            thread::Builder::new()
                .name(name.clone())
                .spawn(move || run_source(source, tx, slot, &ctl, &busy, learn, &end, &stream))
                .map_err(|e| spawn_error(&name, e))
        }
        (Running::Frames(stage), Tx::Frames(tx)) => {
            let rx = frames(inputs, joins).ok_or_else(|| wiring("frames", "batches"))?;
            run_stage(name, stage, rx, tx, slot, (ctl, stream), busy)
        }
        (Running::Batcher(stage), Tx::Batches(tx)) => {
            let rx = frames(inputs, joins).ok_or_else(|| wiring("frames", "batches"))?;
            run_stage(name, stage, rx, tx, slot, (ctl, stream), busy)
        }
        (Running::Batches(stage), Tx::Batches(tx)) => {
            let rx = batches(inputs).ok_or_else(|| wiring("batches", "frames"))?;
            run_stage(name, stage, rx, tx, slot, (ctl, stream), busy)
        }
        (Running::Workers(stages), Tx::Batches(tx)) => {
            let rx = batches(inputs).ok_or_else(|| wiring("batches", "frames"))?;
            pool::run_workers(name, stages, rx, tx, slot, ctl, busy)
        }
        _ => Err(wiring("its role's items", "something else")),
    }
}

/// A stage's inbox of frames: its edges, and those of streams that join while running.
fn frames(inputs: Vec<Rx>, joins: Option<Receiver<Receiver<Frame>>>) -> Option<Inbox<Frame>> {
    let rx: Option<Vec<_>> = inputs
        .into_iter()
        .map(|r| match r {
            Rx::Frames(r) => Some(r),
            Rx::Batches(_) => None,
        })
        .collect();
    rx.filter(|r| !r.is_empty() || joins.is_some())
        .map(|r| Inbox::new(r, joins))
}

fn batches(inputs: Vec<Rx>) -> Option<Inbox<CropBatch>> {
    let rx: Option<Vec<_>> = inputs
        .into_iter()
        .map(|r| match r {
            Rx::Batches(r) => Some(r),
            Rx::Frames(_) => None,
        })
        .collect();
    rx.filter(|r| !r.is_empty()).map(|r| Inbox::new(r, None))
}
