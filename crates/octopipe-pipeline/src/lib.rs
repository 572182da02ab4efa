//! octopipe's description and runner: the gst-launch-style text and its builder (`describe`, with
//! the built-in stages' registry, `Registry::builtin`), the runner (`pipeline`) and one frame at a
//! time (`oneshot`). The `octopipe` crate re-exports each module under its own name; the HTTP
//! control plane over the runner is a crate of its own (crates/octopipe-control).

#![warn(missing_docs)]

pub mod describe;
pub mod oneshot;
pub mod pipeline;

// The layers below, under the names the modules here use (`crate::frame`, `crate::detect`).
use octopipe_core::error::Error;
use octopipe_core::{budget, description, error, files, frame, redact, stage, tensor};
use octopipe_onnx::{appinfer, classify, detect};
use octopipe_sources as source;
use octopipe_stages::{batch, boxes, preprocess, sink, tiles, tilestats, track};
