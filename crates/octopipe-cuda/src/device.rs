//! The devices: whether libcuda loads, how many GPUs the driver reports, and a device's primary
//! context.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use crate::{CudaError, NoGpu};

/// `Ok` when libcuda loads and reports at least one device; otherwise why not (for one log line).
pub fn available() -> Result<(), NoGpu> {
    match device_count()? {
        0 => Err(NoGpu::NoDevice),
        _ => Ok(()),
    }
}

/// The CUDA devices the driver reports; an error saying why when libcuda does not load or the
/// driver does not start.
pub fn device_count() -> Result<usize, NoGpu> {
    // SAFETY: only tries to dlopen libcuda by its usual names (cudarc panics without it).
    if !unsafe { sys::is_culib_present() } {
        return Err(NoGpu::NoDriver);
    }
    CudaContext::device_count()
        .map(|n| usize::try_from(n).unwrap_or(0))
        .map_err(NoGpu::Driver)
}

/// Device `device`'s primary context, or why there is none.
pub(crate) fn context(device: usize) -> Result<Arc<CudaContext>, CudaError> {
    match device_count() {
        Ok(n) if device < n => Ok(CudaContext::new(device)?),
        Ok(n) => Err(CudaError::Unavailable(format!(
            "cuda:{device} does not exist (the driver reports {n} GPUs)"
        ))),
        Err(e) => Err(CudaError::NoGpu(e)),
    }
}
