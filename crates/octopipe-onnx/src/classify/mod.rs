//! Classify stage: ONNX Runtime on the preprocessed crops.
//!
//! ```text
//! ... ! preprocess ! classify model=visdrone-crops-64.onnx labels=person,two-wheeler,car,large-vehicle ! jsonl location=objects.jsonl
//! ```
//!
//! The model is checked at start-up against the preprocess settings (rank 4, f32, 3 channels where
//! the layout puts them, the crop size; a model with a fixed size gives the size when the
//! preprocess stage leaves it unset). Batches of any size are run in chunks of at most
//! `max-batch` crops (or the model's fixed batch size), followed by softmax and top-k.
//!
//! `labels` (or `labels-file`) must name exactly as many classes as the model's output has: a
//! list too short or too long is an error when the pipeline is built. A crop whose logits are
//! not finite (NaN or infinite) has no answer: by default the run fails naming the model and the
//! frame; with `non-finite=flag` the object is written with `"non_finite":true` and no label,
//! and the report counts it (`objects: N in = C classified + F non-finite + S skipped`).
//!
//! With `reinfer-interval=N` (N > 1) a tracked box is classified when its track first appears
//! and then every N frames of its stream; in between it takes its track's last label and no crop
//! is made of it ([`reinfer`](Reinfer): the batch stage decides, this stage fills the label in).
//! Such objects are written with `"reused":true`, and the report counts them
//! (`objects: N in = C classified + R reused + S skipped`).
//!
//! ONNX Runtime is loaded at run time ([`crate::onnx`]).

mod classifier;
mod scores;
mod stage;
mod warm;

use std::path::PathBuf;

use crate::onnx::{Ep, OnnxError, OnnxProps};

pub use crate::stage::{CropPlan, Reinfer, TrackLabels, REINFER_MAX_RESIZE};
pub use classifier::Classifier;
pub use scores::softmax;
pub(crate) use scores::top_k;
pub use stage::{ClassLabels, ClassifyProps, CLASSIFY};

/// What to do with a crop whose logits are not finite (NaN or infinite).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, crate::stage::PropChoice)]
#[non_exhaustive]
pub enum NonFinite {
    /// Fail the run, naming the model and the frame (the default).
    #[default]
    Error,
    /// Write the object flagged (`"non_finite":true`, no label, class or score) and count it in
    /// the report.
    Flag,
}

/// Settings of the classify stage.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifyConfig {
    /// The ONNX model file.
    pub model: PathBuf,
    /// Class names, in class-index order (empty: `class0`, `class1`, ...); when given, one per
    /// class of the model.
    pub labels: Vec<String>,
    /// The file `labels` were read from (`labels-file`), for messages and the input check.
    pub labels_file: Option<PathBuf>,
    /// What a crop with non-finite logits does.
    pub non_finite: NonFinite,
    /// Largest number of crops per inference call.
    pub max_batch: usize,
    /// Results kept per crop.
    pub top_k: usize,
    /// ONNX Runtime intra-op threads (0: its default).
    pub ort_threads: usize,
    /// Classify a tracked box every this many frames of its stream (1: every frame); in between
    /// it takes its track's last label, and no crop is made of it.
    pub reinfer_interval: u64,
    /// The execution provider.
    pub ep: Ep,
    /// Classifiers (each with its own ONNX Runtime sessions) that take batches in turn, the
    /// batches leaving in order: for a host where one session's call is the bottleneck.
    pub workers: usize,
}

impl ClassifyConfig {
    /// Defaults for `model` (each property's declared default, [`ClassifyProps`]).
    pub fn new(model: impl Into<PathBuf>) -> Self {
        ClassifyConfig::from(ClassifyProps {
            onnx: OnnxProps {
                model: model.into(),
                ..OnnxProps::default()
            },
            ..ClassifyProps::default()
        })
    }
}

/// Errors of the classify stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClassifyError {
    /// ONNX Runtime or the model could not be loaded.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// The model is not usable as a classifier.
    #[error("model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The model's input does not fit the preprocess settings.
    #[error("model {path}: input '{input}' is {found}, but {expected}")]
    Shape {
        /// The model file.
        path: String,
        /// Input name.
        input: String,
        /// What the model declares.
        found: String,
        /// What the preprocess settings need.
        expected: String,
    },
    /// Inference failed.
    #[error("model {path}: inference failed: {reason}")]
    Run {
        /// The model file.
        path: String,
        /// ONNX Runtime's message.
        reason: String,
    },
    /// The class names do not match the model's classes.
    #[error("model {path} has {classes} classes but {given} names {names}: give one name per class, in class-index order")]
    Labels {
        /// The model file.
        path: String,
        /// Classes in the model's output.
        classes: usize,
        /// Where the names came from: `labels=a,b,c` or `labels-file=FILE`.
        given: String,
        /// How many names it gave.
        names: usize,
    },
    /// The model's output for a crop was not finite (with `non-finite=error`).
    #[error("model {path}: {kind} logits for stream {stream} frame {frame}, box {bbox:?} (batch {batch}, crop {crop}): no class can be given (classify non-finite=flag writes such objects flagged instead)")]
    NonFinite {
        /// The model file.
        path: String,
        /// `NaN` or `infinite`.
        kind: &'static str,
        /// The frame's stream.
        stream: u32,
        /// The frame's number in its stream.
        frame: u64,
        /// The crop's box.
        bbox: [u32; 4],
        /// The batch's number in this run (0-based).
        batch: u64,
        /// The crop's index in the batch.
        crop: usize,
    },
}

impl crate::error::Kind for ClassifyError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            ClassifyError::Onnx(e) => crate::error::Kind::kind(e),
            ClassifyError::Model { .. }
            | ClassifyError::Shape { .. }
            | ClassifyError::Run { .. }
            | ClassifyError::Labels { .. }
            | ClassifyError::NonFinite { .. } => ErrorKind::Model,
        }
    }
}

crate::error::stage_error!(ClassifyError);

/// What a model's input says about the crops it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModelInput {
    /// Fixed batch size, if the model has one.
    pub batch: Option<usize>,
    /// Fixed crop (width, height), if the model has one.
    pub size: Option<(u32, u32)>,
}
