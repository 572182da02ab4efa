//! Why nvJPEG cannot decode here ([`NvjpegError`]).

use std::sync::Arc;

/// Why nvJPEG cannot decode here.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NvjpegError {
    /// `libnvjpeg` is not installed (pip `nvidia-nvjpeg-cu13` or a CUDA toolkit has it).
    #[error("libnvjpeg does not load ({0})")]
    Library(String),
    /// `libnvjpeg` lacks a function octopipe calls.
    #[error("libnvjpeg has no {name}: {source}")]
    Symbol {
        /// The function.
        name: &'static str,
        /// The loader's error.
        #[source]
        source: Arc<libloading::Error>,
    },
    /// No usable GPU.
    #[error("{0}")]
    NoGpu(String),
    /// An nvJPEG call failed.
    #[error("{call} failed: {status}")]
    Call {
        /// The function.
        call: &'static str,
        /// nvJPEG's status name.
        status: &'static str,
    },
    /// A CUDA call failed (memory, the stream).
    #[error("CUDA: {0}")]
    Cuda(String),
    /// The decoder's thread is gone.
    #[error("the nvJPEG decoder stopped")]
    Stopped,
}
