//! Numbers of milliseconds from Python turned into `Duration`s: range-checked first, so that
//! nan, an infinity, a negative or a value past what a `Duration` (or GStreamer's nanosecond
//! clock) holds is a `ValueError` naming the argument, never a Rust panic.

use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::PyResult;

/// The most milliseconds taken: GStreamer's clock differences count nanoseconds in an `i64`
/// (about 292 years); a time past it cannot be a frame's, and its nanoseconds stay well inside
/// a `u64` (no conversion of a frame's time wraps or meets `GST_CLOCK_TIME_NONE`).
pub const MAX_MILLIS: f64 = i64::MAX as f64 / 1e6;

/// `ms` milliseconds, the value of argument `arg`: a `ValueError` naming it unless `ms` is a
/// finite number from 0 to [`MAX_MILLIS`]. A positive value below a nanosecond is 0 (the
/// clock's resolution), as `Duration::from_secs_f64` rounds it.
pub fn from_millis(arg: &str, ms: f64) -> PyResult<Duration> {
    if !(ms.is_finite() && (0.0..=MAX_MILLIS).contains(&ms)) {
        return Err(PyValueError::new_err(format!(
            "{arg} must be a non-negative number of milliseconds at most {MAX_MILLIS:.0}, found {ms}"
        )));
    }
    Duration::try_from_secs_f64(ms / 1000.0).map_err(|e| {
        PyValueError::new_err(format!("{arg}: {ms} milliseconds is not a duration ({e})"))
    })
}
