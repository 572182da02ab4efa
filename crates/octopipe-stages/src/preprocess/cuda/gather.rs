//! The GPU's own gather of crop rectangles (`gather.cu`, beside this file: [`GATHER_KERNELS`]):
//! with [`Engine::set_device_gather`], a rectangle upload lists each crop's plane rectangles in
//! page-locked host frames and the GPU pulls them into the frame arena, with no host copy.

use cudarc::driver::{sys, DeviceRepr, PushKernelArg};
use octopipe_cuda::{grow, launch_config, KernelModule};

use super::meta::GatherRect;
use super::upload::{layout_rects, HostFrame, TransferStats};
use super::{CudaError, Engine};
use octopipe_core::crops::CropMeta;

/// Crop rectangles pulled from page-locked host frames by the GPU: `gather.cu`.
pub const GATHER_KERNELS: KernelModule = KernelModule {
    name: "gather",
    source: include_str!("gather.cu"),
    functions: &["gather_rects"],
};

/// Threads per block of `gather_rects` (each issues 8 loads per round: `GATHER_UNROLL`).
const GATHER_THREADS: u32 = 256;

/// Rectangles per `gather_rects` launch (`GATHER_MAX` in `gather.cu`): the table is a
/// kernel parameter, which must stay under 4 KiB.
const GATHER_MAX: usize = 120;

/// `GatherTable` of `gather.cu`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
struct GatherTable {
    n: u32,
    pad: u32,
    rects: [GatherRect; GATHER_MAX],
}

// SAFETY: `#[repr(C)]` plain data with the layout of the kernel's `GatherTable`.
unsafe impl DeviceRepr for GatherTable {}

impl Engine {
    /// [`UploadMode::Rects`] with [`Self::set_device_gather`]: the same arena layout and
    /// descriptors as the host gather, but the host only lists the rectangles (source address,
    /// stride, size, arena offset) and queues `gather_rects` over them.
    pub(super) fn gather_on_device(
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
        grow(self.gpu.stream(), &mut self.arena, total)?;
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
        let f = self.func(&GATHER_KERNELS, "gather_rects")?;
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
            let mut b = self.gpu.stream().launch_builder(&f);
            b.arg(&table).arg(&mut *arena);
            // SAFETY: argument types match `gather_rects`; every destination lies in the arena
            // (sized above), every source in a frame that `set_device_gather`'s caller keeps
            // page-locked, alive and unchanged until the stream has run this.
            unsafe { b.launch(launch_config((table.n, per), GATHER_THREADS)) }?;
        }
        Ok(self.stats)
    }

    /// The device address of page-locked host bytes, or an error naming frame `i`.
    fn device_address(&self, i: usize, data: &[u8]) -> Result<u64, CudaError> {
        self.gpu.context().bind_to_thread()?;
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
}
