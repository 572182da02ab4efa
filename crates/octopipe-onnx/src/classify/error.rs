//! The classify stage's errors.

use crate::onnx::OnnxError;

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

impl octopipe_core::error::Kind for ClassifyError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            ClassifyError::Onnx(e) => octopipe_core::error::Kind::kind(e),
            ClassifyError::Model { .. }
            | ClassifyError::Shape { .. }
            | ClassifyError::Run { .. }
            | ClassifyError::Labels { .. }
            | ClassifyError::NonFinite { .. } => ErrorKind::Model,
        }
    }
}

octopipe_core::error::stage_error!(ClassifyError);
