//! Benchmarks and the GPU auto-tuner: `octopipe bench preprocess` and `octopipe probe`. Built only
//! with the cargo feature `bench` (off by default).
//!
//! [`preprocess()`] times the CPU backend, a naive CPU baseline, and (when a GPU is present) the CUDA
//! strategies A to E on three workloads, and returns one printed table. The baseline strategies
//! A, B, D and E live here ([`Strategy`], [`BenchEngine`]), beside the production strategy C of
//! [`octopipe_stages::preprocess::cuda`]. [`probe`] picks the strategy and tile size for the present GPU with
//! a few micro-benchmarks. [`detect_tiles`] times the detector's input (a frame's tiles as one
//! batch) per backend; [`pipeline`] runs the whole pipeline on N streams of H.264
//! (`octopipe bench pipeline`); [`tiles`] times the satellite tile filter (`octopipe bench tiles`)
//! against a per-tile and a padded baseline; [`messages`] measures the broker sinks' messages
//! (`octopipe bench messages`); [`mot`] runs the tracker on the VisDrone MOT ground truth
//! (`octopipe bench track`). Scoring a run's output is not a benchmark: [`crate::eval`]
//! (`octopipe eval`, in every build; `eval` here is its `detections` module, kept by that name).

mod data;
mod detect;
mod error;
mod gpu;
mod infer;
mod infer_engine;
mod measure;
pub mod messages;
pub mod mot;
pub mod pipeline;
mod preprocess;
mod table;
mod tiles;
mod workload;

pub use crate::eval::detections as eval;
pub use data::{box_sizes, frame_from, synthetic_frame, Rng};
pub use detect::{detect_tiles, DetectTilesOptions};
pub use error::BenchError;
pub use gpu::{probe, tune, ProbeOptions, TuneChoice};
pub use infer::{infer, model_throughput, InferOptions, Tuning};
pub use infer_engine::engine_throughput;
pub use measure::max_diff_255;
pub use octopipe_stages::preprocess::cuda::baselines::{BenchEngine, Strategy, FLAT_THREADS};
pub use octopipe_stages::preprocess::f16_to_f32;
pub use preprocess::{naive_cpu, preprocess};
pub use table::{format_table, Row};
pub use tiles::{tiles, TilesBenchOptions, SEED_ORIN_NANO_MS};
pub use workload::{bench_config, prepare, Prepared, PreprocessBenchOptions, Workload};
