//! The module's exceptions, and the library's errors as them.

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use octopipe::error::Kind;
use octopipe::{ErrorKind, PushError};

pyo3::create_exception!(
    octopipe,
    Error,
    PyException,
    "An octopipe error: a stage that failed, a pipeline that cannot be opened. `kind` says \
     what kind of failure it is ('input', 'config', 'model', 'device', 'unavailable', \
     'network', 'io', 'not-found', 'conflict', 'closed', 'busy', 'stage', 'internal'), on \
     every error the module raises and on each subclass ('config', 'closed', 'busy'); None \
     only on one made outside the library. When the run failed, `report` holds its \
     report (a dict), else None."
);
pyo3::create_exception!(
    octopipe,
    DescriptionError,
    Error,
    "A pipeline description that does not parse or check: the message is `octopipe run`'s \
     (origin:line:column: what is wrong, then the line with a caret under the place). \
     Attributes: origin, line, column, reason, excerpt."
);
pyo3::create_exception!(
    octopipe,
    ClosedError,
    Error,
    "The pipeline was closed or stopped, or has ended: it takes no more frames."
);
pyo3::create_exception!(
    octopipe,
    FullError,
    Error,
    "push(..., block=False): the pipeline is full and did not take the frame."
);

/// `octopipe.Error(message)` of `kind`, without a report: what the module itself refuses.
pub fn error(kind: ErrorKind, message: impl Into<String>) -> PyErr {
    Python::attach(|py| {
        let err = with_report(py, Error::new_err(message.into()), None);
        let _ = err.value(py).setattr("kind", kind.name());
        err
    })
}

/// A library message in Python's words: the command line's `--force` is `force=True` here.
pub fn python_words(message: &str) -> String {
    message
        .replace("(octopipe run --force)", "(force=True)")
        .replace(
            ", or --force to replace it",
            ", or force=True to replace it",
        )
}

/// A library error as the Python exception a caller can act on.
pub fn to_py(py: Python<'_>, e: octopipe::Error) -> PyErr {
    match e {
        octopipe::Error::Describe(d) => {
            let err = DescriptionError::new_err(d.to_string());
            let value = err.value(py);
            let _ = value.setattr("origin", &d.origin);
            let _ = value.setattr("line", d.line);
            let _ = value.setattr("column", d.column);
            let _ = value.setattr("reason", &d.message);
            let _ = value.setattr("excerpt", &d.excerpt);
            let _ = value.setattr("report", py.None());
            let _ = value.setattr("kind", ErrorKind::Config.name());
            err
        }
        octopipe::Error::Push(p) => push_to_py(p),
        other => error(other.kind(), python_words(&other.to_string())),
    }
}

/// A refused push as its exception: a closed or ended pipeline, a full one, or a frame or box
/// that does not fit (`ValueError`).
pub fn push_to_py(e: PushError) -> PyErr {
    match e.kind() {
        ErrorKind::Closed => ClosedError::new_err(e.to_string()),
        ErrorKind::Busy => FullError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The `kind` each exception class has when an instance sets none: `None` on `octopipe.Error`
/// itself (one the library did not raise), its kind on each subclass.
pub fn class_kinds(py: Python<'_>) -> PyResult<()> {
    py.get_type::<Error>().setattr("kind", py.None())?;
    py.get_type::<DescriptionError>()
        .setattr("kind", ErrorKind::Config.name())?;
    py.get_type::<ClosedError>()
        .setattr("kind", ErrorKind::Closed.name())?;
    py.get_type::<FullError>()
        .setattr("kind", ErrorKind::Busy.name())?;
    Ok(())
}

/// `err` with its `report` attribute (None when there is none).
pub fn with_report(py: Python<'_>, err: PyErr, report: Option<Py<PyAny>>) -> PyErr {
    let _ = err
        .value(py)
        .setattr("report", report.unwrap_or_else(|| py.None()));
    err
}
