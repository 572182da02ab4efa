//! `octopipe.Pipeline`: a pipeline built from its description, run on threads of its own, fed
//! and read from Python.
//!
//! The pipeline is built (every stage opened) when the object is made, and starts running at
//! the first `push()`, the first result or batch asked for, or `close()`. Results are collected
//! when `results()` was called before it started; then a reader that falls behind holds the
//! pipeline back (a bounded channel of [`RESULTS_CAPACITY`] frames), and `close()` keeps what
//! was not read yet for the iterator.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use octopipe::appinfer::NoBatch;
use octopipe::{AppBatch, AppInfer, AppSource, StopHandle};

use crate::errors::{error, push_to_py, python_words, with_report, ClosedError, Error};
use crate::image::{self, DevicePolicy};
use crate::results::{FrameItem, ResultsObserver};
use crate::wait::{self, TICK};
use octopipe::ErrorKind;

mod iter;
mod open;

pub use iter::{Batches, Results};

/// Finished frames the results channel holds before the pipeline waits for its reader.
pub const RESULTS_CAPACITY: usize = 64;

/// Where the run is.
enum State {
    /// Built, not started: results may still be asked for.
    Built(Box<octopipe::Pipeline>),
    /// Started (on its thread, or over).
    Started,
}

/// What a finished run left.
struct Ended {
    /// The report, as `octopipe run --report json` writes it.
    report: String,
    /// The first error of a stage, if any: its message and kind.
    error: Option<(String, octopipe::ErrorKind)>,
}

/// The results channel, and what `close()` took from it before the application read it.
struct ResultsQueue {
    rx: Receiver<FrameItem>,
    kept: VecDeque<FrameItem>,
}

/// The pipeline's state, shared by the `Pipeline` object and its iterators.
pub struct Inner {
    description: String,
    state: Mutex<State>,
    apps: Vec<AppSource>,
    infer: Option<AppInfer>,
    /// `batches()` was asked for: the application takes the `appinfer` stage's batches.
    infer_taken: AtomicBool,
    stop: StopHandle,
    results: OnceLock<Mutex<ResultsQueue>>,
    /// The application stopped reading results: the observer drops them.
    abandon: Arc<AtomicBool>,
    ended: Arc<Mutex<Option<Ended>>>,
    /// Disconnected once the run's thread is done (`None` until it started).
    done: Mutex<Option<Receiver<()>>>,
    device: DevicePolicy,
    stages: Vec<String>,
    labels: Vec<String>,
}

impl Inner {
    /// Start the run if it has not started.
    fn ensure_started(&self) -> PyResult<()> {
        let mut st = self
            .state
            .lock()
            .map_err(|_| error(ErrorKind::Internal, "pipeline: poisoned"))?;
        if !matches!(*st, State::Built(_)) {
            return Ok(());
        }
        let State::Built(p) = std::mem::replace(&mut *st, State::Started) else {
            return Ok(());
        };
        let ended = self.ended.clone();
        let (done_tx, done_rx) = bounded::<()>(0);
        std::thread::Builder::new()
            .name("octopipe-run".into())
            .spawn(move || {
                let outcome = p.run();
                let report = serde_json::to_string(&outcome.report)
                    .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
                if let Ok(mut slot) = ended.lock() {
                    *slot = Some(Ended {
                        report,
                        error: outcome.error.map(|e| (e.to_string(), e.kind())),
                    });
                }
                drop(done_tx);
            })
            .map_err(|e| {
                error(
                    ErrorKind::Internal,
                    format!("cannot start the pipeline's thread: {e}"),
                )
            })?;
        if let Ok(mut done) = self.done.lock() {
            *done = Some(done_rx);
        }
        Ok(())
    }

    /// Whether the run's thread is done (false before it started).
    fn is_over(&self) -> bool {
        self.ended.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    /// Stop now: sources end, pushes and the observer give up, the `appinfer` stage passes its
    /// batches on unlabelled. Does not wait.
    fn stop_now(&self) {
        self.stop.stop();
        self.abandon.store(true, Ordering::SeqCst);
        for app in &self.apps {
            app.close_while(|| false);
        }
        if let Some(infer) = &self.infer {
            infer.close();
        }
    }

    /// Stop, and wait (ignoring signals) for the run to end: at most its stop grace.
    fn stop_and_wait(&self) {
        self.stop_now();
        let done = self.done.lock().ok().and_then(|d| d.clone());
        if let Some(done) = done {
            let _ = done.recv();
        }
    }

    /// Move the results not read yet out of the channel (keeping them), so the pipeline does
    /// not wait for a reader.
    fn keep_results(&self) {
        if let Some(q) = self.results.get() {
            if let Ok(mut q) = q.try_lock() {
                while let Ok(item) = q.rx.try_recv() {
                    q.kept.push_back(item);
                }
            }
        }
    }

    /// Wait until the run's thread is done (GIL released, Ctrl-C stops the pipeline).
    fn wait_end(&self, py: Python<'_>) -> PyResult<()> {
        let done = self.done.lock().ok().and_then(|d| d.clone());
        let Some(done) = done else { return Ok(()) };
        wait::until(
            py,
            || {
                self.keep_results();
                match done.recv_timeout(TICK) {
                    Err(RecvTimeoutError::Disconnected) => Some(()),
                    _ => None,
                }
            },
            || self.stop_and_wait(),
        )
    }

    /// The report as a dict, once the run is over.
    fn report(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let text = match self.ended.lock() {
            Ok(e) => e.as_ref().map(|e| e.report.clone()),
            Err(_) => None,
        };
        match text {
            Some(t) => Ok(Some(
                py.import("json")?.call_method1("loads", (t,))?.unbind(),
            )),
            None => Ok(None),
        }
    }

    /// The run's error (message and kind), if it failed.
    fn error(&self) -> Option<(String, octopipe::ErrorKind)> {
        self.ended
            .lock()
            .ok()
            .and_then(|e| e.as_ref().and_then(|e| e.error.clone()))
    }

    /// `Err(octopipe.Error)` (with the report) when the run failed.
    fn check_failed(&self, py: Python<'_>) -> PyResult<()> {
        match self.error() {
            Some((e, kind)) => {
                let err = with_report(py, Error::new_err(python_words(&e)), self.report(py)?);
                let _ = err.value(py).setattr("kind", kind.name());
                Err(err)
            }
            None => Ok(()),
        }
    }

    /// The next finished frame; `None` at the end (the run's error raised once it is over).
    pub fn next_result(&self, py: Python<'_>) -> PyResult<Option<FrameItem>> {
        let q = self.results.get().ok_or_else(|| {
            error(
                ErrorKind::Conflict,
                "results were not collected: call results() before the pipeline starts",
            )
        })?;
        self.ensure_started()?;
        let next = wait::until(
            py,
            || {
                let mut q = q.lock().ok()?;
                if let Some(item) = q.kept.pop_front() {
                    return Some(Some(item));
                }
                match q.rx.recv_timeout(TICK) {
                    Ok(item) => Some(Some(item)),
                    Err(RecvTimeoutError::Disconnected) => Some(None),
                    Err(RecvTimeoutError::Timeout) => None,
                }
            },
            || self.stop_and_wait(),
        )?;
        if next.is_none() {
            self.wait_end(py)?;
            self.check_failed(py)?;
        }
        Ok(next)
    }

    /// The next batch of the `appinfer` stage; `None` once it ended.
    pub fn next_batch(&self, py: Python<'_>) -> PyResult<Option<AppBatch>> {
        let infer = self.infer.as_ref().ok_or_else(no_appinfer)?;
        self.infer_taken.store(true, Ordering::SeqCst);
        self.ensure_started()?;
        wait::until(
            py,
            || match infer.next_timeout(TICK) {
                Ok(b) => Some(Some(b)),
                Err(NoBatch::Ended) => Some(None),
                Err(NoBatch::Timeout) => None,
            },
            || self.stop_and_wait(),
        )
    }

    /// End the application's streams (and, when its batches were never asked for, the
    /// `appinfer` stage's hand-outs), then (with `wait`) wait for the run to end.
    fn close(&self, py: Python<'_>, wait_end: bool) -> PyResult<()> {
        self.ensure_started()?;
        if !self.infer_taken.load(Ordering::SeqCst) {
            if let Some(infer) = &self.infer {
                infer.close();
            }
        }
        for app in &self.apps {
            let mut signal = None;
            let closed = py.detach(|| app.close_while(|| wait::no_signal(&mut signal)));
            if let Some(e) = signal {
                py.detach(|| self.stop_and_wait());
                return Err(e);
            }
            let _ = closed;
        }
        if wait_end {
            self.wait_end(py)?;
            self.check_failed(py)?;
        }
        Ok(())
    }

    /// The application source a push goes to: by name, or by stream id.
    fn app_for(&self, stream: &Bound<'_, PyAny>) -> PyResult<&AppSource> {
        if self.apps.is_empty() {
            return Err(error(
                ErrorKind::Config,
                "this pipeline has no app source: push() needs `app name=NAME` at the head of a branch",
            ));
        }
        let names = || {
            self.apps
                .iter()
                .map(|a| format!("'{}' (stream {})", a.name(), a.stream()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Ok(name) = stream.extract::<String>() {
            return self.apps.iter().find(|a| a.name() == name).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "no app source '{name}' in this pipeline (its app sources: {})",
                    names()
                ))
            });
        }
        if let Ok(id) = stream.extract::<i64>() {
            return self
                .apps
                .iter()
                .find(|a| i64::from(a.stream()) == id)
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "stream {id} is not an app source of this pipeline (its app sources: {})",
                        names()
                    ))
                });
        }
        Err(PyTypeError::new_err(format!(
            "stream must be an app source's name (str) or stream id (int), found {}",
            image::type_name(stream)
        )))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A pipeline dropped while it runs stops; its thread ends on its own.
        if matches!(self.state.get_mut().ok().map(|s| &*s), Some(State::Started)) && !self.is_over()
        {
            self.stop_now();
        }
    }
}

fn no_appinfer() -> PyErr {
    error(
        ErrorKind::Config,
        "this pipeline has no appinfer stage: batches() hands out the batches of \
         `... ! preprocess ! appinfer ! ...` (put it where the model runs)",
    )
}

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
    inner: Arc<Inner>,
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
            if !(ms.is_finite() && ms >= 0.0) {
                return Err(PyValueError::new_err(format!(
                    "pts_ms must be a non-negative number of milliseconds, found {ms}"
                )));
            }
            frame = frame.pts(std::time::Duration::from_secs_f64(ms / 1000.0));
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
