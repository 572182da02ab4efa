//! The `classify` stage at run time: the stage that runs the [`Classifier`] on each batch, and
//! the class names it tells the stages after it ([`ClassLabels`]).

use super::classifier::Classifier;
use super::config::ClassifyConfig;
use super::error::ClassifyError;
use super::{Reinfer, TrackLabels};
use octopipe_core::error::Error;
use octopipe_core::files::RunPath;
use octopipe_core::stage::{Element, OpenContext, Running, Stage};
use octopipe_core::tensor::DType;
use octopipe_stages::batch::CropBatch;
use octopipe_stages::preprocess::PreprocessConfig;

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
        // The classifier takes float32 crops: a preprocess stage that makes others is refused
        // here, before any frame, not at the first inference.
        if preprocess.dtype != DType::F32 {
            let dtype = format!("{:?}", preprocess.dtype).to_lowercase();
            return Err(ClassifyError::Model {
                path: self.model.display().to_string(),
                reason: format!(
                    "it takes float32 crops, but the preprocess stage before it makes {dtype} (preprocess dtype={dtype}): give preprocess dtype=f32 (the default)"
                ),
            }
            .into());
        }
        let interval = self.reinfer_interval;
        // A chain's classifiers share the plan the description's builder gave them.
        let reinfer = (interval > 1).then(|| {
            self.chain
                .as_ref()
                .and_then(|c| c.reinfer.clone())
                .unwrap_or_else(|| Reinfer::new(interval))
        });
        let labels = reinfer.as_ref().map(|r| match &self.chain {
            Some(place) => r.chain_labels(place.name.clone(), place.first),
            None => r.labels(),
        });
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
