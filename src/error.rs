//! The crate's error: one variant per layer.

use crate::appinfer::AppInferError;
use crate::boxes::BoxesError;
use crate::classify::ClassifyError;
use crate::description::DescribeError;
use crate::detect::DetectError;
use crate::pipeline::PipelineError;
use crate::preprocess::PreprocessError;
use crate::sink::SinkError;
use crate::source::{PushError, SourceError};
use crate::tiles::TilesError;
use crate::tilestats::TileStatsError;

/// Any error octopipe reports. Each layer's message names the input it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pipeline description.
    #[error(transparent)]
    Describe(#[from] DescribeError),
    /// Decoding.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Boxes.
    #[error(transparent)]
    Boxes(#[from] BoxesError),
    /// The detector.
    #[error(transparent)]
    Detect(#[from] DetectError),
    /// Cutting frames into tiles.
    #[error(transparent)]
    Tiles(#[from] TilesError),
    /// Per-tile statistics.
    #[error(transparent)]
    TileStats(#[from] TileStatsError),
    /// Crop/resize/normalize.
    #[error(transparent)]
    Preprocess(#[from] PreprocessError),
    /// The classifier.
    #[error(transparent)]
    Classify(#[from] ClassifyError),
    /// The application's own model.
    #[error(transparent)]
    AppInfer(#[from] AppInferError),
    /// Output.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// A frame the application pushed.
    #[error(transparent)]
    Push(#[from] PushError),
    /// The runner (a graph that cannot run as wired).
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}
