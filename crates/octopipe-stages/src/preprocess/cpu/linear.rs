//! The bilinear path: each source row a crop needs converted and resampled once, then one
//! vertical blend, normalization and store per output pixel.

use super::super::config::{ChannelOrder, PreprocessConfig};
use super::out::OutPtr;
use super::sampler::{ChromaRow, Sampler};
use octopipe_core::crops::CropMeta;
use octopipe_core::tensor::Layout;

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

/// Fill `dst` with crop row `sy` resampled horizontally: planar, `out_w` values per channel.
fn resample_row(
    s: &Sampler,
    crop: &CropMeta,
    sy: u32,
    xtaps: &[(u32, u32, f32)],
    line: &mut Vec<f32>,
    chroma: &mut ChromaRow,
    dst: &mut Vec<f32>,
) {
    let ow = xtaps.len();
    dst.resize(3 * ow, 0.0);
    let fy = crop.y + sy;
    let (r, gb) = dst.split_at_mut(ow);
    let (g, b) = gb.split_at_mut(ow);
    if crop.w <= 2 * crop.out_w {
        // Convert the crop's row once, then interpolate from it.
        s.row_rgb(crop.x, fy, crop.w, line, chroma);
        for (i, &(x0, x1, ax)) in xtaps.iter().enumerate() {
            let (p, q) = (&line[x0 as usize * 3..][..3], &line[x1 as usize * 3..][..3]);
            r[i] = p[0] + (q[0] - p[0]) * ax;
            g[i] = p[1] + (q[1] - p[1]) * ax;
            b[i] = p[2] + (q[2] - p[2]) * ax;
        }
    } else {
        // Far fewer taps than pixels: convert only the taps.
        for (i, &(x0, x1, ax)) in xtaps.iter().enumerate() {
            let (p, q) = (s.rgb(crop.x + x0, fy), s.rgb(crop.x + x1, fy));
            r[i] = p[0] + (q[0] - p[0]) * ax;
            g[i] = p[1] + (q[1] - p[1]) * ax;
            b[i] = p[2] + (q[2] - p[2]) * ax;
        }
    }
}

/// Compute output pixels `p0..p1` of `crop`: each needed source row is converted and resampled
/// horizontally once, then every output pixel is one vertical blend, normalization and store.
///
/// # Safety
/// `out` must point to a tensor holding the crop's whole output, and no other thread may write
/// pixels `p0..p1` of this crop.
pub(super) unsafe fn run_pixels(
    s: &Sampler,
    crop: &CropMeta,
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
    let ow = crop.out_w as usize;
    SCRATCH.with_borrow_mut(|sc| {
        let Scratch {
            xtaps,
            line,
            chroma,
            rows,
        } = sc;
        xtaps.clear();
        xtaps.extend((0..crop.out_w).map(|ox| linear_taps(ox, crop.w, crop.out_w)));
        rows[0].0 = u32::MAX;
        rows[1].0 = u32::MAX;
        let mut p = p0;
        while p < p1 {
            let oy = p / crop.out_w;
            let row_end = ((oy + 1) * crop.out_w).min(p1);
            let (y0, y1, ay) = linear_taps(oy, crop.h, crop.out_h);
            // Source rows only move down: keep the two most recent.
            for y in [y0, y1] {
                if rows[0].0 != y && rows[1].0 != y {
                    let slot = usize::from(rows[0].0 == y0 || rows[0].0 == y1);
                    rows[slot].0 = y;
                    resample_row(s, crop, y, xtaps, line, chroma, &mut rows[slot].1);
                }
            }
            let r0 = if rows[0].0 == y0 {
                &rows[0].1
            } else {
                &rows[1].1
            };
            let r1 = if rows[0].0 == y1 {
                &rows[0].1
            } else {
                &rows[1].1
            };
            let row_base = (oy * crop.out_w) as usize;
            let (xa, xb) = ((p as usize) - row_base, (row_end as usize) - row_base);
            for (k, &c) in order.iter().enumerate() {
                let (sa, sb) = affine[k];
                let (a, b) = (&r0[c * ow + xa..c * ow + xb], &r1[c * ow + xa..c * ow + xb]);
                match cfg.layout {
                    Layout::Nchw => {
                        // SAFETY: the row segment lies inside this crop's channel plane (caller's contract).
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(
                                out.0.add(base + k * plane + row_base + xa),
                                xb - xa,
                            )
                        };
                        for ((d, a), b) in dst.iter_mut().zip(a).zip(b) {
                            *d = (a + (b - a) * ay) * sa + sb;
                        }
                    }
                    Layout::Nhwc => {
                        for (i, (a, b)) in a.iter().zip(b).enumerate() {
                            // SAFETY: inside this crop's output (caller's contract).
                            unsafe {
                                *out.0.add(base + (row_base + xa + i) * 3 + k) =
                                    (a + (b - a) * ay) * sa + sb
                            };
                        }
                    }
                }
            }
            p = row_end;
        }
    });
}
