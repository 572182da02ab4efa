//! octopipe's own detector engine (issue 53): the ONNX file read with its weights ([`model`]),
//! every tensor's shape for a batch ([`shape`]), the fusion plan with its traffic model
//! ([`plan`]), the plan as the engine's kernels ([`program`]), those kernels on a GPU ([`gpu`]:
//! `engine.cu`, FP16 NHWC, one CUDA graph per batch) and a plain f32 CPU interpreter of the graph
//! that the GPU's results are checked against ([`mod@reference`]).
//!
//! The engine's op set is the shared CenterNet's (Conv incl. depthwise and grouped,
//! ConvTranspose, Resize, HardSwish, HardSigmoid, Add, Mul, Relu, GlobalAveragePool, Sigmoid,
//! Concat, Transpose, Clip); a model with any other op is refused naming the op and its node.
//! The plan fuses each convolution with its bias, activation, residual Add and squeeze-excite gate
//! Mul, and counts the bytes each step moves against the unfused graph (one kernel per node, as
//! ONNX Runtime's CUDA provider runs it): for the six-class FP16 CenterNet heads model the
//! unfused graph moves 1.6x the plan's bytes (docs/engine.md has the figures).
//!
//! The detect stage runs it with `detect engine=octopipe` (one engine per batch size, its heads
//! read on the GPU by the stage's peak kernel); ONNX Runtime stays the default. docs/engine.md
//! has what was measured.
//!
//! ```no_run
//! let model = octopipe_engine::Model::read("heads.onnx".as_ref())?;
//! let plan = octopipe_engine::Plan::new(&model, 64)?;
//! println!("{}", plan.summary());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod gpu;
pub mod model;
pub mod plan;
pub mod program;
pub mod proto;
pub mod reference;
pub mod shape;
pub mod weight;

pub use model::{Model, ModelError};
pub use plan::{Plan, PlanError};
pub use shape::{ShapeError, Shapes};
