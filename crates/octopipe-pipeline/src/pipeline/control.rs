//! What the threads of a run share (the first error, the stop request, the report), each
//! stream's fate, and the handle that stops a run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use octopipe_core::budget::{Budget, Report, Tally};
use octopipe_core::error::Error;
use octopipe_core::frame::Frame;
use octopipe_core::stage::Item;
use octopipe_sources::FrameSource;

use super::admit;

/// What the batch stage takes and gives: frames in, batches out (the batch or tiles stage, whose
/// row the collector's estimates of the time downstream start from, and which streams added
/// while running join).
pub(super) const BATCHER: (Option<Item>, Item) = (Some(Item::FRAMES), Item::BATCHES);

/// How long a stopped run waits for the work in flight before it gives up on it, by default.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(1);

/// The report's reason for frames still in flight when a stopped run gave up waiting for them.
pub const IN_FLIGHT_AT_STOP: &str = "in flight at stop";

/// How often the runner looks whether the stage threads have ended.
pub(super) const JOIN_POLL: Duration = Duration::from_millis(10);

/// Shared by all threads of a run: the first error, the stop request, the sources' interrupters
/// and the report.
pub(super) struct Control {
    /// Set by a stop request or a failure: sources stop producing (shared with the stages, which
    /// read it at the end of their stream: [`OpenContext::stopped_early`]).
    pub(super) stop: Arc<AtomicBool>,
    /// When a stop was requested ([`StopHandle::stop`]): the work in flight has until this plus
    /// the grace.
    pub(super) stopped_at: Mutex<Option<Instant>>,
    /// Wakes the collector when a stop is requested.
    pub(super) wake: (Sender<()>, Receiver<()>),
    pub(super) error: Mutex<Option<Error>>,
    pub(super) interrupters: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// Sources that reached their end, torn down when the run is over: tearing down a GPU
    /// decoder frees device memory, which waits for the whole GPU, and stalled the frames of
    /// every other stream for 100-250 ms when 32 NVDEC streams ended together (H100).
    pub(super) retired: Mutex<Vec<Box<dyn FrameSource>>>,
    pub(super) tally: Tally,
    /// While the pipeline takes streams ([`Pipeline::streams`]): where a stream added while
    /// running hands the batch stage its edge. Taken (closed) on a stop, a failure or
    /// [`Streams::close`]: the batch stage then ends with the streams it has.
    ///
    /// [`Pipeline::streams`]: super::Pipeline::streams
    pub(super) joins: Mutex<Option<Sender<Receiver<Frame>>>>,
    /// The first error that ended a stream alone (its source failed after its retries): the
    /// run's error at the end, when nothing else failed.
    pub(super) stream_error: Mutex<Option<Error>>,
    /// Set when a stream failed alone ([`OpenContext::stream_failed`]).
    pub(super) failed: Arc<AtomicBool>,
}

/// A stream's fate, shared by its threads and the book of streams: whether it ended, and why it
/// failed when it did.
#[derive(Clone, Default)]
pub(crate) struct Fate {
    pub(super) ended: Arc<AtomicBool>,
    pub(super) failure: Arc<Mutex<Option<String>>>,
    /// Stops the stream's source, once it is open: a stream whose own stage failed ends (a live
    /// source would otherwise go on into an edge that drops what it holds).
    pub(super) interrupt: Arc<Mutex<Option<Interrupt>>>,
}

/// What stops a source, shared.
pub(super) type Interrupt = Arc<dyn Fn() + Send + Sync>;

impl Fate {
    /// Why the stream failed, if it did.
    pub(super) fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

impl Control {
    pub(super) fn new(tally: Tally) -> Self {
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
    pub(super) fn stream_failed(&self, stream: u32, fate: &Fate, e: Error) {
        // What is kept of a failed stream is bounded: its reason is cut (a URI of 60 KiB
        // would otherwise stay in its record and the report's lines for the whole run), and
        // one line (a newline in a location would forge lines in the log and the report).
        let reason = admit::cut(
            &octopipe_core::redact::controls(&e.to_string()),
            admit::SHOWN_REASON,
        );
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

    pub(super) fn fail(&self, e: Error) {
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
    pub(super) fn close_joins(&self) {
        if let Ok(mut joins) = self.joins.lock() {
            joins.take();
        }
    }

    /// After a stop request: when the runner stops waiting for the work in flight.
    pub(super) fn stop_deadline(&self, grace: Duration) -> Option<Instant> {
        self.stopped_at
            .lock()
            .ok()
            .and_then(|at| *at)
            .map(|at| at + grace)
    }
}

/// Asks a running pipeline to stop: sources end their stream, the rest drains for a grace time
/// ([`Pipeline::set_stop_grace`]), then the run ends whatever is still in flight.
///
/// [`Pipeline::set_stop_grace`]: super::Pipeline::set_stop_grace
#[derive(Clone)]
pub struct StopHandle(pub(super) Arc<Control>);

impl StopHandle {
    /// Request the stop: sources end their streams (also when blocked waiting for a frame), the
    /// other stages drain what is in flight. [`Pipeline::run`] returns at most the stop grace
    /// later: frames still in flight then are counted as dropped ([`IN_FLIGHT_AT_STOP`]) and
    /// stages still busy are left to end on their own threads.
    ///
    /// [`Pipeline::run`]: super::Pipeline::run
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
            .unwrap_or_else(|| Budget::new(octopipe_core::budget::DEFAULT_BUDGET, Vec::new()));
        budget.drop_in_flight(IN_FLIGHT_AT_STOP);
        budget.finish()
    }
}
