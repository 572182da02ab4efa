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
//! Several classifiers one after the other on the same boxes (`... ! classify model=a.onnx !
//! classify name=color model=b.onnx ! ...`) each keep their answer on the box under their name
//! ([`ChainPlace`], told by the description's builder; without `name=`, `classify`,
//! `classify1`, ... in chain order); the first's stays the box's main result, and a later
//! classifier's non-finite output leaves it as it is. With `reinfer-interval` they reuse labels
//! together: the same interval on each, one plan shared ([`ChainPlace::reinfer`]), each giving a
//! reused box its own track's last answer.
//!
//! ONNX Runtime is loaded at run time ([`crate::onnx`]).
mod classifier;
mod config;
mod error;
mod scores;
mod stage;
mod warm;

pub use classifier::Classifier;
pub use config::{ChainPlace, ClassifyConfig, ClassifyProps, NonFinite, CLASSIFY};
pub use error::ClassifyError;
pub use octopipe_core::stage::{CropPlan, Reinfer, TrackLabels, REINFER_MAX_RESIZE};
pub use scores::softmax;
pub(crate) use scores::top_k;
pub use stage::ClassLabels;
