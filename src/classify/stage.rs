//! The `classify` stage: its declaration and properties, and the stage that runs the
//! [`Classifier`] on each batch.

use std::path::{Path, PathBuf};

use super::{Classifier, ClassifyConfig, NonFinite, Reinfer, TrackLabels};
use crate::batch::CropBatch;
use crate::description::DescribeError;
use crate::files::RunPath;
use crate::onnx::Ep;
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Props, Role, Running, Stage, StageDecl,
};
use crate::Error;

/// The classify stage at run time: the classifier, and each track's last label when labels
/// are reused.
struct ClassifyStage(Classifier, Option<TrackLabels>);

impl Stage<CropBatch, CropBatch> for ClassifyStage {
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        // Flagged and reused objects are counted by the report from their frames.
        self.0.classify(&mut batch)?;
        if let Some(labels) = &mut self.1 {
            labels.fill(&mut batch);
        }
        out.push(batch);
        Ok(())
    }
}

impl Element for ClassifyConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let preprocess = ctx.caps.preprocess.get_or_insert_with(Default::default);
        let interval = self.reinfer_interval;
        // Workers past the first, each with its sessions (`workers` > 1 excludes reused labels).
        let more = (1..self.workers.max(1))
            .map(|_| Classifier::new((*self).clone(), preprocess.layout, preprocess.size))
            .collect::<Result<Vec<_>, _>>()?;
        let classifier = Classifier::new(*self, preprocess.layout, preprocess.size)?;
        preprocess.size = Some(classifier.size());
        ctx.caps.labels = classifier.labels().to_vec();
        ctx.tally.with(|t| t.set_classifier());
        // Opened before the batch stage, which reads it to make no crop of reused boxes.
        let reinfer = (interval > 1).then(|| Reinfer::new(interval));
        let labels = reinfer.as_ref().map(Reinfer::labels);
        ctx.caps.reinfer = reinfer;
        if more.is_empty() {
            return Ok(Running::Batches(Box::new(ClassifyStage(
                classifier, labels,
            ))));
        }
        Ok(Running::Workers(
            std::iter::once(classifier)
                .chain(more)
                .map(|c| Box::new(ClassifyStage(c, None)) as Box<dyn Stage<CropBatch, CropBatch>>)
                .collect(),
        ))
    }
    fn inputs(&self) -> Vec<RunPath> {
        let mut inputs = vec![RunPath::file("classify model", &self.model)];
        if let Some(file) = &self.labels_file {
            inputs.push(RunPath::file("classify labels-file", file));
        }
        inputs
    }
}

/// `classify model=m.onnx labels=a,b,c`: ONNX Runtime on the batch's tensor.
pub const CLASSIFY: StageDecl = StageDecl {
    name: "classify",
    role: Role::Infer,
    doc: "ONNX Runtime classifier: softmax, top-k",
    props: &[
        PropSpec::new("model", PropType::Path, "-", "the .onnx file"),
        PropSpec::new(
            "labels",
            PropType::List,
            "class0,...",
            "class names in class-index order, one per class of the model",
        ),
        PropSpec::new(
            "labels-file",
            PropType::Path,
            "-",
            "a file with one class name per line, one per class of the model",
        ),
        PropSpec::new(
            "max-batch",
            PropType::POSITIVE,
            "256",
            "largest number of crops per inference call",
        ),
        PropSpec::new("top-k", PropType::POSITIVE, "1", "results per crop"),
        PropSpec::new(
            "threads",
            PropType::COUNT,
            "0",
            "ONNX Runtime intra-op threads (0: its default)",
        ),
        PropSpec::new(
            "ep",
            PropType::Choice(&["auto", "cpu", "cuda"]),
            "auto",
            "ONNX Runtime execution provider (auto: CUDA when its build has it and a GPU is present; cuda reads a preprocess memory=device tensor where it is)",
        ),
        PropSpec::new(
            "device",
            PropType::COUNT,
            "0",
            "with ep=cuda or auto: the GPU",
        ),
        PropSpec::new(
            "non-finite",
            PropType::Choice(&["error", "flag"]),
            "error",
            "a crop with NaN or infinite logits fails the run, or is written flagged (\"non_finite\":true, no label) and counted",
        ),
        PropSpec::new(
            "workers",
            PropType::POSITIVE,
            "1",
            "classifiers, each with its own ONNX Runtime sessions, taking batches in turn (batches leave in order): for a CPU host where one session's call is the bottleneck; give each fewer threads",
        ),
        PropSpec::new(
            "reinfer-interval",
            PropType::POSITIVE,
            "1",
            "classify a tracked box every N frames of its stream; in between it reuses its track's label (\"reused\":true) and gets no crop",
        ),
    ],
    needs: &[Role::Boxes, Role::Batch, Role::Preprocess],
    provides: &[],
    make: classify_config,
};

fn classify_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let mut cfg = ClassifyConfig::new(p.required("model")?);
    if let Some(l) = p.given("labels") {
        cfg.labels = l.split(',').map(|s| s.trim().to_string()).collect();
    }
    if let Some(f) = p.given("labels-file") {
        cfg.labels = crate::onnx::read_labels(Path::new(f)).map_err(|e| {
            p.error(
                "labels-file",
                format!("classify: cannot read labels-file '{f}': {e}"),
            )
        })?;
        cfg.labels_file = Some(PathBuf::from(f));
    }
    cfg.max_batch = p.usize("max-batch").unwrap_or(cfg.max_batch);
    cfg.top_k = p.usize("top-k").unwrap_or(cfg.top_k);
    cfg.threads = p.usize("threads").unwrap_or(cfg.threads);
    cfg.reinfer_interval = p
        .int("reinfer-interval")
        .map_or(cfg.reinfer_interval, |v| v as u64);
    cfg.workers = p.usize("workers").unwrap_or(1);
    if cfg.workers > 1 && cfg.reinfer_interval > 1 {
        return Err(p.error(
            "workers",
            "classify: workers above 1 need reinfer-interval=1 (a track's reused label comes \
             from the batch before, which another worker may not have finished)"
                .to_string(),
        ));
    }
    cfg.non_finite = match p.str("non-finite") {
        Some("flag") => NonFinite::Flag,
        _ => NonFinite::Error,
    };
    let device = p.int("device").unwrap_or(0).clamp(0, i32::MAX as i64) as i32;
    cfg.ep = match p.str("ep") {
        Some("cpu") => Ep::Cpu,
        Some("cuda") => Ep::Cuda(device),
        _ => Ep::Auto(device),
    };
    Ok(Box::new(cfg))
}
