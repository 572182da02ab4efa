//! `octopipe` for Python: the extension module `octopipe._octopipe` (the package
//! `python/octopipe/` re-exports it).
//!
//! ```text
//! Pipeline(description, vars, force)     the same description language and errors as `octopipe run`
//!   .push(stream, image, boxes, pts_ms)  NumPy / __dlpack__ / __cuda_array_interface__ -> app source
//!   .batches()                           appinfer's batches: tensor (DLPack, array interfaces), rows,
//!                                        set_labels(...) -> the sinks
//!   .results()                           a Frame per frame finished: objects as the JSONL lines
//!   .close() / .stop() / with ...:       drain / stop; the report as a dict
//! Pipeline.from_stages([(kind, props), ...], vars)
//!                                        a chain of stages from Python values
//! run(description, vars, force) -> dict  the whole run, its report
//! inspect(stage) -> str                  the stages and their properties
//! properties(stage) -> [dict]            one stage's property table (name, keyword, type, ...)
//! stage(kind, **props) -> str            a stage's text from keyword arguments, checked
//! ```
//!
//! Every wait (a full pipeline, the next result or batch, the end of the run) happens with the
//! GIL released and looks at the interpreter's signals every 100 ms (`wait::TICK`): Ctrl-C
//! stops the pipeline (its stop grace, then the report) and raises `KeyboardInterrupt`.

mod batch;
mod errors;
mod image;
mod pipeline;
mod results;
mod stages;
mod tensor;
mod wait;

use std::collections::HashMap;

use octopipe::Builtin;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use errors::{ClosedError, DescriptionError, Error, FullError};

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

/// Run a pipeline to its end and return its report (the fields of `octopipe run --report json`).
/// `vars` (a dict) fill the description's `${name}`s; `force=True` lets every output replace
/// earlier output (`octopipe run --force`), which is otherwise refused before anything runs.
///
/// The GIL is released while it runs; Ctrl-C stops it (within its stop grace) and raises
/// `KeyboardInterrupt`. A stage that fails raises `octopipe.Error` with the report as its
/// `report` attribute; a bad description raises `octopipe.DescriptionError`.
#[pyfunction]
#[pyo3(signature = (description, vars=None, force=false))]
fn run(
    py: Python<'_>,
    description: &str,
    vars: Option<&Bound<'_, PyDict>>,
    force: bool,
) -> PyResult<Py<PyAny>> {
    let p = pipeline::Pipeline::open(py, description, vars, force)?;
    p.finish(py)
}

/// The stages a description may use (`stage=None`), or one stage's properties: what
/// `octopipe inspect [STAGE]` prints. An unknown stage raises `ValueError` naming the closest one.
#[pyfunction]
#[pyo3(signature = (stage=None))]
fn inspect(stage: Option<&str>) -> PyResult<String> {
    let registry = octopipe::stage::Registry::builtin();
    registry
        .inspect(stage)
        .ok_or_else(|| unknown_stage(&registry, stage.unwrap_or_default()))
}

/// `ValueError` for a stage `name` that is not in `registry`, naming the closest one.
pub(crate) fn unknown_stage(registry: &octopipe::stage::Registry, name: &str) -> PyErr {
    let hint = octopipe::describe::closest(name, registry.names())
        .map(|c| format!(" (did you mean '{c}'?)"))
        .unwrap_or_default();
    pyo3::exceptions::PyValueError::new_err(format!("unknown stage '{name}'{hint}"))
}

/// One stage's properties, as `inspect(stage)` shows them: a list with a dict per property,
/// `name` (as a description writes it), `keyword` (as `stage()` takes it: `_` for `-`), `type`,
/// `default` and `doc`. An unknown stage raises `ValueError` naming the closest one.
#[pyfunction]
fn properties(py: Python<'_>, stage: &str) -> PyResult<Vec<Py<PyDict>>> {
    stages::properties(py, stage)
}

/// The description text of stage `kind` with these properties (`max_batch=64` is
/// `max-batch=64`; `None` leaves one out), each checked against the stage's declared table:
/// an unknown stage or property (naming the closest) or a value not of its type raises
/// `DescriptionError`, with the message `octopipe run` gives for that text.
#[pyfunction]
#[pyo3(signature = (kind, /, **props))]
fn stage(py: Python<'_>, kind: &str, props: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
    stages::stage_text(py, &octopipe::stage::Registry::builtin(), kind, props)
}

#[pymodule]
fn _octopipe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    errors::class_kinds(py)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("DescriptionError", py.get_type::<DescriptionError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("FullError", py.get_type::<FullError>())?;
    m.add_class::<pipeline::Pipeline>()?;
    m.add_class::<results::Frame>()?;
    m.add_class::<pipeline::Results>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<batch::Row>()?;
    m.add_class::<pipeline::Batches>()?;
    m.add_class::<tensor::Tensor>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(properties, m)?)?;
    m.add_function(wrap_pyfunction!(stage, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
