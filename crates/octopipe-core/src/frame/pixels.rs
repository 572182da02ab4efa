//! Pixel formats, colorimetry and plane geometry: what a frame's bytes mean.

use std::fmt;

/// Pixel layouts the preprocess backends read directly (no conversion pass in GStreamer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// Planar Y, U, V with 2x2-subsampled chroma.
    I420,
    /// Planar Y then interleaved UV with 2x2-subsampled chroma.
    Nv12,
    /// Packed 8-bit R, G, B.
    Rgb,
    /// Packed 8-bit B, G, R.
    Bgr,
    /// Packed 8-bit R, G, B, A.
    Rgba,
    /// Packed 8-bit B, G, R, A (or x).
    Bgra,
    /// One 16-bit band (little-endian; GStreamer's `GRAY16_LE`): 16-bit PNGs, satellite bands,
    /// thermal cameras. Read by `tilestats`, and by the CPU preprocess backend as `v / 257` (onto
    /// 0..255) in every channel; the CUDA backend takes the 8-bit formats.
    Gray16,
    /// One 8-bit band (GStreamer's `GRAY8`): a greyscale camera's frames (thermal, night). The
    /// preprocess backends give each of the model's channels the grey value.
    Gray8,
}

impl PixelFormat {
    /// Whether the format stores luma and chroma (needs a colour matrix to become RGB).
    pub fn is_yuv(self) -> bool {
        matches!(self, PixelFormat::I420 | PixelFormat::Nv12)
    }

    /// Bytes per pixel of a packed format (1 for the luma plane of YUV formats, 2 for GRAY16).
    pub fn packed_bytes(self) -> usize {
        match self {
            PixelFormat::I420 | PixelFormat::Nv12 | PixelFormat::Gray8 => 1,
            PixelFormat::Rgb | PixelFormat::Bgr => 3,
            PixelFormat::Rgba | PixelFormat::Bgra => 4,
            PixelFormat::Gray16 => 2,
        }
    }

    /// Number of planes.
    pub fn planes(self) -> usize {
        match self {
            PixelFormat::I420 => 3,
            PixelFormat::Nv12 => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            PixelFormat::I420 => "I420",
            PixelFormat::Nv12 => "NV12",
            PixelFormat::Rgb => "RGB",
            PixelFormat::Bgr => "BGR",
            PixelFormat::Rgba => "RGBA",
            PixelFormat::Bgra => "BGRA",
            PixelFormat::Gray16 => "GRAY16_LE",
            PixelFormat::Gray8 => "GRAY8",
        };
        f.write_str(s)
    }
}

/// YUV to RGB matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Matrix {
    /// ITU-R BT.601 (JPEG, SD video).
    #[default]
    Bt601,
    /// ITU-R BT.709 (HD video).
    Bt709,
}

/// Quantization range of YUV samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Range {
    /// 0..255 for luma and chroma (JPEG).
    #[default]
    Full,
    /// 16..235 luma, 16..240 chroma (broadcast video).
    Limited,
}

/// Where subsampled chroma samples sit relative to luma.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChromaSite {
    /// Centred between luma samples in both directions (JPEG; libjpeg's "fancy" upsampling).
    #[default]
    Center,
    /// Co-sited with the left luma column, centred vertically (MPEG-2, H.264 default).
    Left,
}

/// How to turn YUV samples into RGB: carried from the decoder's caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Colorimetry {
    /// Colour matrix.
    pub matrix: Matrix,
    /// Sample range.
    pub range: Range,
    /// Chroma siting.
    pub chroma_site: ChromaSite,
}

impl Colorimetry {
    /// JPEG/JFIF: BT.601, full range, centred chroma. The preprocess backends convert YUV frames
    /// of exactly this colorimetry with libjpeg-turbo's integer arithmetic (its "fancy" chroma
    /// upsampling and fixed-point matrix), giving the RGB bytes `cv2.imread` gives;
    /// [`Colorimetry::yuv_to_rgb`] is the float form of the same matrix.
    pub const JPEG: Colorimetry = Colorimetry {
        matrix: Matrix::Bt601,
        range: Range::Full,
        chroma_site: ChromaSite::Center,
    };
    /// HD video: BT.709, limited range, left-sited chroma.
    pub const BT709: Colorimetry = Colorimetry {
        matrix: Matrix::Bt709,
        range: Range::Limited,
        chroma_site: ChromaSite::Left,
    };
    /// SD video: BT.601, limited range, left-sited chroma.
    pub const BT601: Colorimetry = Colorimetry {
        matrix: Matrix::Bt601,
        range: Range::Limited,
        chroma_site: ChromaSite::Left,
    };

    /// The affine map from (Y, U, V) bytes to (R, G, B) on the 0..255 scale:
    /// `rgb[c] = m[c][0] * (Y - y_off) + m[c][1] * (U - 128) + m[c][2] * (V - 128)`.
    /// Returns `(y_off, m)`.
    pub fn yuv_to_rgb(&self) -> (f32, [[f32; 3]; 3]) {
        let (kr, kb) = match self.matrix {
            Matrix::Bt601 => (0.299f64, 0.114f64),
            Matrix::Bt709 => (0.2126, 0.0722),
        };
        let kg = 1.0 - kr - kb;
        let (y_off, ys, cs) = match self.range {
            Range::Full => (0.0, 1.0, 1.0),
            Range::Limited => (16.0, 255.0 / 219.0, 255.0 / 224.0),
        };
        let rv = 2.0 * (1.0 - kr);
        let bu = 2.0 * (1.0 - kb);
        let gu = -bu * kb / kg;
        let gv = -rv * kr / kg;
        let m = [
            [ys, 0.0, rv * cs],
            [ys, gu * cs, gv * cs],
            [ys, bu * cs, 0.0],
        ];
        let m = m.map(|row| row.map(|v| v as f32));
        (y_off as f32, m)
    }
}

/// Geometry of a frame's planes inside its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLayout {
    /// Pixel format.
    pub format: PixelFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Byte offset of each plane (unused planes are 0).
    pub offsets: [usize; 3],
    /// Row stride in bytes of each plane (unused planes are 0).
    pub strides: [usize; 3],
}

impl FrameLayout {
    /// A tightly packed layout (strides equal to the row width) for `format` at `width`x`height`.
    pub fn packed(format: PixelFormat, width: u32, height: u32) -> Self {
        let (w, h) = (width as usize, height as usize);
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        match format {
            PixelFormat::I420 => FrameLayout {
                format,
                width,
                height,
                offsets: [0, w * h, w * h + cw * ch],
                strides: [w, cw, cw],
            },
            PixelFormat::Nv12 => FrameLayout {
                format,
                width,
                height,
                offsets: [0, w * h, 0],
                strides: [w, 2 * cw, 0],
            },
            _ => FrameLayout {
                format,
                width,
                height,
                offsets: [0; 3],
                strides: [w * format.packed_bytes(), 0, 0],
            },
        }
    }

    /// Check that the layout describes real planes: a size of at least 1x1, each plane's stride
    /// at least its row's bytes, and (for host memory, `held` bytes) every plane inside the
    /// buffer. The reason names the plane and the numbers.
    pub fn check(&self, held: Option<usize>) -> Result<(), LayoutError> {
        let (w, h) = (self.width as usize, self.height as usize);
        if w == 0 || h == 0 {
            return Err(LayoutError::Empty { w, h });
        }
        let (cw, planes) = (w.div_ceil(2), self.format.planes());
        let row = |plane: usize| match (self.format, plane) {
            (PixelFormat::I420, 0) | (PixelFormat::Nv12, 0) => w,
            (PixelFormat::I420, _) => cw,
            (PixelFormat::Nv12, _) => 2 * cw,
            (f, _) => w * f.packed_bytes(),
        };
        for plane in 0..planes {
            if self.strides[plane] < row(plane) {
                return Err(LayoutError::Stride {
                    layout: *self,
                    plane,
                    row: row(plane),
                });
            }
        }
        let need = self.span().ok_or(LayoutError::Overflow { layout: *self })?;
        if let Some(held) = held {
            if held < need {
                return Err(LayoutError::Short {
                    layout: *self,
                    need,
                    held,
                });
            }
        }
        Ok(())
    }

    /// Bytes the planes span from the start of the buffer (saturating: [`FrameLayout::check`]
    /// refuses a layout whose span does not fit in a `usize`).
    pub fn size(&self) -> usize {
        self.span().unwrap_or(usize::MAX)
    }

    /// Bytes the planes span, `None` when that overflows.
    fn span(&self) -> Option<usize> {
        let h = self.height as usize;
        let ch = h.div_ceil(2);
        let end = |plane: usize, rows: usize| {
            self.strides[plane]
                .checked_mul(rows)?
                .checked_add(self.offsets[plane])
        };
        match self.format {
            PixelFormat::I420 => Some(end(0, h)?.max(end(1, ch)?).max(end(2, ch)?)),
            PixelFormat::Nv12 => Some(end(0, h)?.max(end(1, ch)?)),
            _ => end(0, h),
        }
    }
}

/// A [`FrameLayout`] that does not describe real planes ([`FrameLayout::check`]); each names the
/// plane and the numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A size of 0.
    #[error("a {w}x{h} frame has no pixels")]
    Empty {
        /// Width.
        w: usize,
        /// Height.
        h: usize,
    },
    /// A plane's stride shorter than its row.
    #[error("{} plane {plane}: stride {} is less than its row of {row} bytes ({}x{})", layout.format, layout.strides[*plane], layout.width, layout.height)]
    Stride {
        /// The layout.
        layout: FrameLayout,
        /// The plane.
        plane: usize,
        /// Bytes of its row.
        row: usize,
    },
    /// Offsets and strides that span more bytes than a `usize` counts.
    #[error("{} {}x{} planes: offsets {:?} and strides {:?} span more bytes than memory has", layout.format, layout.width, layout.height, layout.offsets, layout.strides)]
    Overflow {
        /// The layout.
        layout: FrameLayout,
    },
    /// Host memory shorter than the planes.
    #[error("{} {}x{} planes need {need} bytes, {held} given", layout.format, layout.width, layout.height)]
    Short {
        /// The layout.
        layout: FrameLayout,
        /// Bytes the planes span.
        need: usize,
        /// Bytes given.
        held: usize,
    },
}
