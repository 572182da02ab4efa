//! The CUDA backend: the same crop + resize + colour conversion + normalization as the CPU backend
//! (its reference semantics), as NVRTC-compiled kernels driven by the batch's Octopus block metadata.
//!
//! ```text
//! ... ! preprocess backend=cuda size=64x64 ! classify ...
//! ```
//!
//! Per batch: the frames are uploaded once (whole, only the rows their crops touch, or only each
//! crop's rectangle: gathered on the host and copied, or pulled by the GPU from page-locked frames)
//! into a device frame arena; the frame descriptors, crops and blocks are packed into one
//! host buffer and uploaded with one copy through pinned memory; one kernel launch writes every crop;
//! the result stays on the device ([`Engine::output_f32`]) or is copied back for ONNX Runtime on the
//! CPU. All buffers grow and are reused: no allocation per batch in steady state.
//!
//! The parts, by job:
//! - [`Engine`]: the CUDA context, its stream, the compiled kernels and the buffers it owns;
//! - frame and metadata uploads ([`Engine::upload_frames`], [`Engine::upload_meta`], [`HostFrame`],
//!   [`UploadMode`]);
//! - the strategy C launchers ([`Engine::launch`] for the bilinear fast path,
//!   [`Engine::launch_resample`] for area and letterbox);
//! - the device output and its copies back ([`OutType`], [`Engine::download_f32`], ...);
//! - [`CudaBackend`], the preprocess [`Backend`](super::Backend) over one or two engines.
//!
//! The baseline strategies A, B, D and E that `octopipe bench preprocess` compares strategy C with
//! are part of the benchmarks (the `bench` module, cargo feature `bench`), not of this backend.

pub mod kernels;
pub mod meta;

mod backend;
pub(crate) mod engine;
pub(crate) mod launch;
mod output;
mod upload;

use cudarc::driver::{sys, CudaContext, CudaStream, DriverError};

use super::PreprocessError;
use kernels::KernelError;

pub use backend::CudaBackend;
pub use engine::{Engine, OCTOPUS_GRID_PER_SM};
pub use launch::{octopus_threads, OCTOPUS_MAX_THREADS};
pub use output::OutType;
pub use upload::{HostFrame, TransferStats, UploadMode};

/// Errors of the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No driver library or no device: the caller should fall back to the CPU backend.
    #[error("no usable GPU: {0}")]
    Unavailable(String),
    /// A kernel module failed to compile.
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

impl From<CudaError> for PreprocessError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::OutOfMemory(_) => PreprocessError::OutOfMemory(e.to_string()),
            other => PreprocessError::Cuda(other.to_string()),
        }
    }
}

/// `Ok` when libcuda loads and reports at least one device; otherwise why not (for one log line).
pub fn available() -> Result<(), String> {
    match device_count()? {
        0 => Err("the NVIDIA driver reports no GPU".into()),
        _ => Ok(()),
    }
}

/// The CUDA devices the driver reports; an error saying why when libcuda does not load or the
/// driver does not start.
pub fn device_count() -> Result<usize, String> {
    // SAFETY: only tries to dlopen libcuda by its usual names (cudarc panics without it).
    if !unsafe { sys::is_culib_present() } {
        return Err("libcuda.so not found (no NVIDIA driver)".into());
    }
    CudaContext::device_count()
        .map(|n| usize::try_from(n).unwrap_or(0))
        .map_err(|e| format!("the NVIDIA driver cannot start: {e:?}"))
}

/// Order the work queued from now on on `consumer` after everything queued so far on `producer`
/// (streams of `ctx`, made by different components: a decoder, the preprocess engine,
/// ONNX Runtime; a producer of 0 has nothing pending): the consumer waits on an event recorded on
/// the producer. No host wait, no device-wide synchronization.
pub fn order_after(
    ctx: &CudaContext,
    consumer: &CudaStream,
    producer: u64,
) -> Result<(), CudaError> {
    if producer == 0 {
        return Ok(());
    }
    ctx.bind_to_thread()?;
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    let mut event: sys::CUevent = std::ptr::null_mut();
    // SAFETY: the event is created, recorded on the producer's stream, waited on by the
    // consumer's stream and destroyed (CUDA keeps it alive until the wait is resolved); both
    // streams belong to this context (the callers check the device).
    unsafe {
        sys::cuEventCreate(&mut event, flags).result()?;
        let ordered = sys::cuEventRecord(event, producer as sys::CUstream)
            .result()
            .and_then(|()| sys::cuStreamWaitEvent(consumer.cu_stream(), event, 0).result());
        sys::cuEventDestroy_v2(event).result()?;
        ordered?;
    }
    Ok(())
}

/// [`order_after`] for raw `CUstream` handles of device `device`'s primary context, as other
/// libraries hand them over (DLPack's `stream=`, `__cuda_array_interface__`'s `stream`; 1 and 2
/// are CUDA's legacy and per-thread default streams): work queued from now on on `consumer`
/// runs after everything queued so far on `producer`.
pub fn order_streams(device: usize, consumer: u64, producer: u64) -> Result<(), CudaError> {
    if producer == 0 || producer == consumer {
        return Ok(());
    }
    let ctx = context(device)?;
    ctx.bind_to_thread()?;
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    let mut event: sys::CUevent = std::ptr::null_mut();
    // SAFETY: as in `order_after`; the caller vouches that both handles are live streams of
    // this device's primary context (or CUDA's default-stream handles).
    unsafe {
        sys::cuEventCreate(&mut event, flags).result()?;
        let ordered = sys::cuEventRecord(event, producer as sys::CUstream)
            .result()
            .and_then(|()| sys::cuStreamWaitEvent(consumer as sys::CUstream, event, 0).result());
        sys::cuEventDestroy_v2(event).result()?;
        ordered?;
    }
    Ok(())
}

/// Wait on the host until the work queued so far on the raw stream `stream` of device
/// `device`'s primary context is done (before memory another library read goes back to a pool).
pub fn sync_stream(device: usize, stream: u64) -> Result<(), CudaError> {
    let ctx = context(device)?;
    ctx.bind_to_thread()?;
    // SAFETY: the caller vouches that `stream` is a live stream of this context (or a
    // default-stream handle).
    unsafe { sys::cuStreamSynchronize(stream as sys::CUstream).result()? };
    Ok(())
}

/// Device `device`'s primary context, or why there is none.
fn context(device: usize) -> Result<std::sync::Arc<CudaContext>, CudaError> {
    match device_count() {
        Ok(n) if device < n => Ok(CudaContext::new(device)?),
        Ok(n) => Err(CudaError::Unavailable(format!(
            "cuda:{device} does not exist (the driver reports {n} GPUs)"
        ))),
        Err(e) => Err(CudaError::Unavailable(e)),
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
