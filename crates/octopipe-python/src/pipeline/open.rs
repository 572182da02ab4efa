//! Opening a pipeline: a description (a `.pipe` file or the text itself) parsed with Python's
//! `vars`, built, opened, and its state made ready to run.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use octopipe::classify::ClassLabels;
use octopipe::describe::SetBy;
use octopipe::preprocess::{BackendKind, PreprocessConfig};
use octopipe::stage::Registry;
use octopipe::Builtin;
use octopipe::ErrorKind;

use super::inner::{Inner, State};
use super::object::Pipeline;
use crate::errors::{error, to_py};

impl Pipeline {
    /// Build and open the pipeline of `description` (GIL released while stages open).
    pub fn open(
        py: Python<'_>,
        description: &str,
        vars: Option<&Bound<'_, PyDict>>,
        force: bool,
    ) -> PyResult<Pipeline> {
        let (origin, text) = octopipe::describe::load(description).map_err(|e| {
            error(
                ErrorKind::Io,
                format!("cannot read pipeline file {description}: {e}"),
            )
        })?;
        Pipeline::open_text(py, &origin, text, vars, force)
    }

    /// Build and open the pipeline of description `text` from `origin` (never read as a file
    /// name: `from_stages`); with `force` its outputs may replace earlier output.
    pub fn open_text(
        py: Python<'_>,
        origin: &str,
        text: String,
        vars: Option<&Bound<'_, PyDict>>,
        force: bool,
    ) -> PyResult<Pipeline> {
        let vars = vars_of(vars)?;
        let built = py.detach(|| -> Result<octopipe::Pipeline, octopipe::Error> {
            let desc = octopipe::describe::parse_set_by(origin, &text, &vars, SetBy::Python)?;
            let mut graph = octopipe::describe::build_with(&desc, &Registry::builtin())?;
            graph.overwrite = force;
            octopipe::Pipeline::build(graph)
        });
        let p = built.map_err(|e| to_py(py, e))?;
        let device = match p.caps().get::<PreprocessConfig>() {
            Some(pp) if pp.backend == BackendKind::Cpu => Err(
                "the pipeline's preprocess stage runs on the CPU (backend=cpu), which reads \
                 host frames only: push host (NumPy) arrays, or use preprocess backend=cuda"
                    .to_string(),
            ),
            Some(pp) => Ok(pp.device),
            None => Ok(0),
        };
        let inner = Inner {
            description: text,
            apps: p.app_sources(),
            infer: p.app_infer(None),
            infer_taken: AtomicBool::new(false),
            stop: p.stop_handle(),
            results: OnceLock::new(),
            abandon: Arc::new(AtomicBool::new(false)),
            ended: Arc::new(Mutex::new(None)),
            done: Mutex::new(None),
            device,
            stages: p.stage_names().to_vec(),
            labels: p
                .caps()
                .get::<ClassLabels>()
                .map(|l| l.0.clone())
                .unwrap_or_default(),
            state: Mutex::new(State::Built(Box::new(p))),
        };
        Ok(Pipeline {
            inner: Arc::new(inner),
        })
    }

    /// `octopipe.run`: start, end the pushed streams at once, wait, and give the report.
    pub fn finish(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.inner.close(py, true)?;
        Ok(self.inner.report(py)?.unwrap_or_else(|| py.None()))
    }
}

/// The variables of a description (`${name}`) from a Python mapping: values are turned into
/// text with `str()` (paths, numbers).
pub(crate) fn vars_of(vars: Option<&Bound<'_, PyDict>>) -> PyResult<HashMap<String, String>> {
    let mut out = HashMap::new();
    if let Some(vars) = vars {
        for (k, v) in vars.iter() {
            let key: String = k.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "vars: keys must be str, found {}",
                    k.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?;
            let os = v.py().import("os")?;
            let value: String = os.call_method1("fspath", (&v,)).map_or_else(
                |_| v.str().and_then(|s| s.extract()),
                |p| p.str().and_then(|s| s.extract()),
            )?;
            out.insert(key, value);
        }
    }
    Ok(out)
}
