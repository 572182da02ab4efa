//! octopipe's own detector engine, its CPU half (issue 53): the ONNX file read with its weights
//! ([`model`]), every tensor's shape for a batch ([`shape`]) and the fusion plan with its traffic
//! model ([`plan`]).
//!
//! The engine's op set is the shared CenterNet's (Conv incl. depthwise and grouped,
//! ConvTranspose, Resize, HardSwish, HardSigmoid, Add, Mul, Relu, GlobalAveragePool, Sigmoid,
//! Concat, Transpose, Clip); a model with any other op is refused naming the op and its node.
//! The plan fuses each convolution with its bias, activation, residual Add and squeeze-excite gate
//! Mul, and counts the bytes each step moves against the unfused graph (one kernel per node, as
//! ONNX Runtime's CUDA provider runs it): for the six-class FP16 CenterNet heads model the
//! unfused graph moves 1.6x the plan's bytes (docs/engine.md has the figures).
//!
//! Not built yet: the GPU execution (cuDNN's fused convolutions, octopipe's own kernels for what
//! cuDNN does not fuse, one CUDA graph per batch size), and `detect engine=octopipe`. Nothing in
//! the workspace depends on this crate yet.
//!
//! ```no_run
//! let model = octopipe_engine::Model::read("heads.onnx".as_ref())?;
//! let plan = octopipe_engine::Plan::new(&model, 64)?;
//! println!("{}", plan.summary());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod model;
pub mod plan;
pub mod proto;
pub mod shape;
pub mod weight;

pub use model::{Model, ModelError};
pub use plan::{Plan, PlanError};
pub use shape::{ShapeError, Shapes};
