//! Frames: decoded pixels in pooled buffers, with where they came from and when.
//!
//! A [`Frame`] is what the source stage emits and what every later stage refers to. Its planes live in
//! one [`PooledBuf`]; dropping the frame (or calling [`Frame::release_pixels`]) returns the memory to
//! its [`BufferPool`], so a running pipeline reuses a handful of buffers instead of allocating per frame.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::detect::Detection;

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
}

impl PixelFormat {
    /// Whether the format stores luma and chroma (needs a colour matrix to become RGB).
    pub fn is_yuv(self) -> bool {
        matches!(self, PixelFormat::I420 | PixelFormat::Nv12)
    }

    /// Bytes per pixel of a packed format (1 for the luma plane of YUV formats).
    pub fn packed_bytes(self) -> usize {
        match self {
            PixelFormat::I420 | PixelFormat::Nv12 => 1,
            PixelFormat::Rgb | PixelFormat::Bgr => 3,
            PixelFormat::Rgba | PixelFormat::Bgra => 4,
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
    /// JPEG/JFIF: BT.601, full range, centred chroma.
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

    /// Bytes the planes span from the start of the buffer.
    pub fn size(&self) -> usize {
        let h = self.height as usize;
        let ch = h.div_ceil(2);
        match self.format {
            PixelFormat::I420 => (self.offsets[0] + self.strides[0] * h)
                .max(self.offsets[1] + self.strides[1] * ch)
                .max(self.offsets[2] + self.strides[2] * ch),
            PixelFormat::Nv12 => {
                (self.offsets[0] + self.strides[0] * h).max(self.offsets[1] + self.strides[1] * ch)
            }
            _ => self.offsets[0] + self.strides[0] * h,
        }
    }
}

/// A free list of byte buffers; buffers taken from it come back when dropped.
#[derive(Clone, Default)]
pub struct BufferPool {
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl BufferPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer of exactly `len` bytes (contents unspecified), reused from the pool when possible.
    pub fn take(&self, len: usize) -> PooledBuf {
        let mut data = self
            .free
            .lock()
            .map(|mut f| f.pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        data.resize(len, 0);
        PooledBuf {
            data,
            pool: Some(self.clone()),
        }
    }

    /// Buffers currently waiting for reuse.
    pub fn idle(&self) -> usize {
        self.free.lock().map(|f| f.len()).unwrap_or(0)
    }
}

/// Bytes owned by a frame; returned to their [`BufferPool`] on drop.
pub struct PooledBuf {
    data: Vec<u8>,
    pool: Option<BufferPool>,
}

impl PooledBuf {
    /// A buffer that belongs to no pool.
    pub fn unpooled(data: Vec<u8>) -> Self {
        PooledBuf { data, pool: None }
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            if let Ok(mut free) = pool.free.lock() {
                free.push(std::mem::take(&mut self.data));
            }
        }
    }
}

impl fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PooledBuf({} bytes)", self.data.len())
    }
}

/// The points in a frame's life that the budget tracks, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mark {
    /// The decoder handed the frame over.
    Decoded = 0,
    /// Detection boxes were attached.
    Boxes,
    /// The frame's crops were placed in a batch.
    Batched,
    /// Its crops were preprocessed.
    Preprocessed,
    /// Its crops were classified.
    Classified,
    /// Its results were written by the sink.
    Emitted,
}

impl Mark {
    /// All marks in order.
    pub const ALL: [Mark; 6] = [
        Mark::Decoded,
        Mark::Boxes,
        Mark::Batched,
        Mark::Preprocessed,
        Mark::Classified,
        Mark::Emitted,
    ];

    /// Lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mark::Decoded => "decode",
            Mark::Boxes => "boxes",
            Mark::Batched => "batch",
            Mark::Preprocessed => "preprocess",
            Mark::Classified => "classify",
            Mark::Emitted => "sink",
        }
    }
}

/// When a frame arrived and when it passed each [`Mark`].
#[derive(Debug, Clone, Copy)]
pub struct FrameTimes {
    /// When the frame was due: for a paced (live-rate) source its scheduled presentation instant,
    /// otherwise when the source started producing it.
    pub arrival: Instant,
    marks: [Option<Instant>; 6],
}

impl FrameTimes {
    /// Times of a frame that arrives at `arrival`.
    pub fn new(arrival: Instant) -> Self {
        FrameTimes {
            arrival,
            marks: [None; 6],
        }
    }

    /// Record that the frame passed `mark` at `at`.
    pub fn mark(&mut self, mark: Mark, at: Instant) {
        self.marks[mark as usize] = Some(at);
    }

    /// When the frame passed `mark`, if it did.
    pub fn get(&self, mark: Mark) -> Option<Instant> {
        self.marks[mark as usize]
    }

    /// Time spent in the stage that ends at `mark`: from the previous recorded mark (or arrival).
    pub fn stage(&self, mark: Mark) -> Option<Duration> {
        let end = self.get(mark)?;
        let start = Mark::ALL[..mark as usize]
            .iter()
            .rev()
            .find_map(|m| self.get(*m))
            .unwrap_or(self.arrival);
        Some(end.saturating_duration_since(start))
    }

    /// Arrival to the last recorded mark.
    pub fn total(&self) -> Option<Duration> {
        let last = self.marks.iter().rev().find_map(|m| *m)?;
        Some(last.saturating_duration_since(self.arrival))
    }
}

/// Why a detection box was not classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    /// Category 0 or score 0 in the annotation: an ignored region.
    IgnoredRegion,
    /// Width or height under 2 px after clipping to the frame.
    TooSmall,
    /// Entirely outside the frame.
    OutsideFrame,
    /// Category with no class in the model (VisDrone "others").
    NoClass,
    /// A malformed annotation line, skipped (`bad-lines=skip`).
    BadLine,
    /// Cut by the late-frame policy `cap` (lower priority than the crops kept).
    Capped,
}

impl SkipReason {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::IgnoredRegion => "ignored-region",
            SkipReason::TooSmall => "under-2px",
            SkipReason::OutsideFrame => "outside-frame",
            SkipReason::NoClass => "no-class",
            SkipReason::Capped => "capped (late frame)",
            SkipReason::BadLine => "bad-line",
        }
    }
}

/// One decoded frame and what the pipeline learned about it.
#[derive(Debug)]
pub struct Frame {
    /// Which input stream (branch) the frame came from.
    pub stream: u32,
    /// 0-based position in its stream.
    pub seq: u64,
    /// Presentation timestamp.
    pub pts: Option<Duration>,
    /// The image file name for image sequences, otherwise the URI or element description.
    pub source: Arc<str>,
    /// Plane geometry.
    pub layout: FrameLayout,
    /// YUV to RGB conversion for YUV formats.
    pub colorimetry: Colorimetry,
    /// The planes; `None` once released after preprocessing.
    pub pixels: Option<PooledBuf>,
    /// Detections attached by the detect stage (already clipped to the frame).
    pub detections: Vec<Detection>,
    /// Boxes the detect stage dropped, by reason.
    pub skipped: Vec<(SkipReason, u32)>,
    /// Budget timestamps.
    pub times: FrameTimes,
}

impl Frame {
    /// A frame holding `pixels` laid out as `layout`, arrived now.
    pub fn new(
        stream: u32,
        seq: u64,
        source: &str,
        layout: FrameLayout,
        colorimetry: Colorimetry,
        pixels: PooledBuf,
    ) -> Self {
        let now = Instant::now();
        let mut times = FrameTimes::new(now);
        times.mark(Mark::Decoded, now);
        Frame {
            stream,
            seq,
            pts: None,
            source: Arc::from(source),
            layout,
            colorimetry,
            pixels: Some(pixels),
            detections: Vec::new(),
            skipped: Vec::new(),
            times,
        }
    }

    /// Pixel bytes, if still held.
    pub fn data(&self) -> Option<&[u8]> {
        self.pixels.as_deref()
    }

    /// Return the pixel memory to its pool (metadata and detections stay).
    pub fn release_pixels(&mut self) {
        self.pixels = None;
    }

    /// Count a skipped box.
    pub fn skip(&mut self, reason: SkipReason) {
        match self.skipped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.skipped.push((reason, 1)),
        }
    }
}
