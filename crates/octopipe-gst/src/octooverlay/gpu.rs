//! The overlay on NV12 in CUDA memory: the renderer's rectangles (recorded by
//! `octopipe_observe::RecordingCanvas`) filled by a kernel (`overlay.cu`, beside this file:
//! [`OVERLAY_KERNELS`]) where the decoder wrote the frame, without a download; the frame comes
//! out byte-identical to the same frame drawn in system memory.

use cudarc::driver::{CudaSlice, PushKernelArg};
use octopipe_cuda::{grow, launch_config, order_after, CudaError, Gpu, KernelModule};
use octopipe_observe::YuvRect;

/// The overlay's kernels: claim each pixel for the last rectangle covering it, then paint.
pub const OVERLAY_KERNELS: KernelModule = KernelModule {
    name: "overlay",
    source: include_str!("overlay.cu"),
    functions: &["overlay_claim_nv12", "overlay_paint_nv12"],
};

/// Threads per block (one rectangle a block: most are a glyph's pixel or a line).
const THREADS: u32 = 128;

/// The NV12 frame to draw on: its size, its planes (device address and pitch of the luma and
/// of the interleaved chroma plane, as the buffer's video meta gives them), and the CUDA stream
/// its last writer used (raw; 0: its writes are complete).
pub(super) struct Nv12Target {
    pub size: (u32, u32),
    pub planes: [(u64, usize); 2],
    pub producer: u64,
}

/// Why the overlay kernel cannot draw on a frame.
#[derive(Debug, thiserror::Error)]
pub(super) enum GpuOverlayError {
    /// CUDA failed (the device, NVRTC, a launch, a copy).
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// The frame as mapped does not hold its rows, or a rectangle lies outside it.
    #[error("{0}")]
    Frame(String),
}

impl From<cudarc::driver::DriverError> for GpuOverlayError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        GpuOverlayError::Cuda(e.into())
    }
}

/// The overlay kernel on one GPU, with its buffers (grown once, reused): the rectangle list
/// and the owner planes (one u32 per luma pixel, then one per chroma sample).
pub(super) struct GpuOverlay {
    engine: Gpu,
    rects: Option<CudaSlice<u32>>,
    owners: Option<CudaSlice<u32>>,
    words: Vec<u32>,
}

impl GpuOverlay {
    /// The kernel on GPU `device` (its primary context: the one the decoder shares).
    pub fn new(device: usize) -> Result<Self, GpuOverlayError> {
        Ok(GpuOverlay {
            engine: Gpu::new(device, &[&OVERLAY_KERNELS])?,
            rects: None,
            owners: None,
            words: Vec::new(),
        })
    }

    /// Fill `rects` (in the renderer's order, each inside the frame) on `frame`, the last one
    /// drawn over the others; returns when the frame is written.
    pub fn draw(&mut self, rects: &[YuvRect], frame: &Nv12Target) -> Result<(), GpuOverlayError> {
        let (w, h) = frame.size;
        let [(luma, luma_pitch), (uv, uv_pitch)] = frame.planes;
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        if rects.is_empty() {
            return Ok(());
        }
        if luma == 0 || uv == 0 || luma_pitch < w as usize || uv_pitch < 2 * cw as usize {
            return Err(GpuOverlayError::Frame(format!(
                "the mapped NV12 frame ({w}x{h}) has planes 0x{luma:x} (rows {luma_pitch} bytes \
                 apart) and 0x{uv:x} (rows {uv_pitch} apart), too narrow for its rows"
            )));
        }
        let pitches = (u32::try_from(luma_pitch), u32::try_from(uv_pitch));
        let (Ok(luma_pitch), Ok(uv_pitch)) = pitches else {
            return Err(GpuOverlayError::Frame(
                "a plane's pitch is over 4 GiB".into(),
            ));
        };
        // Claims are indices + 1 in a u32.
        let n = u32::try_from(rects.len())
            .ok()
            .filter(|&n| n < u32::MAX)
            .ok_or_else(|| GpuOverlayError::Frame(format!("{} rectangles", rects.len())))?;
        if let Some(r) = rects
            .iter()
            .find(|r| r.x0 >= r.x1 || r.y0 >= r.y1 || r.x1 > w || r.y1 > h)
        {
            return Err(GpuOverlayError::Frame(format!(
                "rectangle {r:?} is not inside the {w}x{h} frame"
            )));
        }
        self.words.clear();
        for r in rects {
            let [y, u, v] = r.yuv.map(u32::from);
            self.words
                .extend_from_slice(&[r.x0, r.y0, r.x1, r.y1, y | u << 8 | v << 16]);
        }
        let luma_px = w as usize * h as usize;
        let owned = luma_px + cw as usize * ch as usize;
        let e = &mut self.engine;
        let stream = e.stream().clone();
        // The decoder's writes first (a stream of its own from GStreamer 1.24; 0 on 1.22, whose
        // decoders synchronize before pushing).
        order_after(e.context(), &stream, frame.producer)?;
        grow(&stream, &mut self.rects, self.words.len())?;
        grow(&stream, &mut self.owners, owned)?;
        let list = self.rects.as_mut().expect("grown");
        stream.memcpy_htod(&self.words[..], &mut list.slice_mut(..self.words.len()))?;
        let owners = self.owners.as_mut().expect("grown");
        stream.memset_zeros(&mut owners.slice_mut(..owned))?;
        let blocks = n.min(e.multiprocessors() * 32);
        let claim = e.func(&OVERLAY_KERNELS, "overlay_claim_nv12")?;
        let paint = e.func(&OVERLAY_KERNELS, "overlay_paint_nv12")?;
        let list = self.rects.as_ref().expect("grown");
        {
            let (mut owner_y, mut owner_uv) = owners.split_at_mut(luma_px);
            let mut b = stream.launch_builder(&claim);
            b.arg(list)
                .arg(&n)
                .arg(&w)
                .arg(&cw)
                .arg(&mut owner_y)
                .arg(&mut owner_uv);
            // SAFETY: the arguments match `overlay_claim_nv12`; `list` holds `n` packed
            // rectangles, each checked above to lie inside the `w`x`h` frame, so every claim
            // indexes `owner_y` (`w * h` entries) or `owner_uv` (`cw * ch`) in bounds.
            unsafe { b.launch(launch_config((blocks, 1), THREADS)) }?;
        }
        let (owner_y, owner_uv) = owners.split_at(luma_px);
        let mut b = stream.launch_builder(&paint);
        b.arg(list)
            .arg(&n)
            .arg(&w)
            .arg(&cw)
            .arg(&owner_y)
            .arg(&owner_uv)
            .arg(&luma)
            .arg(&luma_pitch)
            .arg(&uv)
            .arg(&uv_pitch);
        // SAFETY: the arguments match `overlay_paint_nv12`; as above for the list and the owner
        // planes; `luma` and `uv` are the mapped frame's planes (checked above to hold `w` and
        // `2 * cw` bytes a row), mapped for writing until the caller's mapping ends, after the
        // synchronize below.
        unsafe { b.launch(launch_config((blocks, 1), THREADS)) }?;
        // The frame is complete before its buffer goes on: downstream (cudadownload, an
        // encoder) may read it on any stream, or from the host. Simple and correct; the wait
        // is a frame's few kernels.
        stream.synchronize()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use octopipe_cuda::kernels::check_modules;

    use super::OVERLAY_KERNELS;

    /// The overlay kernels compile under NVRTC and define both entry points: no GPU needed.
    #[test]
    fn the_overlay_kernels_compile_under_nvrtc() {
        match check_modules(&[&OVERLAY_KERNELS]) {
            None => eprintln!("SKIPPED: libnvrtc not found; overlay.cu not compile-checked"),
            Some(Ok(lines)) => eprintln!("{}", lines.join("\n")),
            Some(Err(failures)) => panic!("{failures}"),
        }
    }
}
