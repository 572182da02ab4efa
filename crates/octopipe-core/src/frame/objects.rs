//! What a frame carries about its objects: detection boxes, what the classifier said of them, and
//! the boxes that were skipped.

use std::sync::Arc;

/// One object box on a frame, already clipped to it. Not tied to any dataset: a box source gives
/// its own class id and name (VisDrone annotations give the VisDrone category and its name).
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// `[x, y, w, h]` in integer frame pixels, inside the frame, `w, h >= 1`.
    pub bbox: [u32; 4],
    /// The box source's class id (a detector's class, an application's class, a VisDrone category).
    pub class_id: Option<u32>,
    /// What kind of box source gave `class_id` and `label`: a detector's class, or an
    /// annotation's category.
    pub origin: BoxOrigin,
    /// The box source's name for that class.
    pub label: Option<Arc<str>>,
    /// Boxes or annotation score.
    pub score: f32,
    /// Track id (from MOT annotations, an application or a tracker).
    pub track: Option<u32>,
    /// What the classifier said of the box's crop, once classified: the main result, the
    /// first classifier's where several classify the same boxes one after the other.
    pub classification: Option<Classification>,
    /// Where several classifiers classify the same boxes one after the other: each one's
    /// answer by its name, in chain order (the first's is also `classification`). Empty with
    /// one classifier.
    pub classifications: Vec<NamedClassification>,
    /// What `tilestats` measured of the box's pixels, and whether it keeps the box.
    pub stats: Option<TileStats>,
}

impl Detection {
    /// A box with score 1 and nothing else known.
    pub fn new(bbox: [u32; 4]) -> Self {
        Detection {
            bbox,
            class_id: None,
            origin: BoxOrigin::Detector,
            label: None,
            score: 1.0,
            track: None,
            classification: None,
            classifications: Vec::new(),
            stats: None,
        }
    }
}

/// What kind of box source a box's class comes from: the JSONL names a detector's class and an
/// annotation's category in separate fields, so one is never read as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BoxOrigin {
    /// A detector (the `detect` stage, an upstream GStreamer detector, the application's
    /// boxes): the class is the detector's.
    #[default]
    Detector,
    /// Annotations (ground truth, e.g. VisDrone DET or MOT files, and the synthetic boxes made
    /// in their likeness): the class is the annotated category.
    Annotation,
}

/// Exact integer sums of one region's samples (one band: 16-bit grey, 8-bit luma or an RGB
/// channel), the same on every backend. `#[repr(C)]`: the layout of `TileSums` in the stages
/// crate's `tilestats/tilestats.cu`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PixelSums {
    /// Sum of the samples.
    pub sum: u64,
    /// Sum of their squares.
    pub sum_sq: u64,
    /// Samples at or above the raw threshold of `tilestats level`.
    pub above: u64,
    /// Smallest sample.
    pub min: u32,
    /// Largest sample.
    pub max: u32,
}

// SAFETY: `#[repr(C)]` plain data with the layout of the kernel's `TileSums` (the tilestats
// stage's CUDA backend copies them back from the device); all-zero bytes are a valid `PixelSums`.
unsafe impl cudarc::driver::DeviceRepr for PixelSums {}
unsafe impl cudarc::driver::ValidAsZeroBits for PixelSums {}

impl PixelSums {
    /// The sums of no samples (the identity of [`PixelSums::merge`]).
    pub const EMPTY: PixelSums = PixelSums {
        sum: 0,
        sum_sq: 0,
        above: 0,
        min: u32::MAX,
        max: 0,
    };

    /// The sums of both regions together.
    pub fn merge(self, o: PixelSums) -> PixelSums {
        PixelSums {
            sum: self.sum + o.sum,
            sum_sq: self.sum_sq + o.sum_sq,
            above: self.above + o.above,
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// What `tilestats` measured of a box's pixels: the exact sums and, from them, the statistics
/// after normalization (`value = sample * scale + offset`), and whether the box is kept.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TileStats {
    /// Samples in the box (`w * h`).
    pub pixels: u64,
    /// The integer sums of the raw samples.
    pub sums: PixelSums,
    /// Mean value.
    pub mean: f64,
    /// Standard deviation (population).
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Fraction of the samples whose value is above the level.
    pub above: f64,
    /// Whether the keep rule (and top-k) keeps the box.
    #[serde(skip)]
    pub kept: bool,
}

/// One class and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassScore {
    /// Class index in the model's output.
    pub class_id: u32,
    /// Its name (`class{id}` when the model's labels do not name it).
    pub label: Arc<str>,
    /// Softmax score.
    pub score: f32,
}

/// The classifier's answer for one crop: the best class, and the next ones when top-k > 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// The best class.
    pub best: ClassScore,
    /// Further classes when top-k > 1, best first (the best one excluded).
    pub topk: Vec<ClassScore>,
}

/// One classifier's answer for a box, by the classifier's name: what each of several
/// classifiers on the same boxes said (DeepStream's primary and secondary classifiers).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedClassification {
    /// The classifier's name: its stage's `name=` in the description, else `classify`,
    /// `classify1`, ... in chain order; in the GStreamer plugin, the element's name.
    pub classifier: Arc<str>,
    /// Its answer.
    pub classification: Classification,
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

/// Smallest clipped width or height that is classified.
pub const MIN_BOX_SIZE: u32 = 2;

/// Clip an `[x, y, w, h]` box to a `fw`x`fh` frame; boxes outside the frame or under
/// [`MIN_BOX_SIZE`] after clipping are refused with the reason.
pub fn clip_box(b: [i64; 4], fw: u32, fh: u32) -> Result<[u32; 4], SkipReason> {
    let [x, y, w, h] = b;
    let (x0, y0) = (x.max(0), y.max(0));
    let (x1, y1) = (
        x.saturating_add(w).min(fw as i64),
        y.saturating_add(h).min(fh as i64),
    );
    let (cw, ch) = (x1 - x0, y1 - y0);
    if cw <= 0 || ch <= 0 {
        return Err(SkipReason::OutsideFrame);
    }
    if cw < MIN_BOX_SIZE as i64 || ch < MIN_BOX_SIZE as i64 {
        return Err(SkipReason::TooSmall);
    }
    Ok([x0 as u32, y0 as u32, cw as u32, ch as u32])
}
