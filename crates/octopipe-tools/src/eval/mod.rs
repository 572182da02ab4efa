//! Scoring a run's output against ground truth, in every build (`octopipe eval`):
//!
//! ```text
//! octopipe eval detections --objects objects.jsonl --truth CLIP/annotations --images CLIP/images
//! octopipe eval tracks --objects tracks.jsonl --truth pan/gt.txt
//! octopipe eval labels --objects objects.jsonl
//! ```
//!
//! - [`detections`]: a detector's boxes against VisDrone DET ground truth, per object group:
//!   recall at IoU >= 0.5 and false positives per frame.
//! - [`tracks`]: track ids against MOT ground truth (ids and boxes per frame): IDF1, ID
//!   switches, MOTA ([`mot`] holds the scores).
//! - [`labels`]: the classifier's labels against the annotated VisDrone categories: the share
//!   labelled as annotated, per class.
//!
//! Each reads the objects as the `jsonl` sink writes them; every error names the file (and
//! line) it is about.

pub mod detections;
pub mod labels;
pub mod mot;
pub mod tracks;

use std::path::PathBuf;

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
    /// A class map that does not parse.
    #[error("class map '{text}': {reason}")]
    ClassMap {
        /// The map as written.
        text: String,
        /// What is wrong.
        reason: String,
    },
}

/// `octopipe eval ...`: what to score, and the files.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Subcommand))]
#[non_exhaustive]
pub enum EvalCommand {
    /// A detector's boxes against VisDrone DET ground truth: per group recall at IoU >= 0.5
    /// and false positives per frame.
    Detections {
        /// The objects, as the jsonl sink writes them (with "detection": {"label", "score"}).
        #[cfg_attr(feature = "cli", arg(long))]
        objects: PathBuf,
        /// The ground truth folder: STEM.txt for each image.
        #[cfg_attr(feature = "cli", arg(long))]
        truth: PathBuf,
        /// The images run: every image is a frame scored, with or without detections.
        #[cfg_attr(feature = "cli", arg(long))]
        images: PathBuf,
        /// Detector classes per group, CLASS=GROUP,... (default COCO: person=people,
        /// car=vehicles,bus=vehicles,truck=vehicles,bicycle=two-wheelers,motorcycle=two-wheelers,
        /// and vehicle, two-wheeler as pipelines/visdrone-detect.pipe names them).
        #[cfg_attr(feature = "cli", arg(long))]
        classes: Option<String>,
    },
    /// Track ids against MOT ground truth (frame,id,x,y,w,h,score,category,...): IDF1, ID
    /// switches, MOTA.
    Tracks {
        /// The objects, as the jsonl sink writes them (with "track").
        #[cfg_attr(feature = "cli", arg(long))]
        objects: PathBuf,
        /// The MOT ground-truth file.
        #[cfg_attr(feature = "cli", arg(long))]
        truth: PathBuf,
        /// The stream the ground truth is of (needed when the objects hold several).
        #[cfg_attr(feature = "cli", arg(long))]
        stream: Option<u32>,
    },
    /// The classifier's labels against the annotated VisDrone categories: the share labelled
    /// as annotated, per class.
    Labels {
        /// The objects, as the jsonl sink writes them (with "label" and "annotation").
        #[cfg_attr(feature = "cli", arg(long))]
        objects: PathBuf,
        /// Which categories each label stands for, LABEL=CAT+CAT,... (default: the shared
        /// classifier's person=1+2,two-wheeler=3+7+8+10,car=4,large-vehicle=5+6+9).
        #[cfg_attr(feature = "cli", arg(long))]
        classes: Option<String>,
    },
}

impl EvalCommand {
    /// Score, and give the table to print.
    pub fn run(&self) -> Result<String, EvalError> {
        Ok(match self {
            EvalCommand::Detections {
                objects,
                truth,
                images,
                classes,
            } => {
                let map = classes
                    .as_deref()
                    .map(detections::ClassMap::parse)
                    .transpose()?;
                let scores = detections::evaluate_files(objects, truth, images, map.as_ref())?;
                format!("{scores}\n")
            }
            EvalCommand::Tracks {
                objects,
                truth,
                stream,
            } => format!("{}\n", tracks::evaluate_files(objects, truth, *stream)?),
            EvalCommand::Labels { objects, classes } => {
                let map = match classes {
                    Some(text) => labels::LabelMap::parse(text)?,
                    None => labels::LabelMap::visdrone_crops(),
                };
                format!("{}\n", labels::evaluate_file(objects, &map)?)
            }
        })
    }
}
