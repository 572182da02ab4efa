//! The evaluation's errors.

use super::mot;

/// Errors of the evaluation; each names the file (and line) or the image it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A file or folder that cannot be read, or a JSONL line that is not an object with a
    /// detection.
    #[error(transparent)]
    File(#[from] octopipe_core::files::FileError),
    /// Objects scored against annotated categories that carry none (a detector's boxes).
    #[error("{path}: {found}: `eval labels` scores a classifier against annotated categories (boxes from annotations, `boxes format=det location=...`); a detector's classes are not annotations")]
    NoCategory {
        /// The JSONL file.
        path: String,
        /// What the objects carry instead, and how many.
        found: String,
    },
    /// A malformed ground truth file.
    #[error(transparent)]
    Truth(#[from] octopipe_stages::boxes::BoxesError),
    /// An image of the frames has no ground truth file.
    #[error("{path}: no ground truth for image '{image}'")]
    MissingTruth {
        /// The expected ground truth file.
        path: String,
        /// The image.
        image: String,
    },
    /// Detections of an image that is not among the frames evaluated.
    #[error("{count} detections of '{source_name}', which is not among the {frames} images evaluated (the first: {first})")]
    UnknownFrame {
        /// The detection's `source`.
        source_name: String,
        /// How many detections name it.
        count: usize,
        /// How many images are evaluated.
        frames: usize,
        /// The first image evaluated, for comparison.
        first: String,
    },
    /// A MOT ground-truth file that cannot be read.
    #[error(transparent)]
    Mot(#[from] mot::MotError),
    /// Objects of several streams scored against one ground truth.
    #[error(
        "{path}: objects of streams {streams}: give the one the ground truth is of (--stream N)"
    )]
    Streams {
        /// The JSONL file.
        path: String,
        /// The streams found.
        streams: String,
    },
    /// Labels the label map does not name: scoring them would call every one wrong.
    #[error("{path}: {count} objects carry labels the class map does not name: {labels}: name them in --classes LABEL=CAT+CAT,... (the map's labels: {known})")]
    UnknownLabels {
        /// The JSONL file.
        path: String,
        /// How many objects.
        count: u64,
        /// Each label with how many objects carry it.
        labels: String,
        /// The labels the map names.
        known: String,
    },
    /// Detections none of whose classes the class map puts in a group.
    #[error("{path}: none of the {count} detections has a class the class map puts in a group (classes: {classes}): name them in --classes CLASS=GROUP,...")]
    NoGroup {
        /// The JSONL file.
        path: String,
        /// How many detections.
        count: usize,
        /// Each class with how many detections carry it.
        classes: String,
    },
    /// Tracks scored from objects that carry none.
    #[error("{path}: none of the {count} objects of stream {stream} carries a track: run the objects through a `track` stage first")]
    NoTracks {
        /// The JSONL file.
        path: String,
        /// How many objects.
        count: u64,
        /// The stream scored.
        stream: u32,
    },
    /// Tracks and a ground truth that are not of the same sequence.
    #[error(
        "{path}: {reason}: are the objects and the ground truth {truth} of the same sequence?"
    )]
    Mismatch {
        /// The JSONL file.
        path: String,
        /// The ground truth file.
        truth: String,
        /// What does not fit.
        reason: String,
    },
    /// A class map that does not parse.
    #[error("class map '{text}': {reason}")]
    ClassMap {
        /// The map as written.
        text: String,
        /// What is wrong.
        reason: String,
    },
}
