//! The end of a run on the calling thread: finished batches to the observers and the
//! application, the run's length announced, the outcome.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use octopipe_core::budget::{Budget, Tally};
use octopipe_core::frame::StageSlot;
use octopipe_core::stage::source::StartGate;
use octopipe_stages::batch::{CropBatch, Downstream};

use super::control::Control;
use super::observer::{Observer, Outcome};
use super::ready::{Expected, Ready};

/// The end of the pipeline, on the calling thread: the report, the observers and the
/// application's channel.
pub(super) struct Collector<'a> {
    pub(super) observers: Vec<Box<dyn Observer>>,
    pub(super) batches: Option<Sender<CropBatch>>,
    pub(super) tally: &'a Tally,
    pub(super) budget: Duration,
    pub(super) batch_slot: Option<StageSlot>,
    pub(super) downstream: Arc<Downstream>,
    /// The frames the sources expect, told to the observers once known.
    pub(super) expected: Arc<Expected>,
    pub(super) announced: bool,
    /// The paced sources' gate, until their clocks started: each frame reaching the end is told
    /// to it while their first frames are out ahead of the clocks.
    pub(super) start: Option<Arc<StartGate>>,
}

impl Collector<'_> {
    /// Take finished batches until the pipeline is drained, or, after a stop request, until the
    /// stop grace is over; true when it gave up with work in flight.
    pub(super) fn collect(
        &mut self,
        end_rx: &Receiver<CropBatch>,
        ctl: &Control,
        grace: Duration,
    ) -> bool {
        loop {
            let next = match ctl.stop_deadline(grace) {
                Some(deadline) => end_rx.recv_deadline(deadline).map_err(|e| e.is_timeout()),
                None => crossbeam_channel::select! {
                    recv(end_rx) -> batch => batch.map_err(|_| false),
                    // A stop request: from now on wait until its deadline only.
                    recv(ctl.wake.1) -> _ => continue,
                },
            };
            match next {
                Ok(batch) => self.batch(batch),
                Err(timed_out) => return timed_out,
            }
        }
    }

    fn batch(&mut self, batch: CropBatch) {
        if let Some(gate) = &self.start {
            if gate.prerolling() {
                // A frame in parts has reached the end with its last part.
                batch
                    .frames
                    .iter()
                    .filter(|f| f.part.index + 1 >= f.part.count)
                    .for_each(|f| gate.reached_end(f.times.arrival));
            } else if gate.has_started() {
                self.start = None;
            }
        }
        if let (Some(slot), Some(f)) = (self.batch_slot, batch.frames.first()) {
            if let (Some(b), Some((_, e))) = (f.times.get(slot), f.times.marks().last()) {
                self.downstream
                    .observe(e.saturating_duration_since(b), batch.crops.len());
            }
        }
        self.tally
            .with(|t| batch.frames.iter().for_each(|f| t.record(f)));
        announce(&self.expected, &mut self.announced, &mut self.observers);
        for o in &mut self.observers {
            o.batch(&batch, self.budget);
        }
        if let Some(tx) = &self.batches {
            // A reader that went away stops listening; the run goes on.
            let _ = tx.send(batch);
        }
    }
}

/// Number the sources of `ready` in order and ask each for its length.
pub(super) fn expected_frames(ready: &mut [Ready]) -> Arc<Expected> {
    let mut lengths = Vec::new();
    for n in ready.iter_mut() {
        if let Some(source) = n.running.as_source() {
            n.source = Some(lengths.len());
            let length = source.expected_frames();
            lengths.push(AtomicU64::new(length.unwrap_or(Expected::UNKNOWN)));
        }
    }
    Arc::new(Expected(lengths))
}

/// Tell the observers the run's length, once it is known.
pub(super) fn announce(
    expected: &Expected,
    announced: &mut bool,
    observers: &mut [Box<dyn Observer>],
) {
    if *announced {
        return;
    }
    if let Some(total) = expected.total() {
        *announced = true;
        observers.iter_mut().for_each(|o| o.expected_frames(total));
    }
}

pub(super) fn finish(
    mut observers: Vec<Box<dyn Observer>>,
    tally: &Tally,
    budget: Duration,
    control: &Control,
    abandoned: Vec<String>,
) -> Outcome {
    let error = control.error.lock().ok().and_then(|mut e| e.take());
    // A stream that failed alone is the run's error when nothing else failed.
    let error = error.or_else(|| control.stream_error.lock().ok().and_then(|mut e| e.take()));
    let mut report = tally
        .with(|t| t.finish())
        .unwrap_or_else(|| Budget::new(budget, Vec::new()).finish());
    report.error = error.as_ref().map(run_error);
    if let ([only], Some(e)) = (report.streams.as_slice(), &error) {
        // One stream, whose failure is the run's error: the error says it, not the report too.
        let said = format!("stream {} failed: {e}", only.stream);
        report.extra.retain(|l| *l != said);
    }
    for o in &mut observers {
        o.finish(&mut report);
    }
    Outcome {
        report,
        error,
        abandoned,
    }
}

/// The run's error as the report gives it (its JSON's `error`): kind, message and the input it
/// is about (a source's file, URI or head).
/// Both cut as a failed stream's record is (a location of 40 KB is not kept whole).
fn run_error(e: &octopipe_core::error::Error) -> octopipe_core::budget::RunError {
    octopipe_core::budget::RunError {
        kind: e.kind().name().to_string(),
        message: super::admit::cut(
            &octopipe_core::redact::controls(&e.to_string()),
            super::admit::SHOWN_REASON,
        ),
        input: e
            .downcast_ref::<octopipe_sources::SourceError>()
            .and_then(|s| s.input_name())
            .map(super::admit::shown),
    }
}
