//! Track stage: follows each stream's boxes from frame to frame and writes their track ids.
//!
//! ```text
//! images location=${root}/images framerate=30 ! boxes format=det location=${root}/annotations
//!   ! track high=0.5 low=0.1 iou=0.2 max-age=30 min-hits=2
//!   ! classify model=${model} reinfer-interval=10 ! jsonl location=objects.jsonl
//! ```
//!
//! The tracker is ByteTrack's: each track's box moves by a constant-velocity Kalman filter on its
//! centre and size ([`BoxFilter`]). On each frame the camera's motion is first estimated from the
//! boxes and every track moved by it (`camera-motion`, [`Tracker::camera_shift`]: drone video pans
//! by more than a small object's size between frames). Then boxes scoring at least `high` are
//! matched against every confirmed track (those matched on the last frame and those coasting),
//! boxes scoring from `low` up to `high` against the tracks matched on the last frame that the
//! first round left (at IoU at least [`LOW_SCORE_IOU`]), and the tentative tracks against the
//! high-score boxes left. Matching is optimal, not greedy: the pairs at IoU at least `iou` whose
//! summed overlap above it is largest ([`max_weight_matching`], the Hungarian algorithm on each
//! connected block of overlapping pairs). A high-score box nothing took starts a tentative track,
//! confirmed (and given an id) after `min-hits` matched frames in a row, at once on a stream's
//! first frame; a tentative track missed once is dropped; a confirmed track unmatched for more
//! than `max-age` frames ends. A frame's work is bounded whatever it brings: at most
//! [`MAX_BOXES`] boxes of a frame are matched (its highest-scoring; the others get no track,
//! counted and said once) and at most [`MAX_TRACKS`] tracks are kept.
//!
//! Every box's `track` is written, overwriting what the box source said: the id of its confirmed
//! track, or none (a box of a tentative track, or scoring under `low`). Ids count from 1 in
//! each stream: the stage keeps one tracker per stream ([`octopipe_core::frame::Frame::stream`]), so
//! streams that share the stage never mix, and `(stream, track)` names a track in the output.
//! Frames come in order per stream; a gap in frame numbers (frames the decoder lost) is
//! predicted over frame by frame, so a track coasts across it. At the end of a run each stream
//! gets a report line: `track: stream 0: 57 tracks born, 49 ended, 8 open at the end`.

mod assign;
mod config;
mod kalman;
mod stage;
mod tracker;
mod tracks;

pub use assign::{iou, iou_u32, max_weight_matching};
pub use config::{TrackConfig, TrackError, TrackProps};
pub use kalman::BoxFilter;
pub use stage::{DetectScore, Tracked, TRACK};
pub use tracker::{
    Tracker, LOW_SCORE_IOU, MAX_BOXES, MAX_COAST, MAX_TRACKS, SHIFT_BIN, SHIFT_RANGE, SHIFT_SUPPORT,
};
pub use tracks::{HighFrom, TrackSection, Tracks};
