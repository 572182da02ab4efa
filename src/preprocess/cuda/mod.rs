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

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr,
    DriverError, PinnedHostSlice, ValidAsZeroBits,
};

use super::PreprocessError;
use crate::batch::CropMeta;
use kernels::{Kernel, KernelError, Module};
use meta::{FrameDesc, GatherRect, InputKind};
use upload::{MetaLayout, MetaSlot};

pub use backend::CudaBackend;
pub use engine::OCTOPUS_GRID_PER_SM;
pub use launch::{octopus_threads, OCTOPUS_MAX_THREADS};
pub use output::OutType;
pub use upload::{HostFrame, TransferStats, UploadMode};

/// Errors of the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No driver library or no device: the caller should fall back to the CPU backend.
    #[error("no usable GPU: {0}")]
    NoGpu(#[from] NoGpu),
    /// The device asked for does not exist.
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

impl crate::error::Kind for CudaError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            CudaError::NoGpu(_)
            | CudaError::Unavailable(_)
            | CudaError::OutOfMemory(_)
            | CudaError::Driver(_) => ErrorKind::Device,
            CudaError::Kernel(KernelError::NoNvrtc) => ErrorKind::Unavailable,
            CudaError::Kernel(KernelError::Compile { .. }) => ErrorKind::Internal,
            CudaError::Invalid(_) => ErrorKind::Internal,
        }
    }
}

impl From<CudaError> for PreprocessError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::OutOfMemory(_) => PreprocessError::OutOfMemory(e),
            other => PreprocessError::Cuda(other),
        }
    }
}

/// Why no GPU can be used here.
#[derive(Debug, Clone, thiserror::Error)]
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

impl crate::error::Kind for NoGpu {
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::Device
    }
}

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
        Err(e) => Err(CudaError::NoGpu(e)),
    }
}

/// A CUDA context, one stream, the loaded kernels, and the reusable device and pinned buffers.
pub struct Engine {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    arch: String,
    modules: HashMap<Module, Arc<CudaModule>>,
    funcs: HashMap<Kernel, CudaFunction>,
    /// One descriptor per uploaded frame (per crop after a rectangle upload).
    descs: Vec<FrameDesc>,
    /// The input kind shared by the frames of the last upload.
    kind: Option<InputKind>,
    /// The packed metadata of the last [`Self::upload_meta`], before its copy to the device.
    pub(crate) host_meta: Vec<u8>,
    meta_ring: Vec<MetaSlot>,
    ring_next: usize,
    /// Upload scratch: the byte ranges of one frame's touched rows, and their merged row spans.
    rows: Vec<(usize, usize)>,
    spans: Vec<(usize, usize)>,
    /// Upload scratch: each frame's offset in the arena (or its device address for a GPU gather).
    bases: Vec<usize>,
    /// The device frame arena.
    pub(crate) arena: Option<CudaSlice<u8>>,
    /// The device copy of the packed metadata.
    pub(crate) meta: Option<CudaSlice<u8>>,
    /// Where the parts of the last metadata upload lie in [`Self::meta`].
    pub(crate) layout: MetaLayout,
    /// The device output of the last f32 launch.
    pub(crate) out32: Option<CudaSlice<f32>>,
    /// The device output of the last f16 launch (IEEE half bits).
    out16: Option<CudaSlice<u16>>,
    /// Outputs handed over as tensors ([`Self::take_output`]) come back here when dropped.
    free32: output::OutputPool<f32>,
    /// The same for f16 outputs.
    free16: output::OutputPool<u16>,
    /// Byte counts of the last upload.
    pub stats: TransferStats,
    /// Preprocessing kernels launched so far (strategy C, area and letterbox; not the uploads'
    /// gathers): a batch is one launch whatever its crops.
    pub launches: u64,
    /// Most CUDA blocks of a strategy C launch; 0: one CUDA block per `BlockMeta` entry. Only
    /// with kernels built with `-DOCTOPUS_PERSISTENT=1` (in `$OCTOPIPE_NVRTC_DEFINES`), which loop
    /// over the block list with stride gridDim.x; then [`OCTOPUS_GRID_PER_SM`] per multiprocessor,
    /// or `$OCTOPIPE_OCTOPUS_GRID_PER_SM`. See [`Self::set_octopus_grid`].
    octopus_grid: u32,
    persistent: bool,
    sms: u32,
    /// (width, height) of each frame of the last upload.
    dims: Vec<(u32, u32)>,
    /// [`UploadMode::Rects`]: the crops with `frame` = the crop's own
    /// index (one descriptor each).
    rect_crops: Vec<CropMeta>,
    /// Whether the last upload was a rectangle upload (the crops go up as [`Self::rect_crops`]).
    remap: bool,
    /// The pinned staging buffer of the host gather, and the event recorded after its copy.
    rect_host: Option<PinnedHostSlice<u8>>,
    rect_done: Option<CudaEvent>,
    /// [`Self::set_device_gather`].
    device_gather: bool,
    /// The rectangles of the last device gather, cut into kernel-parameter tables.
    gathers: Vec<GatherRect>,
}

/// Grow a device buffer to at least `len` elements (25% headroom); no-op when large enough.
pub(crate) fn grow<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    slot: &mut Option<CudaSlice<T>>,
    len: usize,
) -> Result<(), DriverError> {
    if slot.as_ref().is_none_or(|s| s.len() < len) {
        *slot = None;
        *slot = Some(stream.alloc_zeros::<T>((len + len / 4).max(256))?);
    }
    Ok(())
}

/// Grow a pinned host buffer to at least `len` elements (25% headroom); no-op when large enough.
fn grow_pinned<T: DeviceRepr + Default>(
    ctx: &Arc<CudaContext>,
    slot: &mut Option<PinnedHostSlice<T>>,
    len: usize,
) -> Result<(), CudaError> {
    if slot.as_ref().is_none_or(|s| s.len() < len) {
        *slot = None;
        // SAFETY: the buffer is only read after a device copy into it has completed.
        *slot = Some(unsafe { ctx.alloc_pinned::<T>((len + len / 4).max(1024)) }?);
    }
    Ok(())
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
