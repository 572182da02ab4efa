//! # octopipe-core
//!
//! The bottom layers of [octopipe](https://docs.rs/octopipe): the data that travels through a
//! pipeline and the contract a stage is written against, with no stage in it. The `octopipe`
//! package re-exports every module here under its own name (`octopipe::frame`,
//! `octopipe::stage`, ...), so applications use that one; a crate that only writes a stage, or
//! only reads frames and reports, can depend on this one and leave GStreamer, ONNX Runtime, the
//! brokers, the HTTP server and the CLI out of its build.
//!
//! | layer | modules |
//! | --- | --- |
//! | data | [`frame`], [`tensor`], [`alloc`] (fallible buffers), [`crops`] (the crop batch), [`files`] ([`files::RunPath`]), [`redact`], [`description`], `rng` |
//! | errors and the report | [`error`] (names no stage), [`budget`] (the report, [`budget::Tally`]), [`observer`] (what watches a run: [`Observer`]) |
//! | the stage core | [`stage`]: `StageDecl`, `Registry` (without the built-in stages), the `Stage` and `Element` traits, typed ports (`Item`, `Payload`), `Running` with the typed edges and the stage loop, `Caps`, properties, `FrameSource` |
//!
//! Its dependencies: cudarc (frames' page-locked host buffers; libcuda is loaded at run time, so
//! nothing here needs CUDA to build or run), crossbeam-channel (the edges), serde, serde_json,
//! thiserror and tracing.
//! `scripts/check-core-deps.sh` keeps it that way.

#![warn(missing_docs)]

// `#[derive(Properties)]` and `#[derive(PropChoice)]` name `::octopipe_core::stage`, in this
// crate too.
extern crate self as octopipe_core;

pub mod alloc;
pub mod budget;
pub mod buffer;
pub mod crops;
pub mod description;
pub mod error;
pub mod files;
pub mod frame;
pub mod observer;
pub mod redact;
#[doc(hidden)]
pub mod rng;
pub mod stage;
pub mod tensor;

pub use error::{Error, ErrorKind};
pub use observer::Observer;
