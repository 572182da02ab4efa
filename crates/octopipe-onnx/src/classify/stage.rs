//! The `classify` stage: its declaration and properties, and the stage that runs the
//! [`Classifier`] on each batch.

use super::classifier::Classifier;
use super::{ClassifyConfig, NonFinite, Reinfer, TrackLabels};
use crate::batch::CropBatch;
use crate::description::DescribeError;
use crate::files::RunPath;
use crate::onnx::OnnxProps;
use crate::preprocess::PreprocessConfig;
use crate::stage::{Element, OpenContext, Properties, Props, Role, Running, Stage, StageDecl};
use crate::Error;

/// In the caps: the class names of the model that labels the crops, told when it opens (by
/// `classify`, or by `appinfer` when the application gave names).
/// `pipeline.caps().get::<ClassLabels>()` reads them once the pipeline is built.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassLabels(pub Vec<String>);

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
        // The preprocess settings (told by the preprocess stage), their size settled here.
        let mut preprocess = ctx
            .caps
            .get::<PreprocessConfig>()
            .cloned()
            .unwrap_or_default();
        let interval = self.reinfer_interval;
        // Workers past the first, each with its sessions (`workers` > 1 excludes reused labels).
        let more = (1..self.workers.max(1))
            .map(|_| Classifier::new((*self).clone(), preprocess.layout, preprocess.size))
            .collect::<Result<Vec<_>, _>>()?;
        let classifier = Classifier::new(*self, preprocess.layout, preprocess.size)?;
        preprocess.size = Some(classifier.size());
        ctx.caps.insert(preprocess);
        ctx.caps.insert(ClassLabels(classifier.labels().to_vec()));
        ctx.tally.with(|t| t.set_classifier());
        // Opened before the batch stage, which reads it to make no crop of reused boxes.
        let reinfer = (interval > 1).then(|| Reinfer::new(interval));
        let labels = reinfer.as_ref().map(Reinfer::labels);
        match reinfer {
            Some(reinfer) => ctx.caps.insert(reinfer),
            None => ctx.caps.remove::<Reinfer>(),
        };
        if more.is_empty() {
            return Ok(Running::stage(Box::new(ClassifyStage(classifier, labels))));
        }
        Ok(Running::workers(
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
    #[prop(default = 256, range = 1..=crate::stage::limits::MAX_BATCH)]
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
    #[prop(default = 1, range = 1..=1_000_000)]
    pub reinfer_interval: u64,
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
        let onnx = OnnxProps::PROPS;
        assert_eq!(&CLASSIFY.props[..onnx.len()], onnx);
        assert_eq!(&crate::detect::DETECT.props[..onnx.len()], onnx);
    }
}
