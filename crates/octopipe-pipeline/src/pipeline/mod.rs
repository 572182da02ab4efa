//! The pipeline: a [`Graph`] of stages opened, then run with one thread per stage and bounded
//! channels between them.
//!
//! ```text
//! source --> boxes --+
//! source --> boxes --+--> batch --> preprocess --> classify --> sink --> report
//! ```
//!
//! Stage code implements [`Stage`](octopipe_core::stage::Stage) and never touches a channel: the runner
//! receives, calls `process`, stamps the outputs with the stage's report row and the time, and
//! sends them on. Every edge is a bounded channel with its [`Queue`] (capacity and policy), so a
//! slow stage makes the source wait (backpressure) or, live, drops the oldest item (counted).
//! When a stage fails it returns, which drops its channel ends: upstream stages see their sends
//! fail and stop, downstream stages drain what they already have and finish, so no stage blocks
//! forever. Nothing here knows what a stage does: only what it takes and gives.

mod admit;
mod collect;
mod control;
mod handles;
mod memory;
mod observer;
mod paths;
mod ready;
mod runner;
mod streams;
mod take;
mod threads;
mod wire;

pub use crate::describe::{
    EdgePolicy, Graph, Node, Queue, QueueSettings, DEFAULT_LIVE_BATCH_QUEUE, DEFAULT_LIVE_QUEUE,
    DEFAULT_QUEUE, QUEUE,
};
pub use admit::{AUTO_IDS, REMOVE_DEADLINE, SHOWN_REASON, SHOWN_SOURCE};
pub use control::{StopHandle, DEFAULT_STOP_GRACE, IN_FLIGHT_AT_STOP};
pub use memory::{default_memory_budget, DEFAULT_MAX_STREAM_MEMORY};
pub use observer::{Observer, Outcome};
pub use octopipe_core::error::PipelineError;
pub use octopipe_core::files::RunPath;
pub use octopipe_core::stage::edge::STREAM_REMOVED;
pub use octopipe_core::stage::open_chain;
pub use paths::check as check_paths;
pub use runner::Pipeline;
pub use streams::{
    Added, RemoveMode, StreamCounts, StreamInfo, StreamState, Streams, KEPT_RECORDS,
};
