//! octopipe's stages on ONNX Runtime: the session layer (`onnx`), the tiled detector (`detect`),
//! the crop classifier (`classify`) and the application's own model on the batches
//! (`appinfer`). The `octopipe` crate re-exports each module under its own name.

#![warn(missing_docs)]

pub mod appinfer;
pub mod classify;
pub mod detect;
pub mod onnx;
