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
//! | [stage](runner::Stage) | one step of the pipeline, run on its own thread by the [runner](runner) |
//! | edge | a bounded channel between two stages (capacity set per edge in the pipeline text) |
//! | [budget](budget) | 1/fps per frame; per-stage p50/p95/p99/max, misses and headroom in the report |

pub mod batch;
pub mod bench;
pub mod budget;
pub mod classify;
pub mod describe;
pub mod detect;
pub mod error;
pub mod frame;
pub mod preprocess;
pub mod runner;
pub mod sink;
pub mod source;

pub use error::Error;
