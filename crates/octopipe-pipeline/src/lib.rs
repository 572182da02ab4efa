//! octopipe's description and runner: the gst-launch-style text and its builder (`describe`, with
//! the built-in stages' registry, `Registry::builtin`), the runner (`pipeline`), the HTTP control
//! plane (`control`) and one frame at a time (`oneshot`). The `octopipe` crate re-exports each
//! module under its own name.

#![warn(missing_docs)]

pub mod control;
pub mod describe;
pub mod oneshot;
pub mod pipeline;

// The layers below, under the names the modules here use (`crate::frame`, `crate::detect`).
use octopipe_core::error::{Error, ErrorKind};
use octopipe_core::{budget, description, error, files, frame, redact, stage, tensor};
use octopipe_onnx::{appinfer, classify, detect};
use octopipe_sources as source;
use octopipe_stages::{batch, boxes, preprocess, sink, tiles, tilestats, track};
