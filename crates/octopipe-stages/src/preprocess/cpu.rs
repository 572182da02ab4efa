//! The CPU backend: the reference semantics, multi-threaded over the batch's blocks.
//!
//! ```text
//! ... ! preprocess backend=cpu size=64x64 ! ...
//! ```

use rayon::prelude::*;

use super::backend::Backend;
use super::config::PreprocessConfig;
use super::error::PreprocessError;
use super::half::f32_to_f16;
use super::jpeg;
use super::validate::validate;
use crate::crops::CropBatch;
use crate::frame::{ChromaSite, Colorimetry, Frame, PixelFormat};
use crate::tensor::{DType, TensorData};

mod general;
mod linear;
mod rgb;

use general::run_pixels_general;
pub use general::{area_taps, AreaTaps};
use linear::run_pixels;
pub use rgb::{frame_to_rgb, rect_to_rgb};

/// Multi-threaded CPU preprocessing.
pub struct CpuBackend {
    config: PreprocessConfig,
    pool: rayon::ThreadPool,
    /// f32 values before rounding to f16 (`dtype=f16` only).
    scratch: Vec<f32>,
}

impl CpuBackend {
    /// A backend with `config.threads` workers (0: one per core).
    pub fn new(config: PreprocessConfig) -> Result<Self, PreprocessError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("octopipe-cpu-{i}"))
            .build()
            .map_err(|e| PreprocessError::InvalidBatch(format!("cannot start CPU workers: {e}")))?;
        Ok(CpuBackend {
            config,
            pool,
            scratch: Vec::new(),
        })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        validate(batch)?;
        if let Some(f) = batch.frames.iter().find(|f| f.data().is_none()) {
            return Err(PreprocessError::NotOnHost {
                stream: f.stream,
                seq: f.seq,
            });
        }
        let len = batch.tensor_len(3);
        let shape = batch.tensor_shape(self.config.layout);
        // The batch's tensor is the largest allocation its sizes reach: one the system refuses is
        // this batch's error (the stream's), never an abort of the process.
        let crops = batch.crops.len();
        let refused = |bytes: usize| PreprocessError::TooLarge {
            crops,
            bytes: len.saturating_mul(bytes) as u64,
        };
        match self.config.dtype {
            DType::F32 => {
                batch.tensor.try_host_f32(len).map_err(|_| refused(4))?;
                // Filled while out of the batch, which the fill reads.
                let mut host = std::mem::take(&mut batch.tensor.data);
                if let TensorData::Host(out) = &mut host {
                    self.fill(batch, out.view_mut().unwrap_or_default());
                }
                batch.tensor.data = host;
            }
            DType::F16 => {
                // The f16 value is the f32 value rounded to nearest even, as the kernels store it.
                let mut values = std::mem::take(&mut self.scratch);
                octopipe_core::alloc::try_resize(&mut values, len, 0.0).map_err(|_| refused(4))?;
                self.fill(batch, &mut values);
                let out = batch.tensor.try_host_f16(len).map_err(|_| refused(2))?;
                for (o, v) in out.iter_mut().zip(&values) {
                    *o = f32_to_f16(*v);
                }
                self.scratch = values;
            }
        }
        batch.tensor.layout = self.config.layout;
        batch.tensor.shape = shape;
        Ok(())
    }
}

impl CpuBackend {
    /// Every crop's f32 values into `out` (`batch.tensor_len(3)` long), blocks in parallel.
    fn fill(&mut self, batch: &CropBatch, out: &mut [f32]) {
        let samplers: Vec<Sampler> = batch.frames.iter().map(Sampler::new).collect();
        let out = OutPtr(out.as_mut_ptr());
        let cfg = &self.config;
        // Merge runs of a crop's blocks into tasks big enough to amortise the row set-up.
        let mut tasks: Vec<(u32, u32, u32)> = Vec::with_capacity(batch.crops.len());
        for b in &batch.blocks {
            let (p0, p1) = batch.block_pixels(b);
            match tasks.last_mut() {
                Some((c, t0, t1)) if *c == b.crop && *t1 == p0 && *t1 - *t0 < CPU_TASK_PIXELS => {
                    *t1 = p1
                }
                _ => tasks.push((b.crop, p0, p1)),
            }
        }
        let plain = cfg.is_plain_bilinear();
        self.pool.install(|| {
            tasks.par_iter().for_each(|&(c, p0, p1)| {
                let crop = &batch.crops[c as usize];
                let s = &samplers[crop.frame as usize];
                // SAFETY: `validate` checked that every crop's output lies inside the tensor and that
                // blocks never overlap, so each output element is written by exactly one task.
                unsafe {
                    if plain {
                        run_pixels(s, crop, p0, p1, cfg, out)
                    } else {
                        run_pixels_general(s, crop, p0, p1, cfg, out)
                    }
                };
            });
        });
    }
}

#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint ranges (see `CpuBackend::fill`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// OpenCV INTER_LINEAR source taps for output coordinate `o` of a crop of `len` pixels resized to
/// `out_len`: `(i0, i1, weight of i1)`, indices relative to the crop, clamped to its edge.
#[inline(always)]
pub(crate) fn linear_taps(o: u32, len: u32, out_len: u32) -> (u32, u32, f32) {
    let scale = len as f32 / out_len as f32;
    let f = (o as f32 + 0.5) * scale - 0.5;
    let i = f.floor();
    let mut a = f - i;
    let mut i0 = i as i64;
    if i0 < 0 {
        i0 = 0;
        a = 0.0;
    }
    if i0 >= len as i64 - 1 {
        i0 = len as i64 - 1;
        a = 0.0;
    }
    let i1 = (i0 + 1).min(len as i64 - 1);
    (i0 as u32, i1 as u32, a)
}

/// A frame's chroma planes: Cb at `u`, Cr at `v`, sample (cx, cy) at `cy * stride + cx * step`.
#[derive(Clone, Copy)]
struct ChromaPlanes<'a> {
    u: &'a [u8],
    v: &'a [u8],
    stride: usize,
    /// Bytes between horizontally adjacent samples (1 planar, 2 interleaved).
    step: usize,
    /// Samples per row and rows.
    cw: usize,
    ch: usize,
}

impl ChromaPlanes<'_> {
    /// (Cb, Cr) bytes of sample (cx, cy).
    #[inline(always)]
    fn at(&self, cx: usize, cy: usize) -> (u8, u8) {
        let i = cy * self.stride + cx * self.step;
        (self.u[i], self.v[i])
    }
}

/// Reads RGB values (0..255, as f32) at integer pixel positions of one frame.
enum Sampler<'a> {
    Packed {
        data: &'a [u8],
        stride: usize,
        bpp: usize,
        /// Byte index of R, G, B within a pixel.
        rgb: [usize; 3],
    },
    Yuv {
        y: &'a [u8],
        y_stride: usize,
        u: &'a [u8],
        v: &'a [u8],
        c_stride: usize,
        /// Bytes between horizontally adjacent chroma samples (1 planar, 2 interleaved).
        c_step: usize,
        cw: i64,
        ch: i64,
        x_shift: f32,
        y_off: f32,
        m: [[f32; 3]; 3],
    },
    /// JPEG colorimetry: libjpeg-turbo's integer upsampling and conversion (see `jpeg`).
    Jpeg {
        y: &'a [u8],
        y_stride: usize,
        c: ChromaPlanes<'a>,
        /// libjpeg's triangle filter (planes wider than 2 samples) rather than replication.
        fancy: bool,
    },
    /// One 16-bit band (little-endian), each value brought onto 0..255 (`v / 257`) and given to
    /// every channel.
    Gray16 {
        data: &'a [u8],
        stride: usize,
    },
    Missing,
}

impl<'a> Sampler<'a> {
    fn new(frame: &'a Frame) -> Self {
        let Some(data) = frame.data() else {
            return Sampler::Missing;
        };
        let l = &frame.layout;
        match l.format {
            PixelFormat::Gray16 => Sampler::Gray16 {
                data: &data[l.offsets[0]..],
                stride: l.strides[0],
            },
            PixelFormat::I420 | PixelFormat::Nv12 => {
                let (y_off, m) = frame.colorimetry.yuv_to_rgb();
                let (u, v, c_step) = if l.format == PixelFormat::I420 {
                    (&data[l.offsets[1]..], &data[l.offsets[2]..], 1)
                } else {
                    (&data[l.offsets[1]..], &data[l.offsets[1] + 1..], 2)
                };
                // JPEG frames: libjpeg-turbo's integers, so that the RGB equals cv2.imread's.
                if frame.colorimetry == Colorimetry::JPEG {
                    let cw = l.width.div_ceil(2) as usize;
                    return Sampler::Jpeg {
                        y: &data[l.offsets[0]..],
                        y_stride: l.strides[0],
                        c: ChromaPlanes {
                            u,
                            v,
                            stride: l.strides[1],
                            step: c_step,
                            cw,
                            ch: l.height.div_ceil(2) as usize,
                        },
                        fancy: jpeg::fancy(cw),
                    };
                }
                Sampler::Yuv {
                    y: &data[l.offsets[0]..],
                    y_stride: l.strides[0],
                    u,
                    v,
                    c_stride: l.strides[1],
                    c_step,
                    cw: l.width.div_ceil(2) as i64,
                    ch: l.height.div_ceil(2) as i64,
                    x_shift: match frame.colorimetry.chroma_site {
                        ChromaSite::Center => 0.25,
                        ChromaSite::Left => 0.0,
                    },
                    y_off,
                    m,
                }
            }
            f => Sampler::Packed {
                data: &data[l.offsets[0]..],
                stride: l.strides[0],
                bpp: f.packed_bytes(),
                rgb: match f {
                    PixelFormat::Bgr | PixelFormat::Bgra => [2, 1, 0],
                    // The grey value in every channel.
                    PixelFormat::Gray8 => [0, 0, 0],
                    _ => [0, 1, 2],
                },
            },
        }
    }

    /// RGB at frame pixel (x, y), each in 0..255.
    #[inline(always)]
    fn rgb(&self, x: u32, y: u32) -> [f32; 3] {
        match *self {
            Sampler::Packed {
                data,
                stride,
                bpp,
                rgb,
            } => {
                let i = y as usize * stride + x as usize * bpp;
                [
                    data[i + rgb[0]] as f32,
                    data[i + rgb[1]] as f32,
                    data[i + rgb[2]] as f32,
                ]
            }
            Sampler::Yuv {
                y: yp,
                y_stride,
                u,
                v,
                c_stride,
                c_step,
                cw,
                ch,
                x_shift,
                y_off,
                m,
            } => {
                let luma = yp[y as usize * y_stride + x as usize] as f32 - y_off;
                // Chroma sample position in chroma-plane coordinates, bilinear, clamped at edges.
                let (x0, x1, ax) = chroma_taps(x as f32 * 0.5 - x_shift, cw);
                let (y0, y1, ay) = chroma_taps(y as f32 * 0.5 - 0.25, ch);
                let at = |p: &[u8], cx: usize, cy: usize| p[cy * c_stride + cx * c_step] as f32;
                let bil = |p: &[u8]| {
                    let top = at(p, x0, y0) + (at(p, x1, y0) - at(p, x0, y0)) * ax;
                    let bot = at(p, x0, y1) + (at(p, x1, y1) - at(p, x0, y1)) * ax;
                    top + (bot - top) * ay - 128.0
                };
                let (cb, cr) = (bil(u), bil(v));
                let px =
                    |row: [f32; 3]| (row[0] * luma + row[1] * cb + row[2] * cr).clamp(0.0, 255.0);
                [px(m[0]), px(m[1]), px(m[2])]
            }
            Sampler::Jpeg {
                y: yp,
                y_stride,
                c,
                fancy,
            } => {
                let (xn, xf) = jpeg::taps(x, c.cw, fancy);
                let (yn, yf) = jpeg::taps(y, c.ch, fancy);
                // Column sums of the nearer and further chroma columns, then across them.
                let sums = |cx: usize| {
                    let ((un, vn), (uf, vf)) = (c.at(cx, yn), c.at(cx, yf));
                    (jpeg::colsum(un, uf), jpeg::colsum(vn, vf))
                };
                let ((un, vn), (uf, vf)) = (sums(xn), sums(xf));
                let luma = yp[y as usize * y_stride + x as usize] as i32;
                jpeg::ycc_to_rgb(luma, jpeg::upsample(x, un, uf), jpeg::upsample(x, vn, vf))
                    .map(f32::from)
            }
            Sampler::Gray16 { data, stride } => {
                let i = y as usize * stride + x as usize * 2;
                [f32::from(u16::from_le_bytes([data[i], data[i + 1]])) / 257.0; 3]
            }
            Sampler::Missing => [0.0; 3],
        }
    }
}

#[inline(always)]
fn chroma_taps(pos: f32, len: i64) -> (usize, usize, f32) {
    let i = pos.floor();
    let a = pos - i;
    let i0 = i as i64;
    if i0 < 0 {
        (0, 0, 0.0)
    } else if i0 >= len - 1 {
        ((len - 1) as usize, (len - 1) as usize, 0.0)
    } else {
        (i0 as usize, i0 as usize + 1, a)
    }
}

/// Output pixels a CPU task handles at least (consecutive blocks of a crop are merged up to this).
const CPU_TASK_PIXELS: u32 = 16 * 1024;

/// The chroma of one source row span, computed once for the span by [`Sampler::row_rgb`]: Cb and
/// Cr interleaved per chroma column.
#[derive(Default)]
struct ChromaRow {
    /// Float path: the two chroma rows blended vertically, minus 128.
    blended: Vec<f32>,
    /// JPEG path: libjpeg's vertical column sums (`3 * nearer row + further row`).
    sums: Vec<i32>,
}

/// Per-thread scratch: x taps, a converted source row, chroma rows and two resampled rows.
#[derive(Default)]
struct Scratch {
    xtaps: Vec<(u32, u32, f32)>,
    line: Vec<f32>,
    chroma: ChromaRow,
    /// (source row, planar R | G | B values of `out_w` each).
    rows: [(u32, Vec<f32>); 2],
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

impl Sampler<'_> {
    /// RGB of frame pixels `x..x + n` of row `y`, written to `out` as `n * 3` interleaved values.
    fn row_rgb(&self, x: u32, y: u32, n: u32, out: &mut Vec<f32>, chroma: &mut ChromaRow) {
        out.clear();
        match *self {
            Sampler::Yuv {
                y: yp,
                y_stride,
                u,
                v,
                c_stride,
                c_step,
                cw,
                ch,
                x_shift,
                y_off,
                m,
            } => {
                // Blend the two chroma rows once for the whole span, then interpolate horizontally.
                let (cy0, cy1, ay) = chroma_taps(y as f32 * 0.5 - 0.25, ch);
                let (ca, _, _) = chroma_taps(x as f32 * 0.5 - x_shift, cw);
                let (_, cb, _) = chroma_taps((x + n - 1) as f32 * 0.5 - x_shift, cw);
                let chroma = &mut chroma.blended;
                chroma.clear();
                for cx in ca..=cb {
                    for p in [u, v] {
                        let t = p[cy0 * c_stride + cx * c_step] as f32;
                        let b = p[cy1 * c_stride + cx * c_step] as f32;
                        chroma.push(t + (b - t) * ay - 128.0);
                    }
                }
                let yrow = &yp[y as usize * y_stride..];
                for i in x..x + n {
                    let (c0, c1, ax) = chroma_taps(i as f32 * 0.5 - x_shift, cw);
                    let (k0, k1) = ((c0 - ca) * 2, (c1 - ca) * 2);
                    let cb = chroma[k0] + (chroma[k1] - chroma[k0]) * ax;
                    let cr = chroma[k0 + 1] + (chroma[k1 + 1] - chroma[k0 + 1]) * ax;
                    let luma = yrow[i as usize] as f32 - y_off;
                    for row in m {
                        out.push((row[0] * luma + row[1] * cb + row[2] * cr).clamp(0.0, 255.0));
                    }
                }
            }
            Sampler::Jpeg {
                y: yp,
                y_stride,
                c,
                fancy,
            } => {
                // libjpeg's vertical column sums of the span's chroma columns once, then each
                // pixel's horizontal pass and conversion.
                let (yn, yf) = jpeg::taps(y, c.ch, fancy);
                let (an, af) = jpeg::taps(x, c.cw, fancy);
                let (bn, bf) = jpeg::taps(x + n - 1, c.cw, fancy);
                let (ca, cb) = (an.min(af), bn.max(bf));
                let sums = &mut chroma.sums;
                sums.clear();
                for cx in ca..=cb {
                    let ((un, vn), (uf, vf)) = (c.at(cx, yn), c.at(cx, yf));
                    sums.push(jpeg::colsum(un, uf));
                    sums.push(jpeg::colsum(vn, vf));
                }
                let yrow = &yp[y as usize * y_stride..];
                for i in x..x + n {
                    let (xn, xf) = jpeg::taps(i, c.cw, fancy);
                    let (kn, kf) = (2 * (xn - ca), 2 * (xf - ca));
                    let cb = jpeg::upsample(i, sums[kn], sums[kf]);
                    let cr = jpeg::upsample(i, sums[kn + 1], sums[kf + 1]);
                    let rgb = jpeg::ycc_to_rgb(yrow[i as usize] as i32, cb, cr);
                    out.extend(rgb.map(f32::from));
                }
            }
            _ => {
                for i in x..x + n {
                    out.extend_from_slice(&self.rgb(i, y));
                }
            }
        }
    }
}
