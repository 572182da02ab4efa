//! What a run gives back (its outcome) and what watches it as it goes (observers).

use std::time::Duration;

use crossbeam_channel::Sender;

use crate::batch::CropBatch;
use crate::budget::Report;
use crate::sink::Object;
use crate::Error;

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

/// Watches a run from the collector thread: every finished batch (frames with their timestamps
/// and detections and classifications, the crops' tensor; pixels only with
/// [`Pipeline::keep_pixels`]), then the report. Progress lines, metrics, plots and annotated
/// output are observers.
///
/// [`Pipeline::keep_pixels`]: super::Pipeline::keep_pixels
pub trait Observer: Send {
    /// The run starts; `stages` are the report rows a frame's marks refer to (by index).
    fn start(&mut self, _stages: &[String]) {}
    /// The sources will give `total` frames in all. Called once, as soon as every source knows
    /// its length (image sequences and test sources when they open, a media file declaring its
    /// duration once its first frame decoded); never when one cannot tell (a live or an
    /// application stream).
    fn expected_frames(&mut self, _total: u64) {}
    /// A batch reached the end of the pipeline.
    fn batch(&mut self, _batch: &CropBatch, _budget: Duration) {}
    /// The run is over: add to the report (lines in `report.extra`) or write files.
    fn finish(&mut self, _report: &mut Report) {}
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
