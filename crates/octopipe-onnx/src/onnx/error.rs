//! The errors of the session layer: ONNX Runtime or a model that cannot be loaded ([`OnnxError`]),
//! a fixed batch size that cannot be bound or run ([`FixedError`], [`FixedStep`]).

/// Environment variable naming the ONNX Runtime library.
pub(crate) const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";
/// The ONNX Runtime version octopipe is built against.
pub(crate) const ORT_VERSION: &str = "1.31.1";

/// ONNX Runtime or a model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// The ONNX Runtime library could not be loaded.
    #[error("ONNX Runtime library {path}: {reason}\n  hint: pip install onnxruntime=={ORT_VERSION} and set {ORT_DYLIB_ENV} to its onnxruntime/capi/libonnxruntime.so.{ORT_VERSION} (scripts/setup.sh does both)")]
    Runtime {
        /// The library path tried.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The model file could not be loaded.
    #[error("model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A fixed batch size could not be bound, warmed up or run.
    #[error("model {path}: {}: {source}", step.describe(*rows))]
    Fixed {
        /// The model file.
        path: String,
        /// The batch size.
        rows: usize,
        /// What was being done with it.
        step: FixedStep,
        /// Why it failed.
        source: FixedError,
    },
}

impl octopipe_core::error::Kind for OnnxError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        match self {
            OnnxError::Runtime { .. } => octopipe_core::error::ErrorKind::Unavailable,
            OnnxError::Model { .. } | OnnxError::Fixed { .. } => {
                octopipe_core::error::ErrorKind::Model
            }
        }
    }
}

/// Why a fixed batch size could not be bound to its buffers or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixedError {
    /// ONNX Runtime failed a call (a buffer, the binding, the run).
    #[error("{0}")]
    Ort(#[from] ort::Error),
    /// A CUDA driver call failed (a copy, the stream's context, its synchronization).
    #[error("CUDA: {0:?}")]
    Cuda(#[from] cudarc::driver::DriverError),
    /// The model has no input or output of that name.
    #[error("no tensor '{0}'")]
    NoTensor(String),
    /// The named input or output is not a tensor.
    #[error("'{0}' is not a tensor")]
    NotTensor(String),
    /// A dimension besides the batch is not fixed.
    #[error("'{name}' {dims:?}: fixed batch sizes need every dimension but the batch fixed")]
    Unfixed {
        /// The tensor.
        name: String,
        /// Its dimensions as the model declares them.
        dims: Vec<i64>,
    },
    /// The input is neither float32 nor float16.
    #[error("input '{name}' is {ty}: bound runs take float32 or float16")]
    InputType {
        /// The input.
        name: String,
        /// Its element type.
        ty: String,
    },
    /// An output is neither float32 nor float16.
    #[error("output '{name}' is {ty}: float32 or float16 needed")]
    OutputType {
        /// The output.
        name: String,
        /// Its element type.
        ty: String,
    },
    /// More rows than the size holds.
    #[error("{n} rows for a batch of {rows}")]
    TooManyRows {
        /// Rows asked for.
        n: usize,
        /// The size.
        rows: usize,
    },
    /// Host buffers of other lengths than the outputs.
    #[error("host buffers that do not fit the outputs")]
    HostBuffers,
    /// The input holds fewer values than the rows need.
    #[error("the input holds {have} values, {n} rows need {need}")]
    ShortInput {
        /// Values given.
        have: usize,
        /// Rows asked for.
        n: usize,
        /// Values they need.
        need: usize,
    },
    /// Host values of the other element type than the input's.
    #[error("host values of the wrong type for a {0} input")]
    HostType(&'static str),
    /// No size of that index.
    #[error("no such fixed size")]
    NoSize,
}

/// What was being done with a fixed batch size when it failed ([`OnnxError::Fixed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FixedStep {
    /// Binding its input and outputs to device buffers.
    Bind,
    /// Its warm-up runs (ONNX Runtime plans the shape; a CUDA graph is captured).
    Warm,
    /// Its warm-up runs again, without a CUDA graph.
    WarmPlain,
    /// A run.
    Run,
}

impl FixedStep {
    /// The step, for batch size `rows`, as the error message says it.
    pub fn describe(self, rows: usize) -> String {
        match self {
            FixedStep::Bind => format!("batch {rows} bound to device buffers"),
            FixedStep::Warm => format!("warming up batch {rows}"),
            FixedStep::WarmPlain => format!("warming up batch {rows} (without a CUDA graph)"),
            FixedStep::Run => format!("batch {rows}"),
        }
    }
}
