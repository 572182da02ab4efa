//! What a run gives back (its outcome), and the observer that hands its objects to a channel.
//! The [`Observer`] trait itself is the core crate's.

use std::time::Duration;

use crossbeam_channel::Sender;

use octopipe_core::budget::Report;
use octopipe_core::error::Error;
use octopipe_stages::batch::CropBatch;
use octopipe_stages::sink::Object;

pub use octopipe_core::observer::Observer;

/// The result of a run: the report, and the first error if a stage failed.
pub struct Outcome {
    /// Budget report (frames, latencies, accounting).
    pub report: Report,
    /// The first error, if any stage failed.
    pub error: Option<Error>,
    /// Stages still busy when a stopped run gave up waiting for them (their threads end on
    /// their own); empty when every stage ended.
    pub abandoned: Vec<String>,
}

/// Sends every classified object to a channel.
pub(super) struct ResultsObserver(pub(super) Sender<Object>);

impl Observer for ResultsObserver {
    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        for object in Object::all(batch) {
            // A reader that went away stops listening; the run goes on.
            if self.0.send(object).is_err() {
                return;
            }
        }
    }
}
