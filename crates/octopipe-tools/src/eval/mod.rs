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

mod command;
pub mod detections;
mod error;
pub mod labels;
pub mod mot;
pub mod tracks;

pub use command::EvalCommand;
pub use error::EvalError;
