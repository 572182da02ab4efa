//! The tilestats stage's settings and the bands of a colour frame it can sum.

use super::rule::{Property, Rule};
use crate::preprocess::BackendKind;
use octopipe_core::stage::PropChoice;

/// Default pixels per block of work.
pub const DEFAULT_BLOCK_PIXELS: u32 = 16 * 1024;

/// Which band of a colour frame is summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PropChoice)]
#[non_exhaustive]
pub enum BandName {
    /// Grey for a grey frame, the Y plane of a YUV frame, 77 R + 150 G + 29 B (/ 256) of RGB.
    #[default]
    Luma,
    /// Red of a packed RGB frame.
    Red,
    /// Green of a packed RGB frame.
    Green,
    /// Blue of a packed RGB frame.
    Blue,
}

impl BandName {
    /// Its name in descriptions.
    pub fn name(self) -> &'static str {
        self.as_str()
    }
}

/// Settings of the tilestats stage.
#[derive(Debug, Clone, PartialEq)]
pub struct TileStatsConfig {
    /// `value = sample * scale + offset`; `None`: 1 / the largest sample (65535 or 255).
    pub scale: Option<f64>,
    /// See `scale`.
    pub offset: f64,
    /// The level `above` counts values above.
    pub level: f64,
    /// The keep rule (`None`: every tile passes).
    pub keep: Option<Rule>,
    /// Keep at most this many passing tiles per frame.
    pub top_k: Option<usize>,
    /// What top-k ranks by.
    pub score: Property,
    /// Which band of colour frames.
    pub band: BandName,
    /// Backend.
    pub backend: BackendKind,
    /// CPU worker threads (0: one per core).
    pub threads: usize,
    /// The GPU of the CUDA backend.
    pub device: usize,
    /// Pixels per block of work.
    pub block_pixels: u32,
    /// Downlink rate for the report, megabits per second.
    pub downlink_mbps: f64,
}
