//! Boxes stage: attaches boxes to frames from annotation files or a generator.
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
//!
//! A malformed annotation line is an error naming `file:line`, unless `skip_bad_lines` is set: then
//! the line is skipped and counted as `bad-line` (on its frame: the DET file's frame, or the MOT
//! row's frame index when that much can be read, else the stream's first frame). At the end of a
//! run [`Boxes::unused`] lists the MOT frame indices that no frame asked for (annotations for
//! frames the stream does not have, or, after an early stop, frames not reached) and
//! [`Boxes::unused_det_files`] the DET files no frame matched.
//!
//! Boxes are matched to a frame by what the frame is, never by how many frames came before it:
//!
//! - **DET** files by the image's file name (`NAME.txt` for `NAME.jpg`).
//! - **MOT** rows of a frame of an image sequence by the number its file name ends with
//!   (VisDrone names a sequence's images by their 1-based frame index: `0000007.jpg`, and the
//!   shared clip's `9999999_00023_d_0000007.jpg`, are frame index 7), so images missing from the
//!   folder leave their indices unused and every other image keeps its own rows; the same image
//!   played again (`loop`) gets the same rows. When no name of the sequence ends with digits,
//!   images are frame index `position + 1` in name order. Names that say it inconsistently are an
//!   error naming the image, never a guess: some names end with a number and some not, two
//!   images end with the same number, or a name ends with 0 (MOT frame indices start at 1).
//! - **MOT** rows of any other frame (a media file, a GStreamer head, the test source) by its
//!   position in its stream (`Frame::seq`, index `seq + 1`), which sources number by
//!   presentation time: a frame the decoder lost, or a packet loss took, leaves its index unused
//!   and the frames after it keep their own rows. A file's first frame is at time zero; a live
//!   head's is the first frame it sees, so the receiver must run before the sender's first frame,
//!   and the frame rate must be known (the decoded caps, or `head framerate=F`): without it frames
//!   are numbered as they come.
//!
//! Frames that get no rows are counted (`boxes: N frames had no annotation rows`), and at the end
//! the MOT indices no frame asked for are listed.
mod annotations;
mod config;
mod error;
mod replay;
mod settings;
mod stage;
mod synthetic;

pub use annotations::{det_lines, mot_lines, parse_det, parse_mot, AnnotationRow};
pub use config::{BadLines, BoxFormat, BoxesProps, BOXES};
pub use error::BoxesError;
pub use replay::Boxes;
pub use settings::{BoxSource, BoxesConfig, VISDRONE_CATEGORIES};
pub use synthetic::Synthetic;

// Clipping a box to its frame is the core crate's (a source of pushed frames clips too).
pub use octopipe_core::frame::{clip_box, MIN_BOX_SIZE};

#[cfg(test)]
mod tests;
