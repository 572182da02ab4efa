//! Pipeline descriptions in gst-launch style: `stage prop=value ! stage ...`.
//!
//! ```text
//! # pipelines/visdrone-classify.pipe
//! images location=${root}/images framerate=30
//!   ! boxes format=det location=${root}/annotations
//!   ! preprocess channels=rgb layout=nchw
//!   ! classify model=${model} labels=person,two-wheeler,car,large-vehicle
//!   ! jsonl location=${out}
//! ```
//!
//! Three steps, as gst-launch does: [`parse`] turns text into a [`Description`] (stages with their
//! properties and positions), [`build`] checks every stage and property against the
//! [registry](octopipe_core::stage::Registry) and makes the [graph](crate::pipeline::Graph) of typed
//! settings, and only then does [`Pipeline::build`](crate::pipeline::Pipeline::build) start
//! GStreamer, CUDA or ONNX Runtime.
//! `#` starts a comment, newlines are spaces (a trailing `\` is allowed), values may be quoted
//! (`location="my file.mp4"`), and `${name}` is replaced by a variable given with `--set name=value`.
//! A `queue size=N` between two stages sets the capacity of that edge (default 4).
//! `batch devices=all|0,1` spreads the streams of a batch stage over GPUs, one chain per GPU
//! ([`expand_devices`]).
//! Errors give the line and column with a caret and suggest the closest stage or property name.

mod build;
mod caps;
mod devices;
mod graph;
mod load;
mod queue;
mod quote;
mod registry;
mod scan;
mod vars;
mod written;

pub use build::unknown as unknown_stage;
pub use build::{build, build_branch, build_open, build_with};
pub use devices::{expand_devices, DEVICES};
pub use graph::{Graph, Node};
pub use load::{load, COMMAND_LINE};
pub use queue::{
    EdgePolicy, Queue, QueueSettings, DEFAULT_LIVE_BATCH_QUEUE, DEFAULT_LIVE_COLLECTOR_QUEUE,
    DEFAULT_LIVE_QUEUE, DEFAULT_QUEUE, QUEUE,
};
pub use quote::quote;
pub use registry::Builtin;
pub use vars::{parse, parse_set_by, parse_with_env, variables, SetBy};
pub use written::stage_text;

pub use octopipe_core::description::{closest, DescribeError, Description, Prop, Span, StageDesc};

#[cfg(test)]
mod tests;
