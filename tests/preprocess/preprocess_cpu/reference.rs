//! The f64 reference the CPU backend is checked against: random frames, libjpeg-turbo's
//! colour conversion, and the crop resized and normalized in double precision.

use octopipe::frame::{ChromaSite, Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf};

/// Deterministic pseudo-random bytes with some smooth structure.
fn pixels(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((i / 7) as u64 * 3 + (s % 64)) as u8
        })
        .collect()
}

/// Byte of chroma plane `plane` (1 Cb, 2 Cr) of a YUV frame at sample (cx, cy), clamped to the plane.
pub(super) fn chroma_byte(frame: &Frame, plane: usize, cx: i64, cy: i64) -> u8 {
    let l = frame.layout;
    let d = frame.data().unwrap();
    let (cw, ch) = (l.width.div_ceil(2) as i64, l.height.div_ceil(2) as i64);
    let (cx, cy) = (cx.clamp(0, cw - 1) as usize, cy.clamp(0, ch - 1) as usize);
    if l.format == PixelFormat::I420 {
        d[l.offsets[plane] + cy * l.strides[plane] + cx]
    } else {
        d[l.offsets[1] + cy * l.strides[1] + 2 * cx + (plane - 1)]
    }
}

/// libjpeg-turbo's decoding of a YUV frame, written as its C code does it for whole rows (the
/// reference for JPEG colorimetry): `h2v2_fancy_upsample` of jdsample.c (context rows above the
/// first and below the last chroma row are copies of them; planes of 2 samples a row or less are
/// replicated by `h2v2_upsample`), then `ycc_rgb_convert` with jdcolor.c's tables. RGB per pixel,
/// row-major.
pub(super) fn libjpeg_rgb(frame: &Frame) -> Vec<[u8; 3]> {
    let l = frame.layout;
    let (w, h) = (l.width as usize, l.height as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    // One plane upsampled to 2cw x 2ch (one column / row past an odd size).
    let upsample = |plane: usize| -> Vec<i32> {
        let c = |cx: usize, cy: usize| chroma_byte(frame, plane, cx as i64, cy as i64) as i32;
        let mut out = Vec::with_capacity(4 * cw * ch);
        for inrow in 0..ch {
            for v in 0..2 {
                if cw <= 2 {
                    for cx in 0..cw {
                        out.extend([c(cx, inrow); 2]);
                    }
                    continue;
                }
                let other = if v == 0 {
                    inrow.saturating_sub(1)
                } else {
                    (inrow + 1).min(ch - 1)
                };
                let colsum = |cx: usize| c(cx, inrow) * 3 + c(cx, other);
                let mut this = colsum(0);
                let mut next = colsum(1);
                out.push((this * 4 + 8) >> 4);
                out.push((this * 3 + next + 7) >> 4);
                let mut last = this;
                this = next;
                for cx in 2..cw {
                    next = colsum(cx);
                    out.push((this * 3 + last + 8) >> 4);
                    out.push((this * 3 + next + 7) >> 4);
                    last = this;
                    this = next;
                }
                out.push((this * 3 + last + 8) >> 4);
                out.push((this * 4 + 7) >> 4);
            }
        }
        out
    };
    let (cb, cr) = (upsample(1), upsample(2));
    let fix = |x: f64| (x * 65536.0 + 0.5) as i32;
    let d = frame.data().unwrap();
    let mut rgb = Vec::with_capacity(w * h);
    for y in 0..h {
        for x in 0..w {
            let luma = d[l.offsets[0] + y * l.strides[0] + x] as i32;
            let (b, r) = (cb[y * 2 * cw + x] - 128, cr[y * 2 * cw + x] - 128);
            let cr_r = (fix(1.40200) * r + 32768) >> 16;
            let cb_b = (fix(1.77200) * b + 32768) >> 16;
            let g = ((-fix(0.34414) * b + 32768) + (-fix(0.71414) * r)) >> 16;
            rgb.push([luma + cr_r, luma + g, luma + cb_b].map(|v| v.clamp(0, 255) as u8));
        }
    }
    rgb
}

/// Plain f64 reference: the frame to RGB, crop, OpenCV INTER_LINEAR, 0..255 values, HWC RGB.
pub(super) fn reference(frame: &Frame, bx: [u32; 4], ow: u32, oh: u32) -> Vec<f64> {
    let l = frame.layout;
    let d = frame.data().unwrap();
    let jpeg =
        (l.format.is_yuv() && frame.colorimetry == Colorimetry::JPEG).then(|| libjpeg_rgb(frame));
    let rgb_at = |x: usize, y: usize| -> [f64; 3] {
        if let Some(jpeg) = &jpeg {
            return jpeg[y * l.width as usize + x].map(f64::from);
        }
        match l.format {
            PixelFormat::Rgb | PixelFormat::Bgr | PixelFormat::Rgba | PixelFormat::Bgra => {
                let bpp = l.format.packed_bytes();
                let i = y * l.strides[0] + x * bpp;
                let p = [d[i] as f64, d[i + 1] as f64, d[i + 2] as f64];
                if matches!(l.format, PixelFormat::Bgr | PixelFormat::Bgra) {
                    [p[2], p[1], p[0]]
                } else {
                    p
                }
            }
            PixelFormat::I420 | PixelFormat::Nv12 => {
                let chroma = |plane: usize, cx: i64, cy: i64| -> f64 {
                    chroma_byte(frame, plane, cx, cy) as f64
                };
                let px = match frame.colorimetry.chroma_site {
                    ChromaSite::Center => x as f64 / 2.0 - 0.25,
                    ChromaSite::Left => x as f64 / 2.0,
                };
                let py = y as f64 / 2.0 - 0.25;
                let (x0, y0) = (px.floor(), py.floor());
                let (ax, ay) = (px - x0, py - y0);
                let bil = |plane| {
                    let (x0, y0) = (x0 as i64, y0 as i64);
                    let top = chroma(plane, x0, y0) * (1.0 - ax) + chroma(plane, x0 + 1, y0) * ax;
                    let bot =
                        chroma(plane, x0, y0 + 1) * (1.0 - ax) + chroma(plane, x0 + 1, y0 + 1) * ax;
                    top * (1.0 - ay) + bot * ay - 128.0
                };
                let (u, v) = (bil(1), bil(2));
                let yv = d[l.offsets[0] + y * l.strides[0] + x] as f64;
                let (kr, kb) = match frame.colorimetry.matrix {
                    octopipe::frame::Matrix::Bt601 => (0.299, 0.114),
                    octopipe::frame::Matrix::Bt709 => (0.2126, 0.0722),
                };
                let (yo, ys, cs) = match frame.colorimetry.range {
                    octopipe::frame::Range::Full => (0.0, 1.0, 1.0),
                    octopipe::frame::Range::Limited => (16.0, 255.0 / 219.0, 255.0 / 224.0),
                };
                let yy = (yv - yo) * ys;
                let (u, v) = (u * cs, v * cs);
                let kg = 1.0 - kr - kb;
                let r = yy + 2.0 * (1.0 - kr) * v;
                let b = yy + 2.0 * (1.0 - kb) * u;
                let g = yy - (2.0 * (1.0 - kb) * kb / kg) * u - (2.0 * (1.0 - kr) * kr / kg) * v;
                [
                    r.clamp(0.0, 255.0),
                    g.clamp(0.0, 255.0),
                    b.clamp(0.0, 255.0),
                ]
            }
            // A 16-bit grey frame: each value onto 0..255 (v / 257), in every channel.
            PixelFormat::Gray16 => {
                let i = y * l.strides[0] + x * 2;
                [u16::from_le_bytes([d[i], d[i + 1]]) as f64 / 257.0; 3]
            }
            // A grey frame gives every channel its value.
            PixelFormat::Gray8 => [d[y * l.strides[0] + x] as f64; 3],
        }
    };
    let taps = |o: u32, len: u32, out: u32| -> (usize, usize, f64) {
        let f = (o as f64 + 0.5) * len as f64 / out as f64 - 0.5;
        let mut i = f.floor();
        let mut a = f - i;
        if i < 0.0 {
            i = 0.0;
            a = 0.0;
        }
        if i >= (len - 1) as f64 {
            i = (len - 1) as f64;
            a = 0.0;
        }
        let i = i as usize;
        (i, (i + 1).min(len as usize - 1), a)
    };
    let mut out = Vec::new();
    for oy in 0..oh {
        let (y0, y1, ay) = taps(oy, bx[3], oh);
        for ox in 0..ow {
            let (x0, x1, ax) = taps(ox, bx[2], ow);
            let p = |x: usize, y: usize| rgb_at(bx[0] as usize + x, bx[1] as usize + y);
            for c in 0..3 {
                let top = p(x0, y0)[c] * (1.0 - ax) + p(x1, y0)[c] * ax;
                let bot = p(x0, y1)[c] * (1.0 - ax) + p(x1, y1)[c] * ax;
                out.push(top * (1.0 - ay) + bot * ay);
            }
        }
    }
    out
}

pub(super) fn frame_of(
    format: PixelFormat,
    w: u32,
    h: u32,
    colorimetry: Colorimetry,
    seed: u64,
) -> Frame {
    let layout = FrameLayout::packed(format, w, h);
    Frame::new(
        0,
        0,
        "random",
        layout,
        colorimetry,
        PooledBuf::unpooled(pixels(layout.size(), seed)),
    )
}
