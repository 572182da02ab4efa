//! libjpeg-turbo's own decoding arithmetic, at single pixels: what turns a JPEG frame's YCbCr 4:2:0
//! planes into the RGB bytes `cv2.imread` (and Pillow) give, so that octopipe's crops of JPEG
//! frames start from the very pixels the shared classifier was trained on.
//!
//! GStreamer's `jpegdec` hands out the decoded planes (I420) and leaves chroma upsampling and colour
//! conversion to the consumer. libjpeg-turbo's defaults do them in integers:
//!
//! - `h2v2_fancy_upsample` (jdsample.c): each chroma row makes two full-resolution rows from
//!   `colsum = 3 * nearer row + further row` (the row above for the upper output row, below for the
//!   lower one), then each column sum makes two pixels,
//!   `(3 * colsum[c] + colsum[c - 1] + 8) >> 4` and `(3 * colsum[c] + colsum[c + 1] + 7) >> 4`.
//!   At the edges libjpeg repeats the first and last sample (its first and last column special
//!   cases are exactly that; the context rows above the first and below the last chroma row are
//!   copies of them). Planes of 2 samples or fewer a row (frames up to 4 pixels wide) are
//!   upsampled by plain replication (`h2v2_upsample`), as libjpeg does there.
//! - `ycc_rgb_convert` with the tables of `build_ycc_rgb_table` (jdcolor.c): 16-bit fixed point,
//!   `R = Y + ((FIX(1.40200) * Cr' + ONE_HALF) >> 16)`, `B = Y + ((FIX(1.77200) * Cb' + ONE_HALF)
//!   >> 16)`, `G = Y + ((-FIX(0.34414) * Cb' + ONE_HALF - FIX(0.71414) * Cr') >> 16)` with
//!   `Cb' = Cb - 128`, `Cr' = Cr - 128`, arithmetic shifts, each clamped to 0..255.
//!
//! So the chroma at luma pixel `x` (likewise row `y`) comes from sample `x >> 1` (weight 3) and
//! its neighbour on `x`'s side, `(x >> 1) - 1` for even `x` and `(x >> 1) + 1` for odd `x`
//! (weight 1), clamped to the plane. libjpeg-turbo's SIMD code is bit-exact with this C code.
//! octopipe-cuda's `common.cuh` (`jpeg_*`) computes the same integers on the GPU.
//!
//! Only 4:2:0 JPEG arrives with its own chroma: `jpegdec` (GStreamer 1.22) gives I420 for 4:2:2
//! and 4:4:4 JPEG too, having subsampled their chroma itself, so libjpeg's `h2v1` upsampling has
//! nothing to apply to; such frames go through the same 4:2:0 path and come close to libjpeg's RGB,
//! not equal to it.

/// libjpeg's `SCALEBITS`.
const SCALEBITS: u32 = 16;
/// libjpeg's `ONE_HALF`.
const ONE_HALF: i32 = 1 << (SCALEBITS - 1);
/// `FIX(1.40200)`: Cr to R.
const CR_R: i32 = 91_881;
/// `FIX(1.77200)`: Cb to B.
const CB_B: i32 = 116_130;
/// `FIX(0.71414)`: Cr to G (subtracted).
const CR_G: i32 = 46_802;
/// `FIX(0.34414)`: Cb to G (subtracted).
const CB_G: i32 = 22_554;

/// Whether libjpeg upsamples a chroma plane `cw` samples wide with its triangle filter
/// (`downsampled_width > 2`) rather than by replication.
#[inline(always)]
pub(crate) fn fancy(cw: usize) -> bool {
    cw > 2
}

/// The chroma samples luma column (or row) `i` takes: `(nearer, further)`, each weighted 3 and 1
/// along this axis, clamped to a plane of `len` samples; `(nearer, nearer)` when not `fancy`.
#[inline(always)]
pub(crate) fn taps(i: u32, len: usize, fancy: bool) -> (usize, usize) {
    let near = (i >> 1) as usize;
    let far = if !fancy {
        near
    } else if i & 1 == 0 {
        near.saturating_sub(1)
    } else {
        (near + 1).min(len - 1)
    };
    (near, far)
}

/// One axis of the triangle filter on sums of the other: `3 * near + far`.
#[inline(always)]
pub(crate) fn colsum(near: u8, far: u8) -> i32 {
    3 * near as i32 + far as i32
}

/// The upsampled chroma byte of luma column `x` from the column sums of its nearer and further
/// chroma columns, with libjpeg's alternating rounding bias (8 for even columns, 7 for odd).
#[inline(always)]
pub(crate) fn upsample(x: u32, near: i32, far: i32) -> i32 {
    (3 * near + far + 8 - (x & 1) as i32) >> 4
}

/// libjpeg's `ycc_rgb_convert` for one pixel: luma and upsampled chroma bytes to R, G, B.
#[inline(always)]
pub(crate) fn ycc_to_rgb(y: i32, cb: i32, cr: i32) -> [u8; 3] {
    let (cb, cr) = (cb - 128, cr - 128);
    let r = y + ((CR_R * cr + ONE_HALF) >> SCALEBITS);
    let g = y + ((-CB_G * cb + ONE_HALF - CR_G * cr) >> SCALEBITS);
    let b = y + ((CB_B * cb + ONE_HALF) >> SCALEBITS);
    [r, g, b].map(|v| v.clamp(0, 255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libjpeg's `FIX(x)`: `(x * 2^16 + 0.5)` truncated.
    fn fix(x: f64) -> i32 {
        (x * (1u32 << SCALEBITS) as f64 + 0.5) as i32
    }

    #[test]
    fn constants_are_libjpegs_fix_values() {
        assert_eq!(CR_R, fix(1.40200));
        assert_eq!(CB_B, fix(1.77200));
        assert_eq!(CR_G, fix(0.71414));
        assert_eq!(CB_G, fix(0.34414));
    }

    /// The table form of jdcolor.c, written out: `Cr_r_tab[i] = (FIX(1.402) * x + ONE_HALF) >> 16`,
    /// and so on, with `range_limit` clamping.
    #[test]
    fn conversion_equals_the_table_form() {
        let tab = |k: f64, x: i32| (fix(k) * x + ONE_HALF) >> SCALEBITS;
        for y in (0..256).step_by(5) {
            for cb in 0..256 {
                for cr in (0..256).step_by(3) {
                    let (xb, xr) = (cb - 128, cr - 128);
                    let g_sum = (-fix(0.34414) * xb + ONE_HALF) + (-fix(0.71414) * xr);
                    let want = [
                        y + tab(1.40200, xr),
                        y + (g_sum >> 16),
                        y + tab(1.77200, xb),
                    ]
                    .map(|v| v.clamp(0, 255) as u8);
                    assert_eq!(ycc_to_rgb(y, cb, cr), want, "Y {y} Cb {cb} Cr {cr}");
                }
            }
        }
    }

    /// `h2v2_fancy_upsample`'s column loop written out as in jdsample.c (first column, general
    /// case, last column) equals the per-pixel form, for even and odd widths.
    #[test]
    fn per_pixel_form_equals_libjpegs_row_loop() {
        for w in [5u32, 6, 7, 8, 33, 34] {
            let cw = w.div_ceil(2) as usize;
            let sums: Vec<i32> = (0..cw).map(|c| ((c * 397 + 11) % 1021) as i32).collect();
            // jdsample.c, on a row of 2 * cw output pixels (one past an odd width).
            let mut out = Vec::new();
            let mut this = sums[0];
            let mut next = sums[1];
            out.push((this * 4 + 8) >> 4);
            out.push((this * 3 + next + 7) >> 4);
            let mut last = this;
            this = next;
            for &s in &sums[2..] {
                next = s;
                out.push((this * 3 + last + 8) >> 4);
                out.push((this * 3 + next + 7) >> 4);
                last = this;
                this = next;
            }
            out.push((this * 3 + last + 8) >> 4);
            out.push((this * 4 + 7) >> 4);
            for x in 0..w {
                let (n, f) = taps(x, cw, true);
                assert_eq!(
                    upsample(x, sums[n], sums[f]),
                    out[x as usize],
                    "width {w} column {x}"
                );
            }
        }
    }

    #[test]
    fn narrow_planes_are_replicated() {
        assert!(!fancy(2) && fancy(3));
        for x in 0..4 {
            assert_eq!(taps(x, 2, false), ((x >> 1) as usize, (x >> 1) as usize));
            // 3 * (4c) + 4c + bias = 16c + bias: the sample itself.
            assert_eq!(upsample(x, 4 * 200, 4 * 200), 200);
        }
    }
}
