//! The stages' threads: each node's edges wired, its thread started between them, and the
//! threads joined at the end of a run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use octopipe_core::budget::Tally;
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::edge::{PortRx, PortTx};
use octopipe_core::stage::{spawn_error, wiring, Fail, Wires};
use octopipe_stages::batch::CropBatch;

use super::control::{Control, JOIN_POLL};
use super::ready::{Expected, Ready};
use super::threads::run_source;
use super::{EdgePolicy, PipelineError};

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

/// Each node's incoming edges and outgoing edge (of the type its stage gives, made by the
/// stage's [`Running::edge`](octopipe_core::stage::Running::edge)), and the end of the pipeline's
/// receiver, which takes batches.
#[allow(clippy::type_complexity)]
pub(super) fn wire(
    nodes: &[Ready],
    tally: &Tally,
) -> Result<(Vec<(Vec<PortRx>, PortTx)>, Receiver<CropBatch>), Error> {
    let mut inputs: Vec<Vec<PortRx>> = nodes.iter().map(|_| Vec::new()).collect();
    let mut outputs = Vec::with_capacity(nodes.len());
    let mut end = None;
    for n in nodes {
        let to = n.output.map_or("report", |j| nodes[j].label);
        let name = format!("{} -> {to}", n.label);
        let drop_oldest = n.queue.policy == EdgePolicy::DropOldest;
        let (tx, rx) = n.running.edge(n.queue.size, drop_oldest, &name, tally);
        match n.output {
            Some(j) => inputs[j].push(rx),
            None => match rx.typed::<CropBatch>() {
                Ok(rx) => end = Some(rx),
                Err(rx) => {
                    let fed = format!("{} by '{}'", rx.item(), n.kind);
                    return Err(wiring("report", "batches", &fed));
                }
            },
        }
        outputs.push(tx);
    }
    let end = end.ok_or_else(|| wiring("report", "batches", "nothing"))?;
    Ok((inputs.into_iter().zip(outputs).collect(), end))
}

/// Start node `n`'s thread between `inputs` (and, for the stage streams join while running, the
/// edges of streams `joins` brings) and `output`.
pub(super) fn spawn(
    n: Ready,
    inputs: Vec<PortRx>,
    output: PortTx,
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
    inputs: Vec<PortRx>,
    output: PortTx,
    joins: Option<Receiver<Receiver<Frame>>>,
    ctl: &Arc<Control>,
    busy: Arc<AtomicBool>,
    expected: &Arc<Expected>,
) -> Result<thread::JoinHandle<()>, Error> {
    let name = format!("octopipe-{}", n.kind);
    let slot = n.slot;
    let ctl = ctl.clone();
    let learn = n.source.map(|i| (expected.clone(), i));
    let end = n.end;
    let stream = n.stream;
    let running = match n.running.into_source() {
        Ok(source) => {
            let tx = match output.typed::<Frame>() {
                Ok(tx) if inputs.is_empty() => tx,
                _ => return Err(wiring(n.kind, "its role's items", "something else")),
            };
            let stream = stream.unwrap_or_default();
            return thread::Builder::new()
                .name(name.clone())
                .spawn(move || run_source(source, tx, slot, &ctl, &busy, learn, &end, &stream))
                .map_err(|e| spawn_error(&name, e));
        }
        Err(running) => running,
    };
    // A stage of one stream alone fails that stream; any other, the run.
    let fail: Fail = Arc::new(move |e| match &stream {
        Some((id, fate)) => ctl.stream_failed(*id, fate, e),
        None => ctl.fail(e),
    });
    running.start(Wires {
        kind: n.kind,
        thread: name,
        inputs,
        joins,
        output,
        slot,
        busy,
        fail,
    })
}
