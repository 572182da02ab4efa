//! Preprocess stage: crop + resize + colour conversion + normalization, one pass per output pixel.
//!
//! ```text
//! ... ! batch ! preprocess size=64x64 mean=0.485,0.456,0.406 std=0.229,0.224,0.225 channels=rgb layout=nchw ! classify ...
//! ```
//!
//! Semantics (both backends): the crop is the detection's integer box; it is resized exactly as
//! OpenCV `cv2.resize(crop, size, interpolation=INTER_LINEAR)` does (half-pixel centres, sampling
//! clamped to the crop's own edge pixels); YUV frames are converted to RGB at each sampled pixel:
//! JPEG frames ([`Colorimetry::JPEG`](crate::frame::Colorimetry::JPEG)) with libjpeg-turbo's own
//! integer arithmetic (its "fancy" chroma upsampling and fixed-point YCbCr to RGB), so that they
//! equal `cv2.imread`'s RGB byte for byte; other colorimetries in floating point with the frame's
//! matrix and range, chroma upsampled bilinearly at its siting; then
//! `value = (v * scale - mean) / std` per channel, written NCHW or NHWC as f32.
//!
//! Options (both backends, bit-identical): `interpolation` ([`Interpolation::Area`]: OpenCV
//! `INTER_AREA`, antialiased downscaling), `letterbox` (aspect-preserving resize into the output,
//! centred, padded; [`letterbox_rect`]) and `dtype` ([`DType::F16`]: half output in
//! `CropBatch::tensor_f16`, for f16 consumers; the classifier needs f32).

mod config;
pub mod cpu;
pub mod cuda;
mod jpeg;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::budget::Tally;
use crate::crops::CropBatch;
use crate::description::DescribeError;
use crate::stage::{
    Caps, Element, OpenContext, Properties, Props, Role, Running, Stage, StageDecl,
};
pub use crate::tensor::{DType, Layout};
use crate::Error;

pub use config::{
    BackendKind, BackendProps, ChannelOrder, Gather, Interpolation, Memory, PreprocessConfig,
    PreprocessProps, DEFAULT_SCALE, DEFAULT_SIZE,
};

/// Where a crop of `w`x`h` lands inside an `out_w`x`out_h` output when letterboxed:
/// `(x offset, y offset, inner width, inner height)`. Integer arithmetic (the CUDA kernels compute
/// the same): the limiting side fills the output, the other is `round(len * out / limiting len)`,
/// clamped to 1..=out, and the spare pixels are split with the odd one after the image.
pub fn letterbox_rect(w: u32, h: u32, out_w: u32, out_h: u32) -> (u32, u32, u32, u32) {
    let (w, h, ow, oh) = (w as u64, h as u64, out_w as u64, out_h as u64);
    let (nw, nh) = if ow * h <= oh * w {
        (ow, ((2 * h * ow + w) / (2 * w)).clamp(1, oh))
    } else {
        (((2 * w * oh + h) / (2 * h)).clamp(1, ow), oh)
    };
    (
        ((ow - nw) / 2) as u32,
        ((oh - nh) / 2) as u32,
        nw as u32,
        nh as u32,
    )
}

/// f32 to IEEE half bits, round to nearest even (as the kernels' `cvt.rn.f16.f32`).
pub fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        // Inf or NaN (keep NaN quiet).
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal half (or zero): shift the full mantissa, round to nearest even.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let r = if rem > mid || (rem == mid && (half & 1) == 1) {
            half + 1
        } else {
            half
        };
        return sign | r as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let r = if rem > 0x1000 || (rem == 0x1000 && (half & 1) == 1) {
        half + 1
    } else {
        half
    };
    // A carry out of the mantissa correctly bumps the exponent (up to infinity).
    sign | r as u16
}

/// IEEE half bits to f32.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalize.
            let shift = m.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | (((m << shift) & 0x3ff) << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Errors of the preprocess stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PreprocessError {
    /// The batch is inconsistent (a bug upstream or a hand-built batch).
    #[error("crop batch is invalid: {0}")]
    InvalidBatch(String),
    /// A frame's pixels were released before preprocessing.
    #[error("frame {seq} of stream {stream} has no pixels")]
    NoPixels {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
    },
    /// Settings that cannot work together or on this machine.
    #[error("preprocess: {0}")]
    Setting(String),
    /// The batch's tensor could not be allocated (the system refused the memory).
    #[error("preprocess: the tensor of a batch of {crops} crops needs {bytes} bytes, more than the memory this process may still take: lower max-crops or the output size")]
    TooLarge {
        /// Crops in the batch.
        crops: usize,
        /// Bytes its tensor needs.
        bytes: u64,
    },
    /// A frame's planes are in device memory and this backend reads host memory.
    #[error("frame {seq} of stream {stream} is in CUDA device memory: the CPU backend reads host frames (preprocess backend=cuda takes device frames)")]
    NotOnHost {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
    },
    /// A frame in a pixel format the backends do not convert (16-bit grey).
    #[error("frame {seq} of stream {stream} is {format}: the CUDA preprocess backend reads 8-bit YUV, RGB and grey frames (backend=cpu reads 16-bit grey ones too, as values / 257)")]
    Format {
        /// Stream id.
        stream: u32,
        /// Frame number.
        seq: u64,
        /// Its pixel format.
        format: crate::frame::PixelFormat,
    },
    /// The GPU backend failed.
    #[error("CUDA: {0}")]
    Cuda(#[source] cuda::CudaError),
    /// The GPU ran out of memory on this batch (`CUDA_ERROR_OUT_OF_MEMORY`); the batch may still
    /// fit on the CPU ([`GpuWithFallback`] does that).
    #[error("CUDA: {0}")]
    OutOfMemory(#[source] cuda::CudaError),
    /// The GPU failed on a batch other than by running out of memory (a lost device, a failed
    /// launch): [`GpuWithFallback`] stops with this.
    #[error(
        "CUDA: GPU preprocessing failed (is the device still there? nvidia-smi shows it): {0}"
    )]
    GpuFailed(#[source] cuda::CudaError),
}

impl crate::error::Kind for PreprocessError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            PreprocessError::InvalidBatch(_) | PreprocessError::NoPixels { .. } => {
                ErrorKind::Internal
            }
            PreprocessError::Setting(_)
            | PreprocessError::NotOnHost { .. }
            | PreprocessError::TooLarge { .. } => ErrorKind::Config,
            PreprocessError::Format { .. } => ErrorKind::Input,
            PreprocessError::Cuda(_)
            | PreprocessError::OutOfMemory(_)
            | PreprocessError::GpuFailed(_) => ErrorKind::Device,
        }
    }
}

crate::error::stage_error!(PreprocessError);

/// A preprocess implementation: fills `batch.tensor` (or `batch.tensor_f16` for
/// [`DType::F16`]) from the batch's frames, crops and blocks.
pub trait Backend: Send {
    /// Short name for logs and reports.
    fn name(&self) -> &'static str;
    /// Write every crop's output into `batch.tensor` (resized to `batch.tensor_len(3)`), or for
    /// [`DType::F16`] into `batch.tensor_f16` (and `batch.tensor` cleared).
    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError>;
    /// A line for the run's report on how the batches ran, if the backend has one to give.
    fn summary(&self) -> Option<String> {
        None
    }
}

/// The backend `config.backend` asks for. `Auto` takes CUDA when a GPU is usable and otherwise
/// falls back to the CPU with one log line saying why.
pub fn create_backend(config: &PreprocessConfig) -> Result<Box<dyn Backend>, PreprocessError> {
    if config.device_output {
        // Device memory only a GPU gives: no CPU backend, no falling back to one.
        if config.backend == BackendKind::Cpu {
            return Err(PreprocessError::Setting(
                "memory=device needs backend=cuda (or auto with a GPU)".into(),
            ));
        }
        return match cuda::CudaBackend::new(config.clone()) {
            Ok(gpu) => Ok(Box::new(gpu)),
            Err(e) => Err(PreprocessError::Setting(format!(
                "memory=device needs a CUDA GPU: {e}"
            ))),
        };
    }
    match config.backend {
        BackendKind::Cpu => Ok(Box::new(cpu::CpuBackend::new(config.clone())?)),
        BackendKind::Cuda => Ok(Box::new(GpuWithFallback::new(
            Box::new(cuda::CudaBackend::new(config.clone())?),
            config.clone(),
        ))),
        BackendKind::Auto => match cuda::CudaBackend::new(config.clone()) {
            Ok(gpu) => Ok(Box::new(GpuWithFallback::new(
                Box::new(gpu),
                config.clone(),
            ))),
            Err(e) => {
                tracing::info!("preprocess on CPU: {e}");
                Ok(Box::new(cpu::CpuBackend::new(config.clone())?))
            }
        },
    }
}

/// A GPU backend whose batches fall back to the CPU backend when the device runs out of memory
/// (one warning logged the first time; the report counts them). Any other GPU error (a lost device, a
/// failed launch) stops the pipeline with that error.
pub struct GpuWithFallback {
    gpu: Box<dyn Backend>,
    cpu: Option<cpu::CpuBackend>,
    config: PreprocessConfig,
    fallbacks: u64,
}

impl GpuWithFallback {
    /// Wrap `gpu`; the CPU backend is made from `config` when first needed.
    pub fn new(gpu: Box<dyn Backend>, config: PreprocessConfig) -> Self {
        GpuWithFallback {
            gpu,
            cpu: None,
            config,
            fallbacks: 0,
        }
    }

    /// Batches that were preprocessed on the CPU after the GPU ran out of memory.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks
    }
}

impl Backend for GpuWithFallback {
    fn name(&self) -> &'static str {
        self.gpu.name()
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        match self.gpu.run(batch) {
            Err(e @ PreprocessError::OutOfMemory(_)) => {
                if self.fallbacks == 0 {
                    tracing::warn!(
                        "GPU out of memory on a batch of {} crops: preprocessing such batches on the CPU ({e})",
                        batch.crops.len()
                    );
                }
                self.fallbacks += 1;
                let cpu = match &mut self.cpu {
                    Some(cpu) => cpu,
                    None => self.cpu.insert(cpu::CpuBackend::new(self.config.clone())?),
                };
                cpu.run(batch)
            }
            Err(PreprocessError::Cuda(e)) => Err(PreprocessError::GpuFailed(e)),
            other => other,
        }
    }

    fn summary(&self) -> Option<String> {
        self.gpu.summary()
    }
}

/// Check that `batch` is self-consistent: crops inside their frames, outputs inside the tensor,
/// blocks inside their crops. O(crops + blocks).
pub fn validate(batch: &CropBatch) -> Result<(), PreprocessError> {
    let len = batch.tensor_len(3);
    for (i, c) in batch.crops.iter().enumerate() {
        let f = batch.frames.get(c.frame as usize).ok_or_else(|| {
            PreprocessError::InvalidBatch(format!(
                "crop {i} names frame {} of {}",
                c.frame,
                batch.frames.len()
            ))
        })?;
        let (fw, fh) = (f.layout.width, f.layout.height);
        if !c.inside(fw, fh) || c.out_w == 0 || c.out_h == 0 {
            return Err(PreprocessError::InvalidBatch(format!(
                "crop {i} box [{}, {}, {}, {}] -> {}x{} does not fit frame {fw}x{fh}",
                c.x, c.y, c.w, c.h, c.out_w, c.out_h
            )));
        }
        if c.out_offset as usize + (c.out_pixels() * 3) as usize > len {
            return Err(PreprocessError::InvalidBatch(format!(
                "crop {i} output runs past the tensor"
            )));
        }
        let Some(planes) = f.planes.as_ref() else {
            return Err(PreprocessError::NoPixels {
                stream: f.stream,
                seq: f.seq,
            });
        };
        f.layout
            .check(planes.host().map(<[u8]>::len))
            .map_err(|e| {
                PreprocessError::InvalidBatch(format!(
                    "frame {} of stream {}: {e}",
                    f.seq, f.stream
                ))
            })?;
    }
    // Blocks must be in crop order and never overlap (backends write them in parallel), and
    // must cover every crop's tiles: an uncovered crop would be left unwritten.
    let uncovered = |crop: u32, from: u32| -> Result<(), PreprocessError> {
        let c = &batch.crops[crop as usize];
        let tiles = c.out_pixels().div_ceil(batch.tile_pixels.max(1));
        if from < tiles {
            return Err(PreprocessError::InvalidBatch(format!(
                "crop {crop} has no block for its tiles {from}..{tiles}: build the batch's blocks (CropBatch::build_blocks) after adding its crops"
            )));
        }
        Ok(())
    };
    // The crop and tile the next block must start at (or the crop after it).
    let mut next = (0u32, 0u32);
    for b in &batch.blocks {
        let c = batch
            .crops
            .get(b.crop as usize)
            .ok_or_else(|| PreprocessError::InvalidBatch(format!("block names crop {}", b.crop)))?;
        if b.crop < next.0 || (b.crop == next.0 && b.tile_begin < next.1) {
            return Err(PreprocessError::InvalidBatch(format!(
                "block for crop {} tiles {}..{} overlaps or is out of order",
                b.crop, b.tile_begin, b.tile_end
            )));
        }
        if b.tile_begin >= b.tile_end || (b.tile_begin * batch.tile_pixels) >= c.out_pixels() {
            return Err(PreprocessError::InvalidBatch(format!(
                "block tiles {}..{} outside crop {}",
                b.tile_begin, b.tile_end, b.crop
            )));
        }
        while next.0 < b.crop {
            uncovered(next.0, next.1)?;
            next = (next.0 + 1, 0);
        }
        if b.tile_begin > next.1 {
            uncovered(b.crop, next.1)?;
        }
        next = (b.crop, b.tile_end);
    }
    while (next.0 as usize) < batch.crops.len() {
        uncovered(next.0, next.1)?;
        next = (next.0 + 1, 0);
    }
    Ok(())
}

/// The preprocess stage at run time: the backend, whether frames keep their pixels after it,
/// and the report its summary goes to at the end.
struct PreprocessStage {
    backend: Box<dyn Backend>,
    keep_pixels: Arc<AtomicBool>,
    tally: Tally,
}

impl Stage<CropBatch, CropBatch> for PreprocessStage {
    fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.backend.run(&mut batch)?;
        if !self.keep_pixels.load(Ordering::Relaxed) {
            batch.release_pixels();
        }
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        if let Some(line) = self.backend.summary() {
            self.tally.with(|t| t.add_line(line));
        }
        Ok(())
    }
}

/// The preprocess stage's element: its settings, told to the stages around it in the caps.
impl Element for PreprocessConfig {
    fn configure(&mut self, caps: &mut Caps) {
        caps.insert(self.clone());
    }
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let mut config = *self;
        // The model downstream settles the size when it opens first.
        if let Some(settled) = ctx.caps.get::<PreprocessConfig>().and_then(|c| c.size) {
            config.size = Some(settled);
        }
        let backend = create_backend(&config)?;
        let line = format!("preprocess backend: {}", backend.name());
        ctx.tally.with(|t| t.add_line(line));
        ctx.caps.insert(config);
        Ok(Running::stage(Box::new(PreprocessStage {
            backend,
            keep_pixels: ctx.keep_pixels.clone(),
            tally: ctx.tally.clone(),
        })))
    }
}

/// `preprocess size=64x64 mean=... std=... channels=rgb layout=nchw`.
pub const PREPROCESS: StageDecl = StageDecl {
    name: "preprocess",
    role: Role::Preprocess,
    doc: "crop + bilinear resize (OpenCV INTER_LINEAR) + colour conversion + mean/std",
    props: PreprocessProps::PROPS,
    needs: &[Role::Batch],
    provides: &[],
    make: preprocess_config,
};

fn preprocess_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let props = PreprocessProps::from_props(p)?;
    if props.gather == Gather::Device && props.compute.backend == BackendKind::Cpu {
        return Err(p.error(
            "gather",
            "preprocess: gather=device is the CUDA backend's: use backend=cuda (or auto)",
        ));
    }
    Ok(Box::new(PreprocessConfig::from(props)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats_read_back() {
        for v in [0.0f32, 1.0, -2.5, 65504.0, 6.1e-5, 5.96e-8, 0.333] {
            let h = f32_to_f16(v);
            let back = f16_to_f32(h);
            assert!((back - v).abs() <= v.abs() * 1e-3 + 1e-7, "{v} -> {back}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
    }

    #[test]
    fn the_declared_defaults_are_the_constants() {
        let d = PreprocessConfig::default();
        assert_eq!(
            (d.mean, d.std, d.scale),
            ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225], DEFAULT_SCALE)
        );
        assert_eq!(
            (d.size, d.layout, d.dtype),
            (None, Layout::Nchw, DType::F32)
        );
        assert_eq!(
            (d.backend, d.threads, d.device_output),
            (BackendKind::Auto, 0, false)
        );
    }
}
