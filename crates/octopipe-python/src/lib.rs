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
mod duration;
mod errors;
mod functions;
mod image;
mod pipeline;
mod results;
mod stages;
mod tensor;
mod wait;

use pyo3::prelude::*;

use errors::{ClosedError, DescriptionError, Error, FullError};

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
    m.add_function(wrap_pyfunction!(functions::run, m)?)?;
    m.add_function(wrap_pyfunction!(functions::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(functions::properties, m)?)?;
    m.add_function(wrap_pyfunction!(functions::stage, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
