//! The GPU rows of the preprocess benchmark, and the auto-tuner.

mod backends;
mod input;
mod resample;
mod state;
mod timing;
mod tuner;
mod upload;

pub(crate) use state::GpuBench;
pub(super) use timing::timing_event;
pub use tuner::{probe, tune, ProbeOptions, TuneChoice};
