//! Detect stage: attaches boxes to frames.
//!
//! ```text
//! images location=${root}/images ! boxes format=det location=${root}/annotations ! ...
//! media location=flight.mp4 ! boxes format=mot location=uav0000009_03358_v.txt ! ...
//! testsrc ! boxes format=synthetic count=28 seed=7 ! ...
//! ```
//!
//! Boxes come from VisDrone DET files (one per image, matched by file name), VisDrone MOT/VID files
//! (one per sequence, `frame_index` 1-based) or a deterministic generator that follows the real
//! VisDrone box-size distribution. Every box is clipped to its frame; boxes under 2 px after
//! clipping, ignored regions (category 0 or score 0) and categories the classifier does not know
//! (11, "others") are skipped and counted by reason.

mod annotations;
mod synthetic;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::frame::{Frame, SkipReason};

pub use annotations::{parse_det, parse_mot, AnnotationRow};
pub use synthetic::Synthetic;

/// Smallest clipped width or height that is classified.
pub const MIN_BOX_SIZE: u32 = 2;
/// Default number of synthetic boxes per frame.
pub const DEFAULT_SYNTHETIC_COUNT: u32 = 28;
/// Default seed of the synthetic generator.
pub const DEFAULT_SEED: u64 = 7;
/// VisDrone categories with no class in the shared classifier ("others").
pub const DEFAULT_SKIP_CATEGORIES: &[u8] = &[11];

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

/// Where boxes come from.
#[derive(Debug, Clone, PartialEq)]
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

/// Settings of the detect stage.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectConfig {
    /// Where boxes come from.
    pub source: BoxSource,
    /// Also classify ignored regions (category 0 or score 0).
    pub keep_ignored: bool,
    /// Categories that are skipped as having no class.
    pub skip_categories: Vec<u8>,
}

impl DetectConfig {
    /// A config reading boxes from `source`, with default filters.
    pub fn new(source: BoxSource) -> Self {
        DetectConfig {
            source,
            keep_ignored: false,
            skip_categories: DEFAULT_SKIP_CATEGORIES.to_vec(),
        }
    }
}

/// Errors of the detect stage; each names the file (and line) it is about.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// A file cannot be read.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A malformed annotation line.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A frame has no annotation file.
    #[error("{path}: no annotation file for frame '{frame}'")]
    MissingAnnotations {
        /// The expected file.
        path: String,
        /// The frame's source name.
        frame: String,
    },
}

/// Runtime state of the detect stage.
pub struct Detector {
    config: DetectConfig,
    mot: HashMap<u64, Vec<AnnotationRow>>,
}

impl Detector {
    /// Open the detector: MOT files are read whole here; DET files per frame.
    pub fn new(config: DetectConfig) -> Result<Self, DetectError> {
        let mut mot: HashMap<u64, Vec<AnnotationRow>> = HashMap::new();
        if let BoxSource::Mot { location } = &config.source {
            let text = read(location)?;
            for (frame, row) in parse_mot(&text, &location.display().to_string())? {
                mot.entry(frame).or_default().push(row);
            }
        }
        if let BoxSource::Det { location } = &config.source {
            if !location.is_dir() {
                return Err(DetectError::Io {
                    path: location.display().to_string(),
                    reason: "not a folder of DET annotation files".into(),
                });
            }
        }
        Ok(Detector { config, mot })
    }

    /// Attach the frame's boxes (clipped, filtered, skips counted).
    pub fn attach(&mut self, frame: &mut Frame) -> Result<(), DetectError> {
        let rows = match &self.config.source {
            BoxSource::Det { location } => {
                let stem = Path::new(&*frame.source)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let path = location.join(format!("{stem}.txt"));
                if !path.is_file() {
                    return Err(DetectError::MissingAnnotations {
                        path: path.display().to_string(),
                        frame: frame.source.to_string(),
                    });
                }
                parse_det(&read(&path)?, &path.display().to_string())?
            }
            // MOT frame indices are 1-based.
            BoxSource::Mot { .. } => self.mot.remove(&(frame.seq + 1)).unwrap_or_default(),
            BoxSource::Synthetic { count, seed } => Synthetic::new(*seed).frame_boxes(
                frame.stream,
                frame.seq,
                *count,
                frame.layout.width,
                frame.layout.height,
            ),
        };
        frame.detections.clear();
        for row in rows {
            match self.admit(&row, frame.layout.width, frame.layout.height) {
                Ok(d) => frame.detections.push(d),
                Err(reason) => frame.skip(reason),
            }
        }
        Ok(())
    }

    /// Clip `row` to a `w`x`h` frame and decide whether it is classified.
    fn admit(&self, row: &AnnotationRow, w: u32, h: u32) -> Result<Detection, SkipReason> {
        if !self.config.keep_ignored && (row.category == 0 || row.score == 0.0) {
            return Err(SkipReason::IgnoredRegion);
        }
        if self.config.skip_categories.contains(&row.category) {
            return Err(SkipReason::NoClass);
        }
        let bbox = clip_box(row.bbox, w, h)?;
        Ok(Detection {
            bbox,
            category: row.category,
            score: row.score,
            track: row.track,
        })
    }
}

/// Clip an `[x, y, w, h]` box to a `fw`x`fh` frame; boxes outside the frame or under
/// [`MIN_BOX_SIZE`] after clipping are refused with the reason.
pub fn clip_box(b: [i64; 4], fw: u32, fh: u32) -> Result<[u32; 4], SkipReason> {
    let [x, y, w, h] = b;
    let (x0, y0) = (x.max(0), y.max(0));
    let (x1, y1) = ((x + w).min(fw as i64), (y + h).min(fh as i64));
    let (cw, ch) = (x1 - x0, y1 - y0);
    if cw <= 0 || ch <= 0 {
        return Err(SkipReason::OutsideFrame);
    }
    if cw < MIN_BOX_SIZE as i64 || ch < MIN_BOX_SIZE as i64 {
        return Err(SkipReason::TooSmall);
    }
    Ok([x0 as u32, y0 as u32, cw as u32, ch as u32])
}

fn read(path: &Path) -> Result<String, DetectError> {
    std::fs::read_to_string(path).map_err(|e| DetectError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}
