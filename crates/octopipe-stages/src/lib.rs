//! octopipe's stages that need neither GStreamer nor ONNX Runtime: the boxes (`boxes`), the
//! tracker (`track`), ragged crop batches (`batch`), crop + resize + normalize on the CPU or the
//! GPU (`preprocess`), tiles and their statistics (`tiles`, `tilestats`) and the sinks (`sink`;
//! `mqtt` and `zenoh` behind the features of those names). The `octopipe` crate re-exports each
//! module under its own name (`octopipe::batch`, ...).

#![warn(missing_docs)]

pub mod batch;
pub mod boxes;
#[cfg(test)]
mod kernels_tests;
pub mod preprocess;
pub mod sink;
pub mod tiles;
pub mod tilestats;
pub mod track;
