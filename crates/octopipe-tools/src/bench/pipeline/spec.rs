//! What one run of the pipeline benchmark is: its streams, where each stage runs, and the
//! detector's settings when there is one.

use std::path::PathBuf;

use super::compute::Compute;
use super::images::ImageStreams;

/// One run: its streams and where each stage runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// Streams (branches into the one batch stage).
    pub streams: usize,
    /// The `media` decoder (`cpu`, `nvdec`, `auto`).
    pub decoder: String,
    /// The classifier's execution provider.
    pub ep: Compute,
    /// The preprocess backend.
    pub backend: Compute,
    /// Synthetic boxes per frame.
    pub boxes: u32,
    /// Largest number of frames in one batch.
    pub batch_frames: usize,
    /// Play at 30 fps (`media live=true`).
    pub live: bool,
    /// The GPUs the streams are spread over (empty: GPU 0).
    pub devices: Vec<usize>,
    /// Classifiers per chain (`classify workers=`).
    pub workers: usize,
    /// `preprocess gather=` of the CUDA backend (`None`: not written).
    pub gather: Option<String>,
    /// A detector shared by the streams, and a tracker (`None`: synthetic boxes).
    pub detector: Option<DetectBench>,
    /// Image streams of a folder (`decoder` is then the `images` stage's) instead of the video.
    pub images: Option<ImageStreams>,
    /// Classifier stages, one after the other (the second and later: copies of the model with
    /// labels of their own).
    pub classifiers: usize,
    /// `classify reinfer-interval` of every classifier (1: not written, every box classified).
    pub reinfer: u64,
    /// More properties of the preprocess stage, as written in a description (empty: none).
    pub preprocess_props: String,
    /// More properties of every classify stage, as written in a description (empty: none).
    pub classify_props: String,
    /// The pipeline's per-frame budget, ms (`None`: its default, one frame interval).
    pub budget_ms: Option<f64>,
}

/// The detector's settings in the benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectBench {
    /// The ONNX detector (the shared CenterNet's form: NHWC RGB 0..255, COCO classes).
    pub model: PathBuf,
    /// Tile size.
    pub tiles: (u32, u32),
    /// `detect interval`.
    pub interval: u64,
    /// `detect max-batch`: most tiles per call.
    pub max_batch: usize,
    /// Each stream its own detect and track stages (the baseline) instead of one shared.
    pub per_stream: bool,
    /// Frames each stream's live edge into the shared detect holds (`queue size=N` before it;
    /// `None`: the pipeline's default).
    pub queue: Option<usize>,
    /// More detect properties, as written in a description (with `labels=` or `labels-file=`
    /// for a model cut to some classes, in place of `labels=coco`).
    pub props: String,
}

/// Append the more properties a user gave a stage (`--detector-props`, `--preprocess-props`,
/// `--classify-props`) to its line of the description, as written; nothing when they are blank.
pub(super) fn push_props(line: &mut String, props: &str) {
    let props = props.trim();
    if !props.is_empty() {
        line.push(' ');
        line.push_str(props);
    }
}
