//! The box a detector's output decodes to, before it goes back to frame pixels.

/// A detector box before it goes back to frame pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RawBox {
    /// `[x1, y1, x2, y2]` (in the model input's pixels after decoding, frame pixels after mapping).
    pub b: [f32; 4],
    /// Score (class score, times objectness where the format has one).
    pub score: f32,
    /// Class index.
    pub class: u32,
}
