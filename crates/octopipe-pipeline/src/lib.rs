//! octopipe's description and runner: the gst-launch-style text and its builder (`describe`, with
//! the built-in stages' registry, `Registry::builtin`), the runner (`pipeline`) and one frame at a
//! time (`oneshot`). The `octopipe` crate re-exports each module under its own name; the HTTP
//! control plane over the runner is a crate of its own (crates/octopipe-control).

#![warn(missing_docs)]

pub mod describe;
pub mod oneshot;
pub mod pipeline;
