//! [`Engine`]: one [`Gpu`] (CUDA context, stream, loaded kernel modules and functions, what it
//! knows of the device) and the device and pinned buffers it owns (grown and reused, never shrunk).
//!
//! The struct itself lives in `cuda/mod.rs`: the uploads (`upload.rs`), the outputs (`output.rs`)
//! and the launches (`launch.rs`) add methods to it without importing this file, which holds its
//! opening and the accessors of its GPU.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use octopipe_cuda::{kernels, Gpu, KernelModule};

use super::gather::GATHER_KERNELS;
use super::launch::{OCTOPUS_KERNELS, RESAMPLE_KERNELS};
use super::upload::{MetaLayout, TransferStats};
use super::{CudaError, Engine};

/// CUDA blocks per multiprocessor of a persistent strategy C launch (kernels built with
/// `-DOCTOPUS_PERSISTENT=1`; the default build launches one CUDA block per `BlockMeta` entry).
pub const OCTOPUS_GRID_PER_SM: u32 = 4;

impl Engine {
    /// Open GPU `ordinal` and compile (or take from the cache) the backend's kernel modules
    /// (strategy C, resample, gather) for its architecture. Errors with [`CudaError::NoGpu`]
    /// when there is no libcuda or no GPU.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let gpu = Gpu::new(
            ordinal,
            &[&OCTOPUS_KERNELS, &RESAMPLE_KERNELS, &GATHER_KERNELS],
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
