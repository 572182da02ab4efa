//! CenterNet peaks on the GPU (`centernet.cu`, beside this file: [`CENTERNET_KERNELS`]), read
//! where the model wrote its heads: only the peaks come back to the host (tens per image), not
//! the score maps (5 MB per image).

use cudarc::driver::{CudaSlice, DeviceRepr, PushKernelArg, ValidAsZeroBits};
use octopipe_cuda::{
    grow, launch_config, order_after, CudaError, Gpu, KernelModule, StreamPriority,
};

use super::centernet::{Maps, Peak};

/// The detect stage's CenterNet peaks, f32 and f16 heads: `centernet.cu`.
pub const CENTERNET_KERNELS: KernelModule = KernelModule {
    name: "centernet",
    source: include_str!("centernet.cu"),
    functions: &["centernet_peaks_f32", "centernet_peaks_f16"],
};

/// Peak slots per image: a peak must beat its eight neighbours and the score threshold, so an
/// image has tens; those past the cap are counted ([`GpuPeaks::find`]) and left out.
pub const PEAK_CAP: usize = 1024;

/// Threads per block of the peak kernel.
const THREADS: u32 = 256;

// SAFETY: `#[repr(C)]` plain data with the layout of the kernel's `Peak`; all-zero bytes are a
// valid `Peak`.
unsafe impl DeviceRepr for Peak {}
unsafe impl ValidAsZeroBits for Peak {}

/// The peak kernel on one GPU, with its buffers (grown once, reused).
pub(super) struct GpuPeaks {
    engine: Gpu,
    counts: Option<CudaSlice<u32>>,
    peaks: Option<CudaSlice<Peak>>,
    host_counts: Vec<u32>,
    host_peaks: Vec<Peak>,
}

impl GpuPeaks {
    /// The kernel on GPU `device`, its stream at `priority`.
    pub fn new(device: usize, priority: StreamPriority) -> Result<Self, CudaError> {
        Ok(GpuPeaks {
            engine: Gpu::with_priority(device, &[&CENTERNET_KERNELS], priority)?,
            counts: None,
            peaks: None,
            host_counts: Vec::new(),
            host_peaks: Vec::new(),
        })
    }

    /// The peaks of the first `images` images of the heads at device addresses `heat` (scores
    /// `[images, classes, h, w]`) and `wh` (`[images, 4, h, w]`), f32 (f16 with `half`), written
    /// on the CUDA stream `producer` (raw; 0: nothing pending), at or over `min_score` (in the
    /// maps' own units): `out[i]` gets image `i`'s (in no particular order, scores as the maps
    /// hold them). Returns how many peaks were over [`PEAK_CAP`] and left out.
    #[allow(clippy::too_many_arguments)]
    pub fn find(
        &mut self,
        heat: u64,
        wh: u64,
        half: bool,
        images: usize,
        maps: &Maps,
        min_score: f32,
        producer: u64,
        out: &mut [Vec<Peak>],
    ) -> Result<u64, CudaError> {
        let e = &mut self.engine;
        let stream = e.stream().clone();
        order_after(e.context(), &stream, producer)?;
        grow(&stream, &mut self.counts, images)?;
        grow(&stream, &mut self.peaks, images * PEAK_CAP)?;
        let counts = self.counts.as_mut().expect("grown");
        stream.memset_zeros(counts)?;
        let total = (images * maps.per_image()) as u64;
        let blocks = total
            .div_ceil(THREADS as u64)
            .min(e.multiprocessors() as u64 * 16) as u32;
        let f = e.func(
            &CENTERNET_KERNELS,
            match half {
                true => "centernet_peaks_f16",
                false => "centernet_peaks_f32",
            },
        )?;
        let dims = [
            images as u32,
            maps.classes as u32,
            maps.h as u32,
            maps.w as u32,
        ];
        let cap = PEAK_CAP as u32;
        let mut b = stream.launch_builder(&f);
        b.arg(&heat)
            .arg(&wh)
            .arg(&dims[0])
            .arg(&dims[1])
            .arg(&dims[2])
            .arg(&dims[3])
            .arg(&min_score)
            .arg(&cap)
            .arg(counts)
            .arg(self.peaks.as_mut().expect("grown"));
        // SAFETY: the arguments match `centernet_peaks_f32`/`_f16` (picked by `half`, the heads'
        // element type); `heat` and `wh` hold the first `images` images' maps (the caller's bound
        // outputs, alive until the synchronize below), `counts` holds `images` and `peaks`
        // `images * cap` elements.
        unsafe { b.launch(launch_config((blocks, 1), THREADS)) }?;
        self.host_counts.resize(images, 0);
        self.host_peaks.resize(images * PEAK_CAP, Peak::default());
        let counts = self.counts.as_ref().expect("grown");
        stream.memcpy_dtoh(&counts.slice(..images), &mut self.host_counts[..])?;
        let peaks = self.peaks.as_ref().expect("grown");
        stream.memcpy_dtoh(&peaks.slice(..images * PEAK_CAP), &mut self.host_peaks[..])?;
        stream.synchronize()?;
        let mut over = 0;
        for (i, list) in out.iter_mut().enumerate().take(images) {
            let n = self.host_counts[i] as usize;
            over += n.saturating_sub(PEAK_CAP) as u64;
            let base = i * PEAK_CAP;
            list.extend_from_slice(&self.host_peaks[base..base + n.min(PEAK_CAP)]);
        }
        Ok(over)
    }
}

#[cfg(test)]
mod tests {
    use octopipe_cuda::kernels::check_modules;

    use super::CENTERNET_KERNELS;

    /// The peak kernels compile under NVRTC and define both entry points: no GPU needed.
    #[test]
    fn the_peak_kernels_compile_under_nvrtc() {
        match check_modules(&[&CENTERNET_KERNELS]) {
            None => eprintln!("SKIPPED: libnvrtc not found; centernet.cu not compile-checked"),
            Some(Ok(lines)) => eprintln!("{}", lines.join("\n")),
            Some(Err(failures)) => panic!("{failures}"),
        }
    }
}
