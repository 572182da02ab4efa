//! Batches of an `appinfer` stage in Python: the tensor for the application's model, which crop
//! each row is, and `set_labels` to send the model's answer back to the sinks.

use std::sync::Mutex;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use octopipe::appinfer::{LabelError, Labels, Reply, Row as LibRow};
use octopipe::AppBatch;

use crate::errors::{error, ClosedError};
use crate::image::{to_host, Interface};
use crate::tensor::Tensor;
use octopipe::ErrorKind;

/// Which crop a row of a batch's tensor is.
#[pyclass(frozen, module = "octopipe", get_all)]
pub struct Row {
    /// The frame's stream.
    stream: u32,
    /// The frame's number in its stream.
    frame: u64,
    /// The frame's source (image file name, pushed frame's name).
    source: String,
    /// The box's index among the frame's boxes (its place in `Frame.objects`).
    #[pyo3(name = "box")]
    box_index: u32,
    /// The box `(x, y, w, h)` in frame pixels, as cropped.
    bbox: (u32, u32, u32, u32),
    /// The first element of the row's values in the tensor.
    offset: usize,
    /// The row's output size `(width, height)`.
    size: (u32, u32),
}

impl From<&LibRow> for Row {
    fn from(r: &LibRow) -> Self {
        let [x, y, w, h] = r.bbox;
        Row {
            stream: r.stream,
            frame: r.frame,
            source: r.source.to_string(),
            box_index: r.box_index,
            bbox: (x, y, w, h),
            offset: r.offset,
            size: r.size,
        }
    }
}

#[pymethods]
impl Row {
    fn __repr__(&self) -> String {
        format!(
            "Row(stream={}, frame={}, box={}, bbox={:?})",
            self.stream, self.frame, self.box_index, self.bbox
        )
    }
}

/// One batch of an `appinfer` stage: run the model on `tensor`, then `set_labels(...)`.
#[pyclass(frozen, module = "octopipe")]
pub struct Batch {
    tensor: Py<Tensor>,
    rows: Vec<LibRow>,
    index: u64,
    reply: Mutex<Reply>,
}

impl Batch {
    pub fn new(py: Python<'_>, b: AppBatch) -> PyResult<Self> {
        let AppBatch {
            tensor,
            rows,
            reply,
            ..
        } = b;
        Ok(Batch {
            tensor: Py::new(py, Tensor::new(tensor))?,
            rows,
            index: reply.batch(),
            reply: Mutex::new(reply),
        })
    }
}

/// `x` as a C-contiguous NumPy array of `dtype`: its shape and a copy of its values.
fn values<T: Copy>(
    x: &Bound<'_, PyAny>,
    dtype: &str,
    what: &str,
) -> PyResult<(Vec<usize>, Vec<T>)> {
    let py = x.py();
    let np = py.import("numpy")?;
    let arr = np
        .call_method1("asarray", (to_host(x)?, dtype))
        .map_err(|e| PyTypeError::new_err(format!("{what}: {}", e.value(py))))?;
    let arr = np.call_method1("ascontiguousarray", (arr,))?;
    let ai = Interface::read(&arr.getattr("__array_interface__")?, what)?;
    let n: usize = ai.shape.iter().product();
    // SAFETY: a C-contiguous array of `n` values of `dtype` (T's size), held by `arr`.
    let v = unsafe { std::slice::from_raw_parts(ai.ptr as *const T, n) }.to_vec();
    Ok((ai.shape, v))
}

/// What `set_labels` was given, as the stage's [`Labels`].
fn labels_of(
    labels: &Bound<'_, PyAny>,
    scores: Option<&Bound<'_, PyAny>>,
    softmax: bool,
) -> PyResult<Labels> {
    let py = labels.py();
    let np = py.import("numpy")?;
    let arr = np.call_method1("asarray", (to_host(labels)?,))?;
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    let scores = match scores.filter(|s| !s.is_none()) {
        None => None,
        Some(s) => {
            let (shape, v) = values::<f32>(s, "float32", "scores")?;
            if shape.len() != 1 {
                return Err(PyValueError::new_err(format!(
                    "scores must be one number per row, found shape {shape:?}"
                )));
            }
            Some(v)
        }
    };
    match (kind.as_str(), ndim) {
        ("U" | "S" | "O", 1) => Ok(Labels::Names {
            names: arr
                .call_method0("tolist")?
                .extract()
                .map_err(|_| PyTypeError::new_err("labels given as names must all be str"))?,
            scores,
        }),
        ("i" | "u", 1) => {
            let (_, ids) = values::<i64>(&arr, "int64", "labels")?;
            let ids = ids
                .into_iter()
                .enumerate()
                .map(|(row, id)| {
                    u32::try_from(id).map_err(|_| {
                        PyValueError::new_err(format!(
                            "row {row}: class id {id} is negative or too large"
                        ))
                    })
                })
                .collect::<PyResult<Vec<u32>>>()?;
            Ok(Labels::Ids { ids, scores })
        }
        ("f", 2) => {
            if scores.is_some() {
                return Err(PyTypeError::new_err(
                    "scores= goes with class ids or names; a rows x classes array is the scores",
                ));
            }
            let (shape, values) = values::<f32>(&arr, "float32", "labels")?;
            Ok(Labels::Scores {
                values,
                classes: shape[1],
                softmax,
            })
        }
        (k, n) => Err(PyTypeError::new_err(format!(
            "labels must be one class id (int) or name (str) per row, or the model's scores as \
             a rows x classes float array; found a {n}-D array of dtype kind '{k}'"
        ))),
    }
}

#[pymethods]
impl Batch {
    /// The preprocessed crops, one row per crop (see `Tensor`).
    #[getter]
    fn tensor(&self, py: Python<'_>) -> Py<Tensor> {
        self.tensor.clone_ref(py)
    }

    /// Which stream, frame and box each row of the tensor is.
    #[getter]
    fn rows(&self) -> Vec<Row> {
        self.rows.iter().map(Row::from).collect()
    }

    /// The batch's number (0, 1, ... in the order the stage handed batches out).
    #[getter]
    fn index(&self) -> u64 {
        self.index
    }

    /// Send the model's answer for every row back to the pipeline (once): one class id (int)
    /// or name (str) per row, with optional `scores` (one per row, else 1.0); or the model's
    /// output, a rows x classes float array (logits: softmax and top-k as `classify` does;
    /// `softmax=False` for probabilities). Torch tensors (also on the GPU) and NumPy arrays are
    /// taken. The labels reach the sinks and `results()` as a classifier's would.
    #[pyo3(signature = (labels, scores=None, *, softmax=true))]
    fn set_labels(
        &self,
        labels: &Bound<'_, PyAny>,
        scores: Option<&Bound<'_, PyAny>>,
        softmax: bool,
    ) -> PyResult<()> {
        let labels = labels_of(labels, scores, softmax)?;
        let mut reply = self
            .reply
            .lock()
            .map_err(|_| error(ErrorKind::Internal, "batch: poisoned"))?;
        if reply.is_sent() {
            return Err(error(
                ErrorKind::Conflict,
                format!("batch {}: labels were given already", self.index),
            ));
        }
        reply.send(labels).map_err(|e| match e {
            LabelError::Gone { .. } => ClosedError::new_err(e.to_string()),
            other => PyValueError::new_err(other.to_string()),
        })
    }

    /// Whether labels were given.
    #[getter]
    fn labelled(&self) -> bool {
        self.reply.lock().map(|r| r.is_sent()).unwrap_or(true)
    }

    fn __len__(&self) -> usize {
        self.rows.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Batch(index={}, rows={}, tensor={})",
            self.index,
            self.rows.len(),
            self.tensor.get().__repr__()
        )
    }
}
