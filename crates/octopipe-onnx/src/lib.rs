//! octopipe's stages on ONNX Runtime: the session layer (`onnx`), the tiled detector (`detect`),
//! the crop classifier (`classify`) and the application's own model on the batches
//! (`appinfer`). The `octopipe` crate re-exports each module under its own name.

#![warn(missing_docs)]

pub mod appinfer;
pub mod classify;
pub mod detect;
pub mod onnx;

// The layers below, under the names the modules here use (`crate::frame`, `crate::batch`).
use octopipe_core::error::Error;
use octopipe_core::{budget, description, error, files, frame, stage, tensor};
use octopipe_stages::{batch, boxes, preprocess, tiles, track};
