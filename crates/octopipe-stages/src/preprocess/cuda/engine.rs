//! [`Engine`]: one [`Gpu`] (CUDA context, stream, loaded kernel modules and functions, what it
//! knows of the device) and the device and pinned buffers it owns (grown and reused, never shrunk).
//!
//! This file holds the struct, its opening and the accessors of its GPU; the uploads
//! (`upload.rs`), the outputs (`output.rs`) and the launches (`launch.rs`) add methods to it.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, PinnedHostSlice,
};
use octopipe_cuda::{kernels, CudaError, Gpu, KernelModule, StreamPriority};

use super::gather::GATHER_KERNELS;
use super::launch::{OCTOPUS_KERNELS, RESAMPLE_KERNELS};
use super::meta::{FrameDesc, GatherRect, InputKind};
use super::output;
use super::upload::{MetaLayout, MetaSlot, TransferStats};
use crate::preprocess::error::PreprocessError;
use octopipe_core::crops::CropMeta;

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
    pub(super) descs: Vec<FrameDesc>,
    /// The input kind shared by the frames of the last upload.
    pub(super) kind: Option<InputKind>,
    /// The packed metadata of the last [`Self::upload_meta`], before its copy to the device.
    pub(crate) host_meta: Vec<u8>,
    pub(super) meta_ring: Vec<MetaSlot>,
    pub(super) ring_next: usize,
    /// Upload scratch: the byte ranges of one frame's touched rows, and their merged row spans.
    pub(super) rows: Vec<(usize, usize)>,
    pub(super) spans: Vec<(usize, usize)>,
    /// Upload scratch: each frame's offset in the arena (or its device address for a GPU gather).
    pub(super) bases: Vec<usize>,
    /// The device frame arena.
    pub(crate) arena: Option<CudaSlice<u8>>,
    /// The device copy of the packed metadata.
    pub(crate) meta: Option<CudaSlice<u8>>,
    /// Where the parts of the last metadata upload lie in [`Self::meta`].
    pub(crate) layout: MetaLayout,
    /// The device output of the last f32 launch.
    pub(crate) out32: Option<CudaSlice<f32>>,
    /// The device output of the last f16 launch (IEEE half bits).
    pub(super) out16: Option<CudaSlice<u16>>,
    /// Outputs handed over as tensors ([`Self::take_output`]) come back here when dropped.
    pub(super) free32: output::OutputPool<f32>,
    /// The same for f16 outputs.
    pub(super) free16: output::OutputPool<u16>,
    /// Byte counts of the last upload.
    pub stats: TransferStats,
    /// Preprocessing kernels launched so far (strategy C, area and letterbox; not the uploads'
    /// gathers): a batch is one launch whatever its crops.
    pub launches: u64,
    /// Most CUDA blocks of a strategy C launch; 0: one CUDA block per `BlockMeta` entry. Only
    /// with kernels built with `-DOCTOPUS_PERSISTENT=1` (in `$OCTOPIPE_NVRTC_DEFINES`), which loop
    /// over the block list with stride gridDim.x; then [`OCTOPUS_GRID_PER_SM`] per multiprocessor,
    /// or `$OCTOPIPE_OCTOPUS_GRID_PER_SM`. See [`Self::set_octopus_grid`].
    pub(super) octopus_grid: u32,
    pub(super) persistent: bool,
    /// (width, height) of each frame of the last upload.
    pub(super) dims: Vec<(u32, u32)>,
    /// [`UploadMode::Rects`]: the crops with `frame` = the crop's own
    /// index (one descriptor each).
    pub(super) rect_crops: Vec<CropMeta>,
    /// Whether the last upload was a rectangle upload (the crops go up as [`Self::rect_crops`]).
    pub(super) remap: bool,
    /// The pinned staging buffer of the host gather, and the event recorded after its copy.
    pub(super) rect_host: Option<PinnedHostSlice<u8>>,
    pub(super) rect_done: Option<CudaEvent>,
    /// [`Self::set_device_gather`].
    pub(super) device_gather: bool,
    /// The rectangles of the last device gather, cut into kernel-parameter tables.
    pub(super) gathers: Vec<GatherRect>,
}

/// CUDA blocks per multiprocessor of a persistent strategy C launch (kernels built with
/// `-DOCTOPUS_PERSISTENT=1`; the default build launches one CUDA block per `BlockMeta` entry).
pub const OCTOPUS_GRID_PER_SM: u32 = 4;

impl Engine {
    /// Open GPU `ordinal` and compile (or take from the cache) the backend's kernel modules
    /// (strategy C, resample, gather) for its architecture. Errors with [`CudaError::NoGpu`]
    /// when there is no libcuda or no GPU.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        Self::with_priority(ordinal, StreamPriority::Normal)
    }

    /// [`Self::new`] with the engine's stream at `priority`.
    pub fn with_priority(ordinal: usize, priority: StreamPriority) -> Result<Self, CudaError> {
        let gpu = Gpu::with_priority(
            ordinal,
            &[&OCTOPUS_KERNELS, &RESAMPLE_KERNELS, &GATHER_KERNELS],
            priority,
        )?;
        let sms = gpu.multiprocessors();
        let per_sm = std::env::var("OCTOPIPE_OCTOPUS_GRID_PER_SM")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(OCTOPUS_GRID_PER_SM);
        let persistent = kernels::nvrtc_define("OCTOPUS_PERSISTENT").is_some_and(|v| v == "1");
        Ok(Engine {
            gpu,
            descs: Vec::new(),
            kind: None,
            host_meta: Vec::new(),
            meta_ring: Vec::new(),
            ring_next: 0,
            rows: Vec::new(),
            spans: Vec::new(),
            bases: Vec::new(),
            arena: None,
            meta: None,
            layout: MetaLayout::default(),
            out32: None,
            out16: None,
            free32: Default::default(),
            free16: Default::default(),
            stats: TransferStats::default(),
            launches: 0,
            octopus_grid: if persistent { sms * per_sm } else { 0 },
            persistent,
            dims: Vec::new(),
            rect_crops: Vec::new(),
            remap: false,
            rect_host: None,
            rect_done: None,
            device_gather: false,
            gathers: Vec::new(),
        })
    }

    /// The GPU: context, stream and kernels.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        self.gpu.context()
    }

    /// The stream all work of this engine runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.gpu.stream()
    }

    /// The virtual architecture the kernels were compiled for (`compute_90`).
    pub fn arch(&self) -> &str {
        self.gpu.arch()
    }

    /// Launch strategy C on at most `grid` CUDA blocks (0: one per `BlockMeta` entry). Returns
    /// false, and leaves one block per entry, unless the kernels loop over the block list
    /// (`-DOCTOPUS_PERSISTENT=1`).
    pub fn set_octopus_grid(&mut self, grid: u32) -> bool {
        if self.persistent || grid == 0 {
            self.octopus_grid = grid;
            true
        } else {
            false
        }
    }

    /// Let [`UploadMode::Rects`](super::UploadMode::Rects) (and `Auto` where it picks rectangles)
    /// have the GPU pull the crop rectangles straight out of the frames (`gather.cu`)
    /// instead of gathering their rows on the host and copying them: no host work per row and no
    /// copy for the pixels. The rectangle table travels in the gather kernel's parameters, so the
    /// gather is queued at once and runs while the host builds the metadata.
    ///
    /// # Safety
    /// While on, every frame given to [`Self::upload_frames`] must be page-locked host memory
    /// (`CudaContext::alloc_pinned*`, `cuMemHostAlloc` or registered; checked: an error
    /// otherwise), and must stay alive and unchanged until this engine's stream has run that
    /// batch's gather (a download or a stream synchronize waits for it): the GPU reads it after
    /// the calls return.
    pub unsafe fn set_device_gather(&mut self, on: bool) {
        self.device_gather = on;
    }

    /// Multiprocessors of the GPU.
    pub fn multiprocessors(&self) -> u32 {
        self.gpu.multiprocessors()
    }

    /// The GPU's name.
    pub fn device_name(&self) -> String {
        self.gpu.device_name()
    }

    /// Load `module` on the engine's GPU now (compiled once per process) rather than at its first
    /// launch: a module of the benchmarks or of another stage whose kernels the caller measures.
    pub fn load(&mut self, module: &KernelModule) -> Result<(), CudaError> {
        self.gpu.load(module)
    }

    /// Registers per thread, local (spill) bytes per thread and static shared bytes of entry
    /// point `function` of `module` (loaded on first use).
    pub fn kernel_resources(
        &mut self,
        module: &KernelModule,
        function: &str,
    ) -> Result<(i32, i32, i32), CudaError> {
        self.gpu.kernel_resources(module, function)
    }

    /// Entry point `function` of `module` (loaded on first use; looked up once, then cached).
    pub(crate) fn func(
        &mut self,
        module: &KernelModule,
        function: &str,
    ) -> Result<CudaFunction, CudaError> {
        self.gpu.func(module, function)
    }
}
