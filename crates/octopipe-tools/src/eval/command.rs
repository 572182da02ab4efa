//! `octopipe eval`'s subcommands and their dispatch.

use std::path::PathBuf;

use super::{detections, labels, tracks, EvalError};

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
