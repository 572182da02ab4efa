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
//! - [`Engine`]: a [`Gpu`] (the CUDA context, its stream, the compiled kernels) and the buffers
//!   it owns;
//! - frame and metadata uploads ([`Engine::upload_frames`], [`Engine::upload_meta`], [`HostFrame`],
//!   [`UploadMode`]);
//! - the strategy C launchers ([`Engine::launch`] for the bilinear fast path,
//!   [`Engine::launch_resample`] for area and letterbox);
//! - the device output and its copies back ([`OutType`], [`Engine::download`], ...);
//! - [`CudaBackend`], the preprocess [`Backend`](super::Backend) over one or two engines.
//!
//! The baseline strategies A, B, D and E that `octopipe bench preprocess` compares strategy C with
//! are part of the benchmarks (the `bench` module, cargo feature `bench`), not of this backend.
//!
//! Each launcher declares its kernel module beside its `.cu` file ([`OCTOPUS_KERNELS`],
//! [`RESAMPLE_KERNELS`], [`GATHER_KERNELS`]); the CUDA layer under it (devices, stream ordering,
//! the NVRTC compile and cache of kernel modules by name, the launch helpers, [`CudaError`]) is
//! the `octopipe-cuda` crate, which `tilestats`, the detector,
//! ONNX Runtime's sessions and NVDEC use too; its public items are re-exported here under the
//! paths they had before.

pub mod meta;

// The strategies the Octopus kernel is measured against (`octopipe bench preprocess`): beside the
// engine whose uploads and buffers they use, built only for the benchmarks.
mod backend;
#[cfg(feature = "bench")]
pub mod baselines;
pub(crate) mod engine;
mod gather;
pub(crate) mod launch;
mod output;
mod upload;

use cudarc::driver::{CudaEvent, CudaSlice, PinnedHostSlice};
use octopipe_cuda::Gpu;

use super::error::PreprocessError;
use crate::crops::CropMeta;
use meta::{FrameDesc, GatherRect, InputKind};
use upload::{MetaLayout, MetaSlot};

pub use backend::CudaBackend;
pub use engine::OCTOPUS_GRID_PER_SM;
pub use gather::GATHER_KERNELS;
pub use launch::{octopus_threads, OCTOPUS_KERNELS, OCTOPUS_MAX_THREADS, RESAMPLE_KERNELS};
pub use output::OutType;
pub use upload::{HostFrame, TransferStats, UploadMode};
// The CUDA layer itself (devices, streams, the kernel modules' compile, the error) is the
// octopipe-cuda crate; here under the paths it had before it moved there.
pub use octopipe_cuda::{
    available, device_count, kernels, order_after, order_streams, sync_stream, CudaError, NoGpu,
};

impl From<CudaError> for PreprocessError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::OutOfMemory(_) => PreprocessError::OutOfMemory(e),
            other => PreprocessError::Cuda(other),
        }
    }
}

/// A GPU (its CUDA context, one stream, the loaded kernels) and the reusable device and pinned
/// buffers of the preprocess backend.
pub struct Engine {
    /// The context, the stream all work of this engine runs on, and the kernels.
    pub(crate) gpu: Gpu,
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
