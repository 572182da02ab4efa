//! What the annotation renderer draws on ([`Canvas`]): an RGB image (`octopipe run --annotate`),
//! or a frame's own planes in place, in the frame's format ([`FrameCanvas`]: the GStreamer
//! overlay element), the colours converted to the frame's colorimetry.

use image::{Rgb, RgbImage};

use octopipe_core::frame::{Colorimetry, FrameLayout, PixelFormat};

use super::yuv::{clip, YuvRect};
use crate::errors::ObserveError;

/// A picture the renderer draws on: filled rectangles of an RGB colour.
pub trait Canvas {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);

    /// Fill the rectangle at (`x`, `y`) of `w`x`h` with `color` (RGB), clipped to the picture.
    fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]);
}

impl Canvas for RgbImage {
    fn size(&self) -> (u32, u32) {
        self.dimensions()
    }

    fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
        let [x0, y0, x1, y1] = clip(x, y, w, h, self.dimensions());
        for py in y0..y1 {
            for px in x0..x1 {
                self.put_pixel(px as u32, py as u32, Rgb(color));
            }
        }
    }
}

/// A frame's planes, drawn on in place: I420 and NV12 (the colour as Y, U and V by the frame's
/// colorimetry; chroma at its 2x2 subsampling), RGB, BGR, RGBA and BGRA (RGBx, BGRx: the same
/// bytes; a drawn pixel's alpha is made opaque).
pub struct FrameCanvas<'a> {
    format: PixelFormat,
    size: (u32, u32),
    colorimetry: Colorimetry,
    planes: [&'a mut [u8]; 3],
    strides: [usize; 3],
}

impl<'a> FrameCanvas<'a> {
    /// The frame of `format` at `width`x`height` whose planes are `planes` (as many as the
    /// format has; the others empty), each row `strides[i]` bytes apart. Refused when the
    /// format is not one drawn on or a plane is too small for its rows.
    pub fn new(
        format: PixelFormat,
        (width, height): (u32, u32),
        colorimetry: Colorimetry,
        planes: [&'a mut [u8]; 3],
        strides: [usize; 3],
    ) -> Result<Self, ObserveError> {
        let refuse = |reason: String| ObserveError::Canvas { format, reason };
        let (w, h) = (width as usize, height as usize);
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        let rows: &[(usize, usize)] = match format {
            PixelFormat::I420 => &[(w, h), (cw, ch), (cw, ch)],
            PixelFormat::Nv12 => &[(w, h), (2 * cw, ch)],
            PixelFormat::Rgb | PixelFormat::Bgr => &[(3 * w, h)],
            PixelFormat::Rgba | PixelFormat::Bgra => &[(4 * w, h)],
            PixelFormat::Gray8 | PixelFormat::Gray16 => {
                return Err(refuse("only colour formats are drawn on".into()))
            }
        };
        for (i, &(row, n)) in rows.iter().enumerate() {
            let need = match n {
                0 => 0,
                n => strides[i] * (n - 1) + row,
            };
            if strides[i] < row || planes[i].len() < need {
                return Err(refuse(format!(
                    "plane {i} holds {} bytes with rows {} apart; {n} rows of {row} bytes need {need}",
                    planes[i].len(),
                    strides[i]
                )));
            }
        }
        Ok(FrameCanvas {
            format,
            size: (width, height),
            colorimetry,
            planes,
            strides,
        })
    }

    /// The frame held in `data` with `layout` (octopipe's own frames: planes at offsets of one
    /// buffer).
    pub fn packed(
        layout: &FrameLayout,
        colorimetry: Colorimetry,
        data: &'a mut [u8],
    ) -> Result<Self, ObserveError> {
        let n = layout.format.planes();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| layout.offsets[i]);
        let mut planes: [&'a mut [u8]; 3] = [&mut [], &mut [], &mut []];
        let mut rest = data;
        let mut at = 0;
        for (k, &i) in order.iter().enumerate() {
            let skip = layout.offsets[i].saturating_sub(at).min(rest.len());
            rest = &mut std::mem::take(&mut rest)[skip..];
            at += skip;
            let len = match order.get(k + 1) {
                Some(&next) => (layout.offsets[next] - at).min(rest.len()),
                None => rest.len(),
            };
            let (plane, tail) = std::mem::take(&mut rest).split_at_mut(len);
            planes[i] = plane;
            rest = tail;
            at += len;
        }
        Self::new(
            layout.format,
            (layout.width, layout.height),
            colorimetry,
            planes,
            layout.strides,
        )
    }

    /// Fill `rect` on an I420 or NV12 frame: its luma pixels, and its chroma samples
    /// ([`YuvRect::chroma`]).
    fn fill_yuv(&mut self, rect: &YuvRect) {
        let s = self.strides;
        let [yy, u, v] = rect.yuv;
        let [x0, y0, x1, y1] = [rect.x0, rect.y0, rect.x1, rect.y1].map(|v| v as usize);
        for row in y0..y1 {
            self.planes[0][row * s[0] + x0..row * s[0] + x1].fill(yy);
        }
        let [cx0, cy0, cx1, cy1] = rect.chroma().map(|v| v as usize);
        for row in cy0..cy1 {
            if self.format == PixelFormat::I420 {
                self.planes[1][row * s[1] + cx0..row * s[1] + cx1].fill(u);
                self.planes[2][row * s[2] + cx0..row * s[2] + cx1].fill(v);
            } else {
                let line = &mut self.planes[1][row * s[1] + 2 * cx0..row * s[1] + 2 * cx1];
                for uv in line.chunks_exact_mut(2) {
                    uv.copy_from_slice(&[u, v]);
                }
            }
        }
    }
}

impl Canvas for FrameCanvas<'_> {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
        if self.format.is_yuv() {
            if let Some(rect) = YuvRect::clipped(x, y, w, h, self.size, self.colorimetry, color) {
                self.fill_yuv(&rect);
            }
            return;
        }
        let [x0, y0, x1, y1] = clip(x, y, w, h, self.size);
        if x1 == 0 {
            return;
        }
        let s = self.strides;
        let packed = |bytes: usize, order: [usize; 3]| {
            let mut px = [255u8; 4];
            for (c, &o) in order.iter().enumerate() {
                px[o] = color[c];
            }
            (bytes, px)
        };
        let (bytes, px) = match self.format {
            PixelFormat::Rgb => packed(3, [0, 1, 2]),
            PixelFormat::Bgr => packed(3, [2, 1, 0]),
            PixelFormat::Rgba => packed(4, [0, 1, 2]),
            PixelFormat::Bgra => packed(4, [2, 1, 0]),
            // YUV: filled above; grey: refused by `new`.
            PixelFormat::I420 | PixelFormat::Nv12 | PixelFormat::Gray8 | PixelFormat::Gray16 => {
                return
            }
        };
        for row in y0..y1 {
            let line = &mut self.planes[0][row * s[0] + x0 * bytes..row * s[0] + x1 * bytes];
            for p in line.chunks_exact_mut(bytes) {
                p.copy_from_slice(&px[..bytes]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use octopipe_core::frame::{Frame, PooledBuf};
    use octopipe_stages::preprocess::cpu::frame_to_rgb;

    /// A box drawn on a grey frame of each format, read back by the CPU backend's conversion,
    /// has the colour drawn on its edge and the grey inside and out.
    #[test]
    fn a_box_drawn_in_place_reads_back_in_its_colour_in_every_format() {
        let (w, h) = (64u32, 48u32);
        let red = [230u8, 20, 40];
        for format in [
            PixelFormat::I420,
            PixelFormat::Nv12,
            PixelFormat::Rgb,
            PixelFormat::Bgr,
            PixelFormat::Rgba,
            PixelFormat::Bgra,
        ] {
            for colorimetry in [Colorimetry::BT601, Colorimetry::JPEG, Colorimetry::BT709] {
                let layout = FrameLayout::packed(format, w, h);
                let mut data = vec![128u8; layout.size()];
                let mut canvas = FrameCanvas::packed(&layout, colorimetry, &mut data).unwrap();
                // 4 pixels wide at even places: the chroma samples under a line's middle are
                // all the line's (a thinner line's edge pixels mix in their neighbours').
                crate::annotate::draw_box(&mut canvas, [10, 8, 30, 20], red, 4);
                let frame = Frame::new(0, 0, "", layout, colorimetry, PooledBuf::unpooled(data));
                let rgb = frame_to_rgb(&frame).unwrap();
                let at = |x: u32, y: u32| {
                    let i = 3 * (y * w + x) as usize;
                    [rgb[i], rgb[i + 1], rgb[i + 2]]
                };
                // Chroma is subsampled (and upsampled with interpolation): YUV edges come back
                // less exactly than RGB's.
                let tolerance = if format.is_yuv() { 48 } else { 0 };
                let near = |a: [u8; 3], b: [u8; 3]| {
                    a.iter().zip(b).all(|(a, b)| a.abs_diff(b) <= tolerance)
                };
                let grey = at(0, 0);
                for (x, y) in [(20, 9), (20, 10), (12, 18), (37, 18), (25, 25)] {
                    assert!(
                        near(at(x, y), red),
                        "{format} {colorimetry:?} ({x}, {y}): {:?}",
                        at(x, y)
                    );
                }
                for (x, y) in [(25, 18), (50, 40), (5, 5)] {
                    assert!(near(at(x, y), grey), "{format} ({x}, {y}): {:?}", at(x, y));
                }
            }
        }
    }

    #[test]
    fn planes_too_small_for_their_rows_are_refused() {
        let mut y = vec![0u8; 10];
        let e = FrameCanvas::new(
            PixelFormat::Rgb,
            (8, 8),
            Colorimetry::JPEG,
            [&mut y, &mut [], &mut []],
            [24, 0, 0],
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("plane 0 holds 10 bytes"), "{e}");
    }
}
