//! [`Engine`]: one CUDA context, its stream, the loaded kernel modules and functions, what it knows
//! of the device, and the device and pinned buffers it owns (grown and reused, never shrunk).

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr,
    DriverError, PinnedHostSlice, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;

use super::kernels::{self, Kernel, Module};
use super::meta::{FrameDesc, GatherRect, InputKind};
use super::upload::{MetaLayout, MetaSlot, TransferStats};
use super::{available, CudaError};
use crate::batch::CropMeta;

/// CUDA blocks per multiprocessor of a persistent strategy C launch (kernels built with
/// `-DOCTOPUS_PERSISTENT=1`; the default build launches one CUDA block per `BlockMeta` entry).
pub const OCTOPUS_GRID_PER_SM: u32 = 4;

/// A CUDA context, one stream, the loaded kernels, and the reusable device and pinned buffers.
pub struct Engine {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    arch: String,
    modules: HashMap<Module, Arc<CudaModule>>,
    funcs: HashMap<Kernel, CudaFunction>,
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
    pub(super) free32: super::output::OutputPool<f32>,
    /// The same for f16 outputs.
    pub(super) free16: super::output::OutputPool<u16>,
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
    persistent: bool,
    sms: u32,
    /// (width, height) of each frame of the last upload.
    pub(super) dims: Vec<(u32, u32)>,
    /// [`UploadMode::Rects`](super::UploadMode::Rects): the crops with `frame` = the crop's own
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

impl Engine {
    /// Open GPU `ordinal` and compile (or take from the cache) every kernel module for its
    /// architecture. Errors with [`CudaError::Unavailable`] when there is no libcuda or no GPU.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        available().map_err(CudaError::Unavailable)?;
        let ctx = CudaContext::new(ordinal)?;
        let (major, minor) = ctx.compute_capability()?;
        let arch = format!("compute_{major}{minor}");
        let stream = ctx.new_stream()?;
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )?
            .max(1) as u32;
        let per_sm = std::env::var("OCTOPIPE_OCTOPUS_GRID_PER_SM")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(OCTOPUS_GRID_PER_SM);
        let persistent = kernels::nvrtc_define("OCTOPUS_PERSISTENT").is_some_and(|v| v == "1");
        let mut modules = HashMap::new();
        for m in Module::ALL {
            let ptx = kernels::cached_ptx(m, &arch)?;
            modules.insert(m, ctx.load_module(Ptx::from_src(ptx))?);
        }
        Ok(Engine {
            ctx,
            stream,
            arch,
            modules,
            funcs: HashMap::new(),
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
            sms,
            dims: Vec::new(),
            rect_crops: Vec::new(),
            remap: false,
            rect_host: None,
            rect_done: None,
            device_gather: false,
            gathers: Vec::new(),
        })
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all work of this engine runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The virtual architecture the kernels were compiled for (`compute_90`).
    pub fn arch(&self) -> &str {
        &self.arch
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
    /// have the GPU pull the crop rectangles straight out of the frames (`kernels/gather.cu`)
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
        self.sms
    }

    /// The GPU's name.
    pub fn device_name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    }

    /// Registers per thread, local (spill) bytes per thread and static shared bytes of kernel `k`.
    pub fn kernel_resources(&mut self, k: Kernel) -> Result<(i32, i32, i32), CudaError> {
        let f = self.func(k)?;
        Ok((f.num_regs()?, f.local_size_bytes()?, f.shared_size_bytes()?))
    }

    /// Kernel `k` of the loaded modules (looked up once, then cached).
    pub(crate) fn func(&mut self, k: Kernel) -> Result<CudaFunction, CudaError> {
        if let Some(f) = self.funcs.get(&k) {
            return Ok(f.clone());
        }
        let module = self
            .modules
            .get(&k.module())
            .ok_or_else(|| CudaError::Invalid(format!("{k:?}")))?;
        let f = module.load_function(k.name())?;
        self.funcs.insert(k, f.clone());
        Ok(f)
    }
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
pub(super) fn grow_pinned<T: DeviceRepr + Default>(
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
