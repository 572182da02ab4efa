//! `octopipe.Pipeline`, the Python object: made from a description or from stages, pushed into,
//! read from, closed and stopped.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crossbeam_channel::bounded;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::inner::{no_appinfer, Inner, ResultsQueue, State};
use super::iter::{Batches, Results};
use crate::errors::{error, push_to_py, ClosedError};
use crate::image;
use crate::results::ResultsObserver;
use crate::wait;
use octopipe::ErrorKind;

/// Finished frames the results channel holds before the pipeline waits for its reader.
pub const RESULTS_CAPACITY: usize = 64;
/// A pipeline built from a description (`octopipe run`'s language: a `.pipe` file or the text
/// itself, `${name}` from `vars`), opened (models loaded, files and devices checked) and
/// ready to run.
///
/// It starts at the first `push()`, the first item of `results()` or `batches()`, or
/// `close()`; call `results()` before that to collect results. `close()` ends the pushed
/// streams and waits for the pipeline to finish what it has; `stop()` stops it now. As a
/// context manager it closes at the end of the block (stops if the block raised).
#[pyclass(frozen, module = "octopipe")]
pub struct Pipeline {
    pub(super) inner: Arc<Inner>,
}

#[pymethods]
impl Pipeline {
    #[new]
    #[pyo3(signature = (description, vars=None, force=false))]
    fn new(
        py: Python<'_>,
        description: &str,
        vars: Option<&Bound<'_, PyDict>>,
        force: bool,
    ) -> PyResult<Self> {
        Pipeline::open(py, description, vars, force)
    }

    /// A pipeline of one chain of `stages`, each a `(kind, props)` pair (`props` a dict of
    /// property names or keywords to Python values, checked as `octopipe.stage()` checks them)
    /// or a stage's text (`str`: what `octopipe.stage()` gives, or a description fragment such
    /// as a GStreamer head), joined by ` ! ` into a description (never read as a file name).
    /// `vars` fill the `${name}`s of text entries; values from dicts are written as they are.
    #[staticmethod]
    #[pyo3(signature = (stages, vars=None, force=false))]
    fn from_stages(
        py: Python<'_>,
        stages: &Bound<'_, PyAny>,
        vars: Option<&Bound<'_, PyDict>>,
        force: bool,
    ) -> PyResult<Self> {
        let text = crate::stages::chain_text(py, stages)?;
        Pipeline::open_text(py, octopipe::describe::COMMAND_LINE, text, vars, force)
    }

    /// An iterator of the frames as they finish (`Frame`: stream, index, pts_ms, source,
    /// objects). Call it before the pipeline starts (the first push): results are collected
    /// from then on, up to 64 frames not read yet: past that the pipeline (and `push()`) waits
    /// for a reader, so read them between pushes or on another thread. The iterator ends when
    /// the pipeline has ended, raising `octopipe.Error` if the run failed.
    fn results(&self) -> PyResult<Results> {
        let inner = &self.inner;
        if inner.results.get().is_none() {
            let mut st = inner
                .state
                .lock()
                .map_err(|_| error(ErrorKind::Internal, "pipeline: poisoned"))?;
            match &mut *st {
                State::Built(p) => {
                    let (tx, rx) = bounded(RESULTS_CAPACITY);
                    p.observe(Box::new(ResultsObserver::new(tx, inner.abandon.clone())));
                    let _ = inner.results.set(Mutex::new(ResultsQueue {
                        rx,
                        kept: VecDeque::new(),
                    }));
                }
                State::Started => {
                    return Err(error(
                        ErrorKind::Conflict,
                        "results() must be called before the pipeline starts (it started at \
                         the first push, batch or close): call it first, e.g. \
                         `frames = pipeline.results()` right after Pipeline(...)",
                    ))
                }
            }
        }
        Ok(Results {
            inner: inner.clone(),
        })
    }

    /// An iterator of the batches of the pipeline's `appinfer` stage (`Batch`: tensor, rows,
    /// set_labels). Each batch waits for its labels (or for the Batch to be dropped) before it
    /// goes on to the sinks. Ends when the stage has ended.
    fn batches(&self) -> PyResult<Batches> {
        if self.inner.infer.is_none() {
            return Err(no_appinfer());
        }
        self.inner.infer_taken.store(true, Ordering::SeqCst);
        Ok(Batches {
            inner: self.inner.clone(),
        })
    }

    /// Push one frame into the app source `stream` (its `name=`, or its stream id): a NumPy
    /// uint8 array HxWx3 (RGB, or BGR with format='bgr') or HxWx4 (RGBA/BGRA); a 2-D array only
    /// with its format, never guessed: HxW grey with format='gray8' (each of the model's
    /// channels gets the grey value; a little-endian uint16 one with format='gray16', brought
    /// onto 0..255 by the CPU preprocess), (H*3/2)xW with format='nv12' or 'i420'; copied; or a
    /// CUDA tensor (`__dlpack__`, `__cuda_array_interface__`) taken where it is, without a
    /// copy, for a pipeline whose preprocess stage runs on that GPU. `boxes`: N x 4 `x, y, w, h` in pixels. `pts_ms`: its
    /// presentation time. Waits while the pipeline is full (GIL released; Ctrl-C stops), or
    /// with `block=False` raises `octopipe.FullError`. A bad array raises `TypeError` (dtype,
    /// type) or `ValueError` (shape, strides, device); a closed pipeline `octopipe.ClosedError`.
    #[pyo3(signature = (stream, image, boxes=None, pts_ms=None, *, block=true, name=None, format=None))]
    #[allow(clippy::too_many_arguments)]
    fn push(
        &self,
        py: Python<'_>,
        stream: &Bound<'_, PyAny>,
        image: &Bound<'_, PyAny>,
        boxes: Option<&Bound<'_, PyAny>>,
        pts_ms: Option<f64>,
        block: bool,
        name: Option<String>,
        format: Option<&str>,
    ) -> PyResult<()> {
        let inner = &self.inner;
        let app = inner.app_for(stream)?;
        let mut frame =
            image::app_frame(image, format, &inner.device)?.boxes(image::boxes_of(boxes)?);
        if let Some(ms) = pts_ms {
            frame = frame.pts(crate::duration::from_millis("pts_ms", ms)?);
        }
        if let Some(name) = name {
            frame = frame.name(name);
        }
        inner.ensure_started()?;
        let mut signal = None;
        let pushed = match block {
            true => py.detach(|| app.push_while(frame, || wait::no_signal(&mut signal))),
            false => py.detach(|| app.try_push(frame)),
        };
        if let Some(e) = signal {
            py.detach(|| inner.stop_and_wait());
            return Err(e);
        }
        pushed.map_err(|e| match (&e, inner.error()) {
            (octopipe::PushError::Stopped { .. }, Some((run, _))) => {
                ClosedError::new_err(format!("{e}: the run failed: {run}"))
            }
            _ => push_to_py(e),
        })
    }

    /// End the pushed streams and (with `wait`, the default) wait for the pipeline to finish
    /// what it has: every frame pushed reaches the sinks (and `results()`, which keeps the
    /// frames not read yet). Raises `octopipe.Error` (with `report`) if the run failed.
    /// Batches of an `appinfer` stage whose batches were never asked for go on unlabelled.
    #[pyo3(signature = (wait=true))]
    fn close(&self, py: Python<'_>, wait: bool) -> PyResult<()> {
        self.inner.close(py, wait)
    }

    /// Stop now: sources end, frames in flight get the stop grace (1 s) to finish, the rest
    /// is counted in the report; later pushes raise `octopipe.ClosedError`. Returns once the
    /// run has ended.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        // A pipeline that never started runs (and ends at once), so that it has its report.
        self.inner.ensure_started()?;
        py.detach(|| self.inner.stop_and_wait());
        Ok(())
    }

    /// The run's report (the fields of `octopipe run --report json`) once it has ended, else
    /// None.
    #[getter]
    fn report(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.inner.report(py)
    }

    /// The first error of a stage once the run has ended with one, else None.
    #[getter]
    fn error(&self) -> Option<String> {
        self.inner.error().map(|(message, _)| message)
    }

    /// Whether the pipeline has started and not ended.
    #[getter]
    fn running(&self) -> bool {
        let started = matches!(self.inner.state.lock().as_deref(), Ok(State::Started));
        started && !self.inner.is_over()
    }

    /// The report's rows: the stages, in pipeline order.
    #[getter]
    fn stages(&self) -> Vec<String> {
        self.inner.stages.clone()
    }

    /// The class names the classifier (or `appinfer labels=`) gives, in class-id order.
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.inner.labels.clone()
    }

    /// The app sources frames can be pushed into: `[(name, stream id)]`, in stream order.
    #[getter]
    fn app_sources(&self) -> Vec<(String, u32)> {
        self.inner
            .apps
            .iter()
            .map(|a| (a.name().to_string(), a.stream()))
            .collect()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            self.inner.close(py, true)?;
        } else {
            self.stop(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let text: String = self
            .inner
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let short: String = text.chars().take(80).collect();
        let more = if text.chars().count() > 80 { "..." } else { "" };
        format!("Pipeline({short:?}{more})")
    }
}
