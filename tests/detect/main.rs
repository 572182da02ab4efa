//! Integration tests, one binary: boxes: the detector, the shared detector, the tracker, evaluation, tile statistics, the application's model.

#[path = "../common/mod.rs"]
mod common;

mod appinfer;
mod detect;
mod eval;
mod sees_nothing;
mod shared_detect;
mod tilestats;
mod track;
