//! The module's functions: `run`, `inspect`, `properties` and `stage`.

use octopipe::Builtin;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::pipeline;
use crate::stages::{self, unknown_stage};

/// Run a pipeline to its end and return its report (the fields of `octopipe run --report json`).
/// `vars` (a dict) fill the description's `${name}`s; `force=True` lets every output replace
/// earlier output (`octopipe run --force`), which is otherwise refused before anything runs.
///
/// The GIL is released while it runs; Ctrl-C stops it (within its stop grace) and raises
/// `KeyboardInterrupt`. A stage that fails raises `octopipe.Error` with the report as its
/// `report` attribute; a bad description raises `octopipe.DescriptionError`.
#[pyfunction]
#[pyo3(signature = (description, vars=None, force=false))]
pub(crate) fn run(
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
pub(crate) fn inspect(stage: Option<&str>) -> PyResult<String> {
    let registry = octopipe::stage::Registry::builtin();
    registry
        .inspect(stage)
        .ok_or_else(|| unknown_stage(&registry, stage.unwrap_or_default()))
}

/// One stage's properties, as `inspect(stage)` shows them: a list with a dict per property,
/// `name` (as a description writes it), `keyword` (as `stage()` takes it: `_` for `-`), `type`,
/// `default` and `doc`. An unknown stage raises `ValueError` naming the closest one.
#[pyfunction]
pub(crate) fn properties(py: Python<'_>, stage: &str) -> PyResult<Vec<Py<PyDict>>> {
    stages::properties(py, stage)
}

/// The description text of stage `kind` with these properties (`max_batch=64` is
/// `max-batch=64`; `None` leaves one out), each checked against the stage's declared table:
/// an unknown stage or property (naming the closest) or a value not of its type raises
/// `DescriptionError`, with the message `octopipe run` gives for that text.
#[pyfunction]
#[pyo3(signature = (kind, /, **props))]
pub(crate) fn stage(
    py: Python<'_>,
    kind: &str,
    props: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    stages::stage_text(py, &octopipe::stage::Registry::builtin(), kind, props)
}
