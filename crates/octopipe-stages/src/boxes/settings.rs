//! The boxes stage's settings: where boxes come from, which categories are filtered, and the
//! VisDrone category names.

use std::path::PathBuf;

/// VisDrone categories with no class in the shared classifier ("others").
pub(crate) const DEFAULT_SKIP_CATEGORIES: &[u8] = &[11];

/// VisDrone's object categories, by category number: the names annotation boxes carry.
pub const VISDRONE_CATEGORIES: [&str; 12] = [
    "ignored-region",
    "pedestrian",
    "people",
    "bicycle",
    "car",
    "van",
    "truck",
    "tricycle",
    "awning-tricycle",
    "bus",
    "motor",
    "others",
];

/// Where boxes come from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BoxSource {
    /// A folder of VisDrone DET files, `NAME.txt` for image `NAME.jpg`.
    Det {
        /// The folder.
        location: PathBuf,
    },
    /// One VisDrone MOT/VID file for the whole stream.
    Mot {
        /// The file.
        location: PathBuf,
    },
    /// The deterministic generator.
    Synthetic {
        /// Boxes per frame.
        count: u32,
        /// Seed.
        seed: u64,
    },
}

/// Settings of the boxes stage.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxesConfig {
    /// Where boxes come from.
    pub source: BoxSource,
    /// Also classify ignored regions (category 0 or score 0).
    pub keep_ignored: bool,
    /// Categories that are skipped as having no class.
    pub skip_categories: Vec<u8>,
    /// Skip malformed annotation lines (counted as [`SkipReason::BadLine`](octopipe_core::frame::SkipReason::BadLine)) instead of failing.
    pub skip_bad_lines: bool,
}

impl BoxesConfig {
    /// A config reading boxes from `source`, with default filters.
    pub fn new(source: BoxSource) -> Self {
        BoxesConfig {
            source,
            keep_ignored: false,
            skip_categories: DEFAULT_SKIP_CATEGORIES.to_vec(),
            skip_bad_lines: false,
        }
    }
}
