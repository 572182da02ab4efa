//! Where a crop lands inside its output when letterboxed (aspect kept, padded).

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
