//! Waiting with the GIL released, looking at the interpreter's signals in between.

use std::time::Duration;

use pyo3::prelude::*;

/// The longest a wait goes without looking at the interpreter's signals (Ctrl-C).
pub const TICK: Duration = Duration::from_millis(100);

/// Call `attempt` with the GIL released until it gives a value; `attempt` may block, for about
/// [`TICK`] at most. Between attempts the interpreter's signal handlers run: when one raises
/// (`KeyboardInterrupt`), `interrupted` runs (GIL released) and the exception is returned.
pub fn until<T: Send>(
    py: Python<'_>,
    mut attempt: impl FnMut() -> Option<T> + Send,
    interrupted: impl FnOnce() + Send,
) -> PyResult<T> {
    loop {
        if let Some(v) = py.detach(&mut attempt) {
            return Ok(v);
        }
        if let Err(e) = py.check_signals() {
            py.detach(interrupted);
            return Err(e);
        }
    }
}

/// For a blocking call that asks whether to keep waiting (`AppSource::push_while`): runs the
/// interpreter's signal handlers (taking the GIL for the moment) and keeps the first exception
/// one raised in `slot`; true while none did.
pub fn no_signal(slot: &mut Option<PyErr>) -> bool {
    if slot.is_some() {
        return false;
    }
    Python::attach(|py| match py.check_signals() {
        Ok(()) => true,
        Err(e) => {
            *slot = Some(e);
            false
        }
    })
}
