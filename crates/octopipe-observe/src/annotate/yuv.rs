//! A filled rectangle as a YUV frame takes it ([`YuvRect`]): clipped to the frame, its colour
//! converted to the frame's Y, U and V by its colorimetry ([`yuv_of`]), its chroma samples at
//! 2x2 subsampling ([`YuvRect::chroma`]). [`FrameCanvas`](super::FrameCanvas) fills I420 and
//! NV12 frames from it; [`RecordingCanvas`](super::RecordingCanvas) keeps a list of them for
//! the GStreamer overlay's CUDA kernel, which fills NV12 in device memory the same way.

use octopipe_core::frame::{Colorimetry, Matrix, Range};

/// `[x, y, w, h]` clipped to `width`x`height`, as pixel ranges (empty when nothing is left).
pub(crate) fn clip(x: i64, y: i64, w: i64, h: i64, (width, height): (u32, u32)) -> [usize; 4] {
    let (x0, y0) = (x.max(0), y.max(0));
    let (x1, y1) = ((x + w).min(width as i64), (y + h).min(height as i64));
    if x1 <= x0 || y1 <= y0 {
        return [0; 4];
    }
    [x0 as usize, y0 as usize, x1 as usize, y1 as usize]
}

/// `color` (RGB) as the (Y, U, V) bytes of a frame of `colorimetry` (its matrix and range).
pub fn yuv_of(colorimetry: Colorimetry, [r, g, b]: [u8; 3]) -> [u8; 3] {
    let (kr, kb) = match colorimetry.matrix {
        Matrix::Bt601 => (0.299f32, 0.114f32),
        Matrix::Bt709 => (0.2126, 0.0722),
    };
    let (r, g, b) = (r as f32, g as f32, b as f32);
    let y = kr * r + (1.0 - kr - kb) * g + kb * b;
    let (u, v) = ((b - y) / (2.0 * (1.0 - kb)), (r - y) / (2.0 * (1.0 - kr)));
    let (y, u, v) = match colorimetry.range {
        Range::Full => (y, u, v),
        Range::Limited => (
            16.0 + y * 219.0 / 255.0,
            u * 224.0 / 255.0,
            v * 224.0 / 255.0,
        ),
    };
    let byte = |v: f32| v.round().clamp(0.0, 255.0) as u8;
    [byte(y), byte(128.0 + u), byte(128.0 + v)]
}

/// One rectangle filled on a YUV frame: luma pixels `x0..x1` x `y0..y1` (clipped to the frame,
/// never empty) and the colour as the frame's `[Y, U, V]` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YuvRect {
    /// First column.
    pub x0: u32,
    /// First row.
    pub y0: u32,
    /// Past the last column.
    pub x1: u32,
    /// Past the last row.
    pub y1: u32,
    /// The colour as the frame's Y, U and V bytes.
    pub yuv: [u8; 3],
}

impl YuvRect {
    /// The rectangle at (`x`, `y`) of `w`x`h` in `color` (RGB) on a frame of `size` and
    /// `colorimetry`; `None` when nothing of it is on the frame.
    pub fn clipped(
        x: i64,
        y: i64,
        w: i64,
        h: i64,
        size: (u32, u32),
        colorimetry: Colorimetry,
        color: [u8; 3],
    ) -> Option<YuvRect> {
        let [x0, y0, x1, y1] = clip(x, y, w, h, size);
        // Clipped to a u32 size: every bound fits a u32.
        (x1 > 0).then(|| YuvRect {
            x0: x0 as u32,
            y0: y0 as u32,
            x1: x1 as u32,
            y1: y1 as u32,
            yuv: yuv_of(colorimetry, color),
        })
    }

    /// The chroma samples it writes at 2x2 subsampling (I420, NV12), `[cx0, cy0, cx1, cy1]`:
    /// every sample one of its pixels lies on, so a line 1 pixel wide still shows its colour.
    pub fn chroma(&self) -> [u32; 4] {
        [
            self.x0 / 2,
            self.y0 / 2,
            (self.x1 - 1) / 2 + 1,
            (self.y1 - 1) / 2 + 1,
        ]
    }
}
