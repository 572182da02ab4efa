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

mod stage;
mod warm;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ort::session::{Session, SessionInputValue};

use crate::onnx::Sessions;
use ort::value::{TensorElementType, TensorRef, ValueType};

use crate::batch::CropBatch;
use crate::frame::{ClassScore, Classification};
use crate::onnx::{Ep, OnnxError, OnnxProps};
use crate::preprocess::{DType, Layout};
use crate::tensor::TensorData;
use octopipe_core::alloc::try_resize;

pub use crate::stage::{CropPlan, Reinfer, TrackLabels, REINFER_MAX_RESIZE};
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

/// Runtime state of the classify stage.
pub struct Classifier {
    config: ClassifyConfig,
    sessions: Sessions,
    input_name: String,
    output_name: String,
    input: ModelInput,
    layout: Layout,
    size: (u32, u32),
    /// Softmax scores of the last chunk, row by row.
    scores: Vec<f32>,
    /// Classes in the model's output (from the warm-up run).
    classes: usize,
    /// Rows of the last chunk whose logits were not finite, with `NaN` or `infinite`.
    non_finite: Vec<(usize, &'static str)>,
    /// Batches classified so far.
    batches: u64,
    /// Class names as shared strings, grown as class ids are met.
    names: Vec<Arc<str>>,
    /// A batch padded to the size the model runs at (host tensors on CUDA).
    padding: Vec<f32>,
}

impl Classifier {
    /// Load the model and check its input against `layout` (and `size` if given), and its
    /// classes against the labels. Returns the classifier and the crop size to use.
    pub fn new(
        config: ClassifyConfig,
        layout: Layout,
        size: Option<(u32, u32)>,
    ) -> Result<Self, ClassifyError> {
        let path = config.model.display().to_string();
        let model_err = |reason: String| ClassifyError::Model {
            path: path.clone(),
            reason,
        };
        let sessions = Sessions::open(&config.model, config.ort_threads, config.ep)?;
        let (input_name, input) = check_input(sessions.first(), &path, layout, size)?;
        let output_name = sessions
            .first()
            .outputs()
            .first()
            .map(|o| o.name().to_string())
            .ok_or_else(|| model_err("has no outputs".into()))?;
        let size = size
            .or(input.size)
            .ok_or_else(|| model_err("has a dynamic crop size: set preprocess size=WxH".into()))?;
        let mut classifier = Classifier {
            config,
            sessions,
            input_name,
            output_name,
            input,
            layout,
            size,
            scores: Vec::new(),
            classes: 0,
            non_finite: Vec::new(),
            batches: 0,
            names: Vec::new(),
            padding: Vec::new(),
        };
        classifier.warm_up()?;
        classifier.check_labels()?;
        Ok(classifier)
    }

    /// The batch size to run `m` crops at, with room for `room` rows in the input: the model's
    /// own batch size when it has one, else as [`Sessions::padded`] says.
    fn rows(&self, m: usize, room: usize) -> usize {
        match self.input.batch {
            Some(_) => m,
            None => self.sessions.padded(m, room),
        }
    }

    /// Given class names must name every class of the model, no more, no fewer.
    fn check_labels(&self) -> Result<(), ClassifyError> {
        let labels = &self.config.labels;
        if labels.is_empty() || labels.len() == self.classes {
            return Ok(());
        }
        let given = match &self.config.labels_file {
            Some(file) => format!("labels-file={}", file.display()),
            None => format!("labels={}", labels.join(",")),
        };
        Err(ClassifyError::Labels {
            path: self.config.model.display().to_string(),
            classes: self.classes,
            given,
            names: labels.len(),
        })
    }

    /// The crop size the model takes.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// The number of classes in the model's output.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The model file.
    pub fn model_path(&self) -> &Path {
        &self.config.model
    }

    /// Class name of `id`.
    pub fn label(&self, id: u32) -> String {
        self.config
            .labels
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| format!("class{id}"))
    }

    /// Class names, in class-index order.
    pub fn labels(&self) -> &[String] {
        &self.config.labels
    }

    /// The shared name of class `id`.
    fn name(&mut self, id: u32) -> Arc<str> {
        while self.names.len() <= id as usize {
            let next = self.names.len() as u32;
            self.names.push(Arc::from(self.label(next)));
        }
        self.names[id as usize].clone()
    }

    /// Classify every crop of `batch` (its f32 host tensor must be filled), writing each crop's
    /// [`Classification`] onto its detection. A crop whose logits are not finite fails the
    /// batch (`non-finite=error`) or is listed in its frame's `non_finite` with no
    /// classification (`non-finite=flag`); returns how many were flagged.
    pub fn classify(&mut self, batch: &mut CropBatch) -> Result<u64, ClassifyError> {
        let n = batch.crops.len();
        let (w, h) = (self.size.0 as usize, self.size.1 as usize);
        let per = 3 * w * h;
        let path = || self.config.model.display().to_string();
        let tensor = match &batch.tensor.data {
            TensorData::F32(v) => Input::Host(v),
            TensorData::Device(d)
                if self.sessions.cuda() == Some(d.device() as i32)
                    && batch.tensor.dtype == DType::F32 =>
            {
                Input::Device {
                    ptr: d.ptr(),
                    device: d.device(),
                }
            }
            _ => {
                return Err(ClassifyError::Run {
                    path: path(),
                    reason: format!(
                        "the classifier takes an f32 tensor in host memory (or in device memory with classify ep=cuda on that device), the batch holds {:?} in {} memory",
                        batch.tensor.dtype,
                        batch.tensor.memory()
                    ),
                });
            }
        };
        if batch.crops.iter().any(|c| (c.out_w, c.out_h) != self.size)
            || batch.tensor.len() < n * per
        {
            return Err(ClassifyError::Run {
                path: path(),
                reason: format!("batch crops are not all {w}x{h}"),
            });
        }
        let capacity = batch.tensor.device().map_or(usize::MAX, |d| d.capacity());
        if let Some(d) = batch.tensor.device() {
            // The sessions' CUDA stream waits for the preprocess kernel; the host does not.
            self.sessions.after(d.stream())?;
        }
        let chunk = self.input.batch.unwrap_or(self.config.max_batch.max(1));
        // Per crop: its ranked classes, or why it has none.
        let mut results: Vec<Result<Vec<(u32, f32)>, &'static str>> = Vec::with_capacity(n);
        let mut start = 0;
        while start < n {
            let m = chunk.min(n - start);
            let rows = self.rows(m, capacity.saturating_sub(start * per) / per);
            let shape = match self.layout {
                Layout::Nchw => [rows, 3, h, w],
                Layout::Nhwc => [rows, h, w, 3],
            };
            let mut padding = std::mem::take(&mut self.padding);
            let part = match tensor {
                Input::Host(v) if rows > m => {
                    // The padded rows' growth is fallible: memory refused is this batch's error.
                    padding.clear();
                    if let Err(e) = try_resize(&mut padding, rows * per, 0.0) {
                        return Err(ClassifyError::Model {
                            path: self.config.model.display().to_string(),
                            reason: format!("the input of {m} crops padded to {rows} rows {e}"),
                        });
                    }
                    padding[..m * per].copy_from_slice(&v[start * per..(start + m) * per]);
                    Input::Host(&padding)
                }
                Input::Host(v) => Input::Host(&v[start * per..(start + m) * per]),
                Input::Device { ptr, device } => Input::Device {
                    ptr: ptr + (start * per * std::mem::size_of::<f32>()) as u64,
                    device,
                },
            };
            let ran = self.run_chunk(shape, m, part);
            self.padding = padding;
            ran?;
            let classes = self.scores.len() / m;
            for i in 0..m {
                match self.non_finite.iter().find(|(row, _)| *row == i) {
                    Some((_, kind)) => results.push(Err(*kind)),
                    None => {
                        let row = i * classes..(i + 1) * classes;
                        results.push(Ok(top_k(&mut self.scores[row], self.config.top_k)));
                    }
                }
            }
            start += m;
        }
        let flagged = self.answer(batch, results)?;
        self.batches += 1;
        Ok(flagged)
    }

    /// Write each crop's answer onto its detection; a crop with none fails the batch or is
    /// flagged, as configured. Returns how many were flagged.
    fn answer(
        &mut self,
        batch: &mut CropBatch,
        results: Vec<Result<Vec<(u32, f32)>, &'static str>>,
    ) -> Result<u64, ClassifyError> {
        let mut flagged = 0;
        for (crop, (origin, ranked)) in batch.origins.iter().zip(results).enumerate() {
            let frame = &mut batch.frames[origin.frame as usize];
            let ranked = match ranked {
                Ok(ranked) => ranked,
                Err(kind) => {
                    let error = ClassifyError::NonFinite {
                        path: self.config.model.display().to_string(),
                        kind,
                        stream: frame.stream,
                        frame: frame.seq,
                        bbox: frame.detections[origin.detection as usize].bbox,
                        batch: self.batches,
                        crop,
                    };
                    if self.config.non_finite == NonFinite::Error {
                        return Err(error);
                    }
                    if flagged == 0 {
                        tracing::warn!("{error}: flagged");
                    }
                    frame.non_finite.push(origin.detection);
                    frame.detections[origin.detection as usize].classification = None;
                    flagged += 1;
                    continue;
                }
            };
            let mut scores = ranked.into_iter().map(|(id, score)| ClassScore {
                class_id: id,
                label: self.name(id),
                score,
            });
            let Some(best) = scores.next() else { continue };
            let c = Classification {
                best,
                topk: scores.collect(),
            };
            frame.detections[origin.detection as usize].classification = Some(c);
        }
        Ok(flagged)
    }

    /// Run one chunk of `shape[0]` rows of which the first `rows` are crops (the rest pad it to
    /// the size the model runs at); leaves the crops' softmax scores in `self.scores`, and in
    /// `self.non_finite` the rows whose logits were not finite (their scores are left as they came).
    fn run_chunk(
        &mut self,
        shape: [usize; 4],
        rows: usize,
        input: Input,
    ) -> Result<(), ClassifyError> {
        let path = self.config.model.display().to_string();
        let run_err = |e: ort::Error| ClassifyError::Run {
            path: path.clone(),
            reason: e.to_string(),
        };
        let value: SessionInputValue = match input {
            Input::Host(data) => TensorRef::from_array_view((shape, data))
                .map_err(run_err)?
                .into(),
            Input::Device { ptr, device } => {
                // The tensor stays where the preprocess stage left it: the model's input in
                // device memory, where the CUDA execution provider wants it; only the logits
                // come back (to host memory). (An IoBinding would clone a borrowed input first.)
                // SAFETY: `ptr` holds `shape`'s f32 elements on `device` (the batch tensor's
                // capacity was checked), kept alive by the batch's tensor for the whole run.
                unsafe { crate::onnx::cuda_input(ptr, device, &shape) }
                    .map_err(run_err)?
                    .into()
            }
        };
        let session = self.sessions.get(shape[0])?;
        let outputs = session
            .run(ort::inputs![self.input_name.as_str() => value])
            .map_err(run_err)?;
        let oshape =
            copy_logits(&outputs[self.output_name.as_str()], &mut self.scores).map_err(run_err)?;
        if oshape.len() != 2 || oshape[0] as usize != shape[0] || oshape[1] < 1 {
            return Err(ClassifyError::Run {
                path,
                reason: format!("output shape {oshape:?}, expected [{}, classes]", shape[0]),
            });
        }
        self.non_finite.clear();
        let classes = oshape[1] as usize;
        self.scores.truncate(rows * classes);
        for (i, row) in self.scores.chunks_mut(classes).enumerate() {
            // Softmax of a NaN or infinite logit is NaN: such a row has no answer.
            if row.iter().any(|x| x.is_nan()) {
                self.non_finite.push((i, "NaN"));
            } else if row.iter().any(|x| x.is_infinite()) {
                self.non_finite.push((i, "infinite"));
            } else {
                softmax(row);
            }
        }
        Ok(())
    }
}

/// Where a chunk of crops is: host memory, or device memory (an f32 pointer on a CUDA device).
#[derive(Clone, Copy)]
enum Input<'a> {
    Host(&'a [f32]),
    Device { ptr: u64, device: usize },
}

/// Copy an output's f32 values into `into` (cleared first); returns its shape.
fn copy_logits(value: &ort::value::DynValue, into: &mut Vec<f32>) -> ort::Result<Vec<i64>> {
    let (shape, logits) = value.try_extract_tensor::<f32>()?;
    into.clear();
    into.extend_from_slice(logits);
    Ok(shape.to_vec())
}

/// Check the model's first input against the preprocess settings.
fn check_input(
    session: &Session,
    path: &str,
    layout: Layout,
    size: Option<(u32, u32)>,
) -> Result<(String, ModelInput), ClassifyError> {
    let input = session
        .inputs()
        .first()
        .ok_or_else(|| ClassifyError::Model {
            path: path.into(),
            reason: "has no inputs".into(),
        })?;
    let name = input.name().to_string();
    let ValueType::Tensor { ty, shape, .. } = input.dtype() else {
        return Err(ClassifyError::Shape {
            path: path.into(),
            input: name,
            found: format!("{}", input.dtype()),
            expected: "a float32 tensor is needed".into(),
        });
    };
    let expected = match layout {
        Layout::Nchw => "[batch, 3, height, width] float32 is needed for layout=nchw",
        Layout::Nhwc => "[batch, height, width, 3] float32 is needed for layout=nhwc",
    };
    let found = format!("{ty:?} {:?}", &shape[..]);
    let bad = || ClassifyError::Shape {
        path: path.into(),
        input: name.clone(),
        found: found.clone(),
        expected: expected.into(),
    };
    if *ty != TensorElementType::Float32 || shape.len() != 4 {
        return Err(bad());
    }
    let (c, h, w) = match layout {
        Layout::Nchw => (shape[1], shape[2], shape[3]),
        Layout::Nhwc => (shape[3], shape[1], shape[2]),
    };
    if c != 3 && c != -1 {
        return Err(bad());
    }
    let side = i64::from(crate::stage::limits::MAX_INPUT_SIDE);
    if w > side || h > side {
        return Err(ClassifyError::Shape {
            path: path.into(),
            input: name,
            found,
            expected: format!("at most {side}x{side} pixels a model input may be"),
        });
    }
    let fixed = |d: i64| (d > 0).then_some(d as u32);
    let model_size = fixed(w).zip(fixed(h));
    if let (Some(want), Some(have)) = (size, model_size) {
        if want != have {
            return Err(ClassifyError::Shape {
                path: path.into(),
                input: name,
                found,
                expected: format!(
                    "preprocess size={}x{} was asked for (leave size unset to take the model's {}x{})",
                    want.0, want.1, have.0, have.1
                ),
            });
        }
    }
    Ok((
        name,
        ModelInput {
            batch: (shape[0] > 0).then_some(shape[0] as usize),
            size: model_size,
        },
    ))
}

/// In-place softmax.
pub fn softmax(v: &mut [f32]) {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

/// The best `k` (at least 1) of a score row, best first, as `(class, score)`.
pub(crate) fn top_k(scores: &mut [f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..scores.len() as u32).collect();
    idx.sort_by(|a, b| scores[*b as usize].total_cmp(&scores[*a as usize]));
    idx.truncate(k.max(1));
    idx.into_iter().map(|i| (i, scores[i as usize])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_and_top_k() {
        let mut v = [1.0, 3.0, 2.0, -1.0];
        softmax(&mut v);
        assert!((v.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let c = top_k(&mut v, 3);
        assert_eq!(c[0].0, 1);
        assert!((c[0].1 - 0.6572).abs() < 1e-3, "{}", c[0].1);
        assert_eq!(c.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2, 0]);
    }
}
