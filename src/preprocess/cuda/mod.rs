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
//! The [`Engine`] also runs the baseline strategies A, B, D and E ([`Strategy`]) that
//! `octopipe bench preprocess` compares against.

pub mod kernels;
pub mod meta;

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView,
    DeviceRepr, DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;

use super::{validate, Backend, DType, Interpolation, PreprocessConfig, PreprocessError};
use crate::batch::{BlockMeta, CropBatch, CropMeta};
use crate::frame::{Colorimetry, Frame, FrameLayout, PixelFormat};
use kernels::{Kernel, KernelError, Module};
use meta::{push_aligned, FrameDesc, GatherRect, InputKind, Norm};

/// Threads per block of the one-thread-per-pixel kernels (A, B, D, E).
pub const FLAT_THREADS: u32 = 256;

/// Errors of the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No driver library or no device: the caller should fall back to the CPU backend.
    #[error("no usable GPU: {0}")]
    Unavailable(String),
    /// A kernel module failed to compile.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A CUDA driver call failed.
    #[error("CUDA driver: {0:?}")]
    Driver(#[from] DriverError),
    /// The batch does not suit the kernels.
    #[error("{0}")]
    Invalid(String),
}

impl From<CudaError> for PreprocessError {
    fn from(e: CudaError) -> Self {
        PreprocessError::Cuda(e.to_string())
    }
}

/// `Ok` when libcuda loads and reports at least one device; otherwise why not (for one log line).
pub fn available() -> Result<(), String> {
    // SAFETY: only tries to dlopen libcuda by its usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("libcuda.so not found (no NVIDIA driver)".into());
    }
    match CudaContext::device_count() {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err("the NVIDIA driver reports no GPU".into()),
        Err(e) => Err(format!("the NVIDIA driver cannot start: {e:?}")),
    }
}

/// How a batch's crops are mapped to GPU threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// A: a per-output-pixel table of crop indices (O(pixels) metadata).
    Lut,
    /// B: each thread binary-searches the crops' pixel prefix sums.
    Bsearch,
    /// C: Octopus block metadata, O(blocks), one launch.
    Octopus,
    /// D: one launch per crop.
    PerCrop,
    /// E: gather crops into a stack padded to the largest crop, then resize the stack.
    Pad,
}

impl Strategy {
    /// All strategies, A to E.
    pub const ALL: [Strategy; 5] = [
        Strategy::Lut,
        Strategy::Bsearch,
        Strategy::Octopus,
        Strategy::PerCrop,
        Strategy::Pad,
    ];

    /// Row label in reports.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Lut => "A lut",
            Strategy::Bsearch => "B bsearch",
            Strategy::Octopus => "C octopus",
            Strategy::PerCrop => "D per-crop",
            Strategy::Pad => "E pad",
        }
    }
}

/// Output element type of the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutType {
    /// 32-bit float.
    #[default]
    F32,
    /// IEEE half, round to nearest even (strategy C only).
    F16,
}

/// How frames reach the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UploadMode {
    /// Rows when they move under half the bytes of whole frames, else whole frames.
    #[default]
    Auto,
    /// Every frame whole, one copy per frame.
    Whole,
    /// Only the row ranges the frame's crops touch (chroma rows too), one copy per range and plane.
    Rows,
    /// Only each crop's own rectangle (per plane; chroma widened by one sample for the bilinear
    /// chroma taps), gathered on the host into one pinned staging buffer and uploaded with one
    /// copy, or pulled by the GPU from page-locked frames (see [`Engine::set_device_gather`]);
    /// each crop gets its own frame descriptor pointing at its rectangle.
    Rects,
}

/// One frame to upload: its geometry, colorimetry and host bytes (pinned or pageable).
#[derive(Clone, Copy)]
pub struct HostFrame<'a> {
    /// Plane geometry.
    pub layout: FrameLayout,
    /// YUV to RGB conversion.
    pub colorimetry: Colorimetry,
    /// The bytes (at least `layout.size()`).
    pub data: &'a [u8],
}

impl<'a> HostFrame<'a> {
    /// A pipeline frame's geometry, colorimetry and pixels (none once released: the upload then
    /// reports the frame's missing bytes).
    pub fn of(frame: &'a Frame) -> Self {
        HostFrame {
            layout: frame.layout,
            colorimetry: frame.colorimetry,
            data: frame.data().unwrap_or(&[]),
        }
    }
}

/// Where the parts of the packed metadata lie in the device metadata buffer.
#[derive(Debug, Clone, Copy, Default)]
struct MetaLayout {
    frames: (usize, usize),
    crops: (usize, usize),
    blocks: (usize, usize),
    table: (usize, usize),
    first: (usize, usize),
}

/// Byte counts of the last batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Frame bytes copied to the device.
    pub frame_bytes: usize,
    /// Frame copies issued.
    pub frame_copies: usize,
    /// Metadata bytes copied to the device.
    pub meta_bytes: usize,
    /// Crop rectangles the GPU pulled from page-locked frames ([`Engine::set_device_gather`]);
    /// their bytes count in `frame_bytes`, with no frame copy.
    pub device_rects: usize,
}

fn grow<T: DeviceRepr + ValidAsZeroBits>(
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

/// Most threads per block of the strategy C kernels (`OCTOPUS_MAX_THREADS` in `kernels/octopus.cu`).
pub const OCTOPUS_MAX_THREADS: u32 = 256;

/// Threads per block for strategy C: one thread per four output pixels of a block, 32 to
/// [`OCTOPUS_MAX_THREADS`] (threads loop over the rest).
pub fn octopus_threads(tile_pixels: u32, tiles_per_block: u32) -> u32 {
    (tile_pixels * tiles_per_block / 4)
        .next_multiple_of(32)
        .clamp(32, OCTOPUS_MAX_THREADS)
}

/// Launch configuration of every kernel: `grid` blocks of `threads` threads, no dynamic shared memory.
fn launch_config(grid: (u32, u32), threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.0.max(1), grid.1.max(1), 1),
        block_dim: (threads.clamp(32, 1024), 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Threads per block of `gather_rects` (each issues 8 loads per round: `GATHER_UNROLL`).
const GATHER_THREADS: u32 = 256;

/// Rectangles per `gather_rects` launch (`GATHER_MAX` in `kernels/gather.cu`): the table is a
/// kernel parameter, which must stay under 4 KiB.
const GATHER_MAX: usize = 120;

/// `GatherTable` of `kernels/gather.cu`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
struct GatherTable {
    n: u32,
    pad: u32,
    rects: [GatherRect; GATHER_MAX],
}

// SAFETY: `#[repr(C)]` plain data with the layout of the kernel's `GatherTable`.
unsafe impl DeviceRepr for GatherTable {}

/// Pinned slots the packed metadata goes through, reused round robin; `done` is recorded after
/// the copy out of the slot, and waited on before the slot is written again.
const META_RING: usize = 3;

struct MetaSlot {
    host: PinnedHostSlice<u8>,
    done: CudaEvent,
}

/// A CUDA context, one stream, the loaded kernels, and the reusable device and pinned buffers.
pub struct Engine {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: String,
    modules: HashMap<Module, Arc<CudaModule>>,
    funcs: HashMap<Kernel, CudaFunction>,
    descs: Vec<FrameDesc>,
    kind: Option<InputKind>,
    host_meta: Vec<u8>,
    meta_ring: Vec<MetaSlot>,
    ring_next: usize,
    rows: Vec<(usize, usize)>,
    spans: Vec<(usize, usize)>,
    bases: Vec<usize>,
    arena: Option<CudaSlice<u8>>,
    meta: Option<CudaSlice<u8>>,
    layout: MetaLayout,
    out32: Option<CudaSlice<f32>>,
    out16: Option<CudaSlice<u16>>,
    pad: Option<CudaSlice<u8>>,
    pad_dims: (u32, u32, u32),
    /// Byte counts of the last upload.
    pub stats: TransferStats,
    /// Most CUDA blocks of a strategy C launch; 0: one CUDA block per `BlockMeta` entry. Only
    /// with kernels built with `-DOCTOPUS_PERSISTENT=1` (in `$OCTOPIPE_NVRTC_DEFINES`), which loop
    /// over the block list with stride gridDim.x; then [`OCTOPUS_GRID_PER_SM`] per multiprocessor,
    /// or `$OCTOPIPE_OCTOPUS_GRID_PER_SM`. See [`Self::set_octopus_grid`].
    octopus_grid: u32,
    persistent: bool,
    sms: u32,
    /// (width, height) of each frame of the last upload.
    dims: Vec<(u32, u32)>,
    /// [`UploadMode::Rects`]: the crops with `frame` = the crop's own index (one descriptor each).
    rect_crops: Vec<CropMeta>,
    remap: bool,
    rect_host: Option<PinnedHostSlice<u8>>,
    rect_done: Option<CudaEvent>,
    /// [`Self::set_device_gather`].
    device_gather: bool,
    /// The rectangles of the last device gather, cut into kernel-parameter tables.
    gathers: Vec<GatherRect>,
}

/// CUDA blocks per multiprocessor of a persistent strategy C launch (kernels built with
/// `-DOCTOPUS_PERSISTENT=1`; the default build launches one CUDA block per `BlockMeta` entry).
pub const OCTOPUS_GRID_PER_SM: u32 = 4;

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
            pad: None,
            pad_dims: (0, 0, 0),
            stats: TransferStats::default(),
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

    /// Let [`UploadMode::Rects`] (and `Auto` where it picks rectangles) have the GPU pull the crop
    /// rectangles straight out of the frames (`kernels/gather.cu`) instead of gathering their rows
    /// on the host and copying them: no host work per row and no copy for the pixels. The
    /// rectangle table travels in the gather kernel's parameters, so the gather is queued at once
    /// and runs while the host builds the metadata.
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

    /// The device address of page-locked host bytes, or an error naming frame `i`.
    fn device_address(&self, i: usize, data: &[u8]) -> Result<u64, CudaError> {
        self.ctx.bind_to_thread()?;
        let mut addr: sys::CUdeviceptr = 0;
        let mut attr = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_POINTER;
        let mut out = [(&mut addr as *mut sys::CUdeviceptr).cast::<std::ffi::c_void>()];
        // SAFETY: one attribute, written to `addr` (a CUdeviceptr); the host address is only
        // looked up, not dereferenced. Unlike `cuPointerGetAttribute`, the plural call answers 0
        // (not an error) for memory CUDA does not know.
        unsafe {
            sys::cuPointerGetAttributes(1, &mut attr, out.as_mut_ptr(), data.as_ptr() as u64)
        }
        .result()?;
        if addr == 0 {
            return Err(CudaError::Invalid(format!(
                "frame {i} is not page-locked host memory: the device gather reads frames from \
                 pinned buffers only"
            )));
        }
        Ok(addr)
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

    fn func(&mut self, k: Kernel) -> Result<CudaFunction, CudaError> {
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

    /// Copy `frames` into the device arena (once each; whole or only the rows `crops` touch, see
    /// [`UploadMode`]) and build their descriptors. All frames must share one [`InputKind`].
    pub fn upload_frames(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
        mode: UploadMode,
    ) -> Result<TransferStats, CudaError> {
        self.descs.clear();
        self.dims.clear();
        self.remap = false;
        self.kind = None;
        let mut total = 0usize;
        let mut bases = std::mem::take(&mut self.bases);
        bases.clear();
        for f in frames {
            let kind = InputKind::of(f.layout.format);
            if *self.kind.get_or_insert(kind) != kind {
                return Err(CudaError::Invalid(format!(
                    "frames of one batch must share one input kind; found {:?} and {kind:?}",
                    self.kind
                )));
            }
            if f.data.len() < f.layout.size() {
                return Err(CudaError::Invalid(format!(
                    "frame has {} bytes, its layout needs {}",
                    f.data.len(),
                    f.layout.size()
                )));
            }
            bases.push(total);
            self.descs
                .push(FrameDesc::new(&f.layout, &f.colorimetry, total as u64));
            self.dims.push((f.layout.width, f.layout.height));
            total = (total + f.layout.size()).next_multiple_of(256);
        }
        let rects = match mode {
            UploadMode::Rects => true,
            UploadMode::Whole | UploadMode::Rows => false,
            // The host gather costs about what the copy saves per byte: only when far fewer.
            UploadMode::Auto => {
                let frame_bytes: usize = frames.iter().map(|f| f.layout.size()).sum();
                let fits = |c: &CropMeta| {
                    frames
                        .get(c.frame as usize)
                        .is_some_and(|f| c.inside(f.layout.width, f.layout.height))
                };
                // A crop outside its frame: upload whole frames and let `launch` report it.
                crops.iter().all(fits)
                    && crops
                        .iter()
                        .map(|c| rect_bytes(&frames[c.frame as usize].layout, c))
                        .sum::<usize>()
                        * 4
                        < frame_bytes
            }
        };
        if rects {
            self.bases = bases;
            return self.upload_rects(frames, crops);
        }
        grow(&self.stream, &mut self.arena, total)?;
        let arena = self.arena.as_mut().expect("grown above");
        let mut stats = TransferStats::default();
        for (i, f) in frames.iter().enumerate() {
            let size = f.layout.size();
            // Row ranges per plane: (plane offset, stride, first row, end row).
            self.rows.clear();
            collect_rows(
                &f.layout,
                crops.iter().filter(|c| c.frame as usize == i),
                &mut self.spans,
                &mut self.rows,
            );
            let row_bytes: usize = self.rows.iter().map(|r| r.1 - r.0).sum();
            let use_rows = match mode {
                UploadMode::Whole | UploadMode::Rects => false,
                UploadMode::Rows => true,
                UploadMode::Auto => row_bytes * 2 < size,
            };
            if use_rows {
                for &(a, b) in &self.rows {
                    let mut dst = arena.slice_mut(bases[i] + a..bases[i] + b);
                    self.stream.memcpy_htod(&f.data[a..b], &mut dst)?;
                    stats.frame_bytes += b - a;
                    stats.frame_copies += 1;
                }
            } else {
                let mut dst = arena.slice_mut(bases[i]..bases[i] + size);
                self.stream.memcpy_htod(&f.data[..size], &mut dst)?;
                stats.frame_bytes += size;
                stats.frame_copies += 1;
            }
        }
        self.stats.frame_bytes = stats.frame_bytes;
        self.stats.frame_copies = stats.frame_copies;
        self.stats.device_rects = 0;
        self.bases = bases;
        Ok(stats)
    }

    /// [`UploadMode::Rects`]: gather every crop's rectangles into the pinned staging buffer, one
    /// copy to the arena, one descriptor per crop (plane offsets shifted so that the kernels'
    /// absolute frame coordinates land in the rectangle).
    fn upload_rects(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
    ) -> Result<TransferStats, CudaError> {
        let mut total = 0usize;
        for c in crops {
            let f = frames.get(c.frame as usize).ok_or_else(|| {
                CudaError::Invalid(format!("crop names frame {} of {}", c.frame, frames.len()))
            })?;
            if !c.inside(f.layout.width, f.layout.height) {
                return Err(CudaError::Invalid("crop does not fit its frame".into()));
            }
            total += rect_bytes(&f.layout, c).next_multiple_of(16);
        }
        let total = total.max(16);
        if self.device_gather {
            return self.gather_on_device(frames, crops, total);
        }
        if let Some(done) = &self.rect_done {
            // The copy that last read the staging buffer must be finished before it is rewritten.
            done.synchronize()?;
        }
        grow_pinned(&self.ctx, &mut self.rect_host, total)?;
        grow(&self.stream, &mut self.arena, total)?;
        let host = self.rect_host.as_mut().expect("grown").as_mut_slice()?;
        layout_rects(frames, crops, &mut self.descs, &mut self.rect_crops, |r| {
            let data = frames[r.frame].data;
            for i in 0..r.rows {
                let (d, s) = (r.dst + i * r.row_bytes, r.src + i * r.stride);
                host[d..d + r.row_bytes].copy_from_slice(&data[s..s + r.row_bytes]);
            }
        });
        let arena = self.arena.as_mut().expect("grown above");
        let host = self.rect_host.as_ref().expect("grown");
        self.stream
            .memcpy_htod(&host.as_slice()?[..total], &mut arena.slice_mut(..total))?;
        if self.rect_done.is_none() {
            self.rect_done = Some(self.ctx.new_event(None)?);
        }
        self.rect_done
            .as_ref()
            .expect("made")
            .record(&self.stream)?;
        self.remap = true;
        self.stats.frame_bytes = total;
        self.stats.frame_copies = 1;
        self.stats.device_rects = 0;
        Ok(self.stats)
    }

    /// [`UploadMode::Rects`] with [`Self::set_device_gather`]: the same arena layout and
    /// descriptors as the host gather, but the host only lists the rectangles (source address,
    /// stride, size, arena offset) and queues `gather_rects` over them.
    fn gather_on_device(
        &mut self,
        frames: &[HostFrame<'_>],
        crops: &[CropMeta],
        total: usize,
    ) -> Result<TransferStats, CudaError> {
        let mut addrs = std::mem::take(&mut self.bases);
        addrs.clear();
        for (i, f) in frames.iter().enumerate() {
            addrs.push(self.device_address(i, f.data)? as usize);
        }
        grow(&self.stream, &mut self.arena, total)?;
        self.gathers.clear();
        let gathers = &mut self.gathers;
        layout_rects(frames, crops, &mut self.descs, &mut self.rect_crops, |r| {
            gathers.push(GatherRect {
                src: (addrs[r.frame] + r.src) as u64,
                dst: r.dst as u64,
                src_stride: r.stride as u32,
                row_bytes: r.row_bytes as u32,
                rows: r.rows as u32,
                pad: 0,
            })
        });
        self.bases = addrs;
        self.remap = true;
        self.stats.frame_bytes = total;
        self.stats.frame_copies = 0;
        self.stats.device_rects = self.gathers.len();
        let f = self.func(Kernel::GatherRects)?;
        let arena = self.arena.as_mut().expect("grown above");
        for chunk in self.gathers.chunks(GATHER_MAX) {
            let mut table = GatherTable {
                n: chunk.len() as u32,
                pad: 0,
                rects: [GatherRect::default(); GATHER_MAX],
            };
            table.rects[..chunk.len()].copy_from_slice(chunk);
            // CUDA blocks per rectangle: enough for one round of loads per thread (8 bytes each).
            let per = chunk
                .iter()
                .map(|g| (g.row_bytes * g.rows).div_ceil(GATHER_THREADS * 8))
                .max()
                .unwrap_or(1)
                .clamp(1, 64);
            let mut b = self.stream.launch_builder(&f);
            b.arg(&table).arg(&mut *arena);
            // SAFETY: argument types match `gather_rects`; every destination lies in the arena
            // (sized above), every source in a frame that `set_device_gather`'s caller keeps
            // page-locked, alive and unchanged until the stream has run this.
            unsafe { b.launch(launch_config((table.n, per), GATHER_THREADS)) }?;
        }
        Ok(self.stats)
    }

    /// Pack the frame descriptors (from the last [`Self::upload_frames`]), `crops`, and the
    /// strategy's own metadata (blocks for C, a per-pixel table for A, prefix sums for A and B) into
    /// one buffer and upload it with one copy through pinned memory. Returns the metadata bytes.
    pub fn upload_meta(
        &mut self,
        strategy: Strategy,
        crops: &[CropMeta],
        blocks: &[BlockMeta],
    ) -> Result<usize, CudaError> {
        let buf = &mut self.host_meta;
        buf.clear();
        let mut l = MetaLayout::default();
        let off = push_aligned(buf, &self.descs);
        l.frames = (off, buf.len());
        if self.remap {
            if self.rect_crops.len() != crops.len() {
                return Err(CudaError::Invalid(format!(
                    "{} crops, the rectangle upload was made for {}",
                    crops.len(),
                    self.rect_crops.len()
                )));
            }
            let off = push_aligned(buf, &self.rect_crops);
            l.crops = (off, buf.len());
        } else {
            let off = push_aligned(buf, crops);
            l.crops = (off, buf.len());
        }
        match strategy {
            Strategy::Octopus => {
                let off = push_aligned(buf, blocks);
                l.blocks = (off, buf.len());
            }
            Strategy::Lut | Strategy::Bsearch => {
                // Prefix sums of output pixels (ncrops + 1 entries), then for A the per-pixel table.
                let start = buf.len().next_multiple_of(16);
                buf.resize(start, 0);
                let mut acc = 0u32;
                buf.extend_from_slice(&acc.to_ne_bytes());
                for c in crops {
                    acc += c.out_pixels();
                    buf.extend_from_slice(&acc.to_ne_bytes());
                }
                l.first = (start, buf.len());
                if strategy == Strategy::Lut {
                    let start = buf.len().next_multiple_of(16);
                    buf.resize(start, 0);
                    buf.reserve(acc as usize * 4);
                    for (i, c) in crops.iter().enumerate() {
                        let b = (i as u32).to_ne_bytes();
                        for _ in 0..c.out_pixels() {
                            buf.extend_from_slice(&b);
                        }
                    }
                    l.table = (start, buf.len());
                }
            }
            Strategy::PerCrop | Strategy::Pad => {}
        }
        let len = buf.len().max(16);
        buf.resize(len, 0);
        let i = self.ring_next;
        self.ring_next = (i + 1) % META_RING;
        if self.meta_ring.len() <= i || self.meta_ring[i].host.len() < len {
            if let Some(old) = self.meta_ring.get(i) {
                old.done.synchronize()?;
            }
            let slot = MetaSlot {
                // SAFETY: the slot is written (below) before any copy reads it.
                host: unsafe { self.ctx.alloc_pinned::<u8>(len + len / 4) }?,
                done: self.ctx.new_event(None)?,
            };
            if self.meta_ring.len() <= i {
                self.meta_ring.push(slot);
            } else {
                self.meta_ring[i] = slot;
            }
        }
        let slot = &mut self.meta_ring[i];
        // The copy that last read this slot must be finished before it is overwritten.
        slot.done.synchronize()?;
        slot.host.as_mut_slice()?[..len].copy_from_slice(&self.host_meta);
        grow(&self.stream, &mut self.meta, len)?;
        let meta = self.meta.as_mut().expect("grown above");
        self.stream
            .memcpy_htod(&slot.host.as_slice()?[..len], &mut meta.slice_mut(..len))?;
        slot.done.record(&self.stream)?;
        self.layout = l;
        self.stats.meta_bytes = len;
        Ok(len)
    }

    /// Make the output buffer hold at least `len` elements of `ty` (done by [`Self::launch`] too;
    /// call it ahead to keep allocation out of timed regions).
    pub fn reserve_output(&mut self, ty: OutType, len: usize) -> Result<(), CudaError> {
        match ty {
            OutType::F32 => grow(&self.stream, &mut self.out32, len)?,
            OutType::F16 => grow(&self.stream, &mut self.out16, len)?,
        }
        Ok(())
    }

    /// Fill the output buffer with `value` (f32 bit pattern, or the f16 bits for [`OutType::F16`]):
    /// used by tests to prove every element gets written.
    pub fn poison_output(&mut self, ty: OutType, len: usize, bits: u32) -> Result<(), CudaError> {
        self.reserve_output(ty, len)?;
        match ty {
            OutType::F32 => {
                let v = vec![f32::from_bits(bits); len];
                let out = self.out32.as_mut().expect("reserved");
                self.stream.memcpy_htod(&v, &mut out.slice_mut(..len))?;
            }
            OutType::F16 => {
                let v = vec![bits as u16; len];
                let out = self.out16.as_mut().expect("reserved");
                self.stream.memcpy_htod(&v, &mut out.slice_mut(..len))?;
            }
        }
        Ok(())
    }

    /// Launch `strategy` over the crops of the last [`Self::upload_meta`]: `out_len` output elements,
    /// `tile_pixels` as used to build the blocks (C), threads per block `threads` (C; others use
    /// [`FLAT_THREADS`]). Asynchronous on [`Self::stream`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &mut self,
        strategy: Strategy,
        ty: OutType,
        norm: Norm,
        crops: &[CropMeta],
        nblocks: usize,
        tile_pixels: u32,
        threads: u32,
        out_len: usize,
    ) -> Result<(), CudaError> {
        if ty == OutType::F16 && strategy != Strategy::Octopus {
            return Err(CudaError::Invalid(
                "f16 output is implemented for strategy C only".into(),
            ));
        }
        let blocks = (strategy == Strategy::Octopus).then_some(nblocks);
        let Some(kind) = self.prepare_launch(crops, out_len, ty, blocks)? else {
            return Ok(());
        };
        let l = self.layout;
        let ncrops = crops.len() as u32;
        match strategy {
            Strategy::Octopus => {
                let k = match (kind, ty) {
                    (InputKind::I420, OutType::F32) => Kernel::OctopusBilinearI420F32,
                    (InputKind::Nv12, OutType::F32) => Kernel::OctopusBilinearNv12F32,
                    (InputKind::Packed, OutType::F32) => Kernel::OctopusBilinearPackedF32,
                    (InputKind::I420, OutType::F16) => Kernel::OctopusBilinearI420F16,
                    (InputKind::Nv12, OutType::F16) => Kernel::OctopusBilinearNv12F16,
                    (InputKind::Packed, OutType::F16) => Kernel::OctopusBilinearPackedF16,
                };
                let f = self.func(k)?;
                let (arena, meta) = uploaded(&self.arena, &self.meta);
                let (fr, cr, bl) = (
                    part(meta, l.frames),
                    part(meta, l.crops),
                    part(meta, l.blocks),
                );
                let nb = nblocks as u32;
                let grid = if self.octopus_grid > 0 {
                    nb.min(self.octopus_grid)
                } else {
                    nb
                };
                let cfg = launch_config((grid, 1), threads.min(OCTOPUS_MAX_THREADS));
                let mut b = self.stream.launch_builder(&f);
                b.arg(arena)
                    .arg(&fr)
                    .arg(&cr)
                    .arg(&bl)
                    .arg(&nb)
                    .arg(&tile_pixels)
                    .arg(&norm);
                match ty {
                    OutType::F32 => b.arg(self.out32.as_mut().expect("reserved")),
                    OutType::F16 => b.arg(self.out16.as_mut().expect("reserved")),
                };
                // SAFETY: argument types match the kernel's signature; blocks and crops were bounds
                // checked above (each block's tiles lie in its crop by construction), frames lie in the arena.
                unsafe { b.launch(cfg) }?;
            }
            Strategy::Lut | Strategy::Bsearch => {
                let total: u32 = crops.iter().map(|c| c.out_pixels()).sum();
                let k = match (strategy, kind) {
                    (Strategy::Lut, InputKind::I420) => Kernel::LutBilinearI420F32,
                    (Strategy::Lut, InputKind::Nv12) => Kernel::LutBilinearNv12F32,
                    (Strategy::Lut, InputKind::Packed) => Kernel::LutBilinearPackedF32,
                    (_, InputKind::I420) => Kernel::BsearchBilinearI420F32,
                    (_, InputKind::Nv12) => Kernel::BsearchBilinearNv12F32,
                    (_, InputKind::Packed) => Kernel::BsearchBilinearPackedF32,
                };
                let f = self.func(k)?;
                let (arena, meta) = uploaded(&self.arena, &self.meta);
                let (fr, cr, first, table) = (
                    part(meta, l.frames),
                    part(meta, l.crops),
                    part(meta, l.first),
                    part(meta, l.table),
                );
                let cfg = launch_config((total.div_ceil(FLAT_THREADS), 1), FLAT_THREADS);
                let out = self.out32.as_mut().expect("reserved");
                let mut b = self.stream.launch_builder(&f);
                b.arg(arena).arg(&fr).arg(&cr);
                if strategy == Strategy::Lut {
                    b.arg(&table).arg(&first).arg(&total);
                } else {
                    b.arg(&first).arg(&ncrops);
                }
                b.arg(&norm).arg(out);
                // SAFETY: argument types match; the table/prefix sums cover `total` pixels of checked crops.
                unsafe { b.launch(cfg) }?;
            }
            Strategy::PerCrop => {
                let k = match kind {
                    InputKind::I420 => Kernel::PercropBilinearI420F32,
                    InputKind::Nv12 => Kernel::PercropBilinearNv12F32,
                    InputKind::Packed => Kernel::PercropBilinearPackedF32,
                };
                let f = self.func(k)?;
                for (i, c) in crops.iter().enumerate() {
                    self.launch_percrop(&f, l, i as u32, c.out_pixels(), norm)?;
                }
            }
            Strategy::Pad => {
                let (pw, ph) = crops
                    .iter()
                    .fold((1, 1), |(w, h), c| (c.w.max(w), c.h.max(h)));
                let maxpix = crops.iter().map(|c| c.out_pixels()).max().unwrap_or(1);
                let need = crops.len() * pw as usize * ph as usize * 3;
                grow(&self.stream, &mut self.pad, need)?;
                self.pad_dims = (pw, ph, ncrops);
                let k = match kind {
                    InputKind::I420 => Kernel::PadGatherI420U8,
                    InputKind::Nv12 => Kernel::PadGatherNv12U8,
                    InputKind::Packed => Kernel::PadGatherPackedU8,
                };
                let gather = self.func(k)?;
                let resize = self.func(Kernel::PadResizeRgbF32)?;
                self.launch_pad(&gather, &resize, l, (pw, ph), ncrops, maxpix, norm)?;
            }
        }
        Ok(())
    }

    /// Launch the area / letterbox kernels (`kernels/resample.cu`, block metadata as strategy C)
    /// over the crops of the last [`Self::upload_meta`] with [`Strategy::Octopus`]. `letterbox`:
    /// the pad value (0..255 scale) when letterboxing. Asynchronous on [`Self::stream`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch_resample(
        &mut self,
        interpolation: Interpolation,
        letterbox: Option<f32>,
        ty: OutType,
        norm: Norm,
        crops: &[CropMeta],
        nblocks: usize,
        tile_pixels: u32,
        threads: u32,
        out_len: usize,
    ) -> Result<(), CudaError> {
        let Some(kind) = self.prepare_launch(crops, out_len, ty, Some(nblocks))? else {
            return Ok(());
        };
        use Kernel::*;
        let area = interpolation == Interpolation::Area;
        let k = match (area, kind, ty) {
            (false, InputKind::I420, OutType::F32) => ResampleBilinearI420F32,
            (false, InputKind::Nv12, OutType::F32) => ResampleBilinearNv12F32,
            (false, InputKind::Packed, OutType::F32) => ResampleBilinearPackedF32,
            (false, InputKind::I420, OutType::F16) => ResampleBilinearI420F16,
            (false, InputKind::Nv12, OutType::F16) => ResampleBilinearNv12F16,
            (false, InputKind::Packed, OutType::F16) => ResampleBilinearPackedF16,
            (true, InputKind::I420, OutType::F32) => ResampleAreaI420F32,
            (true, InputKind::Nv12, OutType::F32) => ResampleAreaNv12F32,
            (true, InputKind::Packed, OutType::F32) => ResampleAreaPackedF32,
            (true, InputKind::I420, OutType::F16) => ResampleAreaI420F16,
            (true, InputKind::Nv12, OutType::F16) => ResampleAreaNv12F16,
            (true, InputKind::Packed, OutType::F16) => ResampleAreaPackedF16,
        };
        let f = self.func(k)?;
        let l = self.layout;
        let (arena, meta) = uploaded(&self.arena, &self.meta);
        let (fr, cr, bl) = (
            part(meta, l.frames),
            part(meta, l.crops),
            part(meta, l.blocks),
        );
        let lb = letterbox.is_some() as u32;
        let pad = letterbox.unwrap_or(0.0);
        let cfg = launch_config((nblocks as u32, 1), threads.min(OCTOPUS_MAX_THREADS));
        let mut b = self.stream.launch_builder(&f);
        b.arg(arena)
            .arg(&fr)
            .arg(&cr)
            .arg(&bl)
            .arg(&tile_pixels)
            .arg(&norm)
            .arg(&lb)
            .arg(&pad);
        match ty {
            OutType::F32 => b.arg(self.out32.as_mut().expect("reserved")),
            OutType::F16 => b.arg(self.out16.as_mut().expect("reserved")),
        };
        // SAFETY: argument types match `resample_*`'s signature; crops were bounds checked above
        // and each block's tiles lie in its crop by construction; frames lie in the arena.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// What every launcher checks first: frames uploaded (their input kind is returned), something
    /// to do (`None`: nothing to launch), every crop inside its frame and its output inside
    /// `out_len`, with `nblocks`: the block count the metadata holds; then the output reserved.
    fn prepare_launch(
        &mut self,
        crops: &[CropMeta],
        out_len: usize,
        ty: OutType,
        nblocks: Option<usize>,
    ) -> Result<Option<InputKind>, CudaError> {
        let kind = self
            .kind
            .ok_or_else(|| CudaError::Invalid("no frames uploaded".into()))?;
        if crops.is_empty() || out_len == 0 {
            return Ok(None);
        }
        self.check_crops(crops, out_len)?;
        if let Some(n) = nblocks {
            if n == 0 || self.layout.blocks.1 - self.layout.blocks.0 != n * 12 {
                return Err(CudaError::Invalid(format!(
                    "{n} blocks, metadata holds another count"
                )));
            }
        }
        self.reserve_output(ty, out_len)?;
        Ok(Some(kind))
    }

    /// Every crop inside its frame and its output inside `out_len` elements.
    fn check_crops(&self, crops: &[CropMeta], out_len: usize) -> Result<(), CudaError> {
        for (i, c) in crops.iter().enumerate() {
            let &(fw, fh) = self.dims.get(c.frame as usize).ok_or_else(|| {
                CudaError::Invalid(format!(
                    "crop {i} names frame {} of {}",
                    c.frame,
                    self.dims.len()
                ))
            })?;
            if !c.inside(fw, fh) || c.out_w == 0 || c.out_h == 0 {
                return Err(CudaError::Invalid(format!(
                    "crop {i} does not fit its frame"
                )));
            }
            if c.out_offset as usize + c.out_pixels() as usize * 3 > out_len {
                return Err(CudaError::Invalid(format!(
                    "crop {i} output runs past {out_len} elements"
                )));
            }
        }
        Ok(())
    }

    fn launch_percrop(
        &mut self,
        f: &CudaFunction,
        l: MetaLayout,
        ci: u32,
        pixels: u32,
        norm: Norm,
    ) -> Result<(), CudaError> {
        let (arena, meta) = uploaded(&self.arena, &self.meta);
        let (fr, cr) = (part(meta, l.frames), part(meta, l.crops));
        let out = self.out32.as_mut().expect("reserved");
        let cfg = launch_config((pixels.div_ceil(FLAT_THREADS), 1), FLAT_THREADS);
        let mut b = self.stream.launch_builder(f);
        b.arg(arena).arg(&fr).arg(&cr).arg(&ci).arg(&norm).arg(out);
        // SAFETY: argument types match `percrop_bilinear_*`; crop `ci` was bounds checked by `launch`.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_pad(
        &mut self,
        gather: &CudaFunction,
        resize: &CudaFunction,
        l: MetaLayout,
        (pw, ph): (u32, u32),
        ncrops: u32,
        maxpix: u32,
        norm: Norm,
    ) -> Result<(), CudaError> {
        let (arena, meta) = uploaded(&self.arena, &self.meta);
        let (fr, cr) = (part(meta, l.frames), part(meta, l.crops));
        let pad = self.pad.as_mut().expect("grown");
        let cfg = launch_config(((pw * ph).div_ceil(FLAT_THREADS), ncrops), FLAT_THREADS);
        let mut b = self.stream.launch_builder(gather);
        b.arg(arena)
            .arg(&fr)
            .arg(&cr)
            .arg(&pw)
            .arg(&ph)
            .arg(&mut *pad);
        // SAFETY: argument types match `pad_gather_*`; the stack holds ncrops slots of pw x ph x 3 bytes.
        unsafe { b.launch(cfg) }?;
        let out = self.out32.as_mut().expect("reserved");
        let cfg = launch_config((maxpix.div_ceil(FLAT_THREADS), ncrops), FLAT_THREADS);
        let mut b = self.stream.launch_builder(resize);
        b.arg(&*pad).arg(&cr).arg(&pw).arg(&ph).arg(&norm).arg(out);
        // SAFETY: argument types match `pad_resize_rgb_f32`; reads stay inside each crop's slot.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// The device output of the last f32 launch (for a device-side consumer).
    pub fn output_f32(&self) -> Option<&CudaSlice<f32>> {
        self.out32.as_ref()
    }

    /// Copy the first `dst.len()` f32 outputs to `dst` (pinned or pageable) and wait for them.
    pub fn download_f32(&mut self, dst: &mut [f32]) -> Result<(), CudaError> {
        download_now(&self.stream, &self.out32, dst)
    }

    /// Queue the copy of the first `len` f32 outputs into the first `len` elements of pinned
    /// `dst` without waiting. Exactly `len` elements move (cudarc's own `memcpy_dtoh` copies the
    /// whole host slice, which reads past the device output once `dst` has headroom).
    ///
    /// # Safety
    /// The copy is not tracked by `dst`'s event: `dst` must not be read, written or dropped until
    /// this engine's stream has been synchronized.
    pub unsafe fn download_f32_pinned(
        &mut self,
        dst: &mut PinnedHostSlice<f32>,
        len: usize,
    ) -> Result<(), CudaError> {
        // SAFETY: forwarded to the caller.
        unsafe { download_exact(&self.ctx, &self.stream, launched(&self.out32)?, dst, len) }
    }

    /// The device output of the last f16 launch (IEEE half bits, for a device-side consumer).
    pub fn output_f16(&self) -> Option<&CudaSlice<u16>> {
        self.out16.as_ref()
    }

    /// Queue the copy of the first `len` f16 outputs into the first `len` elements of pinned
    /// `dst` without waiting (see [`Self::download_f32_pinned`]).
    ///
    /// # Safety
    /// As [`Self::download_f32_pinned`].
    pub unsafe fn download_f16_pinned(
        &mut self,
        dst: &mut PinnedHostSlice<u16>,
        len: usize,
    ) -> Result<(), CudaError> {
        // SAFETY: forwarded to the caller.
        unsafe { download_exact(&self.ctx, &self.stream, launched(&self.out16)?, dst, len) }
    }

    /// Copy the first `dst.len()` f16 outputs (as bits) to `dst` and wait for them.
    pub fn download_f16(&mut self, dst: &mut [u16]) -> Result<(), CudaError> {
        download_now(&self.stream, &self.out16, dst)
    }
}

/// The device output of the last launch of its type.
fn launched<T>(out: &Option<CudaSlice<T>>) -> Result<&CudaSlice<T>, CudaError> {
    out.as_ref()
        .ok_or_else(|| CudaError::Invalid("nothing launched".into()))
}

/// Copy the first `dst.len()` elements of the device output to `dst` and wait for them.
fn download_now<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    out: &Option<CudaSlice<T>>,
    dst: &mut [T],
) -> Result<(), CudaError> {
    if dst.is_empty() {
        return Ok(());
    }
    stream.memcpy_dtoh(&launched(out)?.slice(..dst.len()), dst)?;
    stream.synchronize()?;
    Ok(())
}

/// Queue the copy of `src[..len]` into `dst[..len]` on `stream`.
///
/// # Safety
/// `dst` must not be read, written or dropped until `stream` has been synchronized.
unsafe fn download_exact<T: DeviceRepr + ValidAsZeroBits>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    dst: &mut PinnedHostSlice<T>,
    len: usize,
) -> Result<(), CudaError> {
    if len == 0 {
        return Ok(());
    }
    if len > dst.len() || len > src.len() {
        return Err(CudaError::Invalid(format!(
            "{len} outputs do not fit {} pinned / {} device elements",
            dst.len(),
            src.len()
        )));
    }
    ctx.bind_to_thread()?;
    let view = src.slice(..len);
    let host = &mut dst.as_mut_slice()?[..len];
    let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(&view, stream);
    // SAFETY: `host` and the device view both hold `len` elements; the caller keeps `host` alive
    // and untouched until the stream is synchronized.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(host, ptr, stream.cu_stream()) }?;
    Ok(())
}

/// The frame arena and the packed metadata of the last upload (both made by the uploads every
/// launcher checks for first).
fn uploaded<'a>(
    arena: &'a Option<CudaSlice<u8>>,
    meta: &'a Option<CudaSlice<u8>>,
) -> (&'a CudaSlice<u8>, &'a CudaSlice<u8>) {
    (
        arena.as_ref().expect("uploaded"),
        meta.as_ref().expect("uploaded"),
    )
}

/// One part (byte range) of the packed metadata as a kernel argument; an empty part gives one
/// byte, since a device view may not be empty (the kernels do not read it then).
fn part(meta: &CudaSlice<u8>, (a, b): (usize, usize)) -> CudaView<'_, u8> {
    meta.slice(a..b.max(a + 1))
}

/// One plane's rectangle: (plane, first byte of a row, bytes per row, first row, rows).
type Rect = (usize, usize, usize, usize, usize);

/// The rectangles of crop `c` that the kernels read, per plane. Chroma is widened by one sample on
/// each side (the bilinear chroma taps reach floor(x / 2 - shift) and one past it), clamped to the
/// plane.
fn crop_rects(layout: &FrameLayout, c: &CropMeta) -> [Option<Rect>; 3] {
    let (x, y, w, h) = (c.x as usize, c.y as usize, c.w as usize, c.h as usize);
    let (cw, ch) = (
        (layout.width as usize).div_ceil(2),
        (layout.height as usize).div_ceil(2),
    );
    let (cx0, cx1) = ((x / 2).saturating_sub(1), ((x + w - 1) / 2 + 2).min(cw));
    let (cy0, cy1) = ((y / 2).saturating_sub(1), ((y + h - 1) / 2 + 2).min(ch));
    match layout.format {
        PixelFormat::I420 => [
            Some((0, x, w, y, h)),
            Some((1, cx0, cx1 - cx0, cy0, cy1 - cy0)),
            Some((2, cx0, cx1 - cx0, cy0, cy1 - cy0)),
        ],
        PixelFormat::Nv12 => [
            Some((0, x, w, y, h)),
            Some((1, 2 * cx0, 2 * (cx1 - cx0), cy0, cy1 - cy0)),
            None,
        ],
        other => {
            let bpp = other.packed_bytes();
            [Some((0, x * bpp, w * bpp, y, h)), None, None]
        }
    }
}

/// One plane rectangle of [`layout_rects`]: `rows` rows of `row_bytes` bytes from byte `src` of
/// frame `frame`'s buffer (rows `stride` apart), packed to arena byte `dst`.
struct RectCopy {
    frame: usize,
    src: usize,
    stride: usize,
    row_bytes: usize,
    rows: usize,
    dst: usize,
}

/// The arena layout of [`UploadMode::Rects`]: each crop's plane rectangles packed one after
/// another (each crop 16-byte aligned), one descriptor per crop into `descs` whose plane offsets
/// are shifted (wrapping) so that the kernels' absolute frame coordinates land in its
/// rectangles, and the crops renumbered to their own descriptors into `rect_crops`. `each` moves
/// one rectangle (on the host, or lists it for the GPU). The crops were checked against their
/// frames by the caller.
fn layout_rects(
    frames: &[HostFrame<'_>],
    crops: &[CropMeta],
    descs: &mut Vec<FrameDesc>,
    rect_crops: &mut Vec<CropMeta>,
    mut each: impl FnMut(RectCopy),
) {
    descs.clear();
    rect_crops.clear();
    let mut off = 0usize;
    for (i, c) in crops.iter().enumerate() {
        let f = &frames[c.frame as usize];
        let mut d = FrameDesc::new(&f.layout, &f.colorimetry, 0);
        for (plane, xb, rb, y0, rows) in crop_rects(&f.layout, c).into_iter().flatten() {
            let (po, ps) = (f.layout.offsets[plane], f.layout.strides[plane]);
            each(RectCopy {
                frame: c.frame as usize,
                src: po + y0 * ps + xb,
                stride: ps,
                row_bytes: rb,
                rows,
                dst: off,
            });
            // Row y, byte x of the plane lies at off + (y - y0) * rb + (x - xb).
            d.plane[plane] = (off as u64).wrapping_sub((y0 * rb + xb) as u64);
            d.stride[plane] = rb as u32;
            off += rb * rows;
        }
        off = off.next_multiple_of(16);
        descs.push(d);
        rect_crops.push(CropMeta {
            frame: i as u32,
            ..*c
        });
    }
}

/// Bytes of [`crop_rects`].
fn rect_bytes(layout: &FrameLayout, c: &CropMeta) -> usize {
    crop_rects(layout, c)
        .iter()
        .flatten()
        .map(|r| r.2 * r.4)
        .sum()
}

/// Byte ranges (relative to the frame buffer) of the rows `crops` touch, merged, per plane.
fn collect_rows<'a>(
    layout: &FrameLayout,
    crops: impl Iterator<Item = &'a CropMeta>,
    spans: &mut Vec<(usize, usize)>,
    out: &mut Vec<(usize, usize)>,
) {
    let h = layout.height as usize;
    let ch = h.div_ceil(2);
    spans.clear();
    spans.extend(crops.map(|c| (c.y as usize, (c.y + c.h) as usize)));
    spans.sort_unstable();
    // Merge in place: spans[..m] holds the merged ranges.
    let mut m = 0;
    for i in 0..spans.len() {
        let (a, b) = spans[i];
        if m > 0 && a <= spans[m - 1].1 {
            spans[m - 1].1 = spans[m - 1].1.max(b);
        } else {
            spans[m] = (a, b);
            m += 1;
        }
    }
    spans.truncate(m);
    let merged = &*spans;
    let mut push = |plane: usize, rows: usize, a: usize, b: usize| {
        let (a, b) = (a.min(rows), b.min(rows));
        if a < b {
            let (o, s) = (layout.offsets[plane], layout.strides[plane]);
            out.push((o + a * s, o + b * s));
        }
    };
    for &(a, b) in merged {
        push(0, h, a, b);
        match layout.format {
            // Chroma taps of rows a..b reach chroma rows floor(a/2 - 0.25) ..= floor((b-1)/2 - 0.25) + 1.
            PixelFormat::I420 => {
                push(1, ch, (a / 2).saturating_sub(1), b / 2 + 1);
                push(2, ch, (a / 2).saturating_sub(1), b / 2 + 1);
            }
            PixelFormat::Nv12 => push(1, ch, (a / 2).saturating_sub(1), b / 2 + 1),
            _ => {}
        }
    }
}

/// The CUDA preprocess backend: strategy C (the bilinear fast path of `octopus.cu`, or
/// `resample.cu` for `interpolation=area` and letterbox), frames uploaded once per batch, the
/// output copied back into `batch.tensor` (or `batch.tensor_f16` for [`DType::F16`]), straight
/// or through a reused pinned buffer ([`Self::pinned_output`]). No allocation per batch in steady
/// state: the frame list, the engine's scratch and device buffers and the pinned output all grow
/// and are reused.
///
/// Two ways to drive it:
/// - [`Backend::run`]: one batch in, its tensor out; everything on one stream, nothing overlaps
///   across batches (the next batch is not known until `run` returns).
/// - [`Self::submit`] / [`Self::flush`]: two batches in flight on two engines (two CUDA streams,
///   their own device and pinned buffers). `submit(k + 1)` queues batch k + 1's upload, kernel and
///   copy back, then waits for batch k and returns it with its tensor filled, so batch k + 1's
///   transfers and kernel run while the host finishes batch k and the caller works on it.
pub struct CudaBackend {
    config: PreprocessConfig,
    engine: Engine,
    /// The second engine of [`Self::submit`], opened on first use.
    engine2: Option<Engine>,
    host32: [Option<PinnedHostSlice<f32>>; 2],
    host16: [Option<PinnedHostSlice<u16>>; 2],
    /// Empty between batches: only its buffer is kept.
    frames: Vec<HostFrame<'static>>,
    /// The batch queued by the last [`Self::submit`], the engine it runs on, and whether its
    /// output goes through the pinned buffer ([`Self::pinned_output`] when it was submitted).
    in_flight: Option<(CropBatch, usize, bool)>,
    next_slot: usize,
    /// Copy the output back through a reused pinned buffer, then into the batch's vector. Off by
    /// default: measured slower than the direct pageable copy (H100, 2026-11-21: drone28 1.84 vs
    /// 1.21 ms, crops1000 58.2 vs 36.4 ms per `run`), because the extra host copy costs more than
    /// pinning saves; it pays only once the consumer reads the pinned buffer itself.
    pub pinned_output: bool,
}

impl CudaBackend {
    /// Open GPU 0 and compile the kernels. Errors (with the reason) when there is no libcuda, no
    /// GPU, or a kernel does not compile: the caller falls back to the CPU backend.
    pub fn new(config: PreprocessConfig) -> Result<CudaBackend, PreprocessError> {
        let engine = Engine::new(0)?;
        Ok(CudaBackend {
            config,
            engine,
            engine2: None,
            host32: [None, None],
            host16: [None, None],
            frames: Vec::new(),
            in_flight: None,
            next_slot: 0,
            pinned_output: false,
        })
    }

    /// The engine (device buffers, stream, device output).
    pub fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Pipelined preprocessing: queue `batch` (upload and kernel, and with [`Self::pinned_output`]
    /// the copy back into a pinned buffer, asynchronous on one of two engines), then complete the
    /// batch submitted before it (copy its output into its `tensor` / `tensor_f16`, straight from
    /// the device by default, while the new batch's kernel runs) and return that one; `None`
    /// on the first call. Batches come back in submission order, one call late: call
    /// [`Self::flush`] at the end (and before dropping the backend) for the last one. On an error
    /// the batch being queued is dropped; the one in flight stays in flight.
    pub fn submit(&mut self, mut batch: CropBatch) -> Result<Option<CropBatch>, PreprocessError> {
        let slot = self.next_slot;
        if slot == 1 && self.engine2.is_none() {
            self.engine2 = Some(Engine::new(0)?);
        }
        self.prepare_tensor(&mut batch)?;
        let len = batch.tensor_len(3);
        if !batch.crops.is_empty() && !batch.blocks.is_empty() {
            let f16 = self.config.dtype == DType::F16;
            let e = if slot == 0 {
                &mut self.engine
            } else {
                self.engine2.as_mut().expect("opened above")
            };
            enqueue(e, &self.config, &mut self.frames, &batch)?;
            // With pinned output the copy back is queued now; else `complete` copies straight
            // into the batch's vector (pageable: the driver copies while the host waits).
            if self.pinned_output && f16 {
                grow_pinned(&e.ctx, &mut self.host16[slot], len)?;
                // SAFETY: the buffer is read in `complete` after a stream synchronize, and only
                // regrown (dropped) by a later submit on this slot, after that.
                unsafe { e.download_f16_pinned(self.host16[slot].as_mut().expect("grown"), len) }?;
            } else if self.pinned_output {
                grow_pinned(&e.ctx, &mut self.host32[slot], len)?;
                // SAFETY: as above.
                unsafe { e.download_f32_pinned(self.host32[slot].as_mut().expect("grown"), len) }?;
            }
        }
        self.next_slot ^= 1;
        match self.in_flight.replace((batch, slot, self.pinned_output)) {
            Some((done, s, pinned)) => self.complete(done, s, pinned).map(Some),
            None => Ok(None),
        }
    }

    /// Complete and return the batch still in flight, if any (see [`Self::submit`]).
    pub fn flush(&mut self) -> Result<Option<CropBatch>, PreprocessError> {
        match self.in_flight.take() {
            Some((done, s, pinned)) => self.complete(done, s, pinned).map(Some),
            None => Ok(None),
        }
    }

    fn complete(
        &mut self,
        mut batch: CropBatch,
        slot: usize,
        pinned: bool,
    ) -> Result<CropBatch, PreprocessError> {
        if batch.crops.is_empty() || batch.blocks.is_empty() {
            return Ok(batch);
        }
        let e = if slot == 0 {
            &mut self.engine
        } else {
            self.engine2.as_mut().expect("opened by submit")
        };
        let f16 = self.config.dtype == DType::F16;
        let len = batch.tensor_len(3);
        if !pinned {
            if f16 {
                e.download_f16(batch.tensor.host_f16(len))?;
            } else {
                e.download_f32(batch.tensor.host_f32(len))?;
            }
            return Ok(batch);
        }
        e.stream.synchronize().map_err(CudaError::from)?;
        if f16 {
            let host = self.host16[slot].as_ref().expect("grown by submit");
            batch
                .tensor
                .host_f16(len)
                .copy_from_slice(&host.as_slice().map_err(CudaError::from)?[..len]);
        } else {
            let host = self.host32[slot].as_ref().expect("grown by submit");
            batch
                .tensor
                .host_f32(len)
                .copy_from_slice(&host.as_slice().map_err(CudaError::from)?[..len]);
        }
        Ok(batch)
    }

    /// Size the output vector of `batch` and check the batch.
    fn prepare_tensor(&self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        let len = batch.tensor_len(3);
        if self.config.dtype == DType::F16 {
            batch.tensor.host_f16(len);
        } else {
            batch.tensor.host_f32(len);
        }
        batch.tensor.layout = self.config.layout;
        batch.tensor.shape = batch.tensor_shape(self.config.layout);
        validate(batch)
    }
}

/// Queue on `e` the upload of `batch`'s frames (whole, rows or crop rectangles, see
/// [`UploadMode::Auto`]) and metadata, and the kernel writing its tensor into the engine's device
/// output. `store` is an empty vector whose buffer is reused for the frame list.
fn enqueue(
    e: &mut Engine,
    config: &PreprocessConfig,
    store: &mut Vec<HostFrame<'static>>,
    batch: &CropBatch,
) -> Result<(), CudaError> {
    // The frame list borrows the batch; its (empty) vector is kept between batches: collecting
    // an empty vector into one of a same-layout type reuses its buffer, so steady state does
    // not allocate.
    let frames: Vec<HostFrame<'static>> = std::mem::take(store);
    let mut local: Vec<HostFrame<'_>> = frames.into_iter().map(|_| unreachable!()).collect();
    local.extend(batch.frames.iter().map(HostFrame::of));
    let uploaded = e.upload_frames(&local, &batch.crops, UploadMode::Auto);
    local.clear();
    *store = local.into_iter().map(|_| unreachable!()).collect();
    uploaded?;
    e.upload_meta(Strategy::Octopus, &batch.crops, &batch.blocks)?;
    let len = batch.tensor_len(3);
    let per_block = batch
        .blocks
        .iter()
        .map(|b| b.tile_end - b.tile_begin)
        .max()
        .unwrap_or(1);
    let threads = octopus_threads(batch.tile_pixels, per_block);
    let ty = if config.dtype == DType::F16 {
        OutType::F16
    } else {
        OutType::F32
    };
    let norm = Norm::from_config(config);
    if config.is_plain_bilinear() {
        e.launch(
            Strategy::Octopus,
            ty,
            norm,
            &batch.crops,
            batch.blocks.len(),
            batch.tile_pixels,
            threads,
            len,
        )
    } else {
        e.launch_resample(
            config.interpolation,
            config.letterbox,
            ty,
            norm,
            &batch.crops,
            batch.blocks.len(),
            batch.tile_pixels,
            threads,
            len,
        )
    }
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

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        self.prepare_tensor(batch)?;
        if batch.crops.is_empty() || batch.blocks.is_empty() {
            return Ok(());
        }
        let len = batch.tensor_len(3);
        let f16 = self.config.dtype == DType::F16;
        let e = &mut self.engine;
        let result = (|| -> Result<(), CudaError> {
            enqueue(e, &self.config, &mut self.frames, batch)?;
            match (f16, self.pinned_output) {
                (false, true) => {
                    grow_pinned(&e.ctx, &mut self.host32[0], len)?;
                    let host = self.host32[0].as_mut().expect("grown");
                    // SAFETY: read right after the synchronize below.
                    unsafe { e.download_f32_pinned(host, len) }?;
                    e.stream.synchronize()?;
                    batch
                        .tensor
                        .host_f32(len)
                        .copy_from_slice(&host.as_slice()?[..len]);
                }
                (false, false) => e.download_f32(batch.tensor.host_f32(len))?,
                (true, true) => {
                    grow_pinned(&e.ctx, &mut self.host16[0], len)?;
                    let host = self.host16[0].as_mut().expect("grown");
                    // SAFETY: read right after the synchronize below.
                    unsafe { e.download_f16_pinned(host, len) }?;
                    e.stream.synchronize()?;
                    batch
                        .tensor
                        .host_f16(len)
                        .copy_from_slice(&host.as_slice()?[..len]);
                }
                (true, false) => e.download_f16(batch.tensor.host_f16(len))?,
            }
            Ok(())
        })();
        result.map_err(Into::into)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // A batch still in flight is copying into a pinned buffer about to be freed: let it finish.
        if self.in_flight.is_some() {
            let _ = self.engine.stream.synchronize();
            if let Some(e) = &self.engine2 {
                let _ = e.stream.synchronize();
            }
        }
    }
}
