//! What watches a run as it goes ([`Observer`]): the runner (`octopipe::pipeline`) calls it,
//! the observers (`octopipe::observe`, the control plane's metrics) implement it, and neither
//! needs the other's crate.

use std::time::Duration;

use crate::budget::Report;
use crate::crops::CropBatch;

/// Watches a run from the collector thread: every finished batch (frames with their timestamps
/// and detections and classifications, the crops' tensor; pixels only with
/// `Pipeline::keep_pixels`), then the report. Progress lines, metrics, plots and annotated
/// output are observers.
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
