//! The general per-pixel path of the CPU backend: letterbox and/or [`Interpolation::Area`], and
//! the `INTER_AREA` taps it shares with the kernels.

use super::linear::linear_taps;
use super::out::OutPtr;
use super::sampler::{ChromaRow, Sampler};
use crate::preprocess::{letterbox_rect, ChannelOrder, Interpolation, Layout, PreprocessConfig};
use octopipe_core::crops::CropMeta;

/// The source taps of one output coordinate along one axis for [`Interpolation::Area`]:
/// indices `min(i0 + k, len - 1)` for `k < n`, weight `w_first` for the first tap when `lead`,
/// `w_last` for the last when `trail`, `w_mid` otherwise. The kernels (`cuda/resample.cu`,
/// `area_taps`) compute the same values with the same f64 operations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct AreaTaps {
    /// First source index (relative to the crop).
    pub i0: u32,
    /// Number of taps.
    pub n: u32,
    /// Weight of the first tap when `lead`.
    pub w_first: f32,
    /// Weight of the inner taps.
    pub w_mid: f32,
    /// Weight of the last tap when `trail`.
    pub w_last: f32,
    /// The first tap is a partial (or linear) one.
    pub lead: bool,
    /// The last tap is a partial (or linear) one.
    pub trail: bool,
}

impl AreaTaps {
    /// Weight of tap `k`.
    #[inline(always)]
    pub fn weight(&self, k: u32) -> f32 {
        if k == 0 && self.lead {
            self.w_first
        } else if k + 1 == self.n && self.trail {
            self.w_last
        } else {
            self.w_mid
        }
    }
}

/// OpenCV `INTER_AREA` taps for output coordinate `o` of a crop side of `len` pixels resized to
/// `out_len`. `boxed` (the crop is downscaled on both axes, OpenCV's `scale_x >= 1 && scale_y >= 1`):
/// the area table of OpenCV's `computeResizeAreaTab` (partial edge pixels weighted by the part of
/// them the output pixel covers); otherwise OpenCV's `INTER_AREA` fallback, two linear taps at
/// `floor(o * scale)` with weight `frac((o + 1) - (sx + 1) / scale)`.
pub fn area_taps(o: u32, len: u32, out_len: u32, boxed: bool) -> AreaTaps {
    // As OpenCV: inv_scale = dsize / ssize, scale = 1 / inv_scale, in f64.
    let inv = out_len as f64 / len as f64;
    let scale = 1.0 / inv;
    let last = len as i64 - 1;
    if boxed {
        let fsx1 = o as f64 * scale;
        let fsx2 = fsx1 + scale;
        let cell = scale.min(len as f64 - fsx1);
        let sx2 = (fsx2.floor() as i64).min(last);
        let sx1 = (fsx1.ceil() as i64).min(sx2);
        let lead = sx1 as f64 - fsx1 > 1e-3;
        let trail = fsx2 - sx2 as f64 > 1e-3;
        let i0 = if lead { sx1 - 1 } else { sx1 };
        let end = if trail { sx2 } else { sx2 - 1 };
        AreaTaps {
            i0: i0 as u32,
            n: (end - i0 + 1).max(1) as u32,
            w_first: ((sx1 as f64 - fsx1) / cell) as f32,
            w_mid: (1.0 / cell) as f32,
            w_last: ((fsx2 - sx2 as f64).min(1.0).min(cell) / cell) as f32,
            lead,
            trail,
        }
    } else {
        let mut sx = (o as f64 * scale).floor() as i64;
        let mut fx = ((o + 1) as f64 - (sx + 1) as f64 * inv) as f32;
        fx = if fx <= 0.0 { 0.0 } else { fx - fx.floor() };
        if sx >= last {
            sx = last;
            fx = 0.0;
        }
        AreaTaps {
            i0: sx as u32,
            n: 2,
            w_first: 1.0 - fx,
            w_mid: 0.0,
            w_last: fx,
            lead: true,
            trail: true,
        }
    }
}

/// Per-thread scratch of the general path: per-output-column taps and converted source rows.
#[derive(Default)]
struct GeneralScratch {
    xlin: Vec<(u32, u32, f32)>,
    xarea: Vec<AreaTaps>,
    /// Slot in `rows` of each vertical tap of the current output row.
    slots: Vec<usize>,
    chroma: ChromaRow,
    /// (source row or u32::MAX when free, interleaved RGB of the crop's row).
    rows: Vec<(u32, Vec<f32>)>,
}

thread_local! {
    static GENERAL: std::cell::RefCell<GeneralScratch> = std::cell::RefCell::default();
}

/// Index in `rows` of crop row `sy`, converting it into a free slot if absent.
fn cached_row(
    s: &Sampler,
    crop: &CropMeta,
    sy: u32,
    rows: &mut Vec<(u32, Vec<f32>)>,
    chroma: &mut ChromaRow,
) -> usize {
    if let Some(i) = rows.iter().position(|r| r.0 == sy) {
        return i;
    }
    let i = match rows.iter().position(|r| r.0 == u32::MAX) {
        Some(i) => i,
        None => {
            rows.push((u32::MAX, Vec::new()));
            rows.len() - 1
        }
    };
    rows[i].0 = sy;
    s.row_rgb(crop.x, crop.y + sy, crop.w, &mut rows[i].1, chroma);
    i
}

/// Output pixels `p0..p1` of `crop` for the settings the plain path does not cover: letterbox
/// and/or [`Interpolation::Area`]. Source rows are converted once per task (a small cache keyed by
/// row), each output pixel is then its taps' weighted sum in a fixed order (the kernels use the
/// same order, so the two backends agree bit for bit).
///
/// # Safety
/// As [`run_pixels`](super::linear::run_pixels).
// Long: the general per-pixel path (letterbox, area, every format) is one loop whose state stays
// in locals; helpers would have to pass it by the dozen.
pub(super) unsafe fn run_pixels_general(
    s: &Sampler,
    crop: &CropMeta,
    p0: u32,
    p1: u32,
    cfg: &PreprocessConfig,
    out: OutPtr,
) {
    let affine = cfg.affine();
    let order = match cfg.channels {
        ChannelOrder::Rgb => [0usize, 1, 2],
        ChannelOrder::Bgr => [2, 1, 0],
    };
    let plane = crop.out_pixels() as usize;
    let base = crop.out_offset as usize;
    let (offx, offy, nw, nh) = match cfg.letterbox {
        Some(_) => letterbox_rect(crop.w, crop.h, crop.out_w, crop.out_h),
        None => (0, 0, crop.out_w, crop.out_h),
    };
    let pad = cfg.letterbox.unwrap_or(0.0);
    let area = cfg.interpolation == Interpolation::Area;
    let boxed = crop.w >= nw && crop.h >= nh;
    let write = |p: usize, rgb: [f32; 3]| {
        for (k, &c) in order.iter().enumerate() {
            let (sa, sb) = affine[k];
            let idx = match cfg.layout {
                Layout::Nchw => base + k * plane + p,
                Layout::Nhwc => base + p * 3 + k,
            };
            // SAFETY: inside this crop's output (caller's contract).
            unsafe { *out.0.add(idx) = rgb[c] * sa + sb };
        }
    };
    GENERAL.with_borrow_mut(|sc| {
        let GeneralScratch {
            xlin,
            xarea,
            slots,
            chroma,
            rows,
        } = sc;
        xlin.clear();
        xarea.clear();
        if area {
            xarea.extend((0..nw).map(|ix| area_taps(ix, crop.w, nw, boxed)));
        } else {
            xlin.extend((0..nw).map(|ix| linear_taps(ix, crop.w, nw)));
        }
        rows.iter_mut().for_each(|r| r.0 = u32::MAX);
        let mut p = p0;
        while p < p1 {
            let oy = p / crop.out_w;
            let row_base = oy * crop.out_w;
            let row_end = (row_base + crop.out_w).min(p1);
            let (xa, xb) = (p - row_base, row_end - row_base);
            if oy < offy || oy >= offy + nh {
                for ox in xa..xb {
                    write((row_base + ox) as usize, [pad; 3]);
                }
                p = row_end;
                continue;
            }
            let iy = oy - offy;
            let ytaps = if area {
                area_taps(iy, crop.h, nh, boxed)
            } else {
                let (y0, y1, ay) = linear_taps(iy, crop.h, nh);
                // Bilinear: two rows y0, y1 (the weight is used as a lerp factor below).
                AreaTaps {
                    i0: y0,
                    n: if y1 == y0 { 1 } else { 2 },
                    w_first: ay,
                    ..AreaTaps::default()
                }
            };
            // Free the slots of rows above this output row's first tap (rows only move down).
            for r in rows.iter_mut() {
                if r.0 != u32::MAX && r.0 < ytaps.i0 {
                    r.0 = u32::MAX;
                }
            }
            let last_row = crop.h - 1;
            slots.clear();
            if area {
                for ky in 0..ytaps.n {
                    let sy = (ytaps.i0 + ky).min(last_row);
                    slots.push(cached_row(s, crop, sy, rows, chroma));
                }
            } else {
                let y0 = ytaps.i0;
                let y1 = if ytaps.n == 2 {
                    (y0 + 1).min(last_row)
                } else {
                    y0
                };
                slots.push(cached_row(s, crop, y0, rows, chroma));
                slots.push(cached_row(s, crop, y1, rows, chroma));
            }
            for ox in xa..xb {
                let p = (row_base + ox) as usize;
                if ox < offx || ox >= offx + nw {
                    write(p, [pad; 3]);
                    continue;
                }
                let ix = (ox - offx) as usize;
                let mut rgb = [0f32; 3];
                if area {
                    let xt = xarea[ix];
                    for ky in 0..ytaps.n {
                        let row = &rows[slots[ky as usize]].1;
                        let wy = ytaps.weight(ky);
                        let mut h = [0f32; 3];
                        for kx in 0..xt.n {
                            let sx = (xt.i0 + kx).min(crop.w - 1) as usize;
                            let wx = xt.weight(kx);
                            for (hc, v) in h.iter_mut().zip(&row[sx * 3..sx * 3 + 3]) {
                                *hc += v * wx;
                            }
                        }
                        for (v, hc) in rgb.iter_mut().zip(h) {
                            *v = if ky == 0 { wy * hc } else { *v + wy * hc };
                        }
                    }
                } else {
                    let (x0, x1, ax) = xlin[ix];
                    let ay = ytaps.w_first;
                    let (a, b) = (&rows[slots[0]].1, &rows[slots[1]].1);
                    for (c, v) in rgb.iter_mut().enumerate() {
                        let (x0, x1) = (x0 as usize * 3 + c, x1 as usize * 3 + c);
                        let top = a[x0] + (a[x1] - a[x0]) * ax;
                        let bot = b[x0] + (b[x1] - b[x0]) * ax;
                        *v = top + (bot - top) * ay;
                    }
                }
                write(p, rgb);
            }
            p = row_end;
        }
    });
}
