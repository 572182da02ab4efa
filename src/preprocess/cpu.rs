//! The CPU backend: the reference semantics, multi-threaded over the batch's blocks.
//!
//! ```text
//! ... ! preprocess backend=cpu size=64x64 ! ...
//! ```

use rayon::prelude::*;

use super::{validate, Backend, ChannelOrder, Layout, PreprocessConfig, PreprocessError};
use crate::batch::{BlockMeta, CropBatch, CropMeta};
use crate::frame::{ChromaSite, Frame, PixelFormat};

/// Multi-threaded CPU preprocessing.
pub struct CpuBackend {
    config: PreprocessConfig,
    pool: rayon::ThreadPool,
}

impl CpuBackend {
    /// A backend with `config.threads` workers (0: one per core).
    pub fn new(config: PreprocessConfig) -> Result<Self, PreprocessError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("octopipe-cpu-{i}"))
            .build()
            .map_err(|e| PreprocessError::InvalidBatch(format!("cannot start CPU workers: {e}")))?;
        Ok(CpuBackend { config, pool })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        let len = batch.tensor_len(3);
        batch.tensor.resize(len, 0.0);
        validate(batch)?;
        let samplers: Vec<Sampler> = batch.frames.iter().map(Sampler::new).collect();
        let out = OutPtr(batch.tensor.as_mut_ptr());
        let cfg = &self.config;
        let batch = &*batch;
        self.pool.install(|| {
            batch.blocks.par_iter().for_each(|b| {
                let crop = &batch.crops[b.crop as usize];
                let sampler = &samplers[crop.frame as usize];
                let (p0, p1) = batch.block_pixels(b);
                // SAFETY: `validate` checked that every crop's output lies inside the tensor and that
                // blocks never overlap, so each output element is written by exactly one task.
                unsafe { run_block(sampler, crop, b, p0, p1, cfg, out) };
            });
        });
        Ok(())
    }
}

#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint ranges (see `CpuBackend::run`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// OpenCV INTER_LINEAR source taps for output coordinate `o` of a crop of `len` pixels resized to
/// `out_len`: `(i0, i1, weight of i1)`, indices relative to the crop, clamped to its edge.
#[inline(always)]
pub fn linear_taps(o: u32, len: u32, out_len: u32) -> (u32, u32, f32) {
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
    Missing,
}

impl<'a> Sampler<'a> {
    fn new(frame: &'a Frame) -> Self {
        let Some(data) = frame.data() else {
            return Sampler::Missing;
        };
        let l = &frame.layout;
        match l.format {
            PixelFormat::I420 | PixelFormat::Nv12 => {
                let (y_off, m) = frame.colorimetry.yuv_to_rgb();
                let (u, v, c_step) = if l.format == PixelFormat::I420 {
                    (&data[l.offsets[1]..], &data[l.offsets[2]..], 1)
                } else {
                    (&data[l.offsets[1]..], &data[l.offsets[1] + 1..], 2)
                };
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
                    _ => [0, 1, 2],
                },
            },
        }
    }

    /// RGB at frame pixel (x, y), each in 0..255.
    #[inline(always)]
    fn rgb(&self, x: u32, y: u32) -> [f32; 3] {
        match *self {
            Sampler::Packed { data, stride, bpp, rgb } => {
                let i = y as usize * stride + x as usize * bpp;
                [data[i + rgb[0]] as f32, data[i + rgb[1]] as f32, data[i + rgb[2]] as f32]
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
                let px = |row: [f32; 3]| (row[0] * luma + row[1] * cb + row[2] * cr).clamp(0.0, 255.0);
                [px(m[0]), px(m[1]), px(m[2])]
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

/// Compute output pixels `p0..p1` of `crop`.
///
/// # Safety
/// `out` must point to a tensor holding the crop's whole output, and no other thread may write
/// pixels `p0..p1` of this crop.
unsafe fn run_block(
    s: &Sampler,
    crop: &CropMeta,
    _b: &BlockMeta,
    p0: u32,
    p1: u32,
    cfg: &PreprocessConfig,
    out: OutPtr,
) {
    let affine = cfg.affine();
    let order = match cfg.channels {
        ChannelOrder::Rgb => [0, 1, 2],
        ChannelOrder::Bgr => [2, 1, 0],
    };
    let plane = crop.out_pixels() as usize;
    let base = crop.out_offset as usize;
    let mut p = p0;
    while p < p1 {
        let oy = p / crop.out_w;
        let row_end = ((oy + 1) * crop.out_w).min(p1);
        let (y0, y1, ay) = linear_taps(oy, crop.h, crop.out_h);
        let (fy0, fy1) = (crop.y + y0, crop.y + y1);
        for q in p..row_end {
            let ox = q - oy * crop.out_w;
            let (x0, x1, ax) = linear_taps(ox, crop.w, crop.out_w);
            let (fx0, fx1) = (crop.x + x0, crop.x + x1);
            let (a, b, c, d) = (s.rgb(fx0, fy0), s.rgb(fx1, fy0), s.rgb(fx0, fy1), s.rgb(fx1, fy1));
            for (k, &ch) in order.iter().enumerate() {
                let top = a[ch] + (b[ch] - a[ch]) * ax;
                let bot = c[ch] + (d[ch] - c[ch]) * ax;
                let v = top + (bot - top) * ay;
                let (sa, sb) = affine[k];
                let idx = match cfg.layout {
                    Layout::Nchw => base + k * plane + q as usize,
                    Layout::Nhwc => base + q as usize * 3 + k,
                };
                // SAFETY: idx < out_offset + 3 * out_pixels, inside the tensor (caller's contract).
                unsafe { *out.0.add(idx) = v * sa + sb };
            }
        }
        p = row_end;
    }
}
