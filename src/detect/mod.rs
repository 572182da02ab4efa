//! Detect stage: attaches boxes to frames.

/// One object box on a frame, already clipped to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    /// `[x, y, w, h]` in integer frame pixels, inside the frame, `w, h >= 2`.
    pub bbox: [u32; 4],
    /// VisDrone object category (1 pedestrian .. 11 others).
    pub category: u8,
    /// Detector or annotation score.
    pub score: f32,
    /// Track id for MOT annotations.
    pub track: Option<u32>,
}
