//! Streams added and removed while a pipeline runs.
//!
//! ```text
//! octopipe run "batch max-frames=8 ! classify model=m.onnx ! mqtt" --metrics-addr 127.0.0.1:9184 --streams
//! curl -X POST 127.0.0.1:9184/streams -d '{"id":7,"source":"testsrc live=true ! boxes format=synthetic"}'
//! curl -X DELETE '127.0.0.1:9184/streams/7?mode=drain'
//! ```
//!
//! [`Pipeline::streams`] gives the handle ([`Streams`]); the metrics server serves it over HTTP
//! (`observe::MetricsServer::serve_streams`). A stream is described as a branch of a description
//! is, from its source to the stage that gives its frames their boxes (`media location=rtsp://...
//! ! detect model=d.onnx`); it is opened on the caller's thread, gets its own threads and edges,
//! and its last edge joins the pipeline's one batch stage, which serves it round-robin with the
//! others. Where the description starts with a stage instead of a source (`detect model=d.onnx !
//! track ! batch ! ...`), streams join that stage: every stream's frames share the one detector
//! (its calls hold tiles of several streams), and a stream is described up to its frames
//! (`media location=rtsp://...`). Its stream id is the one asked for (unused in this run: a report row stays one
//! stream's) or the next after the highest. Removing a stream stops its source: with
//! [`RemoveMode::Drain`] the frames it gave go through, with [`RemoveMode::Drop`] those not yet in
//! the batch stage are dropped and counted (`stream removed`). Either way its report row stays,
//! with `in = processed + dropped`. A pipeline that takes streams runs until [`Streams::close`]
//! or a stop, also with no stream left.
//!
//! [`Pipeline::streams`]: super::Pipeline::streams

mod book;
mod handle;
mod info;
mod lifecycle;
mod records;

pub(super) use book::Book;
pub use handle::Streams;
pub use info::{Added, RemoveMode, StreamCounts, StreamInfo, StreamState};
pub(super) use records::Entry;
pub use records::KEPT_RECORDS;
