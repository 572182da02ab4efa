//! The pipeline's state, shared by the `Pipeline` object and its iterators ([`Inner`]): the run
//! on its thread, its results and batches, its end and report.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use octopipe::appinfer::NoBatch;
use octopipe::{AppBatch, AppInfer, AppSource, StopHandle};

use crate::errors::{error, python_words, with_report, Error};
use crate::image::{self, DevicePolicy};
use crate::results::FrameItem;
use crate::wait::{self, TICK};
use octopipe::ErrorKind;
/// Where the run is.
pub(super) enum State {
    /// Built, not started: results may still be asked for.
    Built(Box<octopipe::Pipeline>),
    /// Started (on its thread, or over).
    Started,
}

/// What a finished run left.
pub(super) struct Ended {
    /// The report, as `octopipe run --report json` writes it.
    report: String,
    /// The first error of a stage, if any: its message and kind.
    error: Option<(String, octopipe::ErrorKind)>,
}

/// The results channel, and what `close()` took from it before the application read it.
pub(super) struct ResultsQueue {
    pub(super) rx: Receiver<FrameItem>,
    pub(super) kept: VecDeque<FrameItem>,
}

/// The pipeline's state, shared by the `Pipeline` object and its iterators.
pub struct Inner {
    pub(super) description: String,
    pub(super) state: Mutex<State>,
    pub(super) apps: Vec<AppSource>,
    pub(super) infer: Option<AppInfer>,
    /// `batches()` was asked for: the application takes the `appinfer` stage's batches.
    pub(super) infer_taken: AtomicBool,
    pub(super) stop: StopHandle,
    pub(super) results: OnceLock<Mutex<ResultsQueue>>,
    /// The application stopped reading results: the observer drops them.
    pub(super) abandon: Arc<AtomicBool>,
    pub(super) ended: Arc<Mutex<Option<Ended>>>,
    /// Disconnected once the run's thread is done (`None` until it started).
    pub(super) done: Mutex<Option<Receiver<()>>>,
    pub(super) device: DevicePolicy,
    pub(super) stages: Vec<String>,
    pub(super) labels: Vec<String>,
}

impl Inner {
    /// Start the run if it has not started.
    pub(super) fn ensure_started(&self) -> PyResult<()> {
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
    pub(super) fn is_over(&self) -> bool {
        self.ended.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    /// Stop now: sources end, pushes and the observer give up, the `appinfer` stage passes its
    /// batches on unlabelled. Does not wait.
    pub(super) fn stop_now(&self) {
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
    pub(super) fn stop_and_wait(&self) {
        self.stop_now();
        let done = self.done.lock().ok().and_then(|d| d.clone());
        if let Some(done) = done {
            let _ = done.recv();
        }
    }

    /// Move the results not read yet out of the channel (keeping them), so the pipeline does
    /// not wait for a reader.
    pub(super) fn keep_results(&self) {
        if let Some(q) = self.results.get() {
            if let Ok(mut q) = q.try_lock() {
                while let Ok(item) = q.rx.try_recv() {
                    q.kept.push_back(item);
                }
            }
        }
    }

    /// Wait until the run's thread is done (GIL released, Ctrl-C stops the pipeline).
    pub(super) fn wait_end(&self, py: Python<'_>) -> PyResult<()> {
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
    pub(super) fn report(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
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
    pub(super) fn error(&self) -> Option<(String, octopipe::ErrorKind)> {
        self.ended
            .lock()
            .ok()
            .and_then(|e| e.as_ref().and_then(|e| e.error.clone()))
    }

    /// `Err(octopipe.Error)` (with the report) when the run failed.
    pub(super) fn check_failed(&self, py: Python<'_>) -> PyResult<()> {
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
    pub(super) fn close(&self, py: Python<'_>, wait_end: bool) -> PyResult<()> {
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
    pub(super) fn app_for(&self, stream: &Bound<'_, PyAny>) -> PyResult<&AppSource> {
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

pub(super) fn no_appinfer() -> PyErr {
    error(
        ErrorKind::Config,
        "this pipeline has no appinfer stage: batches() hands out the batches of \
         `... ! preprocess ! appinfer ! ...` (put it where the model runs)",
    )
}
