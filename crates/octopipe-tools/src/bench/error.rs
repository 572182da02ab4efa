//! The benchmarks' error type.

use octopipe_stages::preprocess::PreprocessError;

/// Errors of the benchmarks.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A preprocess backend failed.
    #[error(transparent)]
    Preprocess(#[from] PreprocessError),
    /// The CUDA layer failed.
    #[error(transparent)]
    Cuda(#[from] octopipe_cuda::CudaError),
    /// No GPU can be used here (the GPU rows are skipped).
    #[error(transparent)]
    NoGpu(#[from] octopipe_cuda::NoGpu),
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// Making the benchmark's video failed (GStreamer, x264enc, the clip's files).
    #[error("making the benchmark video: {0}")]
    Encode(String),
}
