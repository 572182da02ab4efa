//! Reading a frame's pixels as RGB: per pixel, and per row span with its chroma computed once.

use crate::preprocess::jpeg;
use octopipe_core::frame::{ChromaSite, Colorimetry, Frame, PixelFormat};

/// A frame's chroma planes: Cb at `u`, Cr at `v`, sample (cx, cy) at `cy * stride + cx * step`.
#[derive(Clone, Copy)]
pub(super) struct ChromaPlanes<'a> {
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
pub(super) enum Sampler<'a> {
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
    pub(super) fn new(frame: &'a Frame) -> Self {
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
    pub(super) fn rgb(&self, x: u32, y: u32) -> [f32; 3] {
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

/// The chroma of one source row span, computed once for the span by [`Sampler::row_rgb`]: Cb and
/// Cr interleaved per chroma column.
#[derive(Default)]
pub(super) struct ChromaRow {
    /// Float path: the two chroma rows blended vertically, minus 128.
    blended: Vec<f32>,
    /// JPEG path: libjpeg's vertical column sums (`3 * nearer row + further row`).
    sums: Vec<i32>,
}

impl Sampler<'_> {
    /// RGB of frame pixels `x..x + n` of row `y`, written to `out` as `n * 3` interleaved values.
    pub(super) fn row_rgb(
        &self,
        x: u32,
        y: u32,
        n: u32,
        out: &mut Vec<f32>,
        chroma: &mut ChromaRow,
    ) {
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
