//! Integration tests, one binary: whole pipelines one at a time (`common::serial`): the application's frames, brokers, streams added while running, the pipeline benchmark.

#[path = "../common/mod.rs"]
mod common;

mod app;
mod bench_pipeline;
mod classifiers;
#[cfg(feature = "mqtt")]
mod mqtt;
mod pipeline;
mod preroll;
mod stream_ends;
mod stream_panic;
mod streams;
#[cfg(feature = "zenoh")]
mod zenoh_sink;
