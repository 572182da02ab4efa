//! Detect stage: an ONNX object detector finds the boxes, on the whole frame or on overlapping
//! tiles of it (sliced inference).
//!
//! ```text
//! images location=${root}/images ! detect model=coco-centernet-512.onnx labels=coco scale=1 tiles=640x640 overlap=0.15 ! track ! classify ... ! jsonl ...
//! media location=flight.mp4 ! detect model=yolov8n.onnx labels-file=coco.names fit=letterbox ! jsonl ...
//! ```
//!
//! **Input.** The tiles of a frame (and/or the whole frame) are the crops of one ragged batch,
//! made by the same preprocess backends as the classifier's crops (CPU, or one CUDA kernel launch
//! for all of a frame's tiles): each is resized to the model's input size (`fit=stretch`, or
//! `letterbox` with `pad`), in the model's layout (NCHW or NHWC, read from the model's input),
//! channel order (`channels`), `value = (v * scale - mean) / std`, and the model's element type
//! (f32 or f16, read from the model). A model with a fixed batch of 1 runs tile by tile; a model
//! with a dynamic batch gets up to `max-batch` tiles per run.
//!
//! **Many frames, many streams, one call.** Branches may join one detect stage the way they join
//! a batch stage (`media location=a.mp4 ! det.  media location=b.mp4 ! det.  detect name=det ...
//! ! track ! ...`). The stage collects frames (of every stream it serves) until their tiles would
//! pass `max-batch` or the first frame's wait ends (`max-wait-ms`, by default half of what its
//! budget leaves, the rule of the batch stage), preprocesses all their tiles as one ragged batch
//! and runs the model on them together; boxes go back to their frames and each stream's frames
//! leave in their order. On CUDA the model runs at a few fixed batch sizes (`batch-sizes`), each
//! with input and output buffers of its own, planned, warmed and (with `cuda-graph`) captured
//! as a CUDA graph when the stage opens, on a thread of the model's own that runs every call
//! after (replays); a call is padded to the next size. With `overlap-calls` (by default on CUDA)
//! the model runs on a thread of its own: while a call runs there, the stage collects and
//! preprocesses the next call's frames and places the boxes of the call before (at most two calls
//! out at once).
//! `interval=N` detects every Nth frame of each stream; a `track` stage after it gives the frames
//! between the boxes of its tracks, predicted (`"predicted": true` in the output).
//!
//! **Output.** `decoder` reads the output ([`Decoder`]; `auto` picks it from the output's shape):
//! `end2end` rows `x1, y1, x2, y2, score, class`, `yolov8` `[B, 4 + classes, anchors]`, `yolov5`
//! `[B, anchors, 5 + classes]`, `centernet` two heads (scores `[B, classes, h, w]`, distances
//! `[B, 4, h, w]`: [`centernet`]), whose peaks are found on the GPU where the model runs there. Boxes under `score` are left out; the rest go back to frame
//! pixels (undoing the letterbox or stretch and the tile's offset), are merged across tiles and
//! suppressed within a tile by one per-class NMS (a box is dropped when a better one of its class
//! overlaps it by more than `iou`, or, with `ios` below 1, covers more than `ios` of the smaller
//! of the two: a box that a tile border cut short lies inside the whole object's box),
//! at most `max-detections` per frame, rounded to whole pixels and clipped to the frame (boxes
//! under 2 px are counted as skipped, as annotation boxes are).
//!
//! **Classes.** Names come from `labels` (`coco` is COCO's 80) or `labels-file`; `classes` keeps
//! only the named classes (names or indices); `map=from:to,...` renames classes for the stages
//! after (the classifier's crops, the JSONL `detection.label`).
//!
//! The report gets the stage's row like any stage, and a line with the detector's own split per
//! frame (preprocessing, inference, decoding and merging) and its box counts.

mod blind;
pub mod centernet;
mod coco;
mod config;
mod decode;
mod detector;
mod gpu;
mod model;
mod section;
mod stage;
pub mod tiles;

use crate::onnx::OnnxError;
use crate::preprocess::PreprocessError;

pub use blind::BLIND_FRAMES;
pub use coco::COCO_LABELS;
pub use config::{DetectConfig, DetectProps, DEFAULT_BATCH_SIZES, DETECT};
pub use decode::{nms, Decoder, Output, ShapeError, Suppress};
pub use detector::{region_batch, regions_batch, Call, Detector};
pub use gpu::CENTERNET_KERNELS;
pub use section::DetectSection;
pub use tiles::{Fit, Rect};

/// A detector box before it goes back to frame pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RawBox {
    /// `[x1, y1, x2, y2]` (in the model input's pixels after decoding, frame pixels after mapping).
    pub b: [f32; 4],
    /// Score (class score, times objectness where the format has one).
    pub score: f32,
    /// Class index.
    pub class: u32,
}

/// Errors of the detect stage; each names the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// ONNX Runtime or the model file could not be loaded.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// The model is not usable as configured.
    #[error("detect: model {path}: {reason}")]
    Model {
        /// The model file.
        path: String,
        /// What does not fit.
        reason: String,
    },
    /// Preprocessing the tiles failed.
    #[error("detect: {0}")]
    Preprocess(#[from] PreprocessError),
    /// Inference failed.
    #[error("detect: model {path}: inference failed on stream {stream} frame {frame}{}: {source}", if *more > 0 { format!(" and {more} more frames run with it") } else { String::new() })]
    Run {
        /// The (first) frame's stream.
        path: String,
        /// The (first) frame's stream.
        stream: u32,
        /// The (first) frame's number.
        frame: u64,
        /// Frames run in the same call besides it.
        more: usize,
        /// Why the runs failed.
        source: Box<RunError>,
    },
    /// `tiles=` cuts a frame into more tiles than a frame may have
    /// ([`MAX_TILES`](crate::stage::limits::MAX_TILES)).
    #[error("detect: tiles={tw}x{th} cuts frame {frame} of stream {stream} ({w}x{h}) into {count} tiles; a frame may be cut into at most {max}: make the tiles larger")]
    Tiles {
        /// The frame's stream.
        stream: u32,
        /// The frame's number.
        frame: u64,
        /// Frame width.
        w: u32,
        /// Frame height.
        h: u32,
        /// Tile width.
        tw: u32,
        /// Tile height.
        th: u32,
        /// Tiles the grid would have.
        count: u64,
        /// The most a frame may have.
        max: u64,
    },
    /// The preprocess blocks of a call's tiles that the system refused memory for.
    #[error("detect: the preprocess blocks of {regions} tiles of frame {frame} of stream {stream} {error}")]
    OutOfMemory {
        /// The (first) frame's stream.
        stream: u32,
        /// The (first) frame's number.
        frame: u64,
        /// Tiles (regions) in the call.
        regions: usize,
        /// The bytes they needed.
        error: octopipe_core::alloc::AllocError,
    },
}

/// Why a detector call's model runs failed ([`DetectError::Run`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The sessions failed: a fixed batch size's run, or ordering after the tiles' stream.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// ONNX Runtime failed a run (or making its input, or reading its outputs).
    #[error("{0}")]
    Ort(#[from] ort::Error),
    /// Finding the peaks on the GPU failed.
    #[error("{0}")]
    Cuda(#[from] octopipe_cuda::CudaError),
    /// The tiles' tensor is of another element type than the model's input.
    #[error("tiles of the wrong element type for the model's {0:?} input")]
    TileType(crate::tensor::DType),
    /// The tiles' tensor in device memory is too short for the regions run.
    #[error("the tiles' tensor ({have} elements in device memory) does not hold regions {start}..{end} as the model's {input}input")]
    TileRange {
        /// Elements it holds.
        have: usize,
        /// First region.
        start: usize,
        /// One past the last region.
        end: usize,
        /// The input's element type as the message names it (`"f32 "`, or empty).
        input: &'static str,
    },
    /// An output does not hold one result per region.
    #[error("output '{name}' has shape {shape:?}: {images} images for a batch of {n}")]
    OutputShape {
        /// The output.
        name: String,
        /// Its shape.
        shape: Vec<usize>,
        /// The images it holds.
        images: usize,
        /// The regions run.
        n: usize,
    },
    /// The model's thread ended (it panicked) before the call's runs were done.
    #[error("the model's thread: {0}")]
    Thread(String),
    /// The call was started by another detector (one without a thread of its own).
    #[error("a call of another detector")]
    OtherDetector,
}

impl crate::error::Kind for DetectError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            DetectError::Onnx(e) => crate::error::Kind::kind(e),
            DetectError::Preprocess(e) => crate::error::Kind::kind(e),
            DetectError::Model { .. } | DetectError::Run { .. } => ErrorKind::Model,
            DetectError::Tiles { .. } => ErrorKind::Config,
            DetectError::OutOfMemory { .. } => ErrorKind::Busy,
        }
    }
}

crate::error::stage_error!(DetectError);

#[cfg(test)]
mod tests {
    use super::detector::pixel_box;
    use super::*;
    use crate::frame::SkipReason;
    use crate::tiles::Edge;

    #[test]
    fn an_object_across_a_tile_border_is_one_box() {
        // 640x640 tiles of a 1184x640 frame with overlap 0.15: the second starts at 544. A car at
        // x 600..700 is cut at 640 in the first tile and whole in the second.
        let tiles = crate::tiles::regular(1184, 640, 640, 640, 0.15, Edge::Shift);
        assert_eq!(tiles, [[0, 0, 640, 640], [544, 0, 640, 640]]);
        let input = (320, 320);
        // Each tile's model input is its 640x640 pixels halved.
        let cut = tiles::to_frame([300.0, 50.0, 320.0, 70.0], tiles[0], input, Fit::Stretch);
        let whole = tiles::to_frame([28.0, 50.0, 78.0, 70.0], tiles[1], input, Fit::Stretch);
        assert_eq!(cut, [600.0, 100.0, 640.0, 140.0]);
        assert_eq!(whole, [600.0, 100.0, 700.0, 140.0]);
        // Another car beside it, overlapping the whole one a little: kept either way.
        let beside = [690.0, 100.0, 790.0, 140.0];
        let boxes = vec![
            RawBox {
                b: cut,
                score: 0.8,
                class: 2,
            },
            RawBox {
                b: whole,
                score: 0.7,
                class: 2,
            },
            RawBox {
                b: beside,
                score: 0.6,
                class: 2,
            },
        ];
        let plain = Suppress { iou: 0.5, ios: 1.0 };
        let mut v = boxes.clone();
        nms(&mut v, plain, 100, |c| c);
        assert_eq!(v.len(), 3, "IoU 0.4: plain NMS keeps the cut box");
        let merging = Suppress {
            iou: 0.5,
            ios: 0.85,
        };
        let mut v = boxes;
        nms(&mut v, merging, 100, |c| c);
        let kept: Vec<[f32; 4]> = v.iter().map(|b| b.b).collect();
        assert_eq!(
            kept,
            [whole, beside],
            "the cut box, best scored, grows to the whole object"
        );
    }

    #[test]
    fn pixel_boxes_round_and_clip() {
        assert_eq!(
            pixel_box([10.4, 20.6, 30.5, 40.0], 100, 100),
            Ok([10, 21, 21, 19])
        );
        assert_eq!(
            pixel_box([-5.0, -5.0, 10.0, 10.0], 100, 100),
            Ok([0, 0, 10, 10])
        );
        assert_eq!(
            pixel_box([99.2, 0.0, 120.0, 10.0], 100, 100),
            Err(SkipReason::TooSmall)
        );
        assert_eq!(
            pixel_box([150.0, 0.0, 160.0, 10.0], 100, 100),
            Err(SkipReason::OutsideFrame)
        );
    }
}
