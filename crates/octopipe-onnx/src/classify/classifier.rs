//! The classifier at run time: the model's sessions, its input checked, crops run in chunks.

use std::path::Path;
use std::sync::Arc;

use ort::session::{Session, SessionInputValue};

use crate::onnx::Sessions;
use ort::value::{TensorElementType, TensorRef, ValueType};

use octopipe_core::alloc::try_resize;
use octopipe_core::frame::{ClassScore, Classification, NamedClassification};
use octopipe_core::tensor::TensorData;
use octopipe_stages::batch::CropBatch;
use octopipe_stages::preprocess::{DType, Layout};

use super::config::{ClassifyConfig, NonFinite};
use super::error::ClassifyError;
use super::scores::{softmax, top_k};

/// Runtime state of the classify stage.
pub struct Classifier {
    pub(super) config: ClassifyConfig,
    pub(super) sessions: Sessions,
    pub(super) input_name: String,
    pub(super) output_name: String,
    pub(super) input: ModelInput,
    pub(super) layout: Layout,
    pub(super) size: (u32, u32),
    /// Softmax scores of the last chunk, row by row.
    pub(super) scores: Vec<f32>,
    /// Classes in the model's output (from the warm-up run).
    pub(super) classes: usize,
    /// Rows of the last chunk whose logits were not finite, with `NaN` or `infinite`.
    pub(super) non_finite: Vec<(usize, &'static str)>,
    /// Batches classified so far.
    pub(super) batches: u64,
    /// Class names as shared strings, grown as class ids are met.
    pub(super) names: Vec<Arc<str>>,
    /// A batch padded to the size the model runs at (host tensors on CUDA).
    pub(super) padding: Vec<f32>,
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
        let options = crate::onnx::CudaOptions {
            priority: config.priority,
            ..Default::default()
        };
        let sessions = Sessions::open_with(&config.model, config.ort_threads, config.ep, options)?;
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
    pub(super) fn rows(&self, m: usize, room: usize) -> usize {
        match self.input.batch {
            Some(_) => m,
            None => self.sessions.padded(m, room),
        }
    }

    /// Given class names must name every class of the model, no more, no fewer.
    pub(super) fn check_labels(&self) -> Result<(), ClassifyError> {
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
    pub(super) fn name(&mut self, id: u32) -> Arc<str> {
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
        let tensor = match (&batch.tensor.data, batch.tensor.as_f32()) {
            (_, Some(v)) => Input::Host(v),
            (TensorData::Device(d), _)
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
    pub(super) fn answer(
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
                    if !frame.non_finite.contains(&origin.detection) {
                        frame.non_finite.push(origin.detection);
                    }
                    // A later classifier of a chain leaves the main result; it has no entry.
                    if self.config.chain.as_ref().is_none_or(|c| c.first) {
                        frame.detections[origin.detection as usize].classification = None;
                    }
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
            let det = &mut frame.detections[origin.detection as usize];
            match &self.config.chain {
                None => det.classification = Some(c),
                Some(place) => {
                    if place.first {
                        det.classification = Some(c.clone());
                    }
                    det.classifications.push(NamedClassification {
                        classifier: place.name.clone(),
                        classification: c,
                    });
                }
            }
        }
        Ok(flagged)
    }

    /// Run one chunk of `shape[0]` rows of which the first `rows` are crops (the rest pad it to
    /// the size the model runs at); leaves the crops' softmax scores in `self.scores`, and in
    /// `self.non_finite` the rows whose logits were not finite (their scores are left as they came).
    pub(super) fn run_chunk(
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
pub(super) enum Input<'a> {
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
    let side = i64::from(octopipe_core::stage::limits::MAX_INPUT_SIDE);
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

/// What a model's input says about the crops it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModelInput {
    /// Fixed batch size, if the model has one.
    pub batch: Option<usize>,
    /// Fixed crop (width, height), if the model has one.
    pub size: Option<(u32, u32)>,
}
