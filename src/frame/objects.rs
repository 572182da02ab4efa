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
    /// The box source's name for that class.
    pub label: Option<Arc<str>>,
    /// Boxes or annotation score.
    pub score: f32,
    /// Track id (from MOT annotations, an application or a tracker).
    pub track: Option<u32>,
    /// What the classifier said of the box's crop, once classified.
    pub classification: Option<Classification>,
}

impl Detection {
    /// A box with score 1 and nothing else known.
    pub fn new(bbox: [u32; 4]) -> Self {
        Detection {
            bbox,
            class_id: None,
            label: None,
            score: 1.0,
            track: None,
            classification: None,
        }
    }
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
