//! ONNX Runtime, shared by the stages that run models (classify, detect).
//!
//! The library is loaded at run time from `ORT_DYLIB_PATH` (default `libonnxruntime.so`); one
//! environment is shared by the whole process. A model's [`Sessions`] run on the CPU execution
//! provider or on CUDA's ([`Ep`]): the CUDA one needs an ONNX Runtime build with it (pip
//! `onnxruntime-gpu`) and a GPU; `Ep::Auto` takes it when both are there and otherwise says why in
//! one log line.

mod env;
mod error;
mod fixed;
mod props;
mod session;
mod sessions;
mod worker;

pub use env::environment;
pub use error::{FixedError, FixedStep, OnnxError};
pub use fixed::{FixedInput, FixedOutput};
pub use props::{EpKind, OnnxProps};
pub use session::{session, CudaOptions, Ep};
pub use sessions::{cuda_input, mark, DeviceZeros, Sessions};
pub(crate) use worker::{Ticket, Worker};
