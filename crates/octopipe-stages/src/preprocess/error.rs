//! The preprocess stage's errors.

/// Errors of the preprocess stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PreprocessError {
    /// The batch is inconsistent (a bug upstream or a hand-built batch).
    #[error("crop batch is invalid: {0}")]
    InvalidBatch(String),
    /// A frame's pixels were released before preprocessing.
    #[error("frame {seq} of stream {stream} has no pixels")]
    NoPixels {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
    },
    /// Settings that cannot work together or on this machine.
    #[error("preprocess: {0}")]
    Setting(String),
    /// The batch's tensor could not be allocated (the system refused the memory).
    #[error("preprocess: the tensor of a batch of {crops} crops needs {bytes} bytes, more than the memory this process may still take: lower max-crops or the output size")]
    TooLarge {
        /// Crops in the batch.
        crops: usize,
        /// Bytes its tensor needs.
        bytes: u64,
    },
    /// A frame's planes are in device memory and this backend reads host memory.
    #[error("frame {seq} of stream {stream} is in CUDA device memory: the CPU backend reads host frames (preprocess backend=cuda takes device frames)")]
    NotOnHost {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
    },
    /// A frame in a pixel format the backends do not convert (16-bit grey).
    #[error("frame {seq} of stream {stream} is {format}: the CUDA preprocess backend reads 8-bit YUV, RGB and grey frames (backend=cpu reads 16-bit grey ones too, as values / 257)")]
    Format {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
        /// Its pixel format.
        format: octopipe_core::frame::PixelFormat,
    },
    /// The GPU backend failed.
    #[error("CUDA: {0}")]
    Cuda(#[source] octopipe_cuda::CudaError),
    /// The GPU ran out of memory on this batch (`CUDA_ERROR_OUT_OF_MEMORY`); the batch may still
    /// fit on the CPU ([`GpuWithFallback`](super::GpuWithFallback) does that).
    #[error("CUDA: {0}")]
    OutOfMemory(#[source] octopipe_cuda::CudaError),
    /// The GPU failed on a batch other than by running out of memory (a lost device, a failed
    /// launch): [`GpuWithFallback`](super::GpuWithFallback) stops with this.
    #[error(
        "CUDA: GPU preprocessing failed (is the device still there? nvidia-smi shows it): {0}"
    )]
    GpuFailed(#[source] octopipe_cuda::CudaError),
}

impl octopipe_core::error::Kind for PreprocessError {
    fn kind(&self) -> octopipe_core::error::ErrorKind {
        use octopipe_core::error::ErrorKind;
        match self {
            PreprocessError::InvalidBatch(_) | PreprocessError::NoPixels { .. } => {
                ErrorKind::Internal
            }
            PreprocessError::Setting(_)
            | PreprocessError::NotOnHost { .. }
            | PreprocessError::TooLarge { .. } => ErrorKind::Config,
            PreprocessError::Format { .. } => ErrorKind::Input,
            PreprocessError::Cuda(_)
            | PreprocessError::OutOfMemory(_)
            | PreprocessError::GpuFailed(_) => ErrorKind::Device,
        }
    }
}

octopipe_core::error::stage_error!(PreprocessError);
