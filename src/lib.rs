//! # octopipe
//!
//! Real-time drone-video preprocessing: decode, attach detection boxes, batch crops of many sizes
//! with no padding, crop + resize + normalize them (CPU or CUDA), classify them with ONNX Runtime and
//! write the results, while tracking every frame against a time budget.
//!
//! | concept | what it is |
//! | --- | --- |
//! | [frame](frame::Frame) | decoded planes (I420/NV12/RGB...) in host or CUDA device memory ([`Memory`]), with stream, sequence, pts, boxes and stage timestamps |
//! | [stage](stage::StageDecl) | one kind of step (source, boxes, batch, preprocess, infer, sink, filter): it declares its name, role and properties once, in its own module, and is registered with one line in a [`stage::Registry`] |
//! | [graph](pipeline::Graph) | the stages of a pipeline and the edges between them, built from a description ([`describe`]) |
//! | edge | a bounded channel between two stages (capacity and policy set per edge in the pipeline text) |
//! | [crop batch](batch::CropBatch) | crops from consecutive frames, each with its own size and output offset, packed without padding |
//! | [block metadata](batch::BlockMeta) | one tiny entry per unit of work: which crop, which tiles of its output |
//! | [tensor](Tensor) | the preprocessed crops of a batch: f32 or f16, NCHW or NHWC, host or device |
//! | [budget] | 1/fps per frame; per-stage p50/p95/p99/max, misses and headroom in the report |
//! | [observer](Observer) | sees every finished batch and the report: [progress, metrics, plots, annotated frames, energy](observe) |
//! | [app source](AppSource) | frames and boxes an application pushes; [`oneshot`] for one frame at a time |
//! | [app inference](AppInfer) | the application's own model on the batches' tensors (`appinfer`), its labels back to the sinks |
//! | [streams](Streams) | streams added and removed while a pipeline runs (`Pipeline::streams`; over HTTP with `octopipe run --streams`) |
//! | [messages](sink::message) | results to a broker: `mqtt`, `zenoh` (one JSON message per frame or object, schema v2) |
//!
//! The data and the stage contract ([`frame`], [`tensor`], [`stage`], [`error`], [`budget`],
//! [`files`], [`redact`]) come from the `octopipe-core` crate, re-exported here under these names;
//! a crate that only writes a stage can depend on that one alone. The built-in stages are
//! `Registry::builtin()` ([`Builtin`]).
//!
//! ## Example
//!
//! Build a pipeline from its text, watch it with a few [observers](observe) and run it:
//!
//! ```no_run
//! use octopipe::preprocess::PreprocessConfig;
//! use octopipe::{observe, Pipeline};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let text = "testsrc num-buffers=300 live=true ! boxes format=synthetic count=20 \
//!             ! classify model=model.onnx ! jsonl location=objects.jsonl";
//! let mut pipeline = Pipeline::from_description(text, &Default::default())?;
//! // What the stages told each other, by type: here the preprocess settings, their size settled.
//! let preprocess = pipeline.caps().get::<PreprocessConfig>().cloned().unwrap_or_default();
//!
//! let metrics = observe::MetricsServer::serve("127.0.0.1:9184")?; // GET /metrics while it runs
//! pipeline.observe(metrics.observer());
//! pipeline.observe(Box::new(observe::Progress::auto()));
//! pipeline.observe(Box::new(observe::LatencyPlot::new("latency.svg".as_ref())));
//! pipeline.observe(Box::new(observe::Mosaic::new("crops.png".as_ref(), preprocess, 48, 2)));
//!
//! let outcome = pipeline.run();
//! println!("{}", outcome.report); // the table; serde_json::to_string(&outcome.report) for machines
//! if let Some(e) = outcome.error {
//!     eprintln!("a stage failed: {e}");
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// The bottom layers live in the core crate (crates/octopipe-core); here under their old paths, so
// `octopipe::frame::Frame`, `crate::stage::Stage`, ... name what they always named.
pub use octopipe_core::{alloc, budget, buffer, error, files, frame, redact, stage, tensor};
// The CUDA layer (crates/octopipe-cuda: devices, stream ordering, kernel modules compiled by name,
// launch helpers); the preprocess backend re-exports its items under their old paths too
// (`preprocess::cuda::{available, CudaError, kernels, ...}`).
pub use octopipe_cuda as cuda;
// The stages, the description and runner, the observers: one crate each family (crates/), here
// under the module names users know.
pub use appinfer::{AppBatch, AppInfer, Labels};
pub use describe::Builtin;
pub use error::{Error, ErrorKind};
pub use frame::{
    Colorimetry, Detection, DeviceBuffer, DeviceFrame, Frame, FrameLayout, Memory, PixelFormat,
};
/// Observers: what a user sees of a run besides the JSONL output (crates/octopipe-observe), with
/// the control plane that serves a run's metrics under its former name, `MetricsServer`.
pub mod observe {
    pub use octopipe_control::ControlPlane as MetricsServer;
    pub use octopipe_control::{Metrics, LATENCY_BUCKETS};
    pub use octopipe_observe::*;
}
pub use octopipe_control as control;
pub use octopipe_onnx::{appinfer, classify, detect, onnx};
pub use octopipe_pipeline::{describe, oneshot, pipeline};
pub use octopipe_sources as source;
pub use octopipe_stages::{batch, boxes, preprocess, sink, tiles, tilestats, track};
pub use pipeline::{Observer, Outcome, Pipeline, StopHandle, Streams};
pub use sink::Object;
pub use source::{AppBox, AppFrame, AppSource, PushError};
pub use tensor::{DType, Layout, Tensor, TensorData};
