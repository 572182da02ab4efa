//! # octopipe
//!
//! Real-time drone-video preprocessing: decode, attach detection boxes, batch crops of many sizes
//! with no padding, crop + resize + normalize them (CPU or CUDA), classify them with ONNX Runtime and
//! write the results, while tracking every frame against a time budget.
//!
//! | concept | what it is |
//! | --- | --- |
//! | [frame](frame::Frame) | decoded planes (I420/NV12/RGB) in a pooled buffer, with stream, sequence, pts and stage timestamps |
//! | [crop batch](batch::CropBatch) | crops from consecutive frames, each with its own size and output offset, packed without padding |
//! | [block metadata](batch::BlockMeta) | one tiny entry per unit of work: which crop, which tiles of its output |
//! | [stage](runner::Stage) | one step of the pipeline, run on its own thread by the [runner] |
//! | edge | a bounded channel between two stages (capacity set per edge in the pipeline text) |
//! | [budget] | 1/fps per frame; per-stage p50/p95/p99/max, misses and headroom in the report |
//! | [observer](runner::Observer) | sees every finished batch and the report: [progress, metrics, plots, annotated frames, energy](observe) |
//!
//! ## Example
//!
//! Build a pipeline from its text, watch it with a few [observers](observe) and run it:
//!
//! ```no_run
//! use octopipe::{describe, observe, runner::Pipeline};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let text = "testsrc num-buffers=300 live=true ! boxes format=synthetic count=20 \
//!             ! classify model=model.onnx ! jsonl location=objects.jsonl";
//! let config = describe::build(&describe::parse("<example>", text, &Default::default())?)?;
//! let mut pipeline = Pipeline::build(config)?;
//! let labels = pipeline.config().classify.labels.clone();
//! let preprocess = pipeline.config().preprocess.clone();
//!
//! let metrics = observe::MetricsServer::serve("127.0.0.1:9184")?; // GET /metrics while it runs
//! pipeline.observe(metrics.observer());
//! pipeline.observe(Box::new(observe::Progress::auto()));
//! pipeline.observe(Box::new(observe::LatencyPlot::new("latency.svg".as_ref())));
//! pipeline.observe(Box::new(observe::Mosaic::new("crops.png".as_ref(), preprocess, &labels, 48, 2)));
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

pub mod batch;
#[cfg(feature = "bench")]
pub mod bench;
pub mod budget;
pub mod classify;
pub mod describe;
pub mod detect;
pub mod error;
pub mod frame;
pub mod observe;
pub mod preprocess;
pub mod runner;
pub mod sink;
pub mod source;

pub use error::Error;
