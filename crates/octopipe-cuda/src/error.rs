//! [`CudaError`], the CUDA layer's error, and [`NoGpu`], why no GPU can be used here.

use cudarc::driver::{sys, DriverError};
use octopipe_core::error::{ErrorKind, Kind};

use crate::kernels::KernelError;

/// Errors of the CUDA layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// No driver library or no device: the caller should fall back to the CPU backend.
    #[error("no usable GPU: {0}")]
    NoGpu(#[from] NoGpu),
    /// The device asked for does not exist.
    #[error("no usable GPU: {0}")]
    Unavailable(String),
    /// A kernel module failed to compile, or a launcher asked for what its module lacks.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The device ran out of memory (`CUDA_ERROR_OUT_OF_MEMORY`): the batch may fit on the CPU.
    #[error("CUDA driver: {0:?}")]
    OutOfMemory(DriverError),
    /// Any other failed CUDA driver call.
    #[error("CUDA driver: {0:?}")]
    Driver(DriverError),
    /// The batch does not suit the kernels.
    #[error("{0}")]
    Invalid(String),
}

impl From<DriverError> for CudaError {
    fn from(e: DriverError) -> Self {
        if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            CudaError::OutOfMemory(e)
        } else {
            CudaError::Driver(e)
        }
    }
}

impl Kind for CudaError {
    fn kind(&self) -> ErrorKind {
        match self {
            CudaError::NoGpu(_)
            | CudaError::Unavailable(_)
            | CudaError::OutOfMemory(_)
            | CudaError::Driver(_) => ErrorKind::Device,
            CudaError::Kernel(KernelError::NoNvrtc) => ErrorKind::Unavailable,
            CudaError::Kernel(_) => ErrorKind::Internal,
            CudaError::Invalid(_) => ErrorKind::Internal,
        }
    }
}

/// Why no GPU can be used here.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NoGpu {
    /// libcuda does not load.
    #[error("libcuda.so not found (no NVIDIA driver)")]
    NoDriver,
    /// The driver does not start.
    #[error("the NVIDIA driver cannot start: {0:?}")]
    Driver(#[source] DriverError),
    /// The driver reports no device.
    #[error("the NVIDIA driver reports no GPU")]
    NoDevice,
}

impl Kind for NoGpu {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Device
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_is_its_own_variant() {
        let oom = DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        assert!(matches!(CudaError::from(oom), CudaError::OutOfMemory(_)));
        let lost = DriverError(sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert!(matches!(CudaError::from(lost), CudaError::Driver(_)));
    }
}
