//! The `classify` stage's settings ([`ClassifyConfig`]), its properties declared once
//! ([`ClassifyProps`]) and its declaration ([`CLASSIFY`]).

use std::path::PathBuf;

use crate::onnx::{Ep, OnnxProps};
use octopipe_core::description::DescribeError;
use octopipe_core::stage::{Element, Properties, Props, Role, StageDecl};

/// What to do with a crop whose logits are not finite (NaN or infinite).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, octopipe_core::stage::PropChoice)]
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
    /// Its place among several classifiers on the same boxes, one after the other (`None`: it
    /// is the only one, and its answer is the box's `classification` alone).
    pub chain: Option<ChainPlace>,
    /// The priority of the model's CUDA stream.
    pub priority: octopipe_cuda::StreamPriority,
}

/// A classifier's place among several that classify the same boxes one after the other
/// (`... ! classify ! classify name=color ! ...`): each writes its answer on the box under its
/// name ([`Detection::classifications`](octopipe_core::frame::Detection::classifications)); the first
/// also writes the box's main result
/// ([`Detection::classification`](octopipe_core::frame::Detection::classification)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPlace {
    /// The classifier's name (see [`ChainPlace::default_name`]).
    pub name: std::sync::Arc<str>,
    /// Whether it is the first of the chain, whose answer is the box's main result.
    pub first: bool,
    /// With `reinfer-interval` above 1 (the same on every classifier of the chain), the one
    /// plan of reused labels they share: a box none of them crops, each gives its track's last
    /// answer; any of them missing one asks the batch stage for a crop.
    pub reinfer: Option<octopipe_core::stage::Reinfer>,
}

impl ChainPlace {
    /// The name of the classifier at `index` (from 0) of its chain that has no `name=`:
    /// `classify`, `classify1`, `classify2`, ...
    pub fn default_name(index: usize) -> String {
        match index {
            0 => "classify".to_string(),
            i => format!("classify{i}"),
        }
    }
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

/// The classify stage's properties, declared once: the table `inspect` shows and the
/// description is checked against ([`CLASSIFY`]), their defaults and their parsing;
/// [`ClassifyConfig`] is made from them. `threads` (ONNX Runtime's threads here before; CPU
/// preprocessing threads in every other stage) is refused, naming `ort-threads`.
#[derive(Debug, Clone, PartialEq, Properties)]
#[props(renamed(from = "threads", to = "ort-threads"))]
#[non_exhaustive]
pub struct ClassifyProps {
    /// The model, its class names, the execution provider, the GPU, ONNX Runtime's threads.
    #[prop(flatten)]
    pub onnx: OnnxProps,
    /// largest number of crops per inference call
    #[prop(default = 256, range = 1..=octopipe_core::stage::limits::MAX_BATCH)]
    pub max_batch: usize,
    /// results per crop
    #[prop(default = 1, range = 1..=1000)]
    pub top_k: usize,
    /// a crop with NaN or infinite logits fails the run, or is written flagged
    /// ("non_finite":true, no label) and counted
    #[prop(default = "error")]
    pub non_finite: NonFinite,
    /// classifiers, each with its own ONNX Runtime sessions, taking batches in turn (batches
    /// leave in order): where one classifier's calls in turn are the bottleneck (on CUDA, 2
    /// overlap one call's read-back with the next call; on a CPU host give each fewer ort-threads)
    #[prop(default = 1, range = 1..=64)]
    pub workers: usize,
    /// classify a tracked box every N frames of its stream; in between it reuses its track's
    /// label ("reused":true) and gets no crop
    #[prop(default = 1, range = 1..=octopipe_core::stage::limits::MAX_INTERVAL)]
    pub reinfer_interval: u64,
    /// on CUDA, the priority of the model's GPU work: high (the default) runs its small kernels
    /// ahead of the waiting work of normal streams (a detector's large calls), so that boxes
    /// already found are not kept waiting behind the next frames' detection
    #[prop(default = "high")]
    pub gpu_priority: octopipe_cuda::StreamPriority,
}

impl From<ClassifyProps> for ClassifyConfig {
    fn from(c: ClassifyProps) -> Self {
        ClassifyConfig {
            ep: c.onnx.ep(),
            model: c.onnx.model,
            labels: c.onnx.labels,
            labels_file: c.onnx.labels_file,
            non_finite: c.non_finite,
            max_batch: c.max_batch,
            top_k: c.top_k,
            ort_threads: c.onnx.ort_threads,
            reinfer_interval: c.reinfer_interval,
            workers: c.workers,
            chain: None,
            priority: c.gpu_priority,
        }
    }
}

/// `classify model=m.onnx labels=a,b,c`: ONNX Runtime on the batch's tensor.
pub const CLASSIFY: StageDecl = StageDecl {
    name: "classify",
    role: Role::Infer,
    doc: "ONNX Runtime classifier: softmax, top-k",
    props: ClassifyProps::PROPS,
    needs: &[Role::Boxes, Role::Batch, Role::Preprocess],
    provides: &[],
    make: classify_config,
};

/// [`ClassifyProps`], then the labels file and the checks across properties.
fn classify_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let mut c = ClassifyProps::from_props(p)?;
    c.onnx.read_labels_file("classify", p)?;
    if c.workers > 1 && c.reinfer_interval > 1 {
        return Err(p.error(
            "workers",
            "classify: workers above 1 need reinfer-interval=1 (a track's reused label comes \
             from the batch before, which another worker may not have finished)"
                .to_string(),
        ));
    }
    Ok(Box::new(ClassifyConfig::from(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::Ep;

    #[test]
    fn new_takes_the_declared_defaults_and_the_onnx_block_is_detects() {
        let c = ClassifyConfig::new("m.onnx");
        assert_eq!((c.max_batch, c.top_k, c.reinfer_interval), (256, 1, 1));
        assert_eq!((c.ep, c.ort_threads, c.workers), (Ep::Auto(0), 0, 1));
        assert_eq!(c.non_finite, NonFinite::Error);
        assert_eq!(c.priority, octopipe_cuda::StreamPriority::High);
        let onnx = OnnxProps::PROPS;
        assert_eq!(&CLASSIFY.props[..onnx.len()], onnx);
        assert_eq!(&crate::detect::DETECT.props[..onnx.len()], onnx);
    }
}
