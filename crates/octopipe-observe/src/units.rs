//! The units the observers show times in.

use std::time::Duration;

/// Milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
