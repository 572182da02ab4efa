//! What every stage thread shares, whatever it carries: where its failure goes, the wiring
//! error, the flag of its own work, and the log of slow calls and the error of a thread that
//! could not start (the runner's source loop uses them too).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::PipelineError;
use crate::Error;

/// Where a stage's thread reports its failure: the run's, or for a stage of one stream alone,
/// that stream's.
pub type Fail = Arc<dyn Fn(Error) + Send + Sync>;

/// The stage `kind` takes `takes` but is fed `fed`.
#[doc(hidden)]
pub fn wiring(kind: &str, takes: &str, fed: &str) -> Error {
    PipelineError::Wiring {
        stage: kind.to_string(),
        takes: takes.into(),
        fed: fed.into(),
    }
    .into()
}

/// Run `f` with `working` set: the stage is in its own work.
#[doc(hidden)]
pub fn working<R>(flag: &AtomicBool, f: impl FnOnce() -> R) -> R {
    flag.store(true, Ordering::Relaxed);
    let r = f();
    flag.store(false, Ordering::Relaxed);
    r
}

/// A stage call or send at least this long is logged (target `octopipe::slow`, debug level):
/// where a live pipeline's stalls come from.
#[doc(hidden)]
pub const SLOW_CALL: Duration = Duration::from_millis(10);

/// Log a stage's turn that took long: `work` (its call, after the item came) or `send` (waiting
/// for room downstream) of its `items` outputs.
#[doc(hidden)]
pub fn slow_call(stage: &str, work: Duration, send: Duration, items: usize) {
    if work >= SLOW_CALL || send >= SLOW_CALL {
        tracing::debug!(
            target: "octopipe::slow",
            "{stage}: call {:.1} ms, send of {items} item(s) {:.1} ms",
            work.as_secs_f64() * 1e3,
            send.as_secs_f64() * 1e3
        );
    }
}

/// The error of a thread that could not start.
#[doc(hidden)]
pub fn spawn_error(name: &str, e: std::io::Error) -> Error {
    PipelineError::Spawn {
        stage: name.to_string(),
        source: e,
    }
    .into()
}
